"""Algorithm 1 of the LDPT paper: from a per-pass budget eps_s to the noise parameters.

``eps_s -> eps_ch = alpha eps_s -> p (eq. 6) -> gamma (eq. 7) -> sigma (eq. 8)``, and the
measurement budget eps_me from the hybrid composition (eq. 5). This is ``paper`` accounting: the
epsilons here are local eps-QDP per pass under the bounded trace-distance neighbourhood ``d``.
"""

from __future__ import annotations

import math
import sys
from dataclasses import asdict, dataclass, field

from qpriv.errors import InvalidInputError, require_in_range
from qpriv.privacy.claims import Accounting, Kind
from qpriv.privacy.theorems import check_dim, check_p, check_trace_distance

#: The paper's defaults (section 4 and 7.2).
DEFAULT_ALPHA = 0.8
DEFAULT_D = 0.1
DEFAULT_DIM = 16
DEFAULT_T = 1.0
DEFAULT_D_MODEL = 128

#: How the two fidelity columns differ, for reports that print both.
FIDELITY_NOTE = (
    "fidelity is <psi|E_p(psi)|psi> = 1 - p + p/D of the calibrated channel; fidelity_paper is "
    "Table 7's printed value, which does not match that channel below eps_s = 5"
)

#: Table 7's fidelity column as printed, keyed by eps_s. These are not the
#: fidelities of the depolarizing channel the calibration assumes (except at eps_s = 5.0).
PAPER_TABLE7_FIDELITY = {0.1: 0.617, 0.5: 0.713, 1.0: 0.804, 5.0: 0.974}


MAX_EPS = 700.0
"""The largest budget the paper's formulas take: e^eps stays finite in float64, and the channel
calibrated for it still adds noise (p is about 1e-243 at eps_s = 700)."""


def check_eps(name: str, eps: float) -> float:
    """Return a privacy budget if it is a finite number in (0, :data:`MAX_EPS`]."""
    return require_in_range(name, eps, low=0.0, high=MAX_EPS,
                            hint=f"a privacy budget must be > 0, and above {MAX_EPS:g} e^eps "
                                 "overflows and the channel adds no noise")


def depolarizing_p(*, eps_ch: float, d: float = DEFAULT_D, dim: int = DEFAULT_DIM) -> float:
    """Eq. 6: ``p = d D / (e^{eps_ch} - 1 + d D)``, the inverse of Theorem 1 (eq. 4)."""
    eps_ch = check_eps("eps_ch", eps_ch)
    dD = check_trace_distance(d) * check_dim(dim)
    return dD / (math.expm1(eps_ch) + dD)


def lindblad_gamma(p: float, t: float = DEFAULT_T) -> float:
    """Eq. 7: ``gamma = -ln(1 - p) / t``, the Lindblad rate whose evolution for time t is E_p.

    ``p = 1`` (full depolarization) needs an infinite rate and raises.
    """
    p = require_in_range(
        "p (depolarizing probability)", p, low=0.0, low_inclusive=True, high=1.0,
        high_inclusive=False, hint="p = 1 needs an infinite Lindblad rate",
    )
    t = require_in_range("t (evolution time)", t, low=0.0)
    return -math.log1p(-p) / t


def injection_sigma(p: float, d_model: int = DEFAULT_D_MODEL) -> float:
    """Eq. 8: ``sigma = p / sqrt(d_model)``, the scale of the three-point injection."""
    p = check_p(p)
    require_in_range("d_model", d_model, low=1.0, low_inclusive=True)
    return p / math.sqrt(d_model)


def depolarized_fidelity(p: float, dim: int) -> float:
    """Fidelity ``<psi| E_p(|psi><psi|) |psi> = 1 - p + p / D`` of a pure state with its
    depolarized image (the true value, beside Table 7's printed one)."""
    return 1.0 - check_p(p) + p / check_dim(dim)


