"""The ``rigorous`` accountant of the LDPT feature path, beside the ``paper`` accounting and never
mixed with it.

:func:`evaluate_pairs` composes the exact single-shot privacy-loss distribution of the worst of
the candidate neighbouring pairs (:mod:`qpriv.privacy.feature_path.worst_pair`) over a unit's
composition plan (:mod:`qpriv.privacy.feature_path.plan`) with dp-accounting, and cross-checks it
with the exact RDP (:mod:`qpriv.privacy.feature_path.divergences`). :func:`rigorous_epsilon`
does this for one unit, :func:`account` for every unit beside the paper's per-pass eps_s and its
composition over the epochs (eqs. 16-17). Every claim says what it rests on
(:func:`rigorous_notes`, :data:`ASSUMPTIONS`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from qpriv.errors import InvalidInputError
from qpriv.privacy.budget import FEATURE_PATH_DELTA
from qpriv.privacy.calibration import DEFAULT_ALPHA, DEFAULT_D, DEFAULT_DIM, calibrate
from qpriv.privacy.claims import (
    COVERS_FEATURES_OVER_TRAINING,
    COVERS_FEATURES_PER_PASS,
    COVERS_FEATURES_WINDOW_PASS,
    Accounting,
    Kind,
    PrivacyClaim,
    Unit,
)
from qpriv.privacy.composition import advanced_composition, basic_composition
from qpriv.privacy.feature_path.divergences import (
    GRID_POINTS,
    check_delta,
    pld_epsilon,
    rdp_epsilon,
    renyi_divergences,
)
from qpriv.privacy.feature_path.pairs import NeighbourPair, check_p
from qpriv.privacy.feature_path.plan import (
    DEFAULT_EPOCHS,
    DEFAULT_SEQ_LEN,
    DEFAULT_SHOTS,
    DEFAULT_STRIDE,
    UNITS,
    CompositionPlan,
    composition_plan,
)
from qpriv.privacy.feature_path.worst_pair import DEFAULT_RESTARTS, search_worst_pairs
from qpriv.privacy.theorems import channel_epsilon
from qpriv.progress import work_bar
from qpriv.quantum.tokens import n_tokens

CLAIM_UNITS = {"token": Unit.TOKEN, "token-training": Unit.TOKEN, "window": Unit.WINDOW,
               "record": Unit.RECORD}
"""The privacy unit of each composition scope (one token state is the unit of both ``token``
and ``token-training``: they differ in how many of its releases are composed)."""

WORST_PAIR_NOTE = (
    "the worst neighbouring pair is found by numerical search (random restarts, L-BFGS and the "
    "SIC-aligned pair) and composed for every measurement; it is not certified: a pair it does "
    "not dominate would make the true eps larger (a certified bound, from the sandwiched Renyi "
    "divergence, is about an order of magnitude looser)")
WINDOW_SCOPE_NOTE = (
    "window here is one changed time step composed over the tokens of one window that hold it, "
    "on one pass: not the add-or-remove-a-window unit of DP-SGD")


def rigorous_notes(unit: str, *, d: float) -> tuple[str, ...]:
    """What every rigorous feature-path claim of ``unit`` rests on: the neighbouring trace
    distance d, the numerically found worst pair, and (window) what the unit composes."""
    notes = (f"neighbours: token states within full trace distance d = {d:.6g}; whether one "
             "changed record stays within d depends on the encoding (see the claim's other "
             "notes and the assumptions)", WORST_PAIR_NOTE)
    return (*notes, WINDOW_SCOPE_NOTE) if unit == "window" else notes


ASSUMPTIONS = (
    "neighbourhood: the paper's bounded trace distance; a changed record moves every token "
    "state it touches by at most d (full trace norm) and no other token state. Real changes can "
    "exceed d (Table 2), and RevIN's per-window statistics move every token of the window",
    "worst case: the pure-state pair at distance exactly d found by numerical search (random "
    "restarts and L-BFGS on the unit's RDP bound, plus the SIC-aligned pair that attains the "
    "closed-form single-shot maximum); the same pair is assumed for every composed measurement "
    "(the RDP column takes the per-order maximum over all candidate pairs, which also covers "
    "mixtures of them). Tests check that random pairs never exceed it; it is not a certificate",
    "shots: each of the N_s shots is an independent SIC-POVM measurement of a fresh copy of "
    "E_p(rho), drawn afresh on every pass; the released counts are a post-processing of them",
    "no subsampling amplification: every training window is used in every epoch (shuffled "
    "batches, not Poisson sampling)",
    "purity: computed exactly and the same for every pure input, so data independent (free)",
    "injection noise (sigma, three points): no credit is taken; it is post-processing of the "
    "features and could only help, but it is not accounted as a privacy mechanism",
    "not covered: RevIN's per-window mean and std (a side channel), the forecast "
    "targets (they reach the loss without the channel), the classical path when gate < 1; so "
    "the trained weights are not covered, only the released quantum features",
    "counting: a window holds a changed time step in up to ceil(D/s) tokens; over the L windows "
    "that contain an interior time step it sits at every relative position once, so it is in "
    "n_tokens * D token states per epoch (fewer near the ends of the series). Validation "
    "windows read the last L training rows again, but such a row lies in fewer training "
    "windows: its training and validation windows number at most L - H + 1 together, so the "
    "interior record's count bounds it too",
    "accountant: dp-accounting PLD of the exact single-shot outcome distributions, pessimistic "
    "connect-the-dots discretisation, staged FFT self-composition; delta is per unit, not per "
    "dataset, and eps is the privacy loss in natural-log units",
)
"""What every rigorous (eps, delta) of the feature path rests on, listed in each report."""


# --- results --------------------------------------------------------------------------------

@dataclass(frozen=True)
class RigorousEpsilon:
    """The rigorous (eps, delta) of one unit at depolarizing probability p.

    ``eps`` is the PLD value (dp-accounting, pessimistic) of the worst candidate pair, ``eps_rdp``
    the RDP cross-check (per-order maximum over all candidates; an independent upper bound,
    usually looser, lower at very large eps where the pessimistic PLD grid costs more), ``pair`` the
    worst pair, ``step`` the PLD grid step, ``seconds`` the wall time of search and composition.
    """

    unit: str
    description: str
    eps: float
    delta: float
    eps_rdp: float
    factors: tuple[tuple[str, int], ...]
    count: int
    p: float
    d: float
    dim: int
    pair: NeighbourPair
    n_candidates: int
    step: float
    seconds: float

    kind = Kind.COMPOSED
    accounting = Accounting.RIGOROUS

    def claim(self, **details: object) -> PrivacyClaim:
        """The (eps, delta) of this unit as a :class:`PrivacyClaim` (extra ``details`` kept)."""
        return PrivacyClaim(
            value=self.eps, delta=self.delta, kind=self.kind, accounting=self.accounting,
            unit=CLAIM_UNITS[self.unit],
            covers=(COVERS_FEATURES_PER_PASS if self.unit == "token"
                    else COVERS_FEATURES_WINDOW_PASS if self.unit == "window"
                    else COVERS_FEATURES_OVER_TRAINING),
            notes=rigorous_notes(self.unit, d=self.d),
            details={"composed_over": self.unit, **details})

    def labelled(self) -> dict:
        """The claim's JSON form, for reports."""
        return self.claim().to_json()

    def as_dict(self) -> dict:
        """A JSON-ready dict (the pair as its source and trace distance)."""
        return {
            "unit": self.unit, "description": self.description, "eps": self.labelled(),
            "eps_rdp": replace(self.claim(accountant="exact discrete RDP, dp-accounting "
                                                     "conversion"),
                               value=self.eps_rdp).to_json(),
            "count": self.count, "factors": [list(f) for f in self.factors], "p": self.p,
            "d": self.d, "dim": self.dim, "worst_pair": self.pair.source,
            "worst_pair_trace_distance_full": self.pair.trace_distance_full,
            "candidates": self.n_candidates, "pld_step": self.step, "seconds": self.seconds,
        }


