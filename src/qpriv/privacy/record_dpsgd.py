"""DP-SGD at the record unit: one value of one channel replaced, on windows cut from one series.

The sampling is qpriv's own (:func:`qpriv.training.dpsgd.poisson_batches`): every training
window joins every batch independently with probability q, its gradient (all channels) is
clipped to norm C, and N(0, sigma^2 C^2 I) is added to the sum. This is the bottom-level
Poisson sampling of "Privacy Amplification by Structured Subsampling for Deep Differentially
Private Time Series Forecasting" (Schuchardt, Dalirrooyfard, Guzelkabaagac, Schneider,
Nevmyvaka, Guennemann, ICML 2025) with a single series, so that its top level samples that
series at every step, and with 1-event-level neighbours (one value of the series replaced).
Its analysis of bottom-level Poisson sampling (Theorem E.8 of its appendix, with the upper
bound of Lemma F.4, which coincide when the top level always draws the series) gives the
per-step dominating pair:

    P = sum_m w_m N(-m, sigma^2),   Q = sum_m w_m N(+m, sigma^2),   w = Binomial(k, q),

in units of C, where k is the number of windows that hold the record: a window of L inputs
and H targets that starts at any of L + H positions holds a given time step, so k = L + H
(fewer only when the split has fewer windows, k = min(L + H, N)).

Proof sketch (why that pair dominates one step). Fix everything but the record. The batch is
B = S_out + S_in, S_in the sampled windows that hold the record: |S_in| = m ~ Binomial(k, q),
independent of the data. The output is sum_{i in S_out} g_i + sum_{i in S_in} g_i + noise, the
neighbour's the same with g'_i for i in S_in, ||g_i||, ||g'_i|| <= C after clipping. The
worst case (the paper's theorem, by the coupling of the two mixtures on S and the monotonicity
of a Gaussian mixture's hockey-stick divergence in its shifts) puts every affected gradient at
+C e on one side and -C e on the other, one direction e: that is (P, Q) above, with the shared
part S_out translated away. The pair is symmetric (Q is P mirrored), so the add and remove
directions of the privacy loss distribution coincide.

Composition over the steps is dp-accounting's PLD (:mod:`dp_accounting.pld`): the per-step
privacy profile delta(eps) = P(X < x_eps) - e^eps Q(X < x_eps), x_eps the point where the
privacy loss ln P(x) / Q(x) (decreasing in x) equals eps, is turned into a pessimistic
connect-the-dots distribution (Doroshenko et al. 2022) and self-composed. dp-accounting has
Gaussian mixtures only against a single Gaussian (add or remove); this pair of two mixtures is
the one piece written here, its profile only.

Never worse than group privacy: the record changes k windows, and the pair above is, for
m > 1, the k-fold group of the window-level substitution pair; the tests check the composed
eps against group privacy of the window-level substitution guarantee and check the pair
against the exact divergence of a small concrete mechanism (one step, k = 3).

Example (ETTh1 at L = 336, H = 24: 8281 windows, a record in 360 of them)::

    k = windows_holding_record(seq_len=336, horizon=24, n_windows=8281)          # 360
    record_dpsgd_epsilon(noise_multiplier=8.0, sample_rate=8 / 8281, steps=1000,
                         windows_per_record=k, delta=1e-6)
"""

from __future__ import annotations

import functools
import math

import numpy as np
from dp_accounting.pld import pld_pmf
from dp_accounting.pld.privacy_loss_distribution import PrivacyLossDistribution
from scipy import special, stats

from qpriv.errors import (
    InvalidInputError,
    require_in_range,
    require_positive_int,
)

ACCOUNTANT = ("dp-accounting PLD (connect-the-dots) of the record-level pair of Schuchardt et "
              "al. 2025, 'Privacy Amplification by Structured Subsampling for Deep "
              "Differentially Private Time Series Forecasting' (bottom-level Poisson, one "
              "series, 1-event neighbours)")
