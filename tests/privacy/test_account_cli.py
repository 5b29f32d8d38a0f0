"""``qpriv account``: the rigorous numbers beside the paper's, labelled, and the inverse."""

from __future__ import annotations

import dataclasses
import json
import math
import os

import pytest

from qpriv.audits import lower_bound as empirical
from qpriv.cli import main
from qpriv.forecasting import rigorous
from qpriv.forecasting.config import ModelConfig
from qpriv.forecasting.methods import setup_method
from qpriv.forecasting.run import run_forecast
from qpriv.privacy.claims import COVERS_FEATURES_PER_PASS, PrivacyClaim
from qpriv.privacy.feature_path.accountant import ASSUMPTIONS, account, rigorous_notes

SMALL = ["--dim", "4", "--shots", "64", "--seq-len", "16", "--epochs", "2", "--restarts", "1"]


def _last_json(capsys) -> dict:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_account_json_labels_every_number(capsys):
    assert main(["account", "--eps", "0.1", *SMALL, "--lower-bound-trials", "2000",
                 "--json"]) == 0
    payload = _last_json(capsys)
    assert payload["paper"]["eps_per_pass"] == {
        "value": 0.1, "kind": "local eps-QDP per pass", "accounting": "paper", "unit": "token",
        "covers": COVERS_FEATURES_PER_PASS}
    rows = {row["unit"]: row for row in payload["rows"]}
    assert set(rows) == {"token", "token-training", "window", "record"}
    for row in rows.values():
        assert row["eps"]["accounting"] == "rigorous" and row["eps"]["kind"] == "composed"
        assert row["eps"]["delta"] == 1e-5
        assert row["eps"]["composed_over"] == row["unit"]
        assert row["eps"]["unit"] == {"token-training": "token"}.get(row["unit"], row["unit"])
        assert row["eps"]["value"] <= row["eps_rdp"]["value"]
    # D = 4, s = 4, L = 16: one token per window holds a time step; over its windows it is in
    # 4 tokens x 4 positions per epoch
    assert rows["window"]["count"] == 64 and rows["record"]["count"] == 64 * 4 * 4 * 2
    eps = [rows[u]["eps"]["value"] for u in ("token", "token-training", "record")]
    assert eps == sorted(eps)
    lower = payload["lower_bound"]
    assert lower["eps_lower"]["bound"] == "empirical lower bound"
    assert 0 <= lower["eps_lower"]["value"] <= rows["token"]["eps"]["value"]
    assert any("no credit" in a for a in payload["assumptions"])


def test_account_table_is_labelled(capsys):
    assert main(["account", "--p", "0.9", *SMALL, "--lower-bound-trials", "0"]) == 0
    out = capsys.readouterr().out
    assert "accounting=rigorous" in out and "accounting=paper" in out
    assert "paper chain: eps_s" in out
    assert "record" in out and "assumptions:" in out
    assert "empirical lower bound" not in out


def test_account_inverse(capsys):
    assert main(["account", "--target-eps", "1", "--unit", "token", *SMALL, "--d-model", "16",
                 "--json"]) == 0
    payload = _last_json(capsys)
    assert payload["eps_target"] == {"value": 1.0, "kind": "composed", "accounting": "rigorous",
                                     "delta": 1e-5, "unit": "token", "composed_over": "token",
                                     "covers": COVERS_FEATURES_PER_PASS,
                                     "notes": list(rigorous_notes("token", d=0.1))}
    assert 0 < payload["p"] < 1
    assert payload["sigma"] == pytest.approx(payload["p"] / 4)
    assert 0.97 <= payload["achieved"]["eps"]["value"] <= 1.0
    assert payload["eps_s_paper"]["accounting"] == "paper"
    assert main(["account", "--target-eps", "1", "--unit", "token", *SMALL]) == 0
    assert "p = " in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["account", "--eps", "0.1", "--p", "0.5"], "not allowed with argument"),
        (["account", "--p", "1.5"], "p (depolarizing probability) = 1.5"),
        (["account", "--delta", "0"], "delta = 0"),
        (["account", "--dim", "12"], "power of two"),
        (["account", "--lower-bound-trials", "-1"], "--lower-bound-trials = -1"),
        (["account", "--target-eps", "0"], "error: --target-eps = 0 is outside"),
        # the library's name for the budget is eps_total: named as this command spells it
        (["account", "--target-eps", "1e-12", "--delta", "1e-300", "--unit", "record"],
         "error: --target-eps = 1e-12 at --delta = 1e-300 is below what p = 1 - e^-40 gives "
         "for the record unit; choose a larger --target-eps or --delta"),
        (["account", "--unit", "epoch"], "invalid choice"),
        (["account", "--eps", "0.1", "--unit", "window"],
         "--unit window is the unit of --target-eps; without it the table lists every unit"),
    ],
)
def test_account_errors_are_one_line_exit_2(capsys, argv, needle):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err


