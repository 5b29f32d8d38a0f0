"""The Flower ServerApp of the FedAvg methods (flwr 1.42's Message API); the sites' ClientApp
is :data:`qpriv.federated.train_site.client_app`.

:func:`run_rounds` drives ``flwr.serverapp.strategy.FedAvg`` (its ``start``: R rounds of
train messages to every site and the weighted average of their replies) from the server's
initial model (:func:`~qpriv.federated.train_site.initial_model`), then sends the final
weights to every site once for evaluation. :class:`EverySite` is FedAvg that samples every
site each round and releases nothing from a round with another number of replies: the
claims count every site in every round. For ``dp-fedavg`` it is wrapped in
:class:`SiteDPClipping`, Flower's ``DifferentialPrivacyServerSideFixedClipping`` (its clipping
and noise scale unchanged) whose Gaussian noise is drawn by qpriv's noise sampler instead of
NumPy's global generator. The accountant and claim are qpriv's
(:mod:`qpriv.privacy.site_dpfedavg`, :func:`qpriv.federated.fedavg.dp_fedavg_claim`).

The server's seed (the initial model, the noise) comes from the run config (``seed``; empty:
a secret one); the ServerApp writes the run folder, or one error line, to ``staging``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
from flwr.app import (
    Array,
    ArrayRecord,
    ConfigRecord,
    Context,
    Message,
    MessageType,
    MetricRecord,
    RecordDict,
)
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import DifferentialPrivacyServerSideFixedClipping, FedAvg
from flwr.supercore.differential_privacy import compute_stdv

from qpriv.errors import InvalidInputError
from qpriv.federated.fedavg import DP_FEDAVG, FedAvgPlan
from qpriv.federated.fedavg_results import write_fedavg_release
from qpriv.federated.results import ERROR_FILE
from qpriv.federated.train_site import initial_model, model_parameters
from qpriv.privacy.randomness import run_seed
from qpriv.privacy.samplers import NoiseSampler, noise_sampler
from qpriv.training.seeding import derive_seed

__all__ = ["EverySite", "SiteDPClipping", "run_rounds", "server_app"]


class EverySite(FedAvg):
    """FedAvg over all ``sites`` every round; a round with another number of replies (a site
    dropped or failed) stops the run: nothing is released."""

    def __init__(self, sites: int) -> None:
        super().__init__(fraction_train=1.0, fraction_evaluate=0.0, min_train_nodes=sites,
                         min_available_nodes=sites)
        self.sites = sites

    def aggregate_train(self, server_round: int,
                        replies: Iterable[Message]) -> tuple[ArrayRecord | None, Any]:
        replies = list(replies)
        self.require_all(server_round, replies)
        return super().aggregate_train(server_round, replies)

    def require_all(self, server_round: int, replies: list[Message]) -> None:
        """Refuse a round unless every site answered without an error.

        Raises:
            InvalidInputError: a site's reply is missing (it dropped or timed out) or an
                error (its reason named).
        """
        answered = sum(not msg.has_error() for msg in replies)
        if answered != self.sites:
            reasons = [msg.error.reason.splitlines()[0] for msg in replies
                       if msg.has_error() and msg.error.reason]
            why = f" ({'; '.join(reasons)})" if reasons else ""
            raise InvalidInputError(
                f"round {server_round}: {answered} of {self.sites} sites answered{why}; FedAvg "
                "over every site needs them all: nothing is released")


class SiteDPClipping(DifferentialPrivacyServerSideFixedClipping):
    """Flower's server-side fixed clipping, its noise drawn by ``sampler`` (the same std,
    ``compute_stdv(z, C, n)``); ``noise`` False (tests) adds none."""

    def __init__(self, strategy: EverySite, *, plan: FedAvgPlan, sampler: NoiseSampler) -> None:
        super().__init__(strategy, plan.noise_multiplier, plan.clip, plan.sites)
        self.every_site, self.sampler, self.noise = strategy, sampler, plan.noise

    def aggregate_train(self, server_round: int,
                        replies: Iterable[Message]) -> tuple[ArrayRecord | None, Any]:
        """Every site's reply required before the wrapper clips any (its accounting assumes
        n replies), then Flower's clipping, FedAvg and the noise."""
        replies = list(replies)
        self.every_site.require_all(server_round, replies)
        return super().aggregate_train(server_round, replies)

    def _add_noise_to_aggregated_arrays(self, aggregated_arrays: ArrayRecord) -> ArrayRecord:
        if not self.noise:
            return aggregated_arrays
        std = compute_stdv(self.noise_multiplier, self.clipping_norm, self.num_sampled_clients)
        return ArrayRecord({
            key: Array(self.sampler.gaussian(value.numpy(), sigma=std).astype(
                value.numpy().dtype))
            for key, value in aggregated_arrays.items()})


