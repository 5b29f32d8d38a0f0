"""The privacy-utility frontier under one stated unit: test MSE against eps, method by method.

Every method runs at every eps (noise seeds averaged) and every reference once per seed; each
run is a cell in ``OUT/cells/<budget>/<cell key>``, as :mod:`qpriv.experiments.runner` keeps
the paper's tables (a finished cell is read, never recomputed; the backbone cells share their
keys with ``qpriv reproduce``'s, so one ``--out`` serves both). Each row says what its epsilon
is and whether it covers the chosen unit and the released weights, because the methods'
epsilons are not one quantity:

* ``dp-linear`` (sufficient-statistics perturbation; Wang 2018, "Revisiting differentially
  private linear regression: optimal and adaptive prediction & estimation in unbounded
  domain") is global (eps, delta)-DP at the record or the window unit, on its weights;
* ``dpsgd`` ("Deep Learning with Differential Privacy", Abadi et al. 2016) is global
  (eps, delta = 1e-6)-DP at the window unit on its weights: at the record unit it is drawn as
  *not covering the chosen unit* (a record lies in up to L + H windows, so a window guarantee
  gives no useful record guarantee);
* ``ldpt`` (the LDPT paper) takes the paper's local per-pass eps of the feature path at the
  token unit: it covers neither the forecast targets nor the trained weights, and is drawn so;
  ``ldpt-signed`` (the feature path that keeps each token's sign and scale, its neighbouring
  trace distance proved) takes the same kind of eps and is drawn in the same style; asked for
  with ``methods`` (not a default, to keep the main job short), beside ``ldpt`` it shows how
  much of LDPT's loss is the encoding and how much the noise;
* ``public`` (reads no training data: the floor), ``ridge`` and ``classical`` (no noise, no
  guarantee) take no eps and are drawn as horizontal lines.

A method that takes an eps but states no guarantee at any unit (``bottleneck``,
``bottleneck-dp``, ``ldpt-no-channel``) has no place on a frontier and is refused.

Budgets (:mod:`qpriv.experiments.grid`): the backbone methods train at the budget
(``quick``: 1 epoch on 256 windows; ``full``: the paper's protocol). The linear family needs
a look-back of at least 168 rows (its 7-day profile; its defaults were chosen at L = 336) and is
fitted in closed form in under a second, so it always runs at L = 336 on every training window
and the budget's test windows (at ``quick`` and ``full`` the very test windows of the backbone);
at ``tiny`` (the test suite's, backbone L = 48) it keeps the budget's 64 training and 32 test
windows at L = 336, so there the two families are tested on different windows.

Example::

    report = run_frontier(dataset="ETTh1", horizon=24, unit="record", eps=(0.1, 1.0),
                          budget="quick", out_dir="runs/frontier")
    report.files["png"], [(r["method"], r["eps"], r["mse_mean"]) for r in report.rows]
"""

from __future__ import annotations

import functools
import io
import math
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from qpriv.errors import ArgumentError, InvalidInputError, require_positive_int
from qpriv.experiments.executors import FAILED, CellJob, Fingerprint, make_executor
from qpriv.experiments.figures import frontier_plot
from qpriv.experiments.grid import TINY, Budget, Cell, CsvData, budget_stamp, mean_std
from qpriv.experiments.runner import cell_cores, cell_dir, resolve_budget, run_cell
from qpriv.forecasting.config import ModelConfig
from qpriv.forecasting.csv_input import CsvFormat
from qpriv.forecasting.datasets import file_sha256
from qpriv.forecasting.linear import check_dp_linear_eps
from qpriv.forecasting.methods import (
    LINEAR,
    METHODS,
    NO_PRIVACY,
    check_method_eps,
    method,
    setup_method,
)
from qpriv.forecasting.records import ForecastResult
from qpriv.forecasting.run import run_forecast
from qpriv.forecasting.windows import load_forecasting_data
from qpriv.privacy.budget import GLOBAL_DELTA
from qpriv.privacy.claims import Kind, Unit
from qpriv.privacy.dpsgd_accounting import check_rdp_eps
from qpriv.runs.cache import cached_json
from qpriv.runs.directory import check_folder, first_names, visible_entries
from qpriv.runs.files import atomic_write_bytes, atomic_write_text, read_json_object
from qpriv.runs.layout import REPORT_FILE, RESULT_FILE, RUN_FILES
from qpriv.tables import TABLE_WIDTH, format_cell, format_table

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

