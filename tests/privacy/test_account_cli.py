"""``qpriv account``: the rigorous numbers beside the paper's, labelled, and the inverse."""

from __future__ import annotations

import json

import pytest

from qpriv.cli import main
from qpriv.privacy.claims import COVERS_FEATURES_PER_PASS

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
                                     "covers": COVERS_FEATURES_PER_PASS}
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
        (["account", "--target-eps", "0"], "eps_total = 0"),
        (["account", "--unit", "epoch"], "invalid choice"),
    ],
)
def test_account_errors_are_one_line_exit_2(capsys, argv, needle):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err
