"""The "frontier across horizons" table of docs/frontier.md, from the published frontiers and
the paper.

Reads every published frontier: the linear methods' rows from
``results/frontier-<dataset>-H<horizon>-<unit>-linear/frontier.csv`` (``qpriv frontier
--methods dp-linear public ridge``, re-published whenever their design changes), the other
methods' from ``results/frontier-<dataset>-H<horizon>-<unit>/frontier.csv`` (every method, the
transformer ones included), both written by ``scripts/publish_results.py``; the LDPT paper's
numbers (:mod:`qpriv.experiments.paper_numbers`); and our full-budget backbone numbers, from
the full frontier where it is published, else from a full-budget reproduction under
``results/`` (else "queued"). It prints one Markdown table: one row per (setting, method), each
with the unit its eps is stated at and, for ``dp-linear``, its capture of the floor-to-ridge
gap, then one line per setting saying whether ``dp-linear`` beats the public floor.

    python scripts/frontier_table.py --results results

With ``--record-dpsgd`` it prints the README's other table instead: the record-unit DP-SGD
frontiers (``results/frontier-<dataset>-H<horizon>-record-dpsgd/``), each private method at
eps 0.1 / 1 beside the floor and the noiseless ``dlinear``.
"""

from __future__ import annotations

import argparse
import csv
import re
from collections.abc import Sequence
from pathlib import Path

from qpriv.experiments.paper_numbers import PAPER_TABLES
from qpriv.tables import format_cell, format_table

SETTINGS = tuple((d, h) for d in ("ETTh1", "ETTh2") for h in (24, 96, 336, 720))
EPS = (0.1, 1.0)
FOLDER = re.compile(r"^frontier-(?P<dataset>.+)-H(?P<horizon>\d+)-(?P<unit>record|window)"
                    r"(?P<linear>-linear)?$")

UNITS = {
    "public": "none needed: reads no training data",
    "ridge": "none (not private)",
    ("dp-linear", "record"): "record (weights and every forecast; scaler private, inside)",
    ("dp-linear", "window"): "window (weights and every forecast; no scaler needed)",
    "ldpt": "token, per pass (feature path: not the targets, not the weights)",
    "dpsgd": "window (weights, given the loader's scaler, released in the clear)",
    "classical": "none (not private)",
}
"""What each row's eps is stated at (or why it has none)."""

PAPER_SOURCES = {
    "ldpt": ("table3", "table5", "tableA1"),
    "dpsgd": ("table3", "table14", "tableA1", "table11", "table12"),
    "classical": ("table3", "table5", "tableA1"),
}
"""Where the paper prints each method's MSE, in the order looked up: the first table with the
setting is the row's source."""
ALSO = ("table11", "table12", "tableA4")
"""Tables whose other numbers for the same cell are listed below the table."""

PENDING = "queued"
"""A backbone number not published yet: every setting of the table is in the queue of
``scripts/run_full_budget.sh``, which publishes its frontiers as they finish."""
DECIMALS = {"table3": 4, "table11": 4, "table12": 4}
"""The decimals each table prints (3 where not listed), so that 0.410 is not shown as 0.41."""


def _float(text: str) -> float | None:
    return float(text) if text not in ("", None) else None


def frontiers(results: Path) -> dict[tuple[str, int, str], list[dict]]:
    """The rows of every published frontier, by (dataset, horizon, unit): the methods a linear
    frontier holds (public, ridge, dp-linear) from it where it is published (it is
    re-published whenever their design changes; the full frontier's copies of them may be
    older), every other method's from the full frontier."""
    linear: dict[tuple[str, int, str], list[dict]] = {}
    full: dict[tuple[str, int, str], list[dict]] = {}
    for folder in sorted(results.glob("frontier-*")):
        match = FOLDER.match(folder.name)
        if not match or not (folder / "frontier.csv").is_file():
            continue
        key = (match["dataset"], int(match["horizon"]), match["unit"])
        with (folder / "frontier.csv").open(newline="") as handle:
            (linear if match["linear"] else full)[key] = list(csv.DictReader(handle))
    found = {}
    for key in sorted(set(linear) | set(full)):
        mine = linear.get(key, [])
        served = {r["method"] for r in mine}
        found[key] = mine + [r for r in full.get(key, []) if r["method"] not in served]
    return found


def full_budget_reproductions(results: Path) -> list[dict]:
    """The rows of every full-budget reproduction published under ``results`` (its README
    names the budget)."""
    rows = []
    for table in sorted(results.glob("*/results.csv")):
        readme = table.parent / "README.md"
        if readme.is_file() and "- budget: `full`" in readme.read_text():
            with table.open(newline="") as handle:
                rows += list(csv.DictReader(handle))
    return rows


def _mean_sd(row: dict | None) -> str:
    if row is None:
        return PENDING
    mean, sd = _float(row["mse_mean"]), _float(row["mse_sd"])
    return format_cell(mean, significant=True) + (
        "" if sd is None else " ± " + format_cell(sd, 2, significant=True))


def _row(rows: list[dict], method: str, eps: float | None) -> dict | None:
    return next((r for r in rows if r["method"] == method and _float(r["eps"]) == eps), None)


