"""``scripts/publish_results.py``: only a finished grid is published, only its small files are
copied, the README says how it was made, and a refusal is one line with nothing written."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from qpriv.errors import InvalidInputError
from qpriv.experiments import publish as pub
from qpriv.experiments.frontier import run_frontier
from qpriv.experiments.grid import TINY, Cell
from qpriv.experiments.registry import experiment
from qpriv.experiments.runner import files_of_cell, has_model, reproduce_job, run_experiment

COMMAND = "qpriv reproduce table9 --budget tiny --out runs/tiny"



@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    """Table 9 (8 cells, each with its attack) and a linear frontier, finished at the tiny
    budget (about 40 s)."""
    if not os.environ.get("QPRIV_DATA_DIR"):
        pytest.skip("QPRIV_DATA_DIR (the ETT csv files) not set")
    out = tmp_path_factory.mktemp("grid")
    run_experiment("table9", budget=TINY, out_dir=out, progress=False)
    run_frontier(unit="record", eps=(0.1, 1.0), methods=("dp-linear", "public", "ridge"),
                 seeds=2, budget=TINY, out_dir=out, progress=False)
    return out


def _copy(grid: Path, tmp_path: Path) -> Path:
    """A copy of the finished grid that a test may break, its times kept."""
    return Path(shutil.copytree(grid, tmp_path / "out"))


@pytest.fixture
def publish(load_script, capsys):
    """``publish(argv)``: ``scripts/publish_results.py``'s exit code, stdout and stderr."""
    script = load_script("publish_results")

    def run(argv: list[str]) -> tuple[int, str, str]:
        code = script.main(argv)
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run


@pytest.mark.needs_ett
def test_only_the_small_files_are_copied_and_the_readme_says_how(grid, tmp_path, publish):
    dest = tmp_path / "results" / "table9"
    code, out, err = publish(["--out", str(grid), "--reproduce", "table9", "--dest", str(dest),
                              "--command", COMMAND, "--allow-budget", "tiny"])
    assert code == 0 and err == "" and "published reproduce table9 (budget tiny, 8 cells)" in out
    keys = [cell.key for cell in experiment("table9").cells((2024,))]
    expected = {"README.md", "results.csv", "table.md",
                *(f"cells/{k}/{name}" for k in keys for name in ("result.json", "mia.json"))}
    assert set(pub.published_files(dest)) == expected
    source = grid / "table9" / "tiny"
    assert (dest / "results.csv").read_bytes() == (source / "results.csv").read_bytes()
    assert (grid / "cells" / "tiny" / keys[0] / "best.pt").is_file()  # there, but not copied
    # no path of this machine: the attack's run folder is named as published
    attack = json.loads((dest / "cells" / keys[0] / "mia.json").read_text())
    assert attack["run"] == f"cells/{keys[0]}"
    for name in pub.published_files(dest):
        assert str(grid) not in (dest / name).read_text(), name
    readme = (dest / "README.md").read_text()
    assert f"command: `{COMMAND}`" in readme
    assert f"qpriv version: {pub.version()}" in readme
    assert time.strftime("%Y-%m-%d", time.gmtime()) in readme
    assert "`tiny`, **not the full budget" in readme and "8 cells" in readme
    # a second publication replaces the first, leaving no temporary folder beside it
    assert publish(["--out", str(grid), "--reproduce", "table9", "--dest", str(dest),
                    "--command", COMMAND, "--allow-budget", "tiny"])[0] == 0
    assert sorted(p.name for p in dest.parent.iterdir()) == ["table9"]


