"""The capture table: how much of what the data offers dp-linear keeps, at every horizon.

For ETTh1 and ETTh2 at H in {24, 96, 336, 720} (L = 336, the full training split): the public
floor, the non-private ridge on the fixed design's features, and dp-linear (record and window
unit, eps 1 and 0.1, the design selected privately: the library's defaults) as the mean and
sd of test MSE over noise seeds, with its noiseless twin (the same fit with the noise off: the
design's cost apart from the noise's). Capture = (floor - private) / (floor - ridge). Test MSE
is z-scored over all channels; the test split is reported, never used to choose.

    python scripts/measure_dp_linear.py --seeds 5
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from qpriv.forecasting.linear import (
    default_spec,
    evaluate,
    fit_dp_linear,
    fit_ridge,
    public_forecaster,
)
from qpriv.forecasting.windows import load_forecasting_data
from qpriv.progress import work_bar

SETTINGS = [(d, h) for d in ("ETTh1", "ETTh2") for h in (24, 96, 336, 720)]
CELLS = (("record", 1.0), ("record", 0.1), ("window", 1.0))


def measure(dataset: str, horizon: int, seeds: int) -> dict:
    """One row of the table (every number a test MSE)."""
    data = load_forecasting_data(dataset, horizon=horizon)
    floor = evaluate(public_forecaster(seq_len=data.seq_len, horizon=horizon,
                                       spec=default_spec(data)), data.test)["mse"]
    ridge = evaluate(fit_ridge(data), data.test)["mse"]
    row = {"dataset": dataset, "horizon": horizon, "floor": floor, "ridge": ridge}
    for unit, eps in CELLS:
        mse = [evaluate(fit_dp_linear(data, eps=eps, unit=unit, seed=s).model,
                        data.test)["mse"] for s in range(seeds)]
        noiseless = evaluate(fit_dp_linear(data, eps=eps, unit=unit, seed=0, noise=False).model,
                             data.test)["mse"]
        key = f"{unit} eps {eps:g}"
        row[key] = {"mean": float(np.mean(mse)), "sd": float(np.std(mse, ddof=1)),
                    "noiseless": noiseless,
                    "capture": (floor - float(np.mean(mse))) / (floor - ridge)}
    return row


def markdown(rows: list[dict]) -> str:
    """The README's table."""
    head = ("| setting | floor | ridge | record eps 1 (capture) | record eps 0.1 (sd) | "
            "window eps 1 (capture) | noiseless record / window |\n"
            "|---|---|---|---|---|---|---|\n")
    lines = []
    for r in rows:
        rec, low, win = r["record eps 1"], r["record eps 0.1"], r["window eps 1"]
        lines.append(
            f"| {r['dataset']} H = {r['horizon']} | {r['floor']:.4f} | {r['ridge']:.4f} | "
            f"{rec['mean']:.4f} ({100 * rec['capture']:.0f} %) | {low['mean']:.4f} "
            f"({low['sd']:.4f}) | {win['mean']:.4f} ({100 * win['capture']:.0f} %) | "
            f"{rec['noiseless']:.4f} / {win['noiseless']:.4f} |")
    return head + "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    rows = []
    with work_bar(total=len(SETTINGS), desc="settings", unit="setting", enabled=True) as bar:
        for dataset, horizon in SETTINGS:
            rows.append(measure(dataset, horizon, args.seeds))
            bar.update()
    print(markdown(rows))
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
