"""Time of fitting dp-linear on all ETTh1 training windows, over the non-private ridge fit.

Both fits build the same sufficient statistics over every training window and channel; the
private fit adds the scaler (record unit), the clipping, the analytic-Gaussian calibration (the
accounting), the noise, the PSD repair and the solve. Best of ``--repeats`` interleaved rounds;
the last line is one JSON object with both times and their ratio.

    python benchmarks/dp_linear_fit.py --unit record
"""

from __future__ import annotations

import argparse

import torch
from _timing import (
    best_seconds_interleaved,
    dp_linear_arguments,
    machine_facts,
    print_record,
    run_benchmark,
)

from qpriv.forecasting.linear import fit_dp_linear, fit_ridge
from qpriv.forecasting.windows import load_forecasting_data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    dp_linear_arguments(parser, repeats=5)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    facts = machine_facts()
    data = load_forecasting_data(args.dataset, horizon=args.horizon, data_dir=args.data_dir)
    ridge_s, dp_s = best_seconds_interleaved(
        [lambda: fit_ridge(data),
         lambda: fit_dp_linear(data, eps=args.eps, unit=args.unit, seed=0)], args.repeats)
    print(f"{args.dataset}: {len(data.train)} training windows x {data.n_channels} channels, "
          f"L = {data.seq_len}, H = {data.horizon}; unit {args.unit}, eps {args.eps:g}")
    print(f"ridge (not private) {ridge_s:.3f} s, dp-linear {dp_s:.3f} s")
    print_record("dp_linear_fit", {"dataset": args.dataset, "unit": args.unit, "eps": args.eps,
                                   "n_windows": len(data.train), "ridge_s": ridge_s,
                                   "dp_linear_s": dp_s, "ratio": dp_s / ridge_s}, facts)


if __name__ == "__main__":
    run_benchmark(main)
