"""Run directories written by qpriv 0.1.0 before the layered restructure still load.

``tests/fixtures/pre_refactor/legacy_runs.tar.gz`` holds runs that version wrote
(``make_legacy_runs.py`` beside it): finished LDPT and DP-SGD forecasters, a forecaster and a
classifier killed after their first epoch, and what each gave then (``expected.json``): the
uninterrupted twin's numbers for the killed runs, and the outputs of ``qpriv audit run`` and
``qpriv attack mia``. Resuming the killed runs with this version must give those numbers.

Numbers that depend on LDPT's shots were re-recorded after the exact shot sampler changed (the
same multinomial law from another stream of random numbers): ``resampled.json``, written by
``resample.py`` beside the archive. They are compared exactly with it, and with the old numbers
within the evaluation noise.
"""

from __future__ import annotations

import json
import os
import tarfile
from pathlib import Path

import numpy as np
import pytest
import torch

from qpriv.classification.run import train_classifier
from qpriv.cli import main
from qpriv.forecasting.artifacts import load_run
from qpriv.forecasting.csv_input import load_frame
from qpriv.forecasting.run import run_forecast
from qpriv.training.evaluation import evaluate
from qpriv.training.seeding import derive_seed

from .test_same_numbers import FLOAT32, assert_same_numbers, last_json

ARCHIVE = Path(__file__).parent.parent / "fixtures" / "pre_refactor" / "legacy_runs.tar.gz"
RESAMPLED = json.loads((ARCHIVE.parent / "resampled.json").read_text())
TINY = {"dataset": "ETTh1", "method": "ldpt", "epochs": 2, "horizon": 24, "seq_len": 64,
        "max_train_windows": 64, "max_eval_windows": 32, "progress": False, "threads": 1,
        "rigorous": False, "overrides": {"d_model": 16, "n_heads": 2, "d_ff": 32, "n_shots": 64}}
CLASSIFIER = {"task": "synthetic", "model": "quantum", "clip": 1.5, "batch": 64, "eps": 10.0,
              "epochs": 3, "seed": 4, "lr": 0.1, "unclipped_reference": True,
              "progress": False, "threads": 1}


@pytest.fixture
def legacy(tmp_path) -> Path:
    with tarfile.open(ARCHIVE) as archive:
        archive.extractall(tmp_path, filter="data")
    return tmp_path


@pytest.fixture
def expected(legacy) -> dict:
    return json.loads((legacy / "expected.json").read_text())


needs_data = pytest.mark.skipif(not os.environ.get("QPRIV_DATA_DIR"),
                                reason="QPRIV_DATA_DIR (the ETT csv files) not set")


@needs_data
def test_a_killed_legacy_forecaster_resumes_to_its_uninterrupted_result(legacy, expected):
    result = run_forecast(eps=0.1, out_dir=legacy / "ldpt-unfinished", resume=True,
                          **{**TINY, "seed": 7})
    assert result.best_epoch == 2
    for key in ("mse", "mae"):
        # float32 training: the same to the last bit on one CPU, to FLOAT32 across kinds of
        # CPU (its epoch 1 ran where the archive was made; 1.4e-7 relative on a Sapphire Rapids)
        assert getattr(result, key) == pytest.approx(RESAMPLED["ldpt-unfinished"][key],
                                                     rel=FLOAT32["rel"])
        assert getattr(result, key) == pytest.approx(expected["ldpt-unfinished"][key],
                                                     rel=0.05)


def test_a_killed_legacy_classifier_resumes_to_its_uninterrupted_result(legacy, expected):
    result = train_classifier(**CLASSIFIER, out_dir=legacy / "classifier-unfinished",
                              resume=True)
    assert len(result.history) == 3
    assert result.accuracy == pytest.approx(expected["classifier-unfinished"]["accuracy"])


def test_a_finished_legacy_classifier_is_read_back(legacy, expected):
    result = train_classifier(**{**CLASSIFIER, "seed": 3},
                              out_dir=legacy / "classifier-quantum", resume=True)
    assert result.accuracy == expected["classifier-quantum"]["accuracy"]


@needs_data
@pytest.mark.parametrize("name", ["ldpt-eps0.1", "ldpt-eps0.5", "dpsgd-eps1"])
def test_finished_legacy_forecasters_load_and_score_as_recorded(legacy, expected, name):
    run = load_run(legacy / name)
    assert run.result.mse == pytest.approx(expected[name]["mse"], rel=1e-12)
    metrics = evaluate(run.model, run.data().test, seed=derive_seed(2024, "evaluation"),
                       passes=1, batch_size=256, amp=False)
    if name in RESAMPLED:  # an LDPT run's test passes draw shots
        assert metrics["mse"] == pytest.approx(RESAMPLED[name]["mse"], rel=1e-6)
    assert metrics["mse"] == pytest.approx(expected[name]["mse"],
                                           rel=0.02 if name in RESAMPLED else 1e-6)


@needs_data
@pytest.mark.parametrize(("name", "argv"), [
    ("audit-run", ["audit", "run", "ldpt-eps0.1", "--windows", "32", "--pairs", "100"]),
    ("mia", ["attack", "mia", "ldpt-eps0.1", "--n", "32"]),
])
def test_audit_and_attack_of_a_legacy_run_give_the_recorded_numbers(
        legacy, expected, name, argv, capsys, monkeypatch):
    monkeypatch.chdir(legacy)
    assert main([*argv, "--json"]) == 0
    new = last_json(capsys)
    # recorded on two torch threads, checked on one (and maybe another CPU): float32 sums in
    # another order
    assert_same_numbers(RESAMPLED[name], new, **FLOAT32)
    if name == "audit-run":  # every audit but Table 3's MSE ladder draws no shots
        old = {**expected[name], "audits": [a for a in expected[name]["audits"]
                                            if a["number"] != 5]}
        assert_same_numbers(old, {**new, "audits": [a for a in new["audits"]
                                                    if a["number"] != 5]}, **FLOAT32)


@needs_data
def test_a_legacy_forecaster_forecasts_with_the_scaler_recomputed_from_its_data(legacy):
    run = load_run(legacy / "dpsgd-eps1")
    assert "inference" not in run.result.raw  # written before runs stored it
    data = run.data()
    assert np.array_equal(run.inference.scaler.mean, data.scaler.mean)
    assert np.array_equal(run.inference.scaler.std, data.scaler.std)
    assert run.inference.freq == "h" and run.inference.channels == data.channels
    frame = run.forecast(data.source)
    window = torch.tensor(data.scaler.transform(load_frame(data.source).to_numpy()[-64:]),
                          dtype=torch.float32)[None]
    with torch.no_grad():
        expected = data.scaler.inverse_transform(run.model(window)[0].double().numpy())
    np.testing.assert_allclose(frame.to_numpy(), expected, rtol=1e-6)
    assert frame.attrs["new_data"] is False and frame.attrs["claims"][0]["unit"] == "window"