def ours_backbone(published: Sequence[dict], reproduced: list[dict], dataset: str,
                  horizon: int, method: str, eps: float | None) -> str:
    """Our full-budget test MSE of a backbone method at a setting: from the setting's
    published frontier rows (``published``), else a full-budget reproduction, else
    :data:`PENDING`."""
    row = _row(list(published), method, eps)
    if row is not None and row.get("mse_mean"):
        return _mean_sd(row)
    for row in reproduced:
        if (row.get("dataset"), _float(row.get("horizon", "")), row.get("method"),
                _float(row.get("eps", ""))) == (dataset, horizon, method, eps) and row.get("mse"):
            return format_cell(float(row["mse"]), significant=True)
    return PENDING


def paper(dataset: str, horizon: int, method: str, eps: float | None
          ) -> tuple[str, str] | None:
    """The paper's MSE of a cell and the table it comes from (None: printed nowhere)."""
    for table_id in PAPER_SOURCES[method]:
        table = PAPER_TABLES[table_id]
        for row in table.rows:
            if (row.get("dataset"), row.get("horizon"), row.get("method"), row.get("eps")) == (
                    dataset, horizon, method, eps) and row.get("mse") is not None:
                return _printed(row, table_id), table_id
    return None


def _printed(row: dict, table_id: str) -> str:
    """A paper row's MSE (and its "± std") with the decimals its table prints."""
    digits = DECIMALS.get(table_id, 3)
    spread = f" ± {row['mse_std']:.{digits}f}" if row.get("mse_std") is not None else ""
    return f"{row['mse']:.{digits}f}{spread}"


def _table_name(table_id: str) -> str:
    return "Table " + table_id.removeprefix("table")


def also(dataset: str, horizon: int, method: str, eps: float | None, source: str | None
         ) -> list[str]:
    """Other tables' numbers for the same cell: multi-seed means, and copies that disagree
    with the source table (a copy that only rounds it is left out)."""
    shown = None if source is None else next(
        r["mse"] for r in PAPER_TABLES[source].rows
        if (r.get("dataset"), r.get("horizon"), r.get("method"), r.get("eps")) == (
            dataset, horizon, method, eps) and r.get("mse") is not None)
    notes = []
    for table_id in ALSO:
        if table_id == source:
            continue
        for row in PAPER_TABLES[table_id].rows:
            if (row.get("dataset"), row.get("horizon"), row.get("method"), row.get("eps")) == (
                    dataset, horizon, method, eps) and row.get("mse") is not None:
                if (row.get("mse_std") is None and shown is not None
                        and round(row["mse"], 3) == round(shown, 3)):
                    continue
                seeds = " (3 seeds)" if row.get("mse_std") is not None else ""
                notes.append(f"{_table_name(table_id)}: {_printed(row, table_id)}{seeds}")
    return notes


def table(results: Path) -> str:
    """The Markdown table and the lines under it."""
    linear = frontiers(results)
    reproduced = full_budget_reproductions(results)
    headers = ["dataset, H", "method", "unit (what the eps covers)", "eps",
               "ours: test MSE", "capture", "paper: test MSE (table)"]
    rows, floors, notes = [], [], []
    eps_label = " / ".join(f"{e:g}" for e in EPS)
    for dataset, horizon in SETTINGS:
        setting = f"{dataset}, {horizon}"
        record = linear.get((dataset, horizon, "record"), [])
        window = linear.get((dataset, horizon, "window"), [])
        either = record or window
        public, ridge = _row(either, "public", None), _row(either, "ridge", None)
        rows.append([setting, "`public`", UNITS["public"], "-", _mean_sd(public), "", ""])
        rows.append([setting, "`ridge`", UNITS["ridge"], "-", _mean_sd(ridge), "", ""])
        for unit, frontier_rows in (("record", record), ("window", window)):
            cells = [_row(frontier_rows, "dp-linear", e) for e in EPS]
            rows.append([setting, "`dp-linear`", UNITS[("dp-linear", unit)], eps_label,
                         " / ".join(_mean_sd(c) for c in cells),
                         " / ".join(capture(public, ridge, c) for c in cells), ""])
            if public is not None:
                floors.append(verdict(setting, unit, float(public["mse_mean"]), cells))
        for method in ("ldpt", "dpsgd", "classical"):
            eps_values = EPS if method != "classical" else (None,)
            ours = " / ".join(ours_backbone(record + window, reproduced, dataset, horizon,
                                            method, e) for e in eps_values)
            printed = [paper(dataset, horizon, method, e) for e in eps_values]
            sources = sorted({p[1] for p in printed if p}, key=list(PAPER_TABLES).index)
            theirs = " / ".join(p[0] if p else "not printed" for p in printed)
            if sources:
                theirs += " (" + ", ".join(_table_name(s) for s in sources) + ")"
            else:
                theirs = "not printed"
            rows.append([setting, f"`{method}`", UNITS[method],
                         eps_label if method != "classical" else "-", ours, "", theirs])
            for e, p in zip(eps_values, printed, strict=True):
                extra = also(dataset, horizon, method, e, p[1] if p else None)
                if extra:
                    at = "" if e is None else f" at eps {e:g}"
                    notes.append(f"- {setting}, `{method}`{at}: " + "; ".join(extra))
    lines = [format_table(headers, rows, markdown=True), "", *floors]
    if notes:
        lines += ["", "Other numbers the paper prints for the same cells:", "", *notes]
    return "\n".join(lines) + "\n"


