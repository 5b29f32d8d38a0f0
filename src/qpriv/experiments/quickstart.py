"""The main job: classical vs LDPT at two budgets on ETTh1, H = 24, with accounting and audit.

A short privacy/utility run that finishes in minutes on two CPU cores: the same backbone trained
as ``classical`` and as ``ldpt`` at eps_s = 0.1 and 1.0 (a subset of the training windows, a few
epochs), the test MSE and MAE with the change against classical, the per-pass and composed
epsilons (``paper`` accounting, labelled), and the exact channel audit of the strongest budget.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qpriv.audits.channel import ChannelAudit, audit_channel
from qpriv.experiments.frontier import FrontierReport, run_frontier
from qpriv.forecasting.run import run_forecast
from qpriv.runs.layout import CHECKPOINT_FILE, RESULT_FILE

#: The quickstart budget: chosen so that the three runs finish in under 10 minutes on 2 cores.
QUICK_EPOCHS = 3
QUICK_TRAIN_WINDOWS = 1024
QUICK_EVAL_WINDOWS = 384
QUICK_EVAL_PASSES = 3


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


def run_dir_name(run: QuickstartRun) -> str:
    """The folder of ``run`` under the quickstart's ``--out`` (``LDPT eps=0.1`` ->
    ``LDPT_eps0.1``)."""
    return run.label.replace(" ", "_").replace("=", "")


def run_quickstart(
    *,
    dataset: str = "ETTh1",
    horizon: int = 24,
    epochs: int = QUICK_EPOCHS,
    max_train_windows: int | None = QUICK_TRAIN_WINDOWS,
    max_eval_windows: int | None = QUICK_EVAL_WINDOWS,
    eval_passes: int = QUICK_EVAL_PASSES,
    seed: int = 2024,
    out_dir: str | Path | None = None,
    data_dir: str | Path | None = None,
    progress: bool = True,
    runs: Sequence[QuickstartRun] = QUICKSTART_RUNS,
    on_result: Callable[[QuickstartRun, dict], None] | None = None,
) -> tuple[list[dict], ChannelAudit]:
    """Train every run of :data:`QUICKSTART_RUNS` and audit the channel of the smallest eps.

    Each finished run is kept in ``out_dir/<label>`` and skipped when the quickstart is run
    again (an interrupted quickstart resumes the run it was in).
    """
    results = []
    for run in runs:
        run_dir = None
        resume = False
        if out_dir is not None:
            run_dir = Path(out_dir) / run_dir_name(run)
            # a killed run continues from its checkpoint; a finished one is read back
            resume = any((run_dir / name).exists() for name in (CHECKPOINT_FILE, RESULT_FILE))
        result = run_forecast(
            dataset=dataset, horizon=horizon, method=run.method, eps=run.eps, epochs=epochs,
            seed=seed, max_train_windows=max_train_windows, max_eval_windows=max_eval_windows,
            eval_passes=eval_passes, out_dir=run_dir, resume=resume, progress=progress,
            data_dir=data_dir,
        )
        results.append({"label": run.label, **result})
        if on_result is not None:
            on_result(run, result)
    eps_values = [r.eps for r in runs if r.eps is not None]
    audit = audit_channel(min(eps_values) if eps_values else 0.1)
    return results, audit


QUICK_FRONTIER_EPS = (0.1, 1.0)
"""The budgets of the quickstart's frontier."""


def quickstart_frontier(*, dataset: str = "ETTh1", horizon: int = 24,
                        out_dir: str | Path, budget: str = "quick",
                        data_dir: str | Path | None = None,
                        progress: bool = True) -> FrontierReport:
    """The privacy-utility frontier at the record unit at a short budget
    (:func:`qpriv.experiments.frontier.run_frontier`): ``dp-linear`` (record-level
    (eps, delta)-DP), DP-SGD (a window-unit guarantee: drawn as not covering the record) and
    LDPT at the paper's per-pass notion (covering neither the targets nor the weights), against
    the public floor and the non-private ``ridge`` and ``classical``, at
    :data:`QUICK_FRONTIER_EPS`. Written under ``out_dir/frontier``."""
    return run_frontier(dataset=dataset, horizon=horizon, unit="record",
                        eps=QUICK_FRONTIER_EPS, budget=budget,
                        out_dir=Path(out_dir) / "frontier", data_dir=data_dir,
                        progress=progress, threads=1)


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
            "passed": audit.passed, "kind": audit.kind, "accounting": audit.accounting}
