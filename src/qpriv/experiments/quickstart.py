"""The main job: classical vs LDPT at two budgets on ETTh1, H = 24, with accounting and audit.

A short privacy/utility run that finishes in minutes on two CPU cores: the same backbone trained
as ``classical`` and as ``ldpt`` at eps_s = 0.1 and 1.0 (a subset of the training windows, a few
epochs), the test MSE and MAE with the change against classical, the per-pass and composed
epsilons (``paper`` accounting, labelled), the exact channel audit of the strongest budget, and
the privacy-utility frontier at the record unit.

The job is planned before it starts (:func:`plan_quickstart`: its parts, a rough cost of each
from per-window timings, the finished runs and cells it will read back) and run part by part
under one overall progress bar (:func:`run_quickstart`, :class:`qpriv.progress.JobProgress`).

Example::

    quick_plan = plan_quickstart(out_dir="runs/quickstart")
    print("\n".join(quick_plan.lines()))
    outcome = run_quickstart(quick_plan)
    quickstart_rows(outcome.results), outcome.audit.passed, outcome.frontier.files
"""

from __future__ import annotations

import contextlib
import datetime
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qpriv.audits.channel import ChannelAudit, audit_channel
from qpriv.errors import InvalidInputError
from qpriv.experiments.frontier import run_frontier
from qpriv.experiments.frontier_plan import (
    DEFAULT_BACKBONE_SEEDS,
    DEFAULT_METHODS,
    DEFAULT_SEEDS,
    frontier_jobs,
    plan,
)
from qpriv.experiments.frontier_rows import FrontierReport
from qpriv.experiments.grid import Budget
from qpriv.experiments.runner import cell_dir, resolve_budget
from qpriv.forecasting.config import ModelConfig
from qpriv.forecasting.methods import DEFAULT_EPOCHS, LINEAR, setup_method
from qpriv.forecasting.rigorous import rigorous_cached
from qpriv.forecasting.run import run_forecast
from qpriv.privacy.budget import FEATURE_PATH_DELTA
from qpriv.progress import JobProgress, Part, say
from qpriv.runs.directory import first_names, visible_entries
from qpriv.runs.files import read_json_object
from qpriv.runs.layout import CHECKPOINT_FILE, REPORT_FILE, RESULT_FILE

#: The quickstart budget: chosen so that the whole job (the three runs, the accounting, the
#: audit and the quick frontier) finishes in under 10 minutes on 2 idle CPU cores.
QUICK_EPOCHS = 2
QUICK_TRAIN_WINDOWS = 1024
QUICK_EVAL_WINDOWS = 256
QUICK_EVAL_PASSES = 3
THREADS = 1
"""Torch threads of every run: on a shared 2-core CPU one thread ran an LDPT epoch 5 times
faster than two (the sampler's many small ops; see :mod:`qpriv.threads`)."""


@dataclass(frozen=True)
class QuickstartRun:
    """One row of the quickstart table."""

    label: str
    method: str
    eps: float | None


QUICKSTART_RUNS = (
    QuickstartRun("classical", "classical", None),
    QuickstartRun("LDPT eps=1.0", "ldpt", 1.0),
    QuickstartRun("LDPT eps=0.1", "ldpt", 0.1),
)
QUICK_FRONTIER_EPS = (0.1, 1.0)
"""The budgets of the quickstart's frontier."""


def run_dir_name(run: QuickstartRun) -> str:
    """The folder of ``run`` under the quickstart's ``--out`` (``LDPT eps=0.1`` ->
    ``LDPT_eps0.1``)."""
    return run.label.replace(" ", "_").replace("=", "")


# -- the plan and its rough cost --------------------------------------------------------------