def measurement_budget(*, eps_s: float, eps_ch: float) -> float | None:
    """Eq. 5 solved for the measurement budget: ``eps_me = 1 - (1 - eps_s) / (1 - eps_ch)``.

    Returns ``None`` when the hybrid composition is undefined (``eps_ch >= 1``: the formula only
    makes sense below 1) or when it would give a negative budget (``eps_s < eps_ch``);
    :func:`calibrate` says which.
    """
    if eps_ch >= 1.0 or eps_s < eps_ch:
        return None
    return 1.0 - (1.0 - eps_s) / (1.0 - eps_ch)


@dataclass(frozen=True)
class Calibration:
    """The noise parameters Algorithm 1 derives from a per-pass budget (``paper`` accounting).

    Attributes follow Table 7: ``eps_s`` (local eps-QDP per pass), ``eps_ch`` (channel share),
    ``eps_me`` (measurement share, ``None`` where undefined, see ``notes``), ``p``, ``gamma``,
    ``sigma``, the true channel ``fidelity`` and, where Table 7 prints one, ``fidelity_paper``.
    """

    eps_s: float
    eps_ch: float
    eps_me: float | None
    p: float
    gamma: float
    sigma: float
    fidelity: float
    fidelity_paper: float | None
    d: float
    dim: int
    t: float
    alpha: float
    d_model: int
    notes: tuple[str, ...] = field(default=())

    kind = Kind.LOCAL_QDP
    accounting = Accounting.PAPER

    def as_dict(self) -> dict:
        """A JSON-ready dict, with the epsilon's kind and accounting labelled."""
        out = asdict(self)
        out["notes"] = list(self.notes)
        out["kind"] = self.kind
        out["accounting"] = self.accounting
        return out


def calibrate(
    eps_s: float,
    *,
    d: float = DEFAULT_D,
    dim: int = DEFAULT_DIM,
    t: float = DEFAULT_T,
    alpha: float = DEFAULT_ALPHA,
    d_model: int = DEFAULT_D_MODEL,
) -> Calibration:
    """Algorithm 1: calibrate the channel, the measurement share and the injection from eps_s.

    >>> c = calibrate(0.1)
    >>> round(c.p, 4), round(c.gamma, 3), round(c.sigma, 4), round(c.eps_me, 4)
    (0.9505, 3.006, 0.084, 0.0217)
    """
    eps_s = check_eps("eps_s", eps_s)
    alpha = require_in_range("alpha", alpha, low=0.0, high=1.0,
                             hint="alpha is the channel's share of eps_s")
    eps_ch = alpha * eps_s
    p = depolarizing_p(eps_ch=eps_ch, d=d, dim=dim)
    if p >= 1.0:
        smallest = 4 * check_trace_distance(d) * dim * sys.float_info.epsilon / alpha
        raise InvalidInputError(
            f"eps_s = {eps_s:g} is too small: the channel would have to depolarize fully "
            f"(p = dD / (e^(alpha eps_s) - 1 + dD) rounds to 1, an infinite Lindblad rate); "
            f"use eps_s >= {smallest:.1g}"
        )
    notes: list[str] = []
    eps_me = measurement_budget(eps_s=eps_s, eps_ch=eps_ch)
    if eps_me is None:
        notes.append(
            f"eps_me undefined: eps_ch = {eps_ch:g} >= 1, where Theorem 3's hybrid composition "
            "1-(1-eps_ch)(1-eps_me) has no meaning"
        )
    fidelity_paper = next(
        (v for k, v in PAPER_TABLE7_FIDELITY.items() if math.isclose(k, eps_s)), None
    )
    if dim != DEFAULT_DIM:
        fidelity_paper = None
    return Calibration(
        eps_s=eps_s, eps_ch=eps_ch, eps_me=eps_me, p=p, gamma=lindblad_gamma(p, t),
        sigma=injection_sigma(p, d_model), fidelity=depolarized_fidelity(p, dim),
        fidelity_paper=fidelity_paper, d=d, dim=dim, t=t, alpha=alpha, d_model=d_model,
        notes=tuple(notes),
    )
