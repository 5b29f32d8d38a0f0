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
    out = capsys.readouterr().out
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