@pytest.mark.needs_ett
def test_a_frontier_is_published_with_every_cell(grid, tmp_path):
    source = pub.frontier("ETTh1-H24-record", out_dir=grid, budget="tiny")
    dest = pub.publish(source, dest=tmp_path / "frontier", command="qpriv frontier ...")
    files = pub.published_files(dest)
    assert [f for f in files if "/" not in f] == ["README.md", "frontier.csv", "frontier.md",
                                                   "frontier.png"]
    cells = [f for f in files if f.startswith("cells/")]
    assert len(cells) == 2 * 2 + 2 and all(f.endswith("/result.json") for f in cells)
    assert "cells/ETTh1-H24-dp-linear-eps0.1-unitrecord-s2025/result.json" in cells
    assert not any(f.endswith((".npz", ".pt", "config.json")) for f in files)


def _refused(publish, argv: list[str], dest: Path) -> str:
    code, out, err = publish(argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("publish_results: error: ")
    assert not dest.exists() and not list(dest.parent.glob(f".{dest.name}*"))
    return err


@pytest.mark.needs_ett
def test_an_unfinished_grid_is_refused_and_nothing_written(grid, tmp_path, publish):
    out = _copy(grid, tmp_path)
    dest = tmp_path / "results" / "table9"
    dest.parent.mkdir()
    argv = ["--out", str(out), "--reproduce", "table9", "--dest", str(dest), "--command",
            COMMAND]
    # the full budget is the default: a tiny grid is published only when asked for by name; the
    # folders found are named as they are, braces and all
    (out / "table9" / "{odd}").mkdir()
    err = _refused(publish, argv, dest)
    assert "(it has: tiny, {odd}); run it at the full budget to the end, or publish a test of " \
           "the pipeline with --allow-budget tiny" in err
    (out / "table9" / "{odd}").rmdir()
    argv += ["--allow-budget", "tiny"]
    cells = out / "cells" / "tiny"
    (cells / "ETTh1-H24-dpsgd-eps0.1-s2024" / "mia.json").unlink()
    assert "1 of 8 cells lack a file (e.g. ETTh1-H24-dpsgd-eps0.1-s2024 has no mia.json)" \
           in _refused(publish, argv, dest)
    shutil.rmtree(cells / "ETTh1-H24-classical-s2024")
    assert "2 of 8 cells" in _refused(publish, argv, dest)
    (out / "table9" / "tiny" / "table.md").unlink()
    assert "table.md is missing" in _refused(publish, argv, dest)


@pytest.mark.needs_ett
def test_a_cell_that_diverged_before_it_had_a_model_is_finished_without_an_attack(
        grid, tmp_path, publish):
    """A run whose training diverged before any finite validation loss has no weights: Table 9
    shows it diverged and does not attack it, so it has no mia.json, and it still counts as a
    finished cell for the grid and for publishing (the rest keep their attack)."""
    out = _copy(grid, tmp_path)
    for attack in out.rglob("mia.json"):  # each names its run folder: the copy's, here
        written = attack.stat().st_mtime
        attack.write_text(attack.read_text().replace(str(grid), str(out)))
        os.utime(attack, (written, written))
    cell = out / "cells" / "tiny" / "ETTh1-H24-dpsgd-eps0.1-s2024"
    result = cell / "result.json"
    written = result.stat().st_mtime
    data = json.loads(result.read_text())
    data.update(best_epoch=0, diverged_epoch=1, mse=None, mae=None, val_loss=None)
    result.write_text(json.dumps(data))
    os.utime(result, (written, written))  # as the grid wrote it, before its report
    (cell / "mia.json").unlink()
    (cell / "best.pt").unlink()
    assert not has_model(cell) and files_of_cell(cell, metrics=experiment("table9").metrics) == (
        "result.json",)
    kept = reproduce_job(Cell("dpsgd", 0.1), metrics=experiment("table9").metrics,
                         budget=TINY, out_dir=out, data_dir=None, threads=1)
    assert kept.finished  # not handed out again for an attack it cannot have
    dest = tmp_path / "table9"
    code, _, err = publish(["--out", str(out), "--reproduce", "table9", "--dest", str(dest),
                            "--command", COMMAND, "--allow-budget", "tiny"])
    assert code == 0, err
    assert sorted(p.name for p in (dest / "cells" / cell.name).iterdir()) == ["result.json"]
    assert (dest / "cells" / "ETTh1-H24-classical-s2024" / "mia.json").is_file()
    assert ("`result.json` (and `mia.json` where the cell has a model to attack) of each of "
            "the 8 cells") in (dest / "README.md").read_text()


@pytest.mark.needs_ett
def test_a_report_older_than_a_cell_or_with_failures_is_refused(grid, tmp_path, publish):
    out = _copy(grid, tmp_path)
    dest = tmp_path / "table9"
    argv = ["--out", str(out), "--reproduce", "table9", "--dest", str(dest), "--command",
            COMMAND, "--allow-budget", "tiny"]
    result = out / "cells" / "tiny" / "ETTh1-H24-classical-s2024" / "result.json"
    later = time.time() + 60
    os.utime(result, (later, later))
    assert "report is older than cell ETTh1-H24-classical-s2024's result" in _refused(
        publish, argv, dest)
    report = out / "table9" / "tiny" / "report.json"
    data = json.loads(report.read_text())
    data["failures"] = [{"cell": "ETTh1-H24-classical-s2024", "error": "boom"}]
    report.write_text(json.dumps(data))
    assert "1 cells failed (e.g. ETTh1-H24-classical-s2024: boom)" in _refused(
        publish, argv, dest)


@pytest.mark.needs_ett
def test_a_frontier_with_a_missing_cell_is_refused(grid, tmp_path):
    out = _copy(grid, tmp_path)
    (out / "cells" / "tiny" / "ETTh1-H24-ridge-s2024" / "result.json").unlink()
    with pytest.raises(InvalidInputError, match=r"1 of 6 cells lack a file \(e\.g\. "
                                                r".*ridge-s2024 has no result\.json"):
        pub.frontier("ETTh1-H24-record", out_dir=out, budget="tiny")


def test_bad_names_and_destinations_are_refused(tmp_path, capsys):
    with pytest.raises(InvalidInputError, match="is not DATASET-H<horizon>-<unit>"):
        pub.frontier("ETTh1-H24-token", out_dir=tmp_path)
    with pytest.raises(InvalidInputError, match="unknown experiment 'table99'"):
        pub.reproduction("table99", out_dir=tmp_path)
    with pytest.raises(InvalidInputError, match="has no full-budget report"):
        pub.reproduction("table3", out_dir=tmp_path)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    source = pub.Source(kind="reproduce", name="table1", title="t", budget="full", stamp="s",
                        out_dir=tmp_path, files=(), cells=(), cell_files=(), finished=0.0)
    with pytest.raises(InvalidInputError, match="is not a folder this script published"):
        pub.publish(source, dest=mine, command="qpriv reproduce table1")
    assert (mine / "notes.txt").read_text() == "keep me"


def test_paths_under_out_become_relative_and_others_are_refused(tmp_path):
    out = tmp_path / "out"
    data = {"run": str(out / "cells" / "full" / "KEY"), "notes": ["a / b", "/"], "n": 1}
    assert pub.portable(data, out_dir=out, budget="full", where="x.json") == {
        "run": "cells/KEY", "notes": ["a / b", "/"], "n": 1}
    with pytest.raises(InvalidInputError, match=r"x\.json holds the path '/srv/elsewhere/data'"):
        pub.portable({"source": "/srv/elsewhere/data"}, out_dir=out, budget="full",
                     where="x.json")
    # a grid run with a relative --out writes its attack's run folder relative to it
    relative = {"run": "runs/full/cells/full/KEY", "notes": ["runs/fullness", "runs"]}
    assert pub.portable(relative, out_dir=Path("runs/full"), budget="full", where="x.json") == {
        "run": "cells/KEY", "notes": ["runs/fullness", "runs"]}
    assert pub.portable(relative, out_dir=Path("."), budget="full", where="x.json") == relative
