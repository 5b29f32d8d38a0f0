"""The LDPT paper's privacy theorems as pure functions of numbers (``paper`` accounting).

Every function here reproduces a formula of the paper exactly, including the ones that are
wrong; those say so, and why, in their docstring. What is provably true of the released features
is computed in :mod:`qpriv.privacy.feature_path` (``rigorous`` accounting), never here.

Conventions: ``d`` is the full trace norm ``||rho - rho'||_1`` in (0, 2]; ``dim`` is the Hilbert
space dimension ``D = 2**n``; epsilons are natural-log units.
"""

from __future__ import annotations

import math

from qpriv.errors import ArgumentError, require_in_range, require_positive_int


def check_dim(dim: int) -> int:
    """Return ``dim`` if it is a power of two >= 2 (a register of n >= 1 qubits), else raise."""
    if isinstance(dim, bool) or int(dim) != dim or dim < 2 or (int(dim) & (int(dim) - 1)):
        raise ArgumentError(
            f"{{dim}} = {ArgumentError.literal(dim)} is not a power of two >= 2; the Hilbert "
            "space of n qubits has dim = 2**n (2, 4, 8, 16, ...)"
        )
    return int(dim)


def check_trace_distance(d: float) -> float:
    """Return ``d`` if it is a valid full trace norm, in (0, 2]."""
    return require_in_range(
        "d", d, low=0.0, high=2.0,
        hint="d is a trace distance in the full trace norm, and ||rho - rho'||_1 of two "
             "states lies in (0, 2]",
    )


def check_p(p: float) -> float:
    """Return ``p`` if it is a depolarizing probability in [0, 1]."""
    return require_in_range(
        "p (depolarizing probability)", p, low=0.0, low_inclusive=True, high=1.0
    )


def channel_epsilon(*, p: float, d: float, dim: int) -> float:
    """Theorem 1 (eq. 4): the depolarizing channel E_p is eps_ch-QDP with
    ``eps_ch = ln(1 + (1 - p) d D / p)``.

    ``p = 0`` (no noise) gives ``inf``.
    """
    p, d, dim = check_p(p), check_trace_distance(d), check_dim(dim)
    if p == 0.0:
        return math.inf
    return math.log1p((1.0 - p) * d * dim / p)


def effective_epsilon(*, p: float, trace_distance: float, dim: int) -> float:
    """The paper's effective epsilon of a pair beyond the bound (section 6.2):
    ``eps_eff = ln(1 + (1 - p) ||rho - rho'||_1 D / p)``, Theorem 1 at the pair's own distance."""
    return channel_epsilon(p=p, d=trace_distance, dim=dim)


def measurement_epsilon_bound(*, d: float, n_shots: int) -> float:
    """Theorem 2 as printed (paper): ``eps_me <= ln(1 + d / sqrt(N_s))``.

    This bound shrinks as shots grow, which cannot hold (releasing more shots of the same state
    can only leak more). Reproduced for the paper's tables only; the ``rigorous``
    accountant composes single-shot measurements instead.
    """
    d = check_trace_distance(d)
    return math.log1p(d / math.sqrt(require_positive_int("n_shots", n_shots)))


def hybrid_composition(eps_ch: float, eps_me: float) -> float:
    """Theorem 3 (eq. 5): ``eps_s = 1 - (1 - eps_ch)(1 - eps_me)``.

    The formula only makes sense for both values below 1; outside that range this raises instead
    of returning a meaningless number.
    """
    for name, value in (("eps_ch", eps_ch), ("eps_me", eps_me)):
        require_in_range(
            name, value, low=0.0, low_inclusive=True, high=1.0, high_inclusive=False,
            hint="Theorem 3's hybrid composition 1-(1-a)(1-b) is only meaningful below 1",
        )
    return 1.0 - (1.0 - eps_ch) * (1.0 - eps_me)
