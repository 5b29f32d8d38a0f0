"""Trace distance of amplitude-encoded neighbours (LDPT paper section 6.2, eq. 18-19, Table 2).

All distances are the full trace norm ``||rho - rho'||_1`` in [0, 2]. For pure states
``||psi psi^T - phi phi^T||_1 = 2 sqrt(1 - <psi|phi>^2)``.

Note on eq. 18: ``2 tau ||x||_inf / ||x||_2^2`` is not a bound in general. Perturbing a
coordinate where ``x_i = 0`` of ``x = (1, ..., 1, 0)`` moves the state by about ``2 tau / ||x||_2``,
larger than eq. 18 by a factor ``||x||_2 / ||x||_inf``. The bound that does hold is the middle
term of eq. 19, ``2 tau / ||x||_2`` (the sine of the angle between x and x + v is at most
``||v||_2 / ||x||_2``). :func:`single_feature_trace_distances` reports both and counts the
pairs that exceed eq. 18.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from qpriv.errors import InvalidInputError, require_in_range


def pure_state_trace_distance(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Full trace norm between the amplitude encodings of real vectors ``x`` and ``y``
    (last axis), ``2 sqrt(1 - <psi|phi>^2)``, evaluated as ``2 ||phi - <psi|phi> psi||`` (the
    sine of the angle without the cancellation of 1 - <psi|phi>^2 near 1, which costs half the
    digits when the states are close, as the signed encoding's are)."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    psi = x / np.linalg.norm(x, axis=-1, keepdims=True)
    phi = y / np.linalg.norm(y, axis=-1, keepdims=True)
    overlap = np.sum(psi * phi, axis=-1, keepdims=True)
    return np.minimum(2.0 * np.linalg.norm(phi - overlap * psi, axis=-1), 2.0)


def eq18_bound(x: np.ndarray, tau: float) -> np.ndarray:
    """Eq. 18 as printed: ``2 tau ||x||_inf / ||x||_2^2`` (not a valid bound in general)."""
    x = np.asarray(x, dtype=np.float64)
    return 2.0 * tau * np.max(np.abs(x), axis=-1) / np.sum(x * x, axis=-1)


def norm_bound(x: np.ndarray, tau: float) -> np.ndarray:
    """The valid bound ``2 tau / ||x||_2`` on the trace distance after a change of norm tau."""
    return 2.0 * tau / np.linalg.norm(np.asarray(x, dtype=np.float64), axis=-1)


def eq19_approximation(tau: float, n_features: int) -> float:
    """Eq. 19's closing approximation ``2 tau / sqrt(C)`` (Table 2's "Analytical" column)."""
    return 2.0 * tau / math.sqrt(n_features)


@dataclass(frozen=True)
class TraceDistanceRow:
    """One row of Table 2 for a perturbation size ``tau``."""

    tau: float
    analytical: float
    empirical_max: float
    empirical_p95: float
    within_d: bool
    eq18_violations: int
    norm_bound_violations: int
    pairs: int


def single_feature_trace_distances(
    vectors: np.ndarray, *, tau: float, d: float = 0.1, rng: np.random.Generator
) -> TraceDistanceRow:
    """Table 2: perturb one randomly chosen feature of each vector by ``tau`` and measure the
    full trace distance between the amplitude encodings of the original and the perturbed one.

    ``within_d`` follows the paper's reading: the empirical maximum stays within ``d``.
    """
    vectors = np.asarray(vectors, dtype=np.float64)
    if vectors.ndim != 2 or vectors.shape[0] < 1:
        raise InvalidInputError(f"vectors must be a non-empty 2-D array, got shape {vectors.shape}")
    if not np.all(np.isfinite(vectors)):
        raise InvalidInputError("vectors contain NaN or infinite values")
    tau = require_in_range("tau", tau, low=0.0)
    keep = np.linalg.norm(vectors, axis=1) > 1e-12
    vectors = vectors[keep]
    feature = rng.integers(0, vectors.shape[1], size=vectors.shape[0])
    perturbed = vectors.copy()
    perturbed[np.arange(len(vectors)), feature] += tau
    dist = pure_state_trace_distance(vectors, perturbed)
    slack = 1e-12
    return TraceDistanceRow(
        tau=tau,
        analytical=eq19_approximation(tau, vectors.shape[1]),
        empirical_max=float(dist.max()),
        empirical_p95=float(np.percentile(dist, 95)),
        within_d=bool(dist.max() <= d),
        eq18_violations=int(np.sum(dist > eq18_bound(vectors, tau) + slack)),
        norm_bound_violations=int(np.sum(dist > norm_bound(vectors, tau) + slack)),
        pairs=len(vectors),
    )


# --- the signed encoding (the ``ldpt-signed`` feature path) -----------------------------------
#
# A token x in R^n, clipped to the public range [-c, c], is encoded with a fixed reference
# amplitude r > 0 as psi(x) = (x, r) / sqrt(||x||^2 + r^2) (padded with zeros to the register's
# 2n amplitudes; :func:`qpriv.quantum.states.signed_amplitudes`). Unlike eq. 2, psi(-x) != psi(x)
# and the norm is kept: (x, r) and (x', r) are parallel only when x = x'.
#
# Neighbours: x and x' differ in one coordinate i, x_i = a and x'_i = b with a, b in [-c, c]
# (one value of one channel replaced within the clipping range). Write u = (x, r) - a e_i, the
# part both vectors share, orthogonal to e_i, with m = ||u|| = sqrt(||x||^2 - a^2 + r^2) >= r.
# Both vectors lie in the plane of u and e_i, at angles atan(a / m) and atan(b / m) from u, so
# the angle between them is theta = |atan(a / m) - atan(b / m)| <= 2 atan(c / m) <= 2 atan(c / r)
# (equality iff a = -b = +-c and m = r, i.e. every other coordinate is 0). Pure states at angle
# theta have full trace norm 2 sqrt(1 - cos^2 theta) = 2 |sin theta|. Hence:
#
#   r >= c:  theta <= 2 atan(c / r) <= pi / 2 and sin is increasing there, so
#            d_max = 2 sin(2 atan(c / r)) = 4 c r / (c^2 + r^2),
#            reached by x = -c e_i, x' = +c e_i;
#   r <  c:  theta = pi / 2 is reachable (m = c, a = -c, b = c), so d_max = 2 (orthogonal).
#
# Inverse (r >= c): r = c (2 + sqrt(4 - d^2)) / d. At d = 0.1 (the LDPT paper's d), r = 39.99 c.


def signed_neighbour_distance(*, clip: float, reference: float) -> float:
    """The worst full trace norm between the signed encodings of neighbouring tokens (one
    coordinate replaced within [-c, c]): ``4 c r / (c^2 + r^2)`` for r >= c, else 2 (derived
    above; it plays the role of the LDPT paper's d in Theorem 1, eq. 4, and in the rigorous
    accounting, but is proved rather than assumed)."""
    clip = require_in_range("clip (public range c)", clip, low=0.0)
    reference = require_in_range("reference (amplitude r)", reference, low=0.0)
    if reference < clip:
        return 2.0
    return min(2.0, 4.0 * clip * reference / (clip * clip + reference * reference))


def signed_reference_for_distance(*, d: float, clip: float) -> float:
    """The reference amplitude r >= c whose neighbouring worst case is exactly ``d``:
    ``r = c (2 + sqrt(4 - d^2)) / d`` (the inverse of :func:`signed_neighbour_distance`)."""
    d = require_in_range("d (trace distance, full trace norm)", d, low=0.0, high=2.0,
                         hint="the full trace norm of two states lies in (0, 2]")
    clip = require_in_range("clip (public range c)", clip, low=0.0)
    return clip * (2.0 + math.sqrt(4.0 - d * d)) / d
