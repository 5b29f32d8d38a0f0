"""Composition of a per-pass budget over T passes (LDPT paper section 6.1, ``paper`` accounting).

The results are composed local eps-QDP budgets under the same bounded trace-distance
neighbourhood, not a global add/remove-one-record (eps, delta)-DP guarantee (paper section 6.1).
"""

from __future__ import annotations

import math
import sys

from qpriv.errors import require_in_range, require_positive_int


def basic_composition(eps: float, *, epochs: int) -> float:
    """Eq. 16: ``eps_train = T eps_s``."""
    eps = require_in_range("eps_s", eps, low=0.0, hint="a privacy budget must be > 0")
    return require_positive_int("epochs", epochs) * eps


def advanced_composition(eps: float, *, epochs: int, delta_prime: float = 1e-6) -> float:
    """Eq. 17 (advanced composition, Dwork-Rothblum-Vadhan):
    ``eps_train = eps sqrt(2 T ln(1/delta')) + T eps (e^eps - 1)``, holding with ``delta'``.

    Table 1: 2.56 at eps_s = 0.1, T = 20, delta' = 1e-6.
    """
    eps = require_in_range("eps_s", eps, low=0.0, hint="a privacy budget must be > 0")
    delta_prime = require_in_range(
        "delta_prime", delta_prime, low=0.0, high=1.0, high_inclusive=False,
        hint="delta' is a probability in (0, 1), typically 1e-6",
    )
    T = require_positive_int("epochs", epochs)
    if eps > math.log(sys.float_info.max):  # e^eps overflows: the bound promises nothing
        return math.inf
    return eps * math.sqrt(2 * T * math.log(1 / delta_prime)) + T * eps * math.expm1(eps)
