"""One site of a FedAvg federation: its data, its local training, its report, its ClientApp.

Unlike dp-linear's light site (:mod:`qpriv.federated.site`, NumPy only), a FedAvg site
trains a torch model, so this ClientApp imports torch and the forecasting models. A site
loads its own CSV as :func:`~qpriv.forecasting.windows.load_forecasting_data` loads it for a
central run (its own 70/10/20 split and z-score, the plan's window limits), so that a
federation of one site and one round is the central run of the same settings and seed (a
test checks it).

Each round it receives the global weights (:func:`model_parameters`' names) and trains them
for ``local_epochs`` by the one trainer (:class:`~qpriv.training.trainer.Trainer`) with the
plan's method:

* ``ldpt-fedavg``: the LDPT backbone of central ``ldpt`` at the plan's per-pass eps_s (its
  channel, shots and injections: the feature-path noise is the site's), the LDPT paper's
  training protocol (section 7.2), the weights of its best local validation epoch returned;
* ``dp-fedavg``: dp-linear's :class:`~qpriv.forecasting.linear_dpsgd.TrainableLinear` at
  :data:`~qpriv.federated.fedavg.LINEAR_SETTINGS`, without noise (the server clips and
  noises the update).

A site's trainer seed in round r is its seed + r - 1 (its node config's ``seed`` in the
tests; a secret one drawn at the site otherwise). The reply weights training by the site's
number of training windows (``ldpt-fedavg``) or by 1 (``dp-fedavg``, uniform FedAvg).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import numpy as np
import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from torch import nn

from qpriv.federated.fedavg import DP_FEDAVG, LINEAR_SETTINGS, FedAvgPlan
from qpriv.forecasting.csv_input import series_frequency
from qpriv.forecasting.linear import evaluate as evaluate_linear
from qpriv.forecasting.linear_dpsgd import DPSGD_LINEAR_DESIGN, TrainableLinear
from qpriv.forecasting.model import LDPTForecaster
from qpriv.forecasting.recipe import ForecasterRecipe, ForecasterTrainConfig
from qpriv.forecasting.windows import ForecastData, load_forecasting_data
from qpriv.privacy.randomness import run_seed
from qpriv.training.seeding import derive_seed, seed_everything
from qpriv.training.trainer import Trainer

__all__ = ["build_model", "client_app", "evaluate_site", "initial_model", "load_site_data",
           "local_train", "model_parameters", "set_parameters", "train_config"]


def load_site_data(csv: str, plan: FedAvgPlan) -> ForecastData:
    """The site's CSV as a central run loads it (the plan's L, H and window limits)."""
    return load_forecasting_data(None, csv=csv, seq_len=plan.seq_len, horizon=plan.horizon,
                                 allow_download=False, **plan.window_limits())


def build_model(plan: FedAvgPlan) -> nn.Module:
    """A fresh model of the plan's method (its initial weights from torch's global RNG)."""
    if plan.method == DP_FEDAVG:
        spec = replace(DPSGD_LINEAR_DESIGN, period=plan.period)
        return TrainableLinear(seq_len=plan.seq_len, horizon=plan.horizon, spec=spec)
    return LDPTForecaster(plan.ldpt_setup().config)


def initial_model(plan: FedAvgPlan, *, seed: int) -> nn.Module:
    """The server's first global model: built after seeding every source from the server's
    ``seed`` as central :func:`~qpriv.forecasting.run.run_forecast` seeds its model's
    initialisation."""
    seed_everything(derive_seed(seed, "model-init"))
    return build_model(plan)


def model_parameters(model: nn.Module) -> dict[str, np.ndarray]:
    """The trainable parameters FedAvg averages, by name (buffers are fixed by the plan)."""
    return {name: p.detach().cpu().numpy().copy() for name, p in model.named_parameters()}


def set_parameters(model: nn.Module, arrays: Mapping[str, np.ndarray]) -> nn.Module:
    """Load :func:`model_parameters`' arrays into ``model`` (every parameter required)."""
    params = dict(model.named_parameters())
    if set(arrays) != set(params):
        raise ValueError(f"the global weights name {sorted(arrays)[:3]}..., not the model's "
                         "parameters: server and site run different plans")
    with torch.no_grad():
        for name, p in params.items():
            p.copy_(torch.as_tensor(np.asarray(arrays[name]), dtype=p.dtype))
    return model