SECONDS_PER_WINDOW = {"classical": (0.025, 0.014), "ldpt": (0.05, 0.04), "dpsgd": (0.07, 0.014)}
"""Rough seconds per window at one torch thread, (training, evaluation), of the backbone without
the quantum path, with it, and under DP-SGD (per-window gradients), measured on a shared 2-core
CPU (L = 336, H = 24, the paper's model). A busy machine took up to 3 times longer."""
RUN_SECONDS = 3.0
"""Loading the data and building the model, per run."""
ACCOUNTING_SECONDS = 45.0
"""The rigorous accounting of a new LDPT setting (cached afterwards): 30-60 s."""
AUDIT_SECONDS = 3.0
LINEAR_CELL_SECONDS = 2.0
"""A closed-form fit of the linear family, with its data."""
REUSED_SECONDS = 0.2
ALL_TRAIN_WINDOWS = 8281
ALL_EVAL_WINDOWS = 2857
"""ETTh1's training and validation windows at L = 336, H = 24: the count where none is set."""


def _cost_kind(name: str, *, eps: float | None) -> str:
    """Which of :data:`SECONDS_PER_WINDOW` a backbone method costs like."""
    setup = setup_method(name, base=ModelConfig(seq_len=336, horizon=24, n_channels=7),
                         eps=eps)
    if setup.dpsgd is not None:
        return "dpsgd"
    return "ldpt" if setup.config.use_quantum else "classical"


def run_seconds(method_name: str, *, eps: float | None, epochs: int,
                train_windows: int | None, eval_windows: int | None,
                eval_passes: int = 1) -> tuple[float, float]:
    """Rough (seconds per epoch, seconds besides the epochs) of training one backbone run:
    each epoch trains on the windows and validates once; the test evaluates ``eval_passes``
    times (:data:`SECONDS_PER_WINDOW`)."""
    train, evaluate = SECONDS_PER_WINDOW[_cost_kind(method_name, eps=eps)]
    n_train = ALL_TRAIN_WINDOWS if train_windows is None else train_windows
    n_eval = ALL_EVAL_WINDOWS if eval_windows is None else eval_windows
    return (n_train * train + n_eval * evaluate,
            RUN_SECONDS + eval_passes * n_eval * evaluate)


@dataclass(frozen=True)
class Reused:
    """A finished run found where a run of the plan goes: it is read back, not trained."""

    run_dir: Path
    train_seconds: float
    finished: datetime.datetime

    @classmethod
    def find(cls, run_dir: Path | None) -> Reused | None:
        """The finished run in ``run_dir`` (None: none, or no ``run_dir``)."""
        if run_dir is None or not (run_dir / RESULT_FILE).is_file():
            return None
        result = read_json_object(run_dir / RESULT_FILE,
                                  fix=f"delete {run_dir} and run again to retrain it")
        history = result.get("history") or []
        seconds = sum(h.get("train_seconds", 0.0) + h.get("val_seconds", 0.0) for h in history)
        when = datetime.datetime.fromtimestamp((run_dir / RESULT_FILE).stat().st_mtime)
        return cls(run_dir=run_dir, train_seconds=seconds, finished=when)

    def line(self, label: str) -> str:
        """``reused: classical (finished run in DIR, trained in 102 s on 2025-05-01 14:03)``."""
        return (f"reused: {label} (finished run in {self.run_dir}, trained in "
                f"{self.train_seconds:.0f} s on {self.finished:%Y-%m-%d %H:%M})")


@dataclass(frozen=True)
class PlannedRun:
    """A run of the plan: its part of the job (label, planned seconds), where it is kept, and
    the finished run found there."""

    run: QuickstartRun
    part: Part
    run_dir: Path | None
    reused: Reused | None
    accounting: bool
    """Its rigorous accounting is computed (not cached) first."""


