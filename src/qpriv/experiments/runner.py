"""The one runner of the experiment registry: cells -> metrics -> rows -> CSV, Markdown, PNG.

Every cell is a forecasting run in ``OUT/cells/<budget>/<cell key>``, handed to an executor
(:mod:`qpriv.experiments.executors`: here, or as Ray tasks): a finished cell (its
``result.json`` exists) is read, never recomputed; a killed cell resumes from its checkpoint; a
cell that fails is recorded with its error and the others go on. Rows group the cells of one
(dataset, horizon, method, eps) over seeds (mean, and std with more than one seed). The
paper's numbers (:mod:`qpriv.experiments.paper_numbers`) are joined on the same keys and printed
beside ours as ``paper_<metric>``. Outputs, each written atomically, in ``OUT/<id>/<budget>/``:
``results.csv``, ``table.md``, ``report.json`` and, for figures, ``figure.png``.
"""

from __future__ import annotations

import functools
import io
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qpriv.audits.mia import mia_on_run
from qpriv.errors import ArgumentError, InvalidInputError, require_positive_int
from qpriv.experiments.executors import FAILED, CellJob, Fingerprint, make_executor
from qpriv.experiments.figures import FIGURES
from qpriv.experiments.grid import (
    BUDGETS,
    Budget,
    Cell,
    CsvData,
    Experiment,
    data_arguments,
    mean_std,
)
from qpriv.experiments.paper_numbers import PAPER_TABLES
from qpriv.experiments.registry import EXPERIMENTS, experiment
from qpriv.forecasting.config import ModelConfig
from qpriv.forecasting.methods import (
    BACKBONE,
    DEFAULT_BATCH,
    METHODS,
    TUNED_BATCH,
    setup_method,
)
from qpriv.forecasting.records import ForecastResult
from qpriv.forecasting.run import run_forecast
from qpriv.privacy.claims import Kind
from qpriv.runs.cache import cached_json
from qpriv.runs.directory import check_folder
from qpriv.runs.files import (
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    read_json_object,
)
from qpriv.runs.layout import CHECKPOINT_FILE, MIA_FILE, RESULT_FILE
from qpriv.tables import TABLE_WIDTH, format_table

KEYS = ("dataset", "horizon", "method", "eps")
RESULTS_CSV = "results.csv"
"""A reproduction's table, one row per cell group (what marks a reproduction's folder)."""
TABLE_MD = "table.md"
"""The table in Markdown, the paper's numbers beside ours."""
REPORT_JSON = "report.json"
"""The rows, the failed cells and where the files are (paths of the machine that ran it)."""
FIGURE_PNG = "figure.png"
"""The plot of a figure experiment."""
QUICK_SECONDS_PER_CELL = 20
"""An estimate of one quick cell at one thread on 2 busy CPU cores (an LDPT cell measured
17 s), for --list."""


@dataclass
class ExperimentReport:
    """What :func:`run_experiment` produced: the rows, the failed cells and the files."""

    id: str
    budget: str
    rows: list[dict]
    failures: list[dict] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    columns: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def as_dict(self) -> dict:
        return {"id": self.id, "budget": self.budget, "rows": self.rows,
                "failures": self.failures, "files": self.files, "columns": self.columns,
                "seconds": self.seconds}


def resolve_budget(budget: str | Budget) -> Budget:
    """A :class:`Budget` from its name (``full``, ``quick``, ``tiny``) or itself."""
    if isinstance(budget, Budget):
        return budget
    if budget not in BUDGETS:
        raise InvalidInputError(f"budget {budget!r} is not one of {', '.join(BUDGETS)}")
    return BUDGETS[budget]


