"""The six audits of the LDPT paper's section 7.9 on a finished run: each passes on a faithful
run with the values the closed forms give, fails when the run's files lie, and does not apply
to a run that claims no privacy."""

from __future__ import annotations

import dataclasses
import json
import math
import shutil

import numpy as np
import pytest

from qpriv.audits.channel import worst_case_dmax
from qpriv.audits.paper import run_audits
from qpriv.audits.paper_claim import audit_budget, audit_calibration_chain, audit_composition
from qpriv.audits.paper_result import NOT_APPLICABLE
from qpriv.audits.paper_trends import audit_mse_tracks_eps, mse_steps, sibling_runs
from qpriv.errors import InvalidInputError
from qpriv.forecasting.artifacts import load_run
from qpriv.forecasting.run import run_forecast
from qpriv.runs.layout import CONFIG_FILE, RESULT_FILE
from qpriv.training.evaluation import per_window_losses
from qpriv.training.seeding import derive_seed


def _edit_json(path, edit):
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


@pytest.fixture(scope="module")
def audits(ldpt_run_dir):
    return run_audits(ldpt_run_dir, windows=32, pairs=300, seed=1, discover=False)


@pytest.fixture
def run_copy(ldpt_run_dir, tmp_path):
    return shutil.copytree(ldpt_run_dir, tmp_path / "run")


def test_a_faithful_run_passes_every_audit_that_applies_to_it_alone(audits):
    assert [a.number for a in audits] == [1, 2, 3, 4, 5, 6]
    statuses = [a.status for a in audits]
    assert statuses == ["pass"] * 4 + [NOT_APPLICABLE, "pass"], [a.detail for a in audits]
    assert [a.passed for a in audits] == [True] * 4 + [None, True]


def test_audit_1_recomputes_algorithm_1(audits):
    chain = audits[0]
    assert chain.measured <= 1e-12
    # eq. 6 by hand at eps_s = 0.1, alpha = 0.8, d = 0.1, D = 16
    assert chain.values["recomputed"]["p"] == pytest.approx(1.6 / (math.expm1(0.08) + 1.6))
    # eq. 8 with the run's d_model = 16
    assert chain.values["recomputed"]["sigma"] == pytest.approx(
        chain.values["recomputed"]["p"] / 4)


def test_audit_2_holds_the_valid_bound_and_shows_eq18_is_none(audits):
    trace = audits[1]
    assert trace.measured == 0
    rows = trace.values["rows"]
    assert [r["tau"] for r in rows] == [0.001, 0.01, 0.05, 0.1, 0.5]
    assert all(r["norm_bound_violations"] == 0 and r["pairs"] == 1400 for r in rows)
    # on real tokens eq. 18 is exceeded, which is why it is informational only
    assert sum(r["eq18_violations"] for r in rows) > 0
    # the largest distance grows with tau
    assert [r["empirical_max"] for r in rows] == sorted(r["empirical_max"] for r in rows)


def test_audit_3_matches_eqs_5_16_17(audits):
    composition = audits[2]
    assert composition.measured <= 1e-12
    # eq. 17 by hand: T = 1, delta' = 1e-6
    expected = 0.1 * math.sqrt(2 * math.log(1e6)) + 0.1 * math.expm1(0.1)
    assert composition.values["eps_advanced"]["value"] == pytest.approx(expected)
    assert "eq. 5 hybrid" in composition.values["deviations"]


def test_audit_4_finds_the_closed_form_worst_case(audits, ldpt_run_dir):
    budget = audits[3]
    p = load_run(ldpt_run_dir).result.p
    assert budget.measured == pytest.approx(worst_case_dmax(p=p, d=0.1, dim=16), rel=1e-6)
    assert budget.values["eps_ch_bound"] == pytest.approx(0.08)
    assert budget.values["slack"] == pytest.approx(2.6, abs=0.01)


def test_audit_5_alone_reports_the_recalibrated_model_without_a_verdict(audits, ldpt_run_dir):
    trend = audits[4]
    assert trend.measured is None
    assert "no finished run of this method at another eps" in trend.detail
    assert "--compare" in trend.detail and "for information" in trend.detail
    rows = trend.values["rows"]
    assert [r["eps_s"] for r in rows] == [0.1, 0.5, 1.0, 5.0]
    assert [r["p"] for r in rows] == sorted((r["p"] for r in rows), reverse=True)
    # at the run's own eps the recalibrated model is the run's model: same losses
    run = load_run(ldpt_run_dir)
    test = run.data().test
    index = np.floor(np.linspace(0, len(test) - 1, trend.values["windows"]) + 0.5)
    own = per_window_losses(run.model, test, index=index.astype(np.int64),
                            seed=derive_seed(1, "audit-mse"))
    assert rows[0]["mse"] == pytest.approx(float(own.mean()), rel=1e-6)