def capture(public: dict | None, ridge: dict | None, cell: dict | None) -> str:
    """The share of the floor-to-ridge gap a private cell keeps, (floor - private) /
    (floor - ridge), as a whole percentage (:data:`PENDING` where a number is missing)."""
    if public is None or ridge is None or cell is None:
        return PENDING
    floor = float(public["mse_mean"])
    return f"{100 * (floor - float(cell['mse_mean'])) / (floor - float(ridge['mse_mean'])):.0f} %"


def verdict(setting: str, unit: str, floor: float, cells: Sequence[dict | None]) -> str:
    """Whether dp-linear at ``unit`` beats the public floor at each eps: its mean below the
    floor by more than twice the sample sd of one run over the noise seeds (so that a single
    run, one noise draw, lands below it too), level with it, or above it; a cell of one seed
    has no spread and gets no verdict."""
    words = []
    for eps, cell in zip(EPS, cells, strict=True):
        if cell is None:
            words.append(f"eps {eps:g}: {PENDING}")
            continue
        mean, sd = float(cell["mse_mean"]), _float(cell["mse_sd"])
        gap = mean - floor
        if sd is None or int(float(cell.get("n_seeds") or 0)) < 2:
            reading = "one seed, no spread: no verdict"
        else:
            reading = ("beats it" if gap < -2 * sd else "above it" if gap > 2 * sd
                       else "level with it (within 2 sd of one run)")
        words.append(f"eps {eps:g}: {reading}, {gap:+.4f}")
    return f"- {setting}, {unit} unit, against the floor {floor:.4f}: " + "; ".join(words) + "."


RECORD_DPSGD = re.compile(r"^frontier-(?P<dataset>.+)-H(?P<horizon>\d+)-record-dpsgd$")
"""The record-unit DP-SGD frontiers (``qpriv frontier --unit record --methods dpsgd
dpsgd-tuned classical dpsgd-linear dpsgd-dlinear dlinear dp-linear public ridge``)."""
RECORD_DPSGD_METHODS = (("dp-linear", "dp-linear"), ("dpsgd", "dpsgd (transformer)"),
                        ("dpsgd-tuned", "dpsgd-tuned"), ("dpsgd-linear", "dpsgd-linear"),
                        ("dpsgd-dlinear", "dpsgd-dlinear"))
"""The private methods of the README's record-unit DP-SGD table, as its columns name them."""
NOT_RUN = "not run yet"
"""A cell of that table missing from its published frontier (the transformer's cells take
40 minutes to 3 hours each; they are run as resumable cells and the folder is re-published)."""

TWIN = "classical (transformer, no noise)"
"""The header of the transformer's noiseless twin in :func:`record_dpsgd_table`."""


def record_dpsgd_table(results: Path) -> str:
    """The README's record-unit DP-SGD table: one row per published
    ``frontier-<D>-H<H>-record-dpsgd`` folder, each private method's test MSE (mean ± sd over
    its seeds) at eps 0.1 / 1 beside the floor and the noiseless twins: ``dlinear``
    (``dpsgd-dlinear``'s) and ``classical`` (the transformer's, one seed)."""
    eps = " / ".join(f"{e:g}" for e in EPS)
    lines = ["| setting | floor | " + " | ".join(f"{name} eps {eps}"
                                              for _, name in RECORD_DPSGD_METHODS)
             + f" | dlinear | {TWIN} |", "|---" * (len(RECORD_DPSGD_METHODS) + 4) + "|"]
    found = [(match["dataset"], int(match["horizon"]), folder)
             for folder in results.glob("frontier-*-record-dpsgd")
             if (match := RECORD_DPSGD.match(folder.name))]
    for dataset, horizon, folder in sorted(found):
        with (folder / "frontier.csv").open(newline="") as handle:
            rows = list(csv.DictReader(handle))

        def cell(method: str, eps: float | None, rows: list[dict] = rows) -> str:
            row = _row(rows, method, eps)
            return NOT_RUN if row is None else _mean_sd(row)

        private = [" / ".join(cell(method, e) for e in EPS) for method, _ in RECORD_DPSGD_METHODS]
        lines.append(f"| {dataset} H = {horizon} | {cell('public', None)} | "
                     + " | ".join(private) + f" | {cell('dlinear', None)} | "
                     f"{cell('classical', None)} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    """Print the table for the frontiers published under ``--results`` (``--record-dpsgd``:
    the README's record-unit DP-SGD table)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", default="results", type=Path,
                        help="the folder of published results (default: results)")
    parser.add_argument("--record-dpsgd", action="store_true",
                        help="print the README's record-unit DP-SGD table instead")
    args = parser.parse_args()
    print((record_dpsgd_table if args.record_dpsgd else table)(args.results), end="")


if __name__ == "__main__":
    main()
