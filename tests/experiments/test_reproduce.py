"""The experiment registry and its runner: every paper table and figure runs end to end at the
tiny budget, finished cells are reused, failed cells are isolated, outputs are written."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pandas as pd
import pytest

from qpriv.cli import main
from qpriv.errors import InvalidInputError
from qpriv.experiments import runner
from qpriv.experiments.grid import TINY, Cell
from qpriv.experiments.registry import EXPERIMENTS, experiment
from qpriv.experiments.runner import run_experiment
from qpriv.forecasting.config import ModelConfig
from qpriv.forecasting.methods import BACKBONE, METHODS, setup_method
from qpriv.forecasting.model import LDPTForecaster
from qpriv.runs.files import MTIME_LAG, Written, written_since

PAPER_IDS = ([f"table{i}" for i in range(1, 17)] + [f"tableA{i}" for i in range(1, 7)]
             + ["figure3", "figure4"])


QML_IDS = [f"qml-figure{i}" for i in (2, 3, 4, 5, 6, 7, 8, 10)]
"""The private-training paper's figures (tests/experiments/test_reproduce_classification.py)."""


def test_every_paper_table_and_figure_is_registered():
    assert sorted(EXPERIMENTS) == sorted(PAPER_IDS + QML_IDS)
    with pytest.raises(InvalidInputError, match="unknown experiment 'table99'"):
        experiment("table99")


def test_a_seed_given_twice_is_refused(tmp_path):
    with pytest.raises(InvalidInputError, match=r"seeds \[5\] are given more than once"):
        run_experiment("table16", budget=TINY, seeds=[5, 6, 5], out_dir=tmp_path,
                       progress=False)
    assert not any(tmp_path.iterdir())


