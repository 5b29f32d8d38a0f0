"""``scripts/carry_cells.py``: a grid's finished cells, carried
through a folder to a fresh run folder, are read there as finished (nothing is trained again,
the rows are the same, Table 9's attack still finds the weights), and nothing unfinished or
machine-specific is carried."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from qpriv.experiments import runner
from qpriv.experiments.grid import TINY
from qpriv.experiments.runner import run_experiment
from qpriv.forecasting.datasets import locate_dataset
from qpriv.runs.layout import BEST_FILE, CHECKPOINT_FILE, CONFIG_FILE, MIA_FILE, RESULT_FILE
from qpriv.training.trainer import Trainer


@pytest.fixture(scope="module")
def carry(request):
    """The carry script's module (the scripts are no package: loaded from its file)."""
    return request.getfixturevalue("load_script")("carry_cells")


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    """Table 9 at the tiny budget: its cells and their attacks (mia.json)."""
    out = tmp_path_factory.mktemp("first")
    report = run_experiment("table9", budget=TINY, out_dir=out, progress=False)
    return out, report


def _rows(report) -> list[dict]:
    return [{k: v for k, v in row.items() if k != "seconds_per_epoch"} for row in report.rows]


@pytest.mark.needs_ett
def test_carried_cells_are_read_as_finished_with_the_same_rows(carry, grid, tmp_path,
                                                              monkeypatch):
    out, first = grid
    saved = carry.save(out, tmp_path / "carry")
    cells = carry.finished_cells(out)
    assert len(saved.copied) == len(cells) == len(first.rows) and not saved.present
    for cell in cells:
        carried = tmp_path / "carry" / cell
        assert (carried / RESULT_FILE).is_file() and (carried / BEST_FILE).is_file()
        assert not (carried / CHECKPOINT_FILE).exists()
        config = json.loads((carried / CONFIG_FILE).read_text())
        assert config["source"] == "ETTh1.csv"  # no place on the machine that ran it
        attack = json.loads((carried / MIA_FILE).read_text())
        assert attack["run"] == cell.as_posix()  # cells/tiny/<key>, relative to the carry folder
        for file in carried.iterdir():
            assert str(out) not in file.read_text(errors="replace"), file
    # the attack's cache is dropped from one cell: the carried weights must serve it again
    dropped = tmp_path / "carry" / cells[0] / MIA_FILE
    assert dropped.is_file()
    dropped.unlink()

    fresh = tmp_path / "fresh"
    restored = carry.restore(tmp_path / "carry", fresh)
    assert len(restored.copied) == len(cells)
    config = json.loads((fresh / cells[0] / CONFIG_FILE).read_text())
    assert config["source"] == str(locate_dataset("ETTh1", allow_download=False))
    # the kept attack names its run folder here, as the attack run here would have
    attack = json.loads((fresh / cells[1] / MIA_FILE).read_text())
    assert attack["run"] == str(fresh / cells[1])

    def no_training(**kwargs):
        raise AssertionError("a carried cell was trained again")

    monkeypatch.setattr(runner, "run_forecast", no_training)
    again = run_experiment("table9", budget=TINY, out_dir=fresh, progress=False)
    assert not again.failures
    assert _rows(again) == _rows(first)
    assert (fresh / cells[0] / MIA_FILE).is_file()

    # saving again copies nothing new, restoring again overwrites nothing, but the attack's
    # file written after a cell was carried joins the carried copy
    assert not carry.save(out, tmp_path / "carry").copied
    assert dropped.is_file()
    assert not carry.restore(tmp_path / "carry", fresh).copied


def test_only_finished_cells_and_classifier_runs_are_carried(carry, tmp_path, load_script):
    out = tmp_path / "out"
    done = out / "cells" / "full" / "ETTh1-H24-classical-s1"
    running = out / "cells" / "full" / "ETTh1-H24-ldpt-eps0.1-s1"
    qml = out / "cells" / "full" / "qml"
    for folder in (done, running, qml):
        folder.mkdir(parents=True)
    user_csv = {"dataset": "mine", "source": "/data/mine.csv"}
    (done / CONFIG_FILE).write_text(json.dumps(user_csv))
    (done / RESULT_FILE).write_text("{}")
    (done / CHECKPOINT_FILE).write_bytes(b"state")
    (done / ".result.json.ab12.tmp").write_text("")
    (running / CONFIG_FILE).write_text("{}")
    (running / CHECKPOINT_FILE).write_bytes(b"state")
    (qml / "run-s1.json").write_text('{"accuracy": 0.9}')
    (qml / ".run-s2.json.cd34.tmp").write_text("")

    saved = load_script("carry_cells").main(["save", "--out", str(out),
                                             "--carry", str(tmp_path / "carry")])
    assert saved == 0
    carried = sorted(str(p.relative_to(tmp_path / "carry"))
                     for p in (tmp_path / "carry").rglob("*") if p.is_file())
    assert carried == ["cells/full/ETTh1-H24-classical-s1/config.json",
                       "cells/full/ETTh1-H24-classical-s1/result.json",
                       "cells/full/qml/run-s1.json"]
    # a user's own CSV keeps its path: a named dataset's alone is machine-specific
    assert json.loads((tmp_path / "carry" / carried[0]).read_text()) == user_csv

    # a half-trained copy in the run folder is replaced by the finished one
    stale = tmp_path / "fresh" / "cells" / "full" / "ETTh1-H24-classical-s1"
    stale.mkdir(parents=True)
    (stale / CHECKPOINT_FILE).write_bytes(b"old")
    carry.restore(tmp_path / "carry", tmp_path / "fresh")
    assert sorted(p.name for p in stale.iterdir()) == [CONFIG_FILE, RESULT_FILE]


