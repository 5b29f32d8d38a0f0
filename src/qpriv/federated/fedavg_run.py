"""``qpriv federate --method ldpt-fedavg | dp-fedavg``: FedAvg through real Flower processes.

:func:`federate_fedavg` checks the sites' files (the same columns and frequency; at least 2
sites), fixes the public plan (:func:`~qpriv.federated.fedavg.plan_fedavg`), and runs the
FedAvg ServerApp (:mod:`qpriv.federated.fedavg_app`) and the sites' ClientApp
(:mod:`qpriv.federated.train_site`) on a local SuperLink and one SuperNode per site
(:func:`~qpriv.federated.processes.run_federation`, as federated dp-linear runs), then
writes the released run folder (:mod:`qpriv.federated.fedavg_results`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from qpriv.federated.fedavg import plan_fedavg
from qpriv.federated.processes import DEADLINE_S, check_sites, run_federation
from qpriv.forecasting.csv_input import series_frequency
from qpriv.forecasting.seasonality import resolve_period
from qpriv.runs.directory import check_out_dir
from qpriv.runs.layout import RESULT_FILE

__all__ = ["FEDAVG_APP", "STAGE_TIMEOUT_S", "federate_fedavg"]

FEDAVG_APP = ("qpriv.federated.fedavg_app:server_app", "qpriv.federated.train_site:client_app")
"""The FedAvg methods' ServerApp and ClientApp."""
STAGE_TIMEOUT_S = 600.0
"""How long the server waits for the sites' replies in one round (local training included)."""


def federate_fedavg(sites: Sequence[str | Path], *, method: str, out_dir: str | Path | None,
                    rounds: int = 3, local_epochs: int = 1, eps: float = 0.1,
                    delta: float | None = None, seq_len: int = 336, horizon: int = 24,
                    batch_size: int | None = None, max_train_windows: int | None = None,
                    max_eval_windows: int | None = None,
                    overrides: Mapping[str, Any] | None = None, clip: float | None = None,
                    seed: int | None = None, site_seeds: Sequence[int] | None = None,
                    noise: bool = True, deadline_s: float = DEADLINE_S,
                    stage_timeout_s: float = STAGE_TIMEOUT_S, on_started: object = None,
                    ) -> dict:
    """Train ``method`` over ``sites`` (one CSV each) by FedAvg through real Flower processes
    and write its run folder to ``out_dir`` (None: nothing written); return the result.

    ``eps`` is ldpt-fedavg's per-pass eps_s (the paper's accounting) or dp-fedavg's site-level
    eps at ``delta`` (default 1e-6) over the ``rounds``. ``seed`` seeds the server (initial
    model, noise) and ``site_seeds`` the sites' trainers (tests; None: secret ones).
    ``noise`` False (tests only) adds no server noise to dp-fedavg.

    Raises:
        InvalidInputError: fewer than 2 sites, sites that differ in columns or frequency, a
            used ``out_dir``, bad settings, a round in which a site did not answer, or the
            deadline passed; nothing is written then.
    """
    out = check_out_dir(out_dir, resume=False, marks=(RESULT_FILE,))
    datas = check_sites(sites, seq_len=seq_len, horizon=horizon)
    first = datas[0]
    plan = plan_fedavg(
        method=method, seq_len=seq_len, horizon=horizon,
        period=resolve_period(first.dates, None), channels=first.channels,
        freq=series_frequency(first.dates) or "uneven", sites=len(sites), rounds=rounds,
        local_epochs=local_epochs, eps=eps, delta=delta, batch_size=batch_size,
        max_train_windows=max_train_windows, max_eval_windows=max_eval_windows,
        overrides=dict(overrides or {}), clip=clip, noise=noise)
    return run_federation(sites, plan=plan, out=out, seeds=site_seeds, deadline_s=deadline_s,
                          stage_timeout_s=stage_timeout_s, on_started=on_started,
                          components=FEDAVG_APP, server_seed=seed)
