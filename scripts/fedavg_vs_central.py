"""FedAvg over ETTh1 cut by time into sites, against its twins on the same test splits.

``--method ldpt-fedavg``: the federated LDPT model (real Flower processes) against each site's
local-only LDPT (central ``ldpt`` on that site alone, the same budget and eps_s, trained for
rounds x local epochs) and the public floor, each scored on every site's own test split and
pooled by test windows. ``--method dp-fedavg``: DP-FedAvg at the site unit against the public
floor, the same FedAvg without noise or clipping's privacy (noise off, the cost of the
guarantee) and federated dp-linear (record unit) at the same eps. Prints a table and the wall
times; the last line is one JSON object.

    python scripts/fedavg_vs_central.py --method ldpt-fedavg --sites 3 --budget quick
    python scripts/fedavg_vs_central.py --method dp-fedavg --sites 8 --eps 1
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from flwr.supercore.differential_privacy import compute_clip_model_update, compute_stdv

from qpriv.experiments.grid import BUDGETS
from qpriv.federated.fedavg import DP_FEDAVG, LDPT_FEDAVG, plan_fedavg
from qpriv.federated.fedavg_run import federate_fedavg
from qpriv.federated.processes import federate
from qpriv.federated.train_site import (
    evaluate_site,
    initial_model,
    load_site_data,
    local_train,
    model_parameters,
)
from qpriv.forecasting.datasets import locate_dataset
from qpriv.forecasting.linear import evaluate, public_forecaster
from qpriv.forecasting.run import run_forecast


def split_sites(folder: Path, sites: int, data_dir: str | None) -> list[Path]:
    """ETTh1 cut into ``sites`` consecutive spans of time, one CSV each."""
    frame = pd.read_csv(locate_dataset("ETTh1", path=data_dir))
    span = len(frame) // sites
    paths = [folder / f"site{i}.csv" for i in range(sites)]
    for i, path in enumerate(paths):
        frame.iloc[i * span:(i + 1) * span].to_csv(path, index=False)
    return paths


def pooled(scores: list[tuple[float, int]]) -> float:
    """Mean test MSE over every site's test windows."""
    return float(sum(m * n for m, n in scores) / sum(n for _, n in scores))


def floor(paths: list[Path], plan) -> float:
    """The public floor (reads no training data) on every site's test split."""
    model = public_forecaster(seq_len=plan.seq_len, horizon=plan.horizon)
    scores = []
    for path in paths:
        data = load_site_data(str(path), plan)
        scores.append((evaluate(model, data.test)["mse"], len(data.test)))
    return pooled(scores)


def ldpt_rows(paths: list[Path], args: argparse.Namespace, tmp: Path) -> dict:
    budget = BUDGETS[args.budget]
    settings = {"seq_len": budget.seq_len, "horizon": 24,
                "max_train_windows": budget.max_train_windows,
                "max_eval_windows": budget.max_eval_windows}
    tic = time.perf_counter()
    fed = federate_fedavg(paths, method=LDPT_FEDAVG, out_dir=tmp / "fed", rounds=args.rounds,
                          local_epochs=args.local_epochs, eps=args.eps,
                          overrides=dict(budget.model), seed=0, deadline_s=3000,
                          **settings)
    fed_s = time.perf_counter() - tic
    local, tic = [], time.perf_counter()
    for i, path in enumerate(paths):
        run = run_forecast(csv=path, method="ldpt", eps=args.eps, seed=i,
                           epochs=args.rounds * args.local_epochs,
                           overrides=dict(budget.model) or None, rigorous=False,
                           progress=False, **settings)
        local.append((run.mse, run.windows["test"]))
    local_s = time.perf_counter() - tic
    plan = plan_fedavg(method=DP_FEDAVG, seq_len=max(budget.seq_len, 168), horizon=24,
                       period=24, channels=tuple(fed["inference"]["channels"]), freq="h",
                       sites=len(paths), rounds=1, local_epochs=1, eps=1.0,
                       max_eval_windows=budget.max_eval_windows)
    return {"federated ldpt-fedavg": fed["mse"], "local-only ldpt (each site alone)":
            pooled(local), "public floor": floor(paths, plan) if budget.seq_len >= 168
            else None, "seconds": {"federated": fed_s, "local_only_all_sites": local_s}}


