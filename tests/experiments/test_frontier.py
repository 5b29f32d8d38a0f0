"""``qpriv frontier``: the frontier's files hold its cells' numbers, finished cells are reused,
a guarantee that does not cover the chosen unit is flagged, bad input writes nothing."""

from __future__ import annotations

import io
import json
import os
import statistics
from dataclasses import replace
from types import SimpleNamespace

import pandas as pd
import pytest

from qpriv.cli import main
from qpriv.errors import InvalidInputError
from qpriv.experiments import figures, frontier, grid, runner
from qpriv.experiments.frontier import run_frontier
from qpriv.experiments.frontier_plan import (
    COVERS,
    FEATURE_PATH,
    FLOOR,
    NON_PRIVATE,
    frontier_cell,
    linear_settings,
    plan,
    role_of,
)
from qpriv.experiments.frontier_render import frontier_stamp
from qpriv.experiments.frontier_rows import (
    SCALER_CLEAR,
    SCALER_DECLARED,
    SCALER_NO_DATA,
    SCALER_NOT_PRIVATE,
    SCALER_PER_WINDOW,
    SCALER_PRIVATE,
    reading,
    scaler_of,
)
from qpriv.experiments.grid import FULL, QUICK, TINY
from qpriv.forecasting.datasets import file_sha256
from qpriv.privacy.claims import COVERS_WEIGHTS, Accounting, Kind, PrivacyClaim, Unit


def _last_json(capsys) -> dict:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def tiny_frontier(tmp_path_factory):
    """The default methods at the tiny budget, eps 0.1 and 1, two noise seeds (about 15 s)."""
    if not os.environ.get("QPRIV_DATA_DIR"):
        pytest.skip("QPRIV_DATA_DIR (the ETT csv files) not set")
    out = tmp_path_factory.mktemp("frontier")
    report = run_frontier(unit="record", eps=(0.1, 1.0), seeds=2, budget=TINY, out_dir=out,
                          progress=False)
    return out, report


def test_roles_follow_what_each_guarantee_covers():
    assert role_of("dp-linear", unit="record") == COVERS
    assert role_of("dp-linear", unit="window") == COVERS
    assert role_of("dpsgd", unit="window") == COVERS
    # DP-SGD states its record guarantee through the structured-subsampling accountant
    assert role_of("dpsgd", unit="record") == COVERS
    assert role_of("dpsgd-dlinear", unit="record") == COVERS
    assert role_of("ldpt", unit="record") == FEATURE_PATH
    assert role_of("public", unit="record") == FLOOR
    assert [role_of(m, unit="record") for m in ("ridge", "classical")] == [NON_PRIVATE] * 2
    with pytest.raises(InvalidInputError, match="'bottleneck' takes an eps but states no"):
        role_of("bottleneck", unit="record")


def test_seeds_and_linear_settings():
    series = {s.method: s for s in plan(unit="record", eps=(1.0, 0.1), methods=(
        "dp-linear", "dpsgd", "public", "ridge", "classical"), seeds=5, backbone_seeds=1)}
    assert len(series["dp-linear"].seeds) == 5 and series["dp-linear"].eps == (0.1, 1.0)
    assert len(series["dpsgd"].seeds) == len(series["classical"].seeds) == 1
    assert len(series["public"].seeds) == len(series["ridge"].seeds) == 1  # no noise
    # the linear family needs L >= 168 (7-day profile): L = 336 at every budget
    assert linear_settings(TINY) == {"seq_len": 336, "max_train_windows": 64,
                                     "max_eval_windows": 32}
    assert linear_settings(QUICK) == {"seq_len": 336, "max_train_windows": None,
                                      "max_eval_windows": QUICK.max_eval_windows}
    cell = frontier_cell(series["dp-linear"], eps=0.1, seed=2024, dataset="ETTh1", horizon=24)
    assert cell.key == "ETTh1-H24-dp-linear-eps0.1-unitrecord-s2024"
    cell = frontier_cell(series["dpsgd"], eps=0.1, seed=2024, dataset="ETTh1", horizon=24)
    assert cell.key == "ETTh1-H24-dpsgd-eps0.1-unitrecord-s2024"
    window = {s.method: s for s in plan(unit="window", eps=(0.1,), methods=("dpsgd",),
                                        seeds=1, backbone_seeds=1)}["dpsgd"]
    # at the window unit the key is the one qpriv reproduce shares
    assert frontier_cell(window, eps=0.1, seed=2024, dataset="ETTh1",
                         horizon=24).key == "ETTh1-H24-dpsgd-eps0.1-s2024"


