"""DP-SGD accounting: the noise multiplier a budget needs, and the budget a multiplier spends.

Both directions go through Opacus's accountants (an established implementation, never a
home-made RDP accountant) for Poisson-subsampled Gaussian steps at sample rate q:

- ``"rdp"``: :class:`opacus.accountants.RDPAccountant` over :data:`RDP_ORDERS`, Opacus's default
  orders (1.1 .. 63) extended to 1024. With the default orders a small budget such as eps = 0.1
  over a few thousand steps has its optimum at the largest order and the search fails ("budget
  too low"); the extension fixes that and keeps large budgets tight.
- ``"prv"``: :class:`opacus.accountants.PRVAccountant` (Gopi et al. 2021), a numerical
  privacy-random-variable accountant, as the cross-check. Its answer carries a discretisation
  error (``eps_error``), which dominates at very small eps.

Example (the paper's Table 3 setting: N = 8281 windows, batch 64, 20 epochs, delta = 1e-6)::

    q, steps = dpsgd_schedule(n_train=8281, batch_size=64, epochs=20)
    sigma = noise_multiplier_for(eps=1.0, delta=1e-6, sample_rate=q, steps=steps)  # ~1.95
    dpsgd_epsilon(noise_multiplier=1.78, sample_rate=q, steps=steps, delta=1e-6)    # ~1.13
"""

from __future__ import annotations

import functools
import warnings

from qpriv.errors import (
    InvalidInputError,
    require_budget,
    require_in_range,
    require_positive_int,
)

ACCOUNTANTS = {
    "rdp": "opacus.accountants.RDPAccountant (orders 1.1 .. 1024)",
    "prv": "opacus.accountants.PRVAccountant",
}
RDP_ORDERS = [1 + x / 10.0 for x in range(1, 100)] + list(range(12, 64)) + [
    64, 80, 96, 128, 160, 192, 256, 384, 512, 768, 1024]
"""RDP orders: Opacus's default grid (1.1 .. 63) extended to 1024.

At very large budgets the conversion's best order is the grid's smallest (in the LDPT paper's
Table 3 setting from about eps = 300 on), and Opacus warns "consider expanding the range of
alphas". The eps it returns is still a valid (eps, delta) bound, only loose (at eps = 1000 the
multiplier found is 13 % larger than orders down to 1.01 would need); such budgets
promise next to nothing, so the warning is silenced (:data:`SMALLEST_ORDER_WARNING`) rather than
the grid, and every claim naming it, changed."""
SMALLEST_ORDER_WARNING = "Optimal order is the smallest alpha"
"""Opacus's warning that :data:`RDP_ORDERS`' smallest order is optimal (see there)."""
LARGEST_ORDER_WARNING = "Optimal order is the largest alpha"
"""Opacus's warning that :data:`RDP_ORDERS`' largest order is optimal: a sigma search visits
such sigmas on its way, and zero RDP (:func:`rdp_epsilon_floor`) has it by design."""

PAPER_NOISE_MULTIPLIERS = {0.1: 15.50, 0.5: 3.41, 1.0: 1.78, 5.0: 0.41}
"""The DP-SGD noise multipliers of the LDPT paper (section 7.2) per target eps (delta = 1e-6,
N = 8281, batch 64, 20 epochs)."""


def _check(accountant: str, *, delta: float, sample_rate: float, steps: int) -> None:
    if accountant not in ACCOUNTANTS:
        raise InvalidInputError(
            f"accountant = {accountant!r} is not one of {', '.join(ACCOUNTANTS)}"
        )
    require_in_range("delta", delta, low=0.0, high=1.0, high_inclusive=False,
                     hint="delta is a probability in (0, 1), typically 1e-5 or 1 / N")
    require_in_range("sample_rate", sample_rate, low=0.0, high=1.0,
                     hint="the Poisson sample rate is batch_size / N")
    require_positive_int("steps", steps)


