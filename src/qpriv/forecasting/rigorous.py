"""Rigorous accounting of a forecasting run's LDPT feature path, beside the paper's.

Two services for :func:`qpriv.forecasting.run.run_forecast`:

- :func:`rigorous_summary`: beside a run's ``paper`` numbers, the rigorous (eps, delta) of one
  token state, one window and one record
  (:func:`qpriv.privacy.feature_path.accountant.account`) at the run's p, shots, token layout
  and epochs. The worst-pair search takes about a minute, so the answer is cached on disk by
  its settings (:func:`accounting_cache_dir`) and in memory.
- :func:`rigorous_setup`: ``--accounting rigorous``: the p (and gamma, sigma) that a target
  record-level (eps, delta) needs
  (:func:`qpriv.privacy.feature_path.rigorous_calibration.rigorous_calibration`), and
  ``normalisation="fixed"`` so that no per-window statistic bypasses the channel (the
  side-channel fix of :mod:`qpriv.audits.sidechannel`).
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from qpriv.errors import InvalidInputError
from qpriv.forecasting.config import ModelConfig
from qpriv.forecasting.datasets import cache_root
from qpriv.forecasting.methods import MethodSetup, replace_config
from qpriv.forecasting.records import RIGOROUS_UNITS
from qpriv.privacy.calibration import DEFAULT_D
from qpriv.privacy.claims import COVERS_FEATURES_WINDOW_PASS, Kind
from qpriv.privacy.feature_path.accountant import account, rigorous_notes
from qpriv.privacy.feature_path.rigorous_calibration import rigorous_calibration
from qpriv.progress import say
from qpriv.runs.cache import cached_json

RIGOROUS_PRIVACY = ("rigorous (eps, delta) per record over training of the quantum features "
                    "the channel releases, trace-distance neighbourhood; the trained weights are "
                    "not covered (the forecast targets reach them without the channel)")
TARGETS_NOTE = ("the forecast targets enter the training loss without passing the channel, so "
                "the trained weights are not covered by any feature-path epsilon: it holds for "
                "the quantum features released each pass")
FORMAT = 2
"""Version of the cached rigorous summaries: 2 stores each epsilon as a privacy claim."""


def accounting_cache_dir() -> Path:
    """:func:`~qpriv.forecasting.datasets.cache_root` ``/ "accounting"``
    (``~/.cache/qpriv/accounting`` on Linux)."""
    return cache_root() / "accounting"


def _settings(config: ModelConfig, *, epochs: int, delta: float) -> dict:
    settings = {"format": FORMAT, "p": round(config.p, 12), "dim": config.dim,
                "n_shots": config.n_shots, "stride": config.stride, "seq_len": config.seq_len,
                "epochs": epochs, "delta": delta}
    if config.encoding == "signed":  # the register and d differ from eq. 2's
        settings.update(encoding="signed", hilbert_dim=config.hilbert_dim,
                        d=round(config.neighbour_d, 12))
    return settings


def accounted_register(config: ModelConfig) -> dict[str, Any]:
    """What the accountant reads of ``config``'s encoding, as keyword arguments of
    :func:`~qpriv.privacy.feature_path.accountant.account` and
    :func:`~qpriv.privacy.feature_path.rigorous_calibration.rigorous_calibration`: the register's
    dimension ``dim``, the neighbouring trace distance ``d`` (:attr:`ModelConfig.neighbour_d`:
    the paper's assumed 0.1 for eq. 2, the proved ``4 c r / (c^2 + r^2)`` for the signed
    encoding) and the values per token ``token_length`` (None where a token fills the register,
    as in eq. 2)."""
    signed = config.encoding == "signed"
    return {"dim": config.hilbert_dim, "d": config.neighbour_d,
            "token_length": config.dim if signed else None}


SIGNED_SCOPES = {
    "fixed": "every window and record holding it (normalisation fixed: no other token state "
             "moves)",
    "revin": "the token unit only: RevIN's per-window mean and std move every token of a "
             "window, so at the window and record units the bound does not hold",
    None: "the token unit, and every window and record holding it where normalisation is "
          "fixed (--accounting rigorous); with RevIN (ldpt-signed's default) the token unit "
          "only, as its per-window mean and std move every token of a window",
}
"""Where the signed encoding's proved distance holds, by normalisation (None: not known, as
for ``qpriv account``, which accounts the channel without a run)."""


def signed_neighbourhood(config: ModelConfig, *, normalisation_known: bool = True) -> str:
    """The neighbourhood of the signed encoding, in words: the proved worst-case trace
    distance of one value replaced within the clipping range (and where it stops holding:
    at ``config.normalisation``, or both cases where ``normalisation_known`` is False)."""
    where = SIGNED_SCOPES[config.normalisation if normalisation_known else None]
    return (f"one value of a token replaced within [-{config.clip:g}, {config.clip:g}] (z-score "
            f"units, values clipped there): the signed states psi = (x, r) / ||(x, r)||, "
            f"r = {config.reference_amplitude:.6g}, move by at most d = {config.neighbour_d:.6g} "
            "in full trace norm (4 c r / (c^2 + r^2) for r >= c, else 2; proved, and attained "
            f"by x_i = -c -> +c with the other values 0); holds for {where}. The worst-pair "
            "search runs over every pure pair of the register at that d, the encodable ones "
            "among them, so the accounting is an upper bound for this encoding")


def encoding_assumptions(config: ModelConfig, assumptions: Sequence[str], *,
                         normalisation_known: bool = True) -> tuple[str, ...]:
    """The accountant's ``assumptions``
    (:data:`qpriv.privacy.feature_path.accountant.ASSUMPTIONS`) for ``config``'s encoding: as
    given for eq. 2; for the signed encoding the first, eq. 2's assumed d, becomes its proved
    neighbourhood (:func:`signed_neighbourhood`)."""
    if config.encoding != "signed":
        return tuple(assumptions)
    neighbourhood = signed_neighbourhood(config, normalisation_known=normalisation_known)
    return (neighbourhood, *assumptions[1:])


EQ2_NEIGHBOURHOOD_NOTE = (
    "eq. 2's amplitude encoding does not enforce the trace distance d: one changed value can "
    "move its token state up to the full distance 2 (a sign flip of a token's largest value; "
    "Table 2 measures real changes above d), so d here is the paper's neighbourhood, not a "
    "bound on what one changed record does (the signed encoding, ldpt-signed, proves its d)")


def neighbourhood_notes(config: ModelConfig) -> tuple[str, ...]:
    """The notes that say whether ``config``'s encoding enforces the accountant's d: none for
    the signed encoding (its proved neighbourhood rides in each entry), else
    :data:`EQ2_NEIGHBOURHOOD_NOTE`."""
    return () if config.encoding == "signed" else (EQ2_NEIGHBOURHOOD_NOTE,)


def rigorous_summary(config: ModelConfig, *, epochs: int, delta: float,
                     progress: bool = False) -> dict:
    """The rigorous (eps, delta) of token, window and record at the run's settings, each
    labelled, with the assumptions; cached by settings. ``progress``: where it is computed
    (not cached), a line and a bar on stderr say so."""
    settings = _settings(config, epochs=epochs, delta=delta)
    summary = dict(_cached_summary(json.dumps(settings, sort_keys=True), progress))
    if config.encoding == "signed" and "assumptions" in summary:
        # the signed encoding's d is proved, and each claim names it
        neighbourhood = signed_neighbourhood(config)
        summary["assumptions"] = list(encoding_assumptions(config, summary["assumptions"]))
        for unit in RIGOROUS_UNITS:
            summary[f"eps_{unit}"] = {**summary[f"eps_{unit}"], "neighbourhood": neighbourhood}
    for unit in RIGOROUS_UNITS:
        # what each claim rests on, set here so that a summary cached before says it too
        entry = summary.get(f"eps_{unit}")
        if isinstance(entry, dict):
            notes = (*rigorous_notes(unit, d=config.neighbour_d), *neighbourhood_notes(config))
            summary[f"eps_{unit}"] = {**entry, "notes": list(notes),
                                      **({"covers": COVERS_FEATURES_WINDOW_PASS}
                                         if unit == "window" else {})}
    return {**summary, "covers": covered(config)}


def rigorous_cached(config: ModelConfig, *, epochs: int, delta: float) -> bool:
    """Whether :func:`rigorous_summary` at these settings is a read from the disk cache, not
    a minute's computation (a damaged entry counts as cached: the plan is rough)."""
    key = json.dumps(_settings(config, epochs=epochs, delta=delta), sort_keys=True)
    return config.n_shots is None or _cache_path(key).is_file()