def run_experiment(
    experiment_id: str,
    *,
    budget: str | Budget = "quick",
    seeds: Sequence[int] | None = None,
    out_dir: str | Path = "runs/reproduce",
    data_dir: str | Path | None = None,
    progress: bool = True,
    threads: int | None = None,
    announce: Callable[[str], None] | None = None,
    executor: str = "local",
    address: str | None = None,
) -> ExperimentReport:
    """Run (or finish) experiment ``experiment_id`` at ``budget``; write and return its report.

    ``seeds`` replaces the experiment's own (Tables 11 and 12 use 2024-2026, the rest 2024;
    Tables 1, 2 and 7 train nothing and refuse any).
    ``threads``: torch threads per cell, 1 by default: the shot sampler and the per-window
    gradients issue many small ops, and on a busy 2-core machine two threads ran an LDPT epoch
    20 times slower than one (133 s against 6.4 s for 256 windows). ``announce`` receives
    one line per cell as it starts or fails. ``executor``: ``local`` runs the cells here, one
    after the other; ``ray`` runs each unfinished cell as a Ray task on the cluster at
    ``address`` (:mod:`qpriv.experiments.executors`), the classifier figures' runs included;
    the other tables that compute their rows without cells run only here.
    """
    exp = experiment(experiment_id)
    if seeds and not exp.seeds:
        raise ArgumentError(f"experiment {exp.id!r} trains nothing and takes no {{seeds}}; "
                            "leave them out")
    budget = resolve_budget(budget)
    seeds = tuple(seeds) if seeds else exp.seeds
    for seed in seeds:
        if isinstance(seed, bool) or int(seed) != seed:
            raise InvalidInputError(f"seed {seed!r} is not an integer")
    repeated = sorted({int(s) for s in seeds if list(seeds).count(s) > 1})
    if repeated:
        raise InvalidInputError(
            f"seeds {repeated} are given more than once: one run would count as several and "
            "fake a spread; give each seed once"
        )
    threads = 1 if threads is None else require_positive_int("threads", threads)
    runs = make_executor(executor, address=address)
    if exp.compute is not None and runs.name != "local" and not exp.distributes:
        raise ArgumentError(f"{exp.id} computes its rows in this process and has no cells to "
                            "hand out; run it without {executor}",
                            values={"executor": runs.name})
    out = check_folder(out_dir)
    started = time.perf_counter()
    failures: list[dict] = []
    if exp.compute is not None:
        handed = {"executor": runs, "announce": announce} if exp.distributes else {}
        with runs.session():  # one cluster for every batch of runs the grid hands out
            rows = exp.compute(budget=budget, data_dir=data_dir, seeds=seeds,
                               progress=progress, out_dir=out / "cells" / budget.name,
                               **handed)
    else:
        cells = exp.cells(seeds)
        # every dataset found (or downloaded) once, before any cell: data that cannot be had
        # is one error, not the same failure in every cell
        fingerprint = Fingerprint.here([cell.dataset for cell in cells], data_dir=data_dir)
        jobs = [reproduce_job(cell, metrics=exp.metrics, budget=budget, out_dir=out,
                              data_dir=data_dir, threads=threads) for cell in cells]
        outcomes = runs.run(jobs, fingerprint=fingerprint, progress=progress,
                            announce=announce)
        failures = [outcome.failure() for outcome in outcomes if outcome.state == FAILED]
        per_cell = [(cell, outcome.value) for cell, outcome in zip(cells, outcomes, strict=True)
                    if outcome.state != FAILED]
        rows = aggregate(per_cell, exp.metrics)
    if exp.derive is not None:
        rows = exp.derive(rows)
    rows = join_paper(rows, exp.paper)
    report = ExperimentReport(id=exp.id, budget=budget.name, rows=rows, failures=failures,
                              columns=columns_of(rows), seconds=time.perf_counter() - started)
    write_report(report, exp, out / exp.id / budget.name, stamp=exp.stamp(budget))
    return report


# -- cells ----------------------------------------------------------------------------------


def cell_dir(cell: Cell, *, budget: Budget, out_dir: Path) -> Path:
    return out_dir / "cells" / budget.name / cell.key


def reproduce_job(cell: Cell, *, metrics: Sequence[str], budget: Budget, out_dir: Path,
                  data_dir: str | Path | None, threads: int) -> CellJob:
    """The cell as a job for an executor: train it (unless finished) and return its metrics.
    Paths are made absolute, so that a task on another machine finds the driver's folders
    (on a shared file system) or makes the same ones."""
    out_dir = Path(out_dir).absolute()
    data_dir = None if data_dir is None else str(Path(data_dir).expanduser().absolute())
    run_dir = cell_dir(cell, budget=budget, out_dir=out_dir)
    finished = (run_dir / RESULT_FILE).is_file() and all(
        (run_dir / name).is_file() for name in files_of_cell(run_dir, metrics=metrics))
    return CellJob(key=cell.key, run_dir=run_dir, finished=finished,
                   cores=cell_cores(cell, budget=budget, threads=threads),
                   work=functools.partial(reproduce_cell, cell, metrics=tuple(metrics),
                                          budget=budget, out_dir=out_dir, data_dir=data_dir,
                                          threads=threads))


