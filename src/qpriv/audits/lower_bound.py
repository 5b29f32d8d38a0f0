"""An empirical lower bound on the privacy of the released features: a distinguishing game.

The auditor of Jagielski et al. (2020) and Nasr et al. (2021): draw many releases of one token's
features (N_s SIC-POVM shot counts through the depolarizing channel, the real release path) from
each of two neighbouring states, score every release with the log-likelihood ratio
``sum_k c_k ln(P_k / Q_k)`` (the Neyman-Pearson test of the pair), fix a threshold before drawing
(the attacker knows the pair, so the score's moments are known) and bound the true and false
positive rates with Clopper-Pearson intervals. Any (eps, delta)-DP mechanism must satisfy
``TPR <= e^eps FPR + delta`` (and the same with the roles swapped), so

    eps >= ln((TPR_lower - delta) / FPR_upper)

holds with the stated confidence. It must stay at or below the rigorous eps of the same unit
(:mod:`qpriv.privacy.feature_path.accountant`, one token state with N_s shots); where it
exceeds the paper's per-pass eps_s (a pure eps, delta = 0), the paper's claim is refuted by
experiment.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.optimize
import scipy.stats
import torch
from tqdm.auto import tqdm

from qpriv.errors import InvalidInputError, require_in_range, require_positive_int
from qpriv.privacy.budget import FEATURE_PATH_DELTA
from qpriv.privacy.claims import LOWER_BOUND, Accounting, Kind, PrivacyClaim, Unit
from qpriv.privacy.feature_path.pairs import NeighbourPair
from qpriv.progress import work_bar
from qpriv.quantum.features import outcome_probabilities, quantum_features
from qpriv.quantum.shots import sample_counts
from qpriv.quantum.states import amplitude_encode, pure_trace_distance_full
from qpriv.threads import one_torch_thread

DEFAULT_TRIALS = 100_000
"""Releases drawn from each of the two states."""

_CHUNK = 8192
"""Releases sampled per step (8192 x 256 counts, 16 MiB)."""




def clopper_pearson(successes: np.ndarray, trials: int, *,
                    confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """Exact (Clopper-Pearson) two-sided interval of a binomial rate at ``confidence``; each
    end is a one-sided bound at level (1 - confidence) / 2. Vectorised over ``successes``."""
    k = np.asarray(successes, dtype=float)
    tail = (1.0 - confidence) / 2.0
    low = np.where(k > 0, scipy.stats.beta.ppf(tail, k, trials - k + 1), 0.0)
    high = np.where(k < trials, scipy.stats.beta.ppf(1.0 - tail, k + 1, trials - k), 1.0)
    return low, high


def epsilon_from_rates(*, tpr_lower: np.ndarray, fpr_upper: np.ndarray,
                       delta: float) -> np.ndarray:
    """``ln((TPR_lower - delta) / FPR_upper)``, 0 where there is no evidence (never negative)."""
    tpr_lower, fpr_upper = np.asarray(tpr_lower, float), np.asarray(fpr_upper, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        eps = np.log((tpr_lower - delta) / fpr_upper)
    return np.where(np.isfinite(eps) & (eps > 0), eps, 0.0)


@dataclass(frozen=True)
class LowerBound:
    """Result of a distinguishing game on one token's released features.

    ``eps_lower`` holds at ``delta`` and ``eps_lower_pure`` at delta = 0, each with probability
    ``confidence`` over the trials; ``trials`` releases per state, tested at the planned
    ``threshold`` (guessing ``direction``'s state when the score is on its side; ``tpr``,
    ``fpr``: point estimates; ``tpr_lower``, ``fpr_upper``: the Clopper-Pearson bounds).
    """

    eps_lower: float
    eps_lower_pure: float
    delta: float
    confidence: float
    trials: int
    n_shots: int
    p: float
    threshold: float
    direction: str
    tpr: float
    fpr: float
    tpr_lower: float
    fpr_upper: float
    pair_source: str
    seconds: float

    unit = Unit.TOKEN
    kind = Kind.COMPOSED
    accounting = Accounting.RIGOROUS
    bound = LOWER_BOUND

    def labelled(self) -> dict:
        """The lower bound as a :class:`PrivacyClaim`'s JSON form (``bound`` and
        ``confidence`` in its details): what any valid epsilon at this delta must exceed."""
        return PrivacyClaim(
            value=self.eps_lower, delta=self.delta, kind=self.kind, accounting=self.accounting,
            unit=self.unit, covers="the N_s shots of one token's state on one pass",
            details={"bound": self.bound, "confidence": self.confidence}).to_json()

    def as_dict(self) -> dict:
        """A JSON-ready dict."""
        return {
            "eps_lower": self.labelled(),
            "eps_lower_pure": {**self.labelled(), "value": self.eps_lower_pure, "delta": 0.0},
            "trials": self.trials, "n_shots": self.n_shots, "p": self.p,
            "threshold": self.threshold, "direction": self.direction, "tpr": self.tpr,
            "fpr": self.fpr, "tpr_lower": self.tpr_lower, "fpr_upper": self.fpr_upper,
            "pair": self.pair_source, "seconds": self.seconds,
        }


def planned_threshold(moments: tuple[float, float, float, float], *,
                       score_range: tuple[float, float], trials: int, delta: float,
                       confidence: float) -> tuple[float, str]:
    """The threshold and direction fixed before any trial is drawn.

    The attacker knows the pair, so the score's mean and variance under each state are known
    exactly (``n_shots`` times the single-shot moments). With a normal approximation of the
    score and of the Clopper-Pearson margins at ``trials``, pick the threshold with the largest
    expected bound, inside the range the score can take. Only the choice uses the
    approximation; the bound itself is exact, and since the threshold does not depend on the
    trials, every trial counts towards it.
    """
    mean_a, var_a, mean_b, var_b = moments
    sd_a, sd_b = math.sqrt(var_a), math.sqrt(var_b)
    z = scipy.stats.norm.isf((1.0 - confidence) / 2.0)
    low = max(min(mean_a - 6 * sd_a, mean_b - 6 * sd_b), score_range[0])
    high = min(max(mean_a + 6 * sd_a, mean_b + 6 * sd_b), score_range[1])
    thresholds = np.linspace(low, high, 4001)[1:]  # a score >= the lowest is always true
    above_a = scipy.stats.norm.sf(thresholds, mean_a, sd_a)
    above_b = scipy.stats.norm.sf(thresholds, mean_b, sd_b)
    best = (-1.0, float(thresholds[0]), "A")
    # "A": guess psi when score >= t (TPR from A, FPR from B); "B": guess psi' when score < t.
    for direction, hit, false_hit in (("A", above_a, above_b), ("B", 1 - above_b, 1 - above_a)):
        tpr_lower = hit - z * np.sqrt(hit * (1 - hit) / trials)
        fpr_upper = false_hit + z * np.sqrt(false_hit * (1 - false_hit) / trials) + 1.0 / trials
        eps = epsilon_from_rates(tpr_lower=tpr_lower, fpr_upper=fpr_upper, delta=delta)
        i = int(np.argmax(eps))
        if eps[i] > best[0]:
            best = (float(eps[i]), float(thresholds[i]), direction)
    return best[1], best[2]


def score_moments(probs_a: np.ndarray, probs_b: np.ndarray, log_ratio: np.ndarray,
                  n_shots: int) -> tuple[float, float, float, float]:
    """Mean and variance of the score ``sum_k c_k ln(P_k/Q_k)`` of ``n_shots`` shots under each
    state: ``n_shots`` times those of one shot's loss."""
    out = []
    for probs in (probs_a, probs_b):
        mean = float(np.sum(probs * log_ratio))
        out += [n_shots * mean, n_shots * (float(np.sum(probs * log_ratio**2)) - mean**2)]
    return out[0], out[1], out[2], out[3]


