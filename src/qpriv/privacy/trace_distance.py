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
    (last axis), ``2 sqrt(1 - <psi|phi>^2)``."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    overlap = np.sum(x * y, axis=-1) / (np.linalg.norm(x, axis=-1) * np.linalg.norm(y, axis=-1))
    return 2.0 * np.sqrt(np.clip(1.0 - overlap**2, 0.0, 1.0))


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