def cell_settings(cell: Cell) -> tuple[str | None, dict[str, Any]]:
    """A cell's privacy unit (a frontier's record-unit DP-SGD cell names one in its key; None:
    the method's default) and its model overrides."""
    overrides = dict(cell.overrides)
    return overrides.pop("unit", None), overrides


def cell_cores(cell: Cell, *, budget: Budget, threads: int) -> int:
    """The CPU cores the cell keeps busy: its ``threads`` torch threads, and one more where its
    model draws each batch's quantum features or noise ahead in a second thread
    (:mod:`qpriv.training.ahead`; an LDPT cell on one thread kept about 1.7 cores busy).
    A Ray task asks for that many CPUs, so that a node is not given more work than it has
    cores for."""
    if METHODS[cell.method].family != BACKBONE:  # fitted in closed form: no pass noise
        return threads
    base = ModelConfig(seq_len=budget.seq_len, horizon=cell.horizon, n_channels=1)
    setup = setup_method(cell.method, base=base, eps=cell.eps,
                         overrides=dict(budget.model) | cell_settings(cell)[1])
    return threads + int(setup.config.draws_ahead)


def reproduce_cell(cell: Cell, *, metrics: Sequence[str], budget: Budget, out_dir: Path,
                   data_dir: str | Path | None, threads: int | None, progress: bool,
                   ) -> dict[str, Any]:
    """Train the cell unless it is finished, and return its metrics (:func:`cell_metrics`)."""
    run_dir = run_cell(cell, budget=budget, out_dir=out_dir, data_dir=data_dir,
                       progress=progress, threads=threads)
    return cell_metrics(run_dir, metrics=metrics, budget=budget, data_dir=data_dir)


def run_cell(cell: Cell, *, budget: Budget, out_dir: Path, data_dir: str | Path | None,
             progress: bool, threads: int | None, csv: CsvData | None = None) -> Path:
    """Train the cell unless it is finished; return its run directory. ``csv``: the cell's
    data is that file, not the dataset ``cell.dataset`` names (``data_dir`` is then None)."""

    run_dir = cell_dir(cell, budget=budget, out_dir=out_dir)
    unit, overrides = cell_settings(cell)
    overrides = dict(budget.model) | overrides
    batch = None
    if budget.max_train_windows is not None:  # a small budget still fits one batch
        batch = min(TUNED_BATCH if cell.method == "dpsgd-tuned" else DEFAULT_BATCH,
                    budget.max_train_windows)

    def train() -> dict:
        return run_forecast(
            dataset=cell.dataset, horizon=cell.horizon, method=cell.method, eps=cell.eps,
            seed=cell.seed, epochs=budget.epochs, batch_size=batch,
            max_train_windows=budget.max_train_windows,
            max_eval_windows=budget.max_eval_windows, seq_len=budget.seq_len,
            overrides=overrides or None, out_dir=run_dir,
            resume=(run_dir / CHECKPOINT_FILE).is_file(), progress=progress,
            threads=threads, rigorous=budget.rigorous, unit=unit,
            **data_arguments(csv, data_dir=data_dir),
        ).to_json()

    cached_json(run_dir / RESULT_FILE, train, damaged="refuse", fix=_recompute_cell(run_dir),
                store="by-compute")
    return run_dir


def _recompute_cell(run_dir: Path) -> str:
    return f"delete {run_dir} and run again to recompute this cell"


