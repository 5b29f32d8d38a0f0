"""Two stations, ETTh1 and ETTh2, as two sites: the federated models against each site alone.

Record unit, eps 1, delta 1e-6, H = 24, L = 336, each file split 70/10/20 as any CSV (what
``qpriv federate`` reads). Per site's split (z-scored by its own training split; ``--split
val`` for the validation split, on which the personal round's candidates were judged): the
public floor (reads no training data); the site's local-only dp-linear at eps 1 with its
default, the private design selection, and with the fixed design; the fixed federated round
(one kernel for both sites) and the personal round (:mod:`qpriv.federated.personal`: one
kernel per site, shrunk toward the pooled kernel as far as the site's own held-out training
windows ask), each with colluders 0 (the claim holds against the server; each site's share is
half the noise) and colluders 1 (against the server joined by the other site too; each site
adds the whole noise). The rounds run through the protocol's functions in this process; the
real processes carry their sum exactly (the noiseless test of tests/federated). Mean and sd
of the MSE over ``--seeds`` noise seeds; the last line is JSON.

    python scripts/two_stations.py --seeds 10
"""

from __future__ import annotations

import argparse
import json
from collections import Counter

import numpy as np

from qpriv.federated.personal import decode_personal
from qpriv.federated.protocol import decode_and_solve, plan_federation
from qpriv.federated.site import load_site, site_errors, site_update, training_rows
from qpriv.forecasting.datasets import locate_dataset
from qpriv.forecasting.linear import evaluate, fit_dp_linear, public_forecaster
from qpriv.forecasting.linear_design import base_spec
from qpriv.forecasting.windows import load_forecasting_data

EPS, DELTA, SEQ_LEN, HORIZON, PERIOD = 1.0, 1e-6, 336, 24, 24
STATIONS = ("ETTh1", "ETTh2")


def federated_errors(sites: list, *, colluders: int, personal: bool, seed: int,
                     split: str) -> tuple[list[float], list[float]]:
    """MSE on ``split`` at each site of one federated round (noise seed ``seed``), and the
    shrink each site chose (personal rounds; empty otherwise)."""
    plan = plan_federation(seq_len=SEQ_LEN, horizon=HORIZON, period=PERIOD, unit="record",
                           eps=EPS, delta=DELTA, sites=len(sites), threshold=len(sites),
                           colluders=colluders, channels=sites[0].channels, freq="h",
                           max_rows=1 << (max(map(training_rows, sites)) - 1).bit_length(),
                           personal=personal)
    total = np.sum([site_update(site, plan, rng=np.random.default_rng([seed, i]), slot=i)
                    for i, site in enumerate(sites)], axis=0)
    if not personal:
        model, _ = decode_and_solve(total, plan, survivors=len(sites))
        return [site_errors(model.kernel, site, split)["mse"] for site in sites], []
    release = decode_personal(total, plan, survivors=len(sites))
    return ([site_errors(release.sites[i].kernel, site, split)["mse"]
             for i, site in enumerate(sites)], [release.shrinks[i] for i in range(len(sites))])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--split", choices=("test", "val"), default="test")
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
    shrinks: dict[str, list[str]] = {}
    for personal in (False, True):
        for colluders in (0, 1):
            name = (f"federated dp-linear, {'personal' if personal else 'fixed'}, "
                    f"colluders {colluders}")
            out = [federated_errors(sites, colluders=colluders, personal=personal, seed=seed,
                                    split=args.split) for seed in range(args.seeds)]
            runs[name] = np.array([errors for errors, _ in out])
            if personal:
                shrinks[name] = [dict(Counter(str(chosen[i]) for _, chosen in out))
                                 for i in range(len(sites))]
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
    for name, counts in shrinks.items():
        print(f"shrinks chosen ({name}): " + "; ".join(
            f"{station} {c}" for station, c in zip(STATIONS, counts, strict=True)))
    print(json.dumps({"experiment": "two_stations", "split": args.split, "eps": EPS,
                      "horizon": HORIZON, "seeds": args.seeds, "stations": list(STATIONS),
                      "mse": {k: v.mean(axis=0).tolist() for k, v in runs.items()},
                      "sd": {k: v.std(axis=0, ddof=1).tolist() for k, v in runs.items()
                             if len(v) > 1},
                      "shrinks": shrinks}))


if __name__ == "__main__":
    main()
