"""The neighbouring trace distance of the signed encoding psi(x) = (x, r) / ||(x, r)||: the
closed-form worst case 4 c r / (c^2 + r^2) is never exceeded by random or optimised
neighbours, and is reached (ldpt-signed's d)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.optimize
import torch

from qpriv.errors import InvalidInputError, require_in_range
from qpriv.privacy.trace_distance import (
    pure_state_trace_distance,
    signed_neighbour_distance,
    signed_reference_for_distance,
)
from qpriv.quantum.states import (
    amplitude_encode,
    density_matrix,
    signed_amplitudes,
    trace_distance_full,
)


def signed_pair_trace_distance(x: np.ndarray, y: np.ndarray, *, reference: float) -> np.ndarray:
    """The independent twin the closed form is checked against: the full trace norm between
    the signed encodings of tokens ``x`` and ``y`` (last axis), ``2 sqrt(1 - <psi(x)|psi(y)>^2)``
    with psi(x) = (x, r) / ||(x, r)||, in [0, 2]. The tokens are taken as given."""
    reference = require_in_range("reference (amplitude r)", reference, low=0.0)
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    pad_x = np.full((*x.shape[:-1], 1), reference)
    pad_y = np.full((*y.shape[:-1], 1), reference)
    return pure_state_trace_distance(np.concatenate([x, pad_x], axis=-1),
                                     np.concatenate([y, pad_y], axis=-1))

N = 16
CLIP = 2.0


def dense_distance(x: np.ndarray, y: np.ndarray, *, clip: float, reference: float) -> float:
    """The slow twin: the quantum core's encoding of both tokens, their density matrices on
    five qubits, and the eigenvalues of the difference."""
    vectors = signed_amplitudes(torch.from_numpy(np.stack([x, y])), clip=clip,
                                reference=reference)
    psi, _ = amplitude_encode(vectors)
    rho = density_matrix(psi)
    return float(trace_distance_full(rho[0], rho[1]))


def neighbours(rng: np.random.Generator, count: int, *, clip: float) -> tuple:
    """Random tokens in [-c, c]^16 at every scale (from near zero to the box's corners, some
    sparse), each with one coordinate replaced by another value in [-c, c]."""
    scale = clip * 10.0 ** rng.uniform(-4, 0, size=(count, 1))
    x = np.clip(rng.standard_normal((count, N)) * scale, -clip, clip)
    sparse = rng.random((count, N)) < 0.5
    x[: count // 2] *= sparse[: count // 2]
    y = x.copy()
    index = rng.integers(0, N, size=count)
    y[np.arange(count), index] = rng.uniform(-clip, clip, size=count)
    ends = rng.random(count) < 0.3  # often the extremes of the range
    y[ends, index[ends]] = -np.sign(x[ends, index[ends]] + 1e-300) * clip
    return x, y


@pytest.mark.parametrize(("clip", "reference"), [(2.0, 79.94996871087636), (2.0, 10.0),
                                                   (1.0, 1.0), (3.0, 4.0)])
def test_worst_case_is_the_closed_form_and_is_reached(clip: float, reference: float) -> None:
    d = signed_neighbour_distance(clip=clip, reference=reference)
    assert d == pytest.approx(4 * clip * reference / (clip**2 + reference**2), rel=1e-12)
    # reached: one value from -c to +c, every other value 0 (m = ||u|| = r)
    x = np.zeros(N)
    x[5] = -clip
    y = -x
    assert signed_pair_trace_distance(x, y, reference=reference) == pytest.approx(d, rel=1e-12)
    assert dense_distance(x, y, clip=clip, reference=reference) == pytest.approx(d, abs=1e-10)


def test_the_paper_d_sets_the_default_reference() -> None:
    r = signed_reference_for_distance(d=0.1, clip=CLIP)
    assert r == pytest.approx(CLIP * (2 + math.sqrt(4 - 0.01)) / 0.1, rel=1e-15)
    assert r == pytest.approx(79.94997, abs=1e-5)
    assert signed_neighbour_distance(clip=CLIP, reference=r) == pytest.approx(0.1, rel=1e-12)
    for d in (0.01, 0.5, 1.0, 1.9, 2.0):
        back = signed_reference_for_distance(d=d, clip=CLIP)
        assert signed_neighbour_distance(clip=CLIP, reference=back) == pytest.approx(d, rel=1e-9)


@pytest.mark.parametrize("reference", [79.94996871087636, 10.0, 2.5])
def test_random_neighbours_never_exceed_the_worst_case(reference: float) -> None:
    rng = np.random.default_rng(7)
    x, y = neighbours(rng, 20000, clip=CLIP)
    dist = signed_pair_trace_distance(x, y, reference=reference)
    d = signed_neighbour_distance(clip=CLIP, reference=reference)
    assert dist.max() <= d * (1 + 1e-12)
    assert dist.max() > 0.9 * d  # the scan comes near the bound (the extremes at small norm)
    # the numpy closed form agrees with the dense density-matrix computation
    for i in rng.choice(len(x), size=5, replace=False):
        assert dist[i] == pytest.approx(dense_distance(x[i], y[i], clip=CLIP,
                                                       reference=reference), abs=1e-9)


def test_optimised_neighbours_reach_but_do_not_exceed_the_worst_case() -> None:
    """L-BFGS over the token (in the box) and the replaced value, from random starts."""
    reference = 10.0
    d = signed_neighbour_distance(clip=CLIP, reference=reference)
    rng = np.random.default_rng(3)
    best = 0.0
    for _ in range(8):
        def negative(z: np.ndarray) -> float:
            x = z[:N]
            y = x.copy()
            y[0] = z[N]
            return -float(signed_pair_trace_distance(x, y, reference=reference))

        start = rng.uniform(-CLIP, CLIP, size=N + 1)
        result = scipy.optimize.minimize(negative, start, method="L-BFGS-B",
                                         bounds=[(-CLIP, CLIP)] * (N + 1))
        best = max(best, -result.fun)
        assert -result.fun <= d * (1 + 1e-12)
    assert best == pytest.approx(d, rel=1e-6)


def test_below_the_clip_range_the_states_can_be_orthogonal() -> None:
    clip, reference = 2.0, 1.0
    assert signed_neighbour_distance(clip=clip, reference=reference) == 2.0
    # m = ||(x without x_i, r)|| = c, then x_i from -c to c turns the state by pi / 2
    x = np.zeros(N)
    x[1] = math.sqrt(clip**2 - reference**2)
    x[0] = -clip
    y = x.copy()
    y[0] = clip
    assert signed_pair_trace_distance(x, y, reference=reference) == pytest.approx(2.0, abs=1e-12)


def test_the_signed_encoding_tells_a_token_from_its_negative_and_its_scale() -> None:
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, size=N)
    r = 10.0
    assert signed_pair_trace_distance(x, -x, reference=r) > 0.1
    assert signed_pair_trace_distance(x, 0.5 * x, reference=r) > 0.01
    assert signed_pair_trace_distance(x, x, reference=r) == pytest.approx(0.0, abs=1e-7)
    # eq. 2 sees neither: psi(x) = psi(-x) = psi(x / 2)
    assert pure_state_trace_distance(x, -x) == pytest.approx(0.0, abs=1e-7)
    assert pure_state_trace_distance(x, 0.5 * x) == pytest.approx(0.0, abs=1e-7)


def test_eq2_neighbours_are_not_bounded_but_signed_ones_are() -> None:
    """Eq. 2's neighbouring worst case is 2 (a token near zero turns orthogonal), which is why
    LDPT's d = 0.1 is an assumption; the signed encoding's is 0.1 at the default r."""
    x = np.zeros(N)
    x[0], x[1] = CLIP, 1e-3
    y = x.copy()
    y[0] = 0.0
    assert pure_state_trace_distance(x, y) == pytest.approx(2.0, abs=1e-6)
    r = signed_reference_for_distance(d=0.1, clip=CLIP)
    assert signed_pair_trace_distance(x, y, reference=r) <= 0.1


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"clip": 0.0, "reference": 1.0}, "clip"),
    ({"clip": 1.0, "reference": -1.0}, "reference"),
    ({"clip": float("nan"), "reference": 1.0}, "clip"),
])
def test_bad_ranges_are_refused(kwargs: dict, needle: str) -> None:
    with pytest.raises(InvalidInputError, match=needle):
        signed_neighbour_distance(**kwargs)
    with pytest.raises(InvalidInputError, match="d "):
        signed_reference_for_distance(d=2.5, clip=1.0)
