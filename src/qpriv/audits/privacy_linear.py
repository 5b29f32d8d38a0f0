"""A many-run black-box audit of dp-linear: an empirical lower bound on its epsilon.

The distinguishing game of Jagielski, Ullman & Oprea 2020 ("Auditing differentially private
machine learning: how private is private SGD?") and Nasr et al. 2021 ("Adversary instantiation:
lower bounds for differentially private machine learning"): release the forecaster ``trials``
times from a dataset D and ``trials`` times from its neighbour D' (D with one canary record
replaced, or one canary window added), score every release with a test fixed before the
counted releases are drawn, and bound the test's false positive and false negative rates with
Clopper-Pearson intervals. An (eps, delta)-DP mechanism has ``TPR <= e^eps FPR + delta`` for
every test, so ``eps >= ln((1 - delta - FNR_upper) / FPR_upper)`` (and the same with D and D'
swapped) holds with the stated confidence; it must stay at or below the claim.

**What is run.** The released mechanism is :func:`qpriv.forecasting.linear.fit_dp_linear`
with the design fixed (``select="fixed"``, its default spec and ridge scale) and, at the record
unit, a scaler declared public: then every random draw of a fit is the Gaussian noise on the
sufficient statistics (A, B), and the statistics themselves are a fixed function of the data.
So the audit computes (A, B) of D and of D' once, with the fit's own functions
(:func:`~qpriv.forecasting.linear_design.sufficient_statistics`, the fit's sensitivities and
noise calibration), and redraws only the noise and the solve for every release, through the
fit's own :func:`~qpriv.forecasting.linear.noisy_ridge_solve` (noise, PSD repair, the
noise-set ridge, solve): release i is exactly ``fit_dp_linear(..., seed=s)`` for the generator
state s it starts from (a test checks the kernels bit for bit). Both hypotheses spend the whole
budget on the Gaussian release (eps_scaler = 0, no selection), the configuration whose one
release is the easiest to audit.

**The test.** The release is the kernel ``K = P_pub + U W^T M``; W is a bijective function of K
(M has full row rank, U full column rank), so the score reads W. The fit solves
``(psd(A + E) + lambda I) W = B + F``; the attacker knows D and the ridge lambda, so
``(A_D + lambda I) W`` is ``B + F`` up to the A-noise times W (small where the ridge shrinks
W). The score projects it on the canary's effect on that quantity between the noiseless fits
of D and D': the likelihood-ratio test of the B release, whose noise is isotropic. It ignores
what the A release alone says about the canary, so even a tight sensitivity leaves the bound
below the claim (``share_a`` of the Gaussian budget goes to A).

**Canaries.** ``worst``: at the record unit, the record (position, channel, sign) whose
replacement moves the noise-normalised statistics the most, found by search, replaced by a
value far outside the clip range (the proof of
:func:`qpriv.privacy.ssp.record_sensitivities_projected` bounds a change of 2R); at the window
unit, the window the proof of :func:`qpriv.privacy.ssp.window_sensitivities` names: all C
channels equal, with features and targets beyond their clips, so the added rows sit on the
spheres and the sensitivities are reached exactly. ``random``: a random record replaced by a
random value in the clip range, or a copy of a random training window added. ``reach`` reports
the canary's normalised change over the sensitivity (1: the bound is reached).

The threshold and the direction of the test are planned from ``pilot`` releases of each side
drawn from separate generators, so the counted releases are independent of the test.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd
import scipy.stats

from qpriv.audits.lower_bound import clopper_pearson, epsilon_from_rates, planned_threshold
from qpriv.errors import InvalidInputError, require_in_range, require_positive_int
from qpriv.forecasting.linear import (
    default_spec,
    fit_dp_linear,
    noisy_ridge_solve,
    statistic_sensitivities,
)
from qpriv.forecasting.linear_design import (
    DEFAULTS,
    kernel_from_weights,
    linear_maps,
    sufficient_statistics,
)
from qpriv.forecasting.series import ZScoreScaler
from qpriv.forecasting.windows import ForecastData, load_forecasting_data
from qpriv.privacy.claims import LOWER_BOUND, Accounting, Kind, PrivacyClaim, Unit
from qpriv.privacy.ssp import SSPNoise, gaussian_noise_multiplier, perturb, ssp_noise

CANARIES = ("worst", "random")
OBSERVED = ("statistics", "kernel")
"""What the attacker reads: the noisy sufficient statistics the kernel is solved from (the
release the guarantee is proven on), or only the released kernel (black-box)."""
PLANTED_BUGS = ("half-noise", "clear-scaler")
"""Bugs a test plants in the audited mechanism (never a user's option): the noise stds halved,
or each dataset's own scaler fitted in the clear (the canary then moves every clipped value)."""
AUDIT_ROWS = 2880
"""Rows of the audit's dataset D (120 days, hourly)."""
AUDIT_SHAPE = {"seq_len": 96, "horizon": 24}
OUTLIER = 1e4
"""The worst record's new value, in D's standard deviations: far outside any clip range."""


def audit_dataset(*, seed: int = 0, rows: int = AUDIT_ROWS, channels: int = 2) -> pd.DataFrame:
    """D: a fixed synthetic hourly series (daily cycle, slow drift and noise), ``rows`` x
    ``channels``, with its dates. Any dataset will do, since the guarantee holds for all."""
    rng = np.random.default_rng(seed)
    hours = np.arange(rows)
    values = np.stack([10.0 + 3.0 * np.sin(2 * np.pi * (hours + 5 * c) / 24)
                       + np.cumsum(rng.normal(0.0, 0.2, rows)) + rng.normal(0.0, 1.0, rows)
                       for c in range(channels)], axis=1)
    dates = pd.date_range("2020-01-01", periods=rows, freq="h")
    return pd.DataFrame(values, index=pd.Index(dates, name="date"),
                        columns=[f"x{c}" for c in range(channels)])


@dataclass(frozen=True)
class LinearMechanism:
    """The audited fit on one dataset: its statistics, maps, noise and ridge scale."""

    a: np.ndarray
    b: np.ndarray
    maps: tuple[np.ndarray, np.ndarray, np.ndarray]
    release: SSPNoise
    ridge_scale: float

    def weights(self, rng: np.random.Generator, *, noise: bool = True) -> np.ndarray:
        """One release's W (``noise=False``: the noiseless fit under the same ridge)."""
        weights, _ = noisy_ridge_solve(self.a, self.b, self.release, pooled=None, rng=rng,
                                       noise=noise, ridge_scale=self.ridge_scale)
        return weights

    def kernel(self, rng: np.random.Generator) -> np.ndarray:
        """One release: the kernel ``fit_dp_linear`` returns from the same generator state."""
        features, public, outputs = self.maps
        return kernel_from_weights(features=features, public=public, targets=outputs,
                                   weights=self.weights(rng))


def _public_scaler(data: ForecastData) -> ZScoreScaler:
    """The audit's declared public scaler: D's own z-score, the same for D and D'."""
    return data.scaler


def mechanism(data: ForecastData, raw: np.ndarray, *, unit: Unit, eps: float, delta: float,
              scaler: ZScoreScaler | None, bug: str | None = None,
              extra: np.ndarray | None = None) -> LinearMechanism:
    """The fit's mechanism on the training rows ``raw`` (the file's units), the design of
    ``data``: ``scaler`` clips at the record unit (None at the window unit); ``extra`` adds the
    statistics of one more window (the window unit's canary, an (L + H, C) block).

    It takes the fit's own steps from :mod:`qpriv.forecasting.linear`
    (:func:`~qpriv.forecasting.linear.statistic_sensitivities`;
    :func:`~qpriv.forecasting.linear.noisy_ridge_solve`: noise, PSD repair, ridge and solve),
    imported rather than copied, so that the game plays what ``fit_dp_linear`` does (a test
    checks the kernels bit for bit)."""
    defaults = DEFAULTS[unit.value]
    spec = default_spec(data)
    maps = linear_maps(spec, seq_len=data.seq_len, horizon=data.horizon)
    clip = defaults.get("clip")
    d_a, d_b, clipping = statistic_sensitivities(unit, maps, n_channels=raw.shape[1],
                                                 clip=clip,
                                                 feature_clip=defaults["feature_clip"],
                                                 target_clip=defaults["target_clip"])
    if bug == "clear-scaler" and unit == Unit.RECORD:  # each dataset's own scaler, in the clear
        scaler = ZScoreScaler.fit(raw)
    series = raw if scaler is None else scaler.transform(raw)

    def stats(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return sufficient_statistics(values, features=maps[0], public=maps[1], outputs=maps[2],
                                     clip=clip, feature_clip=defaults["feature_clip"],
                                     target_clip=clipping["target_clip"],
                                     rescale=unit == Unit.WINDOW)

    a, b = stats(series)
    if extra is not None:
        a_extra, b_extra = stats(extra)
        a, b = a + a_extra, b + b_extra
    release = ssp_noise(sensitivity_a=d_a, sensitivity_b=d_b,
                        noise_multiplier=gaussian_noise_multiplier(eps=eps, delta=delta),
                        share_a=defaults["share_a"], eps=eps, delta=delta)
    if bug == "half-noise":
        release = replace(release, sigma_a=release.sigma_a / 2, sigma_b=release.sigma_b / 2)
    return LinearMechanism(a=a, b=b, maps=maps, release=release,
                           ridge_scale=defaults["ridge_scale"])


def _normalised_change(first: LinearMechanism, second: LinearMechanism) -> float:
    """The L2 change of the released vector (A's upper triangle / sigma_A, B / sigma_B) times
    the noise multiplier: the canary's change as a fraction of the sensitivity."""
    upper = np.triu_indices(first.a.shape[0])
    d_a = (second.a - first.a)[upper] / first.release.sigma_a
    d_b = (second.b - first.b) / first.release.sigma_b
    return float(math.hypot(np.linalg.norm(d_a), np.linalg.norm(d_b))
                 * first.release.noise_multiplier)


def _record_change(raw: np.ndarray, t: int, c: int, value: float) -> np.ndarray:
    changed = raw.copy()
    changed[t, c] = value
    return changed


def _worst_record(data: ForecastData, raw: np.ndarray, scaler: ZScoreScaler, *,
                  eps: float, delta: float, candidates: int = 160) -> tuple[int, int, float]:
    """The (row, channel, value) whose replacement moves the statistics most, searched over
    evenly spaced interior rows, every channel and both signs of an outlier. The effect of a
    record reaches only the windows holding it, so each candidate is scored on the rows of
    those windows alone (a few hundred rows: fast)."""
    span = data.seq_len + data.horizon
    rows = np.linspace(span, raw.shape[0] - span - 1, candidates).astype(int)
    best = (-1.0, 0, 0, 0.0)
    for t in np.unique(rows):
        local = raw[t - span + 1:t + span]
        base = mechanism(data, local, unit=Unit.RECORD, eps=eps, delta=delta, scaler=scaler)
        for c in range(raw.shape[1]):
            for sign in (-1.0, 1.0):
                value = float(scaler.mean[c] + sign * OUTLIER * scaler.std[c])
                moved = mechanism(data, _record_change(local, span - 1, c, value),
                                  unit=Unit.RECORD, eps=eps, delta=delta, scaler=scaler)
                change = _normalised_change(base, moved)
                if change > best[0]:
                    best = (change, int(t), c, value)
    return best[1], best[2], best[3]


def _worst_window(data: ForecastData, channels: int) -> np.ndarray:
    """The window unit's worst canary: every channel the same window, flat with a jump at the
    end of the look-back and a horizon far above it, so its rows' features and targets lie
    beyond their clips and are projected onto the spheres (the bound's equality case)."""
    window = np.zeros(data.seq_len + data.horizon)
    window[data.seq_len - 1] = 1.0
    window[data.seq_len:] = 50.0
    return np.repeat(window[:, None], channels, axis=1)


@dataclass(frozen=True)
class CanaryPair:
    """D and D' as the audit's two mechanisms, and what the canary is."""

    first: LinearMechanism
    second: LinearMechanism
    canary: dict[str, Any]


def canary_pair(data: ForecastData, *, unit: Unit, eps: float, delta: float, canary: str,
                rng: np.random.Generator, bug: str | None = None) -> CanaryPair:
    """The two mechanisms of the game: on D, and on D' (D with the ``canary``)."""
    raw = np.asarray(data.train_raw, dtype=np.float64)
    if unit == Unit.WINDOW:
        if canary == "worst":
            block, where = _worst_window(data, raw.shape[1]), "the proof's equality case"
        else:
            start = int(rng.integers(0, raw.shape[0] - data.seq_len - data.horizon + 1))
            block = raw[start:start + data.seq_len + data.horizon]
            where = f"a copy of the training window at row {start}"
        first = mechanism(data, raw, unit=unit, eps=eps, delta=delta, scaler=None, bug=bug)
        second = mechanism(data, raw, unit=unit, eps=eps, delta=delta, scaler=None, bug=bug,
                           extra=block)
        return CanaryPair(first, second, {"kind": canary, "added_window": where})
    scaler = _public_scaler(data)
    if canary == "worst":
        t, c, value = _worst_record(data, raw, scaler, eps=eps, delta=delta)
    else:
        t, c = int(rng.integers(0, raw.shape[0])), int(rng.integers(0, raw.shape[1]))
        r = DEFAULTS["record"]["clip"]
        value = float(scaler.mean[c] + rng.uniform(-r, r) * scaler.std[c])
    first = mechanism(data, raw, unit=unit, eps=eps, delta=delta, scaler=scaler, bug=bug)
    second = mechanism(data, _record_change(raw, t, c, value), unit=unit, eps=eps, delta=delta,
                       scaler=scaler, bug=bug)
    return CanaryPair(first, second, {"kind": canary, "row": t, "channel": c,
                                      "old_value": float(raw[t, c]), "new_value": value})


def _upper(matrix: np.ndarray) -> np.ndarray:
    """The entries of a symmetric release that carry independent noise (upper triangle)."""
    return matrix[np.triu_indices(matrix.shape[0])]


def _kernel_scorer(pair: CanaryPair) -> Callable[[np.random.Generator, LinearMechanism], float]:
    """Draw one release of a side and score it as a kernel: ``(A_D + lambda I) W`` projected
    on the canary's effect on it between the noiseless fits of D and D' (module docstring)."""
    first, noiseless = pair.first, np.random.default_rng(0)
    ridge = first.release.sigma_a * math.sqrt(first.a.shape[0]) * first.ridge_scale
    lifted = first.a + ridge * np.eye(first.a.shape[0])
    direction = lifted @ (pair.second.weights(noiseless, noise=False)
                          - first.weights(noiseless, noise=False))
    direction = direction / max(float(np.linalg.norm(direction)), 1e-300)

    def score(rng: np.random.Generator, side: LinearMechanism) -> float:
        return float(np.sum((lifted @ side.weights(rng)) * direction))

    return score


def _statistics_scorer(pair: CanaryPair) -> Callable[[np.random.Generator, LinearMechanism],
                                                       float]:
    """Draw one release of a side and score its noisy statistics (the fit's own
    :func:`~qpriv.privacy.ssp.perturb`, the draws ``fit_dp_linear`` makes) with the
    Neyman-Pearson test of two Gaussians of equal covariance: the whitened release projected
    on the whitened shift between D and D'."""
    first, second = pair.first, pair.second
    sigma_a, sigma_b = first.release.sigma_a, first.release.sigma_b
    shift_a = (_upper(second.a) - _upper(first.a)) / sigma_a ** 2
    shift_b = (second.b - first.b) / sigma_b ** 2

    def score(rng: np.random.Generator, side: LinearMechanism) -> float:
        noisy_a, noisy_b = perturb(side.a, side.b, side.release, rng=rng)
        return float(np.dot(_upper(noisy_a) - _upper(first.a), shift_a)
                     + np.sum((noisy_b - first.b) * shift_b))

    return score


def game_ceiling(*, eps: float, delta: float, trials: int, confidence: float = 0.95) -> float:
    """The bound a perfect test can expect from this game on a mechanism that is exactly the
    claim's Gaussian (noise multiplier z, a canary at the sensitivity): the two sides' scores
    are N(0, 1) and N(1/z, 1), the rates sit at their expected values, and the threshold is
    the best on a fine grid. A finite game cannot certify more, so a bound is tight when it is
    near this, not near the claim."""
    return ceiling_at_shift(1.0 / gaussian_noise_multiplier(eps=eps, delta=delta),
                            delta=delta, trials=trials, confidence=confidence)


def ceiling_at_shift(shift: float, *, delta: float, trials: int,
                     confidence: float = 0.95) -> float:
    """:func:`game_ceiling` for scores N(0, 1) and N(``shift``, 1): the canary at the
    sensitivity moves the whitened release by ``shift``."""
    thresholds = np.linspace(-4.0, shift + 8.0, 4001)
    hits = np.round(scipy.stats.norm.sf(thresholds - shift) * trials)
    false_hits = np.round(scipy.stats.norm.sf(thresholds) * trials)
    tpr_lower, _ = clopper_pearson(hits, trials, confidence=confidence)
    _, fpr_upper = clopper_pearson(false_hits, trials, confidence=confidence)
    return float(np.max(epsilon_from_rates(tpr_lower=tpr_lower, fpr_upper=fpr_upper,
                                           delta=delta)))


@dataclass(frozen=True)
class GameRates:
    """The counted releases' outcome: hits on D', false hits on D, the planned threshold."""

    hits: int
    false_hits: int
    tpr_lower: float
    fpr_upper: float
    threshold: float
    value: float


def play_many_runs(release_score: Callable[[np.random.Generator, bool], float], *, seed: int,
                   trials: int, delta: float, confidence: float) -> GameRates:
    """Score ``trials`` releases of D (``release_score(rng, False)``) and of D' (``True``),
    each side on its own generator, with the threshold and direction planned from pilot
    releases on two further generators, and bound eps at ``delta`` (module docstring)."""

    def scores(prime: bool, stream: int, n: int) -> np.ndarray:
        rng = np.random.default_rng([seed, stream])
        return np.array([release_score(rng, prime) for _ in range(n)])

    pilot = max(200, trials // 4)
    pilot_first, pilot_second = scores(False, 2, pilot), scores(True, 3, pilot)
    moments = (float(pilot_second.mean()), float(pilot_second.var()),
               float(pilot_first.mean()), float(pilot_first.var()))
    threshold, direction = planned_threshold(moments, score_range=(-np.inf, np.inf),
                                             trials=trials, delta=delta,
                                             confidence=confidence)
    first, second = scores(False, 0, trials), scores(True, 1, trials)
    if direction == "A":  # guess D' when the score is at least the threshold
        hits, false_hits = int((second >= threshold).sum()), int((first >= threshold).sum())
    else:
        hits, false_hits = int((first < threshold).sum()), int((second < threshold).sum())
    tpr_lower, _ = clopper_pearson(hits, trials, confidence=confidence)
    _, fpr_upper = clopper_pearson(false_hits, trials, confidence=confidence)
    value = float(epsilon_from_rates(tpr_lower=tpr_lower, fpr_upper=fpr_upper, delta=delta))
    return GameRates(hits=hits, false_hits=false_hits, tpr_lower=float(tpr_lower),
                     fpr_upper=float(fpr_upper), threshold=threshold, value=value)


def check_game(*, unit: str, canary: str, trials: int, confidence: float,
               bug: str | None, bugs: tuple[str, ...]) -> tuple[int, float]:
    """(trials, confidence) checked, with the unit, canary and planted bug (one line each)."""
    if unit not in ("record", "window"):
        raise InvalidInputError(f"unit = {unit!r}: dp-linear is audited at 'record' or 'window'")
    if canary not in CANARIES:
        raise InvalidInputError(f"canary = {canary!r} is not one of {CANARIES}")
    if bug is not None and bug not in bugs:
        raise InvalidInputError(f"bug = {bug!r} is not one of {bugs}")
    trials = require_positive_int("trials", trials)
    if trials < 100:
        raise InvalidInputError(f"trials = {trials} is too few for a lower bound; use >= 100")
    return trials, require_in_range("confidence", confidence, low=0.0, high=1.0,
                                    high_inclusive=False)


@dataclass(frozen=True)
class LinearAudit:
    """The game's outcome: the bound at the claim's delta, the rates behind it, the canary."""

    claim: PrivacyClaim
    lower_bound: PrivacyClaim
    trials: int
    confidence: float
    tpr: float
    fpr: float
    tpr_lower: float
    fpr_upper: float
    threshold: float
    reach: float
    ceiling: float
    canary: dict[str, Any]
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"claim": self.claim.to_json(), "lower_bound": self.lower_bound.to_json(),
                "trials": self.trials, "confidence": self.confidence, "tpr": self.tpr,
                "fpr": self.fpr, "tpr_lower": self.tpr_lower, "fpr_upper": self.fpr_upper,
                "threshold": self.threshold, "reach": self.reach, "ceiling": self.ceiling,
                "canary": self.canary,
                "seconds": self.seconds}


def audit_dp_linear(*, unit: str = "record", eps: float = 1.0, delta: float = 1e-6,
                    canary: str = "worst", trials: int = 2000, seed: int = 0,
                    confidence: float = 0.95, observe: str = "statistics",
                    data: ForecastData | None = None, bug: str | None = None) -> LinearAudit:
    """The game above for dp-linear at ``unit`` and (``eps``, ``delta``), ``trials`` releases
    per side (at least 100), on ``data`` (default: :func:`audit_dataset` at L = 96, H = 24).

    ``bug`` (tests only, never a user's option): one of :data:`PLANTED_BUGS`, planted in the
    audited mechanism while the claim stays the correct fit's.

    Raises:
        InvalidInputError: an unknown unit, canary or bug, too few trials, or a bad budget.
    """
    start = time.perf_counter()
    if observe not in OBSERVED:
        raise InvalidInputError(f"observe = {observe!r} is not one of {OBSERVED}")
    trials, confidence = check_game(unit=unit, canary=canary, trials=trials,
                                    confidence=confidence, bug=bug, bugs=PLANTED_BUGS)
    if data is None:
        data = load_forecasting_data(csv=audit_dataset(seed=0), **AUDIT_SHAPE)
    the_unit = Unit(unit)
    scaler = _public_scaler(data) if the_unit == Unit.RECORD else "data"
    claim = fit_dp_linear(data, eps=eps, delta=delta, unit=unit, seed=0, select="fixed",
                          scaler=scaler).claims[0]
    pair = canary_pair(data, unit=the_unit, eps=eps, delta=delta, canary=canary,
                       rng=np.random.default_rng([seed, 9]), bug=bug)
    score = (_kernel_scorer if observe == "kernel" else _statistics_scorer)(pair)
    rates = play_many_runs(lambda rng, prime: score(rng, pair.second if prime else pair.first),
                           seed=seed, trials=trials, delta=delta, confidence=confidence)
    bound = PrivacyClaim(
        value=rates.value, delta=delta, kind=Kind.GLOBAL_DP, accounting=Accounting.RIGOROUS,
        unit=the_unit, covers=claim.covers,
        notes=(f"a many-run audit: {trials} releases from D and from D' ({canary} canary), "
               f"the likelihood-ratio test of the {observe} along the canary's effect, "
               "Clopper-Pearson rates",
               "the game runs fit_dp_linear on its own dataset with the design fixed and, at "
               "the record unit, the scaler declared public: a default fit's private design "
               "selection and private scaler are further releases, not in the game"),
        details={"bound": LOWER_BOUND, "confidence": confidence, "audit": "many-run",
                 "observed": observe, "canary": canary})
    return LinearAudit(
        claim=claim, lower_bound=bound, trials=trials, confidence=confidence,
        tpr=rates.hits / trials, fpr=rates.false_hits / trials, tpr_lower=rates.tpr_lower,
        fpr_upper=rates.fpr_upper, threshold=rates.threshold,
        reach=_normalised_change(pair.first, pair.second),
        ceiling=game_ceiling(eps=eps, delta=delta, trials=trials, confidence=confidence),
        canary=pair.canary,
        seconds=time.perf_counter() - start)
