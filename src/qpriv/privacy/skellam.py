"""The Skellam mechanism: integer noise that several parties add in shares, and its accounting.

A Skellam variable ``Sk(mu) = Poisson(mu) - Poisson(mu)`` (mean 0, variance ``2 mu``) is closed
under sums: the sum of independent ``Sk(mu_i)`` is ``Sk(sum mu_i)``. So when each of m parties
adds ``Sk(mu / m)`` to its integer vector and only the sum is revealed (secure aggregation),
the sum carries exactly ``Sk(mu)``, the noise one trusted curator would add. That closure is why
qpriv's federated sums use it rather than the distributed discrete Gaussian, whose sum of
shares is only close to a discrete Gaussian and needs an extra term in its accounting (Kairouz,
Liu & Steinke 2021, "The Distributed Discrete Gaussian Mechanism for Federated Learning with
Secure Aggregation").

Accounting (Agarwal, Kairouz & Liu 2021, "The Skellam Mechanism for Differentially Private
Federated Learning", the Skellam mechanism's Renyi-DP bound): for an integer query whose
neighbouring values differ by a vector of L2 norm at most ``l2`` and L1 norm at most ``l1``,
adding ``Sk(mu)`` to every coordinate is ``(alpha, eps(alpha))``-RDP for every integer order
``alpha > 1`` with

    eps(alpha) <= alpha l2^2 / (4 mu)
                  + min( (2 alpha l2^2 + 6 l1) / (16 mu^2),  3 l1 / (4 mu) ).

(The paper's second term has ``2 alpha - 1``; ``2 alpha`` is larger, so this is an upper
bound.) The first term is the Gaussian mechanism's RDP at the same variance; the second, the
price of the integers, vanishes as ``mu`` grows. RDP composes by adding over releases and is
converted to (eps, delta) by dp-accounting's ``compute_epsilon`` (Balle et al. 2020's
conversion). The tests check the bound against the exact Renyi divergence of shifted Skellam
distributions.

Quantisation: a real statistic ``s`` is sent as ``round(gamma s)``. Rounding moves each of its
``dim`` coordinates by at most 1/2, so two neighbours' rounded values differ by at most
``gamma Delta + sqrt(dim)`` in L2 (:func:`quantised_sensitivity`); every integer vector
satisfies ``||v||_1 <= ||v||_2^2``, which bounds the L1 norm without a factor ``sqrt(dim)``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from dp_accounting.rdp.rdp_privacy_accountant import compute_epsilon

from qpriv.errors import InvalidInputError, require_in_range

__all__ = [
    "SKELLAM_ORDERS",
    "calibrate_skellam",
    "quantised_sensitivity",
    "skellam_epsilon",
    "skellam_rdp",
    "skellam_shares",
    "skellam_tail",
]

SKELLAM_ORDERS = tuple(range(2, 257))
"""Integer RDP orders the bound is evaluated at (the bound is stated for integer orders)."""


def skellam_rdp(order: int, *, l2: float, l1: float, mu: float) -> float:
    """RDP at integer ``order`` > 1 of adding ``Sk(mu)`` noise to an integer query of L2 and L1
    sensitivities ``l2``, ``l1`` (module docstring; Agarwal, Kairouz & Liu 2021)."""
    if order < 2 or int(order) != order:
        raise InvalidInputError(f"order = {order} is not an integer >= 2")
    mu = require_in_range("mu", mu, low=0.0)
    alpha = float(order)
    second = min((2 * alpha * l2 ** 2 + 6 * l1) / (16 * mu ** 2), 3 * l1 / (4 * mu))
    return alpha * l2 ** 2 / (4 * mu) + second


def skellam_epsilon(releases: Sequence[tuple[float, float, float]], *, delta: float) -> float:
    """eps at ``delta`` of the composition of Skellam releases, each ``(l2, l1, mu)``: their
    RDP curves add (:func:`skellam_rdp`), converted by dp-accounting's ``compute_epsilon``."""
    delta = require_in_range("delta", delta, low=0.0, high=1.0, high_inclusive=False)
    rdp = [sum(skellam_rdp(order, l2=l2, l1=l1, mu=mu) for l2, l1, mu in releases)
           for order in SKELLAM_ORDERS]
    eps, _ = compute_epsilon(list(SKELLAM_ORDERS), rdp, delta)
    return float(eps)


def quantised_sensitivity(*, scale: float, sensitivity: float, dim: int) -> tuple[float, float]:
    """(L2, L1) sensitivities of ``round(scale * s)`` for a real ``dim``-vector statistic s
    of L2 sensitivity ``sensitivity``: ``scale * sensitivity + sqrt(dim)`` and its square
    (module docstring)."""
    l2 = scale * sensitivity + math.sqrt(dim)
    return l2, l2 * l2


def calibrate_skellam(*, eps: float, delta: float, sensitivities: Sequence[tuple[float, float]],
                      shares: Sequence[float]) -> tuple[float, ...]:
    """The Skellam parameters ``mu_i`` of releases with integer sensitivities
    ``sensitivities[i] = (l2_i, l1_i)`` that together are (eps, delta)-DP, split as a
    Gaussian budget is: release i gets ``shares[i]`` of the Gaussian-equivalent RDP
    ``rho`` (``mu_i = l2_i^2 / (4 shares_i rho)``), and ``rho`` is the largest (least noise)
    for which :func:`skellam_epsilon` is at most ``eps`` (bisection on a log scale)."""
    eps = require_in_range("eps", eps, low=0.0)
    if len(sensitivities) != len(shares) or not math.isclose(sum(shares), 1.0) or \
            min(shares) <= 0:
        raise InvalidInputError(f"shares {tuple(shares)} must be positive, one per release, "
                                "and sum to 1")

    def mus(rho: float) -> tuple[float, ...]:
        return tuple(l2 ** 2 / (4 * share * rho)
                     for (l2, _), share in zip(sensitivities, shares, strict=True))

    def spent(rho: float) -> float:
        return skellam_epsilon([(l2, l1, mu) for (l2, l1), mu in
                                zip(sensitivities, mus(rho), strict=True)], delta=delta)

    low, high = 1e-12, 1.0
    while spent(high) < eps:  # grow until the budget is exceeded
        low, high = high, high * 4
        if high > 1e12:
            break
    for _ in range(80):
        mid = math.sqrt(low * high)
        low, high = (mid, high) if spent(mid) <= eps else (low, mid)
    return mus(low)


def skellam_shares(total_mu: float, parties: int) -> float:
    """Each of ``parties`` shares of ``Sk(total_mu)``: ``total_mu / parties`` (closure)."""
    if parties < 1:
        raise InvalidInputError(f"parties = {parties} must be >= 1")
    return total_mu / parties


def skellam_tail(*, mu: float, bound: float) -> float:
    """An upper bound on ``P(|Sk(mu)| >= bound)``: Bernstein's inequality for a sum of
    independent increments in [-1, 1] (a Poisson variable is a limit of such sums) with
    variance ``2 mu``: ``2 exp(-t^2 / (2 (2 mu + t / 3)))``."""
    if bound <= 0:
        return 1.0
    return min(1.0, 2.0 * math.exp(-bound ** 2 / (2.0 * (2.0 * mu + bound / 3.0))))
