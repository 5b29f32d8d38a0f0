"""``--executor ray``: a grid's cells as Ray tasks on a local Ray (2 CPUs, no dashboard, token
authentication off). A finished cell is not sent again, a failed cell is reported and the
others finish with the local executor's numbers, a worker killed inside a cell is replaced and
the cell resumes from its checkpoint, and a node with other code is refused.

The tasks import qpriv as the workers find it: the installed package, or this checkout where
``PYTHONPATH`` names its ``src`` (a local Ray's workers inherit the test's environment)."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import shutil
import signal
import threading
import time
from pathlib import Path

import pytest
import torch

ray = pytest.importorskip(
    "ray", reason="Ray is not installed: pip install 'qpriv[ray]' (make test installs it)")

from qpriv.experiments import ray_executor  # noqa: E402
from qpriv.experiments.executors import (  # noqa: E402 (after the skip)
    DONE,
    FAILED,
    Fingerprint,
    make_executor,
)
from qpriv.experiments.grid import TINY, Budget, Cell  # noqa: E402
from qpriv.experiments.ray_executor import run_cell_task  # noqa: E402
from qpriv.experiments.runner import reproduce_job, run_experiment  # noqa: E402
from qpriv.runs.directory import write_run_files  # noqa: E402
from qpriv.runs.layout import CHECKPOINT_FILE, RESULT_FILE  # noqa: E402

pytestmark = pytest.mark.skipif(not os.environ.get("QPRIV_DATA_DIR"),
                                reason="QPRIV_DATA_DIR (the ETT csv files) not set")

SLOW_CELL = Budget("slow", epochs=3, max_train_windows=6000, max_eval_windows=32, seq_len=48,
                   model=TINY.model, rigorous=False)
"""A cell whose epochs last seconds (classical, tiny model, 6000 windows: about 3-4 s each on
two busy cores), so that a worker can be killed between two of them."""


def test_a_grid_keeps_finished_cells_reports_a_failed_one_and_matches_local(tmp_path,
                                                                          local_ray):
    local = run_experiment("table8", budget=TINY, out_dir=tmp_path / "local", progress=False)
    assert local.failures == []
    out = tmp_path / "ray"
    cells = out / "cells" / "tiny"
    kept, broken = "ETTh1-H24-dpsgd-eps5-s2024", "ETTh1-H24-dpsgd-eps0.1-s2024"
    shutil.copytree(tmp_path / "local" / "cells" / "tiny" / kept, cells / kept)
    stamp = (cells / kept / RESULT_FILE).stat().st_mtime_ns
    (cells / broken).mkdir(parents=True)
    (cells / broken / CHECKPOINT_FILE).write_bytes(b"not a checkpoint")  # no settings
    lines: list[str] = []
    report = run_experiment("table8", budget=TINY, out_dir=out, progress=False,
                            executor="ray", announce=lines.append)

    assert [f["cell"] for f in report.failures] == [broken]
    error = report.failures[0]["error"]
    assert error.startswith(f"InvalidInputError: cannot resume the run in {cells / broken}")
    assert "a checkpoint but no config.json, so its settings cannot be checked" in error
    assert f"failed: {broken}: {error}" in lines
    # the finished cell is read on the driver: no task, no new file
    assert (cells / kept / RESULT_FILE).stat().st_mtime_ns == stamp
    assert sorted(line for line in lines if line.startswith("done: ")) == [
        "done: ETTh1-H24-classical-s2024", "done: ETTh1-H24-dpsgd-eps0.5-s2024",
        "done: ETTh1-H24-dpsgd-eps1-s2024"]
    # the other four rows hold the local executor's numbers, to the last bit
    expected = [row for row in local.rows if row.get("eps") != 0.1]
    assert report.rows == expected
    assert {row["method"] for row in report.rows} == {"classical", "dpsgd"}
    assert all(row["mse"] > 0 for row in report.rows)
    written = json.loads((out / "table8" / "tiny" / "report.json").read_text())
    assert [f["cell"] for f in written["failures"]] == [broken]


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _ours(pid: int) -> bool:
    """Whether ``pid`` descends from this test process (the local Ray it started)."""
    while pid > 1:
        if pid == os.getpid():
            return True
        pid = _parent(pid)
    return False


def _task_process(title: str) -> int | None:
    """The process of this test's Ray whose title is ``title`` (a running task's)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            name = (entry / "cmdline").read_bytes().split(b"\0")[0].decode()
            if name == title and _ours(int(entry.name)):
                return int(entry.name)
        except (OSError, ValueError, IndexError):  # the process ended meanwhile
            continue
    return None


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="finds the worker in /proc")
def test_a_killed_worker_is_replaced_and_the_cell_resumes_from_its_checkpoint(tmp_path,
                                                                              local_ray):
    cell = Cell("classical", seed=2024)
    job = reproduce_job(cell, metrics=("mse", "val_loss", "best_epoch"), budget=SLOW_CELL,
                        out_dir=tmp_path / "ray", data_dir=None, threads=1)
    checkpoint = job.run_dir / CHECKPOINT_FILE
    seen: dict[str, object] = {}

    def kill_after_the_first_epoch() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not checkpoint.is_file():
            time.sleep(0.02)
        pid = _task_process(f"ray::qpriv {cell.key}")
        seen["checkpoint"] = torch.load(io.BytesIO(checkpoint.read_bytes()), weights_only=True)
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
            seen["killed"] = pid

    killer = threading.Thread(target=kill_after_the_first_epoch)
    killer.start()
    [outcome] = make_executor("ray").run([job], fingerprint=Fingerprint.here(["ETTh1"]),
                                         progress=False)
    killer.join()

    assert "killed" in seen, "the cell finished before its worker could be killed"
    assert outcome.state == DONE and outcome.resumed
    result = json.loads((job.run_dir / RESULT_FILE).read_text())
    assert [row["epoch"] for row in result["history"]] == [1, 2, 3]
    # resumed, not restarted: the epochs before the kill are the killed worker's own records
    # (a retrained epoch would have measured its own seconds)
    before = seen["checkpoint"]["history"]
    assert before and result["history"][: len(before)] == before
    # and the resumed run ends where an uninterrupted one does
    local = reproduce_job(cell, metrics=("mse", "val_loss", "best_epoch"), budget=SLOW_CELL,
                          out_dir=tmp_path / "local", data_dir=None, threads=1)
    [alone] = make_executor("local").run([local], fingerprint=Fingerprint.here(["ETTh1"]),
                                         progress=False)
    assert outcome.value == alone.value
    assert outcome.value["best_epoch"] in (1, 2, 3) and outcome.value["mse"] > 0