FRONTIER_CSV = "frontier.csv"
"""The frontier's table, one row per method and eps (what marks a frontier's folder)."""
FRONTIER_MD = "frontier.md"
"""The frontier's table in Markdown, with how to read each row."""
FRONTIER_PNG = "frontier.png"
"""The frontier's plot."""

COVERS = "covers"
OTHER_UNIT = "other unit"
FEATURE_PATH = "feature path"
FLOOR = "floor"
NON_PRIVATE = "non-private"
ROLES = (COVERS, OTHER_UNIT, FEATURE_PATH, FLOOR, NON_PRIVATE)
"""How a row reads: its guarantee covers the chosen unit and the weights; it is a guarantee at
another unit; it covers neither the targets nor the weights; the public floor; no guarantee."""

SCALER_PRIVATE = "private: inside the guarantee"
SCALER_PER_WINDOW = "none: each window normalised by itself"
SCALER_CLEAR = "the loader's, in the clear (named in the claim)"
SCALER_DECLARED = "declared public by the user"
SCALER_NO_DATA = "none: reads no training data"
FLOOR_COVERS = ("reads no training data (eps = 0; its one fixed design was chosen on ETTh1's "
                "validation split)")
"""What the floor's row covers: it reads nothing, and how its design was chosen."""
SCALER_NOT_PRIVATE = "the loader's (no guarantee)"
SCALERS = {"private": SCALER_PRIVATE, "none": SCALER_PER_WINDOW, "data": SCALER_DECLARED,
           "given": SCALER_DECLARED}
"""How a row's method treats the z-score scaler (a statistic fitted on the training split is
inside the guarantee, declared public, or named in the claim as released in the clear),
from a linear fit's ``fit.scaler``; the trained methods z-score with the loader's scaler."""

COLUMNS = ("method", "eps", "unit", "role", "reading", "claim_kind", "claim_accounting",
           "claim_unit", "delta", "covers", "covers_unit", "covers_weights", "scaler", "mse_mean",
           "mse_sd", "mae_mean", "mae_sd", "n_seeds", "failed_seeds", "seeds", "family",
           "seq_len", "train_windows", "test_windows", "budget")
"""The columns of ``frontier.csv``, in order."""


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


@dataclass
class FrontierReport:
    """What :func:`run_frontier` produced: rows (one per method x eps), failed cells, files."""

    dataset: str
    horizon: int
    unit: str
    budget: str
    rows: list[dict]
    failures: list[dict] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    def as_dict(self) -> dict:
        return {"dataset": self.dataset, "horizon": self.horizon, "unit": self.unit,
                "budget": self.budget, "rows": self.rows, "failures": self.failures,
                "files": self.files, "seconds": self.seconds}


# -- the plan, checked before anything is written -------------------------------------------


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
            unit=unit if role == COVERS and entry.family == LINEAR else None,
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


def check_task(series: Sequence[Series], *, dataset: str, horizon: int, budget: Budget,
               data_dir: str | Path | None, csv: CsvData | None = None) -> None:
    """Refuse a dataset or a horizon its splits cannot hold at the longest look-back of the
    frontier's families, before any cell runs: the loader's check
    (:func:`~qpriv.forecasting.windows.load_forecasting_data`, which ``qpriv train`` and
    ``qpriv quickstart`` make before writing), made once instead of once per cell.

    Raises:
        InvalidInputError: an unknown or missing dataset, or a split shorter than L + H.
    """
    seq_len = max(linear_settings(budget)["seq_len"] if s.family == LINEAR else budget.seq_len
                  for s in series)
    data = {"data_dir": data_dir} if csv is None else csv.run_kwargs()
    load_forecasting_data(dataset, seq_len=seq_len, horizon=horizon, max_train_windows=1,
                          max_eval_windows=1, **data)


