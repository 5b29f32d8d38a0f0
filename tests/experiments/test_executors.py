"""The executors without a running Ray: how one is chosen and refused, the fingerprint that
every node must share with the driver, and how a cell computed elsewhere is written here."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
import os
import subprocess
import sys

import pytest

from qpriv.cli import main
from qpriv.errors import ArgumentError, InvalidInputError
from qpriv.experiments import executors
from qpriv.experiments.executors import (
    DONE,
    FAILED,
    KEPT,
    CellJob,
    Fingerprint,
    LocalExecutor,
    make_executor,
    source_sha256,
)
from qpriv.experiments.runner import run_experiment
from qpriv.runs import directory
from qpriv.runs.directory import run_files, write_run_files


def test_an_unknown_executor_and_an_address_without_ray_are_refused():
    with pytest.raises(InvalidInputError, match="executor 'dask' is not one of local, ray"):
        make_executor("dask")
    with pytest.raises(ArgumentError) as refused:
        make_executor("local", address="10.0.0.5:6379")
    assert refused.value.spelled({"address": "--address", "executor": "--executor"}) == (
        "--address names a Ray cluster, which only --executor ray uses; add it or leave "
        "--address out")
    assert isinstance(make_executor("local"), LocalExecutor)
    for name in ("local", "ray"):  # an empty --address (an unset variable) is not "none given"
        with pytest.raises(ArgumentError) as refused:
            make_executor(name, address=" ")
        assert refused.value.spelled({"address": "--address"}).startswith(
            "--address is empty; give the Ray head node's HOST:PORT, or leave --address out")


@pytest.mark.needs_ett  # the frontier reads its data before it asks for Ray
def test_ray_missing_is_one_line_with_the_install_command(monkeypatch, tmp_path, capsys):
    real = importlib.import_module

    def no_ray(name, *args):  # the command line imports its command's module the same way
        if name not in (executors.RAY_MODULE, "ray"):
            return real(name, *args)
        raise ModuleNotFoundError("No module named 'ray'", name="ray")

    monkeypatch.setattr(importlib, "import_module", no_ray)
    with pytest.raises(ArgumentError, match=r"executor='ray' needs Ray, which is not installed "
                                            r"here; install it with pip install 'qpriv\[ray\]'"):
        make_executor("ray")
    out = tmp_path / "out"
    assert main(["frontier", "--methods", "public", "--eps", "1", "--budget", "tiny",
                 "--executor", "ray", "--out", str(out)]) == 2
    assert capsys.readouterr().err.strip() == (
        "qpriv: error: --executor ray needs Ray, which is not installed here; install it with "
        "pip install 'qpriv[ray]'")
    assert not out.exists()


def test_the_local_executor_never_imports_ray():
    code = ("import sys, qpriv.cli, qpriv.experiments.runner, qpriv.experiments.frontier\n"
            "from qpriv.experiments.executors import make_executor\n"
            "make_executor('local')\n"
            "print(sorted(m for m in sys.modules if m == 'ray' or m.startswith('ray.')))")
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(
                               p for p in sys.path if p)})
    assert shown.stdout.strip() == "[]"


def test_a_computed_table_is_refused_on_ray(tmp_path):
    pytest.importorskip("ray", reason="Ray is not installed: pip install 'qpriv[ray]'")
    with pytest.raises(ArgumentError, match="table1 computes its rows in this process and has "
                                            "no cells to hand out; run it without executor"):
        run_experiment("table1", budget="tiny", out_dir=tmp_path, executor="ray")
    assert not any(tmp_path.iterdir())


@pytest.mark.needs_ett
def test_a_node_with_the_drivers_code_and_data_passes_and_any_difference_is_named():
    driver = Fingerprint.here(["ETTh1", "ETTh1"])
    assert [name for name, _ in driver.datasets] == ["ETTh1"]
    assert driver.source_sha256 == source_sha256() and len(driver.source_sha256) == 64
    driver.check_here()  # the same machine: nothing differs
    with pytest.raises(InvalidInputError, match=r"runs qpriv .* but the driver runs qpriv "
                                                r"9\.9 \(source sha256 "):
        dataclasses.replace(driver, version="9.9").check_here()
    with pytest.raises(InvalidInputError, match="but the driver runs"):
        dataclasses.replace(driver, source_sha256="f" * 64).check_here()
    with pytest.raises(InvalidInputError, match=r"dataset ETTh1 on node .* has sha256 "
                                                r"f18de3ad269c but the driver's has 000000000000;"
                                                r" give every node the driver's file"):
        dataclasses.replace(driver, datasets=(("ETTh1", "0" * 64),)).check_here()


def test_a_users_file_is_fingerprinted_by_path_and_checked_on_the_node(tmp_path):
    """`frontier --csv`: a node runs a cell only on the driver's very file (issue 42, D3)."""
    csv = tmp_path / "mine.csv"
    csv.write_text("date,a\n2020-01-01,1\n")
    driver = Fingerprint.here(files=[csv, str(csv)])
    assert driver.files == ((str(csv), hashlib.sha256(csv.read_bytes()).hexdigest()),)
    driver.check_here()
    csv.write_text("date,a\n2020-01-01,2\n")
    with pytest.raises(InvalidInputError, match=rf"file {csv} on node .* has sha256 .* but the "
                                                r"driver's has .*give every node the driver's"):
        driver.check_here()
    csv.unlink()
    with pytest.raises(InvalidInputError, match=rf"{csv} cannot be found on "):
        driver.check_here()


