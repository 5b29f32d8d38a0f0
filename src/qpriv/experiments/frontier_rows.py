"""The rows of a privacy-utility frontier, one per method and eps: the mean and sd of the
cells' test errors over the seeds, and what the runs' headline claim is and covers (kind,
accounting, unit, delta, how the z-score scaler is treated), with the words each row is read by.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from qpriv.experiments.frontier_plan import (
    COVERS,
    FEATURE_PATH,
    FLOOR,
    NON_PRIVATE,
    OTHER_UNIT,
    Series,
)
from qpriv.experiments.grid import Budget, mean_std
from qpriv.forecasting.methods import method
from qpriv.forecasting.records import ForecastResult
from qpriv.privacy.claims import Kind
from qpriv.runs.files import read_json_object
from qpriv.runs.layout import RESULT_FILE

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
           "given": SCALER_DECLARED, "public": SCALER_DECLARED}
"""How a row's method treats the z-score scaler (a statistic fitted on the training split is
inside the guarantee, declared public, or named in the claim as released in the clear),
from a linear fit's ``fit.scaler``; the trained methods z-score with the loader's scaler."""

COLUMNS = ("method", "eps", "unit", "role", "reading", "claim_kind", "claim_accounting",
           "claim_unit", "delta", "covers", "covers_unit", "covers_weights", "scaler", "mse_mean",
           "mse_sd", "mae_mean", "mae_sd", "n_seeds", "failed_seeds", "seeds", "family",
           "seq_len", "train_windows", "test_windows", "budget")
"""The columns of ``frontier.csv``, in order."""


@dataclass
class FrontierReport:
    """What :func:`~qpriv.experiments.frontier.run_frontier` produced: rows (one per method x
    eps), failed cells, files."""

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
    it (``fit.scaler``), DP-SGD at the record unit names it in its claim (private or declared
    public); every other trained method z-scores with the loader's scaler, which its claim
    names as released in the clear."""
    if role == FLOOR:
        return SCALER_NO_DATA
    if role == NON_PRIVATE:
        return SCALER_NOT_PRIVATE
    fit = results[0].raw.get("fit") if results else None
    treatment = fit.get("scaler") if isinstance(fit, dict) else None
    claim = results[0].claims.get("eps") if results else None
    if treatment is None and claim is not None:
        treatment = claim.details.get("scaler")
    return SCALERS.get(treatment, SCALER_CLEAR)