def make_out_folder(out_dir: str | Path) -> Path:
    """Create ``out_dir`` (and its parents) if it is not there, once every input is checked and
    before any cell runs or any progress is printed; return it.

    Raises:
        InvalidInputError: it is a file or lies inside one, holds a training run's files (a
            frontier's cells go in folders of their own, never among a run's), cannot be
            created, or is not writable.
    """
    out = check_folder(out_dir)
    # report.html is written by a frontier too (one level down) and by a quickstart beside it
    held = sorted(RUN_FILES.difference({REPORT_FILE}).intersection(visible_entries(out)))
    if held:
        raise InvalidInputError(f"--out {out} holds a training run ({first_names(held)}); a "
                                "frontier writes its cells and reports beside no run: give "
                                "it a folder of its own")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise InvalidInputError(f"--out {out} cannot be created ({error.strerror or error}); "
                                "name a folder you can write to") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise InvalidInputError(f"--out {out} is not writable; name a folder you can write to")
    return out


def linear_settings(budget: Budget) -> dict[str, Any]:
    """The linear family's look-back and windows at ``budget`` (see the module docstring)."""
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
    """Every run of the frontier with its series, in the order :func:`run_frontier` runs them:
    the seconds-long closed-form fits first."""
    jobs = [(s, frontier_cell(s, eps=e, seed=seed, dataset=dataset, horizon=horizon))
            for s in series for e in s.eps for seed in s.seeds]
    return sorted(jobs, key=lambda job: job[0].family != LINEAR)


# -- running ---------------------------------------------------------------------------------


def run_linear_cell(cell: Cell, *, unit: str | None, budget: Budget, out_dir: Path,
                    data_dir: str | Path | None, threads: int | None,
                    csv: CsvData | None = None) -> Path:
    """Fit the linear cell unless it is finished; return its run directory."""
    run_dir = cell_dir(cell, budget=budget, out_dir=out_dir)
    settings = linear_settings(budget)
    fix = f"delete {run_dir} and run again to recompute this cell"

    def fit() -> dict:
        data = {"data_dir": data_dir} if csv is None else csv.run_kwargs()
        return run_forecast(dataset=cell.dataset, horizon=cell.horizon, method=cell.method,
                            eps=cell.eps, seed=cell.seed, unit=unit, out_dir=run_dir,
                            progress=False, threads=threads, **data, **settings).to_json()

    def same(kept: dict) -> bool:
        return kept.get("seq_len") == settings["seq_len"] and kept.get("unit") == unit

    cached_json(run_dir / RESULT_FILE, fit, damaged="refuse", fix=fix, valid=same,
                store="by-compute")
    return run_dir


def frontier_job(cell: Cell, *, series: Series, budget: Budget, out_dir: Path,
                 data_dir: str | Path | None, threads: int, csv: CsvData | None = None
                 ) -> CellJob:
    """The cell as a job for an executor (paths made absolute: a task may run elsewhere)."""
    out_dir = Path(out_dir).absolute()
    data_dir = None if data_dir is None else str(Path(data_dir).expanduser().absolute())
    run_dir = cell_dir(cell, budget=budget, out_dir=out_dir)
    return CellJob(key=cell.key, run_dir=run_dir,
                   cores=cell_cores(cell, budget=budget, threads=threads),
                   finished=(run_dir / RESULT_FILE).is_file(),
                   work=functools.partial(frontier_run, cell, family=series.family,
                                          unit=series.unit, budget=budget, out_dir=out_dir,
                                          data_dir=data_dir, threads=threads, csv=csv))


def frontier_run(cell: Cell, *, family: str, unit: str | None, budget: Budget, out_dir: Path,
                 data_dir: str | Path | None, threads: int, progress: bool,
                 csv: CsvData | None = None) -> None:
    """Fit or train the cell unless it is finished (its result is read back by
    :func:`row_of`)."""
    if family == LINEAR:
        run_linear_cell(cell, unit=unit, budget=budget, out_dir=out_dir, data_dir=data_dir,
                        threads=threads, csv=csv)
    else:
        run_cell(cell, budget=budget, out_dir=out_dir, data_dir=data_dir, progress=progress,
                 threads=threads, csv=csv)