def evaluate_pairs(
    plan: CompositionPlan, pairs: Sequence[NeighbourPair], *, p: float, delta: float,
    d: float = DEFAULT_D, top: int = 3, grid_points: int = GRID_POINTS,
) -> RigorousEpsilon:
    """The rigorous eps of ``plan`` over candidate ``pairs``: PLD eps of the ``top`` pairs with
    the largest RDP bound (the largest of them is reported), and the RDP cross-check."""
    if not pairs:
        raise InvalidInputError("evaluate_pairs needs at least one candidate pair")
    start = time.perf_counter()
    p, delta = check_p(p), check_delta(delta)
    dists = [pair.distributions(p=p) for pair in pairs]
    curves = np.array([renyi_divergences(P, Q) for P, Q in dists])
    rdp_each = [rdp_epsilon(curve, count=plan.count, delta=delta) for curve in curves]
    best = None
    for index in np.argsort(rdp_each)[::-1][:top]:
        eps, step = pld_epsilon(*dists[index], factors=plan.factors, delta=delta,
                                grid_points=grid_points)
        if best is None or eps > best[0]:
            best = (eps, step, pairs[index])
    eps, step, pair = best
    return RigorousEpsilon(
        unit=plan.unit, description=plan.description, eps=eps, delta=delta,
        eps_rdp=rdp_epsilon(curves.max(axis=0), count=plan.count, delta=delta),
        factors=plan.factors, count=plan.count, p=p, d=d, dim=pairs[0].psi.shape[0],
        pair=pair, n_candidates=len(pairs), step=step, seconds=time.perf_counter() - start,
    )


