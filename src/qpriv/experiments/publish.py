"""Publishing a finished grid: its small outputs copied into a folder of the repository.

A reproduction (``qpriv reproduce ID --out OUT``) keeps its report in ``OUT/<id>/<budget>/`` and
its cells in ``OUT/cells/<budget>/<cell key>/``; a frontier (``qpriv frontier --out OUT``) keeps
its report in ``OUT/<dataset>-H<horizon>-<unit>/<budget>/`` and its cells in the same
``OUT/cells/<budget>/``. Publishing copies what a reader needs and nothing that is heavy or
machine-bound:

* the report: ``results.csv``, ``table.md`` and ``figure.png`` (a reproduction) or
  ``frontier.csv``, ``frontier.md`` and ``frontier.png`` (a frontier);
* every cell's ``result.json`` and, where the grid attacked it, ``mia.json``, as
  ``cells/<cell key>/`` (a path under ``OUT`` inside them becomes one relative to the folder);
* a ``README.md`` with the command, the qpriv version, the dates and the budget.

Never copied: checkpoints and weights (``*.pt``, ``*.npz``), ``config.json`` (it names the data
file's path on the machine that ran it), ``report.json`` (the same) and ``report.html``. The
classifier figures (``qml-figure*``) and the tables computed without training publish their
report only: their per-run records are shared between figures and run to tens of megabytes.

A grid is published only when it is finished: every cell has its result (and its attack), the
report exists, names no failed cell and is not older than any cell. Only the full budget is
published unless another is asked for by name (a test of the pipeline, and its README says so).
The folder is built next to its destination and renamed into place, replacing a previous
publication (never another folder).

Example::

    source = reproduction("table3", out_dir="runs/full")
    publish(source, dest="results/table3", command="qpriv reproduce table3 --out runs/full")
"""

from __future__ import annotations

import contextlib
import csv
import datetime
import importlib.metadata
import os
import re
import secrets
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from qpriv.errors import ArgumentError, InvalidInputError
from qpriv.experiments.frontier_plan import (
    DEFAULT_BACKBONE_SEEDS,
    DEFAULT_SEEDS,
    UNITS,
    frontier_jobs,
    plan,
)
from qpriv.experiments.frontier_render import (
    FRONTIER_CSV,
    FRONTIER_MD,
    FRONTIER_PNG,
    frontier_stamp,
)
from qpriv.experiments.grid import BUDGETS, FULL
from qpriv.experiments.registry import experiment
from qpriv.experiments.runner import (
    FIGURE_PNG,
    REPORT_JSON,
    RESULTS_CSV,
    TABLE_MD,
    attacked,
    cell_dir,
    files_of_cell,
    resolve_budget,
)
from qpriv.forecasting.methods import LINEAR, method
from qpriv.runs.files import (
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    read_json_object,
)
from qpriv.runs.layout import MIA_FILE, RESULT_FILE

README_FILE = "README.md"
CELLS_DIR = "cells"
MARK = "<!-- published by qpriv.experiments.publish -->"
"""The first line of a published README: what marks a folder that publishing may replace."""
LEFT_OUT = ("checkpoints and weights (*.pt, *.npz), each cell's config.json (it names the data "
            "file's path on the machine that ran it), report.json and report.html")


@dataclass(frozen=True)
class Source:
    """A finished grid, checked: its report files and the cell folders whose results count.

    ``files`` are copied as they are (tables and plots), ``cells`` map a cell key to the cell's
    folder, ``cell_files`` are the names every cell folder holds; ``metrics`` the grid's
    (where they attack the cells, a cell with a model also holds Table 9's ``mia.json``: see
    :func:`~qpriv.experiments.runner.files_of_cell`).
    """

    kind: str
    """``reproduce`` or ``frontier``."""
    name: str
    """The experiment's id (``table3``) or the frontier's folder (``ETTh1-H24-record``)."""
    title: str
    budget: str
    stamp: str
    """The budget's line, as the figure carries it."""
    out_dir: Path
    files: tuple[Path, ...]
    cells: tuple[tuple[str, Path], ...]
    cell_files: tuple[str, ...]
    finished: float
    """When the report was written (seconds since the epoch)."""
    notes: tuple[str, ...] = ()
    metrics: tuple[str, ...] = ()

    def files_of(self, folder: Path) -> tuple[str, ...]:
        """The names copied from one (finished) cell folder."""
        return files_of_cell(folder, metrics=self.metrics)