def covered(config: ModelConfig) -> str:
    """What a feature-path epsilon of ``config`` holds for, and what bypasses it."""
    bypass = ["the forecast targets (they reach the trained weights without the channel)"]
    if config.normalisation == "revin":
        bypass.append("RevIN's per-window mean and std (a side channel)")
    if config.uses_classical_embedding:
        bypass.append("the classical path (gate < 1)")
    return ("the quantum features the channel releases, for neighbours within the trace "
            f"distance; not covered: {'; '.join(bypass)}")


def _cache_path(key: str) -> Path:
    return accounting_cache_dir() / f"{hashlib.sha256(key.encode()).hexdigest()[:24]}.json"


@functools.lru_cache(maxsize=32)
def _cached_summary(key: str, progress: bool) -> dict:
    settings = json.loads(key)
    path = _cache_path(key)
    # an unwritable cache costs the next run a minute; a damaged entry is computed again
    kept = cached_json(
        path, lambda: {"settings": settings,
                       "summary": _compute_summary(settings, progress=progress)},
        damaged="recompute", fix="it is computed again", store="if-possible",
        valid=lambda saved: (saved.get("settings") == settings
                             and isinstance(saved.get("summary"), dict)))
    return kept["summary"]


def _compute_summary(settings: dict, *, progress: bool) -> dict:
    if settings["n_shots"] is None:
        return {"note": "exact probabilities are released (no shots): the rigorous accounting "
                        "of a finite-shot release does not apply; the exact distribution of "
                        "each token state is an unbounded number of shots"}
    if progress:
        say(f"rigorous accounting of the feature path at p = {settings['p']:.4g}, "
            f"{settings['epochs']} epochs (token, window, record): about a minute, once; "
            f"cached in {accounting_cache_dir()}")
    signed = settings.get("encoding") == "signed"
    report = account(p=settings["p"], delta=settings["delta"],
                     dim=settings["hilbert_dim"] if signed else settings["dim"],
                     d=settings["d"] if signed else DEFAULT_D,
                     token_length=settings["dim"] if signed else None,
                     n_shots=settings["n_shots"], stride=settings["stride"],
                     seq_len=settings["seq_len"], epochs=settings["epochs"],
                     units=RIGOROUS_UNITS, progress=progress)
    return {
        **{f"eps_{row.unit}": {**row.labelled(), "description": row.description,
                               "eps_rdp_check": row.eps_rdp}
           for row in report.rows},
        "assumptions": list(report.assumptions),
        "seconds": report.seconds,
    }


