"""The record-unit DP-SGD accountant: its per-step pair against a concrete mechanism's exact
divergence, its composition against a Monte-Carlo of the privacy loss and a closed form, and
never worse than group privacy of the window-level guarantee."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from qpriv.errors import InvalidInputError
from qpriv.privacy.record_dpsgd import (
    record_dpsgd_epsilon,
    record_noise_multiplier_for,
    record_step_pld,
    record_step_profile,
    windows_holding_record,
)


def _exact_delta(eps: float, *, g: list[float], g_other: list[float], shared: list[float],
                 q: float, sigma: float) -> float:
    """H_{e^eps} of one step of the concrete 1-d mechanism: every window joins with
    probability q, output = sum of the joined windows' clipped values + N(0, sigma^2); the
    record changes the windows in ``g`` to ``g_other``; ``shared`` are the windows it is not
    in. Exact by enumerating the subsets and integrating on a fine grid."""
    x = np.linspace(-15, 15, 60_001)
    p = np.zeros_like(x)
    r = np.zeros_like(x)
    values = [*g, *shared]
    others = [*g_other, *shared]
    for joined in itertools.product((0, 1), repeat=len(values)):
        weight = math.prod(q if j else 1 - q for j in joined)
        mask = np.array(joined, dtype=bool)
        p += weight * stats.norm.pdf(x, np.array(values)[mask].sum(), sigma)
        r += weight * stats.norm.pdf(x, np.array(others)[mask].sum(), sigma)
    return float(np.trapezoid(np.maximum(p - math.exp(eps) * r, 0.0), x))


@pytest.mark.parametrize("g, g_other, shared", [
    ([1.0, 1.0, 1.0], [-1.0, -1.0, -1.0], []),           # the worst case: the pair itself
    ([1.0, 1.0, 1.0], [-1.0, -1.0, -1.0], [0.5, -0.4]),  # other windows only blur it
    ([0.3, -1.0, 0.8], [-0.2, 1.0, -0.5], [0.5]),        # other clipped values: below it
])
def test_step_profile_dominates_the_concrete_mechanism(g, g_other, shared) -> None:
    q, sigma = 0.3, 1.0
    eps = np.array([0.0, 0.5, 1.0, 2.0])
    bound = record_step_profile(eps, noise_multiplier=sigma, sample_rate=q,
                                windows_per_record=3)
    exact = [_exact_delta(e, g=g, g_other=g_other, shared=shared, q=q, sigma=sigma)
             for e in eps]
    assert np.all(bound >= np.array(exact) - 1e-7)  # (the integral to ~1e-8)
    if not shared:  # tight: the bound is that mechanism's divergence
        np.testing.assert_allclose(bound, exact, rtol=1e-5, atol=1e-12)
    else:
        assert exact[1] < 0.98 * bound[1]


def test_composition_matches_a_monte_carlo_of_the_privacy_loss() -> None:
    k, q, sigma, steps = 3, 0.2, 1.5, 10
    rng = np.random.default_rng(7)
    n = 100_000
    m = np.arange(k + 1)
    w = stats.binom.pmf(m, k, q)
    loss = np.zeros(n)
    for _ in range(steps):  # X ~ P = sum w N(-m, s^2); loss ln P / Q with scipy's densities
        x = -rng.choice(m, size=n, p=w) + sigma * rng.standard_normal(n)
        upper = stats.norm.pdf(x[:, None], -m, sigma) @ w
        lower = stats.norm.pdf(x[:, None], m, sigma) @ w
        loss += np.log(upper) - np.log(lower)
    composed = record_step_pld(noise_multiplier=sigma, sample_rate=q,
                               windows_per_record=k).self_compose(steps)
    for eps in (1.0, 2.0, 3.0):
        samples = -np.expm1(np.minimum(eps - loss, 0.0))
        mc, se = samples.mean(), samples.std() / math.sqrt(n)
        pld = composed.get_delta_for_epsilon(eps)
        assert pld >= mc - 4 * se            # an upper bound
        assert pld <= 1.05 * mc + 4 * se     # and a tight one


def test_every_window_sampled_is_the_gaussian_closed_form() -> None:
    # q = 1: every step moves the sum by 2 k C, i.e. a Gaussian of mu = 2 k sqrt(T) / sigma
    k, sigma, steps, delta = 4, 40.0, 25, 1e-5
    mu = 2 * k * math.sqrt(steps) / sigma

    def gaussian_delta(eps: float) -> float:
        return (stats.norm.cdf(-eps / mu + mu / 2)
                - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2))

    eps = record_dpsgd_epsilon(noise_multiplier=sigma, sample_rate=1.0, steps=steps,
                               windows_per_record=k, delta=delta)
    assert gaussian_delta(eps) <= delta
    assert gaussian_delta(0.99 * eps) > delta


def test_never_worse_than_group_privacy_of_the_window_guarantee() -> None:
    # a window-level substitution guarantee is the same pair with k = 1; a record changes
    # k windows, so group privacy gives (k eps_w, k e^{(k-1) eps_w} delta_w)
    k, q, sigma, steps = 6, 0.02, 1.0, 200
    window = record_step_pld(noise_multiplier=sigma, sample_rate=q,
                             windows_per_record=1).self_compose(steps)
    for delta_w in (1e-8, 1e-6):
        eps_w = window.get_epsilon_for_delta(delta_w)
        delta_group = k * math.exp((k - 1) * eps_w) * delta_w
        if delta_group >= 1:
            continue
        eps_record = record_dpsgd_epsilon(noise_multiplier=sigma, sample_rate=q, steps=steps,
                                          windows_per_record=k, delta=delta_group)
        assert eps_record <= k * eps_w
        assert eps_record < 0.5 * k * eps_w  # and much better here


def test_record_eps_grows_with_the_windows_that_hold_it() -> None:
    common = {"noise_multiplier": 5.0, "sample_rate": 0.01, "steps": 100, "delta": 1e-5}
    spent = [record_dpsgd_epsilon(windows_per_record=k, **common) for k in (1, 10, 50)]
    assert spent[0] < spent[1] < spent[2]


def test_calibration_meets_the_target_tightly() -> None:
    kwargs = {"delta": 1e-5, "sample_rate": 0.01, "steps": 50, "windows_per_record": 20}
    sigma = record_noise_multiplier_for(eps=2.0, **kwargs)
    kwargs.pop("delta")
    assert record_dpsgd_epsilon(noise_multiplier=sigma, delta=1e-5, **kwargs) <= 2.0
    assert record_dpsgd_epsilon(noise_multiplier=sigma / 1.02, delta=1e-5, **kwargs) > 2.0


def test_windows_holding_a_record() -> None:
    assert windows_holding_record(seq_len=336, horizon=24, n_windows=8281) == 360
    assert windows_holding_record(seq_len=336, horizon=96, n_windows=100) == 100


def test_bad_input_is_one_clear_error() -> None:
    with pytest.raises(InvalidInputError, match="noise_multiplier"):
        record_dpsgd_epsilon(noise_multiplier=0.0, sample_rate=0.1, steps=1,
                             windows_per_record=3, delta=1e-5)
    with pytest.raises(InvalidInputError, match="no DP-SGD noise multiplier"):
        record_noise_multiplier_for(eps=1e-4, delta=1e-12, sample_rate=1.0, steps=10_000,
                                    windows_per_record=500)


def test_a_step_with_no_finite_guarantee_composes_to_infinity() -> None:
    assert record_dpsgd_epsilon(noise_multiplier=0.05, sample_rate=0.9, steps=5,
                                windows_per_record=50, delta=1e-5) == math.inf
