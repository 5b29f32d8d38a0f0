"""How the classifier grid's runs are trained and kept: each finished run is one JSON file in
``<out>/cells/<budget>/qml/<key>.json``, read back, never recomputed, so the runs of one figure
serve the others (Figure 2's clipped runs at C = 1.5, |B| = 64 are Figures 3-6's clipped
models; Figure 7's runs at C = 1.5, eps = 10 are Figure 8's). Where a budget tunes, a
configuration's rate is chosen first by its tuning trials, stored the same way (``val`` in
their names). The runs are handed to an executor (:mod:`qpriv.experiments.executors`: here,
or one Ray task per run).

Source: the private-training paper, section 4 (the protocol and its choices:
:mod:`qpriv.experiments.qml_protocol`).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from qpriv.classification.data import VALIDATION_FRACTION
from qpriv.classification.run import train_classifier
from qpriv.classification.tuning import lr_grid, tuning_record
from qpriv.errors import InvalidInputError, QprivError
from qpriv.experiments.executors import (
    FAILED,
    CellJob,
    CellOutcome,
    Executor,
    Fingerprint,
    LocalExecutor,
)
from qpriv.experiments.qml_protocol import TUNING_SEED, Protocol, Run
from qpriv.runs.cache import cached_json
from qpriv.runs.files import read_json_object

RUN_DIR = "qml"
"""The folder of ``<out>/cells/<budget>/`` that holds every classifier run, one JSON each."""
Announce = Callable[[str], None]
"""What receives a line per run as the executor starts, ends or fails it."""


def tunes(run: Run, plan: Protocol) -> bool:
    """Whether ``run``'s rate is tuned first: ``plan`` tunes and ``run`` gives no rate (a
    tuning trial gives its own)."""
    return bool(plan.lr_factors) and run.lr is None and not run.validation


def tuning_trials(run: Run, plan: Protocol) -> list[Run]:
    """The tuning trials of ``run``'s configuration: one per rate of the grid, at
    :data:`~qpriv.experiments.qml_protocol.TUNING_SEED`, scored on the validation share."""
    return [replace(run, seed=TUNING_SEED, reference=False, lr=lr, validation=True)
            for lr in lr_grid(run.base_rate, plan.lr_factors)]


def tuned_rate(run: Run, *, plan: Protocol, out_dir: Path, progress: bool) -> dict:
    """The tuning record of ``run``'s configuration (:func:`~qpriv.classification.tuning.
    tuning_record`): one stored trial per rate of the grid at
    :data:`~qpriv.experiments.qml_protocol.TUNING_SEED`."""
    return tuning_record([(trial.lr, finished_run(trial, plan=plan, out_dir=out_dir,
                                                  progress=progress))
                          for trial in tuning_trials(run, plan)],
                         validation=VALIDATION_FRACTION)


def run_path(run: Run, *, plan: Protocol, out_dir: Path) -> Path:
    """Where ``run``'s result is kept: ``out_dir/qml/<key>.json``."""
    return Path(out_dir) / RUN_DIR / f"{run.key(plan)}.json"


def finished_run(run: Run, *, plan: Protocol, out_dir: Path, progress: bool) -> dict:
    """The result of ``run``: read from ``out_dir/qml/<key>.json`` or trained and written.
    Where ``plan`` tunes and ``run`` has no rate, the rate is tuned first (trials stored the
    same way) and the result carries ``lr_tuning``."""
    tuning = None
    if tunes(run, plan):
        tuning = tuned_rate(run, plan=plan, out_dir=out_dir, progress=progress)
        run = replace(run, lr=tuning["lr"])
    return stored_run(run, plan=plan, out_dir=out_dir, progress=progress, tuning=tuning)


def stored_run(run: Run, *, plan: Protocol, out_dir: Path, progress: bool,
               tuning: dict | None = None) -> dict:
    """The result of ``run`` at its own rate: read back, or trained and written, with
    ``tuning`` (the record its rate was chosen by, if any) stored beside it as ``lr_tuning``.
    A module-level function of the package, so that an executor can hand it to a Ray task."""

    def train() -> dict:
        # one thread whatever the grid's --threads: the run key does not name a thread count,
        # and a matrix product's last bits depend on it, so a stored run is one thread's
        result = train_classifier(**run.arguments(plan), threads=1, progress=False).to_json()
        if tuning:
            result["lr_tuning"] = tuning
        if progress:
            print(f"  {run.key(plan)}: {result['evaluated_on']} accuracy "
                  f"{result['accuracy']:.3f}, {result['seconds']:.1f} s", file=sys.stderr)
        return result

    # a cache of a seeded run: a damaged one is trained again
    result = cached_json(run_path(run, plan=plan, out_dir=out_dir), train,
                         damaged="recompute", fix="it is trained again")
    return {**result, "lr_tuning": tuning} if tuning else result


def run_all(runs: Sequence[Run], *, plan: Protocol, out_dir: Path, progress: bool,
            executor: Executor | None = None, announce: Announce | None = None) -> list[dict]:
    """Every run's result, in order (finished ones read back), the others trained by
    ``executor`` (None: here, one after the other; ``ray``: one Ray task per run): first the
    tuning trials of every configuration whose rate is tuned, then every run at its rate.
    ``announce`` receives the executor's line per run (None: printed on stderr where
    ``progress``).

    Each run is seeded, so the order changes no number. A run trained on another node comes
    back as its JSON, which the executor writes here as it arrives.

    Raises:
        QprivError: some runs failed. Every other run of ``runs`` has been trained and kept
            by then, except those whose rate waits on a failed trial; the message names the
            first failure and how many runs failed or waited.
    """
    executor = LocalExecutor() if executor is None else executor
    out_dir = Path(out_dir).absolute()
    announce = announce or (_say if progress else None)
    trials = [trial for run in runs if tunes(run, plan) for trial in tuning_trials(run, plan)]
    _, failed = _train_all([(trial, None) for trial in trials], plan=plan, out_dir=out_dir,
                           progress=progress, executor=executor, announce=announce)
    lost = {outcome.key for outcome in failed}
    resolved: list[tuple[Run, dict | None] | None] = []
    for run in runs:  # the trials are kept now: each tuned rate is read, not trained
        if not tunes(run, plan):
            resolved.append((run, None))
        elif lost & {trial.key(plan) for trial in tuning_trials(run, plan)}:
            resolved.append(None)  # its rate cannot be chosen
        else:
            tuning = tuned_rate(run, plan=plan, out_dir=out_dir, progress=False)
            resolved.append((replace(run, lr=tuning["lr"]), tuning))
    values, failed_runs = _train_all([pair for pair in resolved if pair is not None],
                                     plan=plan, out_dir=out_dir, progress=progress,
                                     executor=executor, announce=announce)
    failed += failed_runs
    if failed:
        waiting = resolved.count(None)
        raise QprivError(
            f"{len(failed)} classifier runs failed, the first {failed[0].key}: "
            f"{failed[0].error}"
            + (f"; {waiting} runs wait on a failed rate trial" if waiting else "")
            + "; the others are kept: run the command again to retry the rest")
    return [values[pair[0].key(plan)] for pair in resolved if pair is not None]


def _train_all(runs: Sequence[tuple[Run, dict | None]], *, plan: Protocol, out_dir: Path,
               progress: bool, executor: Executor, announce: Announce | None
               ) -> tuple[dict[str, dict], list[CellOutcome]]:
    """The results of runs at their own rates (each with its tuning record) by key, and the
    outcomes of those that failed; each distinct run trained once, by ``executor``."""
    distinct: dict[str, tuple[Run, dict | None]] = {}
    for run, tuning in runs:
        distinct.setdefault(run.key(plan), (run, tuning))
    jobs = [run_job(run, plan=plan, out_dir=out_dir, tuning=tuning)
            for run, tuning in distinct.values()]
    if not jobs:
        return {}, []
    outcomes = executor.run(jobs, fingerprint=Fingerprint.here(), progress=progress,
                            announce=announce)
    return ({outcome.key: outcome.value for outcome in outcomes if outcome.state != FAILED},
            [outcome for outcome in outcomes if outcome.state == FAILED])


def run_job(run: Run, *, plan: Protocol, out_dir: Path, tuning: dict | None = None) -> CellJob:
    """``run`` at its own rate as a job for an executor: its one JSON file is the cell
    (finished where it is readable), :func:`stored_run` the work."""
    path = run_path(run, plan=plan, out_dir=out_dir)
    return CellJob(key=run.key(plan), run_dir=path.parent, cell_files=(path.name,),
                   finished=_kept(path),
                   work=functools.partial(stored_run, run, plan=plan, out_dir=out_dir,
                                          tuning=tuning))


def _kept(path: Path) -> bool:
    """Whether ``path`` holds a run's readable JSON (a damaged one is a run to train again,
    handed out like any other)."""
    try:
        read_json_object(path, fix="")
    except InvalidInputError:
        return False
    return True


def _say(line: str) -> None:
    print(line, file=sys.stderr)
