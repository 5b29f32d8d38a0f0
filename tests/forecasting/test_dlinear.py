"""DLinear: its decomposition against the paper's padded average pool, its kernel against its
forward pass, affine equivariance, and both methods through the one run front door."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch import nn

from qpriv.forecasting.artifacts import load_run
from qpriv.forecasting.dlinear import (
    DPSGD_SETTINGS,
    SETTINGS,
    DLinear,
    fit_dpsgd_dlinear,
    moving_average_matrix,
)
from qpriv.forecasting.linear import evaluate
from qpriv.forecasting.linear_dpsgd import DEFAULTS, fit_dpsgd_linear
from qpriv.forecasting.run import run_forecast
from qpriv.forecasting.windows import load_forecasting_data


def test_moving_average_is_the_papers_replicate_padded_pool() -> None:
    seq_len, size = 40, 25
    x = torch.randn(3, seq_len, 2, dtype=torch.float64)
    half = (size - 1) // 2  # the paper's series_decomp: repeat the ends, then AvgPool1d
    padded = torch.cat([x[:, :1].repeat(1, half, 1), x, x[:, -1:].repeat(1, half, 1)], dim=1)
    pooled = nn.AvgPool1d(size, stride=1)(padded.permute(0, 2, 1)).permute(0, 2, 1)
    ours = torch.einsum("kl,blc->bkc", torch.tensor(moving_average_matrix(seq_len, size)), x)
    torch.testing.assert_close(ours, pooled)


def test_the_kernel_is_the_forward_pass_and_affine_equivariant() -> None:
    torch.manual_seed(0)
    model = DLinear(seq_len=48, horizon=8)
    with torch.no_grad():
        model.seasonal.normal_(0, 0.1)
        model.trend.normal_(0, 0.1)
    x = torch.randn(5, 48, 3)
    forecaster = model.forecaster(name="t", details={})
    np.testing.assert_allclose(forecaster.predict(x.double().numpy()),
                               model(x).detach().double().numpy(), rtol=1e-4, atol=1e-5)
    scale, shift = np.array([2.0, 0.5, 3.0]), np.array([1.0, -4.0, 0.3])
    moved = forecaster.predict(x.double().numpy() * scale + shift)
    np.testing.assert_allclose(moved, forecaster.predict(x.double().numpy()) * scale + shift,
                               rtol=1e-9, atol=1e-9)


SMALL = {"max_train_windows": 512, "max_eval_windows": 32, "progress": False}


@pytest.mark.needs_ett
def test_dlinear_trains_without_noise_and_beats_its_start(tmp_path) -> None:
    out = tmp_path / "dlinear"
    result = run_forecast(method="dlinear", out_dir=out, **SMALL)
    assert not result.claims and result.privacy == "none"
    assert result.mse < 1.0
    # config.json records DLinear and its settings, not a feature design it does not use
    model = json.loads((out / "config.json").read_text())["model"]
    assert model["architecture"] == "DLinear" and "spec" not in model
    assert model["train"] == SETTINGS
    assert "spec" not in result.to_json()["model"]
    loaded = load_run(out)  # and the run loads back as its kernel
    kernel = loaded.model.kernel
    x = np.random.default_rng(0).normal(size=(2, kernel.shape[1], 3))
    np.testing.assert_allclose(loaded.model.predict(x), np.einsum("hl,blc->bhc", kernel, x),
                               rtol=1e-9, atol=1e-9)


@pytest.mark.needs_ett
def test_dpsgd_dlinear_states_a_window_claim() -> None:
    result = run_forecast(method="dpsgd-dlinear", eps=4.0, **SMALL)
    claim = result.claims["eps"]
    assert claim.unit == "window" and claim.value <= 4.0 * (1 + 1e-9)
    assert result.to_json()["fit"]["lr"] == DPSGD_SETTINGS["lr"]


def _mean_forecast_mse(data) -> float:
    """The test MSE of the look-back mean, the function DLinear starts from."""
    x = np.stack([data.test[i][0].numpy() for i in range(len(data.test))])
    y = np.stack([data.test[i][1].numpy() for i in range(len(data.test))])
    return float(((y - x.mean(axis=1, keepdims=True)) ** 2).mean())


@pytest.mark.needs_ett
def test_dpsgd_dlinear_does_not_diverge_under_record_noise() -> None:
    """At the record unit the noise on each of the 2 H L weights is large (sigma C / qN in the
    tens): with dpsgd-linear's learning rate the forecasts blow up; with DPSGD_SETTINGS they stay
    near the start (the look-back mean)."""
    data = load_forecasting_data("ETTh1", seq_len=336, horizon=24, max_train_windows=1024,
                                 max_eval_windows=256)
    start = _mean_forecast_mse(data)
    kept, claim = fit_dpsgd_dlinear(data, eps=1.0, unit="record", seed=0)
    assert claim.unit == "record" and kept.details["noise_multiplier"] > 100
    assert evaluate(kept, data.test)["mse"] < 1.5 * start
    model = DLinear(seq_len=336, horizon=24)
    blown, _ = fit_dpsgd_linear(data, eps=1.0, unit="record", seed=0, model=model,
                                settings=DEFAULTS)  # dpsgd-linear's lr 0.03
    assert evaluate(blown, data.test)["mse"] > 10 * start

