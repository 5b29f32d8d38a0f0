"""``qpriv audit privacy``: the many-run game on dp-linear and the one-run game on DP-SGD stay
below a correct claim, and planted bugs push them above it; the game's mechanism is the fit's
own, release for release; the one-run bound matches its closed form."""

from __future__ import annotations

import functools
import json
import math

import numpy as np
import pytest
import torch

import qpriv.audits.privacy as privacy_front
import qpriv.training.dpsgd as training_dpsgd
from qpriv.audits.privacy import run_settings
from qpriv.audits.privacy_dpsgd import audit_dpsgd_one_run, one_run_epsilon, one_run_p_value
from qpriv.audits.privacy_linear import (
    AUDIT_SHAPE,
    audit_dataset,
    audit_dp_linear,
    game_ceiling,
    mechanism,
)
from qpriv.cli import main
from qpriv.errors import InvalidInputError
from qpriv.forecasting.linear import fit_dp_linear
from qpriv.forecasting.windows import load_forecasting_data
from qpriv.privacy.claims import LOWER_BOUND, Unit

ACCEPTANCE = ["audit", "privacy", "--method", "dp-linear", "--unit", "record", "--eps", "1",
              "--canary", "worst", "--trials", "2000", "--json"]


@pytest.fixture(scope="module")
def data():
    return load_forecasting_data(csv=audit_dataset(seed=0), **AUDIT_SHAPE)


def _last_json(capsys) -> dict:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


@pytest.mark.parametrize("unit", ["record", "window"])
def test_each_release_of_the_game_is_the_fits_own_release(data, unit):
    """The game redraws only the noise: release i is fit_dp_linear's kernel, bit for bit, for
    the generator state it starts from."""
    scaler = data.scaler if unit == "record" else None
    audited = mechanism(data, np.asarray(data.train_raw), unit=Unit(unit), eps=0.7, delta=1e-6,
                        scaler=scaler)
    for seed in (3, 11):
        fit = fit_dp_linear(data, eps=0.7, delta=1e-6, unit=unit, seed=seed, select="fixed",
                            scaler=data.scaler if unit == "record" else "data")
        np.testing.assert_array_equal(audited.kernel(np.random.default_rng(seed)),
                                      fit.model.kernel)


def test_the_acceptance_command_stays_below_its_claim(capsys):
    assert main(ACCEPTANCE) == 0
    out = _last_json(capsys)
    claim, bound = out["claim"], out["lower_bound"]
    assert claim["value"] == 1.0 and claim["unit"] == "record" and claim["delta"] == 1e-6
    assert bound["bound"] == LOWER_BOUND and bound["unit"] == "record"
    assert 0.0 <= bound["value"] <= claim["value"]
    assert out["passed"] is True and out["trials"] == 2000
    # the worst record found moves the statistics by a fraction of the proven sensitivity
    assert 0.05 < out["reach"] < 1.0


def test_a_scaler_taken_from_the_clear_pushes_the_same_command_above_its_claim(
        capsys, monkeypatch):
    monkeypatch.setattr(privacy_front, "audit_dp_linear",
                        functools.partial(audit_dp_linear, bug="clear-scaler"))
    assert main(ACCEPTANCE) == 1
    out = _last_json(capsys)
    assert out["passed"] is False
    assert out["lower_bound"]["value"] > 2 * out["claim"]["value"]
    assert out["reach"] > 5  # the canary moves every clipped value through the scaler


def test_the_window_units_worst_canary_reaches_the_sensitivity_exactly(data):
    """The proof's equality case (C equal rows on the clip spheres): reach 1, and the bound is
    positive and below the claim; half the noise doubles the reach and raises the bound."""
    correct = audit_dp_linear(unit="window", eps=5.0, canary="worst", trials=2000, data=data)
    # just under 1: the released A is its upper triangle, whose change is slightly below the
    # Frobenius bound (qpriv.privacy.ssp's module docstring)
    assert 0.999 < correct.reach <= 1.0
    # as tight as a finite game allows: near what a perfect test expects at 2000 trials
    assert correct.ceiling == pytest.approx(game_ceiling(eps=5.0, delta=1e-6, trials=2000))
    assert 0.8 * correct.ceiling < correct.lower_bound.value
    assert 0.5 < correct.lower_bound.value <= 5.0
    halved = audit_dp_linear(unit="window", eps=5.0, canary="worst", trials=2000, data=data,
                             bug="half-noise")
    assert halved.reach == pytest.approx(2 * correct.reach, rel=1e-12)
    assert halved.lower_bound.value > correct.lower_bound.value + 1.0


def test_the_text_output_puts_the_bound_beside_the_claim(capsys):
    assert main(["audit", "privacy", "--method", "dp-linear", "--unit", "window", "--eps", "5",
                 "--trials", "500"]) == 0
    out = capsys.readouterr().out
    assert "claim:       eps 5 (global (eps, delta)-DP, delta=1e-06" in out
    assert "lower bound: eps >= " in out and "PASS" in out
    assert "the canary moves the release by 1 x the proven sensitivity" in out