"""How a record-unit DP-SGD claim is accounted, in the words a claim carries."""
SAMPLING = "Poisson over the training windows of one series"
DISCRETIZATION = 1e-3
"""The PLD's finest loss grid (pessimistic: the rounding only ever raises eps)."""
GRID_POINTS = 2000
"""At most this many grid points each side of zero: a step whose losses reach far (small
sigma) gets a coarser grid, still pessimistic, instead of a slow one."""
WEIGHT_FLOOR = 1e-20
"""Mixture components below this weight are dropped and their total weight r is added to every
delta (joint convexity: H(P||Q) <= H(P'||Q') + r), so the profile stays an upper bound."""
EPS_CAP = 30.0
"""The largest per-step loss on the grid; delta(EPS_CAP) goes to the infinite loss (sound)."""
TAIL_Z = 12.0
"""How many noise stds beyond the largest kept shift the loss grid reaches."""
MAX_NOISE_MULTIPLIER = 1e6
HOPELESS = 1e-9
"""A step whose delta at :data:`EPS_CAP` is within this of 1 gives eps = inf outright (the
PLD's composition cannot take an infinite-loss mass of 1)."""


def windows_holding_record(*, seq_len: int, horizon: int, n_windows: int) -> int:
    """k: how many training windows (stride 1, L inputs then H targets) hold one time step at
    most, min(L + H, N)."""
    seq_len = require_positive_int("seq_len", seq_len)
    horizon = require_positive_int("horizon", horizon)
    n_windows = require_positive_int("n_windows", n_windows)
    return min(seq_len + horizon, n_windows)


def _check(*, noise_multiplier: float, sample_rate: float, windows_per_record: int) -> None:
    require_in_range("noise_multiplier", noise_multiplier, low=0.0,
                     hint="DP-SGD needs Gaussian noise; sigma = 0 spends an infinite budget")
    require_in_range("sample_rate", sample_rate, low=0.0, high=1.0,
                     hint="the Poisson sample rate is batch_size / N")
    require_positive_int("windows_per_record", windows_per_record)


def _components(sample_rate: float, windows_per_record: int) -> tuple[np.ndarray, np.ndarray,
                                                                       float]:
    """The kept shifts m, their log-weights (renormalised) and the dropped weight r."""
    m = np.arange(windows_per_record + 1, dtype=float)
    weights = stats.binom.pmf(m, windows_per_record, sample_rate)
    keep = weights >= WEIGHT_FLOOR
    dropped = float(max(0.0, 1.0 - weights[keep].sum()))
    kept = weights[keep] / weights[keep].sum()
    return m[keep], np.log(kept), dropped


def _privacy_loss(x: np.ndarray, m: np.ndarray, log_w: np.ndarray, sigma: float) -> np.ndarray:
    """ln P(x) / Q(x) for P = sum w N(-m, s^2), Q = sum w N(m, s^2): decreasing in x."""
    z = x[..., None]
    upper = special.logsumexp(log_w - (z + m) ** 2 / (2 * sigma ** 2), axis=-1)
    lower = special.logsumexp(log_w - (z - m) ** 2 / (2 * sigma ** 2), axis=-1)
    return upper - lower


def _log_cdf(x: np.ndarray, m: np.ndarray, log_w: np.ndarray, sigma: float, sign: float
             ) -> np.ndarray:
    """ln of the mixture's CDF at x, components centred at sign * m."""
    return special.logsumexp(log_w + special.log_ndtr((x[..., None] - sign * m) / sigma),
                             axis=-1)


def record_step_profile(
    epsilons: np.ndarray, *, noise_multiplier: float, sample_rate: float,
    windows_per_record: int,
) -> np.ndarray:
    """The per-step privacy profile delta(eps) of the record-level pair (module docstring).

    For each eps, x_eps solves ln P(x) / Q(x) = eps by bisection (the loss is monotone), and
    delta = P(X < x_eps) - e^eps Q(X < x_eps), computed in logs; the weight of the dropped
    components (:data:`WEIGHT_FLOOR`) is added.
    """
    _check(noise_multiplier=noise_multiplier, sample_rate=sample_rate,
           windows_per_record=windows_per_record)
    epsilons = np.asarray(epsilons, dtype=float)
    m, log_w, dropped = _components(sample_rate, windows_per_record)
    sigma = float(noise_multiplier)
    reach = m.max() + TAIL_Z * sigma + 1.0
    low = np.full(epsilons.shape, -reach)
    high = np.full(epsilons.shape, reach)
    for _ in range(50):  # the loss falls from low to high; keep low above eps, high below
        mid = (low + high) / 2
        above = _privacy_loss(mid, m, log_w, sigma) > epsilons
        low = np.where(above, mid, low)
        high = np.where(above, high, mid)
    x = (low + high) / 2
    log_p = _log_cdf(x, m, log_w, sigma, -1.0)
    log_q = _log_cdf(x, m, log_w, sigma, +1.0)
    delta = np.exp(log_p) * -np.expm1(np.minimum(epsilons + log_q - log_p, 0.0))
    return np.clip(delta + dropped, 0.0, 1.0)