def run_frontier(
    *,
    dataset: str = "ETTh1",
    horizon: int = 24,
    unit: str = "record",
    eps: Sequence[float] = DEFAULT_EPS,
    methods: Sequence[str] | None = None,
    seeds: int = DEFAULT_SEEDS,
    backbone_seeds: int = DEFAULT_BACKBONE_SEEDS,
    budget: str | Budget = "full",
    out_dir: str | Path = "runs/frontier",
    data_dir: str | Path | None = None,
    progress: bool = True,
    threads: int | None = None,
    executor: str = "local",
    address: str | None = None,
    csv: str | Path | None = None,
    columns: Sequence[str] | None = None,
    csv_format: CsvFormat | None = None,
) -> FrontierReport:
    """Run (or finish) the frontier and write ``frontier.csv``, ``frontier.md`` and
    ``frontier.png`` to ``out_dir/<dataset>-H<horizon>-<unit>/<budget>/``.

    Args:
        dataset, horizon, data_dir: the task (a named dataset, found as by ``qpriv train``).
        csv, columns, csv_format: the task on a user's CSV instead (as ``qpriv train --csv``);
            its folder and cells are named by the file's stem and the start of its sha256.
        unit: ``record`` or ``window``, the unit the frontier is stated at.
        eps: the budgets, each > 0 (the x-axis).
        methods: registered methods; see :func:`role_of` for how each is drawn (default:
            :data:`DEFAULT_METHODS`, or :data:`CSV_METHODS` on a CSV).
        seeds: noise seeds of the closed-form methods (5; one for those without noise).
        backbone_seeds: seeds of the trained methods (1).
        budget: ``full``, ``quick`` or ``tiny`` (:mod:`qpriv.experiments.grid`), or a Budget.
        out_dir: cells and reports; finished cells are never recomputed.
        progress: a bar over the cells (and the trainer's per epoch) on stderr.
        threads: torch threads per cell (None: 1, the fastest on a shared 2-core CPU).
        executor, address: ``local`` runs the cells here, one after the other; ``ray`` runs
            each unfinished cell as a Ray task on the cluster at ``address``
            (:mod:`qpriv.experiments.executors`).

    Returns:
        The :class:`FrontierReport`; a cell that fails is recorded in ``failures`` and the
        others go on.

    Raises:
        InvalidInputError: bad input (see :func:`plan`), an unknown budget or dataset, a
            horizon < 1 or one the dataset's splits cannot hold (:func:`check_task`), an
            unknown executor, ``ray`` without Ray installed or without a cluster at
            ``address``, an ``out_dir`` that cannot be created or written; raised before any
            cell runs, and all but the last before anything is written.
    """
    horizon = require_positive_int("horizon", horizon)
    budget = resolve_budget(budget)
    source = None
    if csv is not None:
        if data_dir is not None:
            raise ArgumentError("{data_dir} says where to find a named dataset; {csv} names its "
                                "file itself: leave {data_dir} out")
        if not isinstance(csv, (str, os.PathLike)):
            raise InvalidInputError(
                f"csv = {type(csv).__name__} is not a file path: a frontier's cells read their "
                "data from a file (they may run on other machines); write a DataFrame with "
                "frame.to_csv(PATH) and pass PATH")
        path = Path(csv).expanduser().resolve()
        source = CsvData(path=str(path), fmt=csv_format,
                         columns=None if columns is None else tuple(columns))
        dataset = path.stem
    elif columns is not None or csv_format is not None:
        raise ArgumentError("{columns} and {csv_format} choose the channels of and read a "
                            "{csv}; a named dataset's frontier uses all its channels: give "
                            "{csv}, or leave them out")
    methods = (CSV_METHODS if csv is not None else DEFAULT_METHODS) if methods is None \
        else methods
    series = plan(unit=unit, eps=eps, methods=methods, seeds=seeds,
                  backbone_seeds=backbone_seeds)
    threads = 1 if threads is None else require_positive_int("threads", threads)
    check_task(series, dataset=dataset, horizon=horizon, budget=budget, data_dir=data_dir,
               csv=source)
    if source is not None:  # cells of another file by the same name are other cells
        dataset = f"{dataset}-{file_sha256(source.path)[:8]}"
    runs = make_executor(executor, address=address)
    fingerprint = (Fingerprint.here([dataset], data_dir=data_dir) if source is None else
                   Fingerprint.here(files=[source.path]))
    out = make_out_folder(out_dir)
    started = time.perf_counter()
    jobs = frontier_jobs(series, dataset=dataset, horizon=horizon)
    cells = [frontier_job(cell, series=s, budget=budget, out_dir=out, data_dir=data_dir,
                          threads=threads, csv=source) for s, cell in jobs]
    outcomes = runs.run(cells, fingerprint=fingerprint, progress=progress)
    done: dict[tuple[str, float | None], list[tuple[int, Path]]] = {}
    for (s, cell), job, outcome in zip(jobs, cells, outcomes, strict=True):
        if outcome.state != FAILED:
            done.setdefault((s.method, cell.eps), []).append((cell.seed, job.run_dir))
    failures = [outcome.failure() for outcome in outcomes if outcome.state == FAILED]
    rows = [row_of(s, eps=e, runs=done.get((s.method, e), []), unit=unit, budget=budget)
            for s in series for e in s.eps]
    report = FrontierReport(dataset=dataset, horizon=horizon, unit=unit, budget=budget.name,
                            rows=rows, failures=failures,
                            seconds=time.perf_counter() - started)
    write_frontier(report, out / f"{dataset}-H{horizon}-{unit}" / budget.name,
                   stamp=frontier_stamp(budget, methods=methods))
    return report