def test_audit_6_measures_the_true_fidelity_beside_table_7(audits):
    fidelity = audits[5]
    rows = fidelity.values["rows"]
    for row in rows:
        assert row["fidelity_closed_form"] == pytest.approx(1 - row["p"] + row["p"] / 16)
        assert row["fidelity_measured"] == pytest.approx(row["fidelity_closed_form"], abs=1e-10)
    assert [round(r["fidelity_measured"], 3) for r in rows] == [0.109, 0.283, 0.469, 0.973]
    assert [r["fidelity_paper"] for r in rows] == [0.617, 0.713, 0.804, 0.974]
    assert fidelity.values["max_deviation_from_closed_form"] <= 1e-10


def test_a_recorded_p_that_is_not_the_calibrated_one_fails_audits_1_and_4(run_copy):
    _edit_json(run_copy / RESULT_FILE, lambda r: r.update(p=r["p"] * 1.001))
    run = load_run(run_copy)
    chain = audit_calibration_chain(run)
    assert chain.status == "fail"
    assert chain.values["deviations"]["p (result) vs Algorithm 1"] == pytest.approx(1e-3,
                                                                                   rel=0.01)
    # the largest deviation is eq. 6's: Theorem 1 at the recorded p is no longer eps_ch = 0.08
    p = 1.001 * chain.values["recomputed"]["p"]
    eps_ch = math.log1p((1 - p) * 0.1 * 16 / p)
    assert chain.measured == pytest.approx((0.08 - eps_ch) / 0.08, rel=1e-6)
    assert "eq. 6" in chain.detail
    budget = audit_budget(run, pairs=50)
    assert budget.status == "fail" and "is not Algorithm 1's" in budget.detail


def test_a_wrong_composed_budget_fails_audit_3(run_copy):
    _edit_json(run_copy / RESULT_FILE, lambda r: r["eps_advanced"].update(value=0.5))
    audit = audit_composition(load_run(run_copy))
    assert audit.status == "fail" and "eq. 17 advanced" in audit.detail


def test_a_request_below_the_channel_share_fails_audit_4(run_copy):
    # the channel spends eps_ch = 0.08; a request of 0.05 would be exceeded
    _edit_json(run_copy / CONFIG_FILE, lambda c: c.update(eps_per_pass=0.05))
    audit = audit_budget(load_run(run_copy), pairs=50)
    assert audit.status == "fail"
    assert "exceeds the requested eps_s = 0.05" in audit.detail


def test_mse_steps_tolerate_noise_but_not_a_rise():
    rng = np.random.default_rng(0)
    base = rng.exponential(1.0, 400)
    noise = rng.normal(0, 0.05, 400)
    steps = mse_steps([0.1, 1.0], [base, base + noise])
    diff = noise
    assert steps[0]["mse_change"] == pytest.approx(diff.mean())
    assert steps[0]["tolerance"] == pytest.approx(3 * diff.std(ddof=1) / 20)
    assert steps[0]["ok"]
    rising = mse_steps([0.1, 1.0, 5.0], [base, base - 0.1, base + 0.1 + noise])
    assert [s["ok"] for s in rising] == [True, False]
    with pytest.raises(InvalidInputError, match="at least two eps"):
        mse_steps([0.1], [base])


def test_audit_5_compares_runs_trained_at_their_own_eps(ldpt_run_dir, tiny_ldpt_run):
    run, other = load_run(ldpt_run_dir), load_run(tiny_ldpt_run(5.0))
    data = run.data()
    audit = audit_mse_tracks_eps(run, data, windows=16, seed=2, compare=[other])
    rows = audit.values["rows"]
    assert [r["eps_s"] for r in rows] == [0.1, 5.0]
    assert "2 runs trained at their own eps" in audit.detail
    # each row is that run's own model at its own noise, on the same windows
    index = np.floor(np.linspace(0, len(data.test) - 1, 16) + 0.5).astype(np.int64)
    for row, model in zip(rows, (run.model, other.model), strict=True):
        own = per_window_losses(model, data.test, index=index, seed=derive_seed(2, "audit-mse"))
        assert row["mse"] == pytest.approx(float(own.mean()), rel=1e-12)
    assert rows[1]["p"] == pytest.approx(other.result.p)
    assert audit.status in ("pass", "fail")
    assert audit.passed == all(step["ok"] for step in audit.values["steps"])