def test_the_source_digest_follows_every_source_file(tmp_path, monkeypatch):
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "b.json").write_text("{}")
    (tmp_path / "notes.txt").write_text("not source")
    monkeypatch.setattr(executors, "PACKAGE_ROOT", tmp_path)
    digests = []
    for change in (None, "notes.txt", "a.py", "data/b.json"):
        if change:
            (tmp_path / change).write_text((tmp_path / change).read_text() + " ")
        source_sha256.cache_clear()
        digests.append(source_sha256())
    source_sha256.cache_clear()
    assert digests[0] == digests[1]  # not a source file
    assert len(set(digests[1:])) == 3  # each source edit changes it


def test_a_cell_computed_elsewhere_is_written_result_last(tmp_path, monkeypatch):
    elsewhere = tmp_path / "node"
    elsewhere.mkdir()
    (elsewhere / "result.json").write_text(json.dumps({"mse": 0.3}))
    (elsewhere / "best.pt").write_bytes(b"weights")
    (elsewhere / ".result.json.0123.tmp").write_bytes(b"half")
    files = run_files(elsewhere)
    assert files == {"best.pt": b"weights", "result.json": b'{"mse": 0.3}'}
    order = []
    real = directory.atomic_write_bytes
    monkeypatch.setattr(directory, "atomic_write_bytes",
                        lambda path, data: (order.append(path.name), real(path, data))[1])
    here = tmp_path / "driver" / "cell"
    assert write_run_files(here, files) is True
    assert order == ["best.pt", "result.json"]
    assert run_files(here) == files
    assert write_run_files(here, files) is False  # a shared file system: already there
    assert order == ["best.pt", "result.json"]
    with pytest.raises(InvalidInputError, match=r"'\.\./x' is not a file name of a run"):
        write_run_files(here, {"../x": b"", "result.json": b"{}"})
    with pytest.raises(InvalidInputError, match=r"hold no result\.json"):
        write_run_files(tmp_path / "other", {"best.pt": b""})
    assert not (tmp_path / "other").exists()


def work_that(fails: bool, *, progress: bool) -> str:
    """A cell's work for the local executor's test (it runs in this process)."""
    if fails:
        raise InvalidInputError("boom")
    return "value"


def test_the_local_executor_reports_a_failure_and_goes_on(tmp_path):
    def job(key: str, *, fails: bool, finished: bool = False) -> CellJob:
        return CellJob(key=key, run_dir=tmp_path / key, finished=finished,
                       work=lambda progress: work_that(fails, progress=progress))

    lines: list[str] = []
    outcomes = LocalExecutor().run(
        [job("a", fails=False, finished=True), job("b", fails=True), job("c", fails=False)],
        fingerprint=Fingerprint("0", "0"), progress=False, announce=lines.append)
    assert [(o.key, o.state, o.value) for o in outcomes] == [
        ("a", KEPT, "value"), ("b", FAILED, None), ("c", DONE, "value")]
    assert outcomes[1].failure()["error"] == "InvalidInputError: boom"
    assert lines == ["[1/3] a", "[2/3] b", "  failed: InvalidInputError: boom", "[3/3] c"]


@pytest.mark.needs_ett
def test_an_address_without_a_cluster_exits_2_and_writes_nothing(tmp_path, capsys):
    ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'qpriv[ray]'")
    assert not ray.is_initialized()
    out = tmp_path / "out"
    code = main(["frontier", "--budget", "tiny", "--methods", "public", "--eps", "1",
                 "--executor", "ray", "--address", "127.0.0.1:1", "--out", str(out)])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no Ray cluster answers at --address = 127.0.0.1:1" in err[0]
    assert not out.exists()
    assert not ray.is_initialized()