def cell_metrics(run_dir: Path, *, metrics: Sequence[str], budget: Budget,
                 data_dir: str | Path | None) -> dict[str, Any]:
    """The metrics of one finished run (derived columns are left to the experiment)."""
    stored = read_json_object(run_dir / RESULT_FILE, fix=_recompute_cell(run_dir))
    try:
        result = ForecastResult.from_json(stored)
    except InvalidInputError as problem:
        raise InvalidInputError(f"{run_dir}: {problem}; {_recompute_cell(run_dir)}") from problem
    history, best = result.history, result.best_epoch
    advanced, spent = result.claims.get("eps_advanced"), result.claims.get("eps")
    values: dict[str, Any] = {
        "mse": result.mse, "mae": result.mae, "val_loss": result.val_loss,
        "best_epoch": best, "seconds_per_epoch": result.seconds_per_epoch,
        "params": result.params_total,
        "train_loss": history[best - 1]["train_loss"] if 0 < best <= len(history) else None,
        "eps_advanced": None if advanced is None else advanced.value,
        # Tables 3 and 6's "eps_train": the composed budget (advanced composition for LDPT,
        # the accountant's global eps for DP-SGD), each labelled in the run's result.json
        "eps_train": (advanced or spent).value if (advanced or spent) else None,
        "sigma": result.sigma,
        "noise_multiplier": result.noise_multiplier,
        "eps_spent": None if spent is None else spent.value,
    }
    if attacked(metrics) and best:
        values.update(_mia(run_dir, budget=budget, data_dir=data_dir))  # best 0: no model
    chosen = {m: values.get(m) for m in metrics if m in values}
    if result.diverged_epoch:  # the paper's "diverged (†)": counted by aggregate
        chosen["diverged_epoch"] = result.diverged_epoch
    return chosen


def attacked(metrics: Sequence[str]) -> bool:
    """Whether ``metrics`` need Table 9's attack on each cell (kept in ``mia.json``)."""
    return any(m.startswith("mia_") or m == "loss_gap" for m in metrics)


def has_model(run_dir: Path) -> bool:
    """Whether the finished run in ``run_dir`` has weights to attack: a run whose training
    diverged before any finite validation loss has none (best epoch 0); its row says it
    diverged, and it is not attacked."""
    stored = read_json_object(run_dir / RESULT_FILE, fix=_recompute_cell(run_dir))
    return bool(stored.get("best_epoch"))


def files_of_cell(run_dir: Path, *, metrics: Sequence[str]) -> tuple[str, ...]:
    """The files of a finished cell of a grid with ``metrics``: ``result.json``, and
    ``mia.json`` where the grid attacks its cells and this one has a model (``run_dir``'s
    result.json must exist where the grid attacks)."""
    if attacked(metrics) and has_model(run_dir):
        return (RESULT_FILE, MIA_FILE)
    return (RESULT_FILE,)


def _mia(run_dir: Path, *, budget: Budget, data_dir: str | Path | None) -> dict[str, Any]:
    """Table 9's attack on the run, cached in ``mia.json`` beside it."""

    report = cached_json(
        run_dir / MIA_FILE, lambda: mia_on_run(run_dir, n=budget.mia_windows, data_dir=data_dir),
        damaged="recompute", fix="the attack is run again",
        valid=lambda kept: isinstance(kept.get("attack"), dict))
    attack = report["attack"]
    tpr = {f"mia_tpr_{t['target_fpr'] * 100:g}pct": t["tpr"] for t in attack["tpr_at_fpr"]}
    return {"mia_accuracy": attack["accuracy"], "mia_auc": attack["auc"],
            "loss_gap": attack["loss_gap"], "train_mse": attack["member_loss_mean"],
            "test_mse": attack["nonmember_loss_mean"], **tpr}


def aggregate(per_cell: Sequence[tuple[Cell, dict]], metrics: Sequence[str]) -> list[dict]:
    """One row per (dataset, horizon, method, eps, overrides): the mean over seeds, and the
    std where there is more than one seed; ``diverged_seeds`` counts the seeds whose training
    diverged (a diverged seed's numbers are those of its best epoch before the divergence,
    and it has none when no epoch had a finite validation loss)."""
    groups: dict[tuple, list[tuple[Cell, dict]]] = {}
    for cell, values in per_cell:
        groups.setdefault(cell.group, []).append((cell, values))
    rows = []
    for members in groups.values():
        first = members[0][0]
        row: dict[str, Any] = {"dataset": first.dataset, "horizon": first.horizon,
                               "method": first.method, "eps": first.eps}
        if first.overrides:
            row["overrides"] = dict(first.overrides)
        row["seeds"] = len(members)
        for metric in metrics:
            mean, std = mean_std(v.get(metric) for _, v in members)
            if mean is None:
                continue
            row[metric] = mean
            if len(members) > 1:
                row[f"{metric}_std"] = std
        diverged = sum(1 for _, v in members if v.get("diverged_epoch"))
        if diverged:  # the paper marks such cells "diverged (†)"
            row["diverged_seeds"] = diverged
        rows.append(row)
    return rows