def test_a_node_with_other_code_is_refused(tmp_path, local_ray):
    job = reproduce_job(Cell("classical", seed=2024), metrics=("mse",), budget=TINY,
                        out_dir=tmp_path, data_dir=None, threads=1)
    other = dataclasses.replace(Fingerprint.here(["ETTh1"]), version="0.0.1",
                                source_sha256="0" * 64)
    [outcome] = make_executor("ray").run([job], fingerprint=other, progress=False)
    assert outcome.state == FAILED
    assert "but the driver runs qpriv 0.0.1 (source sha256 000000000000)" in outcome.error
    assert "install the driver's qpriv (the same version and commit) on every node" \
        in outcome.error
    assert not job.run_dir.exists()  # refused before the cell was touched


def test_a_task_on_another_node_sends_the_cell_back_and_the_driver_writes_it(tmp_path,
                                                                          local_ray):
    job = reproduce_job(Cell("classical", seed=2024), metrics=("mse",), budget=TINY,
                        out_dir=tmp_path / "node", data_dir=None, threads=1)
    # as if the driver ran on another node: the task sends the finished cell's files
    answer = ray.get(run_cell_task.remote(job.work, fingerprint=Fingerprint.here(["ETTh1"]),
                                          run_dir=str(job.run_dir), driver_node="elsewhere"))
    assert answer["value"]["mse"] > 0 and not answer["resumed"]
    assert sorted(answer["files"]) == ["best.pt", "config.json", "result.json"]
    assert answer["files"]["result.json"] == (job.run_dir / RESULT_FILE).read_bytes()
    here = tmp_path / "driver" / "cells" / "tiny" / job.run_dir.name
    assert write_run_files(here, answer["files"]) is True
    assert json.loads((here / RESULT_FILE).read_text())["mse"] == answer["value"]["mse"]
    # the driver's copy is a finished cell: read back, never trained again
    again = reproduce_job(Cell("classical", seed=2024), metrics=("mse",), budget=TINY,
                          out_dir=tmp_path / "driver", data_dir=None, threads=1)
    assert again.run_dir == here and again.finished
    assert again.work(progress=False) == answer["value"]



def test_a_task_asks_for_the_cores_its_cell_keeps_busy_at_most_the_widest_nodes(tmp_path,
                                                                               local_ray,
                                                                               monkeypatch):
    """An LDPT cell on one thread keeps two cores busy (the thread that draws its features
    ahead) and asks for two CPUs; one on two threads would ask for three, more than the local
    Ray's node has, and is placed there with two instead of waiting for ever."""
    asked: list[int] = []
    real = ray_executor.run_cell_task

    class Recorder:
        def options(self, **options):
            asked.append(options["num_cpus"])
            # fail here rather than wait for ever for a node that has more CPUs
            assert options["num_cpus"] <= 2, f"asked for {asked[-1]} CPUs on a 2-CPU Ray"
            return real.options(**options)

    monkeypatch.setattr(ray_executor, "run_cell_task", Recorder())
    jobs = [reproduce_job(Cell("ldpt", eps=0.5, seed=seed), metrics=("mse",), budget=TINY,
                          out_dir=tmp_path, data_dir=None, threads=threads)
            for seed, threads in ((2024, 1), (2025, 2))]
    assert [job.cores for job in jobs] == [2, 3]
    outcomes = make_executor("ray").run(jobs, fingerprint=Fingerprint.here(["ETTh1"]),
                                        progress=False)
    assert [outcome.state for outcome in outcomes] == [DONE, DONE]
    assert asked == [2, 2]
