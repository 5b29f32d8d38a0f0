"""Federated dp-linear against central dp-linear at the same eps: test MSE over noise seeds.

ETTh1 at H = 24 (L = 336), record unit, eps 1, delta 1e-6. Central: ``fit_dp_linear`` on the
ETT-hourly training split with the fixed design (``select='fixed'``: the federated round
cannot select privately yet, so the comparison holds the design fixed on both sides; the
default private design selection is not compared). Federated: the same training rows cut by
time into ``--sites`` contiguous spans, one site each (its training split is its whole span,
its own private scaler), run through the protocol's functions in this process
(``site_update`` at each site, their integer sum, ``decode_and_solve``); the real processes
carry that sum exactly (the noiseless test of tests/federated). Both kernels are scored on
ETTh1's one test split, z-scored by the central loader's scaler (the kernel is
affine-equivariant, so the units do not favour either).

The federated design differs from central only where federation must: the windows that cross
a span's border are lost, each site clips in its own private scaler's units, and the noise is
Skellam on the quantised statistics (its integer sensitivity, delta less the clamping share)
instead of Gaussian. The table prints each side's mean and standard error over the seeds and
the relative gap with its 95 % interval; the last line is JSON.

    python scripts/federated_vs_central.py --seeds 30
"""

from __future__ import annotations

import argparse
import itertools
import json
import math

import numpy as np

from qpriv.federated.protocol import decode_and_solve, plan_federation
from qpriv.federated.site import SiteData, site_update, training_rows
from qpriv.forecasting.csv_input import series_frequency
from qpriv.forecasting.linear import evaluate, fit_dp_linear
from qpriv.forecasting.series import SplitRows, ZScoreScaler
from qpriv.forecasting.windows import ForecastData, load_forecasting_data

EPS, DELTA, HORIZON = 1.0, 1e-6, 24


def time_sites(data: ForecastData, sites: int) -> list[SiteData]:
    """The central training rows cut into ``sites`` contiguous spans, one site each."""
    raw, dates = data.train_raw, data.dates[: len(data.train_raw)]
    edges = np.linspace(0, len(raw), sites + 1).astype(int)
    out = []
    for start, stop in itertools.pairwise(edges):
        values, rows = raw[start:stop], (0, int(stop - start))
        out.append(SiteData(dataset=f"rows {start}-{stop}", channels=data.channels,
                            dates=dates[start:stop], values=values,
                            split=SplitRows(train=rows, val=rows, test=rows),
                            scaler=ZScoreScaler.fit(values), seq_len=data.seq_len,
                            horizon=data.horizon))
    return out


def federated_mse(data: ForecastData, sites: list[SiteData], seed: int) -> tuple[float, float]:
    """(test MSE, claimed eps) of one federated round with noise seed ``seed``."""
    plan = plan_federation(seq_len=data.seq_len, horizon=data.horizon, period=24,
                           unit="record", eps=EPS, delta=DELTA, sites=len(sites),
                           threshold=len(sites), channels=data.channels,
                           freq=series_frequency(sites[0].dates) or "uneven",
                           max_rows=1 << (max(map(training_rows, sites)) - 1).bit_length())
    total = np.sum([site_update(site, plan, rng=np.random.default_rng([seed, i]))
                    for i, site in enumerate(sites)], axis=0)
    model, claim = decode_and_solve(total, plan, survivors=len(sites))
    return evaluate(model, data.test)["mse"], claim.value


def summary(values: list[float]) -> tuple[float, float]:
    """(mean, standard error)."""
    arr = np.asarray(values)
    return float(arr.mean()), float(arr.std(ddof=1) / math.sqrt(len(arr)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=30)
    parser.add_argument("--sites", type=int, default=3)
    parser.add_argument("--data-dir", default=None)
    args = parser.parse_args()
    data = load_forecasting_data("ETTh1", horizon=HORIZON, data_dir=args.data_dir)
    sites = time_sites(data, args.sites)
    central, federated, eps = [], [], []
    for seed in range(args.seeds):
        model, _ = fit_dp_linear(data, eps=EPS, delta=DELTA, select="fixed", seed=seed)
        central.append(evaluate(model, data.test)["mse"])
        mse, value = federated_mse(data, sites, seed)
        federated.append(mse)
        eps.append(value)
    (c_mean, c_se), (f_mean, f_se) = summary(central), summary(federated)
    gap = f_mean / c_mean - 1
    gap_se = math.hypot(f_se / c_mean, f_mean * c_se / c_mean ** 2)  # delta method
    print(f"ETTh1 H={HORIZON}, record unit, eps {EPS:g}, fixed design, {args.seeds} seeds; "
          f"federated over {args.sites} sites cut by time (claimed eps {max(eps):.4g})")
    for name, values, mean, se in (("central", central, c_mean, c_se),
                                   ("federated", federated, f_mean, f_se)):
        print(f"  {name:9} dp-linear  test MSE mean {mean:.5f} (se {se:.5f}), sd "
              f"{np.std(values, ddof=1):.5f}, range {min(values):.5f} to {max(values):.5f}")
    print(f"  federated / central - 1 = {100 * gap:+.2f} % (95 % interval "
          f"{100 * (gap - 1.96 * gap_se):+.2f} % to {100 * (gap + 1.96 * gap_se):+.2f} %)")
    print(json.dumps({"experiment": "federated_vs_central", "dataset": "ETTh1",
                      "horizon": HORIZON, "eps": EPS, "sites": args.sites,
                      "seeds": args.seeds, "central_mse": c_mean, "central_se": c_se,
                      "central_sd": float(np.std(central, ddof=1)),
                      "federated_sd": float(np.std(federated, ddof=1)),
                      "federated_mse": f_mean, "federated_se": f_se,
                      "relative_gap": gap, "relative_gap_se": gap_se,
                      "federated_eps": max(eps)}))


if __name__ == "__main__":
    main()