def test_audit_5_finds_the_runs_at_other_eps_beside_the_run(tiny_ldpt_run, tmp_path):
    grid = tmp_path / "cells"
    for eps in (0.1, 5.0):
        shutil.copytree(tiny_ldpt_run(eps), grid / f"ldpt-eps{eps:g}")
    # beside them: another seed, an unfinished run, and a directory that is no run
    shutil.copytree(tiny_ldpt_run(5.0), grid / "ldpt-eps5-other-seed")
    _edit_json(grid / "ldpt-eps5-other-seed" / CONFIG_FILE, lambda c: c.update(seed=7))
    shutil.copytree(tiny_ldpt_run(5.0), grid / "ldpt-eps5-killed")
    (grid / "ldpt-eps5-killed" / RESULT_FILE).unlink()
    (grid / "notes").mkdir()
    shutil.copytree(tiny_ldpt_run(5.0), grid / "ldpt-eps5-damaged")  # its config cut short
    (grid / "ldpt-eps5-damaged" / CONFIG_FILE).write_text('{"dataset": "ETT')
    found = sibling_runs(load_run(grid / "ldpt-eps0.1"))
    assert [r.run_dir.name for r in found] == ["ldpt-eps5"]
    # a run written before config.json had accounting and delta is the paper's, as before
    for key in ("accounting", "delta"):
        _edit_json(grid / "ldpt-eps0.1" / CONFIG_FILE, lambda c, key=key: c.pop(key))
    assert [r.run_dir.name for r in sibling_runs(load_run(grid / "ldpt-eps0.1"))] == [
        "ldpt-eps5"]
    audit = run_audits(grid / "ldpt-eps0.1", windows=16, pairs=50, seed=2)[4]
    assert audit.status in ("pass", "fail")
    assert [r["eps_s"] for r in audit.values["rows"]] == [0.1, 5.0]
    assert audit.values["runs"] == [str(grid / "ldpt-eps0.1"), str(grid / "ldpt-eps5")]
    assert audit.measured == max(s["mse_change"] for s in audit.values["steps"])
    alone = run_audits(grid / "ldpt-eps0.1", windows=16, pairs=50, seed=2, discover=False)[4]
    assert alone.status == NOT_APPLICABLE


def test_audit_5_refuses_runs_that_differ_in_more_than_eps(ldpt_run_dir, tmp_path):
    run = load_run(ldpt_run_dir)
    with pytest.raises(InvalidInputError, match="repeat an eps"):
        audit_mse_tracks_eps(run, run.data(), compare=[run])
    other = shutil.copytree(ldpt_run_dir, tmp_path / "other")
    _edit_json(other / CONFIG_FILE, lambda c: c.update(max_eval_windows=16))
    with pytest.raises(InvalidInputError, match=r"differs .* in \['max_eval_windows'\]"):
        run_audits(ldpt_run_dir, compare=[other])


def test_audit_5_does_not_apply_at_long_horizons(ldpt_run_dir):
    run = load_run(ldpt_run_dir)
    long = dataclasses.replace(run, config=dataclasses.replace(run.config, horizon=168))
    audit = audit_mse_tracks_eps(long, None)
    assert audit.status == NOT_APPLICABLE and "H = 168 > 96" in audit.detail
    assert audit.passed is None


def test_a_classical_run_claims_nothing_to_audit(tmp_path, ldpt_run_dir):
    config = json.loads((ldpt_run_dir / CONFIG_FILE).read_text())
    out = tmp_path / "classical"
    run_forecast(dataset="ETTh1", method="classical", eps=None, epochs=1, horizon=24,
                 seq_len=64, max_train_windows=16, max_eval_windows=8, progress=False,
                 threads=1, out_dir=out, overrides={"d_model": 16, "n_heads": 2, "d_ff": 32},
                 data_dir=config["source"])
    audits = run_audits(out)
    assert [a.status for a in audits] == [NOT_APPLICABLE] * 6
    # its ladder goes unused, and a bad one is still refused, as for an LDPT run
    with pytest.raises(InvalidInputError, match=r"ladder holds eps = nan; each eps on the "):
        run_audits(out, ladder=[0.1, float("nan")])
    assert all(a.passed is None and a.measured is None for a in audits)
    assert "claims no local eps-QDP" in audits[0].detail
    assert "no quantum path" in audits[1].detail


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"ladder": [0.1]}, "at least two distinct eps"),
     ({"ladder": [0.1, -1]}, r"ladder holds eps = -1; .* \(0, 700\]"),
     ({"windows": 0}, "windows"), ({"pairs": 0}, "pairs")],
)
def test_bad_audit_settings_are_refused(ldpt_run_dir, kwargs, match):
    with pytest.raises(InvalidInputError, match=match):
        run_audits(ldpt_run_dir, **kwargs)


@pytest.mark.parametrize("eps", [1.0, 5.0])
def test_a_run_at_eps_1_or_more_is_audited_with_theorem_3_not_applicable(tiny_ldpt_run, eps):
    """At eps_s >= 1 the paper's hybrid composition has no meaning (eps_me >= 1, or undefined):
    audit 3 says so and audits eqs. 16 and 17; every other audit still runs."""
    results = run_audits(tiny_ldpt_run(eps), windows=16, pairs=50, discover=False)
    composition = results[2]
    assert composition.status == "pass"
    assert "Theorem 3's hybrid composition) not applicable" in composition.detail
    assert "eq. 5 hybrid" not in composition.values["deviations"]
    assert [r.number for r in results] == [1, 2, 3, 4, 5, 6]