def score_range(log_ratio: np.ndarray, n_shots: int) -> tuple[float, float]:
    """The smallest and largest score ``n_shots`` shots can give."""
    return n_shots * float(np.min(log_ratio)), n_shots * float(np.max(log_ratio))


def distinguishing_game(
    draw_scores: Callable[[int, int], np.ndarray], *,
    moments: tuple[float, float, float, float], support: tuple[float, float], trials: int,
    delta: float, confidence: float, n_shots: int, p: float, pair_source: str,
) -> LowerBound:
    """Run the game on ``draw_scores(which, n)`` (n scores of releases of state ``which`` in
    {0: psi, 1: psi'}) with the threshold planned from the scores' ``moments`` within their
    ``support`` (smallest and largest possible score)."""
    start = time.perf_counter()
    trials = require_positive_int("trials", trials)
    if trials < 100:
        raise InvalidInputError(f"trials = {trials} is too few for a lower bound; use >= 100")
    if trials > MAX_TRIALS:  # both sides' scores are held in memory (16 bytes per trial)
        raise InvalidInputError(
            f"trials = {trials:,} is more than the game holds in memory; use <= {MAX_TRIALS:,}"
        )
    delta = require_in_range("delta", delta, low=0.0, low_inclusive=True, high=1.0,
                             high_inclusive=False)
    confidence = require_in_range("confidence", confidence, low=0.0, high=1.0,
                                  high_inclusive=False)
    threshold, direction = planned_threshold(moments, score_range=support, trials=trials,
                                              delta=delta, confidence=confidence)
    with one_torch_thread():
        scores_a, scores_b = draw_scores(0, trials), draw_scores(1, trials)
    if direction == "A":
        hits, false_hits = int((scores_a >= threshold).sum()), int((scores_b >= threshold).sum())
    else:
        hits, false_hits = int((scores_b < threshold).sum()), int((scores_a < threshold).sum())
    tpr_lower, _ = clopper_pearson(hits, trials, confidence=confidence)
    _, fpr_upper = clopper_pearson(false_hits, trials, confidence=confidence)

    def eps_at(level: float) -> float:
        return float(epsilon_from_rates(tpr_lower=tpr_lower, fpr_upper=fpr_upper, delta=level))

    return LowerBound(
        eps_lower=eps_at(delta), eps_lower_pure=eps_at(0.0), delta=delta,
        confidence=confidence, trials=trials, n_shots=n_shots, p=p, threshold=threshold,
        direction="psi" if direction == "A" else "psi'", tpr=hits / trials,
        fpr=false_hits / trials, tpr_lower=float(tpr_lower), fpr_upper=float(fpr_upper),
        pair_source=pair_source, seconds=time.perf_counter() - start,
    )