def test_an_out_that_is_a_file_is_one_line_before_any_cell(capsys, tmp_path):
    """A file where the grid's folder should be is refused up front (not one failure per
    cell): the file itself, and a folder inside it."""
    (tmp_path / "table.csv").write_text("kept\n")
    for out in (tmp_path / "table.csv", tmp_path / "table.csv" / "sub"):
        assert main(["reproduce", "table3", "--budget", "tiny", "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "is not a directory; name a folder" in err
        assert str(out) in err
    assert (tmp_path / "table.csv").read_text() == "kept\n"
    assert [p.name for p in tmp_path.iterdir()] == ["table.csv"]


def test_cell_keys_are_unique_and_seeds_group():
    a = Cell("ldpt", 0.1, seed=2024)
    assert a.key == "ETTh1-H24-ldpt-eps0.1-s2024"
    assert a.group == Cell("ldpt", 0.1, seed=2025).group
    assert Cell("classical").key == "ETTh1-H24-classical-s2024"


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    """One output folder for the module, so cells shared between tables run once."""
    return tmp_path_factory.mktemp("reproduce")


@pytest.mark.needs_ett
@pytest.mark.parametrize("experiment_id", PAPER_IDS)
def test_every_experiment_runs_at_the_tiny_budget(experiment_id, out):
    seeds = [2024, 2025] if experiment_id in ("table11", "table12") else [2024]
    report = run_experiment(experiment_id, budget=TINY, out_dir=out, progress=False,
                            seeds=seeds if EXPERIMENTS[experiment_id].seeds else None)
    assert report.failures == []
    assert report.rows
    where = out / experiment_id / "tiny"
    frame = pd.read_csv(where / "results.csv")
    assert len(frame) == len(report.rows)
    assert (where / "table.md").read_text().startswith(f"# {experiment_id}")
    assert json.loads((where / "report.json").read_text())["id"] == experiment_id
    exp = EXPERIMENTS[experiment_id]
    if exp.figure:
        assert (where / "figure.png").read_bytes()[:4] == b"\x89PNG"
    for metric in exp.metrics:
        assert any(row.get(metric) is not None for row in report.rows), metric
    if experiment_id == "table3":  # the paper's numbers are joined beside ours
        ldpt = next(r for r in report.rows if r["method"] == "ldpt" and r["eps"] == 0.1)
        assert ldpt["paper_mse"] == 0.3581
        # eps_train mixes two notions, as the paper's column does: the table says which is which
        table = (where / "table.md").read_text()
        assert "- `ldpt`: `eps` is the per-pass budget eps_s, local eps-QDP per pass" in table
        assert ("- `dpsgd`: `eps` is the target of global (eps, delta = 1e-6)-DP on the trained "
                "weights; `eps_train` is what the run spent, Opacus RDP, "
                "accounting=rigorous.") in table
        # notes name only the columns the table has (it has no eps_advanced nor eps_spent)
        assert "eps_advanced" not in table and "eps_spent" not in table
        assert "- `classical`: no noise and no privacy guarantee." in table
        assert "DP-SGD eps_train is printed '—'" in table  # the paper table's own notes
    if experiment_id == "table8":  # the paper's multipliers beside two accountants'
        row = next(r for r in report.rows if r["method"] == "dpsgd" and r["eps"] == 5.0)
        assert row["paper_noise_multiplier"] == 0.41
        assert row["eps_of_paper_multiplier_rdp"] == pytest.approx(40.6, abs=0.1)
        assert row["noise_multiplier_rdp_paper_setting"] == pytest.approx(0.788, abs=0.005)
    if experiment_id == "table11":
        assert all(r["seeds"] == 2 and "mse_std" in r for r in report.rows)


@pytest.mark.needs_ett
def test_finished_cells_are_reused_and_failures_isolated(tmp_path, monkeypatch):
    first = run_experiment("table8", budget=TINY, out_dir=tmp_path, progress=False)
    calls = []
    real = runner.run_cell

    def counting(cell, **kwargs):
        calls.append(cell.key)
        if cell.method == "classical":
            raise InvalidInputError("boom")
        return real(cell, **kwargs)

    monkeypatch.setattr(runner, "run_cell", counting)
    again = run_experiment("table8", budget=TINY, out_dir=tmp_path, progress=False)
    assert len(calls) == 5
    assert [f["cell"] for f in again.failures] == ["ETTh1-H24-classical-s2024"]
    assert len(again.rows) == len(first.rows) - 1  # the other four still reported
    mse = {r["eps"]: r["mse"] for r in first.rows if r["method"] == "dpsgd"}
    assert {r["eps"]: r["mse"] for r in again.rows} == mse  # read back, not retrained


def test_cli_lists_and_refuses(capsys):
    assert main(["reproduce", "--list"]) == 0
    listing = capsys.readouterr().out
    assert all(i in listing for i in PAPER_IDS)
    assert main(["reproduce", "--list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["experiments"]
    assert [e["id"] for e in listed] == list(EXPERIMENTS)
    table3 = next(e for e in listed if e["id"] == "table3")
    assert table3["cells"] == 9 and table3["seeds"] == [2024]  # 1 + 4 LDPT + 4 DP-SGD
    assert main(["reproduce"]) == 2
    assert "name an experiment" in capsys.readouterr().err
    assert main(["reproduce", "table99", "--quick"]) == 2


def test_list_with_an_id_lists_that_experiment_alone(capsys):
    assert main(["reproduce", "--list", "table1", "--json"]) == 0
    [listed] = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["experiments"]
    assert (listed["id"], listed["cells"], listed["seeds"]) == ("table1", 0, [])
    assert main(["reproduce", "--list", "table3"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines()[2:] if not line.startswith(" ")]
    assert [line.split()[0] for line in rows] == ["table3"]
    assert main(["reproduce", "--list", "table99"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("qpriv: error: unknown experiment 'table99'; known: ")
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize("experiment_id", ["table1", "table2", "table7"])
def test_a_table_that_trains_nothing_refuses_seeds_and_lists_none(tmp_path, experiment_id):
    """It took them and used none (its report said nothing of them either)."""
    assert experiment(experiment_id).seeds == ()
    with pytest.raises(InvalidInputError, match=rf"^experiment '{experiment_id}' trains nothing "
                                                r"and takes no seeds; leave them out$"):
        run_experiment(experiment_id, seeds=[2024], budget=TINY, out_dir=tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_computed_tables_match_the_paper(tmp_path):
    report = run_experiment("table1", budget=TINY, out_dir=tmp_path)
    by_eps = {r["eps"]: r for r in report.rows}
    assert by_eps[0.1]["eps_advanced"] == pytest.approx(2.561, abs=1e-3)
    assert by_eps[0.1]["paper_eps_advanced"] == 2.56
    table7 = {r["eps"]: r for r in run_experiment("table7", budget=TINY, out_dir=tmp_path).rows}
    assert table7[0.1]["p"] == pytest.approx(0.9505, abs=1e-4)
    assert table7[0.1]["fidelity"] == pytest.approx(0.109, abs=1e-3)  # 1 - p + p/D, not Table 7
    assert table7[5.0]["eps_me"] is None


def test_diverged_seeds_are_counted_and_left_out_of_the_mean():
    cells = [(Cell("bottleneck-dp", 0.1, seed=2024), {"mse": 0.9}),
             (Cell("bottleneck-dp", 0.1, seed=2025), {"mse": None, "diverged_epoch": 1}),
             (Cell("bottleneck-dp", 0.1, seed=2026), {"mse": 0.7, "diverged_epoch": 4}),
             (Cell("bottleneck-dp", 0.5, seed=2024), {"mse": 0.5})]
    rows = {r["eps"]: r for r in runner.aggregate(cells, ["mse"])}
    assert rows[0.1]["diverged_seeds"] == 2 and rows[0.1]["seeds"] == 3
    assert rows[0.1]["mse"] == pytest.approx(0.8)  # the two finite seeds
    assert "diverged_seeds" not in rows[0.5]


def test_a_cell_that_diverged_before_any_model_is_reported_not_attacked(tmp_path):
    (tmp_path / "result.json").write_text(json.dumps(
        {"method": "ldpt", "mse": None, "mae": None, "val_loss": None, "best_epoch": 0,
         "diverged_epoch": 1,
         "history": [{"epoch": 1, "train_loss": None, "val_loss": None, "diverged": True}]}))
    values = runner.cell_metrics(tmp_path, metrics=("mse", "mia_accuracy", "loss_gap"),
                                 budget=TINY, data_dir=None)
    assert values == {"mse": None, "diverged_epoch": 1}  # no model: nothing to attack


def test_data_that_cannot_be_had_is_one_error_before_any_cell(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "run_cell", lambda *a, **k: pytest.fail("a cell ran"))
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "ETTh1.csv").write_text("date,OT\n2016-07-01 00:00:00,1\n")
    with pytest.raises(InvalidInputError, match="fails its checksum"):
        run_experiment("table3", budget=TINY, out_dir=tmp_path / "out", data_dir=bad,
                       progress=False)
    assert not (tmp_path / "out").exists()  # no report of a grid that never started


def test_a_damaged_cell_is_named_and_a_damaged_attack_cache_recomputed(tmp_path, monkeypatch):

    (tmp_path / "result.json").write_text('{"mse": 0.4, "best_')
    with pytest.raises(InvalidInputError, match=r"cannot read .*result.json: the file is "
                                                r"damaged .*delete .* to recompute this cell"):
        runner.cell_metrics(tmp_path, metrics=("mse",), budget=TINY, data_dir=None)
    (tmp_path / "result.json").write_text(json.dumps(
        {"method": "ldpt", "mse": 0.4, "best_epoch": 1}))
    (tmp_path / "mia.json").write_text("")  # an empty cache
    attack = {"accuracy": 0.6, "auc": 0.65, "loss_gap": -0.1, "member_loss_mean": 0.3,
              "nonmember_loss_mean": 0.4, "tpr_at_fpr": [{"target_fpr": 0.01, "tpr": 0.02}]}
    monkeypatch.setattr(runner, "mia_on_run", lambda run_dir, **kw: {"attack": attack})
    values = runner.cell_metrics(tmp_path, metrics=("mse", "mia_accuracy"), budget=TINY,
                                 data_dir=None)
    assert values == {"mse": 0.4, "mia_accuracy": 0.6}
    assert json.loads((tmp_path / "mia.json").read_text()) == {"attack": attack}


def test_derived_columns_on_hand_made_rows():
    from qpriv.experiments.computed import (
        add_cost_ratio,
        add_delta_vs_classical,
        add_eps_separation,
    )

    def row(method, eps, mse, seconds=None):
        return {"dataset": "ETTh1", "horizon": 24, "method": method, "eps": eps, "mse": mse,
                "seconds_per_epoch": seconds}

    rows = [row("classical", None, 0.5, 1.0), row("ldpt", 0.1, 0.6, 2.0),
            row("ldpt", 5.0, 0.55, 2.5), row("dpsgd", 0.1, 0.25, 1.5)]
    delta = {(r["method"], r["eps"]): r["delta_mse_pct"] for r in add_delta_vs_classical(rows)}
    assert delta == pytest.approx({("classical", None): 0.0, ("ldpt", 0.1): 20.0,
                                   ("ldpt", 5.0): 10.0, ("dpsgd", 0.1): -50.0})
    ratio = {(r["method"], r["eps"]): r["ratio"] for r in add_cost_ratio(rows)}
    assert ratio == pytest.approx({("classical", None): 1.0, ("ldpt", 0.1): 2.0,
                                   ("ldpt", 5.0): 2.5, ("dpsgd", 0.1): 1.5})
    # Table 10: the ablation's MSE drop from eps 0.1 to 5 as a share of the full model's
    ablation = [row("ldpt", 0.1, 0.9), row("ldpt", 5.0, 0.6),
                row("ldpt-no-channel", 0.1, 0.72), row("ldpt-no-channel", 5.0, 0.6),
                row("ldpt-k1", 0.1, 0.6)]  # no eps 5 row: no separation
    separation = {r["method"]: r["separation_pct"] for r in add_eps_separation(ablation)}
    assert separation == pytest.approx({"ldpt": 100.0, "ldpt-no-channel": 40.0,
                                        "ldpt-k1": None})


def test_the_list_fits_100_columns_and_says_which_grids_train(capsys):
    runner.print_list()
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= 100
    rows = {line.split()[0]: line for line in lines[2:] if not line.startswith(" ")}
    assert "classifier runs" in rows["qml-figure2"] and "12 h" in rows["qml-figure2"]
    assert "no training" in rows["table1"]


def test_table_notes_name_only_the_columns_present_and_round_to_four_digits():
    rows = [{"dataset": "ETTh1", "horizon": 24, "method": "ldpt", "eps": 0.1, "mse": 0.35712,
             "sigma": 5.8},
            {"dataset": "ETTh1", "horizon": 24, "method": "dpsgd", "eps": 0.1, "mse": 1.0}]
    report = runner.ExperimentReport(id="figure3", budget="quick", rows=rows,
                                     columns=runner.columns_of(rows))
    table = runner.markdown(report, experiment("figure3"))
    for absent in ("eps_train", "eps_advanced", "eps_spent"):
        assert absent not in table
    assert ("- `ldpt`: `eps` is the per-pass budget eps_s, local eps-QDP per pass (trace "
            "distance d = 0.1, full norm), accounting=paper; it holds for the released quantum "
            "features only") in table
    assert ("- `dpsgd`: `eps` is the target of global (eps, delta = 1e-6)-DP on the trained "
            "weights.") in table
    body = [line for line in table.splitlines() if line.startswith("| ETTh1")]
    assert [cell.strip() for cell in body[0].split("|")[4:7]] == ["0.1", "0.3571", "5.8"]
    assert "5.8000" not in table and "1.0000" not in table
    # with the composed column, the legend explains it, and only it
    legend = runner.epsilon_legend(rows, ["eps", "eps_advanced"])
    assert "`eps_advanced` composes the per-pass budget" in legend[0]
    assert "eps_train" not in " ".join(legend)


def test_figures_draw_mse_on_one_log_axis_stamped_with_the_budget():
    import io

    from qpriv.experiments import figures, qml_protocol
    from qpriv.experiments.grid import FULL, QUICK, budget_stamp
    from qpriv.experiments.registry import EXPERIMENTS

    rows = [{"method": "classical", "eps": None, "mse": 0.33, "paper_mse": 0.325},
            {"method": "ldpt", "eps": 0.1, "mse": 0.88, "paper_mse": 0.358},
            {"method": "ldpt", "eps": 1.0, "mse": 0.85},
            {"method": "dpsgd", "eps": 0.1, "mse": 1.4}]
    stamp = budget_stamp(QUICK)
    assert stamp == "budget quick: 1 epoch, 256 training windows, 128 evaluation windows, L = 336"
    # a budget without epochs names the method's: dpsgd-tuned's own only where it is drawn
    full = "budget full: the method's epochs ({}), every training window, every evaluation window"
    assert EXPERIMENTS["table3"].stamp(FULL).startswith(full.format("20"))
    assert EXPERIMENTS["table13"].stamp(FULL).startswith(full.format("20; dpsgd-tuned 50"))
    buffer = io.BytesIO()
    fig = figures.mse_vs_eps(rows, title="Figure 3", stamp=stamp, out=buffer)
    assert buffer.getvalue()[:4] == b"\x89PNG"
    (ax,) = fig.axes  # no split axes: the classical line and DP-SGD share one log y-axis
    assert ax.get_yscale() == "log"
    low, high = ax.get_ylim()
    assert low < 0.325 and high > 1.4
    assert stamp in [t.get_text() for t in fig.texts]
    horizon = figures.mse_vs_horizon([{**r, "dataset": "ETTh1", "horizon": h} for r in rows
                                      for h in (24, 48)], title="t", stamp=stamp,
                                     out=io.BytesIO())
    assert [a.get_yscale() for a in horizon.axes] == ["log"]
    assert stamp in [t.get_text() for t in horizon.texts]
    # the classifier figures say their own budget: epochs and seeds, not windows
    assert qml_protocol.budget_stamp(QUICK) == ("budget quick: 15 epochs (10 on images), 2 seeds, "
                                                "rates untuned")
    assert experiment("qml-figure7").stamp(QUICK) == qml_protocol.budget_stamp(QUICK)
    assert experiment("figure3").stamp(QUICK) == stamp


def test_reproduce_prints_the_size_of_what_it_wrote(tmp_path, capsys):
    assert main(["reproduce", "table1", "--budget", "tiny", "--out", str(tmp_path),
                 "--quiet"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    size = sum(p.stat().st_size for p in files)
    assert 1000 < size < 1_000_000  # table1's csv, table.md and report.json: kB
    assert last.startswith("wrote ") and last.endswith(
        f"kB in {len(files)} files under {tmp_path} (finished cells it reused are not counted)")
    assert float(last.split()[1].removesuffix("kB")) * 1000 == pytest.approx(size, rel=0.006)
    assert main(["reproduce", "table1", "--budget", "tiny", "--out", str(tmp_path),
                 "--json"]) == 0
    payload = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    # every file was written again (report.json's seconds may take a digit more or less)
    assert payload["written"] == {"files": len(files),
                                  "bytes": sum(p.stat().st_size for p in files)}


def test_what_was_written_counts_only_files_changed_since(tmp_path):
    old = tmp_path / "cells" / "old.json"
    old.parent.mkdir()
    old.write_text("x" * 5000)
    os.utime(old, (time.time() - 3600, time.time() - 3600))  # a finished cell, reused
    started = time.time() - 1
    (tmp_path / "table.md").write_text("y" * 1500)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "figure.png").write_bytes(b"z" * 1_200_000)
    written = written_since(tmp_path, since=started)
    assert written == Written(files=2, size=1_201_500)
    assert str(written) == "1.20MB in 2 files"
    assert str(Written(files=1, size=512)) == "512B in 1 file"
    assert str(written_since(tmp_path / "sub", since=time.time() + 60)) == "nothing"
    # a file stamped by the coarse clock a tick before the command's start is the command's
    stamped = tmp_path / "sub" / "figure.png"
    os.utime(stamped, (started - 0.004, started - 0.004))
    assert written_since(tmp_path / "sub", since=started) == Written(files=1, size=1_200_000)
    os.utime(stamped, (started - 2 * MTIME_LAG, started - 2 * MTIME_LAG))
    assert str(written_since(tmp_path / "sub", since=started)) == "nothing"


@pytest.mark.parametrize("name", sorted(n for n, m in METHODS.items() if m.family == BACKBONE))
def test_a_cells_cores_count_the_thread_that_draws_ahead_exactly_where_its_model_has_one(name):
    """The cores a grid asks Ray for follow the model the cell trains: one more than its
    torch threads where the built model draws its quantum features or noise ahead
    (LDPTForecaster.draws_ahead, computed from the modules it holds), none more elsewhere."""
    cell = Cell(method=name, eps=0.5 if METHODS[name].needs_eps else None)
    setup = setup_method(name, base=ModelConfig(seq_len=TINY.seq_len, horizon=cell.horizon,
                                                n_channels=7),
                         eps=cell.eps, overrides=dict(TINY.model))
    ahead = LDPTForecaster(setup.config).draws_ahead
    for threads in (1, 3):
        job = runner.reproduce_job(cell, metrics=("mse",), budget=TINY, out_dir=Path("o"),
                                   data_dir=None, threads=threads)
        assert job.cores == threads + int(ahead)


def test_ldpt_keeps_two_cores_busy_on_one_thread_and_the_closed_form_one():
    assert runner.cell_cores(Cell(method="ldpt", eps=0.1), budget=TINY, threads=1) == 2
    assert runner.cell_cores(Cell(method="classical"), budget=TINY, threads=1) == 1
    assert runner.cell_cores(Cell(method="dpsgd", eps=1.0), budget=TINY, threads=2) == 2
    assert runner.cell_cores(Cell(method="dp-linear", eps=1.0), budget=TINY, threads=1) == 1