def test_no_weights_leaves_a_finished_cells_best_pt_behind_only(tmp_path, capsys, load_script):
    out = tmp_path / "out"
    done = out / "cells" / "full" / "ETTh1-H96-dpsgd-eps1-s1"
    running = out / "cells" / "full" / "ETTh1-H96-ldpt-eps1-s1"
    for folder in (done, running):
        folder.mkdir(parents=True)
        (folder / CONFIG_FILE).write_text("{}")
        (folder / BEST_FILE).write_bytes(b"weights")
        (folder / CHECKPOINT_FILE).write_bytes(b"state")
    (done / RESULT_FILE).write_text("{}")
    (done / MIA_FILE).write_text("{}")
    script = load_script("carry_cells")
    assert script.main(["save", "--no-weights", "--unfinished", "--out", str(out),
                        "--carry", str(tmp_path / "carry")]) == 0
    carried = tmp_path / "carry" / "cells" / "full"
    assert sorted(p.name for p in (carried / done.name).iterdir()) == [
        CONFIG_FILE, MIA_FILE, RESULT_FILE]
    # an unfinished cell's checkpoint holds its weights: it is carried as always
    assert sorted(p.name for p in (carried / running.name).iterdir()) == [
        CHECKPOINT_FILE, CONFIG_FILE]
    # a later save without the flag adds the weights of a cell carried without them
    assert script.main(["save", "--out", str(out), "--carry", str(tmp_path / "carry")]) == 0
    assert (carried / done.name / BEST_FILE).read_bytes() == b"weights"

    capsys.readouterr()
    code = script.main(["restore", "--no-weights", "--carry", str(tmp_path / "carry"),
                        "--out", str(tmp_path / "fresh")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "--no-weights is for save" in err
    assert not (tmp_path / "fresh").exists()


def test_a_folder_without_cells_is_one_line_and_exit_2(tmp_path, capsys, load_script):
    code = load_script("carry_cells").main(["restore", "--carry", str(tmp_path / "none"),
                                            "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "holds no cells/ folder" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.needs_ett
def test_an_unfinished_cell_carried_resumes_from_its_epoch_to_the_same_rows(carry, tmp_path,
                                                                             monkeypatch):
    """A cell killed in its second epoch, saved with ``unfinished`` and restored on a 'fresh
    machine', trains only its second epoch there and ends where an uninterrupted grid does."""
    budget = replace(TINY, epochs=2)
    straight = run_experiment("tableA2", budget=budget, out_dir=tmp_path / "straight",
                              progress=False)

    epochs: list[tuple[str, int]] = []
    real_epoch = Trainer._train_epoch

    def counted(self, epoch):
        epochs.append((self.checkpoint_dir.name, epoch))
        if kill and epoch == 2:
            raise KeyboardInterrupt
        return real_epoch(self, epoch)

    monkeypatch.setattr(Trainer, "_train_epoch", counted)
    kill = True
    with pytest.raises(KeyboardInterrupt):
        run_experiment("tableA2", budget=budget, out_dir=tmp_path / "killed", progress=False)
    killed = tmp_path / "killed"
    (running,) = carry.unfinished_cells(killed)
    assert epochs[-1] == (running.name, 2)

    # without unfinished the cell stays behind; with it, its checkpoint travels
    assert not carry.save(killed, tmp_path / "carry").copied
    assert carry.save(killed, tmp_path / "carry", unfinished=True).copied == [str(running)]
    assert (tmp_path / "carry" / running / CHECKPOINT_FILE).is_file()
    # its best weights travel inside the checkpoint alone; resuming writes best.pt back
    assert (killed / running / BEST_FILE).is_file()
    assert not (tmp_path / "carry" / running / BEST_FILE).exists()
    # the same epoch again is not copied again
    assert carry.save(killed, tmp_path / "carry", unfinished=True).present == [str(running)]

    fresh = tmp_path / "fresh"
    assert carry.restore(tmp_path / "carry", fresh).copied == [str(running)]
    kill, epochs[:] = False, []
    again = run_experiment("tableA2", budget=budget, out_dir=fresh, progress=False)
    assert not again.failures
    assert _rows(again) == _rows(straight)
    assert (running.name, 1) not in epochs and (running.name, 2) in epochs

    # the finished cell replaces its unfinished copy in the carry folder, checkpoint and all
    assert str(running) in carry.save(fresh, tmp_path / "carry").copied
    assert not (tmp_path / "carry" / running / CHECKPOINT_FILE).exists()
    assert (tmp_path / "carry" / running / RESULT_FILE).is_file()


def test_unfinished_is_refused_for_restore_in_one_line(tmp_path, capsys, load_script):
    code = load_script("carry_cells").main(["restore", "--unfinished", "--carry",
                                            str(tmp_path / "c"), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "--unfinished is for save" in err
    assert not (tmp_path / "out").exists()