def dpsgd_schedule(*, n_train: int, batch_size: int, epochs: int) -> tuple[float, int]:
    """Poisson sample rate q = batch_size / N and the number of steps, round(N / batch) per
    epoch (at least one), as Opacus's DP data loader draws them."""
    n_train = require_positive_int("n_train", n_train)
    batch_size = require_positive_int("batch_size", batch_size)
    epochs = require_positive_int("epochs", epochs)
    if batch_size > n_train:
        raise InvalidInputError(
            f"batch_size = {batch_size} exceeds the {n_train} training examples; "
            "use a batch size of at most N (`qpriv train --batch`)"
        )
    return batch_size / n_train, epochs * max(1, round(n_train / batch_size))


MAX_DPSGD_EPS = 1e6
"""The largest DP-SGD budget :func:`noise_multiplier_for` searches for (about 1 s; Opacus's
search does not end near 1e20)."""


def check_dpsgd_eps(eps: float) -> float:
    """``eps`` if DP-SGD can be calibrated to it: in (0, :data:`MAX_DPSGD_EPS`].

    Raises:
        InvalidInputError: ``eps`` outside that range, with the fix.
    """
    return require_budget("eps", eps, cap=MAX_DPSGD_EPS,
                          above="(and Opacus's search for sigma does not end): train "
                                "without --eps instead")


def noise_multiplier_for(
    *, eps: float, delta: float, sample_rate: float, steps: int, accountant: str = "rdp"
) -> float:
    """sigma for (eps, delta)-DP after ``steps`` Poisson-subsampled Gaussian steps at rate q.

    Opacus's ``get_noise_multiplier`` with the named accountant. A budget no multiplier reaches
    (the search diverges) is an :class:`InvalidInputError` that says so.
    """
    from opacus.accountants.utils import get_noise_multiplier

    eps = check_dpsgd_eps(eps)
    _check(accountant, delta=delta, sample_rate=sample_rate, steps=steps)
    if accountant == "rdp":
        check_rdp_eps(eps, delta)
    kwargs = {"alphas": RDP_ORDERS} if accountant == "rdp" else {"epsilon_tolerance": 0.005}
    try:
        with warnings.catch_warnings():  # the search visits sigmas whose best order is the
            # largest; the returned sigma is re-checked by dpsgd_epsilon, which does warn
            warnings.filterwarnings("ignore", message=LARGEST_ORDER_WARNING)
            warnings.filterwarnings("ignore", message=SMALLEST_ORDER_WARNING)
            return float(get_noise_multiplier(
                target_epsilon=eps, target_delta=delta, sample_rate=sample_rate, steps=steps,
                accountant=accountant, **kwargs,
            ))
    except ValueError as error:  # Opacus: "The privacy budget is too low."
        raise InvalidInputError(
            f"the {ACCOUNTANTS[accountant]} finds no DP-SGD noise multiplier for eps = {eps:g}, "
            f"delta = {delta:g} over {steps} steps at sample rate {sample_rate:.4g} ({error}); "
            "raise eps or delta, or take fewer steps"
        ) from None


def check_rdp_eps(eps: float, delta: float, *, who: str = "the RDP accountant") -> float:
    """``eps`` if DP-SGD under the RDP accountant can reach it at ``delta``: in range
    (:func:`check_dpsgd_eps`) and above :func:`rdp_epsilon_floor`. ``who`` names what is
    calibrated in the message (a frontier names its method).

    Raises:
        InvalidInputError: ``eps`` at or below the floor, naming the floor and the fix.
    """
    eps = check_dpsgd_eps(eps)
    floor = rdp_epsilon_floor(delta)
    if eps <= floor:
        raise InvalidInputError(
            f"{who} finds no DP-SGD noise multiplier for eps = {eps:g} at delta = {delta:g}: "
            f"even infinite noise converts to eps = {floor:.4g} over the RDP accountant's "
            "orders; raise eps or delta")
    return eps


