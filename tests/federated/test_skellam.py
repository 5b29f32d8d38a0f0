"""The Skellam accounting against exact divergences, and the summed shares' distribution."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from qpriv.privacy.samplers import cryptographic_generator, skellam_noise
from qpriv.privacy.skellam import (
    calibrate_skellam,
    quantised_sensitivity,
    skellam_epsilon,
    skellam_rdp,
    skellam_tail,
)


def exact_renyi(order: int, *, mu: float, shift: int) -> float:
    """D_alpha(Sk(mu) + shift || Sk(mu)) by summing the pmfs (the slow, obvious twin)."""
    k = np.arange(-int(30 * math.sqrt(mu)) - 60, int(30 * math.sqrt(mu)) + 60)
    p = stats.skellam.logpmf(k - shift, mu, mu)
    q = stats.skellam.logpmf(k, mu, mu)
    finite = np.isfinite(p) & np.isfinite(q)  # the far tails underflow; they add nothing
    terms = order * p[finite] + (1 - order) * q[finite]
    top = terms.max()
    return float((top + np.log(np.exp(terms - top).sum())) / (order - 1))


@pytest.mark.parametrize(("mu", "shift"), [(2.0, 1), (10.0, 3), (50.0, 5), (400.0, 20)])
@pytest.mark.parametrize("order", [2, 5, 16])
def test_rdp_bound_holds_against_the_exact_divergence(mu, shift, order):
    exact = exact_renyi(order, mu=mu, shift=shift)
    bound = skellam_rdp(order, l2=shift, l1=shift, mu=mu)
    assert exact <= bound + 1e-12
    # and it is not vacuous: within the integer term of the Gaussian's RDP at this variance
    assert bound <= order * shift ** 2 / (4 * mu) + 3 * shift / (4 * mu) + 1e-12


@pytest.mark.parametrize("source", ["seeded", "cryptographic"])
def test_summed_shares_are_skellam_by_a_goodness_of_fit_test(source):
    """The shares a release draws (each site its own ChaCha20 key) and the tests' seeded ones
    sum to Sk(mu); the release's fail with probability 1e-3, at a fresh key each run."""
    mu, parties, draws = 30.0, 3, 200_000
    generators = ([np.random.default_rng(i) for i in range(parties)] if source == "seeded"
                  else [cryptographic_generator() for _ in range(parties)])
    total = sum(skellam_noise(mu / parties, (draws,), rng=rng) for rng in generators)
    values, counts = np.unique(total, return_counts=True)
    expected = stats.skellam.pmf(values, mu, mu) * draws
    keep = expected >= 5  # chi-square needs 5 or more expected per cell; pool the tails
    observed = np.append(counts[keep], counts[~keep].sum())
    expected = np.append(expected[keep], draws - expected[keep].sum())
    _, p_value = stats.chisquare(observed, expected)
    assert p_value > 1e-3
    assert total.var() == pytest.approx(2 * mu, rel=0.02)


def test_a_single_share_is_not_the_sum():
    """The test above can fail: one share's distribution is rejected against Sk(mu)."""
    rng = np.random.default_rng(0)
    one = skellam_noise(10.0, (200_000,), rng=rng)
    values, counts = np.unique(one, return_counts=True)
    expected = stats.skellam.pmf(values, 30.0, 30.0) * one.size
    assert stats.chisquare(counts, expected * counts.sum() / expected.sum())[1] < 1e-6


def test_calibration_meets_the_budget_and_spends_it():
    sens = (quantised_sensitivity(scale=64, sensitivity=2.0, dim=10),
            quantised_sensitivity(scale=64, sensitivity=1.5, dim=6))
    mu_a, mu_b = calibrate_skellam(eps=1.0, delta=1e-6, sensitivities=sens, shares=(0.5, 0.5))
    spent = skellam_epsilon([(*sens[0], mu_a), (*sens[1], mu_b)], delta=1e-6)
    assert 0.99 < spent <= 1.0
    # the shares split the Gaussian-equivalent budget: l2^2 / mu equal for equal shares
    assert sens[0][0] ** 2 / mu_a == pytest.approx(sens[1][0] ** 2 / mu_b)


def test_quantised_sensitivity_adds_the_rounding_and_bounds_l1_by_l2_squared():
    assert quantised_sensitivity(scale=100, sensitivity=0.5, dim=16) == (54.0, 54.0 ** 2)


def test_tail_bound_holds_empirically():
    rng = np.random.default_rng(1)
    draws = skellam_noise(20.0, (100_000,), rng=rng)
    for bound in (10, 20, 30):
        assert (np.abs(draws) >= bound).mean() <= skellam_tail(mu=20.0, bound=bound)


def test_two_cryptographic_generators_never_replay_each_other():
    first, second = cryptographic_generator(), cryptographic_generator()
    assert not np.array_equal(first.integers(0, 2**62, 64), second.integers(0, 2**62, 64))
