"""The main job's plan: its parts, their rough cost from the per-window model, and the finished
runs and cells it will read back rather than train (no data is read: seconds)."""

from __future__ import annotations

import json
import os
import time

import pytest

from qpriv.errors import InvalidInputError
from qpriv.experiments import quickstart as quick
from qpriv.experiments.frontier_plan import frontier_jobs, plan
from qpriv.experiments.grid import QUICK
from qpriv.experiments.runner import cell_dir


@pytest.fixture(autouse=True)
def empty_cache(tmp_path, monkeypatch):
    """No rigorous accounting is cached: the plan counts its minute for each LDPT run."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def test_the_plan_refuses_a_folder_that_is_not_a_quickstarts(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text("{")  # another command's run, damaged even
    with pytest.raises(InvalidInputError, match=r"holds config\.json, which a quickstart does "
                                                "not write"):
        quick.plan_quickstart(out_dir=run)
    (tmp_path / "file").write_text("")
    with pytest.raises(InvalidInputError, match="is a file"):
        quick.plan_quickstart(out_dir=tmp_path / "file")
    own = tmp_path / "qs"
    for name in ("classical", "frontier", ".hidden"):
        (own / name).mkdir(parents=True)
    (own / "report.html").write_text("")
    assert quick.plan_quickstart(out_dir=own).out_dir == own


def test_the_plan_costs_each_part_by_its_windows(tmp_path):
    quick_plan = quick.plan_quickstart(out_dir=tmp_path / "qs")
    assert [p.label for p in quick_plan.parts] == [
        "[1/5 classical]", "[2/5 LDPT eps=1.0]", "[3/5 LDPT eps=0.1]", "[4/5 channel audit]",
        "[5/5 frontier]"]
    train, evaluate = quick.SECONDS_PER_WINDOW["classical"]
    classical = quick_plan.runs[0].part
    epoch = 1024 * train + 256 * evaluate
    assert classical.steps == pytest.approx((epoch, epoch))  # 2 epochs, each validated
    assert classical.seconds == pytest.approx(
        2 * quick.RUN_SECONDS + 2 * epoch + 3 * 256 * evaluate)  # and 3 test passes
    ldpt = quick_plan.runs[1]
    assert ldpt.accounting and not quick_plan.runs[0].accounting
    assert ldpt.part.lead == quick.RUN_SECONDS + quick.ACCOUNTING_SECONDS
    assert ldpt.part.seconds > 2 * classical.seconds  # the quantum path costs twice per window
    # the frontier: 5 noise seeds x 2 eps of dp-linear, public, ridge, then 5 backbone cells
    assert quick_plan.frontier_cells == 17 and quick_plan.frontier_reused == 0
    assert quick_plan.frontier.steps[:12] == (quick.LINEAR_CELL_SECONDS,) * 12
    assert not quick_plan.frontier.epochs_are_steps
    assert quick_plan.seconds == pytest.approx(sum(p.seconds for p in quick_plan.parts))
    assert 5 * 60 < quick_plan.seconds < 15 * 60
    lines = quick_plan.lines()
    assert lines[1] == ("  [1/5 classical] train 2 epochs on 1024 training windows, test 3 "
                        "passes on 256 windows  ~75 s")
    assert lines[2].endswith(", after its rigorous accounting (once)  ~3 min")
    assert lines[-1] == "  total: about 10 min"


def test_finished_runs_and_cells_are_planned_as_read_back(tmp_path):
    out = tmp_path / "qs"
    run_dir = out / "LDPT_eps0.1"
    run_dir.mkdir(parents=True)
    history = [{"train_seconds": 40.0, "val_seconds": 5.0},
               {"train_seconds": 41.5, "val_seconds": 5.5}]
    (run_dir / "result.json").write_text(json.dumps({"history": history, "mse": 0.5}))
    when = time.mktime((2025, 3, 4, 5, 6, 0, 0, 0, -1))
    os.utime(run_dir / "result.json", (when, when))
    series = plan(unit="record", eps=quick.QUICK_FRONTIER_EPS, methods=("public", "ldpt"),
                  seeds=1, backbone_seeds=1)
    for _, cell in frontier_jobs(series, dataset="ETTh1", horizon=24)[:2]:  # public, ldpt 0.1
        where = cell_dir(cell, budget=QUICK, out_dir=out / "frontier")
        where.mkdir(parents=True)
        (where / "result.json").write_text("{}")
    quick_plan = quick.plan_quickstart(out_dir=out)
    reused = quick_plan.runs[2]
    assert reused.reused is not None and quick_plan.runs[0].reused is None
    assert reused.part.seconds == quick.REUSED_SECONDS and not reused.accounting
    assert reused.reused.line("LDPT eps=0.1") == (
        f"reused: LDPT eps=0.1 (finished run in {run_dir}, trained in 92 s on 2025-03-04 05:06)")
    assert "  [3/5 LDPT eps=0.1] reused: read back its finished run  ~1 s" in quick_plan.lines()
    assert quick_plan.frontier_reused == 2
    assert "17 cells, 2 reused" in quick_plan.lines()[5]
