"""Rigorous calibration of the LDPT feature path: the depolarizing p (and Algorithm 1's gamma
and sigma, eqs. 7-8) whose ``rigorous`` eps for one unit is a target, the inverse of
:func:`qpriv.privacy.feature_path.accountant.rigorous_epsilon`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from qpriv.errors import ArgumentError, InvalidInputError, require_in_range, require_positive_int
from qpriv.privacy.budget import FEATURE_PATH_DELTA
from qpriv.privacy.calibration import (
    DEFAULT_ALPHA,
    DEFAULT_D,
    DEFAULT_D_MODEL,
    DEFAULT_DIM,
    DEFAULT_T,
    injection_sigma,
    lindblad_gamma,
)
from qpriv.privacy.feature_path.accountant import (
    RigorousEpsilon,
    evaluate_pairs,
    paper_equivalent_eps_s,
    paper_per_pass_claim,
)
from qpriv.privacy.feature_path.divergences import check_delta, rdp_epsilon, renyi_divergences
from qpriv.privacy.feature_path.pairs import NeighbourPair, sic_aligned_pair
from qpriv.privacy.feature_path.plan import (
    DEFAULT_EPOCHS,
    DEFAULT_SEQ_LEN,
    DEFAULT_SHOTS,
    DEFAULT_STRIDE,
    CompositionPlan,
    composition_plan,
)
from qpriv.privacy.feature_path.worst_pair import DEFAULT_RESTARTS, search_worst_pairs

COARSE_GRID_POINTS = 1 << 19
"""Grid size used inside the inverse calibration's bisection (pessimistic, so still an upper
bound; the final answer is evaluated on
:data:`~qpriv.privacy.feature_path.divergences.GRID_POINTS`)."""


@dataclass(frozen=True)
class RigorousCalibration:
    """The noise a target rigorous (eps, delta) needs for one unit, with the paper's chain.

    ``p`` (depolarizing probability), ``gamma = -ln(1-p)/t`` (eq. 7), ``sigma = p/sqrt(d_model)``
    (eq. 8) as in Algorithm 1; ``achieved`` is the rigorous eps at that p (<= the target);
    ``eps_s_paper`` the per-pass eps_s the paper's chain would assign to the same p.
    """

    eps_target: float
    delta: float
    unit: str
    p: float
    gamma: float
    sigma: float
    t: float
    d_model: int
    achieved: RigorousEpsilon
    eps_s_paper: float
    notes: tuple[str, ...] = ()

    def as_dict(self) -> dict:
        """A JSON-ready dict with the epsilons as claims."""
        return {
            "eps_target": replace(self.achieved.claim(), value=self.eps_target).to_json(),
            "unit": self.unit, "p": self.p, "gamma": self.gamma, "sigma": self.sigma,
            "t": self.t, "d_model": self.d_model, "achieved": self.achieved.as_dict(),
            "eps_s_paper": paper_per_pass_claim(self.eps_s_paper).to_json(),
            "notes": list(self.notes),
        }


def _worst_eps(gamma: float, plan: CompositionPlan, pairs: Sequence[NeighbourPair], *,
               delta: float, d: float, grid_points: int) -> RigorousEpsilon:
    return evaluate_pairs(plan, pairs, p=-math.expm1(-gamma), delta=delta, d=d, top=2,
                          grid_points=grid_points)


def _bisect_gamma(eps_of: Callable[[float], float], target: float, low: float, high: float,
                  rel_tol: float) -> float:
    """Smallest gamma (to ``rel_tol``) in [low, high] with eps_of(gamma) <= target; eps_of is
    decreasing and eps_of(high) <= target; returns ``low`` if eps_of(low) <= target already."""
    if eps_of(low) <= target:
        return low
    while high / low > 1.0 + rel_tol:
        mid = math.sqrt(low * high)
        if eps_of(mid) <= target:
            high = mid
        else:
            low = mid
    return high


def rigorous_calibration(
    *, eps_total: float, delta: float = FEATURE_PATH_DELTA, unit: str = "record",
    d: float = DEFAULT_D, dim: int = DEFAULT_DIM, d_model: int = DEFAULT_D_MODEL,
    n_shots: int = DEFAULT_SHOTS, stride: int = DEFAULT_STRIDE, seq_len: int = DEFAULT_SEQ_LEN,
    epochs: int = DEFAULT_EPOCHS, t: float = DEFAULT_T, alpha: float = DEFAULT_ALPHA,
    restarts: int = DEFAULT_RESTARTS, seed: int = 0, rel_tol: float = 1e-4,
    token_length: int | None = None,
) -> RigorousCalibration:
    """Inverse of :func:`~qpriv.privacy.feature_path.accountant.rigorous_epsilon`: the
    depolarizing p whose rigorous eps for ``unit`` is ``eps_total`` at ``delta``, then gamma
    and sigma by Algorithm 1's eqs. 7-8.

    eps is decreasing in p for every pair (E_p2 = E_q o E_p1 when (1-p2) = (1-q)(1-p1): more
    noise is a post-processing), so a bisection on the Lindblad rate ``gamma t = -ln(1-p)``
    finds it: first on the RDP bound (an upper bound, so its answer is enough noise), then on
    the PLD of the worst pairs just below that rate, and finally a fresh worst-pair
    search at the answer checks it (repeated with the new candidates if it moved eps above the
    target). The result errs on the side of more noise, within ``rel_tol`` of the rate.
    """
    eps_total = require_in_range("eps_total", eps_total, low=0.0,
                                 hint="a privacy budget must be > 0")
    delta = check_delta(delta)
    t = require_in_range("t (evolution time)", t, low=0.0)
    d_model = require_positive_int("d_model", d_model)
    rel_tol = require_in_range("rel_tol", rel_tol, low=0.0, high=0.1)
    if unit == "token-training":
        raise InvalidInputError("unit = 'token-training' is not offered for calibration; "
                                "use token, window or record")
    plan = composition_plan(unit, n_shots=n_shots, dim=dim, stride=stride, seq_len=seq_len,
                            epochs=epochs, token_length=token_length)
    start = time.perf_counter()
    rate_low, rate_high = 1e-4, 40.0

    def rdp_of(pairs: Sequence[NeighbourPair]) -> Callable[[float], float]:
        def eps(rate: float) -> float:
            p = -math.expm1(-rate)
            curves = np.array([renyi_divergences(*pair.distributions(p=p)) for pair in pairs])
            return rdp_epsilon(curves.max(axis=0), count=plan.count, delta=delta)
        return eps

    seed_pairs = [sic_aligned_pair(p=0.5, d=d, dim=dim)]
    if rdp_of(seed_pairs)(rate_high) > eps_total:
        raise ArgumentError(
            f"{{eps_total}} = {eps_total:g} at {{delta}} = {delta:g} is below what p = "
            f"1 - e^-40 gives for the {unit} unit; choose a larger {{eps_total}} or {{delta}}"
        )
    rate = _bisect_gamma(rdp_of(seed_pairs), eps_total, rate_low, rate_high, 1e-3)
    pairs = search_worst_pairs(p=-math.expm1(-rate), d=d, dim=dim, count=plan.count,
                               delta=delta, restarts=restarts, seed=seed)

    def pld_of(rate: float) -> float:
        return _worst_eps(rate, plan, pairs, delta=delta, d=d,
                          grid_points=COARSE_GRID_POINTS).eps

    high = _bisect_gamma(rdp_of(pairs), eps_total, rate_low, rate_high, 1e-3)
    low = 0.9 * high
    while low > rate_low and pld_of(low) <= eps_total:
        low *= 0.5
    notes: list[str] = []
    if low <= rate_low:
        notes.append(f"eps_total is met at the smallest rate tried (gamma t = {rate_low:g})")
        rate = rate_low
    else:
        rate = _bisect_gamma(pld_of, eps_total, low, high, rel_tol)
    for attempt in range(4):
        p = -math.expm1(-rate)
        pairs += search_worst_pairs(p=p, d=d, dim=dim, count=plan.count, delta=delta,
                                    restarts=restarts, seed=seed + attempt + 1)
        achieved = evaluate_pairs(plan, pairs, p=p, delta=delta, d=d)
        if achieved.eps <= eps_total:
            break
        notes.append(f"check {attempt + 1}: eps {achieved.eps:.6g} > target at p = {p:.6g} "
                     "(new worst pair or finer grid); more noise")
        upper = 2.0 * rate
        while pld_of(upper) > eps_total:
            upper *= 2.0
        rate = max(_bisect_gamma(pld_of, eps_total, rate, upper, rel_tol),
                   rate * (1.0 + 10.0 * rel_tol))
    else:
        raise InvalidInputError(
            f"could not calibrate p for eps_total = {eps_total:g}: the worst-pair search kept "
            "finding worse pairs; increase restarts"
        )
    achieved = replace(achieved, seconds=time.perf_counter() - start)
    return RigorousCalibration(
        eps_target=eps_total, delta=delta, unit=unit, p=p, gamma=lindblad_gamma(p, t),
        sigma=injection_sigma(p, d_model), t=t, d_model=d_model, achieved=achieved,
        eps_s_paper=paper_equivalent_eps_s(p=p, d=d, dim=dim, alpha=alpha), notes=tuple(notes),
    )
