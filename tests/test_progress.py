"""Progress output: labelled bars and lines, one overall bar with an ETA across a job's parts,
and plain lines (no bars redrawn with carriage returns) where stderr is not a terminal."""

from __future__ import annotations

import pytest

from qpriv import progress
from qpriv.progress import JobProgress, Part

PLAN = (Part("[1/3 a]", seconds=10.0, steps=(3.0, 3.0), lead=2.0),
        Part("[2/3 grid]", seconds=6.0, steps=(1.0, 5.0), epochs_are_steps=False),
        Part("[3/3 b]", seconds=4.0))


def _row(epoch: int) -> dict:
    return {"epoch": epoch, "train_loss": 0.5, "val_loss": 0.25, "lr": [3e-4],
            "train_seconds": 1.0, "val_seconds": 0.5}


def test_the_bar_follows_the_plan_through_epochs_batches_and_cells(terminal):
    stderr = terminal()
    with JobProgress(parts=PLAN, desc="job", enabled=True) as job:
        assert job.planned == 20.0 and not job.bar.disable
        with job.part(PLAN[0]):
            with progress.epoch_bar(total=4, epoch=1, epochs=2, enabled=True) as bar:
                bar.update()  # a quarter of the first epoch, after the 2 s lead
                assert job.done == pytest.approx(2.0 + 0.75)
                bar.update(3)
                assert job.done == pytest.approx(5.0)
            progress.epoch_summary(_row(1), epochs=2, best_epoch=1)
            assert job.done == pytest.approx(5.0)
        assert job.done == 10.0  # the part's planned end, though one epoch never ran
        with job.part(PLAN[1]):
            with progress.label("[1/2 cell]"):
                progress.say("fitting")
                with progress.epoch_bar(total=2, epoch=1, epochs=1, enabled=True) as bar:
                    bar.update(2)  # a cell's epochs do not move the job: its cells do
                progress.epoch_summary(_row(1), epochs=1, best_epoch=1)
            assert job.done == 10.0
            progress.step_done()
            assert job.done == 11.0
        assert job.done == 16.0
        assert "left" in job.status() and job.status().startswith("80 % of the plan done in")
    shown = stderr.getvalue()
    assert "[1/3 a] epoch 1/2:" in shown and "job:" in shown
    assert "[1/3 a] epoch 1/2: train loss 0.5000, val loss 0.2500 (best), lr 0.0003, 1.5 s" in shown
    assert "[2/3 grid] [1/2 cell] fitting" in shown
    assert "[2/3 grid] [1/2 cell] epoch 1/1: train loss" in shown
    assert progress.labelled("x") == "x"  # outside the job, no label is left behind


def test_without_a_terminal_there_are_lines_and_no_bars(capsys):
    with JobProgress(parts=PLAN, desc="job", enabled=True) as job:
        assert job.bar.disable
        with job.part(PLAN[0]):
            with progress.work_bar(total=2000, desc="accounting", unit="step",
                                   enabled=True) as bar:
                bar.update(2000)
            progress.epoch_summary(_row(1), epochs=2, best_epoch=0)
    err = capsys.readouterr().err
    assert "\r" not in err
    lines = err.splitlines()
    assert lines[0] == "[1/3 a] accounting: 2,000 steps"
    assert lines[1].startswith("[1/3 a] epoch 1/2: train loss 0.5000, val loss 0.2500, lr")
    assert lines[2].startswith("[1/3 a] done; the job: 50 % of the plan done in 00:00, about ")


def test_a_silent_job_writes_nothing(capsys):
    job = JobProgress(parts=PLAN, desc="job", enabled=False)
    with job, job.part(PLAN[0]), progress.work_bar(total=3, desc="x", unit="step",
                                                   enabled=False) as bar:
        bar.update(3)
    assert capsys.readouterr().err == ""