def _budget(budget: str, *, what: str, out: Path, folder: Path) -> None:
    """Refuse a budget other than ``full`` unless it was asked for; refuse a missing report."""
    if budget not in BUDGETS:
        raise InvalidInputError(f"budget {budget!r} is not one of {', '.join(BUDGETS)}")
    if folder.is_dir():
        return
    others = sorted(p.name for p in folder.parent.iterdir() if p.is_dir()) \
        if folder.parent.is_dir() else []
    found = f" (it has: {', '.join(others)})" if others else ""
    if budget == FULL.name and others:
        raise ArgumentError(
            f"{what} has no report at the full budget in "
            f"{ArgumentError.literal(f'{folder.parent}{found}')}; run it at the full "
            "budget to the end, or publish a test of the pipeline with {budget}",
            values={"budget": others[0]})
    raise InvalidInputError(f"{what} has no {budget}-budget report in {folder}{found}; run it "
                            f"(--out {out}) to the end first")


def _finished(report_files: Sequence[Path], cells: Sequence[tuple[str, Path]],
              metrics: Sequence[str], *, what: str, rerun: str) -> float:
    """When the report was written; refuse a missing file, an unfinished cell (one that lacks
    a file of :func:`~qpriv.experiments.runner.files_of_cell` for the grid's ``metrics``) or a
    stale report."""
    missing = [p for p in report_files if not p.is_file()]
    if missing:
        raise InvalidInputError(f"{what} is not finished: {missing[0]} is missing; {rerun}")
    needs = {key: ((RESULT_FILE,) if not (folder / RESULT_FILE).is_file()
                   else files_of_cell(folder, metrics=metrics)) for key, folder in cells}
    unfinished = [(key, name) for key, folder in cells for name in needs[key]
                  if not (folder / name).is_file()]
    if unfinished:
        keys = list(dict.fromkeys(key for key, _ in unfinished))
        raise InvalidInputError(
            f"{what} is not finished: {len(keys)} of {len(cells)} cells lack a file (e.g. "
            f"{keys[0]} has no {unfinished[0][1]}); {rerun}")
    written = min(p.stat().st_mtime for p in report_files)
    newer = [key for key, folder in cells for name in needs[key]
             if (folder / name).stat().st_mtime > written]
    if newer:
        raise InvalidInputError(
            f"{what}'s report is older than cell {newer[0]}'s result; {rerun} (it reads the "
            "finished cells and writes the report again)")
    return max(p.stat().st_mtime for p in report_files)


def reproduction(experiment_id: str, *, out_dir: str | Path, budget: str = FULL.name,
                 seeds: Sequence[int] | None = None) -> Source:
    """The finished reproduction ``experiment_id`` in ``out_dir`` at ``budget``, checked.

    Raises:
        InvalidInputError: an unknown experiment or budget; no report at that budget (an
            :class:`~qpriv.errors.ArgumentError` naming ``budget`` where another budget has
            one); a report file missing; a failed or unfinished cell; a report older than a
            cell.
    """
    exp = experiment(experiment_id)
    out = Path(out_dir)
    where = out / exp.id / budget
    rerun = f"run qpriv reproduce {exp.id} --out {out} to the end first"
    _budget(budget, what=exp.id, out=out, folder=where)
    chosen = resolve_budget(budget)
    files = [where / RESULTS_CSV, where / TABLE_MD]
    if exp.figure is not None:
        files.append(where / FIGURE_PNG)
    summary = where / REPORT_JSON
    if summary.is_file():
        failures = read_json_object(summary, fix=rerun).get("failures") or []
        if failures:
            first = failures[0]
            raise InvalidInputError(
                f"{exp.id} is not finished: {len(failures)} cells failed (e.g. "
                f"{first.get('cell')}: {first.get('error')}); {rerun}")
    notes: tuple[str, ...] = ()
    cells: list[tuple[str, Path]] = []
    if exp.compute is None:
        cells = [(cell.key, cell_dir(cell, budget=chosen, out_dir=out))
                 for cell in exp.cells(tuple(seeds) if seeds else exp.seeds)]
    elif exp.id.startswith("qml-"):
        notes = ("The classifier runs behind these rows (one JSON record each, in "
                 "cells/<budget>/qml/ under the command's --out, shared between figures) are "
                 "not copied: at the full budget they run to tens of megabytes.",)
    finished = _finished([*files, summary], cells, exp.metrics, what=exp.id, rerun=rerun)
    return Source(kind="reproduce", name=exp.id, title=f"{exp.id}: {exp.title}",
                  budget=budget, stamp=exp.stamp(chosen), out_dir=out, files=tuple(files),
                  cells=tuple(cells), cell_files=(RESULT_FILE,) if cells else (),
                  finished=finished, notes=notes, metrics=tuple(exp.metrics))