MAX_TRIALS = 20_000_000
"""The most trials per side of the distinguishing game (320 MB of scores in all)."""


def _scores_in_chunks(counts_of: Callable[[int], torch.Tensor], log_ratio: torch.Tensor,
                      n: int, bar: tqdm) -> np.ndarray:
    scores = []
    for start in range(0, n, _CHUNK):
        size = min(_CHUNK, n - start)
        scores.append((counts_of(size).to(torch.float64) @ log_ratio).numpy())
        bar.update(size)
    return np.concatenate(scores)


def _releases_bar(trials: int, n_shots: int, progress: bool) -> tqdm:
    """Both sides' releases; shown when asked for, since trials x N_s shots can take minutes
    (1e5 releases of 1e5 shots: about 2 minutes)."""
    return work_bar(total=2 * trials, desc=f"distinguishing game ({n_shots:,} shots each)",
                    unit="release", enabled=progress, unit_scale=True)


def pair_lower_bound(
    pair: NeighbourPair, *, p: float, n_shots: int, trials: int = DEFAULT_TRIALS,
    delta: float = FEATURE_PATH_DELTA, confidence: float = 0.95, seed: int = 0,
    progress: bool = False,
) -> LowerBound:
    """The game on a pair of states (e.g. the accountant's worst pair): releases are exact
    multinomial counts of ``n_shots`` shots (:func:`qpriv.quantum.shots.sample_counts`, the
    sampler of the feature path) from the SIC outcome probabilities after E_p. ``progress``:
    a bar over the releases on stderr."""
    n_shots = require_positive_int("n_shots", n_shots)
    states = torch.from_numpy(np.stack([pair.psi, pair.psi_prime]))
    probs = outcome_probabilities(states, p=p)
    log_ratio = probs[0].log() - probs[1].log()
    generator = torch.Generator().manual_seed(seed)

    def draw(which: int, n: int) -> np.ndarray:
        row = probs[which]
        return _scores_in_chunks(
            lambda m: sample_counts(row.expand(m, -1), n_shots, generator=generator),
            log_ratio, n, bar,
        )

    moments = score_moments(probs[0].numpy(), probs[1].numpy(), log_ratio.numpy(), n_shots)
    with _releases_bar(trials, n_shots, progress) as bar:
        return distinguishing_game(draw, moments=moments,
                                   support=score_range(log_ratio.numpy(), n_shots),
                                   trials=trials, delta=delta, confidence=confidence,
                                   n_shots=n_shots, p=p, pair_source=pair.source)