# -- rows ------------------------------------------------------------------------------------


def reading(role: str, *, method_name: str, unit: str, claim_unit: str | None,
            scaler: str | None = None) -> str:
    """The words a row's legend entry and ``reading`` column use (``scaler``: the row's
    :data:`SCALERS` entry; a guarantee that holds given a scaler released in the clear says
    so)."""
    if role == COVERS:
        given = ", given the loader's scaler (in the clear)" if scaler == SCALER_CLEAR else ""
        return f"covers the {unit} unit and the weights{given}"
    if role == OTHER_UNIT:
        return (f"{claim_unit or 'another'}-unit guarantee: does not cover the {unit} unit")
    if role == FEATURE_PATH:
        path = "feature-path" if method(method_name).privacy == Kind.LOCAL_QDP else "input"
        return (f"per-pass {path} eps ({claim_unit or 'token'} unit): covers neither the "
                "targets nor the weights")
    if role == FLOOR:
        return "the floor: reads no training data"
    return "non-private reference: no guarantee"


def row_of(series: Series, *, eps: float | None, runs: Sequence[tuple[int, Path]], unit: str,
           budget: Budget) -> dict:
    """One row of the frontier: the mean and sd over the seeds of the cells' result files, and
    what the runs' headline claim is (kind, accounting, unit, delta, what it covers)."""
    results = [ForecastResult.from_json(read_json_object(
        run_dir / RESULT_FILE, fix=f"delete {run_dir} and run again to recompute this cell"))
        for _, run_dir in runs]
    claim = next((r.released_claim for r in results if r.released_claim is not None), None)
    mse_mean, mse_sd = mean_std(r.mse for r in results)
    mae_mean, mae_sd = mean_std(r.mae for r in results)
    windows = results[0].windows if results else {}
    scaler = scaler_of(series.role, results)
    if series.role == FLOOR:
        covers, covers_unit, covers_weights = FLOOR_COVERS, True, True
    elif claim is None:
        covers, covers_unit, covers_weights = "nothing: no privacy guarantee", False, False
    else:
        covers = claim.covers
        covers_unit = claim.unit.value == unit
        covers_weights = claim.kind == Kind.GLOBAL_DP
    return {
        "method": series.method, "eps": eps, "unit": unit, "role": series.role,
        "reading": reading(series.role, method_name=series.method, unit=unit,
                           claim_unit=None if claim is None else claim.unit.value,
                           scaler=scaler),
        "claim_kind": None if claim is None else claim.kind.value,
        "claim_accounting": None if claim is None else claim.accounting.value,
        "claim_unit": None if claim is None else claim.unit.value,
        "delta": None if claim is None else claim.delta,
        "covers": covers, "covers_unit": covers_unit, "covers_weights": covers_weights,
        "scaler": scaler,
        "mse_mean": mse_mean, "mse_sd": mse_sd, "mae_mean": mae_mean, "mae_sd": mae_sd,
        "n_seeds": sum(1 for r in results if r.mse is not None and math.isfinite(r.mse)),
        "failed_seeds": len(series.seeds) - len(results),
        "seeds": " ".join(str(seed) for seed, _ in runs),
        "family": series.family,
        "seq_len": results[0].raw.get("seq_len") if results else None,
        "train_windows": windows.get("train"), "test_windows": windows.get("test"),
        "budget": budget.name,
    }


