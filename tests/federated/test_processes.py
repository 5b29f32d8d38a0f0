"""Federated dp-linear through real Flower processes (SuperLink, one SuperNode per site), and
the command line's refusals, which come before any process starts."""

from __future__ import annotations

import numpy as np
import pytest

from qpriv.cli import main
from qpriv.federated.processes import federate
from qpriv.federated.protocol import FederatedPlan, decode_and_solve, site_update
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


def test_cli_refuses_another_frequency_and_a_single_site(tmp_path, capsys):
    a = write_site(tmp_path / "a.csv", seed=0)
    daily = write_site(tmp_path / "d.csv", seed=1, freq="D")
    assert main(["federate", "--site", str(a), "--site", str(daily), "--seq-len", "48"]) == 2
    assert "resample" in capsys.readouterr().err
    assert main(["federate", "--site", str(a)]) == 2
    assert "at least 2" in capsys.readouterr().err
