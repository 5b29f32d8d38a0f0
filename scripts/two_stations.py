"""Two stations, ETTh1 and ETTh2, as two sites: the federated model against each site alone.

Record unit, eps 1, delta 1e-6, H = 24, L = 336, each file split 70/10/20 as any CSV (what
``qpriv federate`` reads). Per site's test split (z-scored by its own training split): the
public floor (reads no training data), the site's local-only dp-linear at eps 1, and the
federated dp-linear of both sites at eps 1, with colluders 0 (the claim holds against the
server; each site's share is half the noise) and colluders 1 (it holds against the server
joined by the other site too; each site adds the whole noise). Both private fits use the
fixed design (the federated round cannot select privately yet; ``select='fixed'`` locally
too). The federated rounds run through the protocol's functions in this process; the real
processes carry their sum exactly (the noiseless test of tests/federated). Mean test MSE over
``--seeds`` noise seeds; the last line is JSON.

    python scripts/two_stations.py --seeds 10
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from qpriv.federated.protocol import decode_and_solve, plan_federation
from qpriv.federated.site import load_site, site_errors, site_update, training_rows
from qpriv.forecasting.datasets import locate_dataset
from qpriv.forecasting.linear import evaluate, fit_dp_linear, public_forecaster
from qpriv.forecasting.linear_design import base_spec
from qpriv.forecasting.windows import load_forecasting_data

EPS, DELTA, SEQ_LEN, HORIZON, PERIOD = 1.0, 1e-6, 336, 24, 24
STATIONS = ("ETTh1", "ETTh2")


def federated_errors(sites: list, *, colluders: int, seed: int) -> list[float]:
    """Test MSE at each site of one federated round (noise seed ``seed``)."""
    plan = plan_federation(seq_len=SEQ_LEN, horizon=HORIZON, period=PERIOD, unit="record",
                           eps=EPS, delta=DELTA, sites=len(sites), threshold=len(sites),
                           colluders=colluders, channels=sites[0].channels, freq="h",
                           max_rows=1 << (max(map(training_rows, sites)) - 1).bit_length())
    total = np.sum([site_update(site, plan, rng=np.random.default_rng([seed, i]))
                    for i, site in enumerate(sites)], axis=0)
    model, _ = decode_and_solve(total, plan, survivors=len(sites))
    return [site_errors(model.kernel, site, "test")["mse"] for site in sites]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--data-dir", default=None)
    args = parser.parse_args()
    paths = [locate_dataset(name, path=args.data_dir) for name in STATIONS]
    sites = [load_site(path, seq_len=SEQ_LEN, horizon=HORIZON) for path in paths]
    central = [load_forecasting_data(csv=path, seq_len=SEQ_LEN, horizon=HORIZON)
               for path in paths]
    floor = public_forecaster(seq_len=SEQ_LEN, horizon=HORIZON,
                              spec=base_spec(seq_len=SEQ_LEN, period=PERIOD))
    rows = {"public floor": [evaluate(floor, data.test)["mse"] for data in central]}
    local = [[evaluate(fit_dp_linear(data, eps=EPS, delta=DELTA, select="fixed",
                                     seed=seed).model, data.test)["mse"]
              for seed in range(args.seeds)] for data in central]
    rows["local-only dp-linear"] = [float(np.mean(v)) for v in local]
    for colluders in (0, 1):
        runs = [federated_errors(sites, colluders=colluders, seed=seed)
                for seed in range(args.seeds)]
        rows[f"federated dp-linear, colluders {colluders}"] = \
            [float(v) for v in np.mean(runs, axis=0)]
    print(f"Test MSE (z-scored), record unit, eps {EPS:g}, H = {HORIZON}, mean of "
          f"{args.seeds} seeds")
    print(f"| model | {' | '.join(STATIONS)} |")
    print(f"|---|{'---:|' * len(STATIONS)}")
    for name, values in rows.items():
        print(f"| {name} | {' | '.join(f'{v:.4f}' for v in values)} |")
    print(json.dumps({"experiment": "two_stations", "eps": EPS, "horizon": HORIZON,
                      "seeds": args.seeds, "stations": list(STATIONS), "test_mse": rows,
                      "local_sd": [float(np.std(v, ddof=1)) for v in local]}))


if __name__ == "__main__":
    main()
