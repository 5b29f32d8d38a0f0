"""The classical Gaussian mechanism (LDPT paper eq. 1), used by DP-Input and Bottleneck-DP."""

from __future__ import annotations

import math

from qpriv.errors import require_in_range


def gaussian_sigma(*, eps: float, delta: float, sensitivity: float = 1.0) -> float:
    """Eq. 1: ``sigma = sqrt(2 ln(1.25/delta)) Delta / eps`` gives (eps, delta)-DP.

    The classical analysis (Dwork and Roth, Theorem A.1) proves it only for ``eps < 1``; the
    paper also applies it at eps = 5, which this function reproduces but the result then
    carries no guarantee. 52.99 at eps = 0.1, delta = 1e-6, Delta = 1 (Table 6).
    """
    eps = require_in_range("eps", eps, low=0.0, hint="a privacy budget must be > 0")
    delta = require_in_range(
        "delta", delta, low=0.0, high=1.0, high_inclusive=False,
        hint="delta is a probability in (0, 1), typically 1e-6",
    )
    sensitivity = require_in_range("sensitivity", sensitivity, low=0.0)
    return math.sqrt(2 * math.log(1.25 / delta)) * sensitivity / eps

