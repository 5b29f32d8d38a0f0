"""Federated dp-linear through real Flower processes (SuperLink, one SuperNode per site), and
the command line's refusals, which come before any process starts."""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest

from qpriv.cli import main
from qpriv.errors import InvalidInputError
from qpriv.federated.processes import federate
from qpriv.federated.protocol import FederatedPlan, decode_and_solve
from qpriv.federated.site import site_update
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


def test_cli_scaler_public_declares_each_sites_scaler_public(tmp_path, monkeypatch):
    """--scaler public reaches the round as the sites' own scalers declared public ('data');
    the default is the private scaler."""
    seen = []

    def fake(sites, **kwargs):
        seen.append(kwargs["scaler"])
        raise InvalidInputError("stopped before any process")

    monkeypatch.setattr("qpriv.federated.processes.federate", fake)
    a, b = write_site(tmp_path / "a.csv", seed=0), write_site(tmp_path / "b.csv", seed=1)
    for flags in (["--scaler", "public"], []):
        assert main(["federate", "--site", str(a), "--site", str(b), *flags]) == 2
    assert seen == ["data", "private"]


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