# --- --encoding signed: ldpt-signed's channel, cross-checked against its own run ---------------

SIGNED_TINY = {"seq_len": 48, "horizon": 4, "epochs": 1, "max_train_windows": 32,
               "max_eval_windows": 16, "progress": False, "threads": 1,
               "overrides": {"d_model": 8, "n_heads": 2, "d_ff": 16, "dim": 4, "n_shots": 32}}
"""A run of ldpt-signed in seconds: tokens of 4 values in an 8-amplitude register, 32 shots."""

SIGNED_ARGS = ["--encoding", "signed", "--dim", "4", "--shots", "32", "--seq-len", "48",
               "--epochs", "1", "--lower-bound-trials", "0", "--json"]
"""The same settings on the command line (stride 4, restarts 4 and seed 0 are both defaults)."""



@pytest.mark.skipif(not os.environ.get("QPRIV_DATA_DIR"),
                    reason="QPRIV_DATA_DIR (the ETT csv files) not set")
def test_signed_numbers_are_an_ldpt_signed_runs_own_claims(private_cache, capsys):
    """Two paths: the run calibrates p (setup_method), then accounts its config at p
    (rigorous_summary, from the cache key's settings); the command calibrates from --eps and
    accounts the register, d and token length read off its own ModelConfig."""
    result = run_forecast(method="ldpt-signed", eps=0.5, **SIGNED_TINY)
    assert main(["account", "--eps", "0.5", *SIGNED_ARGS]) == 0
    payload = _last_json(capsys)
    assert payload["p"] == pytest.approx(result.p, rel=1e-12)
    assert payload["paper"]["eps_per_pass"]["value"] == result.eps_per_pass == 0.5
    rows = {row["unit"]: row for row in payload["rows"]}
    for unit in rigorous.RIGOROUS_UNITS:
        claim = result.rigorous_claims[unit]
        ours = PrivacyClaim.from_json(rows[unit]["eps"])
        assert ours.value == pytest.approx(claim.value, rel=1e-6)  # the run keeps p to 12 digits
        assert (ours.kind, ours.accounting, ours.unit, ours.delta) == (
            claim.kind, claim.accounting, claim.unit, claim.delta)
        assert rows[unit]["dim"] == 8 and rows[unit]["d"] == pytest.approx(0.1, rel=1e-12)
    assert rows["record"]["count"] == 32 * 12 * 4  # shots x n_tokens(4, 4, 48) x 4 values
    encoding = payload["encoding"]
    assert (encoding["encoding"], encoding["hilbert_dim"], encoding["token_length"]) == (
        "signed", 8, 4)
    assert encoding["reference"] == pytest.approx(2.0 * (2 + math.sqrt(4 - 0.01)) / 0.1)
    assert payload["assumptions"][0] == encoding["neighbourhood"]
    assert "proved" in encoding["neighbourhood"] and "RevIN" in encoding["neighbourhood"]


def test_signed_target_is_the_rigorous_runs_calibration(capsys):
    """--target-eps on the signed encoding gives the p that ``--accounting rigorous`` sets for
    an ldpt-signed run at a record budget (rigorous_setup), here at r = 10 (d = 0.769)."""
    base = ModelConfig(seq_len=16, dim=2, stride=2, d_model=16, n_shots=16)
    setup = rigorous.rigorous_setup(
        setup_method("ldpt-signed", base=base, eps=1.0, overrides={"reference": 10.0}),
        eps_total=4.0, delta=1e-5, epochs=1)
    assert main(["account", "--encoding", "signed", "--reference", "10", "--target-eps", "4",
                 "--dim", "2", "--stride", "2", "--shots", "16", "--seq-len", "16",
                 "--epochs", "1", "--d-model", "16", "--json"]) == 0
    payload = _last_json(capsys)
    assert payload["p"] == pytest.approx(setup.rigorous["p"], rel=1e-12)
    assert payload["achieved"] == {**setup.rigorous["achieved"],
                                   "seconds": payload["achieved"]["seconds"]}
    assert payload["achieved"]["d"] == pytest.approx(4 * 2 * 10 / (4 + 100), rel=1e-12)
    assert payload["encoding"]["d"] == payload["achieved"]["d"]