@dataclass(frozen=True)
class QuickstartPlan:
    """What the quickstart will do, checked and costed before it starts."""

    dataset: str
    horizon: int
    epochs: int
    max_train_windows: int | None
    max_eval_windows: int | None
    eval_passes: int
    seed: int
    out_dir: Path | None
    runs: tuple[PlannedRun, ...]
    audit: Part
    audit_eps: float
    frontier: Part
    frontier_budget: Budget
    frontier_cells: int
    frontier_reused: int

    @property
    def parts(self) -> list[Part]:
        """Every part of the job, in order."""
        return [*(r.part for r in self.runs), self.audit, self.frontier]

    @property
    def seconds(self) -> float:
        """The whole job's rough planned seconds."""
        return sum(p.seconds for p in self.parts)

    def lines(self) -> list[str]:
        """The plan as the command line prints it, one line per part and the total."""
        windows = (f"{self.epochs} epoch{'s' if self.epochs != 1 else ''} on "
                   f"{self.max_train_windows or 'all'} training "
                   f"windows, test {self.eval_passes} passes on {self.max_eval_windows or 'all'}"
                   " windows")
        lines = [f"plan ({len(self.parts)} parts, rough time from per-window costs measured at "
                 "1 thread on a shared 2-core CPU; the overall bar's ETA corrects it as it goes):"]
        for planned in self.runs:
            what = ("reused: read back its finished run" if planned.reused else
                    f"train {windows}"
                    + (", after its rigorous accounting (once)" if planned.accounting else ""))
            lines.append(f"  {planned.part.label} {what}  ~{_minutes(planned.part.seconds)}")
        lines.append(f"  {self.audit.label} exact channel audit at eps_s = {self.audit_eps:g}  "
                     f"~{_minutes(self.audit.seconds)}")
        reused = f", {self.frontier_reused} reused" if self.frontier_reused else ""
        lines.append(f"  {self.frontier.label} privacy-utility frontier at the record unit, "
                     f"eps {', '.join(f'{e:g}' for e in QUICK_FRONTIER_EPS)}, "
                     f"{self.frontier_budget.name} budget: {self.frontier_cells} cells"
                     f"{reused}  ~{_minutes(self.frontier.seconds)}")
        lines.append(f"  total: about {_minutes(self.seconds)}")
        return lines


def _minutes(seconds: float) -> str:
    """``40 s``, ``3 min``, ``1.5 h``: a rough duration."""
    if seconds < 90:
        return f"{max(seconds, 1):.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def run_dir_of(out_dir: Path | None, run: QuickstartRun) -> Path | None:
    """Where run ``run`` is kept under ``out_dir`` (``LDPT_eps0.1``)."""
    if out_dir is None:
        return None
    return Path(out_dir) / run_dir_name(run)


def plan_quickstart(
    *,
    dataset: str = "ETTh1",
    horizon: int = 24,
    epochs: int = QUICK_EPOCHS,
    max_train_windows: int | None = QUICK_TRAIN_WINDOWS,
    max_eval_windows: int | None = QUICK_EVAL_WINDOWS,
    eval_passes: int = QUICK_EVAL_PASSES,
    seed: int = 2024,
    out_dir: str | Path | None = None,
    frontier_budget: str | Budget = "quick",
    runs: Sequence[QuickstartRun] = QUICKSTART_RUNS,
) -> QuickstartPlan:
    """The quickstart's parts, each with a label and a rough cost in seconds
    (:data:`SECONDS_PER_WINDOW`), the finished runs and cells it will reuse from ``out_dir``
    (they cost nothing), and its frontier's cells. Nothing is run or written.

    Raises:
        InvalidInputError: an unknown frontier budget, a run that cannot be set up, or an
            ``out_dir`` that holds anything but an earlier quickstart's folders and page.
    """
    out = None if out_dir is None else Path(out_dir)
    budget = resolve_budget(frontier_budget)
    _check_quickstart_folder(out, runs)
    n_parts = len(runs) + 2
    planned = []
    for i, run in enumerate(runs, 1):
        run_dir = run_dir_of(out, run)
        reused = Reused.find(run_dir)
        setup = setup_method(run.method, base=ModelConfig(seq_len=336, horizon=horizon,
                                                          n_channels=7), eps=run.eps)
        accounting = (setup.config.use_quantum and setup.config.p > 0
                      and not rigorous_cached(setup.config, epochs=epochs,
                                              delta=FEATURE_PATH_DELTA))
        per_epoch, besides = run_seconds(run.method, eps=run.eps, epochs=epochs,
                                         train_windows=max_train_windows,
                                         eval_windows=max_eval_windows,
                                         eval_passes=eval_passes)
        lead = RUN_SECONDS + (ACCOUNTING_SECONDS if accounting else 0.0)
        label = f"[{i}/{n_parts} {run.label}]"
        part = (Part(label=label, seconds=REUSED_SECONDS) if reused else
                Part(label=label, seconds=lead + epochs * per_epoch + besides,
                     steps=(per_epoch,) * epochs, lead=lead))
        planned.append(PlannedRun(run=run, part=part, run_dir=run_dir, reused=reused,
                                  accounting=accounting and not reused))
    eps_values = [r.eps for r in runs if r.eps is not None]
    audit_eps = min(eps_values) if eps_values else 0.1
    audit = Part(label=f"[{n_parts - 1}/{n_parts} channel audit]", seconds=AUDIT_SECONDS)
    cells = frontier_cell_seconds(dataset=dataset, horizon=horizon, budget=budget,
                                  out_dir=None if out is None else out / "frontier")
    frontier = Part(label=f"[{n_parts}/{n_parts} frontier]", seconds=sum(cells),
                    steps=tuple(cells), epochs_are_steps=False)
    return QuickstartPlan(
        dataset=dataset, horizon=horizon, epochs=epochs, max_train_windows=max_train_windows,
        max_eval_windows=max_eval_windows, eval_passes=eval_passes, seed=seed, out_dir=out,
        runs=tuple(planned), audit=audit, audit_eps=audit_eps, frontier=frontier,
        frontier_budget=budget, frontier_cells=len(cells),
        frontier_reused=sum(1 for c in cells if c == REUSED_SECONDS))


