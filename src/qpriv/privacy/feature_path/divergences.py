"""The exact privacy quantities of one discrete pair of outcome distributions: its privacy
losses, its Renyi divergences (RDP) and its privacy-loss distribution (PLD), composed.

Composition. The pair's exact single-shot distributions are turned into a privacy-loss
distribution with dp-accounting's pessimistic connect-the-dots discretisation (a dominating pair:
merging its grid outcomes gives back the exact pair, so every eps it reports is an upper bound;
dp-accounting's own ``from_two_probability_mass_functions`` rounds every loss up to the grid,
which adds one grid step per composed shot, too much for 27 million shots). The unit's count is
composed in stages (shots, then tokens, then epochs) with dp-accounting's FFT self-composition.
The cross-check is the exact Renyi divergence of the discrete pair, composed additively and
converted with dp-accounting's RDP conversion (always at or above the PLD value).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from dp_accounting.pld.privacy_loss_distribution import PrivacyLossDistribution
from dp_accounting.rdp.rdp_privacy_accountant import compute_epsilon
from scipy.special import logsumexp

from qpriv.errors import require_in_range

RDP_ORDERS = 1.0 + np.geomspace(1e-2, 1e4, 161)
"""Renyi orders of the RDP cross-check (dp-accounting's conversion needs orders above 1.01)."""

TAIL_MASS_TRUNCATION = 1e-15
"""Mass cut from the PLD's tails at each composition stage (added to the infinite loss)."""

GRID_POINTS = 1 << 21
"""Target size of the composed PLD grid; the discretisation interval is chosen from it."""


def check_delta(delta: float) -> float:
    """``delta`` if it is a probability in (0, 1).

    Raises:
        InvalidInputError: ``delta`` outside (0, 1).
    """
    return require_in_range(
        "delta", delta, low=0.0, high=1.0, high_inclusive=False,
        hint="delta is a probability in (0, 1), typically 1e-5",
    )


# --- exact quantities of a discrete pair --------------------------------------------------------

def privacy_losses(P: np.ndarray, Q: np.ndarray) -> np.ndarray:
    """The single-shot privacy losses ``ln(P_k / Q_k)``."""
    return np.log(P) - np.log(Q)


def renyi_divergences(P: np.ndarray, Q: np.ndarray,
                      orders: np.ndarray = RDP_ORDERS) -> np.ndarray:
    """Exact Renyi divergences ``ln(sum_k P_k^a Q_k^(1-a)) / (a - 1)``, max of both directions.

    Written here because no library computes the RDP of an arbitrary discrete pair
    (dp-accounting and Opacus ship it for their own mechanisms only). With L = ln(P/Q) the sum
    is ``sum_k Q_k e^(a L_k) = 1 + sum_k Q_k expm1(a L_k)``, evaluated with log1p (accurate when
    the pair is nearly equal, as at high noise) unless a L is large enough to overflow.
    """
    losses = privacy_losses(P, Q)
    a = np.asarray(orders, dtype=float)[:, None]
    out = []
    for base, signed in ((Q, losses), (P, -losses)):
        scaled = a * signed[None, :]
        safe = np.abs(scaled).max(axis=1) < 700.0
        small = np.log1p(np.sum(base * np.expm1(np.minimum(scaled, 700.0)), axis=1))
        large = logsumexp(scaled + np.log(base)[None, :], axis=1)
        out.append(np.where(safe, small, large))
    return np.maximum(np.maximum(out[0], out[1]) / (a[:, 0] - 1.0), 0.0)


def rdp_epsilon(rdp: np.ndarray, *, count: int, delta: float,
                orders: np.ndarray = RDP_ORDERS) -> float:
    """eps at delta of ``count`` compositions of a mechanism with Renyi curve ``rdp``, converted
    with dp-accounting's RDP-to-(eps, delta) conversion."""
    eps, _ = compute_epsilon(list(orders), list(count * np.asarray(rdp)), delta)
    return float(eps)


# --- privacy-loss distributions ---------------------------------------------------------------

def choose_discretization(P: np.ndarray, Q: np.ndarray, count: int, *,
                          grid_points: int = GRID_POINTS) -> float:
    """The PLD grid step for ``count`` compositions of the pair.

    Splitting a loss between two grid points adds at most step^2 / 4 to its variance, so the
    composed loss's variance grows by the factor ``1 + step^2 / (4 Var)`` whatever the count:
    the step aims at 1/32 of the single-shot loss's standard deviation (0.02 % more variance),
    but is never finer than the composed loss's spread (``count KL + 12 sqrt(count Var)``) over
    ``grid_points``, nor than 1/8192 of the single-shot loss range. Any step gives an upper bound
    (connect-the-dots is pessimistic); a coarser one only gives a larger eps.
    """
    losses = privacy_losses(P, Q)
    span = float(losses.max() - losses.min())
    if span == 0.0:
        return 1e-4
    mean = max(float(np.sum(P * losses)), float(np.sum(-Q * losses)))
    var = max(float(np.sum(P * losses**2)) - float(np.sum(P * losses)) ** 2,
              float(np.sum(Q * losses**2)) - float(np.sum(Q * losses)) ** 2, 0.0)
    width = count * mean + 12.0 * math.sqrt(count * var) + span
    return max(min(math.sqrt(var) / 32.0, span / 64.0), width / grid_points, span / 8192.0)


def connect_dots_masses(P: np.ndarray, Q: np.ndarray, step: float) -> dict[int, float]:
    """Pessimistic connect-the-dots PMF of the loss ln(P/Q) under P on the grid ``step * i``.

    Each outcome's mass w = P_k at loss l in [a, b] (adjacent grid points) is split into
    ``w expm1(b - l) / expm1(b - a)`` at a and the rest at b. This keeps the mass under Q
    (``w e^-l``) and the hockey-stick divergence at every grid point exactly, and merging the two
    grid outcomes gives back the original one, so the grid pair dominates the exact pair
    (Doroshenko et al. 2022, Algorithm 1). dp-accounting implements the same PMF
    (``pld_pmf.create_pmf_pessimistic_connect_dots``) from differences of hockey-stick values;
    at the fine grids that 27 million compositions need those differences lose all precision
    (the composed eps then drifts upwards), so the split is written here per outcome.
    """
    losses = privacy_losses(P, Q)
    lower = np.floor(losses / step)
    fraction = np.expm1((lower + 1) * step - losses) / math.expm1(step)
    at_lower = P * np.clip(fraction, 0.0, 1.0)
    first = int(lower.min())
    index = (lower - first).astype(np.int64)
    masses = (np.bincount(index, weights=at_lower, minlength=index.max() + 2)
              + np.bincount(index + 1, weights=P - at_lower, minlength=index.max() + 2))
    return {first + i: float(m) for i, m in enumerate(masses) if m > 0.0}


def pld_from_pair(P: np.ndarray, Q: np.ndarray, *, step: float) -> PrivacyLossDistribution:
    """The single-shot PLD of the pair, both directions (remove: P over Q; add: Q over P),
    discretised by :func:`connect_dots_masses` (no outcome has zero probability for p > 0, so
    there is no infinite loss)."""
    return PrivacyLossDistribution.create_from_rounded_probability(
        connect_dots_masses(P, Q, step), 0.0, step, pessimistic_estimate=True,
        rounded_probability_mass_function_add=connect_dots_masses(Q, P, step),
        infinity_mass_add=0.0, symmetric=False,
    )


def compose_staged(pld: PrivacyLossDistribution,
                   factors: Sequence[tuple[str, int]]) -> PrivacyLossDistribution:
    """Self-compose stage by stage (shots, tokens, epochs): each FFT stage's Chernoff truncation
    bounds then fit the stage, so 27 million compositions take seconds."""
    for _, times in factors:
        if times > 1:
            pld = pld.self_compose(times, tail_mass_truncation=TAIL_MASS_TRUNCATION)
    return pld


def pld_epsilon(P: np.ndarray, Q: np.ndarray, *, factors: Sequence[tuple[str, int]],
                delta: float, grid_points: int = GRID_POINTS) -> tuple[float, float]:
    """eps at delta of the pair composed ``prod(factors)`` times; returns (eps, grid step)."""
    count = math.prod(n for _, n in factors)
    step = choose_discretization(P, Q, count, grid_points=grid_points)
    composed = compose_staged(pld_from_pair(P, Q, step=step), factors)
    return float(composed.get_epsilon_for_delta(delta)), step

