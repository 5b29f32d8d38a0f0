"""Federated dp-linear through real Flower processes (SuperLink, one SuperNode per site), and
the command line's refusals, which come before any process starts."""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest
from flwr.common import Code, FitRes, Status, ndarrays_to_parameters

from qpriv.cli import main
from qpriv.errors import InvalidInputError
from qpriv.federated.app import SumStrategy
from qpriv.federated.personal import SHRINK, decode_personal
from qpriv.federated.processes import federate
from qpriv.federated.protocol import FederatedPlan, decode_and_solve, plan_federation
from qpriv.federated.site import REFUSED, SiteClient, site_errors, site_update, training_rows
from qpriv.forecasting.artifacts import load_run

from .conftest import HORIZON, SEQ_LEN, write_site
from .test_protocol import WIDE, load


@pytest.mark.slow
def test_noiseless_federation_through_secagg_equals_the_in_process_sum(sites, tmp_path):
    """SecAgg+ carries the integers exactly: the kernel from the real processes equals the one
    decoded from the sites' summed vectors here, and so central ridge on the union of their
    training windows to the quantisation error (test_protocol)."""
    out = tmp_path / "run"
    result = federate(sites, out_dir=out, seq_len=SEQ_LEN, horizon=HORIZON, noise=False,
                      scaler="data", deadline_s=400, stage_timeout_s=120, **WIDE)
    run = load_run(out)
    plan = FederatedPlan.from_config(result["federated"]["plan"])
    datas = load(sites)
    total = np.sum([site_update(d, plan, rng=np.random.default_rng(0)) for d in datas], axis=0)
    here, claim = decode_and_solve(total, plan, survivors=3)
    assert np.abs(run.model.kernel - here.kernel).max() < 1e-12
    assert result["eps"]["survivors"] == 3 and result["eps"]["threshold"] == 3
    assert len(result["federated"]["sites"]) == 3
    assert claim.value == result["eps"]["value"]
    assert np.isfinite(result["mse"])


