"""The forecasting front door: validation before any write, files, result fields, resume."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from qpriv.errors import InvalidInputError
from qpriv.forecasting.records import ForecastResult
from qpriv.forecasting.rigorous import TARGETS_NOTE
from qpriv.forecasting.run import run_forecast
from qpriv.forecasting.run_claims import SCALER_NOTE
from qpriv.privacy.claims import PrivacyClaim

SMALL = {"seq_len": 48, "max_train_windows": 48, "max_eval_windows": 24, "progress": False,
         "rigorous": False,
         "overrides": {"d_model": 8, "n_heads": 2, "d_ff": 16, "dim": 4, "n_shots": 32}}


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"horizon": 0}, "horizon"), ({"eps": 0.0}, "eps"),
     ({"method": "classical", "eps": 0.1}, "adds no noise and takes no eps"),
     ({"method": "ldpt", "accounting": "rigorous", "eps": 1.0, "eps_total": 3.0},
      "accounting='rigorous' takes eps_total only"),
     ({"method": "dp-magic"}, "unknown method"), ({"epochs": 0}, "epochs"),
     ({"threads": 0}, "threads"),
     ({"method": "ldpt", "overrides": {"sigmaa": 1.0}}, "valid settings"),
     ({"max_train_windows": 0}, "max_train_windows")],
)
def test_bad_input_fails_before_anything_is_written(tmp_path, kwargs, match):
    out = tmp_path / "run"
    with pytest.raises(InvalidInputError, match=match):
        run_forecast(**{"out_dir": out, "progress": False, **kwargs})
    assert not out.exists()


def test_resume_needs_an_out_dir():
    with pytest.raises(InvalidInputError, match="out_dir"):
        run_forecast(resume=True, progress=False)


@pytest.mark.needs_ett
def test_ldpt_run_writes_a_labelled_result(tmp_path):
    out = tmp_path / "run"
    result = run_forecast(method="ldpt", eps=0.1, horizon=4, epochs=2, out_dir=out, **SMALL)
    assert {p.name for p in out.iterdir()} == {"config.json", "best.pt", "result.json"}
    assert isinstance(result, ForecastResult)
    stored = json.loads((out / "result.json").read_text())
    assert stored == json.loads(json.dumps(result.to_json()))
    for key in ("mse", "mae", "val_loss", "best_epoch", "epochs", "seconds_per_epoch", "p",
                "gamma", "sigma", "calibration"):
        assert getattr(result, key) is not None, key
    claim = result.claims["eps_per_pass"]
    assert isinstance(claim, PrivacyClaim) and claim == PrivacyClaim.from_json(
        stored["eps_per_pass"])
    assert (claim.value, claim.kind, claim.accounting, claim.unit, claim.delta) == (
        0.1, "local eps-QDP per pass", "paper", "token", None)
    assert claim.details == {"neighbourhood": "trace distance d = 0.1 (full norm)"}
    assert "not the trained weights" in claim.covers
    assert SCALER_NOTE in claim.notes and TARGETS_NOTE in claim.notes
    assert result.claims["eps_basic"].value == pytest.approx(0.2)
    assert result.claims["eps_advanced"].kind == "composed"
    assert result.params_total == (result.params["classical"]
                                   + result.params["quantum_attention"])
    # sigma is calibrated to the overridden d_model: p / sqrt(8)
    assert result.sigma == pytest.approx(result.p / 8**0.5)

    with pytest.raises(InvalidInputError, match="already holds a finished run"):
        run_forecast(method="ldpt", eps=0.1, horizon=4, epochs=2, out_dir=out, **SMALL)
    with pytest.raises(InvalidInputError, match="settings differ"):
        run_forecast(method="ldpt", eps=0.2, horizon=4, epochs=2, out_dir=out, resume=True,
                     **SMALL)
    again = run_forecast(method="ldpt", eps=0.1, horizon=4, epochs=2, out_dir=out, resume=True,
                         **SMALL)
    assert (again.mse, again.mae) == (result.mse, result.mae)
    assert again.claims == result.claims  # read back, the claims are the ones returned
    # the same checksum-verified file found by another path is the same data
    config = json.loads((out / "config.json").read_text())
    config["source"] = "elsewhere/ETTh1.csv"
    (out / "config.json").write_text(json.dumps(config))
    moved = run_forecast(method="ldpt", eps=0.1, horizon=4, epochs=2, out_dir=out, resume=True,
                         **SMALL)
    assert moved.mse == result.mse


@pytest.mark.needs_ett
def test_classical_run_claims_no_privacy():
    result = run_forecast(method="classical", eps=None, horizon=4, epochs=1, **SMALL)
    assert result.claims == {} and result.privacy == "none"
    assert result.mse > 0 and result.best_epoch == 1


def poison_the_first_step(monkeypatch) -> None:
    """Every weight becomes NaN after the first training step: the run diverges in epoch 1."""
    from qpriv.training.trainer import StepStrategy

    real_step = StepStrategy.step

    def poisoned(self, model, x, y, **kwargs):
        loss = real_step(self, model, x, y, **kwargs)
        for p in model.parameters():
            p.data.fill_(float("nan"))
        return loss

    monkeypatch.setattr(StepStrategy, "step", poisoned)


@pytest.mark.needs_ett
def test_a_run_that_diverges_reports_no_test_number_and_no_model(tmp_path, monkeypatch, capsys):
    from qpriv.cli import main
    from qpriv.forecasting.artifacts import load_run

    poison_the_first_step(monkeypatch)
    out = tmp_path / "run"
    result = run_forecast(method="classical", horizon=4, epochs=3, out_dir=out, **SMALL)
    assert result.diverged_epoch == 1 and result.best_epoch == 0
    assert result.mse is None and result.mae is None
    assert len(result.history) == 1
    stored = json.loads((out / "result.json").read_text())
    assert stored["diverged_epoch"] == 1 and stored["mse"] is None
    assert stored["val_loss"] is None  # inf is not JSON: null
    with pytest.raises(InvalidInputError, match="diverged at epoch 1"):
        load_run(out)

    assert main(["train", "--method", "classical", "--horizon", "4", "--epochs", "2",
                 "--max-train-windows", "16", "--max-eval-windows", "8", "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "no test MSE" in printed and "DIVERGED at epoch 1" in printed


@pytest.mark.needs_ett
def test_a_csv_run_is_bound_to_the_bytes_it_trained_on(tmp_path):
    from qpriv.forecasting.artifacts import load_run

    rows = (Path(os.environ["QPRIV_DATA_DIR"]) / "ETTh1.csv").read_text().splitlines()[:801]
    csv = tmp_path / "meters.csv"
    csv.write_text("\n".join(rows) + "\n")
    out = tmp_path / "run"
    settings = {"csv": csv, "method": "classical", "eps": None, "horizon": 4, "epochs": 1,
                "out_dir": out, **SMALL}
    run_forecast(**settings)
    assert json.loads((out / "config.json").read_text())["source_sha256"] == hashlib.sha256(
        csv.read_bytes()).hexdigest()
    assert load_run(out).data().n_channels == 7
    # one changed cell: the same path is no longer the same data
    csv.write_text("\n".join([*rows[:-1], rows[-1].replace(",", ",1", 1)]) + "\n")
    with pytest.raises(InvalidInputError, match="is not the file the run trained on"):
        load_run(out).data()
    with pytest.raises(InvalidInputError, match=r"settings differ in \['source_sha256'\]"):
        run_forecast(**settings, resume=True)


@pytest.mark.needs_ett
def test_a_checkpoint_without_its_config_is_not_resumed(tmp_path):
    out = tmp_path / "run"
    run_forecast(method="classical", eps=None, horizon=4, epochs=1, out_dir=out,
                 keep_checkpoints=True, **SMALL)
    assert (out / "checkpoint.pt").is_file()  # kept on request
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(out / "checkpoint.pt", bare / "checkpoint.pt")
    with pytest.raises(InvalidInputError, match=r"holds a checkpoint but no config\.json"):
        run_forecast(method="classical", eps=None, horizon=8, epochs=2, out_dir=bare,
                     resume=True, **SMALL)
    assert sorted(p.name for p in bare.iterdir()) == ["checkpoint.pt"]


@pytest.mark.needs_ett
def test_train_takes_a_batch_size(capsys):
    from qpriv.cli import main

    argv = ["train", "--method", "dpsgd", "--eps", "8", "--epochs", "1", "--seq-len", "48",
            "--max-train-windows", "32", "--max-eval-windows", "16", "--quiet", "--json"]
    assert main(argv) == 2  # the default batch of 64 exceeds 32 windows: the fix is named
    assert "use a batch size of at most N (`qpriv train --batch`)" in capsys.readouterr().err
    assert main([*argv, "--batch", "16"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["train"]["batch_size"] == 16
    assert result["strategy"]["sample_rate"] == pytest.approx(16 / 32)