# -- the paper's numbers --------------------------------------------------------------------


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)
    return a == b


def join_paper(rows: list[dict], paper_id: str) -> list[dict]:
    """Add ``paper_<value>`` to every row whose keys match a row of the paper's table."""

    table = PAPER_TABLES.get(paper_id)
    if table is None:
        return rows
    joined = []
    for row in rows:
        row = dict(row)
        for paper_row in table.rows:
            shared = [k for k in table.keys if k in row]
            if shared and all(_same(row[k], paper_row.get(k)) for k in shared):
                for name in table.values:
                    if paper_row.get(name) is not None:
                        row[f"paper_{name}"] = paper_row[name]
                break
        joined.append(row)
    return joined


# -- outputs --------------------------------------------------------------------------------


def columns_of(rows: Sequence[dict]) -> list[str]:
    """Every column of ``rows`` in first-seen order, each metric followed by its paper twin."""
    seen: list[str] = []
    for row in rows:
        for key in row:
            if key not in seen:
                seen.append(key)
    ordered = [k for k in seen if not k.startswith("paper_")]
    for key in [k for k in seen if k.startswith("paper_")]:
        base = key.removeprefix("paper_")
        at = ordered.index(base) + 1 if base in ordered else len(ordered)
        ordered.insert(at, key)
    return ordered


def write_report(report: ExperimentReport, exp: Experiment, where: Path, *,
                 stamp: str) -> None:
    """``results.csv``, ``table.md``, ``report.json`` and the figure (``stamp``: its budget
    line), each atomically."""
    import pandas as pd

    frame = pd.DataFrame(report.rows, columns=report.columns or None)
    files = {"csv": where / RESULTS_CSV, "markdown": where / TABLE_MD,
             "json": where / REPORT_JSON}
    atomic_write_text(files["csv"], frame.to_csv(index=False))
    atomic_write_text(files["markdown"], markdown(report, exp))
    if exp.figure is not None and report.rows:
        buffer = io.BytesIO()
        FIGURES[exp.figure](report.rows, title=exp.title, stamp=stamp, out=buffer)
        files["figure"] = where / FIGURE_PNG
        atomic_write_bytes(files["figure"], buffer.getvalue())
    report.files = {k: str(v) for k, v in files.items()}
    atomic_write_json(files["json"], report.as_dict())


def markdown(report: ExperimentReport, exp: Experiment) -> str:
    """The table with the paper's numbers beside ours, and the failed cells below it."""
    columns = [c for c in report.columns if c != "overrides"]
    source = (f"`paper_*` columns are the paper's numbers as printed ({exp.paper})"
              if exp.paper else "the paper prints no numbers for it")
    lines = [f"# {exp.id}: {exp.title}", "", f"Budget `{report.budget}`; {source}.", ""]
    if report.rows:
        lines.append(format_table(columns, [[row.get(c) for c in columns]
                                            for row in report.rows], markdown=True,
                                  significant=True))
    else:
        lines.append("No rows: every cell failed.")
    legend = epsilon_legend(report.rows, columns)
    if legend:
        lines += ["", "## What each epsilon column is", "", *legend]

    if exp.paper in PAPER_TABLES and PAPER_TABLES[exp.paper].notes:
        lines += ["", "## Notes on the paper's numbers", ""]
        lines += [f"- {note}" for note in PAPER_TABLES[exp.paper].notes]
    if report.failures:
        lines += ["", "## Failed cells", ""]
        lines += [f"- `{f['cell']}`: {f['error']}" for f in report.failures]
    return "\n".join(lines) + "\n"


EPS_COLUMNS = ("eps", "eps_train", "eps_advanced", "eps_spent")


def _columns(names: Sequence[str]) -> str:
    """``eps_train`` / ``eps_spent`` as the legend names them."""
    return " / ".join(f"`{name}`" for name in names)


