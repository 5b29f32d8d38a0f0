"""Wall time of ``qpriv federate`` on 3 sites at H = 24 (ETTh1 cut into three spans of time),
over the central dp-linear fit of the same rows.

The federated run starts a SuperLink and three SuperNodes on this machine, runs one SecAgg+
round and one evaluation round (each stage starts a ClientApp process per site) and stops them:
process start-up, not arithmetic, is its cost. Target: under 60 s on a 2-core machine. The
last line is one JSON object with both times and their ratio.

    python benchmarks/federate.py
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import pandas as pd
from _timing import machine_facts, print_record, run_benchmark

from qpriv.federated.processes import federate
from qpriv.forecasting.datasets import locate_dataset
from qpriv.forecasting.linear import fit_dp_linear
from qpriv.forecasting.windows import load_forecasting_data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--horizon", type=int, default=24)
    parser.add_argument("--sites", type=int, default=3)
    args = parser.parse_args()
    facts = machine_facts()
    frame = pd.read_csv(locate_dataset("ETTh1", path=args.data_dir))
    with tempfile.TemporaryDirectory() as tmp:
        span = len(frame) // args.sites
        paths = []
        for i in range(args.sites):
            paths.append(Path(tmp) / f"site{i}.csv")
            frame.iloc[i * span:(i + 1) * span].to_csv(paths[-1], index=False)
        data = load_forecasting_data(csv=paths[0], horizon=args.horizon)
        tic = time.perf_counter()
        fit_dp_linear(data, eps=1.0, select="fixed", seed=0)
        central_s = time.perf_counter() - tic
        tic = time.perf_counter()
        result = federate(paths, out_dir=Path(tmp) / "run", horizon=args.horizon)
        federated_s = time.perf_counter() - tic
    print(f"{args.sites} sites of {span} rows, H = {args.horizon}: qpriv federate "
          f"{federated_s:.1f} s (target < 60 s), central dp-linear on one site {central_s:.2f} s;"
          f" federated test MSE {result['mse']:.4f} at eps {result['eps']['value']:.3g}")
    print_record("federate", {"sites": args.sites, "horizon": args.horizon,
                              "federated_s": federated_s, "central_one_site_s": central_s,
                              "ratio": federated_s / central_s, "target_s": 60.0,
                              "mse": result["mse"]}, facts)


if __name__ == "__main__":
    run_benchmark(main)