def _check_quickstart_folder(out: Path | None, runs: Sequence[QuickstartRun]) -> None:
    """Refuse an ``out`` that is a file, or a folder holding anything but what a quickstart
    keeps there (its runs' folders, ``frontier`` and the page), before anything is trained:
    a quickstart never mixes its folders into a run's or another command's."""
    if out is None or not out.exists():
        return
    if not out.is_dir():
        raise InvalidInputError(f"out_dir {out} is a file; name a folder for the quickstart")
    own = {*(run_dir_name(run) for run in runs), "frontier", REPORT_FILE}
    others = [name for name in visible_entries(out) if name not in own]
    if others:
        raise InvalidInputError(
            f"out_dir {out} holds {first_names(others)}, which a quickstart does not write: "
            "it keeps its runs, its frontier and its page in a folder of its own; choose a new "
            "or empty out_dir, or an earlier quickstart's")


def frontier_cell_seconds(*, dataset: str, horizon: int, budget: Budget,
                          out_dir: Path | None) -> list[float]:
    """The rough seconds of each cell of the quickstart's frontier, in the order it runs them
    (a cell already finished under ``out_dir`` costs :data:`REUSED_SECONDS`)."""
    series = plan(unit="record", eps=QUICK_FRONTIER_EPS, methods=DEFAULT_METHODS,
                  seeds=DEFAULT_SEEDS, backbone_seeds=DEFAULT_BACKBONE_SEEDS)
    seconds = []
    for s, cell in frontier_jobs(series, dataset=dataset, horizon=horizon):
        if out_dir is not None and (cell_dir(cell, budget=budget, out_dir=out_dir)
                                    / RESULT_FILE).is_file():
            seconds.append(REUSED_SECONDS)
        elif s.family == LINEAR:
            seconds.append(LINEAR_CELL_SECONDS)
        else:
            epochs = budget.epochs or DEFAULT_EPOCHS
            per_epoch, besides = run_seconds(cell.method, eps=cell.eps, epochs=epochs,
                                             train_windows=budget.max_train_windows,
                                             eval_windows=budget.max_eval_windows)
            seconds.append(epochs * per_epoch + besides)
    return seconds


# -- running ----------------------------------------------------------------------------------


@dataclass
class QuickstartResult:
    """What :func:`run_quickstart` produced: one result per run (with its ``label``), the
    channel audit, the frontier, and the wall seconds of each part and of the whole job."""

    results: list[dict]
    audit: ChannelAudit
    frontier: FrontierReport
    frontier_markdown: str
    seconds: float