def rigorous_setup(setup: MethodSetup, *, eps_total: float, delta: float, epochs: int
                   ) -> MethodSetup:
    """The method ``setup`` recalibrated for a record-level rigorous (eps_total, delta) over
    ``epochs``, with per-window normalisation removed (the side channel closed)."""

    config = setup.config
    if setup.privacy != Kind.LOCAL_QDP or not config.use_quantum or config.n_shots is None:
        raise InvalidInputError(
            "--accounting rigorous calibrates the channel of an LDPT method with finite shots "
            "(ldpt or an ablation that keeps the channel); this method has none"
        )
    cal = rigorous_calibration(eps_total=eps_total, delta=delta, unit="record",
                               **accounted_register(config),
                               d_model=config.d_model, n_shots=config.n_shots,
                               stride=config.stride, seq_len=config.seq_len, epochs=epochs)
    sigma = cal.sigma if config.injects else config.sigma
    config = replace_config(config, p=cal.p, sigma=sigma, normalisation="fixed")
    return replace(
        setup, config=config, privacy=RIGOROUS_PRIVACY, eps_per_pass=None,
        noise={"p": cal.p, "gamma": cal.gamma, "sigma": sigma},
        notes=(*setup.notes, TARGETS_NOTE,
               "normalisation fixed: the series enters as z-scored with the training split's "
               "per-channel mean and std, released once in the clear and not accounted",
               f"the same p under the paper's chain would be called eps_s = "
               f"{cal.eps_s_paper:.4g} per pass"),
        rigorous=cal.as_dict(),
    )
