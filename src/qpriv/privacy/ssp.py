"""Sufficient-statistics perturbation (SSP) for private linear regression.

A ridge regression of targets Y on features Phi needs only two statistics,

    A = sum_i phi_i phi_i^T   (d x d, symmetric)     and     B = sum_i phi_i y_i^T   (d x k),

so releasing (A + E_A, B + E_B) with Gaussian noise, repairing A to be positive semi-definite
and solving ``(A + lambda I) W = B`` gives a DP estimator whose every forecast is
post-processing (Wang 2018, "Revisiting differentially private linear regression: optimal and
adaptive prediction & estimation in linear regression", AdaSSP; its ridge grows with the noise,
see :func:`noise_scaled_ridge`).

The pair is one Gaussian mechanism: with noise stds sigma_A, sigma_B and L2 (Frobenius)
sensitivities Delta_A, Delta_B, the concatenated release ``(A / sigma_A, B / sigma_B)`` has
unit noise and L2 sensitivity ``sqrt((Delta_A / sigma_A)^2 + (Delta_B / sigma_B)^2)``, so it is
the Gaussian mechanism with noise multiplier

    z = 1 / sqrt((Delta_A / sigma_A)^2 + (Delta_B / sigma_B)^2),

calibrated exactly by the analytic Gaussian mechanism (Balle & Wang 2018, "Improving the
Gaussian mechanism for differential privacy: analytical calibration and optimal denoising",
Theorem 8; dp-accounting's :func:`dp_accounting.get_sigma_gaussian` implements it).

A is released symmetric: its upper triangle (diagonal included) gets independent noise and is
mirrored. The released vector is the upper triangle, whose L2 change is
``sqrt((||dA||_F^2 + sum_i dA_ii^2) / 2) <= ||dA||_F``, so the Frobenius bound is a valid
(slightly conservative) sensitivity for it.

Sensitivities (derived in :func:`window_sensitivities` and :func:`record_sensitivities`):

* window unit (one training window, i.e. ``rows_per_unit`` rows, added or removed), with each
  row projected onto balls ``||phi|| <= c_x``, ``||y|| <= c_y``;
* record unit (one value of the underlying series replaced within [-R, R]) for features and
  targets that are fixed linear maps M, Q of the clipped window, either as they are
  (:func:`record_sensitivities`, from the Gram spread of M and Q) or projected onto balls
  (:func:`record_sensitivities_projected`, from the column norms): a record lies in many rows,
  and the bound comes from how much each of its positions moves each row, not from group
  privacy over the L + H windows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import dp_accounting
import numpy as np

from qpriv.errors import InvalidInputError, require_in_range, require_positive_int
from qpriv.privacy.samplers import NoiseSampler, as_sampler

__all__ = [
    "SSPNoise",
    "calibrate_ssp",
    "composed_noise_multiplier",
    "gaussian_epsilon_pld",
    "gaussian_noise_multiplier",
    "gram_spread",
    "max_norm_on_box",
    "noise_scaled_ridge",
    "perturb",
    "psd_floor",
    "record_sensitivities",
    "record_sensitivities_projected",
    "ridge_solve",
    "split_noise_multiplier",
    "ssp_noise",
    "symmetric_gaussian",
    "window_sensitivities",
]


def _positive(name: str, value: float, hint: str = "") -> float:
    return require_in_range(name, value, low=0.0, hint=hint or f"{name} must be > 0")


def _delta(delta: float) -> float:
    return require_in_range("delta", delta, low=0.0, high=1.0, high_inclusive=False,
                            hint="delta is a probability in (0, 1), typically 1e-6")


# --------------------------------------------------------------------------------------------
# Sensitivities
# --------------------------------------------------------------------------------------------


def window_sensitivities(*, rows_per_unit: int, feature_clip: float,
                         target_clip: float) -> tuple[float, float]:
    """Frobenius sensitivities (Delta_A, Delta_B) when one unit adds or removes rows.

    One unit (e.g. a training window of C channels, each channel one row of a channel-
    independent model) adds ``n = rows_per_unit`` rows whose features and targets are projected
    onto the balls ``||phi|| <= c_x`` and ``||y|| <= c_y`` (the projection is 1-Lipschitz and
    maps every row into the ball). Then

        ||dA||_F = ||sum_j phi_j phi_j^T||_F <= sum_j ||phi_j||^2 <= n c_x^2,
        ||dB||_F = ||sum_j phi_j y_j^T||_F <= sum_j ||phi_j|| ||y_j|| <= n c_x c_y,

    with equality when the n rows are equal and on the spheres (so the bounds are tight).
    """
    n = require_positive_int("rows_per_unit", rows_per_unit)
    c_x = _positive("feature_clip", feature_clip)
    c_y = _positive("target_clip", target_clip)
    return n * c_x * c_x, n * c_x * c_y


def gram_spread(matrix: np.ndarray) -> float:
    """``S(M) = sum_{p, q} |m_p . m_q|`` over the columns m_p of M: the entrywise absolute sum
    of M^T M. It bounds ``||M z||^2 <= R^2 S(M)`` for every z in the box [-R, R]^n, and
    ``||sum_p m_p b_p^T||_F^2 <= c^2 S(M)`` for any vectors ||b_p|| <= c (see
    :func:`record_sensitivities`)."""
    m = np.asarray(matrix, dtype=np.float64)
    if m.ndim != 2:
        raise InvalidInputError(f"gram_spread needs a 2-D matrix, got shape {m.shape}")
    return float(np.abs(m.T @ m).sum())


def max_norm_on_box(matrix: np.ndarray, *, bound: float) -> float:
    """Upper bound on ``max ||M z||`` over z in [-R, R]^n: ``R sqrt(S(M))``, since
    ``||M z||^2 = sum_{p,q} z_p z_q (M^T M)_{pq} <= R^2 sum_{p,q} |(M^T M)_{pq}|``."""
    return _positive("bound", bound) * math.sqrt(gram_spread(matrix))


def _window_maps(feature_map: np.ndarray, target_map: np.ndarray, *,
                 bound: float) -> tuple[np.ndarray, np.ndarray, float]:
    """The two maps of a window as float arrays, checked to act on one window length, and the
    value range R > 0."""
    m = np.asarray(feature_map, dtype=np.float64)
    q = np.asarray(target_map, dtype=np.float64)
    if m.ndim != 2 or q.ndim != 2 or m.shape[1] != q.shape[1]:
        raise InvalidInputError(
            f"feature_map (d, n) and target_map (k, n) must act on the same window length n; "
            f"got shapes {m.shape} and {q.shape}")
    return m, q, _positive("bound", bound, hint="the value clipping range R must be > 0")


def record_sensitivities(feature_map: np.ndarray, target_map: np.ndarray, *,
                         bound: float) -> tuple[float, float]:
    """Frobenius sensitivities (Delta_A, Delta_B) at the record unit, for linear rows.

    Setting: a series (values clipped to [-R, R]) is cut into sliding windows z_k (length n);
    row k has features ``phi_k = M z_k`` and targets ``y_k = Q z_k`` (M: d x n, Q: k x n, fixed
    and data-independent). Replacing one value of the series by another in [-R, R] changes it by
    delta, |delta| <= 2R, and changes the window z_k at position p_k by ``delta e_{p_k}``, in
    the windows k that contain it; their positions p_k are distinct, so they are a subset of
    the n positions. Write m_p, q_p for the columns of M, Q and ``z_bar = (z + z') / 2`` (again
    in the box). Expanding the products,

        phi' phi'^T - phi phi^T = delta (m_p a^T + a m_p^T),        a = M z_bar,
        phi' y'^T  - phi y^T    = delta (m_p b^T + a q_p^T),         b = Q z_bar.

    For vectors with ``||b_p|| <= c``, ``||sum_p m_p b_p^T||_F^2 = sum_{p,q} (m_p . m_q)
    (b_p . b_q) <= c^2 S(M)``, with ``S(M) = sum_{p,q} |m_p . m_q|`` (:func:`gram_spread`), and
    ``||a|| <= R sqrt(S(M))``, ``||b|| <= R sqrt(S(Q))`` on the box (:func:`max_norm_on_box`).
    Summing over the windows that contain the record, with ``||X + X^T||_F <= 2 ||X||_F``:

        Delta_A <= 2 (2R) (R sqrt(S(M))) sqrt(S(M))                    = 4 R^2 S(M),
        Delta_B <= (2R) (R sqrt(S(Q)) sqrt(S(M)) + R sqrt(S(M)) sqrt(S(Q))) = 4 R^2 sqrt(S(M) S(Q)).

    This is a bound on the statistics themselves: it grows with how much the windows' feature
    columns overlap (S(M)), not with the number L + H of windows a record lies in times a
    per-window bound. It is tight when the Gram entries share one sign and the series sits at
    the box's corners aligned with them, e.g. non-negative pooling maps and a constant series
    at R with one value moved from -R to R.
    """
    m, q, r = _window_maps(feature_map, target_map, bound=bound)
    s_m, s_q = gram_spread(m), gram_spread(q)
    return 4 * r * r * s_m, 4 * r * r * math.sqrt(s_m * s_q)


def record_sensitivities_projected(feature_map: np.ndarray, target_map: np.ndarray, *,
                                   bound: float, feature_clip: float,
                                   target_clip: float) -> tuple[float, float]:
    """Frobenius sensitivities (Delta_A, Delta_B) at the record unit, for linear rows that are
    then projected onto balls: ``phi_k = proj_{c_x}(M z_k)``, ``y_k = proj_{c_y}(Q z_k)``.

    Setting as in :func:`record_sensitivities` (values clipped to [-R, R], one value changed by
    delta, |delta| <= 2R, at position p_k of each window k that holds it; the positions are
    distinct). The projection is 1-Lipschitz, so ``||phi_k' - phi_k|| <= |delta| ||m_{p_k}||``
    and ``||y_k' - y_k|| <= |delta| ||q_{p_k}||``, and every row lies in its ball. Per window,

        ||phi' phi'^T - phi phi^T||_F = ||(phi' - phi) phi'^T + phi (phi' - phi)^T||_F
                                     <= 2 c_x ||phi' - phi||,
        ||phi' y'^T - phi y^T||_F     <= c_y ||phi' - phi|| + c_x ||y' - y||,

    and summing over the windows that hold the record (the triangle inequality over the
    statistic's terms, each weighted by how much that position moves the row):

        Delta_A <= 2 c_x (2R) T(M),     Delta_B <= 2R (c_y T(M) + c_x T(Q)),

    with ``T(M) = sum_p ||m_p||`` the sum of the column norms. Pooled features have small
    columns far back in the look-back, so T(M) stays near the number of pooled blocks however
    many windows hold a record; and the row clips c_x, c_y can sit near the rows' typical norms
    instead of the box's worst case R sqrt(S(M)) of :func:`record_sensitivities`.
    """
    m, q, r = _window_maps(feature_map, target_map, bound=bound)
    c_x = _positive("feature_clip", feature_clip)
    c_y = _positive("target_clip", target_clip)
    t_m = float(np.linalg.norm(m, axis=0).sum())
    t_q = float(np.linalg.norm(q, axis=0).sum())
    return 4 * r * c_x * t_m, 2 * r * (c_y * t_m + c_x * t_q)


# --------------------------------------------------------------------------------------------
# Calibration
# --------------------------------------------------------------------------------------------


Z_MARGIN = 1e-9
"""Relative margin added to the analytic Gaussian mechanism's noise multiplier (see
:func:`calibrate_ssp`)."""


@dataclass(frozen=True)
class SSPNoise:
    """Noise stds for (A, B) and how they were derived.

    ``noise_multiplier`` z is the std of the composed unit-sensitivity Gaussian mechanism; the
    pair spends ``share_a`` of ``1 / z^2`` on A: ``(Delta_A / sigma_A)^2 = share_a / z^2``.
    """

    sigma_a: float
    sigma_b: float
    sensitivity_a: float
    sensitivity_b: float
    noise_multiplier: float
    share_a: float
    eps: float
    delta: float

    def effective_noise_multiplier(self) -> float:
        """``1 / sqrt((Delta_A / sigma_A)^2 + (Delta_B / sigma_B)^2)`` (equals z)."""
        return 1.0 / math.hypot(self.sensitivity_a / self.sigma_a,
                                self.sensitivity_b / self.sigma_b)


def gaussian_noise_multiplier(*, eps: float, delta: float) -> float:
    """The smallest noise multiplier z of the Gaussian mechanism (sensitivity 1) that is
    (eps, delta)-DP: the analytic Gaussian mechanism (Balle & Wang 2018, Theorem 8, via
    dp-accounting's ``get_sigma_gaussian``) with the margin :data:`Z_MARGIN`."""
    eps = require_in_range("eps", eps, low=0.0, hint="a privacy budget must be > 0")
    delta = _delta(delta)
    # get_sigma_gaussian stops its root search within a tolerance, on either side: at eps 0.1
    # and 1 (delta 1e-6) the exact delta of its z is 1e-13 (relative) above the target. A
    # relative margin of 1e-9 on z puts it below in every case (about 2e-8 below), so the
    # claimed delta holds exactly, at no measurable cost in noise.
    return float(dp_accounting.get_sigma_gaussian(eps, delta)) * (1.0 + Z_MARGIN)


def split_noise_multiplier(noise_multiplier: float, shares: tuple[float, ...]) -> tuple[float, ...]:
    """Multipliers z_i of Gaussian releases that together spend one Gaussian mechanism of
    multiplier z: ``1 / z_i^2 = share_i / z^2`` with the shares summing to 1. Gaussian
    mechanisms compose exactly, adaptively, as one with ``1 / z^2 = sum_i 1 / z_i^2``
    (Dong, Roth & Su 2022, "Gaussian differential privacy", Corollary 3.3; the sensitivity-1
    Gaussian of multiplier z is 1/z-GDP); :func:`composed_noise_multiplier` is the inverse."""
    z = _positive("noise_multiplier", noise_multiplier)
    if not shares or any(not 0.0 < s <= 1.0 for s in shares) or abs(sum(shares) - 1.0) > 1e-12:
        raise InvalidInputError(f"budget shares {shares} must lie in (0, 1] and sum to 1")
    return tuple(z / math.sqrt(s) for s in shares)


def composed_noise_multiplier(multipliers: tuple[float, ...]) -> float:
    """The one Gaussian mechanism that releases with multipliers z_i compose to:
    ``1 / sqrt(sum_i 1 / z_i^2)`` (:func:`split_noise_multiplier`)."""
    return 1.0 / math.sqrt(sum(1.0 / _positive("noise_multiplier", z) ** 2 for z in multipliers))


def ssp_noise(*, sensitivity_a: float, sensitivity_b: float, noise_multiplier: float,
              share_a: float = 0.5, eps: float = math.nan, delta: float = math.nan) -> SSPNoise:
    """Noise stds for releasing (A, B) as one Gaussian mechanism of multiplier z:
    ``sigma_A = Delta_A z / sqrt(share_a)`` and ``sigma_B = Delta_B z / sqrt(1 - share_a)``
    (module docstring)."""
    d_a = _positive("sensitivity_a", sensitivity_a)
    d_b = _positive("sensitivity_b", sensitivity_b)
    z = _positive("noise_multiplier", noise_multiplier)
    share_a = require_in_range("share_a", share_a, low=0.0, high=1.0, high_inclusive=False,
                               hint="the share of the budget spent on A lies in (0, 1)")
    return SSPNoise(sigma_a=d_a * z / math.sqrt(share_a),
                    sigma_b=d_b * z / math.sqrt(1.0 - share_a),
                    sensitivity_a=d_a, sensitivity_b=d_b, noise_multiplier=z,
                    share_a=share_a, eps=eps, delta=delta)


def calibrate_ssp(*, sensitivity_a: float, sensitivity_b: float, eps: float, delta: float,
                  share_a: float = 0.5) -> SSPNoise:
    """Noise stds (sigma_A, sigma_B) that make releasing (A + E_A, B + E_B) (eps, delta)-DP.

    The analytic Gaussian mechanism (:func:`gaussian_noise_multiplier`) gives the smallest
    noise multiplier z with ``Phi(1/(2z) - eps z) - e^eps Phi(-1/(2z) - eps z) <= delta``; the
    pair is one Gaussian mechanism with that multiplier when ``sigma_A = Delta_A z /
    sqrt(share_a)`` and ``sigma_B = Delta_B z / sqrt(1 - share_a)`` (:func:`ssp_noise`).

    Raises:
        InvalidInputError: eps <= 0, delta outside (0, 1), a sensitivity <= 0 or share_a
            outside (0, 1).
    """
    eps = require_in_range("eps", eps, low=0.0, hint="a privacy budget must be > 0")
    delta = _delta(delta)
    _positive("sensitivity_a", sensitivity_a)
    _positive("sensitivity_b", sensitivity_b)
    require_in_range("share_a", share_a, low=0.0, high=1.0, high_inclusive=False,
                     hint="the share of the budget spent on A lies in (0, 1)")
    return ssp_noise(sensitivity_a=sensitivity_a, sensitivity_b=sensitivity_b,
                     noise_multiplier=gaussian_noise_multiplier(eps=eps, delta=delta),
                     share_a=share_a, eps=eps, delta=delta)


def gaussian_epsilon_pld(*, noise_multiplier: float, delta: float) -> float:
    """eps of one Gaussian mechanism (sensitivity 1, std ``noise_multiplier``) at ``delta``
    by dp-accounting's privacy-loss-distribution accountant: the independent check of
    :func:`calibrate_ssp`."""
    z = _positive("noise_multiplier", noise_multiplier)
    accountant = dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-4)
    accountant.compose(dp_accounting.GaussianDpEvent(z))
    return float(accountant.get_epsilon(_delta(delta)))


# --------------------------------------------------------------------------------------------
# Release and solve
# --------------------------------------------------------------------------------------------


def symmetric_gaussian(dim: int, *, sigma: float, rng: np.random.Generator) -> np.ndarray:
    """A symmetric d x d matrix whose upper triangle (diagonal included) is i.i.d.
    N(0, sigma^2), mirrored below: bare noise from a seeded generator (a release goes through
    :func:`perturb`, whose sampler sees the statistic it perturbs)."""
    dim = require_positive_int("dim", dim)
    return as_sampler(rng).symmetric_gaussian(np.zeros((dim, dim)), sigma=sigma)


def perturb(a: np.ndarray, b: np.ndarray, noise: SSPNoise, *,
            rng: np.random.Generator | NoiseSampler) -> tuple[np.ndarray, np.ndarray]:
    """The released pair: A plus symmetric Gaussian noise, B plus i.i.d. Gaussian noise, drawn
    by ``rng``: a seeded NumPy generator (reproducible) or a
    :class:`qpriv.privacy.samplers.NoiseSampler` (the vetted one for a release)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] != a.shape[1] or b.ndim != 2 or b.shape[0] != a.shape[0]:
        raise InvalidInputError(
            f"A must be d x d and B d x k; got shapes {a.shape} and {b.shape}")
    sampler = as_sampler(rng)
    noisy_a = sampler.symmetric_gaussian(a, sigma=noise.sigma_a)
    noisy_b = sampler.gaussian(b, sigma=noise.sigma_b)
    return noisy_a, noisy_b


def psd_floor(a: np.ndarray, *, floor: float = 0.0) -> np.ndarray:
    """The symmetric part of A with its eigenvalues raised to at least ``floor`` (>= 0): the
    nearest (Frobenius) matrix with spectrum >= floor. Post-processing of a released A."""
    floor = require_in_range("floor", floor, low=0.0, low_inclusive=True)
    sym = (np.asarray(a, dtype=np.float64) + np.asarray(a, dtype=np.float64).T) / 2
    values, vectors = np.linalg.eigh(sym)
    return (vectors * np.maximum(values, floor)) @ vectors.T


def noise_scaled_ridge(noise_sigma_a: float, dim: int, *, scale: float) -> float:
    """A ridge that grows with the noise on A, as in AdaSSP (Wang 2018, Algorithm 2): the
    spectral norm of a d x d symmetric Gaussian matrix of entry std sigma is about
    ``2 sigma sqrt(d)``, so ``lambda = scale * sigma_A * sqrt(d)`` keeps ``A + E + lambda I``
    well conditioned for ``scale`` around 2 or more. Data-independent given sigma_A."""
    dim = require_positive_int("dim", dim)
    return require_in_range("scale", scale, low=0.0, low_inclusive=True) * \
        float(noise_sigma_a) * math.sqrt(dim)


def ridge_solve(a: np.ndarray, b: np.ndarray, *, ridge: float) -> np.ndarray:
    """``W = (A + ridge I)^{-1} B`` for a PSD A (d x d) and B (d x k); ridge >= 0."""
    ridge = require_in_range("ridge", ridge, low=0.0, low_inclusive=True)
    a = np.asarray(a, dtype=np.float64)
    return np.linalg.solve(a + ridge * np.eye(a.shape[0]), np.asarray(b, dtype=np.float64))
