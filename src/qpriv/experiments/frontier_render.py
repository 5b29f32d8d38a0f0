"""A privacy-utility frontier's outputs: ``frontier.csv``, ``frontier.md`` (every column, and
how to read each row) and ``frontier.png`` (titled with the task, unit and delta, stamped with
the budget), each written atomically, and the table a terminal prints.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from qpriv.experiments.figures import frontier_plot
from qpriv.experiments.frontier_plan import (
    COVERS,
    FEATURE_PATH,
    FLOOR,
    NON_PRIVATE,
    OTHER_UNIT,
    ROLES,
    linear_settings,
)
from qpriv.experiments.frontier_rows import COLUMNS, FrontierReport
from qpriv.experiments.grid import Budget, budget_stamp
from qpriv.forecasting.methods import LINEAR, method
from qpriv.runs.files import atomic_write_bytes, atomic_write_text
from qpriv.tables import TABLE_WIDTH, format_cell, format_table

FRONTIER_CSV = "frontier.csv"
"""The frontier's table, one row per method and eps (what marks a frontier's folder)."""
FRONTIER_MD = "frontier.md"
"""The frontier's table in Markdown, with how to read each row."""
FRONTIER_PNG = "frontier.png"
"""The frontier's plot."""


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
    look-back and windows (:func:`~qpriv.experiments.frontier_plan.linear_settings`), each only
    where ``methods`` (default: any) has a method of that family, so that a closed-form frontier
    does not describe training it never did; ``dpsgd-tuned``'s own epochs likewise."""
    families = None if methods is None else {method(name).family for name in methods}
    backbone = budget_stamp(budget, tuned=methods is None or "dpsgd-tuned" in methods)
    linear = linear_settings(budget)
    train = ("every training window" if linear["max_train_windows"] is None
             else f"{linear['max_train_windows']} training windows")
    linear_part = f"linear family: L = {linear['seq_len']}, {train}"
    if families is not None and families == {LINEAR}:
        return f"budget {budget.name}: {linear_part}"
    if families is not None and LINEAR not in families:
        return backbone
    return f"{backbone}; {linear_part}"


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