FRONTIER_NAME = re.compile(r"^(?P<dataset>.+)-H(?P<horizon>[1-9][0-9]*)-(?P<unit>[a-z]+)$")


def _frontier_rows(path: Path, *, rerun: str) -> list[dict[str, str]]:
    try:
        with path.open(newline="") as handle:
            rows = list(csv.DictReader(handle))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InvalidInputError(f"cannot read {path} ({exc}); {rerun}") from exc
    needed = {"method", "eps", "role", "family", "seeds", "failed_seeds"}
    if not rows or not needed <= set(rows[0]):
        raise InvalidInputError(f"{path} holds no frontier rows (it needs the columns "
                                f"{', '.join(sorted(needed))}); {rerun}")
    return rows


def frontier(name: str, *, out_dir: str | Path, budget: str = FULL.name) -> Source:
    """The finished frontier ``name`` (``ETTh1-H24-record``: dataset, horizon, unit) in
    ``out_dir`` at ``budget``, checked. Its cells are those ``frontier.csv`` names: the methods,
    eps and seed counts of its rows, laid out as :func:`qpriv.experiments.frontier.run_frontier`
    lays them out.

    Raises:
        InvalidInputError: a name that is not ``DATASET-H<horizon>-<unit>``, an unknown budget;
            no report at that budget (an :class:`~qpriv.errors.ArgumentError` naming
            ``budget`` where another budget has one); a report file missing; a failed or
            unfinished cell; a report older than a cell.
    """
    match = FRONTIER_NAME.match(name)
    if not match or match["unit"] not in UNITS:
        raise InvalidInputError(f"frontier {name!r} is not DATASET-H<horizon>-<unit> with a unit "
                                f"in {', '.join(UNITS)}; e.g. ETTh1-H24-record")
    dataset, horizon, unit = match["dataset"], int(match["horizon"]), match["unit"]
    out = Path(out_dir)
    where = out / name / budget
    rerun = (f"run qpriv frontier --dataset {dataset} --horizon {horizon} --unit {unit} "
             f"--out {out} to the end first")
    _budget(budget, what=f"frontier {name}", out=out, folder=where)
    chosen = resolve_budget(budget)
    files = [where / FRONTIER_CSV, where / FRONTIER_MD, where / FRONTIER_PNG]
    if not files[0].is_file():
        raise InvalidInputError(f"frontier {name} is not finished: {files[0]} is missing; "
                                f"{rerun}")
    rows = _frontier_rows(files[0], rerun=rerun)
    failed = [r for r in rows if int(r["failed_seeds"] or 0)]
    if failed:
        raise InvalidInputError(
            f"frontier {name} is not finished: {len(failed)} rows have failed seeds (e.g. "
            f"{failed[0]['method']} at eps {failed[0]['eps'] or '-'}); {rerun}")
    methods = list(dict.fromkeys(r["method"] for r in rows))
    eps = sorted({float(r["eps"]) for r in rows if r["eps"]})
    noisy = [len(r["seeds"].split()) for r in rows
             if method(r["method"]).family == LINEAR and method(r["method"]).needs_eps]
    trained = [len(r["seeds"].split()) for r in rows if method(r["method"]).family != LINEAR]
    # the seed counts as the rows give them; a mismatch is caught against the plan below
    series = plan(unit=unit, eps=eps, methods=methods, seeds=max(noisy, default=DEFAULT_SEEDS),
                  backbone_seeds=max(trained, default=DEFAULT_BACKBONE_SEEDS))
    jobs = frontier_jobs(series, dataset=dataset, horizon=horizon)
    named = {(r["method"], float(r["eps"]) if r["eps"] else None, int(seed))
             for r in rows for seed in r["seeds"].split()}
    planned = {(s.method, cell.eps, cell.seed) for s, cell in jobs}
    if named != planned:
        raise InvalidInputError(f"{files[0]} names other cells than its methods, eps and seeds "
                                f"give (e.g. {sorted(named ^ planned, key=str)[0]}); {rerun}")
    cells = [(cell.key, cell_dir(cell, budget=chosen, out_dir=out)) for _, cell in jobs]
    finished = _finished(files, cells, (), what=f"frontier {name}", rerun=rerun)
    return Source(kind="frontier", name=name,
                  title=f"Privacy-utility frontier: {dataset}, H = {horizon}, {unit} unit",
                  budget=budget, stamp=frontier_stamp(chosen, methods=methods), out_dir=out,
                  files=tuple(files), cells=tuple(cells), cell_files=(RESULT_FILE,),
                  finished=finished)


