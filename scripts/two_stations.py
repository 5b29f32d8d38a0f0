"""Two stations, ETTh1 and ETTh2, as two sites: the federated models against each site alone.

Record unit, eps 1, delta 1e-6, H = 24, L = 336, each file split 70/10/20 as any CSV (what
``qpriv federate`` reads). Per site's split (z-scored by its own training split; ``--split
val`` for the validation split): the
public floor (reads no training data); the site's local-only dp-linear at eps 1 with its
default, the private design selection, and with the fixed design; the fixed federated round
(one kernel for both sites) and the personal round (:mod:`qpriv.federated.personal`: one
kernel per site, shrunk toward the pooled kernel by the fixed shrink; ``--shrinks`` adds
others), each with colluders 0 (the claim holds against the server; each site's share is
half the noise) and colluders 1 (against the server joined by the other site too; each site
adds the whole noise). The rounds run through the protocol's functions in this process; the
real processes carry their sum exactly (the noiseless test of tests/federated). Mean and sd
of the MSE over ``--seeds`` noise seeds; the last line is JSON.

    python scripts/two_stations.py --seeds 10
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from qpriv.federated.personal import SHRINK, decode_personal
from qpriv.federated.protocol import decode_and_solve, plan_federation
from qpriv.federated.site import load_site, site_errors, site_update, training_rows
from qpriv.forecasting.datasets import locate_dataset
from qpriv.forecasting.linear import evaluate, fit_dp_linear, public_forecaster
from qpriv.forecasting.linear_design import base_spec
from qpriv.forecasting.windows import load_forecasting_data

EPS, DELTA, SEQ_LEN, HORIZON, PERIOD = 1.0, 1e-6, 336, 24, 24
STATIONS = ("ETTh1", "ETTh2")


def federated_errors(sites: list, *, colluders: int, shrink: float | None, seed: int,
                     split: str) -> list[float]:
    """MSE on ``split`` at each site of one federated round (noise seed ``seed``): the fixed
    round's one kernel (``shrink`` None) or the personal round's kernel of each site."""
    plan = plan_federation(seq_len=SEQ_LEN, horizon=HORIZON, period=PERIOD, unit="record",
                           eps=EPS, delta=DELTA, sites=len(sites), threshold=len(sites),
                           colluders=colluders, channels=sites[0].channels, freq="h",
                           max_rows=1 << (max(map(training_rows, sites)) - 1).bit_length(),
                           personal=shrink is not None)
    total = np.sum([site_update(site, plan, rng=np.random.default_rng([seed, i]), slot=i)
                    for i, site in enumerate(sites)], axis=0)
    if shrink is None:
        kernels = [decode_and_solve(total, plan, survivors=len(sites))[0].kernel] * len(sites)
    else:
        release = decode_personal(total, plan, survivors=len(sites), shrink=shrink)
        kernels = [release.sites[i].kernel for i in range(len(sites))]
    return [site_errors(kernel, site, split)["mse"] for kernel, site in zip(kernels, sites,
                                                                           strict=True)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--split", choices=("test", "val"), default="test")
    parser.add_argument("--shrinks", type=float, nargs="*", default=[],
                        help="personal rounds at these shrinks too (colluders 0)")
    parser.add_argument("--data-dir", default=None)
    args = parser.parse_args()
    paths = [locate_dataset(name, path=args.data_dir) for name in STATIONS]
    sites = [load_site(path, seq_len=SEQ_LEN, horizon=HORIZON) for path in paths]
    central = [load_forecasting_data(csv=path, seq_len=SEQ_LEN, horizon=HORIZON)
               for path in paths]
    floor = public_forecaster(seq_len=SEQ_LEN, horizon=HORIZON,
                              spec=base_spec(seq_len=SEQ_LEN, period=PERIOD))
    runs: dict[str, np.ndarray] = {
        "public floor": np.array([[evaluate(floor, getattr(d, args.split))["mse"]
                                   for d in central]])}
    for name, select in (("local-only dp-linear (default: private selection)", "private"),
                         ("local-only dp-linear, fixed design", "fixed")):
        runs[name] = np.array([[evaluate(fit_dp_linear(d, eps=EPS, delta=DELTA, select=select,
                                                       seed=seed).model,
                                         getattr(d, args.split))["mse"] for d in central]
                               for seed in range(args.seeds)])
    rounds = [("fixed", None, 0), ("fixed", None, 1), ("personal", SHRINK, 0),
              ("personal", SHRINK, 1)]
    rounds += [(f"personal, shrink {rho:g}", rho, 0) for rho in args.shrinks]
    for name, shrink, colluders in rounds:
        runs[f"federated dp-linear, {name}, colluders {colluders}"] = np.array(
            [federated_errors(sites, colluders=colluders, shrink=shrink, seed=seed,
                              split=args.split) for seed in range(args.seeds)])
    print(f"MSE on the {args.split} split (z-scored), record unit, eps {EPS:g}, H = {HORIZON}, "
          f"mean (sd) of {args.seeds} noise seeds")
    print(f"| model | {' | '.join(STATIONS)} |")
    print(f"|---|{'---:|' * len(STATIONS)}")
    for name, values in runs.items():
        cells = [f"{m:.4f}" if len(values) == 1 else f"{m:.4f} ({s:.4f})"
                 for m, s in zip(values.mean(axis=0),
                                 values.std(axis=0, ddof=1) if len(values) > 1
                                 else values[0], strict=True)]
        print(f"| {name} | {' | '.join(cells)} |")
    print(json.dumps({"experiment": "two_stations", "split": args.split, "eps": EPS,
                      "horizon": HORIZON, "seeds": args.seeds, "stations": list(STATIONS),
                      "mse": {k: v.mean(axis=0).tolist() for k, v in runs.items()},
                      "sd": {k: v.std(axis=0, ddof=1).tolist() for k, v in runs.items()
                             if len(v) > 1}}))


if __name__ == "__main__":
    main()
