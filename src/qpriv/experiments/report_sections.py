"""The report's sections of what the experiments write, registered with
:mod:`qpriv.report.registry` when this module is imported (import it before building the
report of such a folder; ``qpriv report`` does):

* a quickstart (``qpriv quickstart --out``: one folder per run and ``frontier/``), or any
  folder of finished runs: the runs compared (:func:`comparison_section`), in the
  quickstart's order and with its labels;
* a frontier (``qpriv frontier``: ``frontier.csv``, ``frontier.md``, ``frontier.png``), or the
  ``--out`` folder above it (:func:`frontier_section`);
* a reproduction (``qpriv reproduce``: ``results.csv``, ``table.md``, ``figure.png``), or the
  ``--out`` folder above it (:func:`reproduce_section`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from qpriv.experiments.frontier_plan import ROLES
from qpriv.experiments.frontier_render import FRONTIER_CSV, FRONTIER_MD, FRONTIER_PNG, explain
from qpriv.experiments.frontier_rows import FrontierReport
from qpriv.experiments.paper_numbers import PAPER_TABLES
from qpriv.experiments.quickstart import QUICKSTART_RUNS, quickstart_rows, run_dir_name
from qpriv.experiments.registry import EXPERIMENTS
from qpriv.experiments.runner import (
    EPS_COLUMNS,
    FIGURE_PNG,
    REPORT_JSON,
    RESULTS_CSV,
    epsilon_legend,
)
from qpriv.report.document import (
    Bullets,
    Section,
    Text,
    claim_value,
    number_text,
    png_figure,
    table,
)
from qpriv.report.registry import register_runs_section, register_section
from qpriv.report.result_files import (
    REWRITE_FIX,
    TableSpec,
    markdown_section,
    markdown_title,
    read_table,
)
from qpriv.runs.files import read_json_object
from qpriv.runs.layout import RESULT_FILE

QUICKSTART = "quickstart"
"""The kind of a quickstart's report (any folder of finished runs)."""
FRONTIER = "frontier"
"""The kind of a frontier's report."""
REPRODUCE = "reproduce"
"""The kind of a reproduction's report."""

_QUICKSTART_LABELS = {run_dir_name(run): run.label for run in QUICKSTART_RUNS}


def _nested(directory: Path, name: str) -> tuple[Path, ...]:
    """Folders ``directory/<name of a grid>/<budget>`` holding ``name`` (an ``--out`` root)."""
    return tuple(sorted(path.parent for path in directory.glob(f"*/*/{name}")
                        if path.is_file()))


def frontiers_in(directory: Path) -> tuple[Path, ...]:
    """``(directory,)`` where it is a frontier, else the frontiers of the ``--out`` folders
    it is or holds as ``frontier/`` (a quickstart's)."""
    if (directory / FRONTIER_CSV).is_file():
        return (directory,)
    return _nested(directory / "frontier", FRONTIER_CSV) + _nested(directory, FRONTIER_CSV)


def reproductions_in(directory: Path) -> tuple[Path, ...]:
    """``(directory,)`` where it is a reproduction, else those of the ``--out`` folder it
    is."""
    if (directory / RESULTS_CSV).is_file():
        return (directory,)
    return _nested(directory, RESULTS_CSV)


# -- a quickstart ---------------------------------------------------------------------------------