def train_config(plan: FedAvgPlan, *, seed: int) -> ForecasterTrainConfig:
    """The local trainer's protocol: central ldpt's (paper section 7.2) for ``local_epochs``,
    or dp-fedavg's linear settings."""
    if plan.method == DP_FEDAVG:
        lr = LINEAR_SETTINGS["lr"]
        return ForecasterTrainConfig(
            epochs=plan.local_epochs, batch_size=plan.batch_size, lr=lr,
            lr_quantum_attention=lr, weight_decay=0.0, plateau_patience=plan.local_epochs,
            seed=seed, device="cpu", progress=False)
    return ForecasterTrainConfig(seed=seed, eval_passes=1, progress=False,
                                 epochs=plan.local_epochs, batch_size=plan.batch_size)


def local_train(data: ForecastData, plan: FedAvgPlan, arrays: Mapping[str, np.ndarray], *,
                seed: int) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """One round at a site: the global weights trained on its windows; its weights (the
    best local validation epoch's, as a central run keeps) and what it reports."""
    model = set_parameters(build_model(plan), arrays)
    trainer = Trainer(model, train=data.train, val=data.val,
                      config=train_config(plan, seed=seed), recipe=ForecasterRecipe())
    fit = trainer.fit()
    return model_parameters(model), {"best_epoch": float(fit.best_epoch),
                                     "val_loss": float(fit.best_val_loss)}


def evaluate_site(data: ForecastData, plan: FedAvgPlan, arrays: Mapping[str, np.ndarray], *,
                  seed: int) -> dict[str, float]:
    """The final model's test and validation MSE and MAE on the site's own splits (z-scored
    by its own training split), as a central run tests its model."""
    model = set_parameters(build_model(plan), arrays)
    if isinstance(model, TrainableLinear):
        kernel = model.forecaster(name=plan.method, details={})
        test, val = evaluate_linear(kernel, data.test), evaluate_linear(kernel, data.val)
    else:
        trainer = Trainer(model, train=data.train, val=data.val,
                          config=train_config(plan, seed=seed), recipe=ForecasterRecipe())
        test, val = trainer.evaluate(data.test), trainer.evaluate(data.val)
    return {"mse": float(test["mse"]), "mae": float(test["mae"]), "val_mse": float(val["mse"])}


client_app = ClientApp()
"""The FedAvg sites' Flower ClientApp (``qpriv.federated.train_site:client_app``)."""


def _site(context: Context) -> tuple[str, int]:
    """The site's CSV and its seed (secret unless its node config gives one)."""
    seed = context.node_config.get("seed")
    return (str(context.node_config["csv"]),
            run_seed(None if seed in (None, "") else int(seed)))


@client_app.train()
def _train(msg: Message, context: Context) -> Message:
    plan = FedAvgPlan.from_config(msg.content["config"])
    csv, seed = _site(context)
    data = load_site_data(csv, plan)
    global_arrays = msg.content["arrays"].to_numpy_ndarrays()
    names = list(msg.content["arrays"].keys())
    arrays, report = local_train(data, plan, dict(zip(names, global_arrays, strict=True)),
                                 seed=seed + int(msg.content["config"]["server-round"]) - 1)
    weight = 1 if plan.method == DP_FEDAVG else len(data.train)
    content = RecordDict({"arrays": ArrayRecord({k: Array(arrays[k]) for k in names}),
                          "metrics": MetricRecord({"num-examples": weight, **report})})
    return Message(content=content, reply_to=msg)


@client_app.evaluate()
def _evaluate(msg: Message, context: Context) -> Message:
    plan = FedAvgPlan.from_config(msg.content["config"])
    csv, seed = _site(context)
    data = load_site_data(csv, plan)
    arrays = dict(zip(msg.content["arrays"].keys(),
                      msg.content["arrays"].to_numpy_ndarrays(), strict=True))
    errors = evaluate_site(data, plan, arrays, seed=seed)
    dates = data.dates
    metrics = MetricRecord({
        "num-examples": len(data.test), **errors, "train_windows": len(data.train),
        "val_windows": len(data.val), "test_windows": len(data.test), "rows": len(dates),
        "scaler_rows": data.split.train[1] - data.split.train[0],
        "scaler_mean": [float(v) for v in data.scaler.mean],
        "scaler_std": [float(v) for v in data.scaler.std]})
    report = ConfigRecord({"site": data.dataset, "first": dates[0].isoformat(),
                           "last": dates[-1].isoformat(),
                           "date_column": str(dates.name or "date"),
                           "freq": series_frequency(dates) or "uneven"})
    return Message(content=RecordDict({"metrics": metrics, "report": report}), reply_to=msg)