def test_signed_table_names_the_register_and_the_proved_distance(capsys):
    assert main(["account", "--encoding", "signed", "--p", "0.9", *SMALL,
                 "--lower-bound-trials", "0"]) == 0
    out = capsys.readouterr().out
    assert "tokens of D = 4 values in a register of 8 amplitudes" in out
    assert "proved d = 4 c r / (c^2 + r^2) = 0.1" in out
    assert "one value of a token replaced within [-2, 2]" in out  # the first assumption


def test_default_encoding_is_unchanged(capsys):
    """No --encoding is eq. 2's amplitude encoding at --d (0.1): the library's account at
    those settings, with no key the signed encoding adds."""
    argv = ["account", "--eps", "0.1", *SMALL, "--lower-bound-trials", "0", "--json"]
    assert main(argv) == 0
    default = _last_json(capsys)
    assert main([*argv, "--encoding", "amplitude", "--d", "0.1"]) == 0
    explicit = _last_json(capsys)
    report = account(eps_s=0.1, dim=4, d=0.1, n_shots=64, seq_len=16, epochs=2,
                     restarts=1)
    assert "encoding" not in default and "token_length" not in default["settings"]
    assert default["settings"] == explicit["settings"] == report.as_dict()["settings"]
    assert default["assumptions"] == list(ASSUMPTIONS)
    assert default["p"] == explicit["p"] == report.p
    for ours, again, lib in zip(default["rows"], explicit["rows"], report.rows, strict=True):
        assert ours["eps"] == again["eps"] == lib.as_dict()["eps"]
        assert ours["dim"] == 4 and ours["d"] == 0.1


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--encoding", "signed", "--reference", "0"], "--reference (amplitude r of the signed "
                                                       "encoding) = 0 is outside"),
        (["--encoding", "signed", "--reference", "-3"], "--reference (amplitude r"),
        (["--encoding", "signed", "--clip", "0"], "--clip (public range c of the signed "
                                                  "encoding) = 0 is outside"),
        (["--encoding", "signed", "--clip", "-1"], "--clip (public range c"),
        (["--encoding", "signed", "--d", "0.2"], "--d = 0.2 contradicts the signed encoding's "
                                                 "proved trace distance"),
        (["--encoding", "signed", "--d", "0.2"], "--reference 39.8997 for d = 0.2"),
        (["--encoding", "signed", "--reference", "10", "--d", "0.1"], "= 0.769231"),
        (["--encoding", "signed", "--d", "3"], "omit --d"),
        (["--encoding", "signed", "--target-eps", "1", "--d", "0.5"], "contradicts"),
        (["--clip", "1"], "add --encoding signed"),
        (["--encoding", "signed", "--dim", "12"], "power of two"),
        (["--encoding", "qubit"], "invalid choice"),
    ],
)
def test_signed_bad_input_is_one_line_exit_2(capsys, argv, needle):
    assert main(["account", *argv]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert len(err.splitlines()) == 1 and needle in err, err
    assert captured.out == ""


def test_the_proved_distance_given_again_is_accepted(capsys):
    assert main(["account", "--encoding", "signed", "--d", "0.1", "--p", "0.9", *SMALL,
                 "--lower-bound-trials", "0", "--json"]) == 0
    assert _last_json(capsys)["settings"]["d"] == pytest.approx(0.1, rel=1e-12)


def test_a_lower_bound_above_the_rigorous_eps_is_called_a_bug_and_fails(capsys, monkeypatch):
    """The empirical lower bound must sit below the accountant's upper bound: where it does
    not, one of them is wrong, and the command says so and exits 1 instead of printing
    '<= rigorous'."""
    real = empirical.pair_lower_bound
    monkeypatch.setattr(empirical, "pair_lower_bound",
                        lambda *args, **kwargs: dataclasses.replace(real(*args, **kwargs),
                                                                    eps_lower=1e3))
    assert main(["account", "--p", "0.9", *SMALL, "--lower-bound-trials", "200"]) == 1
    out = capsys.readouterr().out
    assert "EXCEEDS the rigorous" in out and "<= rigorous" not in out
    assert main(["account", "--p", "0.9", *SMALL, "--lower-bound-trials", "200", "--json"]) == 1
    assert _last_json(capsys)["lower_bound_exceeds_rigorous"] is True
    monkeypatch.undo()
    assert main(["account", "--p", "0.9", *SMALL, "--lower-bound-trials", "200"]) == 0
    assert "<= rigorous" in capsys.readouterr().out