def test_the_kernel_alone_tells_the_attacker_less(data):
    statistics = audit_dp_linear(unit="window", eps=5.0, trials=1000, data=data)
    kernel = audit_dp_linear(unit="window", eps=5.0, trials=1000, data=data, observe="kernel")
    assert kernel.lower_bound.value <= statistics.lower_bound.value <= 5.0


def test_the_games_ceiling_is_the_perfect_tests_expected_bound():
    """No power at eps 0.1; at eps 5 and 10,000 trials about 2.24 (the false-positive rate's
    Clopper-Pearson end caps it); more trials raise it."""
    assert game_ceiling(eps=0.1, delta=1e-6, trials=10_000) == 0.0
    assert game_ceiling(eps=5.0, delta=1e-6, trials=10_000) == pytest.approx(2.243, abs=0.01)
    assert game_ceiling(eps=5.0, delta=1e-6, trials=2000) < \
        game_ceiling(eps=5.0, delta=1e-6, trials=10_000) < 5.0


def test_one_run_bound_matches_its_closed_form():
    """All r guesses right with delta 0: P[Bin(r, q) >= r] = q^r, so the bound is the eps
    whose q^r equals 1 - confidence."""
    r = 40
    q = 0.05 ** (1 / r)
    assert one_run_p_value(m=200, r=r, v=r, eps=math.log(q / (1 - q)), delta=0.0) == \
        pytest.approx(0.05, rel=1e-9)
    assert one_run_epsilon(m=200, r=r, v=r, delta=0.0) == pytest.approx(math.log(q / (1 - q)),
                                                                       abs=1e-9)
    # delta adds 2 m delta alpha to the p-value, so the bound can only fall
    assert one_run_epsilon(m=200, r=r, v=r, delta=1e-3) < one_run_epsilon(m=200, r=r, v=r,
                                                                          delta=0.0)
    assert one_run_epsilon(m=200, r=r, v=r // 2, delta=0.0) == 0.0


def test_the_one_run_game_catches_skipped_clipping(monkeypatch):
    correct = audit_dpsgd_one_run(eps=0.25, seed=0)
    assert correct.lower_bound.value <= correct.claim.value
    assert correct.claim.unit == Unit.EXAMPLE and correct.guesses == 40
    monkeypatch.setattr(training_dpsgd, "clip_factors",
                        lambda norms, clip: torch.ones_like(norms))
    broken = audit_dpsgd_one_run(eps=0.25, seed=0)
    assert broken.claim.value == correct.claim.value  # the claim does not see the bug
    assert broken.lower_bound.value > broken.claim.value


def test_the_classifier_audit_in_text_mode(capsys):
    assert main(["audit", "privacy", "--method", "classifier", "--eps", "1",
                 "--canaries", "100"]) == 0
    out = capsys.readouterr().out
    assert "one-run game" in out and "empirical lower bound at 95% confidence" in out
    assert "PASS" in out


def test_a_run_folder_gives_its_settings(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(
        {"method": "dp-linear", "eps": 0.5, "delta": 1e-7, "unit": "window"}))
    assert run_settings(tmp_path) == {"method": "dp-linear", "eps": 0.5, "unit": "window",
                                      "delta": 1e-7}
    (tmp_path / "config.json").write_text(json.dumps({"model": "mlp", "eps": 2.0}))
    assert run_settings(tmp_path) == {"method": "classifier", "eps": 2.0}


@pytest.mark.parametrize("argv, words", [
    (["--method", "dpsgd-tuned", "--eps", "1"], "no privacy audit yet"),
    (["--method", "dp-linear", "--unit", "example", "--eps", "1"], "not one of dp-linear's"),
    (["--method", "dp-linear"], "give RUN_DIR, or --method and --eps"),
    (["--method", "dp-linear", "--eps", "1", "--trials", "50"], "too few"),
])
def test_bad_requests_are_one_line_and_exit_2(capsys, argv, words):
    assert main(["audit", "privacy", *argv]) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("config, words", [
    ({"method": "ridge", "eps": None}, "no privacy audit"),
    ({"method": "ldpt", "eps": None, "eps_per_pass": 0.1}, "qpriv audit channel"),
    ({"model": "mlp", "eps": None}, "without a budget"),
    ({"dataset": "ETTh1"}, "names no method"),
])
def test_a_run_folder_without_an_audited_claim_is_refused(tmp_path, config, words):
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(InvalidInputError, match=words):
        run_settings(tmp_path)


def test_a_trained_dp_linear_run_is_audited_at_its_settings(tmp_path, capsys):
    csv_path = tmp_path / "series.csv"
    audit_dataset(seed=1, rows=1200).to_csv(csv_path)
    run = tmp_path / "run"
    assert main(["train", "--method", "dp-linear", "--csv", str(csv_path), "--unit", "window",
                 "--eps", "2", "--seq-len", "96", "--horizon", "24", "--out", str(run),
                 "--json"]) == 0
    capsys.readouterr()
    assert main(["audit", "privacy", str(run), "--trials", "500", "--json"]) == 0
    out = _last_json(capsys)
    assert (out["claim"]["value"], out["claim"]["unit"]) == (2.0, "window")
    assert out["lower_bound"]["value"] <= 2.0 and out["trials"] == 500