@pytest.mark.needs_ett
def test_files_hold_the_cells_numbers(tiny_frontier):
    out, report = tiny_frontier
    where = out / "ETTh1-H24-record" / "tiny"
    assert report.files["csv"] == str(where / "frontier.csv")
    assert report.failures == []
    frame = pd.read_csv(where / "frontier.csv")
    assert len(frame) == len(report.rows) == 2 + 2 + 2 + 3  # dp-linear, dpsgd, ldpt x 2; refs
    assert set(frame["unit"]) == {"record"}
    cells = out / "cells" / "tiny"
    for _, row in frame.iterrows():
        seeds = [int(s) for s in str(row["seeds"]).split()]
        mses = []
        for seed in seeds:
            eps = None if pd.isna(row["eps"]) else float(row["eps"])
            unit = "-unitrecord" if row["method"] in ("dp-linear", "dpsgd") else ""
            key = "-".join(["ETTh1", "H24", row["method"], *([f"eps{eps:g}"] if eps else [])])
            result = json.loads((cells / f"{key}{unit}-s{seed}" / "result.json").read_text())
            mses.append(result["mse"])
        assert row["n_seeds"] == len(mses) == (2 if row["method"] == "dp-linear" else 1)
        assert row["mse_mean"] == pytest.approx(statistics.fmean(mses), rel=1e-12)
        if len(mses) > 1:
            assert row["mse_sd"] == pytest.approx(statistics.stdev(mses), rel=1e-9)
    table = (where / "frontier.md").read_text()
    body = [line for line in table.splitlines() if line.startswith("| ") and "method" not in line]
    assert len(body) == len(frame) and all("| record |" in line for line in body)
    png = (where / "frontier.png").read_bytes()
    assert png[:4] == b"\x89PNG" and len(png) > 10_000


@pytest.mark.needs_ett
def test_a_guarantee_that_misses_the_unit_is_flagged(tiny_frontier):
    out, _ = tiny_frontier
    frame = pd.read_csv(out / "ETTh1-H24-record" / "tiny" / "frontier.csv").set_index("method")
    dpsgd = frame.loc["dpsgd"].iloc[0]
    assert dpsgd["role"] == COVERS and dpsgd["claim_unit"] == "record"
    assert dpsgd["covers_unit"] and dpsgd["covers_weights"]
    ldpt = frame.loc["ldpt"].iloc[0]
    assert not ldpt["covers_unit"] and not ldpt["covers_weights"]
    assert "covers neither the targets nor the weights" in ldpt["reading"]
    linear = frame.loc["dp-linear"].iloc[0]
    assert linear["covers_unit"] and linear["covers_weights"] and linear["delta"] == 1e-6
    assert linear["claim_unit"] == "record"
    # what each row does with the z-score scaler, a statistic of the training split
    assert linear["scaler"] == SCALER_PRIVATE
    assert ldpt["scaler"] == SCALER_CLEAR
    assert dpsgd["scaler"] == SCALER_PRIVATE  # record-unit DP-SGD: private by default
    assert frame.loc["public", "scaler"] == SCALER_NO_DATA
    assert frame.loc["classical", "scaler"] == SCALER_NOT_PRIVATE
    table = (out / "ETTh1-H24-record" / "tiny" / "frontier.md").read_text()
    assert SCALER_PRIVATE in table and "not itself private" in table