def rigorous_epsilon(
    *, p: float, unit: str = "record", delta: float = FEATURE_PATH_DELTA, d: float = DEFAULT_D,
    dim: int = DEFAULT_DIM, n_shots: int = DEFAULT_SHOTS, stride: int = DEFAULT_STRIDE,
    seq_len: int = DEFAULT_SEQ_LEN, epochs: int = DEFAULT_EPOCHS,
    restarts: int = DEFAULT_RESTARTS, seed: int = 0,
    extra_pairs: Sequence[NeighbourPair] = (), token_length: int | None = None,
) -> RigorousEpsilon:
    """Rigorous (eps, delta) of one unit of privacy of the LDPT feature path at noise p.

    Searches the worst pair for the unit's composition count
    (:func:`~qpriv.privacy.feature_path.worst_pair.search_worst_pairs`),
    composes its exact single-shot PLD with dp-accounting and cross-checks with RDP.

    >>> r = rigorous_epsilon(p=0.9505, unit="token", restarts=1)   # doctest: +SKIP
    >>> round(r.eps, 2), r.delta, r.kind, r.accounting              # doctest: +SKIP
    (0.39, 1e-05, 'composed', 'rigorous')
    """
    start = time.perf_counter()
    plan = composition_plan(unit, n_shots=n_shots, dim=dim, stride=stride, seq_len=seq_len,
                            epochs=epochs, token_length=token_length)
    pairs = [*extra_pairs, *search_worst_pairs(p=p, d=d, dim=dim, count=plan.count,
                                               delta=delta, restarts=restarts, seed=seed)]
    result = evaluate_pairs(plan, pairs, p=p, delta=delta, d=d)
    return _with_seconds(result, time.perf_counter() - start)


def _with_seconds(result: RigorousEpsilon, seconds: float) -> RigorousEpsilon:
    return dataclasses.replace(result, seconds=seconds)


# --- the report beside the paper's numbers -------------------------------------------------------

def paper_equivalent_eps_s(*, p: float, d: float = DEFAULT_D, dim: int = DEFAULT_DIM,
                           alpha: float = DEFAULT_ALPHA) -> float:
    """The per-pass eps_s whose Algorithm 1 calibration gives this p: Theorem 1's
    ``eps_ch = ln(1 + (1-p) d D / p)`` (eq. 4) divided by the channel share alpha."""
    return channel_epsilon(p=p, d=d, dim=dim) / alpha


@dataclass(frozen=True)
class AccountingReport:
    """Rigorous (eps, delta) for every unit beside the paper's numbers, with the assumptions."""

    p: float
    eps_s: float
    eps_s_given: bool
    paper: dict
    rows: tuple[RigorousEpsilon, ...]
    settings: dict
    assumptions: tuple[str, ...] = field(default=ASSUMPTIONS)
    seconds: float = 0.0

    def row(self, unit: str) -> RigorousEpsilon:
        """The row of one unit."""
        return next(r for r in self.rows if r.unit == unit)

    def as_dict(self) -> dict:
        """A JSON-ready dict."""
        return {
            "p": self.p, "eps_s": self.eps_s, "eps_s_given": self.eps_s_given,
            "paper": self.paper, "rows": [r.as_dict() for r in self.rows],
            "settings": self.settings, "assumptions": list(self.assumptions),
            "seconds": self.seconds,
        }