def dp_rows(paths: list[Path], args: argparse.Namespace) -> dict:
    settings = {"method": DP_FEDAVG, "rounds": args.rounds, "local_epochs": args.local_epochs,
                "eps": args.eps, "out_dir": None, "deadline_s": 3000}
    tic = time.perf_counter()
    private = federate_fedavg(paths, **settings)
    dp_s = time.perf_counter() - tic
    clean = federate_fedavg(paths, noise=False, seed=0, **settings)
    tic = time.perf_counter()
    linear = federate(paths, out_dir=None, eps=args.eps, deadline_s=3000)
    linear_s = time.perf_counter() - tic
    plan = plan_fedavg(method=DP_FEDAVG, seq_len=336, horizon=24, period=24,
                       channels=tuple(private["inference"]["channels"]), freq="h",
                       sites=len(paths), rounds=1, local_epochs=1, eps=1.0)
    return {f"dp-fedavg (site unit, eps {args.eps:g})": private["mse"],
            "the same FedAvg, noise off (no guarantee)": clean["mse"],
            f"federated dp-linear (record unit, eps {args.eps:g})": linear["mse"],
            "public floor": floor(paths, plan),
            "noise_multiplier": private["eps"]["noise_multiplier"],
            "seconds": {"dp_fedavg": dp_s, "federated_dp_linear": linear_s}}


def dp_seeds(paths: list[Path], args: argparse.Namespace) -> dict:
    """dp-fedavg over ``--seeds`` noise seeds in one process, through the functions the
    processes run (each site's local training, Flower's clipping, the wrapper's noise std),
    against the same rounds without noise: mean and sd of the pooled test MSE."""
    plan = plan_fedavg(method=DP_FEDAVG, seq_len=336, horizon=24, period=24,
                       channels=tuple(pd.read_csv(paths[0], nrows=1).columns[1:]), freq="h",
                       sites=len(paths), rounds=args.rounds, local_epochs=args.local_epochs,
                       eps=args.eps)
    datas = [load_site_data(str(path), plan) for path in paths]
    std = compute_stdv(plan.noise_multiplier, plan.clip, plan.sites)
    found: dict[str, list[float]] = {"noise on": [], "noise off": []}
    for seed in range(args.seeds):
        for name, scale in (("noise on", std), ("noise off", 0.0)):
            if name == "noise off" and seed:
                continue  # the noiseless rounds do not depend on the noise seed
            rng = np.random.default_rng(seed)
            weights = model_parameters(initial_model(plan, seed=0))
            for rnd in range(plan.rounds):
                current = [weights["weight"].astype(np.float64)]
                updates = []
                for i, data in enumerate(datas):
                    site = [local_train(data, plan, weights, seed=1000 * i + rnd)[0]["weight"]]
                    compute_clip_model_update(site, current, clipping_norm=plan.clip)
                    updates.append(site[0])
                mean = np.mean(updates, axis=0)
                weights = {"weight": (mean + rng.normal(0.0, scale, mean.shape)
                                      if scale else mean).astype(np.float32)}
            found[name].append(pooled([(evaluate_site(d, plan, weights, seed=0)["mse"],
                                        len(d.test)) for d in datas]))
    return {f"dp-fedavg (site unit, eps {args.eps:g}), mean of {args.seeds} noise seeds":
            float(np.mean(found["noise on"])),
            "its sd over the seeds": float(np.std(found["noise on"], ddof=1)),
            "the same rounds, noise off": found["noise off"][0],
            "public floor": floor(paths, plan)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--method", choices=(LDPT_FEDAVG, DP_FEDAVG), required=True)
    parser.add_argument("--sites", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--local-epochs", type=int, default=1)
    parser.add_argument("--eps", type=float, default=None,
                        help="ldpt-fedavg: per-pass eps_s (default 0.1); dp-fedavg: site-level "
                             "eps (default 1)")
    parser.add_argument("--budget", choices=("tiny", "quick", "full"), default="quick")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--seeds", type=int, default=0,
                        help="dp-fedavg: that many noise seeds in one process through the "
                             "same functions, instead of one run of the real processes")
    args = parser.parse_args()
    if args.eps is None:
        args.eps = 0.1 if args.method == LDPT_FEDAVG else 1.0
    with tempfile.TemporaryDirectory() as tmp:
        paths = split_sites(Path(tmp), args.sites, args.data_dir)
        rows = ldpt_rows(paths, args, Path(tmp)) if args.method == LDPT_FEDAVG \
            else dp_seeds(paths, args) if args.seeds else dp_rows(paths, args)
    print(f"ETTh1 cut by time into {args.sites} sites, H = 24, {args.rounds} round(s) of "
          f"{args.local_epochs} local epoch(s); test MSE pooled over the sites' test splits")
    for name, value in rows.items():
        if isinstance(value, float):
            print(f"  {name:<48} {value:.4f}")
    print(json.dumps({"method": args.method, "sites": args.sites, "rounds": args.rounds,
                      "local_epochs": args.local_epochs, "eps": args.eps,
                      "budget": args.budget if args.method == LDPT_FEDAVG else None,
                      **{k: (round(v, 6) if isinstance(v, float) else v)
                         for k, v in rows.items()}}, default=str))


if __name__ == "__main__":
    main()
