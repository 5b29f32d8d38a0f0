"""``qpriv audit privacy --method fed-dp-linear``: the many-run game on the SecAgg+ sum of
federated dp-linear stays below a correct claim, and too little noise pushes it above; each
release is the protocol's own sum, draw for draw."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import scipy.stats

from qpriv.audits.privacy_federated import (
    audit_federated_dp_linear,
    federated_round,
    planted,
    site_data,
)
from qpriv.cli import main
from qpriv.federated.protocol import CLAMP_SHARE
from qpriv.federated.site import site_update
from qpriv.privacy.claims import LOWER_BOUND
from qpriv.privacy.skellam import skellam_epsilon


def _last_json(capsys) -> dict:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


@pytest.mark.parametrize("unit", ["record", "window"])
def test_each_release_is_the_sum_of_the_sites_own_updates(unit):
    """A release redraws only the shares: it is the sum of site_update over the survivors
    (canary site first) from the same generator, bit for bit."""
    game, plan, _ = federated_round(unit=unit, eps=0.7, delta=1e-6, canary="worst", sites=3,
                                    threshold=2, seed=0)
    datas = [site_data(i) for i in range(2)]
    for seed in (3, 11):
        rng = np.random.default_rng(seed)
        expected = sum(site_update(d, plan, rng=rng) for d in datas)
        released = game.release(np.random.default_rng(seed), prime=False)
        assert released.dtype == np.int64
        np.testing.assert_array_equal(released, expected)


@pytest.mark.parametrize("unit, reach", [("record", (0.05, 0.2)), ("window", (0.999, 1.0))])
def test_the_command_at_eps_1_stays_below_the_federated_claim(capsys, unit, reach):
    assert main(["audit", "privacy", "--method", "fed-dp-linear", "--unit", unit, "--eps", "1",
                 "--canary", "worst", "--trials", "2000", "--json"]) == 0
    out = _last_json(capsys)
    claim, bound = out["claim"], out["lower_bound"]
    # the claim is the protocol's, for the 2 of 3 sites that survived: the target, met
    assert claim["unit"] == unit and claim["survivors"] == 2 and claim["threshold"] == 2
    assert 0.99 < claim["value"] <= 1.0 and claim["delta"] == 1e-6
    assert bound["bound"] == LOWER_BOUND and 0.0 <= bound["value"] <= claim["value"]
    assert out["passed"] is True and out["federation"]["sites"] == 3
    # the window canary reaches the quantised sensitivity the claim accounts (rounding aside)
    assert reach[0] < out["reach"] <= reach[1]


def test_shares_sized_for_every_site_instead_of_the_survivors_are_caught():
    """32 sites, threshold 2: shares of mu / 32 leave the 2 survivors' sum with an eighth of
    the noise's variance the claim needs; the same game at the correct shares stays below."""
    settings = {"unit": "window", "eps": 1.0, "trials": 2000, "sites": 32, "threshold": 2}
    correct = audit_federated_dp_linear(**settings)
    broken = audit_federated_dp_linear(**settings, bug="all-sites-shares")
    assert broken.claim.value == correct.claim.value  # the claim does not see the bug
    assert correct.lower_bound.value <= correct.claim.value
    assert broken.reach == pytest.approx(4 * correct.reach, rel=1e-9)
    assert broken.lower_bound.value > broken.claim.value


def test_halved_noise_is_caught_at_a_hundred_thousand_trials():
    """Half the std doubles the canary's whitened shift; a perfect test of the claim's own
    mechanism expects 0.46 from 100,000 trials at eps 1, the halved one goes above 1."""
    broken = audit_federated_dp_linear(unit="window", eps=1.0, trials=100_000,
                                       bug="half-noise")
    assert broken.reach == pytest.approx(2.0, abs=0.01)
    assert broken.ceiling < 0.5 < 1.0 < broken.lower_bound.value


def test_the_rounding_term_is_real_but_below_what_a_game_can_see():
    """Shares calibrated without sqrt(dim) in the sensitivity: the Skellam accountant puts the
    true eps a hair above the claim (gamma Delta is about 3e6 against sqrt(dim) of 6.5), far
    below any game's resolution; the white-box check is the accountant's."""
    game, plan, _ = federated_round(unit="record", eps=1.0, delta=1e-6, canary="worst",
                                    sites=3, threshold=2, seed=0)
    broken = planted(plan, "no-rounding-term", dims=game.dims)
    honest = plan.threshold
    true_eps = skellam_epsilon([(plan.l2_a, plan.l2_a ** 2, honest * broken.mu_a_site),
                                (plan.l2_b, plan.l2_b ** 2, honest * broken.mu_b_site)],
                               delta=(1 - CLAMP_SHARE) * plan.delta)
    assert broken.mu_a_site < plan.mu_a_site
    assert 1.0 < true_eps < 1.0 + 1e-4


def test_the_score_is_the_exact_skellam_likelihood_ratio():
    """The Gaussian approximation of the score against scipy's exact Skellam log-likelihood
    ratio of D' over D, on releases of both sides: equal up to the constant
    sum(change^2 / (4 mu)) to 1e-6 (mu is about 1e11 here)."""
    game, _, _ = federated_round(unit="window", eps=5.0, delta=1e-6, canary="worst",
                                 sites=3, threshold=2, seed=0)
    mus = game.mus()
    known = game.canary_first + sum(game.others)
    change = (game.canary_second - game.canary_first).astype(np.float64)
    rng = np.random.default_rng(5)
    for prime in (False, True):
        noise = game.release(rng, prime=prime) - known
        exact = np.sum(scipy.stats.skellam.logpmf(noise - change, mus, mus)
                       - scipy.stats.skellam.logpmf(noise, mus, mus))
        score = float(np.dot(noise.astype(np.float64), change / (2 * mus)))
        assert score - float(np.sum(change ** 2 / (4 * mus))) == pytest.approx(exact, abs=1e-6)
        assert math.isfinite(exact)


@pytest.mark.parametrize("argv, words", [
    (["--method", "fed-dp-linear", "--eps", "1", "--observe", "kernel"], "SecAgg+ sum"),
    (["--method", "dp-linear", "--eps", "1", "--sites", "4"], "only fed-dp-linear"),
    (["--method", "fed-dp-linear", "--eps", "1", "--sites", "1"], "at least 2"),
    (["--method", "fed-dp-linear", "--eps", "1", "--sites", "65"], "2 to 64 sites"),
    (["--method", "fed-dp-linear", "--unit", "example", "--eps", "1"], "not one of"),
])
def test_bad_federated_requests_are_one_line_and_exit_2(capsys, argv, words):
    assert main(["audit", "privacy", *argv]) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1