def window_pair_at_distance(window: torch.Tensor, *, d: float,
                            index: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """A real window and a copy with entry ``index`` moved by tau, tau chosen so that the two
    amplitude-encoded states are exactly at full trace distance ``d`` (a record change inside
    the paper's neighbourhood, section 6.2)."""
    d = require_in_range("d (trace distance, full trace norm)", d, low=0.0, high=2.0)
    x = window.to(torch.float64).reshape(-1)
    if not 0 <= index < x.numel():
        raise InvalidInputError(f"index = {index} is outside the window's 0..{x.numel() - 1}")
    psi, _ = amplitude_encode(x)

    def gap(tau: float) -> float:
        moved = x.clone()
        moved[index] += tau
        return float(pure_trace_distance_full(psi, amplitude_encode(moved)[0])) - d

    scale = float(x.norm())
    high = scale
    while gap(high) < 0:
        high *= 2.0
        if high > 1e6 * max(scale, 1.0):
            raise InvalidInputError(
                f"moving entry {index} cannot reach trace distance d = {d:g}; pick another index"
            )
    tau = scipy.optimize.brentq(gap, 0.0, high, xtol=1e-14)
    moved = x.clone()
    moved[index] += tau
    return x, moved


def window_pair_lower_bound(
    window: torch.Tensor, window_prime: torch.Tensor, *, p: float, n_shots: int,
    trials: int = DEFAULT_TRIALS, delta: float = FEATURE_PATH_DELTA, confidence: float = 0.95,
    seed: int = 0, progress: bool = False,
) -> LowerBound:
    """The game on two real windows through the model's own feature function
    (:func:`qpriv.quantum.features.quantum_features`: encoding, channel, SIC, shots); the
    released frequencies are turned back into counts and scored with the pair's exact
    log-likelihood ratio. ``progress``: a bar over the releases on stderr."""
    n_shots = require_positive_int("n_shots", n_shots)
    windows = torch.stack([window.reshape(-1), window_prime.reshape(-1)]).to(torch.float64)
    states, _ = amplitude_encode(windows)
    probs = outcome_probabilities(states, p=p)
    log_ratio = probs[0].log() - probs[1].log()
    generator = torch.Generator().manual_seed(seed)
    distance = float(pure_trace_distance_full(states[0], states[1]))

    def draw(which: int, n: int) -> np.ndarray:
        row = windows[which].to(torch.float32)

        def counts(m: int) -> torch.Tensor:
            freqs, _ = quantum_features(row.expand(m, -1), p=p, n_shots=n_shots,
                                        generator=generator)
            return torch.round(freqs.to(torch.float64) * n_shots)

        return _scores_in_chunks(counts, log_ratio, n, bar)

    moments = score_moments(probs[0].numpy(), probs[1].numpy(), log_ratio.numpy(), n_shots)
    with _releases_bar(trials, n_shots, progress) as bar:
        return distinguishing_game(
            draw, moments=moments, support=score_range(log_ratio.numpy(), n_shots),
            trials=trials, delta=delta, confidence=confidence, n_shots=n_shots, p=p,
            pair_source=f"real windows at trace distance {distance:.4g}",
        )


def paper_refuted(bound: LowerBound, eps_per_pass: float) -> bool:
    """Whether the game refutes a pure per-pass claim: ``eps_lower_pure > eps_per_pass``."""
    return math.isfinite(bound.eps_lower_pure) and bound.eps_lower_pure > eps_per_pass