def _legend_text(kind: Kind, shown: Sequence[str]) -> str | None:
    """What the epsilon columns ``shown`` mean for methods of privacy ``kind``, naming only
    those columns (None: the kind has no words for any of them)."""
    composed = [c for c in ("eps_train", "eps_advanced") if c in shown]
    spent = [c for c in ("eps_train", "eps_spent") if c in shown]
    parts = []
    if kind == Kind.LOCAL_QDP:
        if "eps" in shown:
            parts.append("`eps` is the per-pass budget eps_s, local eps-QDP per pass (trace "
                         "distance d = 0.1, full norm), accounting=paper")
        if composed:
            parts.append(f"{_columns(composed)} "
                         + ("compose" if len(composed) > 1 else "composes")
                         + " the per-pass budget over the run's epochs by advanced composition "
                         "(eq. 17, delta' = 1e-6), accounting=paper")
        if parts:
            parts.append(("both hold" if len(parts) > 1 else "it holds")
                         + " for the released quantum features only (RevIN statistics and "
                         "the forecast targets bypass the channel); `qpriv account` gives the "
                         "rigorous numbers")
    elif kind == Kind.GLOBAL_DP:
        if "eps" in shown:
            parts.append("`eps` is the target of global (eps, delta = 1e-6)-DP on the trained "
                         "weights")
        if spent:
            parts.append(f"{_columns(spent)} "
                         + ("are" if len(spent) > 1 else "is")
                         + " what the run spent, Opacus RDP, accounting=rigorous")
    elif kind == Kind.LOCAL_DP and "eps" in shown:
        parts.append("`eps` is local (eps, delta = 1e-6)-DP per pass of the input (Gaussian "
                     "mechanism, L2 sensitivity 1 assumed: the input is not clipped), "
                     "accounting=paper")
    return "; ".join(parts) or None


def epsilon_legend(rows: Sequence[dict], columns: Sequence[str]) -> list[str]:
    """One line per privacy notion among the rows' methods: what its epsilon columns mean,
    with kind, delta and accounting (a column mixes notions across methods, as the paper's).
    Only the epsilon columns among ``columns`` are named."""

    shown = [c for c in EPS_COLUMNS if c in columns]
    if not shown:
        return []
    by_text: dict[str, list[str]] = {}
    for row in rows:
        method = METHODS.get(str(row.get("method")))
        if method is None:
            continue
        text = _legend_text(method.privacy, shown) or (
            "`eps` only sets a noise scale: no privacy guarantee"
            if method.needs_eps and "eps" in shown
            else "no noise and no privacy guarantee")
        if row["method"] not in by_text.setdefault(text, []):
            by_text[text].append(row["method"])
    return [f"- {', '.join(f'`{m}`' for m in methods)}: {text}."
            for text, methods in by_text.items()]


def experiment_list(experiment_id: str | None = None) -> list[dict]:
    """Every experiment (or only ``experiment_id``): id, title, the paper table it reproduces,
    its cells (0: computed, no training), its seeds (none for a table that trains nothing) and
    its estimated cost (full budget in hours, --quick in minutes)."""

    listing = []
    for exp in EXPERIMENTS.values() if experiment_id is None else [experiment(experiment_id)]:
        cells = len(exp.cells(exp.seeds)) if exp.compute is None else 0
        listing.append({"id": exp.id, "title": exp.title, "paper": exp.paper, "cells": cells,
                        "seeds": list(exp.seeds), "full_hours": exp.full_hours,
                        "quick_minutes": exp.quick_minutes
                        or cells * QUICK_SECONDS_PER_CELL / 60})
    return listing


def print_list(stream: Any = None, *, experiment_id: str | None = None) -> None:
    """``qpriv reproduce --list [ID]``: every experiment (or only ``experiment_id``), its cells
    and its cost."""
    rows = [[e["id"], e["title"],
             e["cells"] or ("classifier runs" if e["full_hours"] else "no training"),
             f"{e['full_hours']:g} h" if e["full_hours"] else "< 1 min",
             f"~{e['quick_minutes']:.0f} min" if e["quick_minutes"] >= 1 else "< 1 min"]
            for e in experiment_list(experiment_id)]
    print(format_table(["id", "what", "cells", "full (2 CPU cores)", "--quick"], rows,
                       max_width=TABLE_WIDTH), file=stream or sys.stdout)
