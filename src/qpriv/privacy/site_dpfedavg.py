"""The accountant of DP-FedAvg at the site unit: one whole site is the protected unit.

The mechanism is Flower's central-DP wrapper with server-side fixed clipping
(``flwr.serverapp.strategy.DifferentialPrivacyServerSideFixedClipping``, flwr 1.42) around
FedAvg, as it computes it ("Learning Differentially Private Recurrent Language Models",
McMahan, Ramage, Talwar & Zhang, ICLR 2018; "Differentially Private Federated Learning: A
Client Level Perspective", Geyer, Klein & Nabi 2017). In round r, with the global weights
``g`` public (the previous round's release), each of the n sites returns its locally trained
weights ``w_i``; the wrapper replaces each by ``g + clip(w_i - g)``, with ``clip(u) = u
min(1, C / ||u||_2)`` over all arrays flattened together (its ``compute_clip_model_update``);
FedAvg averages them with weights ``k_i / sum_j k_j`` (its ``aggregate_arrayrecords``); the
wrapper adds N(0, s^2) to every coordinate with ``s = z C / n`` (its ``compute_stdv``, n its
``num_sampled_clients``). qpriv sends every site weight ``k_i = 1`` (uniform FedAvg), so the
release is

    g' = g + (1/n) sum_i clip(w_i - g) + N(0, (z C / n)^2 I).

Adjacency and sensitivity, derived. Every round samples every site (no subsampling, so no
amplification is claimed) and n is public and fixed: a round with another number of replies
releases nothing. Two federations are neighbours when they differ in the whole data of ONE
site, replaced by anything (replace-one at the site unit; the site's scaler, its windows, its
local training, its seed: everything it computes before it answers). Only that site's term of
the sum changes, from ``clip(u)`` to ``clip(u')``, so the L2 sensitivity of the mean is
``||clip(u) - clip(u')|| / n <= 2 C / n``. Against noise of std ``z C / n`` that is a Gaussian
mechanism of effective noise multiplier ``z / 2``. (Add-or-remove of a site would change the
denominator n of FedAvg's mean, which the wrapper's noise does not track; "zero-out", a site
replaced by one that returns ``g`` unchanged, has sensitivity ``C / n`` and multiplier z, half
this claim's eps at equal z. The claim is stated at replace-one, the larger.) Weighting by
windows would make the weights ``k_i`` part of a site's data, and one site's term could move
the mean by up to ``2 C k_max / sum k``: uniform weights keep ``2 C / n``.

Composition over R rounds. Each round's input ``g`` is the previous release, so the R rounds
are an adaptive composition of R Gaussian mechanisms of multiplier ``z / 2``; the Gaussian
mechanism composes exactly ("Gaussian Differential Privacy", Dong, Roth & Su 2019, Corollary
3.3): mu-GDP with ``mu = 2 sqrt(R) / z``, whose (eps, delta) curve is the analytic Gaussian
mechanism's ("Improving the Gaussian Mechanism for Differential Privacy", Balle & Wang 2018,
Theorem 8)::

    delta(eps) = Phi(-eps / mu + mu / 2) - e^eps Phi(-eps / mu - mu / 2).

:func:`site_epsilon` inverts it (the closed form); :func:`site_epsilon_pld` composes the
rounds with dp-accounting's privacy-loss-distribution accountant and :func:`site_epsilon_rdp`
with its RDP accountant (an upper bound, looser): the tests cross-check the three.
:func:`site_noise_multiplier` calibrates z to a target (eps, delta) over R rounds through
dp-accounting's analytic calibration (``get_sigma_gaussian``).

Flower 1.42 also ships an RDP accountant (``flwr.supercore.privacy_accounting``) that the
wrapper can drive; it accounts add-or-remove-one at multiplier z, which is not how the
wrapper's fixed-n mean reacts to a replaced site (above). qpriv's claim uses its own.
"""

from __future__ import annotations

import math

import dp_accounting

from qpriv.errors import require_in_range, require_positive_int
from qpriv.privacy.ssp import gaussian_noise_multiplier

__all__ = [
    "ADJACENCY",
    "SENSITIVITY_FACTOR",
    "gdp_delta",
    "site_epsilon",
    "site_epsilon_pld",
    "site_epsilon_rdp",
    "site_mu",
    "site_noise_multiplier",
]

