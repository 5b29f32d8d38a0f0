"""The classifier figures on ``--executor ray``: each classifier run is a task, a finished
run is read on the driver, the rows are the local executor's, a run trained on another node
comes back as its one JSON file, and one local Ray serves every batch a grid hands out.

The tasks import qpriv as the workers find it: the installed package, or this checkout where
``PYTHONPATH`` names its ``src`` (a local Ray's workers inherit the test's environment).
No ETT data is read."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

ray = pytest.importorskip(
    "ray", reason="Ray is not installed: pip install 'qpriv[ray]' (make test installs it)")

from qpriv.experiments import qml_runs  # noqa: E402 (after the skip)
from qpriv.experiments.executors import DONE, CellJob, Fingerprint, make_executor  # noqa: E402
from qpriv.experiments.grid import TINY  # noqa: E402
from qpriv.experiments.qml_protocol import PROTOCOLS, Run  # noqa: E402
from qpriv.experiments.ray_executor import run_cell_task  # noqa: E402
from qpriv.experiments.runner import run_experiment  # noqa: E402
from qpriv.runs.directory import write_run_files  # noqa: E402

PLAN = PROTOCOLS["tiny"]


def _job(run: Run, out_dir: Path) -> CellJob:
    return qml_runs.run_job(run, plan=PLAN, out_dir=out_dir)


def test_one_local_ray_serves_every_batch_and_none_starts_for_kept_runs(tmp_path):
    """Runs first: the module's Ray (``local_ray``) is not up yet, so the executor starts its
    own."""
    saved = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"
    try:
        executor = make_executor("ray")
        first, second = (_job(Run(model="mlp", clip=1.5, batch=64, seed=s, lr=0.3), tmp_path)
                         for s in (2024, 2025))
        with executor.session():
            [one] = executor.run([first], fingerprint=Fingerprint.here(), progress=False)
            assert ray.is_initialized()  # kept for the next batch
            node = ray.get_runtime_context().get_node_id()
            [two] = executor.run([second], fingerprint=Fingerprint.here(), progress=False)
            assert ray.get_runtime_context().get_node_id() == node  # the same Ray
        assert not ray.is_initialized()  # stopped with the block
        assert one.state == two.state == DONE
        kept = [_job(Run(model="mlp", clip=1.5, batch=64, seed=2024, lr=0.3), tmp_path)]
        assert kept[0].finished
        [read] = executor.run(kept, fingerprint=Fingerprint.here(), progress=False)
        assert read.state == "kept" and not ray.is_initialized()  # nothing to hand out
        assert read.value["accuracy"] == one.value["accuracy"]
    finally:
        if saved is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = saved


def test_a_classifier_figure_runs_its_runs_as_tasks_with_the_local_numbers(tmp_path,
                                                                          local_ray):
    local = run_experiment("qml-figure7", budget=TINY, out_dir=tmp_path / "local",
                           progress=False)
    made = sorted((tmp_path / "local" / "cells" / "tiny" / "qml").iterdir())
    runs = tmp_path / "ray" / "cells" / "tiny" / "qml"
    runs.mkdir(parents=True)
    kept = shutil.copy(made[0], runs)  # one finished run: read on the driver, not sent
    stamp = Path(kept).stat().st_mtime_ns
    lines: list[str] = []
    report = run_experiment("qml-figure7", budget=TINY, out_dir=tmp_path / "ray",
                            progress=False, executor="ray", announce=lines.append)

    done = sorted(line.removeprefix("done: ") for line in lines if line.startswith("done: "))
    assert done == sorted(p.stem for p in made[1:])  # every other run (trials too) a task
    assert Path(kept).stat().st_mtime_ns == stamp
    assert sorted(p.name for p in runs.iterdir()) == [p.name for p in made]
    assert report.rows == local.rows  # to the last bit
    assert {row["model"] for row in report.rows} == {"mlp", "lipschitz", "quantum"}


def test_a_run_on_another_node_sends_only_its_own_file_back(tmp_path, local_ray):
    node = tmp_path / "node"
    (node / qml_runs.RUN_DIR).mkdir(parents=True)
    (node / qml_runs.RUN_DIR / "another-run.json").write_text("{}")  # a folder many runs share
    run = Run(model="mlp", clip=1.5, batch=64, seed=2024, lr=0.3)
    job = _job(run, node)
    # as if the driver ran on another node: the task sends the run's one file
    answer = ray.get(run_cell_task.remote(job.work, fingerprint=Fingerprint.here(),
                                          run_dir=str(job.run_dir), driver_node="elsewhere",
                                          cell_files=job.cell_files))
    name = f"{run.key(PLAN)}.json"
    assert list(answer["files"]) == [name]
    assert json.loads(answer["files"][name])["accuracy"] == answer["value"]["accuracy"]
    here = tmp_path / "driver" / qml_runs.RUN_DIR
    assert write_run_files(here, answer["files"], last=name) is True
    again = _job(run, tmp_path / "driver")  # the driver's copy is a finished run
    assert again.finished and again.work(progress=False)["accuracy"] == \
        answer["value"]["accuracy"]
