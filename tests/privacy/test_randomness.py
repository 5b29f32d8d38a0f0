"""Where a mechanism's randomness comes from: a recorded seed lets anyone replay the release,
and every claim says so; a secret seed is drawn from the operating system, used for every
stream and written nowhere."""

from __future__ import annotations

import json

import numpy as np
import pytest

from qpriv.classification.run import train_classifier
from qpriv.cli import main
from qpriv.forecasting.records import ForecastResult
from qpriv.forecasting.run import run_forecast
from qpriv.privacy.randomness import SECRET_NOTE, SEEDED_NOTE, randomness_note, secret_seed
from qpriv.privacy.samplers import SECURE_MODE, TORCH_SEEDED
from qpriv.training.trainer import DIVERGENCE_NOTE

TINY = {"seq_len": 48, "max_train_windows": 64, "max_eval_windows": 32, "progress": False,
        "threads": 1}
TINY_MODEL = {"d_model": 16, "n_heads": 2, "d_ff": 32}


def test_secret_seeds_differ_and_the_notes_say_which_kind_of_run():
    assert len({secret_seed() for _ in range(20)}) == 20
    assert randomness_note(secret=True) == SECRET_NOTE
    assert "replayed" in SEEDED_NOTE and "--secret-seed" in SEEDED_NOTE


def notes_of(result: ForecastResult) -> list[str]:
    return [note for claim in result.claims.values() for note in claim.notes]


@pytest.mark.needs_ett
def test_a_seeded_dp_linear_release_is_replayed_exactly_and_says_so(tmp_path):
    """What the note warns of: the same data and the recorded seed give the released kernel to
    the last bit, so whoever knows the seed can test a neighbouring training set against it.
    With a secret seed two runs differ, and nothing written names the seed."""
    runs = {}
    for name, seed in (("a", 7), ("b", 7), ("c", None), ("d", None)):
        runs[name] = run_forecast(method="dp-linear", unit="record", eps=1.0, seed=seed,
                                  out_dir=tmp_path / name, **{**TINY, "seq_len": 168})
    kernels = {name: np.load(tmp_path / name / "linear.npz")["kernel"] for name in runs}
    np.testing.assert_array_equal(kernels["a"], kernels["b"])
    assert not np.array_equal(kernels["c"], kernels["d"])
    assert SEEDED_NOTE in notes_of(runs["a"]) and SECRET_NOTE not in notes_of(runs["a"])
    assert SECRET_NOTE in notes_of(runs["c"]) and SEEDED_NOTE not in notes_of(runs["c"])
    for name in ("c", "d"):
        assert runs[name].seed is None
        assert json.loads((tmp_path / name / "config.json").read_text())["seed"] is None


@pytest.mark.needs_ett
def test_a_secret_dpsgd_run_records_no_seed_anywhere_and_resumes(tmp_path):
    out = tmp_path / "run"
    result = run_forecast(method="dpsgd", eps=1.0, seed=None, epochs=1, out_dir=out,
                          rigorous=False, overrides=TINY_MODEL, **TINY)
    assert result.seed is None and result.to_json()["train"]["seed"] is None
    config = json.loads((out / "config.json").read_text())
    assert config["seed"] is None and config["train"]["seed"] is None
    assert SECRET_NOTE in result.claims["eps"].notes
    assert result.claims["eps"].details["noise_sampler"] == SECURE_MODE  # cryptographic too
    again = run_forecast(method="dpsgd", eps=1.0, seed=None, epochs=1, out_dir=out,
                         resume=True, rigorous=False, overrides=TINY_MODEL, **TINY)
    assert again.mse == result.mse  # the finished run, read back
    seeded = run_forecast(method="dpsgd", eps=1.0, seed=5, epochs=1, rigorous=False,
                          overrides=TINY_MODEL, **TINY)
    assert seeded.seed == 5 and SEEDED_NOTE in seeded.claims["eps"].notes
    assert seeded.claims["eps"].details["noise_sampler"] == TORCH_SEEDED


def test_a_secret_classifier_run_records_no_seed_and_says_so():
    kwargs = {"task": "synthetic", "model": "mlp", "clip": 1.0, "batch": 128, "epochs": 1,
              "lr": 0.05, "eps": 10.0, "threads": 1}
    secret = train_classifier(seed=None, **kwargs)
    seeded = train_classifier(seed=3, **kwargs)
    assert secret.request["seed"] is None and seeded.request["seed"] == 3
    assert SECRET_NOTE in secret.claim.notes and SEEDED_NOTE in seeded.claim.notes
    assert secret.claim.details["noise_sampler"] == SECURE_MODE
    assert seeded.claim.details["noise_sampler"] == TORCH_SEEDED
    assert DIVERGENCE_NOTE in seeded.claim.notes  # its stop reads the training loss


@pytest.mark.parametrize("command", [["train", "--method", "dp-linear"],
                                     ["train-classifier", "--task", "synthetic"]])
def test_seed_and_secret_seed_together_are_one_line_and_exit_2(command, capsys):
    assert main([*command, "--seed", "3", "--secret-seed"]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "argument --secret-seed: not allowed with argument --seed" in line
