"""The run folder of a FedAvg federation: a released model of the trained family.

``ldpt-fedavg`` leaves ``best.pt`` (the final global weights of the LDPT backbone) and
``result.json``; ``dp-fedavg`` leaves ``linear.npz`` (the final linear model's kernel) and
``result.json``: the released forms that :func:`qpriv.load_run`, ``qpriv forecast`` (given
data) and ``qpriv report`` (given test data) read, as they read federated dp-linear's. The
result's ``federated`` entry holds the public plan, each site's report and what the server
saw; its claims are :func:`~qpriv.federated.fedavg.ldpt_fedavg_claims` or
:func:`~qpriv.federated.fedavg.dp_fedavg_claim`.

The backbone forecasts in a z-score's units; the run records the pooled scaler of the sites'
training splits (each site's per-channel mean and std, weighted by its training rows), which
the sites reported in the clear (the claims say so). With RevIN (the default) the model's
forecast hardly depends on it.
"""

from __future__ import annotations

import platform
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch

from qpriv.federated.fedavg import (
    DP_FEDAVG,
    FedAvgPlan,
    dp_fedavg_claim,
    ldpt_fedavg_claims,
)
from qpriv.federated.train_site import build_model, set_parameters
from qpriv.forecasting.inference import BACKBONE_SCALER_NOTE, LINEAR_SCALER_NOTE
from qpriv.forecasting.methods import LINEAR
from qpriv.forecasting.metrics import METRIC_UNITS
from qpriv.privacy.claims import Kind
from qpriv.runs.files import atomic_savez, atomic_torch_save, atomic_write_json
from qpriv.runs.layout import BEST_FILE, LINEAR_MODEL_FILE, RESULT_FILE

__all__ = ["pooled_scaler", "write_fedavg_release"]


def pooled_scaler(sites: list[dict[str, Any]]) -> dict[str, list[float]]:
    """The z-score of the union of the sites' training rows, from each site's per-channel
    mean, population std and row count: ``mean = sum n_i m_i / N``, ``var = sum n_i (s_i^2 +
    m_i^2) / N - mean^2``."""
    rows = np.array([float(site["scaler_rows"]) for site in sites])
    means = np.array([site["scaler_mean"] for site in sites], dtype=np.float64)
    stds = np.array([site["scaler_std"] for site in sites], dtype=np.float64)
    mean = rows @ means / rows.sum()
    var = rows @ (stds ** 2 + means ** 2) / rows.sum() - mean ** 2
    return {"mean": mean.tolist(), "std": np.sqrt(np.maximum(var, 0.0)).tolist()}


def _pooled_errors(sites: list[dict[str, Any]]) -> dict[str, float]:
    """Test MSE and MAE and validation MSE over every site's windows (weighted by them)."""
    test = np.array([float(s["test_windows"]) for s in sites])
    val = np.array([float(s["val_windows"]) for s in sites])
    return {"mse": float(test @ [s["mse"] for s in sites] / test.sum()),
            "mae": float(test @ [s["mae"] for s in sites] / test.sum()),
            "val_loss": float(val @ [s["val_mse"] for s in sites] / max(val.sum(), 1.0))}


def write_fedavg_release(folder: str | Path, *, plan: FedAvgPlan,
                         weights: dict[str, np.ndarray], sites: list[dict[str, Any]],
                         seed: int | None) -> dict:
    """Write the model file and ``result.json`` of a FedAvg run into ``folder`` (atomically
    each) and return the result. ``sites`` holds each site's evaluation report;
    ``seed`` None: the server's seed was secret."""
    folder = Path(folder)
    model = set_parameters(build_model(plan), weights)
    linear = plan.method == DP_FEDAVG
    secret = seed is None
    channels = plan.channels.split(",")
    if linear:
        forecaster = model.forecaster(name=f"{plan.method} (site, eps={plan.eps:g})",
                                      details={})
        claim = dp_fedavg_claim(plan, secret=secret).to_json()
        privacy = {"privacy": Kind.GLOBAL_DP.value, "eps_per_pass": None, "eps": claim,
                   "claims": [claim], "noise_multiplier": plan.noise_multiplier,
                   "privacy_notes": claim["notes"]}
        record = {"family": LINEAR, "name": forecaster.name, "spec": asdict(forecaster.spec)}
        params = {"total": int(forecaster.kernel.size)}
    else:
        privacy = ldpt_fedavg_claims(plan, secret=secret)
        privacy["claims"] = [privacy[k] for k in ("eps_per_pass", "eps_basic", "eps_advanced")]
        record = plan.ldpt_setup().config.as_dict()
        params = model.parameter_counts()
    counts = {split: sum(int(s[f"{split}_windows"]) for s in sites)
              for split in ("train", "val", "test")}
    result = {
        "method": plan.method, "dataset": "federated", "horizon": plan.horizon,
        "seq_len": plan.seq_len, "seed": seed, **_pooled_errors(sites),
        "metric_units": METRIC_UNITS, "original_units": None,
        "best_epoch": plan.rounds, "epochs": plan.rounds * plan.local_epochs,
        "diverged_epoch": None,
        "windows": {**counts, "train_read": counts["train"], "channels": len(channels)},
        "params": params,
        "inference": {"channels": channels, "date_column": sites[0]["date_column"],
                      "freq": plan.freq, "first_timestamp": min(s["first"] for s in sites),
                      "last_timestamp": max(s["last"] for s in sites),
                      "rows": sum(int(s["rows"]) for s in sites), "source_sha256": None,
                      "scaler": None if linear else pooled_scaler(sites),
                      "scaler_note": LINEAR_SCALER_NOTE if linear else
                      f"{BACKBONE_SCALER_NOTE}; pooled from the sites' training splits"},
        **privacy, "unit": "site" if linear else None, "model": record,
        "federated": {
            "method": plan.method, "plan": plan.to_config(), "sites": sites,
            "summary": _summary(plan, len(sites)),
            "server_saw": ("each site's locally trained weights in the clear every round, "
                           "then each site's evaluation report")},
        "environment": {"python": platform.python_version(), "numpy": np.__version__,
                        "torch": torch.__version__},
    }
    if linear:
        atomic_savez(folder / LINEAR_MODEL_FILE, kernel=forecaster.kernel)
    else:
        atomic_torch_save(folder / BEST_FILE, {"model": model.state_dict(),
                                               "epoch": plan.rounds})
    atomic_write_json(folder / RESULT_FILE, result)
    return result


def _summary(plan: FedAvgPlan, reported: int) -> str:
    """One sentence for the report: the federation and who saw what."""
    how = (f"each site's update clipped to norm {plan.clip:g} and Gaussian noise of std "
           f"{plan.noise_multiplier * plan.clip / plan.sites:.4g} added to their uniform "
           "average (site-level DP, trusted server)" if plan.method == DP_FEDAVG else
           "the weights averaged by training windows (no SecAgg+)")
    return (f"{plan.method}: {plan.sites} sites, {plan.rounds} round(s) of "
            f"{plan.local_epochs} local epoch(s), {how}; {reported} site(s) reported. The "
            "server saw each site's locally trained weights in the clear every round.")