def run_quickstart(
    quick_plan: QuickstartPlan,
    *,
    data_dir: str | Path | None = None,
    progress: bool = True,
    on_result: Callable[[PlannedRun, dict, float], None] | None = None,
) -> QuickstartResult:
    """Run the plan (:func:`plan_quickstart`): train (or read back) every run, audit the
    channel of the smallest eps, and run the frontier at the record unit.

    Each finished run is kept in ``out_dir/<label>`` and read back when the quickstart runs
    again (an interrupted quickstart resumes the run it was in); without ``out_dir`` nothing
    is kept. ``progress``: one overall bar with an ETA across the parts, and every bar and
    line labelled with its part (:mod:`qpriv.progress`). ``on_result(run, result, seconds)``
    is called as each run finishes, with its wall seconds.
    """
    started = time.perf_counter()
    results = []
    with JobProgress(parts=quick_plan.parts, desc="quickstart", enabled=progress) as job, \
            contextlib.ExitStack() as stack:
        for planned in quick_plan.runs:
            tic = time.perf_counter()
            run_dir = planned.run_dir
            # a killed run continues from its checkpoint; a finished one is read back
            resume = run_dir is not None and any(
                (run_dir / name).exists() for name in (CHECKPOINT_FILE, RESULT_FILE))
            with job.part(planned.part):
                result = run_forecast(
                    dataset=quick_plan.dataset, horizon=quick_plan.horizon,
                    method=planned.run.method, eps=planned.run.eps, epochs=quick_plan.epochs,
                    seed=quick_plan.seed, max_train_windows=quick_plan.max_train_windows,
                    max_eval_windows=quick_plan.max_eval_windows,
                    eval_passes=quick_plan.eval_passes, out_dir=run_dir, resume=resume,
                    progress=progress, data_dir=data_dir, threads=THREADS,
                ).to_json()  # the rows the table prints and --json writes
            results.append({"label": planned.run.label, **result})
            if on_result is not None:
                on_result(planned, result, time.perf_counter() - tic)
        with job.part(quick_plan.audit):
            if progress:
                say(f"exact channel audit at eps_s = {quick_plan.audit_eps:g} (Theorem 1's "
                    "bound against the worst D_max over neighbouring pairs)")
            audit = audit_channel(quick_plan.audit_eps)
        where = quick_plan.out_dir or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        with job.part(quick_plan.frontier):
            if progress:
                reused = quick_plan.frontier_reused
                say(f"{quick_plan.frontier_cells} cells"
                    + (f" ({reused} finished before, read back)" if reused else "")
                    + ": dp-linear, DP-SGD and LDPT at eps "
                    f"{', '.join(f'{e:g}' for e in QUICK_FRONTIER_EPS)} against the public "
                    "floor and the non-private references")
            frontier = quickstart_frontier(
                dataset=quick_plan.dataset, horizon=quick_plan.horizon, out_dir=where,
                budget=quick_plan.frontier_budget, data_dir=data_dir, progress=progress)
            frontier_markdown = Path(frontier.files["markdown"]).read_text()
    return QuickstartResult(results=results, audit=audit, frontier=frontier,
                            frontier_markdown=frontier_markdown,
                            seconds=time.perf_counter() - started)


def quickstart_frontier(*, dataset: str = "ETTh1", horizon: int = 24,
                        out_dir: str | Path, budget: str | Budget = "quick",
                        data_dir: str | Path | None = None,
                        progress: bool = True) -> FrontierReport:
    """The privacy-utility frontier at the record unit at a short budget
    (:func:`qpriv.experiments.frontier.run_frontier`): ``dp-linear`` (record-level
    (eps, delta)-DP), DP-SGD (record-level too, by the record-unit accountant of
    :mod:`qpriv.privacy.record_dpsgd`) and LDPT at the paper's per-pass notion (covering
    neither the targets nor the weights), against the public floor and the non-private
    ``ridge`` and ``classical``, at :data:`QUICK_FRONTIER_EPS`. Written under
    ``out_dir/frontier``."""
    return run_frontier(dataset=dataset, horizon=horizon, unit="record",
                        eps=QUICK_FRONTIER_EPS, budget=budget,
                        out_dir=Path(out_dir) / "frontier", data_dir=data_dir,
                        progress=progress, threads=THREADS)


