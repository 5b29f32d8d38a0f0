"""The one-run games on ``dpsgd-linear`` (Dirac canary windows), ``dpsgd`` (horizon-spike
windows through the transformer) and the clipless model stay below a correct claim, and planted
bugs (clipping skipped, the noise multiplier ignored) push them above it; the canary windows'
gradients point where they are built to."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import qpriv.classification.dpsgd as classifier_dpsgd
import qpriv.training.dpsgd as training_dpsgd
from qpriv.audits.privacy import CLIPLESS_GAME, run_settings
from qpriv.audits.privacy_dpsgd import audit_dpsgd_one_run
from qpriv.audits.privacy_dpsgd_forecast import (
    AUDIT_ROWS,
    TINY_MODEL,
    audit_dpsgd_forecast_one_run,
    spike_windows,
)
from qpriv.audits.privacy_dpsgd_forecast import AUDIT_SHAPE as SPIKE_SHAPE
from qpriv.audits.privacy_dpsgd_linear import (
    AUDIT_SHAPE,
    FEATURE_SIZE,
    TARGET_SIZE,
    audit_dpsgd_linear_one_run,
    dirac_windows,
    quiet_dataset,
    released_weights,
)
from qpriv.audits.privacy_linear import audit_dataset
from qpriv.cli import main
from qpriv.forecasting.config import ModelConfig
from qpriv.forecasting.linear_dpsgd import DEFAULTS, TrainableLinear
from qpriv.forecasting.methods import setup_method
from qpriv.forecasting.model import LDPTForecaster
from qpriv.forecasting.recipe import mse
from qpriv.forecasting.run import run_forecast
from qpriv.forecasting.windows import load_forecasting_data
from qpriv.privacy.claims import LOWER_BOUND, Unit


@pytest.fixture(scope="module")
def data():
    """A shorter quiet series (999 training windows: q = 0.51, 20 steps)."""
    return load_forecasting_data(csv=quiet_dataset(rows=1700), **AUDIT_SHAPE)


def _skip_clipping(monkeypatch):
    monkeypatch.setattr(training_dpsgd, "clip_factors",
                        lambda norms, clip: torch.ones_like(norms))


def test_each_canary_windows_gradient_is_its_dirac_direction(data):
    """Wherever W is, canary (j, l, s)'s gradient is (2 / H) a (s b e_l + a W_j) along row j:
    within a / b ||W_j|| of s e_j e_l^T, and far above the clip."""
    coordinates = np.array([[0, 0], [3, 1], [6, 0]])
    signs = np.array([1.0, -1.0, 1.0])
    x, y = dirac_windows(data, coordinates=coordinates, signs=signs)
    model = TrainableLinear(seq_len=data.seq_len, horizon=data.horizon)
    with torch.no_grad():
        model.weight.copy_(torch.randn(model.weight.shape, generator=torch.Generator()
                                       .manual_seed(0)))
    grads, _ = training_dpsgd.per_example_gradients(model, x, y, loss_fn=mse)
    grads = grads.reshape(3, *model.weight.shape).double()
    weight = model.weight.detach().double()
    for i, ((j, col), s) in enumerate(zip(coordinates, signs, strict=True)):
        expected = torch.zeros_like(weight)
        expected[j] = 2.0 / data.horizon * FEATURE_SIZE * FEATURE_SIZE * weight[j]
        expected[j, col] += 2.0 / data.horizon * FEATURE_SIZE * TARGET_SIZE * s
        torch.testing.assert_close(grads[i], expected, rtol=1e-3, atol=1e-2)
        assert grads[i].norm() > 100 * DEFAULTS["clip"]


def test_the_weights_are_read_back_from_the_released_kernel(data):
    model = TrainableLinear(seq_len=data.seq_len, horizon=data.horizon)
    weight = torch.randn(model.weight.shape, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        model.weight.copy_(weight)
    kernel = model.forecaster(name="w", details={}).kernel
    np.testing.assert_allclose(released_weights(kernel, seq_len=data.seq_len,
                                                horizon=data.horizon), weight.numpy(),
                               atol=1e-5)


def test_the_dpsgd_linear_game_stays_below_a_correct_claim(data):
    audit = audit_dpsgd_linear_one_run(eps=1.0, seed=0, data=data)
    assert audit.claim.unit == Unit.WINDOW and audit.lower_bound.unit == Unit.WINDOW
    assert audit.lower_bound.details["bound"] == LOWER_BOUND
    assert 0.98 < audit.claim.value <= 1.0 and audit.steps == 20
    assert audit.canaries == 14 and audit.guesses == 14
    assert audit.lower_bound.value <= audit.claim.value


def test_the_dpsgd_linear_game_catches_skipped_clipping(data, monkeypatch):
    """Seed 2: all 14 guesses right (seeds 0-3 get 11, 13, 14 and 12 of 14 on this data: the
    trainer's RAdam scales every coordinate's step, so an unclipped canary moves its weight by
    a few steps' worth, not by its gradient's 170-fold excess)."""
    correct = audit_dpsgd_linear_one_run(eps=0.25, seed=2, data=data)
    _skip_clipping(monkeypatch)
    broken = audit_dpsgd_linear_one_run(eps=0.25, seed=2, data=data)
    assert broken.claim.value == correct.claim.value  # the claim does not see the bug
    assert correct.lower_bound.value <= correct.claim.value < broken.lower_bound.value
    assert broken.correct == 14


def test_the_dpsgd_linear_game_catches_an_ignored_noise_multiplier(data, monkeypatch):
    """Seed 0: 13 of 14 right (seeds 0-3: 13, 9, 12, 12)."""
    real = training_dpsgd.clip_and_noise
    monkeypatch.setattr(training_dpsgd, "clip_and_noise",
                        lambda *args, **kwargs: real(*args, **{**kwargs,
                                                               "noise_multiplier": 0.0}))
    broken = audit_dpsgd_linear_one_run(eps=0.25, seed=0, data=data)
    assert broken.lower_bound.value > broken.claim.value


def test_each_spike_windows_gradient_sits_in_its_head_row():
    """A spike at horizon step h: the gradient is far above dpsgd's clip C = 1, and most of it
    lies in the output head's row h, which spikes at other steps do not touch."""
    data = load_forecasting_data(csv=audit_dataset(seed=0, rows=AUDIT_ROWS), **SPIKE_SHAPE)
    x, y = spike_windows(data, m=3, generator=torch.Generator().manual_seed(0))
    steps = (y != 0).any(dim=2).float().argmax(dim=1)
    setup = setup_method("dpsgd", eps=1.0, overrides=TINY_MODEL,
                         base=ModelConfig(n_channels=data.n_channels, **SPIKE_SHAPE))
    torch.manual_seed(0)
    grads, _ = training_dpsgd.per_example_gradient_dict(LDPTForecaster(setup.config), x, y,
                                                        loss_fn=mse)
    total = sum(g.reshape(3, -1).pow(2).sum(dim=1) for g in grads.values())
    head_row = grads["head.linear.weight"][torch.arange(3), steps].pow(2).sum(dim=1)
    assert bool((total.sqrt() > 100).all())
    assert bool((head_row / total > 0.8).all())