ADJACENCY = ("replace-one at the site unit: two federations of the same n sites differ in the "
             "whole data of one site, replaced by anything")
"""The neighbouring relation of the claim (module docstring)."""
SENSITIVITY_FACTOR = 2.0
"""The L2 sensitivity of the noised mean in units of C / n under replace-one."""


def _checked(noise_multiplier: float, rounds: int) -> tuple[float, int]:
    z = require_in_range("noise_multiplier", noise_multiplier, low=0.0,
                         hint="the wrapper's noise multiplier z must be > 0")
    return z, require_positive_int("rounds", rounds)


def _delta(delta: float) -> float:
    return require_in_range("delta", delta, low=0.0, high=1.0, high_inclusive=False,
                            hint="delta is a probability in (0, 1), typically 1e-6")


def site_mu(*, noise_multiplier: float, rounds: int) -> float:
    """``mu = 2 sqrt(R) / z``: the rounds' composition is mu-GDP (module docstring)."""
    z, rounds = _checked(noise_multiplier, rounds)
    return SENSITIVITY_FACTOR * math.sqrt(rounds) / z


def _phi(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def gdp_delta(*, eps: float, mu: float) -> float:
    """The analytic Gaussian mechanism's delta at ``eps`` for mu-GDP (Balle & Wang 2018,
    Theorem 8; Dong, Roth & Su 2019, Corollary 2.13)."""
    if mu <= 0:
        return 0.0
    return _phi(-eps / mu + mu / 2) - math.exp(eps) * _phi(-eps / mu - mu / 2)


def site_epsilon(*, noise_multiplier: float, rounds: int, delta: float) -> float:
    """The site-level eps of R rounds at noise multiplier z: the smallest eps with
    ``gdp_delta(eps, mu) <= delta`` (bisection on the closed form, to 1e-10 relative)."""
    mu = site_mu(noise_multiplier=noise_multiplier, rounds=rounds)
    delta = _delta(delta)
    if gdp_delta(eps=0.0, mu=mu) <= delta:
        return 0.0
    low, high = 0.0, 1.0
    while gdp_delta(eps=high, mu=mu) > delta:
        low, high = high, 2 * high
    for _ in range(200):
        mid = 0.5 * (low + high)
        if gdp_delta(eps=mid, mu=mu) > delta:
            low = mid
        else:
            high = mid
        if high - low <= 1e-10 * high:
            break
    return high


def _composed(accountant: dp_accounting.PrivacyAccountant, *, noise_multiplier: float,
              rounds: int) -> dp_accounting.PrivacyAccountant:
    z, rounds = _checked(noise_multiplier, rounds)
    event = dp_accounting.GaussianDpEvent(z / SENSITIVITY_FACTOR)
    accountant.compose(dp_accounting.SelfComposedDpEvent(event, rounds))
    return accountant


def site_epsilon_pld(*, noise_multiplier: float, rounds: int, delta: float) -> float:
    """:func:`site_epsilon` by dp-accounting's PLD accountant (an independent computation)."""
    accountant = _composed(dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-4),
                           noise_multiplier=noise_multiplier, rounds=rounds)
    return float(accountant.get_epsilon(_delta(delta)))


def site_epsilon_rdp(*, noise_multiplier: float, rounds: int, delta: float) -> float:
    """:func:`site_epsilon` by dp-accounting's RDP accountant: an upper bound on it."""
    accountant = _composed(dp_accounting.rdp.RdpAccountant(),
                           noise_multiplier=noise_multiplier, rounds=rounds)
    return float(accountant.get_epsilon(_delta(delta)))


def site_noise_multiplier(*, eps: float, delta: float, rounds: int) -> float:
    """The wrapper's noise multiplier z that makes R rounds (eps, delta)-DP at the site unit:
    one Gaussian mechanism of multiplier ``sigma_1`` (the analytic Gaussian mechanism's,
    :func:`qpriv.privacy.ssp.gaussian_noise_multiplier`: ``get_sigma_gaussian(eps, delta)``
    raised by one part in 1e9 so that rounding never lands above eps) is the R rounds'
    composition when ``z / (2 sqrt(R)) = sigma_1``, so ``z = 2 sqrt(R) sigma_1``."""
    rounds = require_positive_int("rounds", rounds)
    sigma_one = gaussian_noise_multiplier(eps=eps, delta=delta)
    return SENSITIVITY_FACTOR * math.sqrt(rounds) * sigma_one