# -- writing ---------------------------------------------------------------------------------


def _is_absolute_path(text: str) -> bool:
    """Whether ``text`` reads as an absolute path of some machine (``/a/b``, ``C:\\a``)."""
    if "\n" in text or len(text) < 3:
        return False
    return (PurePosixPath(text).is_absolute() and len(PurePosixPath(text).parts) > 2) or (
        PureWindowsPath(text).is_absolute() and bool(PureWindowsPath(text).drive))


def _published_path(relative: PurePosixPath, *, budget: str) -> str:
    """A path under the grid's ``--out`` as the published folder names it."""
    parts = relative.parts
    if parts[:2] == (CELLS_DIR, budget):
        relative = PurePosixPath(CELLS_DIR, *parts[2:])
    return str(relative)


def portable(value: Any, *, out_dir: Path, budget: str, where: str) -> Any:
    """``value`` (a JSON value read from a cell) with every path under ``out_dir`` made
    relative to the published folder (``OUT/cells/<budget>/KEY/...`` -> ``cells/KEY/...``),
    absolute or, where ``out_dir`` was given relative, starting with it.

    Raises:
        InvalidInputError: another absolute path is left (it would name a place on the machine
            that ran the grid); ``where`` names the file.
    """
    if isinstance(value, dict):
        return {k: portable(v, out_dir=out_dir, budget=budget, where=where)
                for k, v in value.items()}
    if isinstance(value, list):
        return [portable(v, out_dir=out_dir, budget=budget, where=where) for v in value]
    if not isinstance(value, str):
        return value
    if not _is_absolute_path(value):
        # a path as the grid wrote it under a relative --out (mia.json's run folder)
        if out_dir.parts and not out_dir.is_absolute():
            with contextlib.suppress(ValueError):
                return _published_path(PurePosixPath(value).relative_to(out_dir.as_posix()),
                                       budget=budget)
        return value
    for root in dict.fromkeys((out_dir.absolute(), out_dir.resolve())):
        with contextlib.suppress(ValueError):
            return _published_path(PurePosixPath(*Path(value).relative_to(root).parts),
                                   budget=budget)
    raise InvalidInputError(f"{where} holds the path {value!r}, a place on the machine that "
                            "ran the grid; publishing it would leak it (remove it from the "
                            "file, or extend qpriv.experiments.publish.portable)")


def version() -> str:
    """The installed qpriv's version."""
    return importlib.metadata.version("qpriv")


def _day(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, tz=datetime.timezone.utc).date().isoformat()