@functools.cache
def rdp_epsilon_floor(delta: float) -> float:
    """The smallest eps the RDP conversion (Balle et al. 2020, as Opacus implements it) can
    certify at ``delta`` over :data:`RDP_ORDERS`: its value at zero RDP, i.e. infinite noise.
    Below it no multiplier exists, which Opacus's search finds only after ~17 slow doublings."""
    from opacus.accountants.analysis.rdp import get_privacy_spent

    with warnings.catch_warnings():  # at zero RDP the largest order is optimal by design
        warnings.filterwarnings("ignore", message=LARGEST_ORDER_WARNING)
        return float(get_privacy_spent(orders=RDP_ORDERS, rdp=[0.0] * len(RDP_ORDERS),
                                       delta=delta)[0])


def dpsgd_epsilon(
    *, noise_multiplier: float, sample_rate: float, steps: int, delta: float,
    accountant: str = "rdp",
) -> float:
    """The eps that the named Opacus accountant gives for ``steps`` steps of (sigma, q) at
    ``delta``."""
    from opacus.accountants import PRVAccountant, RDPAccountant

    require_in_range("noise_multiplier", noise_multiplier, low=0.0,
                     hint="DP-SGD needs Gaussian noise; sigma = 0 spends an infinite budget")
    _check(accountant, delta=delta, sample_rate=sample_rate, steps=steps)
    history = [(float(noise_multiplier), float(sample_rate), int(steps))]
    if accountant == "rdp":
        rdp = RDPAccountant()
        rdp.history = history
        with warnings.catch_warnings():  # valid but loose at very large budgets: RDP_ORDERS
            warnings.filterwarnings("ignore", message=SMALLEST_ORDER_WARNING)
            return float(rdp.get_epsilon(delta=delta, alphas=RDP_ORDERS))
    prv = PRVAccountant()
    prv.history = history
    return float(prv.get_epsilon(delta=delta))


@functools.lru_cache(maxsize=8)
def _paper_noise_multiplier_rows(n_train: int, batch_size: int, epochs: int, delta: float
                                 ) -> tuple[tuple[tuple[str, float], ...], ...]:
    return tuple(tuple(row.items()) for row in _compute_paper_rows(
        n_train=n_train, batch_size=batch_size, epochs=epochs, delta=delta))


def paper_noise_multiplier_table(
    *, n_train: int = 8281, batch_size: int = 64, epochs: int = 20, delta: float = 1e-6
) -> list[dict]:
    """The LDPT paper's DP-SGD multipliers checked (Table 8): for each target eps, the
    multiplier of both accountants beside the paper's, and the eps the paper's multiplier
    really gives. Computed once per setting in a process (about 10 s)."""
    return [dict(row) for row in _paper_noise_multiplier_rows(n_train, batch_size, epochs,
                                                              delta)]


def _compute_paper_rows(*, n_train: int, batch_size: int, epochs: int, delta: float
                        ) -> list[dict]:
    q, steps = dpsgd_schedule(n_train=n_train, batch_size=batch_size, epochs=epochs)
    rows = []
    for eps, paper in PAPER_NOISE_MULTIPLIERS.items():
        rows.append({
            "eps": eps,
            "sigma_paper": paper,
            "sigma_rdp": noise_multiplier_for(eps=eps, delta=delta, sample_rate=q, steps=steps),
            "sigma_prv": noise_multiplier_for(eps=eps, delta=delta, sample_rate=q, steps=steps,
                                              accountant="prv"),
            "eps_of_paper_sigma_rdp": dpsgd_epsilon(noise_multiplier=paper, sample_rate=q,
                                                    steps=steps, delta=delta),
            "eps_of_paper_sigma_prv": dpsgd_epsilon(noise_multiplier=paper, sample_rate=q,
                                                    steps=steps, delta=delta, accountant="prv"),
            "sample_rate": q, "steps": steps, "delta": delta,
        })
    return rows
