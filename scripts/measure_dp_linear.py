"""Validation and test MSE of the public floor, the non-private ridge, dp-linear and
dpsgd-linear (DP-SGD on dp-linear's model, window unit only).

Mean over noise seeds, ETTh1 (or --dataset), H = 24, L = 336, the full training split; every
number in z-scored units over all channels. Hyper-parameters are the library defaults (chosen
on the validation split); the test columns are reported, never used to choose.

    python scripts/measure_dp_linear.py --seeds 5
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from qpriv.forecasting.linear import evaluate, fit_dp_linear, fit_ridge, public_forecaster
from qpriv.forecasting.linear_dpsgd import fit_dpsgd_linear
from qpriv.forecasting.windows import load_forecasting_data
from qpriv.threads import torch_threads


def _row(name: str, fits: list, data) -> dict:
    """The validation and test MSE of ``fits`` (one model, or one per noise seed), averaged."""
    return {"model": name,
            "val": float(np.mean([evaluate(m, data.val)["mse"] for m in fits])),
            "test": float(np.mean([evaluate(m, data.test)["mse"] for m in fits]))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="ETTh1")
    parser.add_argument("--horizon", type=int, default=24)
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    data = load_forecasting_data(args.dataset, horizon=args.horizon)
    rows = [_row("public", [public_forecaster(seq_len=data.seq_len, horizon=data.horizon)],
                 data),
            _row("ridge (not private)", [fit_ridge(data)], data)]
    for unit, eps in (("record", 1.0), ("record", 0.1), ("window", 1.0), ("window", 0.1)):
        for scaler in ("private", "data"):
            fits = [fit_dp_linear(data, eps=eps, unit=unit, seed=s, scaler=scaler).model
                    for s in range(args.seeds)]
            rows.append(_row(f"dp-linear {unit} eps={eps:g} scaler={scaler}", fits, data))
    for eps in (1.0, 0.1):  # DP-SGD bounds a record's effect only per window
        with torch_threads(1):
            fits = [fit_dpsgd_linear(data, eps=eps, seed=s)[0] for s in range(args.seeds)]
        rows.append(_row(f"dpsgd-linear window eps={eps:g}", fits, data))
    for row in rows:
        print(f"{row['model']:<44} val {row['val']:.4f}  test {row['test']:.4f}")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
