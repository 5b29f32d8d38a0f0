"""The distinguishing game (issue 6 part 4): an empirical lower bound that must stay at or below
the rigorous eps of the same unit, checked on a mechanism with a closed form first."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats
import torch

from qpriv.audits import lower_bound as emp
from qpriv.errors import InvalidInputError
from qpriv.privacy.claims import PrivacyClaim
from qpriv.privacy.feature_path.accountant import rigorous_epsilon
from qpriv.privacy.feature_path.pairs import NeighbourPair, sic_aligned_pair
from qpriv.quantum.states import amplitude_encode, pure_trace_distance_full

PAPER_P = 0.9505


@pytest.fixture(scope="module")
def token_worst():
    """The rigorous token-unit result at the paper's calibration of eps_s = 0.1."""
    return rigorous_epsilon(p=PAPER_P, unit="token", restarts=1)


def test_clopper_pearson_is_scipys_exact_interval():
    for k, n in ((0, 50), (7, 50), (50, 50), (1234, 20000)):
        low, high = emp.clopper_pearson(k, n, confidence=0.9)
        ref = scipy.stats.binomtest(k, n).proportion_ci(confidence_level=0.9, method="exact")
        assert float(low) == pytest.approx(ref.low, abs=1e-12)
        assert float(high) == pytest.approx(ref.high, abs=1e-12)


def test_epsilon_from_rates():
    eps = emp.epsilon_from_rates(tpr_lower=np.array([0.2, 0.1, 0.0]),
                                 fpr_upper=np.array([0.1, 0.2, 0.0]), delta=0.0)
    np.testing.assert_allclose(eps, [math.log(2.0), 0.0, 0.0])
    assert float(emp.epsilon_from_rates(tpr_lower=0.2, fpr_upper=0.1, delta=0.1)) == 0.0


def test_game_recovers_randomized_response():
    """Randomized response is eps-DP with a tight pair: the game must come close, not above."""
    eps = 1.0
    keep = math.exp(eps) / (1 + math.exp(eps))
    rng = np.random.default_rng(0)
    log_ratio = np.array([eps, -eps])

    def draw(which: int, n: int) -> np.ndarray:
        truth = rng.random(n) < (keep if which == 0 else 1 - keep)
        return np.where(truth, log_ratio[0], log_ratio[1])

    moments = emp.score_moments(np.array([keep, 1 - keep]), np.array([1 - keep, keep]),
                                log_ratio, 1)
    bound = emp.distinguishing_game(draw, moments=moments,
                                    support=emp.score_range(log_ratio, 1), trials=50_000, delta=0.0,
                                    confidence=0.95, n_shots=1, p=0.0, pair_source="RR")
    assert 0.9 * eps < bound.eps_lower <= eps


def test_lower_bound_stays_below_the_rigorous_eps_and_above_the_papers(token_worst):
    bound = emp.pair_lower_bound(token_worst.pair, p=PAPER_P, n_shots=1024, trials=20_000,
                                 delta=1e-5, seed=0)
    assert bound.eps_lower <= token_worst.eps
    assert bound.eps_lower_pure >= bound.eps_lower
    # N_s = 1024 shots of one token state: the paper's eps_s = 0.1 per pass is refuted
    assert emp.paper_refuted(bound, 0.1)
    assert bound.labelled()["accounting"] == "rigorous"
    assert bound.labelled()["bound"] == "empirical lower bound"


def test_lower_bound_of_a_near_silent_channel_is_near_zero():
    pair = sic_aligned_pair(p=0.9999, d=0.1, dim=16)
    rigorous = rigorous_epsilon(p=0.9999, unit="token", n_shots=64, restarts=1,
                                extra_pairs=[pair])
    bound = emp.pair_lower_bound(pair, p=0.9999, n_shots=64, trials=4000, seed=1)
    assert bound.eps_lower <= rigorous.eps < 0.01


