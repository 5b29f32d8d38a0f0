"""The README's "frontier across horizons" table is what ``scripts/frontier_table.py`` prints
from the frontiers published in ``results/`` and the paper's numbers: regenerate it there
whenever a folder in ``results/`` changes."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_readme_holds_the_table_the_script_prints(load_script):
    printed = load_script("frontier_table").table(ROOT / "results")
    assert printed in (ROOT / "README.md").read_text()


def test_every_setting_has_both_units_published_and_its_paper_numbers(load_script):
    script = load_script("frontier_table")
    published = script.frontiers(ROOT / "results")
    for dataset, horizon in script.SETTINGS:
        for unit in ("record", "window"):
            rows = published[(dataset, horizon, unit)]
            assert {r["method"] for r in rows} == {"dp-linear", "public", "ridge"}
            assert all(r["budget"] == "full" and r["failed_seeds"] == "0" for r in rows)
        assert script.paper(dataset, horizon, "ldpt", 0.1) is not None
    assert script.paper("ETTh1", 24, "dpsgd", 1.0) == ("0.6986", "table3")
    assert script.paper("ETTh1", 720, "dpsgd", 0.1) is None  # the paper prints none