def scaler_of(role: str, results: Sequence[ForecastResult]) -> str:
    """How the row's runs treat the z-score scaler (:data:`SCALERS`): a linear fit records
    it (``fit.scaler``); every trained method z-scores with the loader's scaler, which its
    claim names as released in the clear."""
    if role == FLOOR:
        return SCALER_NO_DATA
    if role == NON_PRIVATE:
        return SCALER_NOT_PRIVATE
    fit = results[0].raw.get("fit") if results else None
    treatment = fit.get("scaler") if isinstance(fit, dict) else None
    return SCALERS.get(treatment, SCALER_CLEAR)


# -- outputs ---------------------------------------------------------------------------------


def deltas(rows: Sequence[dict]) -> list[float]:
    """The distinct deltas of the rows whose guarantee covers the chosen unit."""
    return sorted({r["delta"] for r in rows if r["role"] == COVERS and r["delta"] is not None})


def title_of(report: FrontierReport) -> str:
    """The figure's title: task, unit, delta and budget."""
    found = deltas(report.rows)
    delta = ("delta = " + ", ".join(f"{d:g}" for d in found)) if found else "no delta"
    return (f"{report.dataset} H={report.horizon}: test MSE vs eps at the {report.unit} unit "
            f"({delta}); budget {report.budget}")


def frontier_stamp(budget: Budget, *, methods: Sequence[str] | None = None) -> str:
    """The budget line of ``frontier.png``: the backbone's budget and the linear family's
    look-back and windows (:func:`linear_settings`), each only where ``methods`` (default: any)
    has a method of that family, so that a closed-form frontier does not describe training it
    never did."""
    families = None if methods is None else {method(name).family for name in methods}
    linear = linear_settings(budget)
    train = ("every training window" if linear["max_train_windows"] is None
             else f"{linear['max_train_windows']} training windows")
    linear_part = f"linear family: L = {linear['seq_len']}, {train}"
    if families is not None and families == {LINEAR}:
        return f"budget {budget.name}: {linear_part}"
    if families is not None and LINEAR not in families:
        return budget_stamp(budget)
    return f"{budget_stamp(budget)}; {linear_part}"


def write_frontier(report: FrontierReport, where: Path, *, stamp: str) -> None:
    """``frontier.csv``, ``frontier.md`` and ``frontier.png`` (``stamp``: its budget line) in
    ``where``, each atomically."""
    files = {"csv": where / FRONTIER_CSV, "markdown": where / FRONTIER_MD,
             "png": where / FRONTIER_PNG}
    frame = pd.DataFrame(report.rows, columns=list(COLUMNS))
    atomic_write_text(files["csv"], frame.to_csv(index=False))
    atomic_write_text(files["markdown"], markdown(report))
    buffer = io.BytesIO()
    frontier_plot(report.rows, title=title_of(report), stamp=stamp, out=buffer)
    atomic_write_bytes(files["png"], buffer.getvalue())
    report.files = {k: str(v) for k, v in files.items()}


