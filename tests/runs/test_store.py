"""The run store: out_dir rules, the resume check of settings and the JSON cache."""

from __future__ import annotations

import json

import pytest

from qpriv.errors import ArgumentError, InvalidInputError
from qpriv.runs.cache import cached_json
from qpriv.runs.directory import check_folder, check_out_dir, open_run
from qpriv.runs.layout import CHECKPOINT_FILE, CONFIG_FILE, RESULT_FILE

MARKS = (CHECKPOINT_FILE, RESULT_FILE)


def test_out_dir_rules(tmp_path):
    assert check_out_dir(None, resume=False, marks=MARKS) is None
    with pytest.raises(InvalidInputError, match="resume needs out_dir: the folder of the run"):
        check_out_dir(None, resume=True, marks=MARKS)
    (tmp_path / "file").write_text("")
    with pytest.raises(InvalidInputError, match="exists and is not a directory"):
        check_out_dir(tmp_path / "file", resume=False, marks=MARKS)
    with pytest.raises(InvalidInputError, match=r"^out_dir .*run lies inside .*file, which "):
        check_out_dir(tmp_path / "file" / "run", resume=False, marks=MARKS)
    (tmp_path / CHECKPOINT_FILE).write_text("")
    with pytest.raises(InvalidInputError, match=r"an unfinished run; add resume to continue or "
                                                r"read it, or choose another out_dir$"):
        check_out_dir(tmp_path, resume=False, marks=MARKS)
    with pytest.raises(InvalidInputError, match=r"holds a checkpoint but no config\.json"):
        check_out_dir(tmp_path, resume=True, marks=MARKS)
    (tmp_path / CONFIG_FILE).write_text("{}")
    assert check_out_dir(str(tmp_path), resume=True, marks=MARKS) == tmp_path


def test_resuming_a_missing_or_empty_folder_is_refused_not_started_afresh(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / ".keep").write_text("")  # hidden files are no run
    for where in (tmp_path / "missing", empty):
        with pytest.raises(ArgumentError, match=r"^no run to resume at .*; drop resume to "):
            check_out_dir(where, resume=True, marks=MARKS)
        assert check_out_dir(where, resume=False, marks=MARKS) == where
    assert not (tmp_path / "missing").exists()
    # a path with braces is named as it is (the message is a template)
    with pytest.raises(ArgumentError, match=r"\{x\}; drop resume to start one$") as caught:
        check_out_dir(tmp_path / "{x}", resume=True, marks=MARKS)
    assert caught.value.spelled({"resume": "--resume"}).endswith("{x}; drop --resume to start one")


def test_a_run_is_never_mixed_into_a_folder_of_other_files(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "data").mkdir()
    for resume in (False, True):
        with pytest.raises(InvalidInputError, match=r"holds other files \(data, notes\.txt\) "
                                                     "and no qpriv run; .*choose a new or empty"):
            check_out_dir(tmp_path, resume=resume, marks=MARKS)
    # a run's own folder: its settings (an unfinished run's first file), and hidden files
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / ".keep").write_text("")
    assert check_out_dir(empty, resume=False, marks=MARKS) == empty
    (tmp_path / CONFIG_FILE).write_text("{}")
    assert check_out_dir(tmp_path, resume=True, marks=MARKS) == tmp_path


def test_a_grid_folder_may_be_new_but_never_inside_a_file(tmp_path):
    assert check_folder(tmp_path / "new" / "deeper") == tmp_path / "new" / "deeper"
    assert check_folder(str(tmp_path)) == tmp_path
    (tmp_path / "file").write_text("")
    with pytest.raises(InvalidInputError, match=r"^--out .*file exists and is not a directory"):
        check_folder(tmp_path / "file")
    with pytest.raises(InvalidInputError, match=r"lies inside .*file, which exists and is not"):
        check_folder(tmp_path / "file" / "a" / "b")


def test_open_run_writes_then_checks_the_settings(tmp_path):
    assert open_run(tmp_path, {"seed": 1, "threads": 2}, resume=False) is None
    assert json.loads((tmp_path / CONFIG_FILE).read_text()) == {"seed": 1, "threads": 2}
    assert open_run(tmp_path, {"seed": 1, "threads": 4}, resume=True, ignore=("threads",)) is None
    with pytest.raises(InvalidInputError, match=r"settings differ in \['seed'\]"):
        open_run(tmp_path, {"seed": 2, "threads": 2}, resume=True)
    with pytest.raises(InvalidInputError, match=r"older qpriv that did not record \['eps'\]"):
        open_run(tmp_path, {"seed": 1, "threads": 2, "eps": 0.1}, resume=True)
    assert open_run(tmp_path, {"seed": 1, "threads": 2, "eps": 0.1}, resume=True,
                    defaults={"eps": 0.1}) is None
    (tmp_path / RESULT_FILE).write_text('{"mse": 0.5}')
    assert open_run(tmp_path, {"seed": 1, "threads": 2}, resume=True) == {"mse": 0.5}
    # another command's run is named as such, not as a list of every key it lacks
    other = {"task": "digits", "model": "mlp", "clip": 1.0, "seed": 1, "threads": 2}
    with pytest.raises(InvalidInputError, match=r"it holds another kind of run \(its settings "
                                                r"share few keys with these"):
        open_run(tmp_path, {**other, "method": "x", "dataset": "y", "horizon": 24,
                            "seq_len": 336, "eps": 1.0, "delta": 1e-6}, resume=True)


def test_cached_json_reads_computes_and_keeps(tmp_path):
    path = tmp_path / "a" / "answer.json"
    calls = []

    def compute() -> dict:
        calls.append(1)
        return {"x": len(calls)}

    assert cached_json(path, compute, damaged="refuse", fix="f") == {"x": 1}
    assert cached_json(path, compute, damaged="refuse", fix="f") == {"x": 1}
    assert cached_json(path, compute, damaged="refuse", fix="f", reuse=False) == {"x": 2}
    assert json.loads(path.read_text()) == {"x": 2}
    assert cached_json(None, compute, damaged="refuse", fix="f") == {"x": 3}


def test_a_damaged_or_unusable_cache_is_refused_or_recomputed(tmp_path, capsys):
    path = tmp_path / "answer.json"
    path.write_text('{"x": ')
    with pytest.raises(InvalidInputError, match=r"cannot read .*answer.json: the file is "
                                                r"damaged .*; delete it"):
        cached_json(path, lambda: {"x": 1}, damaged="refuse", fix="delete it")
    assert cached_json(path, lambda: {"x": 1}, damaged="recompute", fix="computed again") == {
        "x": 1}
    assert "qpriv: cannot read" in capsys.readouterr().err
    assert cached_json(path, lambda: {"x": 2}, damaged="recompute", fix="again",
                       valid=lambda kept: kept["x"] == 2) == {"x": 2}
    assert "does not hold what is asked here; again" in capsys.readouterr().err
    with pytest.raises(InvalidInputError, match="does not hold"):
        cached_json(path, lambda: {"x": 3}, damaged="refuse", fix="f",
                    valid=lambda kept: kept["x"] == 3)


def test_compute_may_write_the_file_or_the_write_may_fail(tmp_path):
    path = tmp_path / "result.json"
    assert cached_json(path, lambda: {"x": 1}, damaged="refuse", fix="f",
                       store="by-compute") == {"x": 1}
    assert not path.exists()
    blocked = tmp_path / "blocked"
    blocked.write_text("")  # a file where the cache's directory should be
    assert cached_json(blocked / "a.json", lambda: {"x": 1}, damaged="recompute", fix="f",
                       store="if-possible") == {"x": 1}
