"""Eq. 18-19 and Table 2: trace distance of amplitude-encoded single-feature neighbours."""

import math

import numpy as np
import pytest

from qpriv.privacy.trace_distance import (
    eq18_bound,
    eq19_approximation,
    norm_bound,
    pure_state_trace_distance,
    single_feature_trace_distances,
)


def _trace_norm_of_projector_difference(x, y):
    psi, phi = x / np.linalg.norm(x), y / np.linalg.norm(y)
    diff = np.outer(psi, psi) - np.outer(phi, phi)
    return np.abs(np.linalg.eigvalsh(diff)).sum()


def test_pure_state_closed_form_equals_trace_norm():
    rng = np.random.default_rng(1)
    for _ in range(20):
        x, y = rng.standard_normal(16), rng.standard_normal(16)
        assert pure_state_trace_distance(x, y) == pytest.approx(
            _trace_norm_of_projector_difference(x, y), abs=1e-12
        )
    assert pure_state_trace_distance(np.eye(4)[0], np.eye(4)[1]) == pytest.approx(2.0)


def test_eq19_approximation_is_table2_analytical_column():
    for tau, analytical in [(0.001, 0.001), (0.01, 0.008), (0.05, 0.038), (0.1, 0.076),
                            (0.5, 0.378)]:
        assert eq19_approximation(tau, 7) == pytest.approx(analytical, abs=6e-4)


def test_eq18_is_not_a_bound_but_the_norm_bound_is():
    x = np.array([1.0] * 15 + [0.0])
    y = x.copy()
    y[-1] += 0.05
    dist = pure_state_trace_distance(x, y)
    assert dist > eq18_bound(x, 0.05) * 3  # eq. 18 misses by about ||x||_2 / ||x||_inf
    assert dist <= norm_bound(x, 0.05)


def test_norm_bound_holds_on_random_vectors():
    rng = np.random.default_rng(2)
    vectors = rng.standard_normal((2000, 7))
    row = single_feature_trace_distances(vectors, tau=0.1, rng=rng)
    assert row.norm_bound_violations == 0
    assert row.pairs == 2000
    assert row.empirical_p95 <= row.empirical_max
    assert row.eq18_violations > 0
    # closed form: all-ones vectors moved by tau in any one feature are at full trace distance
    # 2 sqrt(1 - (n + tau)^2 / (n (n + 2 tau + tau^2))), whichever feature moves
    n, tau = 7, 0.1
    exact = 2 * math.sqrt(1 - (n + tau) ** 2 / (n * (n + 2 * tau + tau**2)))
    ones = single_feature_trace_distances(np.ones((50, n)), tau=tau, rng=rng)
    assert ones.empirical_max == pytest.approx(exact, rel=1e-9)
    assert ones.empirical_p95 == pytest.approx(exact, rel=1e-9)
    assert exact == pytest.approx(0.0689587, abs=1e-7)