def _loss_range(noise_multiplier: float, sample_rate: float, windows_per_record: int
                ) -> float:
    m, log_w, _ = _components(sample_rate, windows_per_record)
    if m.max() == 0:
        return 0.0
    reach = m.max() + TAIL_Z * noise_multiplier
    return float(min(EPS_CAP, _privacy_loss(np.array([-reach]), m, log_w,
                                            float(noise_multiplier))[0]))


@functools.lru_cache(maxsize=64)
def record_step_pld(
    *, noise_multiplier: float, sample_rate: float, windows_per_record: int,
    discretization: float = DISCRETIZATION,
) -> PrivacyLossDistribution:
    """dp-accounting's PLD of one DP-SGD step at the record unit: pessimistic
    connect-the-dots on :func:`record_step_profile` over the loss range the pair reaches, on a
    grid of ``discretization`` or coarser (:data:`GRID_POINTS`)."""
    top = _loss_range(noise_multiplier, sample_rate, windows_per_record)
    discretization = max(discretization, top / GRID_POINTS)
    upper = max(1, math.ceil(top / discretization))
    rounded = np.arange(-upper, upper + 1)
    deltas = record_step_profile(rounded * discretization, noise_multiplier=noise_multiplier,
                                 sample_rate=sample_rate,
                                 windows_per_record=windows_per_record)
    pmf = pld_pmf.create_pmf_pessimistic_connect_dots_fixed_gap(
        discretization, int(rounded[0]), int(rounded[-1]), deltas)
    return PrivacyLossDistribution(pmf)


def record_dpsgd_epsilon(
    *, noise_multiplier: float, sample_rate: float, steps: int, windows_per_record: int,
    delta: float,
) -> float:
    """The record-level eps of ``steps`` DP-SGD steps at (sigma, q) at ``delta``: the
    per-step PLD (:func:`record_step_pld`) self-composed by dp-accounting."""
    steps = require_positive_int("steps", steps)
    require_in_range("delta", delta, low=0.0, high=1.0, high_inclusive=False,
                     hint="delta is a probability in (0, 1), typically 1e-5 or 1 / N")
    at_cap = record_step_profile(np.array([EPS_CAP]), noise_multiplier=noise_multiplier,
                                 sample_rate=sample_rate,
                                 windows_per_record=windows_per_record)[0]
    if at_cap >= 1 - HOPELESS:
        return math.inf  # (nearly) every step's loss exceeds EPS_CAP: no finite guarantee
    step = record_step_pld(noise_multiplier=float(noise_multiplier),
                           sample_rate=float(sample_rate),
                           windows_per_record=int(windows_per_record))
    return float(step.self_compose(steps).get_epsilon_for_delta(delta))


def record_noise_multiplier_for(
    *, eps: float, delta: float, sample_rate: float, steps: int, windows_per_record: int,
    tolerance: float = 0.01,
) -> float:
    """The smallest sigma (to ``tolerance`` relative) whose record-level eps after ``steps``
    steps is at most ``eps``, by bisection on log sigma (eps falls as sigma grows).

    Raises:
        InvalidInputError: no sigma up to :data:`MAX_NOISE_MULTIPLIER` reaches the budget.
    """
    require_in_range("eps", eps, low=0.0, hint="the record-level budget is a number > 0")

    def spent(sigma: float) -> float:
        return record_dpsgd_epsilon(noise_multiplier=sigma, sample_rate=sample_rate,
                                    steps=steps, windows_per_record=windows_per_record,
                                    delta=delta)

    low, high = 0.25, 1.0
    while spent(high) > eps:
        if high >= MAX_NOISE_MULTIPLIER:
            raise InvalidInputError(
                f"no DP-SGD noise multiplier up to {MAX_NOISE_MULTIPLIER:g} meets eps = "
                f"{eps:g} at delta = {delta:g} at the record unit ({windows_per_record} "
                f"windows hold a record, {steps} steps at sample rate {sample_rate:.4g}); "
                "raise eps, take fewer steps or a smaller batch")
        low, high = high, min(high * 4, MAX_NOISE_MULTIPLIER)
    if spent(low) <= eps:
        low = 1e-3
    while high / low > 1 + tolerance:
        mid = math.sqrt(low * high)
        low, high = (low, mid) if spent(mid) <= eps else (mid, high)
    return high
