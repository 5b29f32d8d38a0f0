"""DLinear: its decomposition against the paper's padded average pool, its kernel against its
forward pass, affine equivariance, and both methods through the one run front door."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
from torch import nn

from qpriv.forecasting.dlinear import DLinear, moving_average_matrix
from qpriv.forecasting.run import run_forecast

needs_ett = pytest.mark.skipif(
    not os.environ.get("QPRIV_DATA_DIR"), reason="QPRIV_DATA_DIR (the ETT csv files) not set"
)


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


@needs_ett
def test_dlinear_trains_without_noise_and_beats_its_start() -> None:
    result = run_forecast(method="dlinear", **SMALL)
    assert result.get("claims") in ([], None) or not result["claims"]
    assert result["mse"] < 1.0


@needs_ett
def test_dpsgd_dlinear_states_a_window_claim() -> None:
    result = run_forecast(method="dpsgd-dlinear", eps=4.0, **SMALL)
    claim = result["claims"][0]
    assert claim["unit"] == "window" and claim["value"] <= 4.0 * (1 + 1e-9)
