"""The estimators (issue 40, item 1): scikit-learn's contract, and the same numbers as the
command line: fit + save + load + predict equals `qpriv train` + `qpriv forecast`."""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pytest

import qpriv
from qpriv.cli import main
from qpriv.errors import InvalidInputError
from qpriv.forecasting.estimators import (
    DPLinearForecaster,
    PublicForecaster,
    RidgeForecaster,
    TransformerForecaster,
    _recorded_settings,
    load,
)
from qpriv.forecasting.methods import budget_arguments
from qpriv.privacy.budget import PrivacyTarget, Spend


@pytest.fixture(scope="module")
def series(tmp_path_factory):
    """A daily two-channel series with a weekly cycle: (its CSV, the frame)."""
    folder = tmp_path_factory.mktemp("series")
    days = pd.date_range("2019-01-01", periods=900, freq="D", name="date")
    rng = np.random.default_rng(11)
    frame = pd.DataFrame({"a": np.sin(2 * np.pi * np.arange(900) / 7) + rng.normal(0, .3, 900),
                          "b": rng.normal(0, 1, 900).cumsum() / 10}, index=days)
    frame.to_csv(folder / "series.csv")
    return folder / "series.csv", frame


@pytest.mark.parametrize(("estimator", "flags"), [
    (DPLinearForecaster(eps=1.0, seq_len=96, horizon=7),
     ["--method", "dp-linear", "--eps", "1"]),
    (PublicForecaster(seq_len=96, horizon=7), ["--method", "public"]),
    (RidgeForecaster(seq_len=96, horizon=7), ["--method", "ridge"]),
])
def test_fit_save_load_predict_is_train_then_forecast(series, tmp_path, capsys, estimator,
                                                      flags):
    csv, _ = series
    saved = estimator.fit(csv).save(tmp_path / "saved")
    again = load(saved)
    assert type(again) is type(estimator) and again.get_params() == estimator.get_params()
    predicted = again.predict()
    assert main(["train", "--csv", str(csv), *flags, "--seq-len", "96", "--horizon", "7",
                 "--out", str(tmp_path / "cli"), "--quiet"]) == 0
    assert main(["forecast", str(tmp_path / "cli"), "--csv", str(csv), "--out",
                 str(tmp_path / "f.csv")]) == 0
    capsys.readouterr()
    cli = pd.read_csv(tmp_path / "f.csv", index_col=0, parse_dates=True)
    np.testing.assert_allclose(predicted.to_numpy(), cli.to_numpy(), rtol=1e-9, atol=1e-12)
    assert list(predicted.index) == list(cli.index)
    assert estimator.mse_ == json.loads((tmp_path / "cli" / "result.json").read_text())["mse"]


def test_the_contract_fitted_attributes_and_typed_claims(series):
    csv, frame = series
    model = DPLinearForecaster(eps=0.5, seq_len=96, horizon=7)
    assert model.get_params()["eps"] == 0.5 and model.set_params(eps=2.0) is model
    with pytest.raises(InvalidInputError, match=r"has no setting \['epochs'\]"):
        model.set_params(epochs=3)
    with pytest.raises(InvalidInputError, match="is not fitted yet: call fit"):
        model.predict()
    assert model.fit(frame) is model  # a DataFrame fits as its CSV does
    assert model.claims_ and all(isinstance(c, qpriv.PrivacyClaim) for c in model.claims_)
    assert model.claims_[0].value == 2.0 and model.claims_[0].unit.value == "record"
    assert model.predict().equals(model.forecast(frame))
    from_file = DPLinearForecaster(eps=2.0, seq_len=96, horizon=7).fit(csv)
    assert model.mse_ == from_file.mse_
    with pytest.raises(InvalidInputError, match="exists; save into a new folder"):
        model.save(csv.parent)


def test_the_backbone_estimator_takes_only_backbone_methods():
    with pytest.raises(InvalidInputError, match=r"'dp-linear' is not a method of the LDPT "
                                                r"backbone.*DPLinearForecaster"):
        TransformerForecaster(method="dp-linear")
    assert TransformerForecaster(method="classical").method == "classical"