def comparison_section(runs: Sequence[Path]) -> Section:
    """The quickstart's table: every run's test MSE and MAE (mean over the evaluation passes),
    the change against ``classical`` and its privacy numbers, labelled."""
    results = [{"label": _QUICKSTART_LABELS.get(run.name, run.name),
                **read_json_object(run / RESULT_FILE, fix=REWRITE_FIX)} for run in runs]
    rows = quickstart_rows(results)
    section = Section("Comparison")
    section.blocks.append(table(
        "Runs compared", ["run", "method", "test MSE", "test MAE", "dMSE % vs classical",
                          "eps per pass (paper)", "eps composed, advanced (paper)",
                          "eps token (rigorous)", "eps record (rigorous)", "p", "sigma"],
        [[r["label"], r["method"], r["mse"], r["mae"], r["delta_mse_pct"],
          claim_value(r["eps_per_pass"]), claim_value(r["eps_advanced"]),
          claim_value(r["eps_token_rigorous"]), claim_value(r["eps_record_rigorous"]),
          r["p"], r["sigma"]] for r in rows]))
    section.blocks.append(Text(
        "MSE and MAE on the z-scored test windows (the mean over the evaluation passes where "
        "there were several). eps per pass: local eps-QDP per pass (trace distance d = 0.1, "
        "full norm), accounting=paper; composed: advanced composition over the epochs "
        "(delta' = 1e-6), accounting=paper; rigorous: (eps, delta) of one token's N_s-shot "
        "release and of one record over the whole training (`qpriv account`). Feature-path "
        "epsilons hold for the released quantum features only: the forecast targets and "
        "RevIN's statistics reach the trained model without the channel. The channel audit "
        "is printed by `qpriv quickstart` and `qpriv audit channel`."))
    return section


# -- a frontier -----------------------------------------------------------------------------------


FRONTIER_TABLE = TableSpec(
    command="qpriv frontier",
    columns=("method", "eps", "unit", "role", "reading", "claim_kind", "claim_accounting",
             "claim_unit", "delta", "covers_unit", "covers_weights", "mse_mean", "mse_sd",
             "mae_mean", "mae_sd", "n_seeds", "failed_seeds", "family", "seq_len",
             "train_windows", "test_windows", "budget"),
    filled=("method", "unit", "role", "reading", "covers_unit", "covers_weights", "n_seeds",
            "failed_seeds", "family", "budget"),
    numbers=("eps", "delta", "mse_mean", "mse_sd", "mae_mean", "mae_sd", "n_seeds",
             "failed_seeds", "seq_len", "train_windows", "test_windows"))
"""What :func:`frontier_section` reads from ``frontier.csv``."""


def frontier_section(where: Path) -> Section:
    """The frontier in ``where``: its plot, its table (what each row's claim is and covers,
    test MSE and MAE with their sd over the seeds), how to read the rows, the settings."""
    _, rows = read_table(where / FRONTIER_CSV, FRONTIER_TABLE)
    unknown = next((r["role"] for r in rows if r["role"] not in ROLES), None)
    if unknown is not None:
        raise FRONTIER_TABLE.damaged(where / FRONTIER_CSV, f"role {unknown!r} is none of "
                                                           f"{', '.join(ROLES)}")
    title = markdown_title(where / FRONTIER_MD, f"Privacy-utility frontier: {where}")
    budget = rows[0]["budget"] if rows else where.name
    section = Section(f"{title} (budget {budget})")
    png = where / FRONTIER_PNG
    if png.is_file():
        section.blocks.append(png_figure(
            "Test MSE against eps, one line per method (mean ± sd over the seeds); the public "
            "floor and the non-private references as horizontal lines; methods whose guarantee "
            "does not cover the unit or the weights in grey", png.read_bytes()))
    else:
        section.blocks.append(Text("frontier.png is missing from this folder."))
    section.blocks.append(table(
        "Frontier", ["method", "eps", "claim (kind, accounting, unit)", "delta", "covers unit",
                     "covers weights", "test MSE", "MSE sd", "test MAE", "MAE sd", "seeds",
                     "failed seeds", "reading"],
        [[r["method"], r["eps"],
          "—" if r["claim_kind"] is None else
          f"{r['claim_kind']}, {r['claim_accounting']}, {r['claim_unit']}",
          r["delta"], r["covers_unit"], r["covers_weights"], r["mse_mean"], r["mse_sd"],
          r["mae_mean"], r["mae_sd"], r["n_seeds"], r["failed_seeds"], r["reading"]]
         for r in rows]))
    unit = rows[0]["unit"] if rows else ""
    report = FrontierReport(dataset="", horizon=0, unit=unit, budget=str(budget), rows=rows)
    section.children.append(Section("How to read the rows", blocks=[
        Bullets(tuple(line.removeprefix("- ") for line in explain(report)))]))
    settings = sorted({(r["family"], r["seq_len"], r["train_windows"], r["test_windows"])
                       for r in rows if r["seq_len"] is not None}, key=str)
    if settings:
        section.children.append(Section("Settings", blocks=[Bullets(tuple(
            f"{family}: L = {number_text(seq_len)}, {number_text(train)} training windows, "
            f"{number_text(test)} test windows" for family, seq_len, train, test in settings))]))
    failed = markdown_section(where / FRONTIER_MD, "Failed cells")
    if failed:
        section.children.append(Section("Failed cells", blocks=[Bullets(tuple(failed))]))
    return section


