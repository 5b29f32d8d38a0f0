"""The "frontier across horizons" table of ``docs/frontier.md`` is what
``scripts/frontier_table.py`` prints
from the frontiers published in ``results/`` and the paper's numbers: regenerate it there
whenever a folder in ``results/`` changes."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_readme_holds_the_table_the_script_prints(load_script):
    printed = load_script("frontier_table").table(ROOT / "results")
    assert printed in (ROOT / "docs" / "frontier.md").read_text()


def test_the_readme_holds_the_record_dpsgd_table_the_script_prints(load_script):
    """The README's record-unit DP-SGD table is the published folders' numbers: regenerate it
    with ``scripts/frontier_table.py --record-dpsgd`` whenever one is re-published."""
    script = load_script("frontier_table")
    printed = script.record_dpsgd_table(ROOT / "results")
    assert printed in (ROOT / "README.md").read_text()
    rows = [line.split(" | ") for line in printed.splitlines()[2:]]
    assert [row[0] for row in rows] == [
        "| ETTh1 H = 24", "| ETTh1 H = 96", "| ETTh2 H = 24", "| ETTh2 H = 96"]
    header = printed.splitlines()[0].split(" | ")
    linear = [i for i, name in enumerate(header) if "transformer" not in name
              and "tuned" not in name]
    assert all(script.NOT_RUN not in row[i] for row in rows for i in linear)  # all published
    assert rows[0][1] == "0.3423"  # the floor: the published public row


def test_the_record_dpsgd_table_reads_each_cell_and_marks_the_missing(load_script, tmp_path):
    script = load_script("frontier_table")
    rows = [{"method": "public", "eps": "", "mse_mean": "0.5"},
            {"method": "dpsgd", "eps": "1.0", "mse_mean": "2.5"},
            {"method": "dp-linear", "eps": "0.1", "mse_mean": "0.45", "mse_sd": "0.01"},
            {"method": "dp-linear", "eps": "1.0", "mse_mean": "0.4", "mse_sd": "0.002"},
            {"method": "classical", "eps": "", "mse_mean": "0.3"}]
    _publish(tmp_path / "frontier-X-H7-record-dpsgd", rows)
    _publish(tmp_path / "frontier-X-H7-record", rows[:1])  # another kind of folder: not read
    lines = script.record_dpsgd_table(tmp_path).splitlines()
    assert len(lines) == 3
    cells = lines[2].split(" | ")
    assert cells[:4] == ["| X H = 7", "0.5", "0.45 ± 0.01 / 0.4 ± 0.002",
                         f"{script.NOT_RUN} / 2.5"]
    assert cells[-2:] == [script.NOT_RUN, "0.3 |"]  # dlinear not run; classical read
    assert lines[0].endswith(f"| dlinear | {script.TWIN} |")
    assert lines[1].count("|---") == lines[0].count(" | ") + 1


def test_every_setting_has_both_units_published_and_its_paper_numbers(load_script):
    script = load_script("frontier_table")
    published = script.frontiers(ROOT / "results")
    for dataset, horizon in script.SETTINGS:
        for unit in ("record", "window"):
            rows = published[(dataset, horizon, unit)]
            assert {r["method"] for r in rows} >= {"dp-linear", "public", "ridge"}
            assert all(r["budget"] == "full" and r["failed_seeds"] == "0" for r in rows)
        assert script.paper(dataset, horizon, "ldpt", 0.1) is not None
    assert script.paper("ETTh1", 24, "dpsgd", 1.0) == ("0.6986", "table3")
    assert script.paper("ETTh1", 720, "dpsgd", 0.1) is None  # the paper prints none


def _publish(folder: Path, rows: list[dict]) -> None:
    folder.mkdir(parents=True)
    columns = ["method", "eps", "unit", "mse_mean", "mse_sd", "budget", "failed_seeds"]
    lines = [",".join(columns)] + [",".join(str(r.get(c, "")) for c in columns) for r in rows]
    (folder / "frontier.csv").write_text("\n".join(lines) + "\n")


def test_the_linear_frontier_gives_the_linear_rows_and_the_full_one_the_backbone(
        load_script, tmp_path):
    script = load_script("frontier_table")
    linear = [{"method": m, "eps": e, "mse_mean": v, "mse_sd": 0.001}
              for m, e, v in (("public", "", 0.35), ("ridge", "", 0.32),
                              ("dp-linear", 0.1, 0.349), ("dp-linear", 1.0, 0.34))]
    _publish(tmp_path / "frontier-ETTh1-H24-record-linear", linear)
    _publish(tmp_path / "frontier-ETTh1-H24-window-linear", linear)
    full = [{**r, "mse_mean": round(r["mse_mean"] - 0.01, 4)} for r in linear] + [
        {"method": "ldpt", "eps": 0.1, "mse_mean": 0.5422},
        {"method": "classical", "eps": "", "mse_mean": 0.3253}]
    _publish(tmp_path / "frontier-ETTh1-H24-record", full)

    published = script.frontiers(tmp_path)
    assert {r["method"] for r in published[("ETTh1", 24, "record")]} >= {"ldpt", "classical"}
    record = published[("ETTh1", 24, "record")]
    # the linear methods from the linear frontier (re-published with their design), once each
    assert [float(r["mse_mean"]) for r in record if r["method"] == "public"] == [0.35]
    assert len([r for r in record if r["method"] == "dp-linear"]) == 2
    assert {r["method"] for r in published[("ETTh1", 24, "window")]} == {
        "public", "ridge", "dp-linear"}  # no full window frontier: the linear one stays
    printed = script.table(tmp_path).splitlines()

    def row(method: str) -> str:
        return next(line for line in printed if f"| `{method}`" in line and "ETTh1, 24" in line)

    assert "0.5422 / queued" in row("ldpt")  # eps 0.1 from the frontier; 1 not in it
    assert "0.3253" in row("classical")
    # capture = (floor - private) / (floor - ridge): (0.35 - 0.349) / 0.03 and 0.01 / 0.03
    assert "| 3 % / 33 % " in row("dp-linear")


def test_the_floor_verdict_needs_a_spread_and_reads_two_sd(load_script):
    verdict = load_script("frontier_table").verdict
    cells = [{"mse_mean": "0.3397", "mse_sd": "0.0023", "n_seeds": "20"},
             {"mse_mean": "0.3300", "mse_sd": "0.0010", "n_seeds": "5"}]
    line = verdict("ETTh1, 24", "record", 0.3423, cells)
    # -0.0026 is within two sd of one run (0.0046): level, though the mean is below
    assert "eps 0.1: level with it (within 2 sd of one run), -0.0026" in line
    assert "eps 1: beats it, -0.0123" in line
    one = verdict("ETTh1, 24", "record", 0.3423,
                  [{"mse_mean": "0.30", "mse_sd": "", "n_seeds": "1"}, None])
    assert "eps 0.1: one seed, no spread: no verdict" in one and "eps 1: queued" in one
