"""The run folder of a federated fit: a released linear model, as ``qpriv train`` writes one.

The server holds no data, so the folder is the released form of a linear run (its
``result.json`` and ``linear.npz``, no ``config.json``): :func:`qpriv.load_run`, ``qpriv
forecast`` (given data) and ``qpriv report`` (given test data) read it as they read a linear
run shared without its configuration. The result says who the sites were, what each reported
and what the server saw (``federated``).
"""

from __future__ import annotations

import platform
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from qpriv.federated.plan import FederatedPlan
from qpriv.forecasting.inference import LINEAR_SCALER_NOTE
from qpriv.forecasting.linear import LinearForecaster
from qpriv.forecasting.linear_run import EVALUATION_NOTE
from qpriv.forecasting.methods import LINEAR
from qpriv.forecasting.methods import method as method_entry
from qpriv.forecasting.metrics import METRIC_UNITS
from qpriv.privacy.claims import PrivacyClaim
from qpriv.runs.files import atomic_savez, atomic_write_json
from qpriv.runs.layout import LINEAR_MODEL_FILE, RESULT_FILE

__all__ = ["ERROR_FILE", "PERSONAL_KERNELS_NOTE", "SITES_NOTE", "write_release"]

ERROR_FILE = "error.txt"
"""What the ServerApp writes to its staging folder instead of a model: one line."""
SITES_NOTE = ("each site evaluated the released kernel on its own test and validation splits "
              "(z-scored by its own training split's scaler, in the clear) and reported the "
              "errors and its file's span (first and last timestamp, rows): measurements "
              "outside the guarantee")
"""Named in a federated run's claim: what the evaluation round releases."""
PERSONAL_KERNELS_NOTE = (
    "linear.npz holds the pooled kernel ('kernel', what load_run and qpriv forecast use) and "
    "each site's own ('site_kernels', in the order of 'site_slots'); each site evaluated its "
    "own kernel")
"""A personal run's result: where its kernels are."""


def write_release(folder: str | Path, *, model: LinearForecaster, claim: PrivacyClaim,
                  plan: FederatedPlan, sites: list[dict[str, Any]],
                  site_kernels: dict[int, np.ndarray] | None = None) -> dict:
    """Write ``linear.npz`` and ``result.json`` of a federated dp-linear fit into ``folder``
    (atomically each) and return the result. ``sites`` holds each site's evaluation report
    (:class:`qpriv.federated.app.SiteClient.evaluate`). A personal round's ``site_kernels``
    (by slot) go into ``linear.npz`` beside the pooled ``kernel`` (``site_kernels``, in the
    order of ``site_slots``), which is what :func:`qpriv.load_run` reads."""
    folder = Path(folder)
    claim_entry = {**claim.to_json(), "notes": [*claim.notes, EVALUATION_NOTE, SITES_NOTE]}
    counts = [s["test_windows"] for s in sites]
    weight = sum(counts) or 1
    pooled = {key: sum(s[key] * n for s, n in zip(sites, counts, strict=True)) / weight
              for key in ("mse", "mae", "val_mse")} if sites else \
        {"mse": float("nan"), "mae": float("nan"), "val_mse": float("nan")}
    channels = plan.channels.split(",")
    first = min((s["first"] for s in sites), default="")
    result = {
        "method": "dp-linear", "dataset": "federated", "horizon": plan.horizon,
        "seq_len": plan.seq_len, "seed": None, "mse": pooled["mse"], "mae": pooled["mae"],
        "metric_units": METRIC_UNITS, "original_units": None, "val_loss": pooled["val_mse"],
        "best_epoch": None, "epochs": None, "diverged_epoch": None, "seconds": None,
        "windows": {"train": sum(s["train_windows"] for s in sites),
                    "train_read": sum(s["train_windows"] for s in sites),
                    "val": sum(s["val_windows"] for s in sites), "test": sum(counts),
                    "channels": len(channels)},
        "params": {"total": int(model.kernel.size)},
        "inference": {"channels": channels,
                      "date_column": sites[0]["date_column"] if sites else "date",
                      "freq": plan.freq, "first_timestamp": first,
                      "last_timestamp": max((s["last"] for s in sites), default=""),
                      "rows": sum(s["rows"] for s in sites), "source_sha256": None,
                      "scaler": None, "scaler_note": LINEAR_SCALER_NOTE},
        "privacy": method_entry("dp-linear").privacy, "eps_per_pass": None,
        "eps": claim_entry, "claims": [claim_entry], "unit": plan.unit,
        "model": {"family": LINEAR, "name": model.name, "spec": asdict(model.spec)},
        "fit": model.details,
        "federated": {"plan": plan.to_config(), "sites": sites,
                      "server_saw": "the SecAgg+ sum of the survivors' noisy integer "
                                    "statistics, then each site's evaluation report"},
        "privacy_notes": claim_entry["notes"],
        "environment": {"python": platform.python_version(), "numpy": np.__version__},
    }
    if site_kernels:
        result["federated"]["personal"] = {
            **claim.details.get("personal", {}), "kernels": PERSONAL_KERNELS_NOTE}
    slots = sorted(site_kernels or {})
    own = {"site_kernels": np.stack([site_kernels[s] for s in slots]),
           "site_slots": np.array(slots)} if site_kernels else {}
    atomic_savez(folder / LINEAR_MODEL_FILE, kernel=model.kernel, **own)
    atomic_write_json(folder / RESULT_FILE, result)
    return result
