"""What is committed under ``results/`` is what ``scripts/publish_results.py`` writes for a
finished full-budget grid, or a table a script of its own regenerates (:data:`TABLES`), and the
documentation's results page names every folder."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from qpriv.experiments.publish import MARK

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = sorted(p for p in (ROOT / "results").iterdir() if p.is_dir())
TABLES = {"audits": ("scripts/audit_table.py", ("table.md", "audits.csv"))}
"""The folders that are not a grid: each one's script and the files it writes."""
GRIDS = [p for p in FOLDERS if p.name not in TABLES]


def _files(readme: str) -> list[str]:
    line = next(line for line in readme.splitlines() if line.startswith("- files: "))
    return re.findall(r"`([^`]+)`", line)


@pytest.mark.parametrize("folder", GRIDS, ids=[p.name for p in GRIDS])
def test_each_folder_is_a_published_full_budget_grid(folder):
    readme = (folder / "README.md").read_text()
    assert readme.startswith(MARK)
    assert "- budget: `full`" in readme
    assert re.search(r"- command: `qpriv (reproduce|frontier) ", readme)
    files = _files(readme)
    assert files and all((folder / name).is_file() for name in files)
    assert not list(folder.rglob("*.pt")) and not list(folder.rglob("config.json"))
    cells = re.search(r"of each of the (\d+) cells", readme)
    if cells:
        assert len(list((folder / "cells").iterdir())) == int(cells.group(1))


@pytest.mark.parametrize("name", sorted(TABLES))
def test_each_table_folder_holds_what_its_script_writes_and_names_it(name):
    script, files = TABLES[name]
    folder = ROOT / "results" / name
    assert (ROOT / script).is_file()
    assert sorted(p.name for p in folder.iterdir()) == sorted(files)
    assert f"python {script} --dest results/{name}" in (folder / files[0]).read_text()


def _named(section: str) -> set[str]:
    """The folders a README section names: `results/NAME/`, a `{record,window}` pair, or a
    range `results/qml-figureA/` ... `results/qml-figureB/`."""
    names: set[str] = set()
    for name in re.findall(r"`results/([^`/]+)/`", section):
        if "{record,window}" in name:
            names |= {name.replace("{record,window}", unit) for unit in ("record", "window")}
        else:
            names.add(name)
    for stem, first, last in re.findall(
            r"`results/([a-z-]+?)(\d+)/` \.\.\. `results/\1(\d+)/`", section):
        names |= {f"{stem}{n}" for n in range(int(first), int(last) + 1)}
    return names


def test_the_readme_names_every_folder():
    named = _named((ROOT / "docs" / "results.md").read_text())
    assert {p.name for p in FOLDERS} <= named, {p.name for p in FOLDERS} - named


@pytest.mark.parametrize("folder", [p for p in FOLDERS if p.name.startswith("qml-figure")],
                         ids=lambda p: p.name)
def test_the_classifier_figures_are_the_full_budget(folder):
    rows = pd.read_csv(folder / "results.csv")
    assert (rows["seeds"] == 10).all()
    if "epoch" in rows:  # a row per epoch (Figures 3-6, 8, 10)
        assert rows["epoch"].max() == 100
        assert (rows.groupby("variant")["epoch"].nunique() == 100).all()
    else:  # a row per configuration, after its last epoch (Figures 2 and 7; a diverged
        # run stops early, so only the longest need have run the protocol's 100 epochs)
        assert rows["epochs"].max() == 100
