"""One round of federated dp-linear in this process: the statistics, the decoding, refusals."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from qpriv.errors import InvalidInputError
from qpriv.federated.protocol import decode_and_solve, plan_federation
from qpriv.federated.site import (
    SiteClient,
    load_site,
    noise_share,
    site_errors,
    site_update,
    training_rows,
)
from qpriv.forecasting.linear import LinearForecaster, evaluate, public_forecaster
from qpriv.forecasting.linear_design import base_spec, kernel_from_weights, sufficient_statistics
from qpriv.forecasting.windows import load_forecasting_data
from qpriv.privacy.samplers import CHACHA, CHACHA_NOTE
from qpriv.privacy.ssp import ridge_solve

from .conftest import HORIZON, SEQ_LEN, write_site

SRC = str(Path(__file__).resolve().parents[2] / "src")

WIDE = {"clip": 10.0, "feature_clip": 50.0, "target_clip": 50.0}
"""Clips the sites' values never reach: the clipped statistics are the ridge's."""


def load(paths):
    """The sites as their processes read them (no torch)."""
    return [load_site(p, seq_len=SEQ_LEN, horizon=HORIZON) for p in paths]


def load_central(paths):
    """The same files as central dp-linear reads them (windows of float32 z-scores)."""
    return [load_forecasting_data(csv=p, seq_len=SEQ_LEN, horizon=HORIZON) for p in paths]


def noiseless_plan(datas, **changes):
    settings = {"seq_len": SEQ_LEN, "horizon": HORIZON, "period": 24, "unit": "record",
                "eps": 1.0, "delta": 1e-6, "sites": len(datas), "threshold": len(datas),
                "channels": datas[0].channels, "freq": "h",
                "max_rows": max(training_rows(d) for d in datas), "scaler": "data",
                "noise": False, **WIDE, **changes}
    return plan_federation(**settings)


def central_ridge(paths, plan, ridge):
    """The twin: the exact ridge on the union of the sites' training windows (each z-scored
    by its own training split), on the same features, without clipping."""
    features, public, outputs = plan.maps()
    a = b = 0
    for data in load_central(paths):
        sa, sb = sufficient_statistics(data.train.series.double().numpy(), features=features,
                                       public=public, outputs=outputs)
        a, b = a + sa, b + sb
    return a, b, ridge_solve(a, b, ridge=ridge)


def test_noiseless_round_is_central_ridge_to_the_quantisation_error(sites):
    datas = load(sites)
    plan = noiseless_plan(datas)
    vectors = [site_update(d, plan, rng=np.random.default_rng(0)) for d in datas]
    total = np.sum(vectors, axis=0)
    model, claim = decode_and_solve(total, plan, survivors=3)
    a, b, weights = central_ridge(sites, plan, claim.details["ridge"])
    d = a.shape[0]
    decoded_a = total[: d * (d + 1) // 2] / plan.scale
    bound = 3 / (2 * plan.scale)  # the docstring's s / (2 gamma) per entry
    assert np.abs(decoded_a - a[np.triu_indices(d)]).max() <= bound
    assert np.abs(total[d * (d + 1) // 2:] / plan.scale - b.ravel()).max() <= bound
    features, public, outputs = plan.maps()
    twin = kernel_from_weights(features=features, public=public, targets=outputs,
                               weights=weights)
    assert np.abs(model.kernel - twin).max() < 1e-4


def test_claim_meets_the_target_at_the_threshold_and_improves_with_more_survivors(sites):
    datas = load(sites)
    plan = noiseless_plan(datas, threshold=2, noise=True, scaler="private")
    vectors = [site_update(d, plan, rng=np.random.default_rng(i)) for i, d in enumerate(datas)]
    _, at_two = decode_and_solve(np.sum(vectors[:2], axis=0), plan, survivors=2)
    _, at_three = decode_and_solve(np.sum(vectors, axis=0), plan, survivors=3)
    assert at_two.value == pytest.approx(1.0, abs=0.01) and at_two.value <= 1.0
    assert at_three.value < at_two.value
    assert at_three.details["dropouts_tolerated"] == 1
    assert at_three.details["threshold"] == 2
    assert at_three.details["noise_sampler"] == CHACHA and CHACHA_NOTE in at_three.notes
    with pytest.raises(InvalidInputError, match="below the threshold"):
        decode_and_solve(vectors[0], plan, survivors=1)


def test_wraparound_is_impossible_and_clamping_is_accounted(sites):
    datas = load(sites)
    plan = noiseless_plan(datas, noise=True, scaler="private")
    assert plan.sites * 2 * plan.half_range < 2 ** 32
    worst = plan.scale * plan.max_rows * plan.row_bound()
    assert worst < plan.half_range
    vectors = [site_update(d, plan, rng=np.random.default_rng(i)) for i, d in enumerate(datas)]
    assert max(np.abs(v).max() for v in vectors) < plan.half_range


def test_a_site_with_other_columns_or_frequency_is_refused_before_computing(tmp_path, sites):
    datas = load(sites)
    plan = noiseless_plan(datas)
    other = load([write_site(tmp_path / "cols.csv", seed=5, columns=("load", "wind"))])[0]
    with pytest.raises(InvalidInputError, match="columns load, wind"):
        site_update(other, plan, rng=np.random.default_rng(0))
    daily = load([write_site(tmp_path / "daily.csv", seed=5, freq="D")])[0]
    with pytest.raises(InvalidInputError, match="frequency 'D'"):
        site_update(daily, plan, rng=np.random.default_rng(0))


def test_a_malformed_aggregate_is_rejected(sites):
    datas = load(sites)
    plan = noiseless_plan(datas)
    good = site_update(datas[0], plan, rng=np.random.default_rng(0))
    with pytest.raises(InvalidInputError, match="shape"):
        decode_and_solve(good[:-1], plan, survivors=3)
    with pytest.raises(InvalidInputError, match="out of range"):
        decode_and_solve(good + 10 * plan.half_range, plan, survivors=3)


def test_a_site_loads_and_scores_as_central_dp_linear_without_torch(sites):
    """The site's own loader and errors (NumPy alone) give what the central loader and
    evaluate give on the same file: the same split, scaler and windows, to float64 rounding."""
    site, central = load(sites)[0], load_central(sites)[0]
    assert site.channels == central.channels and site.split == central.split
    assert np.array_equal(site.train_raw, central.train_raw)
    assert np.array_equal(site.scaler.mean, central.scaler.mean)
    for split in ("train", "val", "test"):
        assert site.windows(split) == getattr(central, split).n_available
    kernel = np.random.default_rng(0).normal(size=(HORIZON, SEQ_LEN)) / SEQ_LEN
    model = LinearForecaster(kernel=kernel, spec=None, name="random")
    for split in ("val", "test"):
        mine, theirs = site_errors(kernel, site, split), evaluate(model, getattr(central, split))
        assert mine["mse"] == pytest.approx(theirs["mse"], rel=1e-12)
        assert mine["mae"] == pytest.approx(theirs["mae"], rel=1e-12)


def test_the_site_app_imports_neither_torch_nor_the_accountant():
    """Flower starts a ClientApp process per site for every SecAgg+ stage: its import path is
    kept to NumPy and pandas (the benchmark benchmarks/federate.py times the whole run)."""
    code = ("import sys, qpriv.federated.site; "
            "print(sorted(m for m in ('torch', 'dp_accounting') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ, "PYTHONPATH": SRC})
    assert out.stdout.strip() == "[]"


def test_the_claim_names_the_scaler_and_the_fixed_design(sites):
    """--scaler public: each site's scaler in the clear, named NOT covered, and all of eps on
    the noise; private: a share of eps on the scaler, inside the claim; the design fixed."""
    datas = load(sites)
    labels, spent = {}, {}
    for scaler in ("private", "data"):
        plan = noiseless_plan(datas, noise=True, scaler=scaler)
        total = np.sum([site_update(d, plan, rng=np.random.default_rng(i))
                        for i, d in enumerate(datas)], axis=0)
        _, claim = decode_and_solve(total, plan, survivors=3)
        labels[scaler], spent[scaler] = claim.details["scaler"], claim.details["eps_scaler"]
        assert claim.details["design"].startswith("fixed")
        assert claim.value == pytest.approx(1.0, rel=1e-6)
    assert "NOT covered" in labels["data"] and spent["data"] == 0.0
    assert "inside the claim" in labels["private"]
    assert spent["private"] == pytest.approx(plan.scaler_share * 1.0) and spent["private"] > 0


def test_the_update_is_the_same_from_either_loader_and_is_quantise_plus_share(sites):
    """site_update reads a site's own SiteData or the central loader's ForecastData of the same
    file alike, bit for bit; it is quantise(A, B) plus noise_share at the same generator."""
    datas = load(sites)
    site, central = datas[0], load_central(sites)[0]
    plan = noiseless_plan(datas, noise=True, scaler="data")
    mine = site_update(site, plan, rng=np.random.default_rng(7))
    assert np.array_equal(mine, site_update(central, plan, rng=np.random.default_rng(7)))
    noiseless = site_update(site, noiseless_plan(datas, scaler="data"),
                            rng=np.random.default_rng(7))
    d, k = plan.maps()[0].shape[0], plan.maps()[2].shape[1]
    share = noise_share(plan, dims=(d * (d + 1) // 2, d * k), rng=np.random.default_rng(7))
    assert np.array_equal(mine, noiseless + share) and np.abs(share).max() > 0


def test_unquantised_noiseless_round_is_central_ridge_on_the_union_to_1e_9(sites):
    """The test-only switch (``quantised=False``, never reachable from the command line): the
    sites' float statistics, summed in the clear, give exactly the ridge on the union of their
    training windows (each z-scored by its own training split, float64), at the ridge the
    noise would set: no quantisation error left to allow for."""
    datas = load(sites)
    plan = noiseless_plan(datas, quantised=False)
    total = np.sum([site_update(d, plan, rng=np.random.default_rng(0)) for d in datas], axis=0)
    model, claim = decode_and_solve(total, plan, survivors=3)
    features, public, outputs = plan.maps()
    a = b = 0
    for data in load_central(sites):
        sa, sb = sufficient_statistics(data.scaler.transform(data.train_raw), features=features,
                                       public=public, outputs=outputs)
        a, b = a + sa, b + sb
    twin = kernel_from_weights(features=features, public=public, targets=outputs,
                               weights=ridge_solve(a, b, ridge=claim.details["ridge"]))
    assert np.abs(model.kernel - twin).max() < 1e-9
    assert claim.details["ridge"] > 0  # the noise's ridge, kept: the twin is that ridge
    with pytest.raises(InvalidInputError, match="noiseless tests only"):
        noiseless_plan(datas, quantised=False, noise=True)


def test_each_site_reports_the_public_floor_on_its_own_test_windows(sites):
    """The evaluate reply carries the public forecast's test errors beside the released
    kernel's: central ``public_forecaster`` on the same file, to float64 rounding."""
    datas = load(sites)
    plan = noiseless_plan(datas)
    kernel = np.zeros((HORIZON, SEQ_LEN))
    _, _, reply = SiteClient(str(sites[0]), seed=0).evaluate([kernel], plan.to_config())
    floor = public_forecaster(seq_len=SEQ_LEN, horizon=HORIZON,
                              spec=base_spec(seq_len=SEQ_LEN, period=plan.period))
    central = evaluate(floor, load_central(sites)[0].test)
    assert reply["floor_mse"] == pytest.approx(central["mse"], rel=1e-12)
    assert reply["floor_mae"] == pytest.approx(central["mae"], rel=1e-12)
    assert reply["floor_mse"] != pytest.approx(reply["mse"], rel=1e-3)  # not the kernel's