def test_a_guarantee_given_a_clear_scaler_says_so():
    def fit(raw: dict, claims: dict | None = None) -> SimpleNamespace:
        return SimpleNamespace(raw=raw, claims=claims or {})

    assert scaler_of(COVERS, [fit({"fit": {"scaler": "none"}})]) == SCALER_PER_WINDOW
    assert scaler_of(COVERS, [fit({"fit": {"scaler": "data"}})]) == SCALER_DECLARED
    assert scaler_of(COVERS, [fit({"fit": {"scaler": "private"}})]) == SCALER_PRIVATE
    assert scaler_of(COVERS, [fit({"epochs": 10})]) == SCALER_CLEAR  # a trained method
    # DP-SGD at the record unit names its scaler in its claim
    for treatment, shown in (("private", SCALER_PRIVATE), ("public", SCALER_DECLARED)):
        claim = PrivacyClaim(value=1.0, delta=1e-6, kind=Kind.GLOBAL_DP,
                             accounting=Accounting.RIGOROUS, unit=Unit.RECORD,
                             covers=COVERS_WEIGHTS, details={"scaler": treatment})
        assert scaler_of(COVERS, [fit({"epochs": 10}, {"eps": claim})]) == shown
    assert scaler_of(FLOOR, []) == SCALER_NO_DATA
    # DP-SGD at the window unit: its guarantee covers the unit and the weights given the
    # loader's scaler, which it does not cover
    words = reading(COVERS, method_name="dpsgd", unit="window", claim_unit="window",
                    scaler=SCALER_CLEAR)
    assert words == ("covers the window unit and the weights, given the loader's scaler (in "
                     "the clear)")
    assert reading(COVERS, method_name="dp-linear", unit="window", claim_unit="window",
                   scaler=SCALER_PER_WINDOW) == "covers the window unit and the weights"


@pytest.mark.needs_ett
def test_a_finished_cell_is_not_recomputed(tiny_frontier, monkeypatch):
    out, first = tiny_frontier

    def refuse(**kwargs):
        raise AssertionError("a finished cell was recomputed")

    monkeypatch.setattr(frontier, "run_forecast", refuse)
    monkeypatch.setattr(runner, "run_forecast", refuse)
    again = run_frontier(unit="record", eps=(0.1, 1.0), seeds=2, budget=TINY, out_dir=out,
                         progress=False)
    assert again.failures == []
    assert [r["mse_mean"] for r in again.rows] == [r["mse_mean"] for r in first.rows]


