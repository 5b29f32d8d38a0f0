"""FedAvg over sites: ldpt-fedavg against central LDPT, the window-weighted average and the
clipped DP-FedAvg aggregate through the real Flower processes, the claims, the refusals."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from qpriv.cli import main
from qpriv.errors import InvalidInputError
from qpriv.federated.fedavg import (
    DP_FEDAVG,
    LDPT_FEDAVG,
    dp_fedavg_claim,
    ldpt_fedavg_claims,
    plan_fedavg,
)
from qpriv.federated.fedavg_results import pooled_scaler, write_fedavg_release
from qpriv.federated.fedavg_run import federate_fedavg
from qpriv.federated.train_site import (
    evaluate_site,
    initial_model,
    load_site_data,
    local_train,
    model_parameters,
)
from qpriv.forecasting.artifacts import load_run
from qpriv.forecasting.run import run_forecast
from qpriv.privacy.claims import PrivacyClaim
from qpriv.privacy.composition import basic_composition
from qpriv.privacy.site_dpfedavg import site_epsilon

from .conftest import HORIZON, SEQ_LEN, write_site
from .test_processes import _kill_when_masking

TINY = {"d_model": 8, "n_heads": 2, "d_ff": 16, "dim": 4, "n_shots": 32}
CHANNELS = ("load", "temp")


def _plan(method: str = LDPT_FEDAVG, **changes):
    settings = {"method": method, "seq_len": SEQ_LEN, "horizon": HORIZON, "period": 24,
                "channels": CHANNELS, "freq": "h", "sites": 1, "rounds": 1,
                "local_epochs": 1, "eps": 0.5, "max_train_windows": 64,
                "max_eval_windows": 32, "overrides": TINY if method == LDPT_FEDAVG else None}
    return plan_fedavg(**{**settings, **changes})


def test_one_site_one_round_is_the_central_ldpt_run(tmp_path):
    """A federation of one site and one round trains exactly what central ldpt trains on the
    same file with the same settings and seed (the feature-path noise included): the same
    weights, the same test MSE."""
    site = write_site(tmp_path / "a.csv", seed=0)
    central = run_forecast(csv=site, method="ldpt", eps=0.5, epochs=1, seed=7,
                           seq_len=SEQ_LEN, horizon=HORIZON, max_train_windows=64,
                           max_eval_windows=32, overrides=TINY, rigorous=False,
                           progress=False, out_dir=tmp_path / "central")
    plan = _plan()
    data = load_site_data(str(site), plan)
    weights, _ = local_train(data, plan, model_parameters(initial_model(plan, seed=7)),
                             seed=7)
    state = load_run(tmp_path / "central").model.state_dict()
    assert max(float(np.abs(state[k].numpy() - v).max()) for k, v in weights.items()) == 0.0
    assert evaluate_site(data, plan, weights, seed=7)["mse"] == pytest.approx(central.mse,
                                                                            rel=1e-12)


def test_ldpt_fedavg_claims_are_central_ldpts_per_site_labelled():
    plan = _plan(sites=3, rounds=4, local_epochs=2)
    part = ldpt_fedavg_claims(plan, secret=True)
    per_pass = PrivacyClaim.from_json(part["eps_per_pass"])
    basic = PrivacyClaim.from_json(part["eps_basic"])
    assert per_pass.value == 0.5 and str(per_pass.unit) == "token"
    assert str(per_pass.accounting) == "paper" and "not the trained weights" in per_pass.covers
    assert basic.value == pytest.approx(basic_composition(0.5, epochs=8))  # 4 rounds x 2
    assert basic.details["sites"] == 3 and basic.details["rounds"] == 4
    notes = " ".join(per_pass.notes)
    assert "in the clear" in notes and "not covered" in notes and "each site" in notes


def test_dp_fedavg_claim_is_global_dp_at_the_site_unit():
    plan = _plan(DP_FEDAVG, seq_len=168, sites=8, rounds=5, eps=1.0)
    claim = dp_fedavg_claim(plan, secret=True)
    assert str(claim.unit) == "site" and str(claim.kind) == "global (eps, delta)-DP"
    assert str(claim.accounting) == "rigorous" and claim.delta == 1e-6
    assert claim.value == pytest.approx(1.0, rel=1e-6) and claim.value <= 1.0
    assert claim.value == site_epsilon(noise_multiplier=plan.noise_multiplier, rounds=5,
                                       delta=1e-6)
    assert claim.details["noise_std"] == pytest.approx(plan.noise_multiplier * 0.01 / 8)
    assert "trusted" in " ".join(claim.notes)


def test_plan_refuses_what_the_method_does_not_take():
    with pytest.raises(InvalidInputError, match="clip"):
        _plan(clip=0.5)
    with pytest.raises(InvalidInputError, match="overrides"):
        _plan(DP_FEDAVG, seq_len=168, overrides={"d_model": 8})
    with pytest.raises(InvalidInputError, match="seq_len"):
        _plan(DP_FEDAVG, overrides=None)  # L = 48 is too short for the linear features


@pytest.mark.parametrize("flags, words", [
    (["--unit", "site"], "dp-fedavg"),
    (["--method", "ldpt-fedavg", "--delta", "1e-5"], "leave"),
    (["--method", "dp-fedavg", "--unit", "record"], "unit site"),
    (["--budget", "tiny"], "FedAvg"),
    (["--method", "ldpt-fedavg", "--personal"], "--personal is federated dp-linear's"),
    (["--method", "dp-fedavg", "--unit", "site", "--threshold", "2"], "--threshold"),
    (["--method", "dp-fedavg", "--unit", "site", "--colluders", "1"], "--colluders"),
    (["--method", "dp-fedavg", "--unit", "site", "--scaler", "public"], "--scaler"),
])
def test_cli_refuses_mismatched_flags_before_starting(tmp_path, capsys, flags, words):
    a, b = write_site(tmp_path / "a.csv", seed=0), write_site(tmp_path / "b.csv", seed=1)
    out = tmp_path / "run"
    code = main(["federate", "--site", str(a), "--site", str(b), *flags, "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and words in err[0]
    assert not out.exists()


def _weighted_mean(parts: list[tuple[dict, float]]) -> dict:
    total = sum(w for _, w in parts)
    return {k: sum(p[k].astype(np.float64) * w for p, w in parts) / total for k in parts[0][0]}


@pytest.mark.slow
def test_ldpt_fedavg_through_the_processes_is_the_window_weighted_mean(tmp_path):
    """Two sites of different sizes, one round: the released weights are the window-weighted
    mean of the weights each site trains from the server's initial model (computed here in
    one process with the same seeds); the folder loads, and its report shows the sites."""
    sites = [write_site(tmp_path / "s0.csv", seed=0, rows=600),
             write_site(tmp_path / "s1.csv", seed=1, rows=900)]
    out = tmp_path / "run"
    result = federate_fedavg(sites, method=LDPT_FEDAVG, out_dir=out, rounds=1, eps=0.5,
                             seq_len=SEQ_LEN, horizon=HORIZON, max_train_windows=None,
                             max_eval_windows=32, overrides=TINY, seed=7, site_seeds=[3, 4],
                             deadline_s=500)
    plan = _plan(sites=2, max_train_windows=None)
    start = model_parameters(initial_model(plan, seed=7))
    parts = []
    for site, seed in zip(sites, (3, 4), strict=True):
        data = load_site_data(str(site), plan)
        parts.append((local_train(data, plan, start, seed=seed)[0], len(data.train)))
    assert parts[0][1] != parts[1][1]
    expected = _weighted_mean(parts)
    run = load_run(out)
    state = run.model.state_dict()
    assert max(float(np.abs(state[k].double().numpy() - v).max())
               for k, v in expected.items()) < 1e-6
    assert result["windows"]["train"] == parts[0][1] + parts[1][1]
    assert result["eps_per_pass"]["value"] == 0.5 and len(result["federated"]["sites"]) == 2
    assert run.forecast(sites[0]).shape[0] == HORIZON
    assert main(["report", str(out)]) == 0  # a released model: no data to score it on
    page = (out / "report.html").read_text()
    assert "Sites (federated)" in page and "ldpt-fedavg: 2 sites" in page


@pytest.mark.slow
def test_dp_fedavg_through_the_processes_clips_and_averages(tmp_path):
    """Three sites, one round, the server's noise off (test switch): the released weights are
    the initial ones plus the uniform mean of each site's update clipped to C, as Flower's
    wrapper clips; with the noise on the claim is the calibrated site-level eps."""
    sites = [write_site(tmp_path / f"s{i}.csv", seed=i) for i in range(3)]
    clip = 1e-5  # below every site's update norm: each is scaled down to C
    kwargs = {"method": DP_FEDAVG, "rounds": 1, "eps": 1.0, "seq_len": 168,
              "horizon": HORIZON, "max_train_windows": 64, "max_eval_windows": 32,
              "clip": clip, "seed": 7, "site_seeds": [3, 4, 5], "deadline_s": 500}
    result = federate_fedavg(sites, out_dir=tmp_path / "run", noise=False, **kwargs)
    plan = _plan(DP_FEDAVG, seq_len=168, sites=3, eps=1.0, clip=clip)
    start = model_parameters(initial_model(plan, seed=7))
    updates = []
    for site, seed in zip(sites, (3, 4, 5), strict=True):
        trained = local_train(load_site_data(str(site), plan), plan, start, seed=seed)[0]
        update = trained["weight"].astype(np.float64) - start["weight"]
        assert np.linalg.norm(update) > clip
        updates.append(update * clip / np.linalg.norm(update))
    expected = start["weight"] + np.mean(updates, axis=0)
    kernel = load_run(tmp_path / "run").model.kernel
    model = initial_model(plan, seed=7)
    with torch.no_grad():
        model.weight.copy_(torch.as_tensor(expected, dtype=torch.float32))
    assert np.abs(kernel - model.forecaster(name="x", details={}).kernel).max() < 1e-6
    assert result["eps"]["unit"] == "site" and result["eps"]["noise"] is False
    noisy = federate_fedavg(sites, out_dir=None, **kwargs)
    assert noisy["eps"]["value"] == pytest.approx(1.0, rel=1e-6)
    assert noisy["mse"] != result["mse"]


def test_a_dp_fedavg_folder_loads_forecasts_and_reports_its_sites(tmp_path):
    """The released linear folder of dp-fedavg, written without processes: load_run reads
    its kernel, forecasts new data, and qpriv report shows the sites and the site claim."""
    sites = [write_site(tmp_path / f"s{i}.csv", seed=i) for i in range(2)]
    plan = _plan(DP_FEDAVG, seq_len=168, sites=2, eps=1.0)
    weights = model_parameters(initial_model(plan, seed=0))
    reports = []
    for path in sites:
        data = load_site_data(str(path), plan)
        reports.append({
            "site": data.dataset, "first": data.dates[0].isoformat(),
            "last": data.dates[-1].isoformat(), "date_column": "date", "freq": "h",
            **evaluate_site(data, plan, weights, seed=0), "train_windows": len(data.train),
            "val_windows": len(data.val), "test_windows": len(data.test),
            "rows": len(data.dates), "scaler_rows": 420, "scaler_mean": [0.0, 0.0],
            "scaler_std": [1.0, 1.0]})
    out = tmp_path / "run"
    out.mkdir()
    result = write_fedavg_release(out, plan=plan, weights=weights, sites=reports, seed=None)
    pooled = sum(r["mse"] * r["test_windows"] for r in reports) / sum(
        r["test_windows"] for r in reports)
    assert result["mse"] == pytest.approx(pooled)
    run = load_run(out)
    assert run.model.kernel.shape == (HORIZON, 168)
    assert run.forecast(sites[0]).shape == (HORIZON, 2)
    assert PrivacyClaim.from_json(result["eps"]).unit.value == "site"
    assert main(["report", str(out)]) == 0
    page = (out / "report.html").read_text()
    assert "Sites (federated)" in page and "dp-fedavg: 2 sites" in page and "s1" in page


def test_the_pooled_scaler_is_the_union_of_the_sites():
    rng = np.random.default_rng(0)
    parts = [rng.normal(loc, scale, size=(rows, 3))
             for loc, scale, rows in ((0.0, 1.0, 50), (5.0, 2.0, 150), (-1.0, 0.5, 80))]
    sites = [{"scaler_rows": len(p), "scaler_mean": p.mean(axis=0).tolist(),
              "scaler_std": p.std(axis=0).tolist()} for p in parts]
    union = np.concatenate(parts)
    scaler = pooled_scaler(sites)
    assert np.allclose(scaler["mean"], union.mean(axis=0), atol=1e-12)
    assert np.allclose(scaler["std"], union.std(axis=0), atol=1e-12)


@pytest.mark.slow
def test_a_dp_fedavg_site_killed_mid_round_releases_nothing(tmp_path):
    """The accountant counts every site in every round: a SuperNode killed during its first
    local training stops the run with one line, and nothing is written."""
    sites = [write_site(tmp_path / f"s{i}.csv", seed=i) for i in range(3)]
    out = tmp_path / "run"
    with pytest.raises(InvalidInputError, match="nothing is released") as info:
        federate_fedavg(sites, method=DP_FEDAVG, out_dir=out, rounds=2, eps=1.0, seq_len=168,
                        horizon=HORIZON, max_train_windows=64, max_eval_windows=32,
                        deadline_s=400, stage_timeout_s=40,
                        on_started=lambda fed: _kill_when_masking(fed, [0], starts=1))
    assert "\n" not in str(info.value) and "2 of 3 sites answered" in str(info.value)
    assert not out.exists()
