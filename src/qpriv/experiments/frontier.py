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
  (eps, delta = 1e-6)-DP on its weights at the window unit, and at the record unit through the
  structured-subsampling accountant (:mod:`qpriv.privacy.record_dpsgd`; its record cells carry
  ``unit record`` in their key), as are ``dpsgd-tuned``, ``dpsgd-linear`` and
  ``dpsgd-dlinear``;
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

This module runs the cells and writes the report (:func:`run_frontier`); the plan, checked
before anything is written (units, roles, eps ranges, cells), is
:mod:`qpriv.experiments.frontier_plan`, the rows :mod:`qpriv.experiments.frontier_rows`, the
files and the terminal's table :mod:`qpriv.experiments.frontier_render`.

Example::

    report = run_frontier(dataset="ETTh1", horizon=24, unit="record", eps=(0.1, 1.0),
                          budget="quick", out_dir="runs/frontier")
    report.files["png"], [(r["method"], r["eps"], r["mse_mean"]) for r in report.rows]
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Sequence
from pathlib import Path

from qpriv.errors import ArgumentError, InvalidInputError, require_positive_int
from qpriv.experiments.executors import FAILED, CellJob, Fingerprint, make_executor
from qpriv.experiments.frontier_plan import (
    CSV_METHODS,
    DEFAULT_BACKBONE_SEEDS,
    DEFAULT_EPS,
    DEFAULT_METHODS,
    DEFAULT_SEEDS,
    Series,
    frontier_jobs,
    linear_settings,
    plan,
)
from qpriv.experiments.frontier_render import frontier_stamp, write_frontier
from qpriv.experiments.frontier_rows import FrontierReport, row_of
from qpriv.experiments.grid import Budget, Cell, CsvData, data_arguments
from qpriv.experiments.runner import cell_cores, cell_dir, resolve_budget, run_cell
from qpriv.forecasting.csv_input import CsvFormat
from qpriv.forecasting.datasets import file_sha256
from qpriv.forecasting.methods import LINEAR
from qpriv.forecasting.run import run_forecast
from qpriv.forecasting.windows import load_forecasting_data
from qpriv.runs.cache import cached_json
from qpriv.runs.directory import check_folder, first_names, visible_entries
from qpriv.runs.layout import REPORT_FILE, RESULT_FILE, RUN_FILES


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
    load_forecasting_data(dataset, seq_len=seq_len, horizon=horizon, max_train_windows=1,
                          max_eval_windows=1, **data_arguments(csv, data_dir=data_dir))


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


def run_linear_cell(cell: Cell, *, unit: str | None, budget: Budget, out_dir: Path,
                    data_dir: str | Path | None, threads: int | None,
                    csv: CsvData | None = None) -> Path:
    """Fit the linear cell unless it is finished; return its run directory."""
    run_dir = cell_dir(cell, budget=budget, out_dir=out_dir)
    settings = linear_settings(budget)
    fix = f"delete {run_dir} and run again to recompute this cell"

    def fit() -> dict:
        return run_forecast(dataset=cell.dataset, horizon=cell.horizon, method=cell.method,
                            eps=cell.eps, seed=cell.seed, unit=unit, out_dir=run_dir,
                            progress=False, threads=threads,
                            **data_arguments(csv, data_dir=data_dir), **settings).to_json()

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
    :func:`~qpriv.experiments.frontier_rows.row_of`)."""
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
        methods: registered methods; see :func:`~qpriv.experiments.frontier_plan.role_of` for
            how each is drawn (default: :data:`~qpriv.experiments.frontier_plan.DEFAULT_METHODS`,
            or :data:`~qpriv.experiments.frontier_plan.CSV_METHODS` on a CSV).
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
        The :class:`~qpriv.experiments.frontier_rows.FrontierReport`; a cell that fails is
        recorded in ``failures`` and the others go on.

    Raises:
        InvalidInputError: bad input (see :func:`~qpriv.experiments.frontier_plan.plan`), an
            unknown budget or dataset, a horizon < 1 or one the dataset's splits cannot hold
            (:func:`check_task`), an unknown executor, ``ray`` without Ray installed or
            without a cluster at ``address``, an ``out_dir`` that cannot be created or written;
            raised before any cell runs, and all but the last before anything is written.
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
