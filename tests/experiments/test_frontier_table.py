"""The README's "frontier across horizons" table is what ``scripts/frontier_table.py`` prints
from the frontiers published in ``results/`` and the paper's numbers: regenerate it there
whenever a folder in ``results/`` changes."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "frontier_table.py"


def _script():
    spec = importlib.util.spec_from_file_location("frontier_table", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_holds_the_table_the_script_prints():
    printed = _script().table(ROOT / "results")
    assert printed in (ROOT / "README.md").read_text()


def test_every_setting_has_both_units_published_and_its_paper_numbers():
    script = _script()
    published = script.frontiers(ROOT / "results")
    for dataset, horizon in script.SETTINGS:
        for unit in ("record", "window"):
            rows = published[(dataset, horizon, unit)]
            assert {r["method"] for r in rows} == {"dp-linear", "public", "ridge"}
            assert all(r["budget"] == "full" and r["failed_seeds"] == "0" for r in rows)
        assert script.paper(dataset, horizon, "ldpt", 0.1) is not None
    assert script.paper("ETTh1", 24, "dpsgd", 1.0) == ("0.6986", "table3")
    assert script.paper("ETTh1", 720, "dpsgd", 0.1) is None  # the paper prints none
