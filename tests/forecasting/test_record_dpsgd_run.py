"""DP-SGD forecasters at the record unit: the noise, the scaler and the claim of a run."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from qpriv.errors import ArgumentError
from qpriv.forecasting.record_dpsgd import SCALER_SHARE, RecordScaling, rescale
from qpriv.forecasting.run import run_forecast
from qpriv.forecasting.series import ZScoreScaler
from qpriv.forecasting.windows import load_forecasting_data
from qpriv.privacy.record_dpsgd import record_dpsgd_epsilon
from qpriv.privacy.samplers import SECURE_MODE, SEEDED, VETTED
from qpriv.training.dpsgd import DPSGDStrategy

SMALL = {"seq_len": 48, "horizon": 4, "epochs": 1, "max_train_windows": 128,
         "max_eval_windows": 24, "progress": False, "rigorous": False,
         "overrides": {"d_model": 8, "n_heads": 2, "d_ff": 16}}


def test_the_strategy_reports_a_record_claim_from_the_record_accountant() -> None:
    strategy = DPSGDStrategy(clip=1.0, noise_multiplier=3.0, sample_rate=0.05,
                             steps_per_epoch=4, delta=1e-5, seed=0, windows_per_record=12)
    strategy.steps = 8
    claim = strategy.report()["eps"]
    assert claim["unit"] == "record"
    assert claim["value"] == record_dpsgd_epsilon(noise_multiplier=3.0, sample_rate=0.05,
                                                  steps=8, windows_per_record=12, delta=1e-5)
    assert strategy.settings()["windows_per_record"] == 12
    window = DPSGDStrategy(clip=1.0, noise_multiplier=3.0, sample_rate=0.05,
                           steps_per_epoch=4, delta=1e-5, seed=0)
    assert "windows_per_record" not in window.settings()  # old checkpoints still resume


@pytest.mark.needs_ett
def test_a_record_run_calibrates_its_noise_and_states_a_record_claim(tmp_path) -> None:
    result = run_forecast(method="dpsgd", unit="record", eps=4.0, out_dir=tmp_path / "r",
                          **SMALL)
    claim = result.claims["eps"]
    assert claim.unit == "record" and claim.accounting == "rigorous"
    assert claim.details["eps_scaler"] == pytest.approx(SCALER_SHARE * 4.0)
    assert claim.value == pytest.approx(claim.details["eps_dpsgd"] + claim.details["eps_scaler"])
    assert 0.95 * 4.0 <= claim.value <= 4.0 * (1 + 1e-9)
    assert any("scaler is private" in note for note in claim.notes)
    record = result.to_json()
    assert record["inference"]["scaler_note"].startswith("the z-score scaler is private")
    assert record["strategy"]["steps"] == 2  # one epoch of 128 windows in batches of 64
    k = 48 + 4  # windows that hold one record
    assert claim.details["neighbourhood"].endswith(f"k = {k} training windows")
    window = run_forecast(method="dpsgd", eps=4.0, **SMALL)
    assert window.claims["eps"].unit == "window"
    # the record unit pays for the k windows a record is in
    assert result.noise_multiplier > 3 * window.noise_multiplier


@pytest.mark.needs_ett
def test_a_public_scaler_is_declared_and_spends_nothing() -> None:
    result = run_forecast(method="dpsgd", unit="record", eps=4.0, scaler="public", **SMALL)
    claim = result.claims["eps"]
    assert claim.details["eps_scaler"] == 0.0 and claim.value <= 4.0 * (1 + 1e-9)
    assert any("NOT covered" in note for note in claim.notes)


@pytest.mark.needs_ett
def test_a_secret_seed_record_run_draws_from_the_release_samplers() -> None:
    result = run_forecast(method="dpsgd", unit="record", eps=4.0, seed=None, **SMALL)
    claim = result.claims["eps"]
    assert result.seed is None
    assert claim.details["noise_sampler"] == SECURE_MODE  # DP-SGD's noise: ChaCha20
    assert any("scaler is private" in note
               and note.endswith(f"its draws come from the {VETTED} sampler")
               for note in claim.notes)  # the scaler's quantiles: OpenDP's vetted samplers
    seeded = run_forecast(method="dpsgd", unit="record", eps=4.0, **SMALL)
    assert any(note.endswith(f"its draws come from the {SEEDED} sampler")
               for note in seeded.claims["eps"].notes)


@pytest.mark.parametrize("kwargs, match", [
    ({"unit": "record", "clip_range": 2.0}, "clip_range"),
    ({"unit": "window", "scaler": "private"}, "scaler"),
    ({"unit": "record", "scaler": "mine"}, "scaler"),
    ({"unit": "record", "select": "fixed"}, "select"),
])
def test_bad_record_settings_fail_before_anything_is_written(tmp_path, kwargs, match) -> None:
    out = tmp_path / "run"
    with pytest.raises(ArgumentError, match=match):
        run_forecast(method="dpsgd", eps=1.0, out_dir=out, **kwargs, **SMALL)
    assert not out.exists()


@pytest.mark.needs_ett
def test_rescaled_training_windows_come_from_the_file_rows() -> None:
    data = load_forecasting_data("ETTh1", seq_len=48, horizon=4, max_train_windows=16,
                                 max_eval_windows=8)
    scaler = ZScoreScaler(mean=np.arange(7.0), std=np.full(7, 2.0))
    moved = rescale(data, scaler)
    x, _ = moved.train[3]
    start = int(data.train.starts[3])
    expected = (data.train_raw[start:start + 48] - np.arange(7.0)) / 2.0
    np.testing.assert_allclose(x.numpy(), expected, rtol=1e-6, atol=1e-5)
    assert len(moved.test) == len(data.test) and moved.scaler is scaler
    # validation and test rows: the same values in the new units
    back = data.scaler.inverse_transform(data.test[0][0].double().numpy())
    np.testing.assert_allclose(moved.test[0][0].numpy(), scaler.transform(back), rtol=1e-5,
                               atol=1e-4)


def test_test_metrics_are_reported_in_the_loader_units() -> None:
    run = ZScoreScaler(mean=np.zeros(2), std=np.array([2.0, 1.0]))
    loader = ZScoreScaler(mean=np.ones(2), std=np.array([1.0, 4.0]))
    scaling = RecordScaling(data=SimpleNamespace(scaler=run), eps_scaler=0.1, note="",
                            scaler="private", loader=loader)
    test = scaling.loader_units({"mse": 9.0, "mae": 9.0},
                                {"mse": [1.0, 16.0], "mae": [1.0, 4.0]})
    # channel errors times std_run / std_loader = (2, 1/4)
    assert test["mse"] == pytest.approx((4.0 + 1.0) / 2)
    assert test["mae"] == pytest.approx((2.0 + 1.0) / 2)