def test_real_window_pair_through_the_feature_path(token_worst):
    window = torch.randn(16, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    x, moved = emp.window_pair_at_distance(window, d=0.1, index=3)
    assert (moved - x).count_nonzero() == 1
    psi, _ = amplitude_encode(torch.stack([x, moved]))
    assert float(pure_trace_distance_full(psi[0], psi[1])) == pytest.approx(0.1, abs=1e-10)
    bound = emp.window_pair_lower_bound(x, moved, p=PAPER_P, n_shots=1024, trials=10_000)
    assert 0 < bound.eps_lower <= token_worst.eps
    assert "real windows" in bound.pair_source
    # the same two states played through the sampler directly (not the model's feature
    # function): the game measures the pair, not the path it took
    states = psi.numpy().astype(np.complex128)
    direct = emp.pair_lower_bound(NeighbourPair(states[0], states[1], "the same windows"),
                                  p=PAPER_P, n_shots=1024, trials=10_000)
    assert bound.eps_lower == pytest.approx(direct.eps_lower, abs=0.02)


def test_the_game_shows_its_releases_only_when_asked(terminal):
    terminal = terminal()
    pair = sic_aligned_pair(p=0.5, d=0.1, dim=4)
    quiet = emp.pair_lower_bound(pair, p=0.5, n_shots=8, trials=3000, seed=2)
    assert terminal.getvalue() == ""
    shown = emp.pair_lower_bound(pair, p=0.5, n_shots=8, trials=3000, seed=2, progress=True)
    err = terminal.getvalue()
    assert "distinguishing game (8 shots each)" in err and "/6.00k" in err  # both sides
    assert (shown.tpr, shown.fpr) == (quiet.tpr, quiet.fpr)  # the bar leaves the draws alone
    # where stderr is no terminal (a log), one line instead of a bar redrawn with \r
    terminal.isatty = lambda: False
    terminal.seek(0)
    terminal.truncate()
    emp.pair_lower_bound(pair, p=0.5, n_shots=8, trials=3000, seed=2, progress=True)
    assert terminal.getvalue() == "distinguishing game (8 shots each): 6,000 releases\n"


def test_bad_input():
    pair = sic_aligned_pair(p=0.5, d=0.1, dim=4)
    with pytest.raises(InvalidInputError, match="too few"):
        emp.pair_lower_bound(pair, p=0.5, n_shots=8, trials=10)
    with pytest.raises(InvalidInputError, match="more than the game holds in memory"):
        emp.pair_lower_bound(pair, p=0.5, n_shots=8, trials=10**8)  # refused before any draw
    with pytest.raises(InvalidInputError, match="index = 9"):
        emp.window_pair_at_distance(torch.ones(4), d=0.1, index=9)


def _fixed_game(hits: int, false_hits: int, *, trials: int = 1000, confidence: float = 0.95,
                delta: float = 1e-5) -> emp.LowerBound:
    """The game on scores whose outcome is fixed: ``hits`` of psi's and ``false_hits`` of
    psi''s releases score far above any threshold the plan can pick, the rest far below."""

    def draw(which: int, n: int) -> np.ndarray:
        high = hits if which == 0 else false_hits
        return np.where(np.arange(n) < high, 100.0, -100.0)

    return emp.distinguishing_game(draw, moments=(5.0, 1.0, -5.0, 1.0), support=(-10.0, 10.0),
                                   trials=trials, delta=delta, confidence=confidence,
                                   n_shots=1, p=0.5, pair_source="fixed")


def test_the_bound_is_the_exact_interval_ends_not_the_point_estimates():
    game = _fixed_game(900, 100)  # either direction reads 900 hits and 100 false hits
    assert (game.tpr, game.fpr) == (0.9, 0.1)
    tpr = scipy.stats.binomtest(900, 1000).proportion_ci(confidence_level=0.95, method="exact")
    fpr = scipy.stats.binomtest(100, 1000).proportion_ci(confidence_level=0.95, method="exact")
    assert game.tpr_lower == pytest.approx(tpr.low, rel=1e-9)
    assert game.fpr_upper == pytest.approx(fpr.high, rel=1e-9)
    assert game.eps_lower == pytest.approx(math.log((tpr.low - 1e-5) / fpr.high), rel=1e-9)
    assert game.eps_lower < math.log(0.9 / 0.1) - 0.1  # well below the point estimate's 2.197
    # more confidence, a lower bound: 0.5 -> 0.95 -> 0.99 strictly falls
    bounds = [_fixed_game(900, 100, confidence=c).eps_lower for c in (0.5, 0.95, 0.99)]
    assert bounds[0] > bounds[1] > bounds[2] > 0


def test_a_lower_bound_reads_as_one_when_printed():
    label = PrivacyClaim.from_json(_fixed_game(900, 100).labelled()).label()
    assert label.startswith(">= ") and "empirical lower bound at 95% confidence" in label
    assert "accounting=rigorous" not in label  # not an upper guarantee