def account(
    *, eps_s: float | None = None, p: float | None = None, delta: float = FEATURE_PATH_DELTA,
    d: float = DEFAULT_D, dim: int = DEFAULT_DIM, n_shots: int = DEFAULT_SHOTS,
    stride: int = DEFAULT_STRIDE, seq_len: int = DEFAULT_SEQ_LEN, epochs: int = DEFAULT_EPOCHS,
    alpha: float = DEFAULT_ALPHA, delta_prime: float = 1e-6,
    units: Sequence[str] = UNITS, restarts: int = DEFAULT_RESTARTS, seed: int = 0,
    progress: bool = False, token_length: int | None = None,
) -> AccountingReport:
    """Account the LDPT feature path rigorously at the paper's calibration of ``eps_s`` (or at a
    given ``p``) for every unit, beside the paper's per-pass eps_s and its composition over the
    epochs (eq. 16 basic, eq. 17 advanced with ``delta_prime``).

    ``token_length``: the values per token where the register holds more amplitudes than a
    token has values (the signed encoding: 16 values in ``dim`` = 32 amplitudes; default
    ``dim``); ``d`` is then that encoding's proved neighbouring distance.

    Every unit's worst-pair search runs at its own count; each unit is then evaluated over the
    union of all candidates, so a pair found for one unit also serves the others. ``progress``:
    a bar over those searches and evaluations on stderr (seconds at the paper's settings,
    minutes for a million shots).

    Examples:
        Seconds: one token's 64 shots at the paper's calibration of eps_s = 0.1, which counts one:

        >>> report = account(eps_s=0.1, units=("token",), n_shots=64, restarts=1)
        >>> report.row("token").eps > report.eps_s
        True
    """
    start = time.perf_counter()
    if (eps_s is None) == (p is None):
        raise InvalidInputError("give exactly one of eps_s (paper calibration) or p")
    eps_s_given = eps_s is not None
    if eps_s is not None:
        p = calibrate(eps_s, d=d, dim=dim, alpha=alpha).p
    else:
        p = check_p(p)
        eps_s = paper_equivalent_eps_s(p=p, d=d, dim=dim, alpha=alpha)
    delta = check_delta(delta)
    plans = [composition_plan(u, n_shots=n_shots, dim=dim, stride=stride, seq_len=seq_len,
                              epochs=epochs, token_length=token_length) for u in units]
    pairs: list[NeighbourPair] = []
    search_seconds = []
    rows = []
    with work_bar(total=2 * len(plans), desc="rigorous accounting", unit="step",
                  enabled=progress) as bar:
        for plan in plans:
            bar.set_postfix_str(f"worst-pair search, {plan.unit}")
            began = time.perf_counter()
            pairs += search_worst_pairs(p=p, d=d, dim=dim, count=plan.count, delta=delta,
                                        restarts=restarts, seed=seed)
            search_seconds.append(time.perf_counter() - began)
            bar.update()
        for plan, searched in zip(plans, search_seconds, strict=True):
            bar.set_postfix_str(f"PLD of {plan.count:,} measurements, {plan.unit}")
            row = evaluate_pairs(plan, pairs, p=p, delta=delta, d=d)
            rows.append(_with_seconds(row, row.seconds + searched))
            bar.update()
    per_pass = paper_per_pass_claim(eps_s)
    composed = replace(per_pass, kind=Kind.COMPOSED, covers=COVERS_FEATURES_OVER_TRAINING)
    paper = {
        "eps_per_pass": per_pass.to_json(),
        "eps_basic": replace(composed, value=basic_composition(eps_s, epochs=epochs),
                             details={"epochs": epochs}).to_json(),
        "eps_advanced": replace(
            composed, value=advanced_composition(eps_s, epochs=epochs, delta_prime=delta_prime),
            details={"epochs": epochs, "delta_prime": delta_prime}).to_json(),
        "note": "the paper's unit is one pass of one token state through the channel, once "
                "per record per epoch; it counts neither the N_s shots nor the tokens and "
                "windows that hold a record",
    }
    settings = {"delta": delta, "d": d, "dim": dim, "n_shots": n_shots, "stride": stride,
                "seq_len": seq_len, "epochs": epochs, "alpha": alpha, "restarts": restarts,
                "seed": seed,
                "n_tokens": n_tokens(dim=token_length or dim, stride=stride, seq_len=seq_len),
                **({"token_length": token_length} if token_length is not None else {})}
    return AccountingReport(p=p, eps_s=eps_s, eps_s_given=eps_s_given, paper=paper,
                            rows=tuple(rows),
                            settings=settings, seconds=time.perf_counter() - start)


def paper_per_pass_claim(eps_s: float) -> PrivacyClaim:
    """The LDPT paper's per-pass claim (Algorithm 1's eps_s) at ``eps_s``."""
    return PrivacyClaim(value=eps_s, kind=Kind.LOCAL_QDP, accounting=Accounting.PAPER,
                        unit=Unit.TOKEN, covers=COVERS_FEATURES_PER_PASS)