def test_the_dpsgd_game_stays_below_its_claim_and_catches_skipped_clipping(monkeypatch):
    """Seed 1 at claim 0.25: 17 of 40 right, then 32 with clipping skipped (bound 0.70; seed
    0: 20, then 29: bound 0.35)."""
    correct = audit_dpsgd_forecast_one_run(eps=0.25, seed=1)
    assert correct.claim.unit == Unit.WINDOW and correct.claim.delta == 1e-6
    assert correct.lower_bound.value <= correct.claim.value
    _skip_clipping(monkeypatch)
    broken = audit_dpsgd_forecast_one_run(eps=0.25, seed=1)
    assert broken.claim.value == correct.claim.value
    assert broken.lower_bound.value > broken.claim.value


def test_the_clipless_game_stays_below_its_claim_at_the_analytic_bound():
    audit = audit_dpsgd_one_run(eps=1.0, seed=0, model="clipless", **CLIPLESS_GAME)
    assert audit.claim.details["clip_mode"].startswith("analytic")
    assert audit.claim.details["clip"] > 1.0  # Delta, not the game's C = 0.1
    assert audit.lower_bound.value <= audit.claim.value


def test_the_clipless_game_catches_an_ignored_noise_multiplier(monkeypatch):
    """The step drops sigma: the same game at claim 0.25 (30 and 31 of 40 right at seeds 0
    and 1)."""
    real = classifier_dpsgd.clip_and_noise
    monkeypatch.setattr(classifier_dpsgd, "clip_and_noise",
                        lambda *args, **kwargs: real(*args, **{**kwargs,
                                                               "noise_multiplier": 0.0}))
    broken = audit_dpsgd_one_run(eps=0.25, seed=0, model="clipless", **CLIPLESS_GAME)
    assert broken.lower_bound.value > broken.claim.value