def test_cli_refuses_sites_with_other_columns_before_starting(tmp_path, capsys):
    a = write_site(tmp_path / "a.csv", seed=0)
    b = write_site(tmp_path / "b.csv", seed=1, columns=("load", "wind"))
    out = tmp_path / "run"
    code = main(["federate", "--site", str(a), "--site", str(b), "--seq-len", "48",
                 "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "same columns" in err[0]
    assert not out.exists()


def reaching_the_round(tmp_path, monkeypatch, key: str, runs: list[list[str]]) -> list:
    """What ``federate`` receives as ``key`` for each of the command lines' extra ``runs``
    (stopped before any process starts)."""
    seen = []

    def fake(sites, **kwargs):
        seen.append(kwargs[key])
        raise InvalidInputError("stopped before any process")

    monkeypatch.setattr("qpriv.federated.processes.federate", fake)
    a, b = write_site(tmp_path / "a.csv", seed=0), write_site(tmp_path / "b.csv", seed=1)
    for flags in runs:
        assert main(["federate", "--site", str(a), "--site", str(b), *flags]) == 2
    return seen


def test_cli_scaler_public_declares_each_sites_scaler_public(tmp_path, monkeypatch):
    """--scaler public reaches the round as the sites' own scalers declared public ('data');
    the default is the private scaler."""
    assert reaching_the_round(tmp_path, monkeypatch, "scaler",
                              [["--scaler", "public"], []]) == ["data", "private"]


def test_cli_refuses_another_frequency_and_a_single_site(tmp_path, capsys):
    a = write_site(tmp_path / "a.csv", seed=0)
    daily = write_site(tmp_path / "d.csv", seed=1, freq="D")
    assert main(["federate", "--site", str(a), "--site", str(daily), "--seq-len", "48"]) == 2
    assert "resample" in capsys.readouterr().err
    assert main(["federate", "--site", str(a)]) == 2
    assert "at least 2" in capsys.readouterr().err


def _kill_when_masking(fed, victims: list[int], *, starts: int = 3) -> threading.Thread:
    """A thread that kills the SuperNodes ``victims`` (by their index) once each has started
    its ``starts``-th ClientApp (3: the masked-vector stage of SecAgg+, after it shared its
    keys, before its masked vector arrives; 1: a FedAvg site's first local training)."""
    def watch() -> None:
        deadline = time.monotonic() + 300
        pending = set(victims)
        while pending and time.monotonic() < deadline:
            for index in list(pending):
                log = fed.home / f"supernode-{index}.log"
                if log.exists() and log.read_text(errors="replace").count(
                        "Start `flwr-clientapp`") >= starts:
                    os.killpg(fed.processes[1 + index].pid, signal.SIGKILL)
                    pending.discard(index)
            time.sleep(0.05)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


@pytest.mark.slow
@pytest.mark.parametrize("killed", [1, 2])
def test_a_supernode_killed_mid_round(tmp_path, killed):
    """4 sites, threshold 3: one killed still gives a model whose claim is for 3 survivors;
    two killed release nothing (one line) and write nothing."""
    paths = [write_site(tmp_path / f"s{i}.csv", seed=i) for i in range(4)]
    out = tmp_path / "run"
    watchers = []
    kwargs = {"out_dir": out, "seq_len": SEQ_LEN, "horizon": HORIZON, "threshold": 3,
              "deadline_s": 500, "stage_timeout_s": 60,
              "on_started": lambda fed: watchers.append(
                  _kill_when_masking(fed, list(range(killed))))}
    if killed == 1:
        result = federate(paths, **kwargs)
        claim = result["eps"]
        assert claim["survivors"] == 3 and claim["threshold"] == 3 and claim["sites"] == 4
        assert claim["value"] == pytest.approx(1.0, abs=0.01)  # sized for 3 honest shares
        assert load_run(out).model.kernel.shape == (HORIZON, SEQ_LEN)
    else:
        with pytest.raises(InvalidInputError, match="nothing is released") as info:
            federate(paths, **kwargs)
        assert "\n" not in str(info.value)
        assert not out.exists()


def test_a_site_that_refuses_sends_zeros_and_its_reason(tmp_path, sites):
    """Inside its ClientApp a site whose columns differ from the plan's sends zeros of the
    round's size, no statistics, and the one-line reason as its fit metric; the server's
    strategy turns that reason into the run's error and releases nothing."""
    datas = load(sites)
    plan = plan_federation(seq_len=SEQ_LEN, horizon=HORIZON, period=24, unit="record",
                           eps=1.0, delta=1e-6, sites=3, threshold=3,
                           channels=datas[0].channels, freq="h",
                           max_rows=max(training_rows(d) for d in datas))
    other = write_site(tmp_path / "other.csv", seed=9, columns=("load", "wind"))
    vectors, _, metrics = SiteClient(str(other), seed=0).fit([], plan.to_config())
    assert "columns load, wind" in metrics[REFUSED] and "\n" not in metrics[REFUSED]
    assert vectors[0].shape == site_update(datas[0], plan, rng=np.random.default_rng(0)).shape
    assert not vectors[0].any()
    honest = SiteClient(str(sites[0]), seed=0).fit([], plan.to_config())
    assert honest[2] == {} and honest[0][0].any()
    strategy = SumStrategy(plan)
    replies = [(None, FitRes(Status(Code.OK, ""), ndarrays_to_parameters(v), 1, m))
               for v, _, m in (honest, honest, (vectors, 1, metrics))]
    assert strategy.aggregate_fit(1, replies, []) == (None, {})
    assert strategy.outcome == {"error": metrics[REFUSED]}


@pytest.mark.slow
def test_a_site_refusing_inside_its_clientapp_is_one_line_and_nothing_written(
        tmp_path, sites, monkeypatch, capsys):
    """The command's own pre-check passes (the sites agree), but the plan declares a bound on
    a site's rows that every site exceeds: each refuses inside its ClientApp, and the command
    prints the sites' reason in one line, exits 2 and writes nothing."""
    real = plan_federation

    def tight(**kwargs):
        return real(**{**kwargs, "max_rows": 8})

    monkeypatch.setattr("qpriv.federated.processes.plan_federation", tight)
    out = tmp_path / "run"
    argv = ["federate", *[arg for site in sites for arg in ("--site", str(site))],
            "--seq-len", str(SEQ_LEN), "--out", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "above the plan's bound 8" in err[0]
    assert not out.exists()


@pytest.mark.slow
def test_a_personal_round_through_secagg_gives_each_site_its_own_kernel(sites, tmp_path):
    """--personal through the real processes: each SuperNode gets its slot, the pooled kernel
    and each site's kernel equal those decoded from the sites' summed vectors here, each site
    evaluates its own kernel, and the folder loads (the pooled kernel) and holds them all."""
    out = tmp_path / "run"
    result = federate(sites, out_dir=out, seq_len=SEQ_LEN, horizon=HORIZON, noise=False,
                      scaler="data", deadline_s=400, stage_timeout_s=120, personal=True,
                      **WIDE)
    plan = FederatedPlan.from_config(result["federated"]["plan"])
    datas = load(sites)
    total = np.sum([site_update(d, plan, rng=np.random.default_rng(0), slot=i)
                    for i, d in enumerate(datas)], axis=0)
    here = decode_personal(total, plan, survivors=3)
    assert np.abs(load_run(out).model.kernel - here.pooled.kernel).max() < 1e-12
    with np.load(out / "linear.npz") as stored:
        assert list(stored["site_slots"]) == [0, 1, 2]
        for slot, kernel in zip(stored["site_slots"], stored["site_kernels"], strict=True):
            assert np.abs(kernel - here.sites[int(slot)].kernel).max() < 1e-12
    reports = {site["slot"]: site for site in result["federated"]["sites"]}
    for slot, data in enumerate(datas):
        assert reports[slot]["mse"] == pytest.approx(
            site_errors(here.sites[slot].kernel, data, "test")["mse"], rel=1e-9)
    assert result["eps"]["design"].startswith("personal")
    assert result["federated"]["personal"]["shrink"] == SHRINK


def test_cli_personal_reaches_the_round(tmp_path, monkeypatch):
    """--personal asks the round for one kernel per site; the default is one kernel."""
    assert reaching_the_round(tmp_path, monkeypatch, "personal",
                              [["--personal"], []]) == [True, False]