@pytest.mark.skipif(not os.environ.get("QPRIV_DATA_DIR"), reason="needs QPRIV_DATA_DIR (ETT)")
def test_a_trained_backbone_round_trips(tmp_path):
    model = TransformerForecaster(method="classical", seq_len=64, epochs=1,
                                  max_train_windows=32, max_eval_windows=16,
                                  overrides={"d_model": 16, "n_heads": 2, "d_ff": 32})
    model.fit("ETTh1")
    again = load(model.save(tmp_path / "run"))
    assert type(again) is TransformerForecaster and again.method == "classical"
    assert again.get_params()["epochs"] == 1
    pd.testing.assert_frame_equal(again.predict(), model.predict())


TINY_LDPT = {"eps": 0.5, "seq_len": 48, "horizon": 7, "epochs": 1, "max_train_windows": 32,
             "max_eval_windows": 16, "threads": 1}
"""An LDPT run of seconds on the series: one epoch, 32 windows, the paper's model."""


def test_a_noisy_round_trip_is_train_then_forecast_within_the_stated_noise(
        series, tmp_path, capsys, private_cache):
    """LDPT draws shots at inference: at the forecast's default seed the estimator and the
    command line draw the same noise (equal to 1e-9); at different seeds their means differ by
    no more than the spread each forecast states (``<channel>_std`` over its passes) allows."""
    csv, _ = series
    model = TransformerForecaster(method="ldpt", **TINY_LDPT).fit(csv)
    again = load(model.save(tmp_path / "saved"))
    assert type(again) is TransformerForecaster and again.method == "ldpt"
    assert again.get_params()["eps"] == 0.5 and again.get_params()["epochs"] == 1
    flags = [f"--{key.replace('_', '-')}={value}" for key, value in TINY_LDPT.items()]
    assert main(["train", "--csv", str(csv), "--method", "ldpt", *flags, "--out",
                 str(tmp_path / "cli"), "--quiet"]) == 0
    forecast = ["forecast", str(tmp_path / "cli"), "--csv", str(csv)]
    assert main([*forecast, "--out", str(tmp_path / "f.csv")]) == 0
    cli = pd.read_csv(tmp_path / "f.csv", index_col=0, parse_dates=True)
    predicted = again.predict()
    assert list(predicted.columns) == ["a", "b", "a_std", "b_std"] == list(cli.columns)
    np.testing.assert_allclose(predicted.to_numpy(), cli.to_numpy(), rtol=1e-9, atol=1e-12)
    assert (predicted[["a_std", "b_std"]].to_numpy() > 0).all()  # the forecast is noisy
    assert model.mse_ == json.loads((tmp_path / "cli" / "result.json").read_text())["mse"]
    assert model.claims_ == load(tmp_path / "cli").claims_  # the same typed claims
    # fresh noise on each side: the means of P passes differ by the stated spread / sqrt(P)
    passes = 100
    assert main([*forecast, "--seed", "1", "--passes", str(passes), "--out",
                 str(tmp_path / "g.csv")]) == 0
    capsys.readouterr()
    cli = pd.read_csv(tmp_path / "g.csv", index_col=0, parse_dates=True)
    ours = again.predict(passes=passes, seed=2)
    assert not np.allclose(ours[["a", "b"]].to_numpy(), cli[["a", "b"]].to_numpy())
    for channel in ("a", "b"):
        spread = np.hypot(ours[f"{channel}_std"], cli[f"{channel}_std"]) / np.sqrt(passes)
        assert (np.abs(ours[channel] - cli[channel]) <= 5 * spread).all(), channel


