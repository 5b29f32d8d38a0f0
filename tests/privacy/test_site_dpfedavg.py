"""The site-level accountant of DP-FedAvg: closed form, monotonicity, calibration, and
cross-checks against dp-accounting's PLD and RDP accountants and Flower's own wrapper."""

from __future__ import annotations

import itertools
import math

import dp_accounting
import numpy as np
import pytest
from flwr.supercore.differential_privacy import compute_clip_model_update, compute_stdv
from flwr.supercore.privacy_accounting import (
    GaussianPrivacyEvent,
    NeighboringRelation,
    PrivacyConfig,
    SamplingMethod,
)
from flwr.supercore.privacy_accounting.rdp_accountant import RdpAccountant

from qpriv.errors import InvalidInputError
from qpriv.privacy.site_dpfedavg import (
    gdp_delta,
    site_epsilon,
    site_epsilon_pld,
    site_epsilon_rdp,
    site_mu,
    site_noise_multiplier,
)

DELTA = 1e-6


@pytest.mark.parametrize("eps", [0.3, 1.0, 4.0])
def test_one_round_is_the_analytic_gaussian_mechanism(eps):
    """One round, no sampling: the Gaussian mechanism of sensitivity 2 C / n and std z C / n,
    i.e. multiplier z / 2; dp-accounting's analytic calibration (Balle & Wang) of that
    multiplier gives back eps."""
    sigma = dp_accounting.get_sigma_gaussian(eps, DELTA)
    assert site_epsilon(noise_multiplier=2 * sigma, rounds=1, delta=DELTA) == \
        pytest.approx(eps, rel=1e-6)
    # Balle & Wang's Theorem 8 by hand at mu = 1 / sigma
    mu = 1 / sigma
    phi = lambda x: 0.5 * math.erfc(-x / math.sqrt(2))  # noqa: E731
    assert gdp_delta(eps=eps, mu=mu) == pytest.approx(
        phi(-eps / mu + mu / 2) - math.exp(eps) * phi(-eps / mu - mu / 2), rel=1e-12)
    assert gdp_delta(eps=eps, mu=mu) == pytest.approx(DELTA, rel=1e-4)


def test_rounds_compose_as_one_gaussian_of_sqrt_r_less_noise():
    """R rounds at z are one round at z / sqrt(R) (Gaussian composition is exact)."""
    for rounds in (2, 5, 50):
        assert site_epsilon(noise_multiplier=10.0, rounds=rounds, delta=DELTA) == \
            pytest.approx(site_epsilon(noise_multiplier=10.0 / math.sqrt(rounds), rounds=1,
                                       delta=DELTA), rel=1e-9)
    assert site_mu(noise_multiplier=4.0, rounds=9) == pytest.approx(1.5)


@pytest.mark.parametrize("z, rounds", [(2.0, 1), (4.0, 5), (20.0, 10), (60.0, 100)])
def test_closed_form_matches_pld_and_rdp_bounds_it(z, rounds):
    closed = site_epsilon(noise_multiplier=z, rounds=rounds, delta=DELTA)
    pld = site_epsilon_pld(noise_multiplier=z, rounds=rounds, delta=DELTA)
    rdp = site_epsilon_rdp(noise_multiplier=z, rounds=rounds, delta=DELTA)
    assert pld == pytest.approx(closed, rel=1e-3)
    assert closed <= rdp <= 1.25 * closed  # RDP is an upper bound, and a tight one here


def test_flowers_rdp_accountant_at_half_the_multiplier_agrees():
    """Flower 1.42's own accountant (add-or-remove, multiplier z) at z / 2 is the same
    Gaussian composition as qpriv's replace-one claim at z (both RDP)."""
    config = PrivacyConfig(target_delta=DELTA, population_size=8,
                           neighboring_relation=NeighboringRelation.ADD_OR_REMOVE_ONE,
                           sampling_method=SamplingMethod.NO_AMPLIFICATION)
    accountant = RdpAccountant(config)
    accountant.compose(GaussianPrivacyEvent(noise_multiplier=5.0, sample_size=8,
                                            population_size=8), count=4)
    ours = site_epsilon_rdp(noise_multiplier=10.0, rounds=4, delta=DELTA)
    assert accountant.get_epsilon(DELTA) == pytest.approx(ours, rel=1e-3)


def test_monotone_in_rounds_and_noise():
    by_rounds = [site_epsilon(noise_multiplier=20.0, rounds=r, delta=DELTA)
                 for r in (1, 2, 4, 8, 16)]
    by_noise = [site_epsilon(noise_multiplier=z, rounds=5, delta=DELTA)
                for z in (5.0, 10.0, 20.0, 40.0)]
    assert all(a < b for a, b in itertools.pairwise(by_rounds))
    assert all(a > b for a, b in itertools.pairwise(by_noise))


@pytest.mark.parametrize("eps, rounds", [(0.5, 1), (1.0, 5), (8.0, 30)])
def test_calibration_meets_the_target_from_below(eps, rounds):
    z = site_noise_multiplier(eps=eps, delta=DELTA, rounds=rounds)
    got = site_epsilon(noise_multiplier=z, rounds=rounds, delta=DELTA)
    assert got <= eps and got == pytest.approx(eps, rel=1e-6)
    assert site_epsilon_pld(noise_multiplier=z, rounds=rounds, delta=DELTA) == \
        pytest.approx(eps, rel=2e-3)


def test_flowers_wrapper_moves_the_mean_by_at_most_2c_over_n():
    """The worst case of the derivation: two sites' updates pointing opposite ways, far beyond
    C, clipped by Flower's own function, move the uniform mean of n by exactly 2 C / n; and
    the wrapper's noise std is z C / n."""
    n, clip = 8, 0.1
    rng = np.random.default_rng(0)
    direction = rng.standard_normal(50)
    direction /= np.linalg.norm(direction)
    current = [rng.standard_normal(50)]
    clipped = []
    for sign in (1.0, -1.0):
        site = [current[0] + sign * 100.0 * direction]
        compute_clip_model_update(site, current, clipping_norm=clip)
        clipped.append(site[0])
    assert np.linalg.norm(clipped[0] / n - clipped[1] / n) == pytest.approx(2 * clip / n)
    assert compute_stdv(3.0, clip, n) == pytest.approx(3.0 * clip / n)


def test_refuses_bad_arguments():
    with pytest.raises(InvalidInputError, match="noise_multiplier"):
        site_epsilon(noise_multiplier=0.0, rounds=1, delta=DELTA)
    with pytest.raises(InvalidInputError, match="rounds"):
        site_epsilon(noise_multiplier=1.0, rounds=0, delta=DELTA)
    with pytest.raises(InvalidInputError, match="delta"):
        site_noise_multiplier(eps=1.0, delta=1.0, rounds=1)