def readme(source: Source, *, command: str, published: datetime.date) -> str:
    """The published folder's README: what it is, the command, the version, dates, budget and
    what was and was not copied."""
    full = source.budget == FULL.name
    budget = (f"`{source.budget}` ({source.stamp})" if full else
              f"`{source.budget}`, **not the full budget: a test of the pipeline, not a "
              f"result** ({source.stamp})")
    report = ", ".join(f"`{p.name}`" for p in source.files)
    lines = [MARK, f"# {source.title}", "",
             f"The small outputs of a finished `qpriv {source.kind}` grid, copied by "
             "`scripts/publish_results.py`.", "",
             f"- command: `{command}`",
             f"- qpriv version: {version()}",
             f"- budget: {budget}",
             f"- report written: {_day(source.finished)} (UTC); published: "
             f"{published.isoformat()}",
             f"- files: {report}"]
    if source.cells:
        names = " and ".join(f"`{n}`" for n in source.cell_files)
        if attacked(source.metrics):
            names += f" (and `{MIA_FILE}` where the cell has a model to attack)"
        lines.append(f"- cells: {names} of each of the {len(source.cells)} cells, in "
                     f"`{CELLS_DIR}/<cell key>/`")
    lines += [f"- not copied: {LEFT_OUT}", *(f"- {note}" for note in source.notes)]
    return "\n".join(lines) + "\n"


def _published_before(dest: Path) -> bool:
    """Whether ``dest`` is a folder this module wrote (its README starts with :data:`MARK`)."""
    with contextlib.suppress(OSError, UnicodeDecodeError):
        return (dest / README_FILE).read_text().startswith(MARK)
    return False


def publish(source: Source, *, dest: str | Path, command: str,
            published: datetime.date | None = None) -> Path:
    """Copy ``source``'s small outputs and a README into ``dest``, as one rename.

    The folder is built beside ``dest`` (``.NAME.HEX.tmp``) and renamed into place; a previous
    publication there is replaced, and removed only once the new one is in place. ``command``
    is the command that produced the grid, written into the README as given; ``published``
    (default: today, UTC) its publication date.

    Raises:
        InvalidInputError: an empty ``command``; ``dest`` exists and is not a previous
            publication (a file, or a folder without this module's README); a cell file that
            holds a path of the machine that ran the grid. Nothing is written then.
    """
    if not command.strip():
        raise InvalidInputError("the command that produced the grid is empty; give it as it was "
                                "run, e.g. 'qpriv reproduce table3 --out runs/full'")
    dest = Path(dest)
    if dest.exists() and not (dest.is_dir() and _published_before(dest)):
        raise InvalidInputError(f"{dest} exists and is not a folder this script published; "
                                "choose another destination or remove it")
    published = published or datetime.datetime.now(datetime.timezone.utc).date()
    cells = [(key, name, portable(read_json_object(folder / name, fix="run the grid again"),
                                  out_dir=source.out_dir, budget=source.budget,
                                  where=str(folder / name)))
             for key, folder in source.cells for name in source.files_of(folder)]
    dest.parent.mkdir(parents=True, exist_ok=True)
    built = dest.parent / f".{dest.name}.{secrets.token_hex(8)}.tmp"
    built.mkdir()
    try:
        for path in source.files:
            atomic_write_bytes(built / path.name, path.read_bytes())
        for key, name, data in cells:
            atomic_write_json(built / CELLS_DIR / key / name, data)
        atomic_write_text(built / README_FILE,
                          readme(source, command=command.strip(), published=published))
        _swap(built, dest)
    except BaseException:
        shutil.rmtree(built, ignore_errors=True)
        raise
    return dest


def _swap(built: Path, dest: Path) -> None:
    """Rename ``built`` to ``dest``; a previous ``dest`` is moved aside first and removed
    after (put back if the rename fails)."""
    if not dest.exists():
        os.replace(built, dest)
        return
    old = dest.parent / f".{dest.name}.{secrets.token_hex(8)}.old"
    os.replace(dest, old)
    try:
        os.replace(built, dest)
    except BaseException:
        os.replace(old, dest)
        raise
    shutil.rmtree(old, ignore_errors=True)


def published_files(dest: str | Path) -> list[str]:
    """Every file under ``dest``, as sorted POSIX paths relative to it (for checks and
    listings)."""
    root = Path(dest)
    return sorted(str(PurePosixPath(*p.relative_to(root).parts)) for p in root.rglob("*")
                  if p.is_file())


def summary(dest: str | Path) -> dict[str, Any]:
    """What a published folder holds: its file count and size."""
    files = published_files(dest)
    return {"dest": str(dest), "files": len(files),
            "bytes": sum((Path(dest) / f).stat().st_size for f in files)}
