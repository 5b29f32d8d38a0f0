"""`qpriv attack mia` and `qpriv audit run`: JSON contracts, tables, one-line refusals."""

from __future__ import annotations

import json
import shutil

import pytest

from qpriv.cli import main


def _last_json(capsys) -> dict:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_attack_mia_json(capsys, ldpt_run_dir):
    assert main(["attack", "mia", str(ldpt_run_dir), "--n", "32", "--seed", "3", "--json"]) == 0
    payload = _last_json(capsys)
    attack = payload["attack"]
    assert attack["n_members"] == attack["n_nonmembers"] == 32 and attack["folds"] == 5
    for key in ("accuracy", "auc", "loss_gap", "member_loss_mean", "nonmember_loss_mean"):
        assert isinstance(attack[key], float), key
    assert [t["target_fpr"] for t in attack["tpr_at_fpr"]] == [0.01, 0.001]
    assert payload["eps_per_pass"]["accounting"] == "paper"


def test_attack_mia_table(capsys, ldpt_run_dir):
    assert main(["attack", "mia", str(ldpt_run_dir), "--n", "32"]) == 0
    # the lines wrap at the table width after the run's path, whose length is the machine's
    out = " ".join(capsys.readouterr().out.split())
    assert "32 training vs 32 test windows" in out
    assert "local eps-QDP per pass, accounting=paper" in out
    assert "TPR at 0.001 FPR" in out and "below resolution" in out
    # what the numbers are: one attack's success over two periods, not a guarantee
    assert "protocol: members: the run's training windows" in out
    assert "not a privacy guarantee" in out


def test_audit_run_json_and_table(capsys, ldpt_run_dir):
    argv = ["audit", "run", str(ldpt_run_dir), "--windows", "16", "--pairs", "100",
            "--no-discover"]
    assert main([*argv, "--json"]) == 0
    payload = _last_json(capsys)
    assert [a["number"] for a in payload["audits"]] == [1, 2, 3, 4, 5, 6]
    assert [a["passed"] for a in payload["audits"]] == [True] * 4 + [None, True]
    assert payload["audits"][4]["status"] == "not applicable"
    assert payload["failed"] == [] and payload["accounting"] == "paper"
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.count("PASS") == 5 and "fidelity tracks eps (Table 7)" in out
    assert "not applicable" in out
    assert "(paper 0.617)" in out


def test_audit_run_compare(capsys, ldpt_run_dir, tiny_ldpt_run):
    argv = ["audit", "run", str(ldpt_run_dir), "--windows", "16", "--pairs", "100",
            "--compare", str(tiny_ldpt_run(5.0)), "--json"]
    assert main(argv) in (0, 1)
    trend = _last_json(capsys)["audits"][4]
    assert [r["eps_s"] for r in trend["values"]["rows"]] == [0.1, 5.0]
    assert trend["values"]["mode"].startswith("2 runs trained at their own eps")


def test_a_failed_audit_exits_1(capsys, ldpt_run_dir, tmp_path):
    run = shutil.copytree(ldpt_run_dir, tmp_path / "run")
    result = json.loads((run / "result.json").read_text())
    result["eps_basic"]["value"] = 3.0
    (run / "result.json").write_text(json.dumps(result))
    assert main(["audit", "run", str(run), "--windows", "8", "--pairs", "50", "--json"]) == 1
    assert _last_json(capsys)["failed"] == [3]


@pytest.mark.parametrize("command", [["attack", "mia"], ["audit", "run"]])
def test_an_unfinished_run_is_refused_in_one_line(capsys, ldpt_run_dir, tmp_path, command):
    run = shutil.copytree(ldpt_run_dir, tmp_path / "run")
    (run / "result.json").unlink()
    assert main([*command, str(run)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "not a finished run" in err and "--resume" in err


@pytest.mark.parametrize(
    ("argv", "needle"),
    [(["attack", "mia", "/nonexistent/run"], "does not exist"),
     (["audit", "run", "/nonexistent/run"], "does not exist"),
     (["attack", "mia", "RUN", "--n", "0"], "positive integer"),
     (["audit", "run", "RUN", "--ladder", "0.1"], "--ladder 0.1 needs at least two distinct eps"),
     (["audit", "run", "RUN", "--ladder", "0.1", "0"],
      "error: --ladder holds eps = 0; each eps on the ladder must be a number in (0, 700]"),
     (["attack", "mia"], "RUN_DIR")],
)
def test_bad_input_exits_2(capsys, ldpt_run_dir, argv, needle):
    argv = [str(ldpt_run_dir) if a == "RUN" else a for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err


@pytest.fixture(scope="module")
def linear_run_dir(tmp_path_factory):
    """A dp-linear run (record eps 1) on a generated hourly series: seconds, no ETT needed."""
    import numpy as np
    import pandas as pd

    folder = tmp_path_factory.mktemp("linear")
    steps = np.arange(3000)
    rng = np.random.default_rng(3)
    pd.DataFrame({
        "date": pd.date_range("2021-01-01", periods=3000, freq="h").strftime("%Y-%m-%d %H:%M"),
        "a": np.sin(2 * np.pi * steps / 24) + 0.3 * rng.standard_normal(3000),
        "b": np.cos(2 * np.pi * steps / 24) + 0.3 * rng.standard_normal(3000),
    }).to_csv(folder / "series.csv", index=False)
    out = folder / "run"
    assert main(["train", "--csv", str(folder / "series.csv"), "--method", "dp-linear",
                 "--eps", "1", "--out", str(out), "--quiet"]) == 0
    return out


def test_attack_mia_reads_a_dp_linear_run(capsys, linear_run_dir):
    """Issue 42, item 3: the recommended model is checked by the attack that checks the others
    (it was refused: "this reads runs of the LDPT backbone")."""
    assert main(["attack", "mia", str(linear_run_dir), "--n", "64", "--json"]) == 0
    payload = _last_json(capsys)
    assert payload["method"] == "dp-linear" and payload["eps"]["unit"] == "record"
    assert payload["attack"]["n_members"] == payload["attack"]["n_nonmembers"] == 64
    assert not any("not for the trained weights" in note for note in payload["notes"])
    # the attack's losses are the kernel's: over every test window they average to the run's
    # own test MSE, computed by the fit's evaluation
    import numpy as np

    from qpriv.audits.mia import window_losses
    from qpriv.forecasting.artifacts import load_run

    run = load_run(linear_run_dir)
    test = run.data().test
    losses = window_losses(run, test, index=np.arange(len(test)), seed=0)
    assert losses.mean() == pytest.approx(run.result.raw["mse"], rel=1e-9)


def test_the_audits_say_why_they_do_not_apply_to_a_linear_run(capsys, linear_run_dir):
    """Issue 42, item 3: not applicable, with the reason, instead of a refusal."""
    assert main(["audit", "run", str(linear_run_dir), "--json"]) == 0
    audits = _last_json(capsys)["audits"]
    assert [a["status"] for a in audits] == ["not applicable"] * 6
    assert "no quantum feature path" in audits[0]["detail"]
    for argv in ([str(linear_run_dir)], ["--method", "dp-linear"]):
        assert main(["audit", "sidechannel", *argv, "--json"]) == 0
        report = _last_json(capsys)
        assert report["applicable"] is False
        assert report["reason"].startswith("no per-window normalisation and no quantum channel")
    assert main(["audit", "sidechannel", str(linear_run_dir)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "not applicable: no per-window normalisation" in " ".join(" ".join(lines).split())
    assert max(map(len, lines)) <= 100