def test_the_cli_audits_dpsgd_linear(capsys):
    assert main(["audit", "privacy", "--method", "dpsgd-linear", "--eps", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["game"] == "one-run" and out["method"] == "dpsgd-linear"
    assert out["claim"]["unit"] == "window" and out["claim"]["delta"] == 1e-6
    assert out["lower_bound"]["value"] <= out["claim"]["value"] and out["passed"] is True


@pytest.mark.parametrize("argv, words", [
    (["--method", "dpsgd-linear", "--eps", "1", "--canaries", "20"], "exceeds the 14 weights"),
    (["--method", "dpsgd-tuned", "--eps", "1"], "audit dpsgd"),
    (["--method", "dpsgd", "--eps", "1", "--delta", "1e-5"], "runs at delta = 1e-06"),
    (["--method", "clipless", "--unit", "window", "--eps", "1"], "not one of clipless's"),
])
def test_what_the_one_run_games_cannot_play_is_refused_in_one_line(capsys, argv, words):
    assert main(["audit", "privacy", *argv]) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1


def test_clipless_and_dpsgd_run_folders_are_audited_as_themselves(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(
        {"model": "lipschitz", "clip": "analytic", "eps": 2.0, "delta": 1e-5}))
    assert run_settings(tmp_path) == {"method": "clipless", "eps": 2.0, "delta": 1e-5}
    (tmp_path / "config.json").write_text(json.dumps(
        {"method": "dpsgd", "eps": 1.0, "unit": "window", "delta": 1e-5}))
    # that delta is the feature path's, which dpsgd has not
    assert run_settings(tmp_path) == {"method": "dpsgd", "eps": 1.0, "unit": "window"}


def test_a_trained_dpsgd_run_is_audited_at_its_settings(tmp_path, capsys):
    run = tmp_path / "run"
    run_forecast(csv=_series_csv(tmp_path), method="dpsgd", eps=2.0, seq_len=48, horizon=24,
                 epochs=1, max_train_windows=64, max_eval_windows=16, out_dir=run,
                 progress=False, overrides=TINY_MODEL)
    assert main(["audit", "privacy", str(run), "--canaries", "40", "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["method"] == "dpsgd" and out["claim"]["unit"] == "window"
    assert out["claim"]["delta"] == 1e-6 and 1.9 < out["claim"]["value"] <= 2.0
    assert out["lower_bound"]["value"] <= out["claim"]["value"]


def _series_csv(tmp_path):
    path = tmp_path / "series.csv"
    audit_dataset(seed=1, rows=600).to_csv(path)
    return path
