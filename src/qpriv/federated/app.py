"""The Flower ServerApp of federated dp-linear (flwr 1.42); the sites' ClientApp is
:data:`qpriv.federated.site.client_app`.

One fit round through Flower's SecAgg+ (``SecAggPlusWorkflow`` at the server,
``secaggplus_mod`` at every site), then one evaluate round. The fit instructions carry the
public :class:`~qpriv.federated.protocol.FederatedPlan`; each site answers with
:func:`~qpriv.federated.site.site_update`'s integer vector, which SecAgg+ masks, so the
server only ever holds the sum. :class:`SumStrategy` decodes that sum and solves
(:func:`~qpriv.federated.protocol.decode_and_solve`); the evaluate round sends the released
kernel back and each site reports its own test errors (measurements outside the guarantee,
as central dp-linear's are) and its file's span for the run's inference record.

SecAgg+ carries integers exactly when its quantiser is the identity: ``quantization_range =
2 c`` and ``clipping_range = c`` (so ``v -> v + c``), each site's weight equal to
``max_weight`` (so its factor is 1). Its aggregate is then the survivors' mean, which the
strategy multiplies back by their number.

A site that refuses (its file, columns, frequency or size do not fit the plan) sends zeros and
its reason as a fit metric; the server writes that reason as the run's one error line.

A site reads its CSV from its SuperNode's node config (``--node-config 'csv="A.csv"'``); the
ServerApp writes its outcome (a released-model folder, or one error line) to the run config's
``staging`` folder, which ``qpriv federate`` moves into place.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from flwr.common import (
    Context,
    EvaluateIns,
    ndarrays_to_parameters,
    parameters_to_ndarrays,
)
from flwr.server import LegacyContext, ServerApp, ServerConfig
from flwr.server.strategy import FedAvg
from flwr.server.workflow import DefaultWorkflow, SecAggPlusWorkflow

from qpriv.errors import InvalidInputError
from qpriv.federated.personal import decode_personal
from qpriv.federated.protocol import FederatedPlan, decode_and_solve
from qpriv.federated.results import ERROR_FILE, write_release
from qpriv.federated.site import REFUSED, SLOT

__all__ = ["SumStrategy", "server_app"]


class SumStrategy(FedAvg):
    """FedAvg's sampling with a decoder in place of its average: the SecAgg+ aggregate is the
    survivors' summed statistics, solved into the kernel; evaluation goes to the survivors."""

    def __init__(self, plan: FederatedPlan) -> None:
        super().__init__(fraction_fit=1.0, fraction_evaluate=1.0, min_fit_clients=plan.sites,
                         min_available_clients=plan.sites, min_evaluate_clients=2,
                         on_fit_config_fn=lambda _: plan.to_config(),
                         on_evaluate_config_fn=lambda _: plan.to_config(),
                         initial_parameters=ndarrays_to_parameters([np.zeros(1)]))
        self.plan = plan
        self.outcome: dict[str, Any] = {}
        self.survivors: list[Any] = []

    def aggregate_fit(self, server_round: int, results: list, failures: list) -> tuple:
        self.survivors = [proxy for proxy, _ in results]
        mean = parameters_to_ndarrays(results[0][1].parameters)[0] if results else None
        refusals = [str(res.metrics[REFUSED]) for _, res in results if REFUSED in res.metrics]
        try:
            if refusals:  # a site refused before computing: its reason is the run's error
                raise InvalidInputError(refusals[0])
            if mean is None:
                raise InvalidInputError("no site's update arrived")
            total = np.rint(np.asarray(mean, dtype=np.float64) * len(results))
            if self.plan.personal:
                self.outcome = _personal_outcome(total, self.plan, results)
            else:
                model, claim = decode_and_solve(total, self.plan, survivors=len(results))
                self.outcome = {"model": model, "claim": claim}
        except InvalidInputError as exc:
            self.outcome = {"error": str(exc)}
            return None, {}
        return ndarrays_to_parameters([self.outcome["model"].kernel]), {}

    def configure_evaluate(self, server_round: int, parameters: Any,
                           client_manager: Any) -> list:
        """The released kernel to every survivor of the fit round, and to no one else: a
        dropped site's node may still be listed, and FedAvg's sampling would wait for it."""
        if "model" not in self.outcome:
            return []
        ins = EvaluateIns(parameters, self.plan.to_config())
        own = self.outcome.get("proxy_kernels", {})  # a personal round: each site its own
        return [(proxy, EvaluateIns(ndarrays_to_parameters([own[proxy]]), ins.config)
                 if proxy in own else ins) for proxy in self.survivors]

    def aggregate_evaluate(self, server_round: int, results: list, failures: list) -> tuple:
        self.outcome["sites"] = [dict(res.metrics) for _, res in results]
        return None, {}


def _personal_outcome(total: np.ndarray, plan: FederatedPlan, results: list) -> dict[str, Any]:
    """A personal round's release (:func:`~qpriv.federated.personal.decode_personal`): the
    pooled model and claim, each site's kernel by slot and by the proxy that evaluates it.
    Each site names its slot (public: the operator gave it) in its fit metrics."""
    slots = [res.metrics.get(SLOT) for _, res in results]
    if any(slot is None for slot in slots):
        raise InvalidInputError("a personal round needs every site's slot: start each "
                                "SuperNode with --node-config 'slot=N' (0 to sites - 1)")
    release = decode_personal(total, plan, survivors=len(results),
                              slots=[int(slot) for slot in slots])
    return {"model": release.pooled, "claim": release.claim,
            "site_kernels": {s: m.kernel for s, m in release.sites.items()},
            "proxy_kernels": {proxy: release.sites[int(slot)].kernel
                              for (proxy, _), slot in zip(results, slots, strict=True)}}


server_app = ServerApp()


@server_app.main()
def _main(grid: Any, context: Context) -> None:
    config = context.run_config
    staging = Path(str(config["staging"]))
    plan = FederatedPlan.from_config(json.loads(str(config["plan"])))
    strategy = SumStrategy(plan)
    legacy = LegacyContext(context=context, config=ServerConfig(num_rounds=1),
                           strategy=strategy)
    half = plan.half_range
    workflow = DefaultWorkflow(fit_workflow=SecAggPlusWorkflow(
        num_shares=1.0, reconstruction_threshold=plan.threshold, max_weight=1.0,
        clipping_range=float(half), quantization_range=2 * half,
        timeout=float(config["stage_timeout"])))
    workflow(grid, legacy)
    outcome = strategy.outcome
    if "model" not in outcome:
        survivors = len(strategy.survivors)
        message = outcome.get("error") or (
            f"the SecAgg+ round did not complete: fewer than the threshold {plan.threshold} of "
            f"{plan.sites} sites answered ({survivors} did); nothing is released")
        (staging / ERROR_FILE).write_text(message + "\n")
        return
    write_release(staging, model=outcome["model"], claim=outcome["claim"], plan=plan,
                  sites=outcome.get("sites", []), site_kernels=outcome.get("site_kernels"))