def test_a_loaded_backbone_estimator_refits_to_the_same_run(series, tmp_path):
    """config.json records the feature path's default delta for every backbone run and the
    batch inside the training settings: read back as settings, DP-SGD's loaded estimator was
    refused on its next fit (a delta it does not take) and lost its batch."""
    csv, _ = series
    settings = {"method": "dpsgd", "eps": 8.0, "seq_len": 48, "horizon": 7, "epochs": 1,
                "batch_size": 16, "max_train_windows": 32, "max_eval_windows": 16}
    model = TransformerForecaster(**settings, threads=1).fit(csv)
    again = load(model.save(tmp_path / "saved"))
    # threads are not a setting of the run: config.json records none
    assert again.get_params() == {**model.get_params(), "threads": None}
    assert again.fit(csv).mse_ == model.mse_
    assert again.claims_ == model.claims_


def test_a_typed_budget_is_the_same_run_as_its_eps(series):
    """Issue 40, item 2: PrivacyTarget(eps, Spend.RELEASE, unit=...) fits exactly the model
    eps=..., unit=... fits; the claim carries the budget's eps and unit."""
    csv, _ = series
    typed = DPLinearForecaster(seq_len=96, horizon=7, budget=PrivacyTarget(
        2.0, Spend.RELEASE, delta=1e-7, unit="window")).fit(csv)
    bare = DPLinearForecaster(eps=2.0, delta=1e-7, unit="window", seq_len=96, horizon=7).fit(csv)
    pd.testing.assert_frame_equal(typed.predict(), bare.predict())
    claim = typed.claims_[0]
    assert (claim.value, claim.unit.value, claim.delta) == (2.0, "window", 1e-7)


@pytest.mark.parametrize(("method", "budget", "arguments"), [
    ("dp-linear", PrivacyTarget(1.0, Spend.RELEASE), {"eps": 1.0, "accounting": "paper"}),
    ("dpsgd", PrivacyTarget(3.0, Spend.RELEASE, delta=1e-6),
     {"eps": 3.0, "accounting": "paper", "delta": 1e-6}),
    ("ldpt", PrivacyTarget(0.2, Spend.PER_PASS), {"eps": 0.2, "accounting": "paper"}),
    ("ldpt", PrivacyTarget(2.0, Spend.OVER_TRAINING, delta=1e-5),
     {"eps_total": 2.0, "accounting": "rigorous", "delta": 1e-5}),
])
def test_a_budget_becomes_the_arguments_that_spend_it(method, budget, arguments):
    assert budget_arguments(method, budget) == arguments


@pytest.mark.parametrize(("method", "budget", "words"), [
    ("dp-linear", PrivacyTarget(0.1, Spend.PER_PASS), "does not spend its eps per pass"),
    ("ldpt", PrivacyTarget(1.0, Spend.RELEASE), "does not spend its eps release"),
    ("classical", PrivacyTarget(1.0, Spend.PER_PASS), "it adds no noise"),
    ("dp-linear", 1.0, "is not a PrivacyTarget"),
])
def test_a_budget_spent_on_something_else_is_refused(method, budget, words):
    with pytest.raises(InvalidInputError, match=words):
        budget_arguments(method, budget)


def test_a_budget_and_an_eps_together_are_refused_before_any_fit(series, tmp_path):
    csv, _ = series
    model = DPLinearForecaster(eps=2.0, budget=PrivacyTarget(1.0, Spend.RELEASE))
    with pytest.raises(InvalidInputError, match=r"leave \['eps'\] at their defaults"):
        model.fit(csv, out_dir=tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_a_rigorous_run_loads_back_as_its_budget_over_training():
    """A rigorous run records its eps_total as eps beside accounting='rigorous': loaded back,
    that is the typed budget over the whole training, not a per-pass eps the refit refuses."""
    request = {"model": {"family": "backbone"}, "accounting": "rigorous", "eps": 2.0,
               "delta": 1e-5, "train": {"batch_size": 32}, "horizon": 24}
    settings = _recorded_settings(request, TransformerForecaster().get_params())
    assert settings == {"budget": PrivacyTarget(2.0, Spend.OVER_TRAINING, delta=1e-5),
                        "batch_size": 32, "horizon": 24}
    refit = TransformerForecaster(**settings)._run_settings()
    assert (refit["eps_total"], refit["accounting"], refit["delta"]) == (2.0, "rigorous", 1e-5)
    assert "eps" not in refit
