"""What a privacy-utility frontier will run, checked before anything is written: its units and
defaults, how each method is drawn (its role: what its eps covers at the chosen unit), the eps
each method's calibration takes, and the cells of every series (method x eps x seed).

The run itself is :func:`qpriv.experiments.frontier.run_frontier`, whose module says what each
method's epsilon is and why the linear family always runs at L = 336.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from qpriv.errors import ArgumentError, InvalidInputError, require_positive_int
from qpriv.experiments.grid import TINY, Budget, Cell
from qpriv.forecasting.config import ModelConfig
from qpriv.forecasting.linear import check_dp_linear_eps
from qpriv.forecasting.methods import (
    LINEAR,
    METHODS,
    NO_PRIVACY,
    check_method_eps,
    method,
    setup_method,
)
from qpriv.privacy.budget import GLOBAL_DELTA
from qpriv.privacy.claims import Kind, Unit
from qpriv.privacy.dpsgd_accounting import check_rdp_eps

UNITS = (Unit.RECORD.value, Unit.WINDOW.value)
"""The units a frontier can be stated at."""
DEFAULT_METHODS = ("dp-linear", "dpsgd", "ldpt", "public", "ridge", "classical")
CSV_METHODS = ("dp-linear", "public", "ridge")
"""The methods of a frontier on a user's CSV unless others are asked for: the closed-form ones,
seconds in all; the trained ones (dpsgd, ldpt, classical) take minutes a cell at the full
budget and are one ``methods`` away."""
DEFAULT_EPS = (0.1, 0.5, 1.0, 5.0)
DEFAULT_SEEDS = 5
"""Noise seeds of the closed-form methods (a fit takes under a second)."""
DEFAULT_BACKBONE_SEEDS = 1
"""Seeds of the trained methods (minutes a run at the full budget)."""
FIRST_SEED = 2024
LINEAR_SEQ_LEN = 336
"""The look-back of the linear family at every budget (its defaults were chosen at L = 336;
it needs L >= 168)."""

COVERS = "covers"
OTHER_UNIT = "other unit"
FEATURE_PATH = "feature path"
FLOOR = "floor"
NON_PRIVATE = "non-private"
ROLES = (COVERS, OTHER_UNIT, FEATURE_PATH, FLOOR, NON_PRIVATE)
"""How a row reads: its guarantee covers the chosen unit and the weights; it is a guarantee at
another unit; it covers neither the targets nor the weights; the public floor; no guarantee."""


@dataclass(frozen=True)
class Series:
    """One method of a frontier: how it is drawn, the eps it runs at and its seeds."""

    method: str
    role: str
    eps: tuple[float | None, ...]
    seeds: tuple[int, ...]
    unit: str | None
    """The unit the run is asked for (dp-linear: the frontier's; others: their own)."""
    family: str


def frontier_methods() -> list[str]:
    """The registered methods a frontier can draw: all but those that take an eps and state
    no guarantee."""
    return sorted(name for name, entry in METHODS.items()
                  if not (entry.needs_eps and entry.privacy == NO_PRIVACY))


def role_of(name: str, *, unit: str) -> str:
    """How method ``name`` is drawn on a frontier at ``unit`` (see :data:`ROLES`).

    Raises:
        InvalidInputError: an unknown method, or one that takes an eps but states no privacy
            guarantee (nothing to put on a frontier).
    """
    entry = method(name, listed=frontier_methods())
    if not entry.needs_eps:
        return FLOOR if entry.family == LINEAR and entry.privacy != NO_PRIVACY else NON_PRIVATE
    if entry.privacy == NO_PRIVACY:
        raise InvalidInputError(
            f"method {name!r} takes an eps but states no privacy guarantee at any unit, so it "
            f"has no place on a {unit}-unit frontier; drop it from --methods (e.g. dp-linear, "
            "dpsgd, ldpt, public, ridge, classical)")
    if unit in entry.units and entry.privacy == Kind.GLOBAL_DP:
        return COVERS
    if entry.units:
        return OTHER_UNIT
    return FEATURE_PATH


def plan(
    *, unit: str, eps: Sequence[float], methods: Sequence[str], seeds: int,
    backbone_seeds: int,
) -> list[Series]:
    """The series of a frontier, every argument checked (nothing is run or written).

    Raises:
        InvalidInputError: an unknown unit, an eps <= 0 or outside what a method's calibration
            takes (:func:`check_frontier_eps`), an eps or method given twice, an unknown method
            or one that states no guarantee, a seed count < 1.
    """
    if unit not in UNITS:
        raise InvalidInputError(f"unit {unit!r} is not a frontier unit; use one of "
                                f"{', '.join(UNITS)}")
    seeds = require_positive_int("seeds", seeds)
    backbone_seeds = require_positive_int("backbone_seeds", backbone_seeds)
    eps = tuple(eps)
    if not eps:
        raise InvalidInputError("no eps given; give at least one budget > 0, e.g. 0.1 1")
    for value in eps:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
                math.isfinite(value) and value > 0):
            raise ArgumentError(f"{{eps}} {ArgumentError.literal(repr(value))} is not a "
                                "finite number > 0; give privacy budgets > 0, e.g. 0.1 0.5 1 5")
    for what, given in (("eps", eps), ("methods", tuple(methods))):
        repeated = sorted({str(v) for v in given if given.count(v) > 1})
        if repeated:
            raise ArgumentError(f"{{{what}}} {ArgumentError.literal(', '.join(repeated))} "
                                "given more than once; give each once")
    if not methods:
        raise InvalidInputError(f"no methods given; e.g. {' '.join(DEFAULT_METHODS)}")
    series = []
    for name in methods:
        role = role_of(name, unit=unit)
        entry = method(name)
        if entry.needs_eps:
            for value in eps:  # e.g. ldpt's calibration refuses an eps above its range
                check_frontier_eps(name, float(value))
        deterministic = entry.family == LINEAR and not entry.needs_eps
        count = 1 if deterministic else seeds if entry.family == LINEAR else backbone_seeds
        series.append(Series(
            method=name, role=role,
            eps=tuple(float(v) for v in sorted(eps)) if entry.needs_eps else (None,),
            seeds=tuple(range(FIRST_SEED, FIRST_SEED + count)),
            unit=unit if role == COVERS and (entry.family == LINEAR or unit == "record")
            else None,
            family=entry.family))
    return series