def run_line(planned: PlannedRun, result: dict, seconds: float) -> str:
    """What the command line says when a run is done: how long it trained (or where its
    finished run was read from), and its test MSE as the table gives it, the mean over the
    test passes."""
    mse = result.get("mse_mean", result.get("mse"))
    passes = (result.get("train") or {}).get("eval_passes", 1)
    tested = ("no test MSE: training diverged before any finite validation loss"
              if mse is None else f"test MSE {mse:.4f} (mean of {passes} passes)")
    if planned.reused is not None:
        return f"{planned.reused.line(planned.run.label)}: {tested}"
    val = result.get("val_loss")
    best = ("" if val is None else
            f"best val {val:.4f} (epoch {result.get('best_epoch')}), ")
    return f"{planned.part.label} trained in {seconds:.0f} s: {best}{tested}"


def written_lines(quick_plan: QuickstartPlan, outcome: QuickstartResult) -> list[str]:
    """Every place the quickstart keeps something, one per line, the reused ones marked
    (nothing is kept without ``out_dir``)."""
    if quick_plan.out_dir is None:
        return ["nothing was kept: give --out DIR to keep the runs and the frontier"]
    lines = [f"  {p.run_dir}  run {p.run.label}" + (" (reused)" if p.reused else "")
             for p in quick_plan.runs]
    files = outcome.frontier.files
    if files:
        table = Path(files["markdown"])
        lines.append(f"  {table.parent}  frontier: "
                     + ", ".join(Path(files[k]).name for k in ("markdown", "csv", "png")))
    cells = quick_plan.out_dir / "frontier" / "cells" / quick_plan.frontier_budget.name
    lines.append(f"  {cells}  the frontier's {quick_plan.frontier_cells} cells"
                 + (f" ({quick_plan.frontier_reused} reused)" if quick_plan.frontier_reused
                    else ""))
    return lines


def quickstart_rows(results: Sequence[dict]) -> list[dict]:
    """One table row per run of :func:`run_quickstart`'s results: the test MSE and MAE (the
    mean over the evaluation passes, since LDPT's predictions are stochastic), the change of
    MSE against the ``classical`` run in percent (None for that run itself, and for every run
    when there is none), and the run's privacy numbers, labelled: per pass and composed
    (accounting=paper), token and record (accounting=rigorous), with the noise scales."""
    means = [{**r, "mse": r.get("mse_mean", r["mse"]), "mae": r.get("mae_mean", r["mae"])}
             for r in results]
    classical = next((r for r in means if r["method"] == "classical"), None)
    rows = []
    for r in means:
        rigorous = r.get("rigorous") or {}
        rows.append({
            "label": r["label"], "method": r["method"], "mse": r["mse"], "mae": r["mae"],
            "delta_mse_pct": (None if classical is None or r is classical
                              else 100 * (r["mse"] / classical["mse"] - 1)),
            "eps_per_pass": r.get("eps_per_pass"), "eps_advanced": r.get("eps_advanced"),
            "sigma": r.get("sigma"), "p": r.get("p"), "privacy": r["privacy"],
            "eps_record_rigorous": rigorous.get("eps_record"),
            "eps_token_rigorous": rigorous.get("eps_token"),
        })
    return rows


def audit_row(audit: ChannelAudit) -> dict[str, Any]:
    """The quickstart's line of the channel audit (Theorem 1's bound against the worst exact
    D_max found), labelled."""
    return {"eps_s": audit.eps_s, "eps_ch_bound": audit.eps_ch_bound,
            "dmax_max": audit.dmax_max, "slack": audit.slack, "pairs": audit.pairs,
            "passed": audit.passed, "kind": audit.kind, "accounting": audit.accounting,
            "claims": [claim.to_json() for claim in audit.claims()]}