def run_rounds(grid: Grid, plan: FedAvgPlan, *, seed: int, secret: bool,
               timeout: float) -> tuple[dict[str, np.ndarray], list[dict]]:
    """The plan's rounds and the final evaluation: the final weights and each site's report.

    Raises:
        InvalidInputError: a round in which not every site answered, or no site evaluated.
    """
    arrays = ArrayRecord({k: Array(v) for k, v in
                          model_parameters(initial_model(plan, seed=seed)).items()})
    every_site = EverySite(plan.sites)
    strategy: FedAvg | SiteDPClipping = every_site
    if plan.method == DP_FEDAVG:
        sampler = noise_sampler(None if secret else derive_seed(seed, "server-noise"))
        strategy = SiteDPClipping(every_site, plan=plan, sampler=sampler)
    result = strategy.start(grid=grid, initial_arrays=arrays, num_rounds=plan.rounds,
                            timeout=timeout, train_config=ConfigRecord(plan.to_config()))
    final = result.arrays
    messages = [Message(content=RecordDict({"arrays": final,
                                            "config": ConfigRecord(plan.to_config())}),
                        message_type=MessageType.EVALUATE, dst_node_id=node)
                for node in grid.get_node_ids()]
    replies = [msg for msg in grid.send_and_receive(messages, timeout=timeout)
               if not msg.has_error()]
    if not replies:
        raise InvalidInputError("no site evaluated the final model; nothing is released")
    sites = [_report(msg) for msg in replies]
    weights = dict(zip(final.keys(), final.to_numpy_ndarrays(), strict=True))
    return weights, sites


def _report(msg: Message) -> dict:
    """A site's evaluation reply as one flat dict (its metrics and its span)."""
    metrics: MetricRecord = msg.content["metrics"]
    report: ConfigRecord = msg.content["report"]
    return {**dict(report), **{k: v for k, v in metrics.items() if k != "num-examples"}}


server_app = ServerApp()


@server_app.main()
def _main(grid: Grid, context: Context) -> None:
    settings = context.run_config
    given = str(settings.get("seed", ""))  # empty: a secret seed, recorded nowhere
    recorded = int(given) if given else None
    folder = Path(str(settings["staging"]))
    try:
        plan = FedAvgPlan.from_config(json.loads(str(settings["plan"])))
        weights, sites = run_rounds(grid, plan, seed=run_seed(recorded), secret=not given,
                                    timeout=float(settings["stage_timeout"]))
    except InvalidInputError as exc:
        (folder / ERROR_FILE).write_text(str(exc) + "\n")
        return
    except Exception as exc:  # one line for qpriv federate, not a wait until its deadline
        (folder / ERROR_FILE).write_text(f"the FedAvg ServerApp failed: {type(exc).__name__}: "
                                         f"{str(exc).splitlines()[0] if str(exc) else ''}\n")
        raise
    write_fedavg_release(folder, plan=plan, weights=weights, sites=sites, seed=recorded)