@pytest.mark.parametrize("argv, needle", [
    (["--eps", "0"], "eps 0.0 is not a finite number > 0"),
    (["--eps", "-1", "1"], "eps -1.0 is not a finite number > 0"),
    (["--unit", "token"], "invalid choice: 'token'"),
    (["--methods", "nope"], "unknown method 'nope'"),
    (["--methods", "dp-lin"], "unknown method 'dp-lin' (did you mean 'dp-linear'?); known "
     "methods: classical, dlinear, dp-input, dp-linear"),
    (["--methods", "bottleneck"], "'bottleneck' takes an eps but states no privacy guarantee"),
    (["--eps", "0.1", "0.1"], "eps 0.1 given more than once"),
    (["--quick", "--budget", "full"], "ask for two budgets"),
    # an eps outside a chosen method's range is refused before any cell runs (it was one
    # failed cell per seed, exit 1, and a report of nothing)
    (["--eps", "1e308", "--methods", "dp-linear"],
     "--eps = 1e+308 is outside the valid range (0, 1e+06]"),
    (["--eps", "1e308", "--unit", "window", "--methods", "dp-linear"], "promises nothing"),
    (["--eps", "1e308", "--methods", "dpsgd"], "(0, 1e+06]; above 1e+06 a budget promises nothing"),
    (["--eps", "2e6", "--methods", "dpsgd-linear"], "is outside the valid range (0, 1e+06]"),
    (["--eps", "1", "0.001", "--methods", "dpsgd"], "no DP-SGD noise multiplier for eps = "
     "0.001"),
    (["--eps", "800", "--methods", "ldpt"], "outside the valid range (0, 700]"),
    (["--columns", "a"], "--columns chooses the channels of a --csv file"),
    (["--sep", ";"], "--sep says how a --csv file is written"),
])
def test_bad_input_exits_2_in_one_line_and_writes_nothing(tmp_path, capsys, argv, needle):
    out = tmp_path / "out"
    assert main(["frontier", "--out", str(out), "--budget", "tiny", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0]
    assert not out.exists()


@pytest.mark.needs_ett
@pytest.mark.parametrize("methods", [["ridge"], ["ldpt"], ["dp-linear", "dpsgd"]])
def test_a_horizon_the_data_cannot_hold_is_refused_before_any_cell(tmp_path, capsys,
                                                                   methods):
    """The loader's check, made once up front (it was one failed cell each, exit 1)."""
    out = tmp_path / "out"
    assert main(["frontier", "--horizon", "100000", "--budget", "tiny", "--methods", *methods,
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "horizon H = 100000 needs at least" in err[0]
    assert not out.exists()


@pytest.mark.needs_ett
@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc")
def test_an_out_folder_that_cannot_be_made_is_the_only_line(capsys):
    """Checked by making it before the progress line (it printed ``cells: 1 cell`` first)."""
    assert main(["frontier", "--budget", "tiny", "--methods", "ridge", "--out",
                 "/proc/qpriv-frontier-test"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--out /proc/qpriv-frontier-test cannot be created" in err[0]


@pytest.mark.needs_ett
def test_a_training_runs_folder_is_refused_as_out_and_left_as_it_was(tmp_path, capsys):
    """A frontier used to add its cells and reports inside a finished run's folder."""
    out = tmp_path / "run"
    assert main(["train", "--method", "public", "--out", str(out), "--quiet"]) == 0
    before = sorted(p.name for p in out.iterdir())
    capsys.readouterr()
    assert main(["frontier", "--budget", "tiny", "--methods", "ridge", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"qpriv: error: --out {out} holds a training run (config.json, linear.npz, "
                   "result.json); a frontier writes its cells and reports beside no run: give "
                   "it a folder of its own"]
    assert sorted(p.name for p in out.iterdir()) == before


def test_library_refuses_an_unknown_unit(tmp_path):
    with pytest.raises(InvalidInputError, match="unit 'token' is not a frontier unit"):
        run_frontier(unit="token", out_dir=tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()


@pytest.mark.needs_ett
def test_quick_runs_end_to_end_at_a_tiny_budget(tmp_path, capsys, monkeypatch):
    """``--quick`` takes the quick budget; here the quick budget is made tiny."""
    monkeypatch.setitem(grid.BUDGETS, "quick", replace(TINY, name="quick"))
    out = tmp_path / "out"
    code = main(["frontier", "--quick", "--eps", "1", "--seeds", "1", "--methods", "dp-linear",
                 "dpsgd", "public", "--out", str(out), "--json"])
    payload = _last_json(capsys)
    assert code == 0 and payload["budget"] == "quick" and payload["unit"] == "record"
    assert [(r["method"], r["eps"]) for r in payload["rows"]] == [
        ("dp-linear", 1.0), ("dpsgd", 1.0), ("public", None)]
    assert set(payload["files"]) == {"csv", "markdown", "png", "report"}
    assert all(os.path.isfile(path) for path in payload["files"].values())
    assert (out / "cells" / "quick" / "ETTh1-H24-dpsgd-eps1-unitrecord-s2024"
            / "result.json").is_file()


@pytest.mark.needs_ett
def test_cli_prints_the_table(tmp_path, capsys):
    assert main(["frontier", "--budget", "tiny", "--eps", "1", "--seeds", "1", "--methods",
                 "dp-linear", "public", "--out", str(tmp_path), "--quiet"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("ETTh1 H=24: test MSE vs eps at the record unit")
    lines = text.splitlines()
    assert max(map(len, lines[:-3])) <= 100  # the Markdown table ran to 250 columns (issue 41)
    assert lines[1].split() == ["method", "eps", "reading", "test", "MSE", "(mean", "±", "sd)",
                                "seeds"]
    assert lines[-3].startswith("every column, and how to read each row: ")
    assert lines[-3].endswith("frontier.md")
    assert "written to" in lines[-2]
    report = tmp_path / "ETTh1-H24-record" / "tiny" / "report.html"
    assert text.splitlines()[-1] == f"report: {report}" and report.is_file()


def test_the_figure_has_one_log_axis_labelled_points_and_its_budget():
    def row(method, eps, mse, covers):
        return {"method": method, "eps": eps, "mse_mean": mse, "mse_sd": 0.001,
                "covers_unit": covers, "covers_weights": covers, "reading": "r", "n_seeds": 5}

    rows = [row("dp-linear", 0.1, 0.338, True), row("dp-linear", 1.0, 0.326, True),
            row("dpsgd", 0.1, 0.89, False), row("public", None, 0.337, True)]
    buffer = io.BytesIO()
    stamp = frontier_stamp(QUICK)
    fig = figures.frontier_plot(rows, title="t", stamp=stamp, out=buffer)
    assert buffer.getvalue()[:4] == b"\x89PNG"
    # one panel (no split y-axis): the covering lines and DP-SGD share a log axis
    assert len(fig.axes) == 1 and fig.axes[0].get_yscale() == "log"
    low, high = fig.axes[0].get_ylim()
    assert low < 0.326 and high > 0.89
    # the covering points carry their MSE, since they lie close to the floor
    assert sorted(t.get_text() for t in fig.axes[0].texts) == ["0.326", "0.338"]
    assert stamp == ("budget quick: 1 epoch, 256 training windows, 128 evaluation windows, "
                     "L = 336; linear family: L = 336, every training window")
    assert [t.get_text() for t in fig.texts if t.get_text().startswith("budget")] == [stamp]


def test_labels_and_ticks_stay_readable_across_four_decades():
    """ETTh1, H = 96, record unit: the transformer's DP-SGD at 1305 above a floor of 0.414
    put every minor tick's label on the axis (700, 500, 400, 300 ran into each other), and at
    eps 1 dpsgd-linear's label (0.659) hid under dpsgd-dlinear's (0.72)."""
    def row(method, eps, mse):
        return {"method": method, "eps": eps, "mse_mean": mse, "mse_sd": 0.0,
                "covers_unit": True, "covers_weights": True, "reading": "r", "n_seeds": 1}

    rows = [row(m, e, v) for m, values in (("dpsgd", (1305.0, 3.538)),
                                           ("dpsgd-linear", (21.1, 0.659)),
                                           ("dpsgd-dlinear", (1.85, 0.72)),
                                           ("dp-linear", (0.413, 0.3858)))
            for e, v in zip((0.1, 1.0), values, strict=True)]
    rows.append(row("public", None, 0.4137))
    fig = figures.frontier_plot(rows, title="t", stamp="s", out=io.BytesIO())
    ax = fig.axes[0]

    def clashes(texts):
        boxes = [t.get_window_extent() for t in texts]
        return [(texts[i].get_text(), texts[j].get_text()) for i in range(len(texts))
                for j in range(i) if boxes[i].overlaps(boxes[j])]

    assert sorted(t.get_text() for t in ax.texts) == sorted(
        ["1305", "3.54", "21.1", "0.659", "1.85", "0.72", "0.413", "0.386"])
    assert clashes(ax.texts) == []
    # each label still beside its own point: within 25 points of it, up or down
    for label in ax.texts:
        assert abs(label.xyann[1]) < 25
    ticks = [t for t in ax.get_yticklabels(minor=False) + ax.get_yticklabels(minor=True)
             if t.get_text() and ax.get_ylim()[0] <= t.get_position()[1] <= ax.get_ylim()[1]]
    assert clashes(ticks) == []
    assert {"1", "10", "100", "1000", "0.5", "5", "50"} <= {t.get_text() for t in ticks}
    # three digits would round 999.7 to "1e+03": whole numbers from there on
    rows[0]["mse_mean"] = 999.7
    fig = figures.frontier_plot(rows, title="t", stamp="s", out=io.BytesIO())
    assert "1000" in [t.get_text() for t in fig.axes[0].texts]


def test_references_that_score_alike_stay_apart_by_their_dash():
    """ETTh2, H = 24: ridge 0.1746 and classical 0.1749. Drawn solid both, the second line
    hid the first."""
    rows = [{"method": m, "eps": None, "mse_mean": mse, "reading": "r", "covers_unit": False,
             "covers_weights": False} for m, mse in (("ridge", 0.1746), ("classical", 0.1749))]
    rows.append({"method": "public", "eps": None, "mse_mean": 0.206, "reading": "floor",
                 "covers_unit": True, "covers_weights": True})
    fig = figures.frontier_plot(rows, title="t", stamp="s", out=io.BytesIO())
    lines = {line.get_label().split(":")[0]: line for line in fig.axes[0].get_lines()}
    assert set(lines) == {"ridge", "classical", "public"}
    styles = {name: (line.get_linestyle(), line.get_color()) for name, line in lines.items()}
    assert len({style for style, _ in styles.values()}) == 3
    assert len({colour for _, colour in styles.values()}) == 3


def test_a_figure_of_only_failed_cells_says_so_without_a_warning(recwarn):
    rows = [{"method": "dp-linear", "eps": 0.1, "mse_mean": None, "reading": "r",
             "covers_unit": True, "covers_weights": True},
            {"method": "public", "eps": None, "mse_mean": None, "reading": "floor",
             "covers_unit": True, "covers_weights": True}]
    fig = figures.frontier_plot(rows, title="t", stamp="s", out=io.BytesIO())
    assert [t.get_text() for t in fig.axes[0].texts] == [
        "no cell has a test MSE: frontier.md lists the failed cells"]
    assert fig.axes[0].get_legend() is None
    assert not [w for w in recwarn if "legend" in str(w.message)]  # matplotlib's empty legend


def test_the_budget_line_names_only_the_families_on_the_frontier():
    backbone = ("budget full: the method's epochs (20), every training window, every "
                "evaluation window, L = 336")
    tuned = backbone.replace("(20)", "(20; dpsgd-tuned 50)")
    assert frontier_stamp(FULL, methods=["dp-linear", "public", "ridge"]) == (
        "budget full: linear family: L = 336, every training window")
    assert frontier_stamp(FULL, methods=["ldpt", "classical"]) == backbone
    both = frontier_stamp(FULL, methods=["dp-linear", "dpsgd"])
    assert both == f"{backbone}; linear family: L = 336, every training window"
    # dpsgd-tuned's own 50 epochs are named where it is drawn, or may be (no methods given)
    assert frontier_stamp(FULL, methods=["dpsgd-tuned", "classical"]) == tuned
    assert frontier_stamp(FULL).startswith(f"{tuned}; linear family")


def _own_csv(path, *, n: int = 900, seed: int = 7):
    """A daily two-channel series with a weekly cycle, written with ';' and a 'Zeit' column."""
    import numpy as np

    steps = np.arange(n)
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({
        "Zeit": pd.date_range("2001-01-01", periods=n, freq="D").strftime("%d.%m.%Y"),
        "a": np.sin(2 * np.pi * steps / 7) + 0.3 * rng.standard_normal(n),
        "b": np.cos(2 * np.pi * steps / 7) + 0.3 * rng.standard_normal(n)})
    frame.to_csv(path, sep=";", index=False)
    return path


def test_the_frontier_of_a_users_own_csv(tmp_path, capsys):
    """Issue 42, D3 / item 2: `frontier --csv` (it was "unrecognized"), the closed-form methods
    by default, the file read as `train --csv` reads it; the folder and cells carry the file's
    digest, so that another file of the same name is not read from the first one's cells."""
    csv = _own_csv(tmp_path / "meters.csv")
    out = tmp_path / "out"
    argv = ["frontier", "--csv", str(csv), "--sep", ";", "--date-column", "Zeit",
            "--date-format", "%d.%m.%Y", "--horizon", "7", "--eps", "1", "--seeds", "2",
            "--out", str(out), "--json"]
    assert main(argv) == 0
    report = _last_json(capsys)
    rows = {row["method"]: row for row in report["rows"]}
    assert sorted(rows) == ["dp-linear", "public", "ridge"]  # CSV_METHODS, seconds in all
    assert rows["dp-linear"]["n_seeds"] == 2 and rows["dp-linear"]["claim_unit"] == "record"
    digest = file_sha256(csv)[:8]
    folder = out / f"meters-{digest}-H7-record" / "full"
    assert (folder / "frontier.csv").is_file() and (folder / "report.html").is_file()
    # the cells read the file: ridge on it equals ridge trained on it with `train`
    assert main(["train", "--csv", str(csv), "--sep", ";", "--date-column", "Zeit",
                 "--date-format", "%d.%m.%Y", "--horizon", "7", "--method", "ridge",
                 "--quiet", "--json"]) == 0
    assert _last_json(capsys)["mse"] == pytest.approx(rows["ridge"]["mse_mean"], rel=1e-12)
    _own_csv(csv, seed=8)  # the same name, other numbers: other cells, another folder
    assert main(argv) == 0
    again = {row["method"]: row for row in _last_json(capsys)["rows"]}
    assert again["ridge"]["mse_mean"] != rows["ridge"]["mse_mean"]
    assert (out / f"meters-{file_sha256(csv)[:8]}-H7-record").is_dir()