# -- a reproduction -------------------------------------------------------------------------------


REPRODUCE_TABLE = TableSpec(command="qpriv reproduce", numbers=EPS_COLUMNS, paper_twins=True)
"""What :func:`reproduce_section` reads from ``results.csv`` (its columns are the
experiment's)."""


def _read_reproduction(where: Path, summary: Mapping[str, Any]
                       ) -> tuple[list[str], list[dict[str, Any]]]:
    """``results.csv`` of a reproduction (:func:`~qpriv.report.result_files.read_table`), and
    where ``summary`` (``report.json``, written with it) records its columns and rows, the
    same ones."""
    path = where / RESULTS_CSV
    columns, rows = read_table(path, REPRODUCE_TABLE)
    stored_columns, stored_rows = summary.get("columns"), summary.get("rows")
    if isinstance(stored_columns, list) and stored_columns and stored_columns != columns:
        raise REPRODUCE_TABLE.damaged(path, f"its columns are not those {REPORT_JSON} records")
    if isinstance(stored_rows, list) and len(stored_rows) != len(rows):
        raise REPRODUCE_TABLE.damaged(path, f"{len(rows)} rows where {REPORT_JSON} records "
                                            f"{len(stored_rows)}")
    return columns, rows


def reproduce_section(where: Path) -> Section:
    """A reproduction in ``where``: its figure, its table (ours beside the paper's numbers),
    what each epsilon column is, the notes on the paper's numbers and any failed cells."""
    summary = (read_json_object(where / REPORT_JSON, fix=REWRITE_FIX)
               if (where / REPORT_JSON).is_file() else {})
    columns, rows = _read_reproduction(where, summary)
    exp_id = str(summary.get("id", where.parent.name))
    exp = EXPERIMENTS.get(exp_id)
    title = f"{exp_id}: {exp.title}" if exp is not None else exp_id
    section = Section(f"{title} (budget {summary.get('budget', where.name)})")
    figure = where / FIGURE_PNG
    if figure.is_file():
        section.blocks.append(png_figure(f"{title}: ours (solid) and the paper's (dashed), "
                                         "where it prints the number", figure.read_bytes()))
    shown = [c for c in columns if c != "overrides"]
    if rows:
        section.blocks.append(table(
            "Results (paper_* columns: the paper's numbers as printed)", shown,
            [[row.get(c) for c in shown] for row in rows]))
    else:
        section.blocks.append(Text("No rows: every cell failed."))
    legend = epsilon_legend(rows, shown)
    if legend:
        section.children.append(Section("What each epsilon column is", blocks=[
            Bullets(tuple(line.removeprefix("- ") for line in legend))]))
    if exp is not None and exp.paper in PAPER_TABLES and PAPER_TABLES[exp.paper].notes:
        section.children.append(Section("Notes on the paper's numbers", blocks=[
            Bullets(tuple(PAPER_TABLES[exp.paper].notes))]))
    failures = summary.get("failures") or []
    if failures:
        section.children.append(Section("Failed cells", blocks=[Bullets(tuple(
            f"`{f.get('cell')}`: {f.get('error')}" for f in failures))]))
    return section


register_section(FRONTIER, title="privacy-utility frontier",
                 expected=f"a frontier ({FRONTIER_CSV})", detect=frontiers_in,
                 build=frontier_section)
register_section(REPRODUCE, title="reproduction",
                 expected=f"a reproduction ({RESULTS_CSV}, table.md)", detect=reproductions_in,
                 build=reproduce_section)
register_runs_section(QUICKSTART, title="quickstart",
                      expected="a quickstart's --out (run folders and frontier/)",
                      labels=_QUICKSTART_LABELS, build=comparison_section)
