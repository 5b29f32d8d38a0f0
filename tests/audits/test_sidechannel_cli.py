"""``qpriv audit sidechannel``: the paper's LDPT fails with a RevIN leak, the fixed variant
passes, a finished run is audited with its trained weights; bad input is one line, exit 2."""

from __future__ import annotations

import json

import pytest

from qpriv.cli import main


def _last_json(capsys) -> dict:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


@pytest.fixture
def no_data(monkeypatch, tmp_path):
    """No ETT file anywhere on this machine: the audit falls back to synthetic windows."""
    monkeypatch.setenv("QPRIV_DATA_DIR", str(tmp_path / "empty"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def test_paper_ldpt_fails_with_a_revin_leak_and_offers_the_fix(capsys, no_data):
    argv = ["audit", "sidechannel", "--method", "ldpt", "--windows", "2", "--json"]
    assert main(argv) == 1
    report = _last_json(capsys)
    assert report["passed"] is False
    assert [leak["path"] for leak in report["leaks"]] == ["RevIN statistics"]
    assert report["windows_source"].startswith("2 synthetic windows")
    assert "untrained ldpt model (eps 0.1, gate 1, normalisation revin" in report["subject"]
    assert report["model"]["p"] == pytest.approx(0.9505, abs=1e-4)
    assert report["fix"]["changes"] == {"normalisation": "fixed"}
    assert report["fix"]["audit"]["passed"] is True
    outside = report["accounting"]["eps_outside_channel_per_pass"]
    assert outside["value"] is None and outside["accounting"] == "rigorous"


def test_fixed_variant_passes_in_text_mode(capsys, no_data):
    argv = ["audit", "sidechannel", "--method", "ldpt", "--normalisation", "fixed",
            "--windows", "2"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "PASS: no path outside the channel moved the forecast" in out
    assert "eps_outside_channel_per_pass: 0 (local eps-QDP per pass, accounting=rigorous)" in out
    assert "normalisation_statistics: — (global (eps, delta)-DP, accounting=rigorous)" in out
    assert "LEAK" not in out


def test_a_finished_run_is_audited_with_its_weights(capsys, ldpt_run_dir):
    assert main(["audit", "sidechannel", str(ldpt_run_dir), "--windows", "3", "--json"]) == 1
    report = _last_json(capsys)
    assert report["subject"].startswith("trained ldpt model of run")
    assert report["windows_source"].startswith("3 evenly spaced training windows of the run")
    assert [leak["path"] for leak in report["leaks"]] == ["RevIN statistics"]
    assert report["fix"]["audit"]["passed"] is True


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["audit", "sidechannel"], "not neither"),
        (["audit", "sidechannel", "somewhere", "--method", "ldpt"], "not both"),
        (["audit", "sidechannel", "somewhere", "--gate", "0.5"], "gate: only with --method"),
        (["audit", "sidechannel", "--method", "ldpt", "--gate", "1.5"], "gate = 1.5"),
        (["audit", "sidechannel", "--method", "ldpt", "--eps", "0"], "eps"),
        (["audit", "sidechannel", "--method", "ldpt", "--normalisation", "x"], "invalid choice"),
        (["audit", "sidechannel", "--method", "classical", "--gate", "0.5"], "use_quantum"),
        (["audit", "sidechannel", "--method", "ldpt", "--windows", "0"], "positive integer"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, no_data, argv, needle):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0]


def test_a_data_dir_given_without_the_data_is_refused_not_swapped_for_synthetic(
        capsys, no_data, tmp_path, ldpt_run_dir):
    short = tmp_path / "short.csv"
    short.write_text("date,OT\n2020-01-01 00:00:00,1.0\n")
    for subject in (["--method", "ldpt"], [str(ldpt_run_dir)]):
        argv = ["audit", "sidechannel", *subject, "--windows", "2", "--data-dir", str(short)]
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "synthetic" not in err[0], err