def dpsgd_delta(name: str) -> float | None:
    """The delta method ``name`` is trained at by DP-SGD in a frontier's cell (None: it is not
    trained by DP-SGD)."""
    entry = method(name)
    if not entry.needs_eps or entry.privacy != Kind.GLOBAL_DP:
        return None
    if entry.family == LINEAR:  # dp-linear releases by SSP; dpsgd-linear trains by DP-SGD
        return None if name == "dp-linear" else GLOBAL_DELTA
    setup = setup_method(name, base=ModelConfig(seq_len=LINEAR_SEQ_LEN, horizon=24,
                                                n_channels=1), eps=1.0)
    return None if setup.dpsgd is None else float(setup.dpsgd["delta"])


def check_frontier_eps(name: str, eps: float) -> float:
    """``eps`` if method ``name``'s calibration takes it, so that a budget it refuses is one
    message before any cell runs, not one failed cell per seed: every method needs eps > 0;
    a per-pass budget (ldpt, dp-input) at most 700 (:func:`check_method_eps`); dp-linear at
    most :data:`~qpriv.forecasting.linear.MAX_DP_LINEAR_EPS`; a method trained by DP-SGD
    above the RDP accountant's floor at its delta and at most
    :data:`~qpriv.privacy.dpsgd_accounting.MAX_DPSGD_EPS`
    (:func:`~qpriv.privacy.dpsgd_accounting.check_rdp_eps`, the check its cell makes in
    :func:`~qpriv.privacy.dpsgd_accounting.noise_multiplier_for`).

    Raises:
        InvalidInputError: an eps outside the method's range, naming the range and the fix.
    """
    eps = check_method_eps(name, eps)
    if name == "dp-linear":
        return check_dp_linear_eps(eps)
    delta = dpsgd_delta(name)
    if delta is None:
        return eps
    return check_rdp_eps(eps, delta, who=f"method {name!r}")


def linear_settings(budget: Budget) -> dict[str, Any]:
    """The linear family's look-back and windows at ``budget`` (see
    :mod:`qpriv.experiments.frontier`)."""
    return {"seq_len": max(budget.seq_len, LINEAR_SEQ_LEN),
            "max_train_windows": budget.max_train_windows if budget.name == TINY.name else None,
            "max_eval_windows": budget.max_eval_windows}


def frontier_cell(series: Series, *, eps: float | None, seed: int, dataset: str,
                  horizon: int) -> Cell:
    """The cell of one run; a linear run's unit is part of its key
    (``ETTh1-H24-dp-linear-eps0.1-unitrecord-s2024``)."""
    extra = (("unit", series.unit),) if series.unit else ()
    return Cell(method=series.method, eps=eps, dataset=dataset, horizon=horizon, seed=seed,
                overrides=extra)


def frontier_jobs(series: Sequence[Series], *, dataset: str, horizon: int
                  ) -> list[tuple[Series, Cell]]:
    """Every run of the frontier with its series, in the order
    :func:`~qpriv.experiments.frontier.run_frontier` runs them: the seconds-long closed-form fits
    first."""
    jobs = [(s, frontier_cell(s, eps=e, seed=seed, dataset=dataset, horizon=horizon))
            for s in series for e in s.eps for seed in s.seeds]
    return sorted(jobs, key=lambda job: job[0].family != LINEAR)