def explain(report: FrontierReport) -> list[str]:
    """One Markdown bullet per role among the rows: what its epsilon is and covers."""
    unit = report.unit
    words = {
        COVERS: f"a global (eps, delta)-DP guarantee at the {unit} unit on the released "
                "weights, and so on every forecast computed from them (accounting=rigorous); "
                "where the scaler column says the loader's, in the clear, it holds given that "
                "scaler (the training split's mean and std), which the claim names as "
                "released outside it",
        OTHER_UNIT: f"a global guarantee at another unit, which does not cover the {unit} "
                    "unit (a record lies in up to L + H windows, so a window guarantee gives "
                    "no useful record guarantee)",
        FEATURE_PATH: "the LDPT paper's local per-pass eps (token unit, accounting=paper): it "
                      "holds for what one pass releases (the quantum features, or the noised "
                      "input); the forecast targets and the trained weights are not covered",
        FLOOR: "the public forecast: it reads no training data (eps = 0 at every unit; its "
               "one fixed design was chosen on ETTh1's validation split, whose first "
               "look-backs are the training split's last L rows); a private method is worth "
               "its noise only below it",
        NON_PRIVATE: "fitted or trained in the clear: no guarantee (the utility that privacy "
                     "costs is measured against it)",
    }
    roles = [role for role in ROLES if any(r["role"] == role for r in report.rows)]
    return [f"- {role}: "
            + ", ".join(f"`{m}`" for m in dict.fromkeys(r["method"] for r in report.rows
                                                       if r["role"] == role))
            + f": {words[role]}." for role in roles]


HYPER_PARAMETERS_LINE = (
    "- settings: every method's hyper-parameters were fixed without the test split (the "
    "linear family's on ETTh1's H = 24 validation split, the transformer's by the paper's "
    "protocol); that choice is not itself private. The errors are measurements on the test "
    "split, z-scored by the loader's scaler, not part of any release.")


def terminal_table(report: FrontierReport) -> str:
    """The frontier for a terminal of :data:`~qpriv.tables.TABLE_WIDTH` columns: its title, and
    per row the method, eps, how the row reads (what its eps covers), the test MSE (mean ± sd)
    and the seeds; ``frontier.md`` holds every column."""
    rows = [[row["method"], "—" if row["eps"] is None else row["eps"], row["reading"],
             _mean_sd(row["mse_mean"], row["mse_sd"]), row["n_seeds"]] for row in report.rows]
    return (title_of(report) + "\n" + format_table(
        ["method", "eps", "reading", "test MSE (mean ± sd)", "seeds"], rows,
        max_width=TABLE_WIDTH, significant=True) + "\n")


def _mean_sd(mean: float | None, sd: float | None) -> str:
    """``0.3302 ± 0.0011``: the mean to 4 significant digits, the sd to 2 (an em dash when
    missing)."""
    if mean is None:
        return "—"
    return format_cell(mean, significant=True) + (
        "" if sd is None else " ± " + format_cell(sd, 2, significant=True))


def markdown(report: FrontierReport) -> str:
    """The frontier as a Markdown table, every row with its unit and what its claim covers."""
    headers = ["method", "eps", "unit", "claim (kind, accounting, unit)", "covers unit",
               "covers weights", "scaler", "test MSE (mean ± sd)", "test MAE (mean ± sd)",
               "seeds", "reading"]
    table = [[r["method"], "—" if r["eps"] is None else f"{r['eps']:g}", r["unit"],
              "—" if r["claim_kind"] is None else
              f"{r['claim_kind']}, {r['claim_accounting']}, {r['claim_unit']}"
              + ("" if r["delta"] is None else f", delta={r['delta']:g}"),
              r["covers_unit"], r["covers_weights"], r.get("scaler") or "—",
              _mean_sd(r["mse_mean"], r["mse_sd"]),
              _mean_sd(r["mae_mean"], r["mae_sd"]), r["n_seeds"], r["reading"]]
             for r in report.rows]
    settings = sorted({(r["family"], r["seq_len"], r["train_windows"], r["test_windows"])
                       for r in report.rows if r["seq_len"] is not None}, key=str)
    lines = [f"# Privacy-utility frontier: {report.dataset}, H = {report.horizon}, "
             f"{report.unit} unit", "",
             f"Budget `{report.budget}`. Test MSE and MAE on the z-scored test split, mean ± "
             "sample sd over the seeds (noise seeds for the closed-form methods).", "",
             format_table(headers, table, markdown=True), "",
             "## How to read the rows", "", *explain(report), HYPER_PARAMETERS_LINE, "",
             "## Settings", ""]
    lines += [f"- {family}: L = {seq_len}, {train} training windows, {test} test windows"
              for family, seq_len, train, test in settings]
    if report.failures:
        lines += ["", "## Failed cells", ""]
        lines += [f"- `{f['cell']}`: {f['error']}" for f in report.failures]
    return "\n".join(lines) + "\n"
