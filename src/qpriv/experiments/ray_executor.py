"""The Ray executor: one Ray task per unfinished cell of a grid (``--executor ray``).

Loaded by :func:`qpriv.experiments.executors.make_executor` only when asked for (it imports
Ray, the optional extra ``qpriv[ray]``). Each unfinished cell is a task that asks for as many
CPUs as the cell keeps cores busy (:attr:`~qpriv.experiments.executors.CellJob.cores`);
finished cells are read on the driver and never sent. The driver gathers the tasks with
``ray.wait`` into one bar (done, failed, running, ETA); a cell that fails is reported with its
error and the others go on. A task whose worker dies (killed, out of memory, its node lost) is
run again, up to :data:`RETRIES` times, and resumes from the cell's last checkpoint where it can
see it.

Where the cells' files live: a task writes its cell into the cell's directory (the driver's
absolute ``--out`` path) on the node that runs it. On a file system that every node shares
(NFS, a cluster file system) that is all. Otherwise a task run on another node than the
driver's returns the finished cell's files and the driver writes them into its own ``--out``,
each atomically and ``result.json`` last, so that a half-written cell never counts as finished
(a cell killed there resumes only on the node that holds its checkpoint); a classifier run
sends its one JSON file (:attr:`~qpriv.experiments.executors.CellJob.cell_files`). Within
:meth:`RayExecutor.session` a local Ray started for the first batch serves the later ones.

Every task first checks that its node runs the driver's qpriv on the driver's data
(:class:`~qpriv.experiments.executors.Fingerprint`) and fails its cell with the difference
otherwise.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import socket
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import ray
import ray.exceptions

from qpriv.errors import ArgumentError
from qpriv.experiments.executors import (
    DONE,
    FAILED,
    KEPT,
    CellJob,
    CellOutcome,
    Fingerprint,
    run_here,
)
from qpriv.progress import work_bar
from qpriv.runs.directory import run_files, write_run_files
from qpriv.runs.layout import CHECKPOINT_FILE, RESULT_FILE

RETRIES = 3
"""How often a task whose worker died is run again (Ray's ``max_retries``); a cell that raises
is not retried: it is reported."""
LOCAL_OBJECT_STORE_BYTES = 256 * 2**20
"""The object store of a local Ray started for one grid: tasks return small answers (and, from
another node, a cell's files), so a small store keeps the shared memory it reserves small."""
WAIT_SECONDS = 1.0
CONNECT_SECONDS = 5.0
"""How long the head node's port may take to answer (``ray.init`` itself retries for ever)."""
"""How often the bar is redrawn while no task finishes."""


@ray.remote(max_retries=RETRIES)
def run_cell_task(work: Callable[..., Any], *, fingerprint: Fingerprint, run_dir: str,
                  driver_node: str, cell_files: tuple[str, ...] | None = None) -> dict:
    """One cell on a Ray worker: check the node, run (or resume) the cell, and return what the
    grid needs (``value``), whether it resumed from a checkpoint, and, from a node other than
    the driver's, the finished cell's files (``cell_files`` of ``run_dir``, or all of them)."""
    fingerprint.check_here()
    directory = Path(run_dir)
    resumed = (directory / CHECKPOINT_FILE).is_file()
    value = work(progress=False)
    here = ray.get_runtime_context().get_node_id()
    files = None if here == driver_node or not directory.is_dir() \
        else run_files(directory, names=cell_files)
    return {"value": value, "resumed": resumed, "files": files}


class RayExecutor:
    """One Ray task per unfinished cell, on the cluster at ``address`` (None:
    ``$RAY_ADDRESS``, else a local Ray started for the grid with ``num_cpus`` CPUs, all of
    this machine's by default, and stopped after it). A Ray already initialised in this process
    (``ray.init`` by the caller) is used as it is and left running."""

    name = "ray"

    def __init__(self, *, address: str | None = None, num_cpus: int | None = None) -> None:
        """Raises :class:`~qpriv.errors.ArgumentError` for a HOST:PORT ``address`` (given, or
        ``$RAY_ADDRESS``) where nothing answers: before a grid writes anything."""
        self.address = address or os.environ.get("RAY_ADDRESS") or None
        if self.address:
            check_reachable(self.address)
        self.num_cpus = num_cpus
        self._started = False
        self._held = False

    # -- the cluster ---------------------------------------------------------------------

    def connect(self) -> None:
        """Join the cluster (or start a local one).

        Raises:
            ArgumentError: no cluster answers at the address.
        """
        if ray.is_initialized():
            return
        address = self.address  # checked when this executor was made
        try:
            if address:
                ray.init(address=address, logging_level=logging.WARNING)
            else:
                ray.init(num_cpus=self.num_cpus, include_dashboard=False,
                         object_store_memory=LOCAL_OBJECT_STORE_BYTES,
                         logging_level=logging.WARNING)
        except (ConnectionError, RuntimeError, ValueError) as error:
            reason = str(error).strip().splitlines()[0] if str(error).strip() else ""
            raise ArgumentError(
                f"no Ray cluster answers at {{address}} = {address} ({type(error).__name__}: "
                f"{reason}); start one with 'ray start --head' and give its address, or leave "
                "{address} and $RAY_ADDRESS unset for a local Ray") from None
        self._started = True

    def disconnect(self) -> None:
        """Leave the cluster (a local Ray started here stops) if :meth:`connect` joined it."""
        if self._started:
            ray.shutdown()
            self._started = False

    # -- the cells -----------------------------------------------------------------------

    def run(self, jobs: Sequence[CellJob], *, fingerprint: Fingerprint, progress: bool,
            announce: Callable[[str], None] | None = None) -> list[CellOutcome]:
        """Read the finished cells here, run the others as tasks; the outcomes in job order.
        Where every cell is finished no cluster is joined."""
        if all(job.finished for job in jobs):
            return [run_here(job, progress=False, announce=announce) for job in jobs]
        self.connect()
        try:
            return self._run(jobs, fingerprint=fingerprint, progress=progress,
                             announce=announce)
        finally:
            if not self._held:
                self.disconnect()

    @contextlib.contextmanager
    def session(self) -> Iterator[None]:
        """Keep the cluster that :meth:`run` joins until the block ends (a local Ray started
        for the grid starts once, however many batches the grid hands out)."""
        self._held = True
        try:
            yield
        finally:
            self._held = False
            self.disconnect()

    def _run(self, jobs: Sequence[CellJob], *, fingerprint: Fingerprint, progress: bool,
             announce: Callable[[str], None] | None) -> list[CellOutcome]:
        outcomes: list[CellOutcome | None] = [None] * len(jobs)
        for i, job in enumerate(jobs):
            if job.finished:
                outcomes[i] = run_here(job, progress=False, announce=announce)
        driver_node = ray.get_runtime_context().get_node_id()
        pending: dict[ray.ObjectRef, int] = {}
        widest = widest_node_cpus()
        for i, job in enumerate(jobs):
            if job.finished:
                continue
            # a cell wider than every node would wait for ever: it shares the widest node's
            task = run_cell_task.options(num_cpus=min(job.cores, widest),
                                         name=f"qpriv {job.key}")
            pending[task.remote(job.work, fingerprint=fingerprint,
                                run_dir=str(job.run_dir), driver_node=driver_node,
                                cell_files=job.cell_files)] = i
        # the tasks in flight run as far as the cluster's CPUs go, the rest wait for them
        cores = max((min(jobs[i].cores, widest) for i in pending.values()), default=1)
        capacity = max(1, math.floor(ray.cluster_resources().get("CPU", 1.0) / cores))
        kept = sum(1 for o in outcomes if o is not None and o.state == KEPT)
        with work_bar(total=len(jobs), desc="cells", unit="cell", enabled=progress,
                      initial=len(jobs) - len(pending)) as bar:
            def say(line: str) -> None:
                if announce:
                    with bar.external_write_mode():
                        announce(line)

            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=WAIT_SECONDS)
                for ref in ready:
                    i = pending.pop(ref)
                    outcome = outcomes[i] = self._collect(ref, jobs[i])
                    bar.update(1)
                    if outcome.state == FAILED:
                        say(f"failed: {outcome.key}: {outcome.error}")
                    else:
                        say(f"done: {outcome.key}" + (" (resumed from its checkpoint)"
                                                      if outcome.resumed else ""))
                states = [o.state for o in outcomes if o is not None]
                running = min(len(pending), capacity)
                bar.set_postfix_str(f"kept {kept}, done {states.count(DONE)}, failed "
                                    f"{states.count(FAILED)}, running {running}, waiting "
                                    f"{len(pending) - running}", refresh=True)
        return [outcome for outcome in outcomes if outcome is not None]

    def _collect(self, ref: ray.ObjectRef, job: CellJob) -> CellOutcome:
        """The outcome of one finished task, its files written here if it sent them."""
        try:
            answer = ray.get(ref)
        except ray.exceptions.RayTaskError as error:
            cause = error.cause if isinstance(error.cause, BaseException) else error
            text = str(cause).strip().splitlines()
            message = f"{type(cause).__name__}: {text[0] if text else ''}"
            return CellOutcome(job.key, FAILED, error=message,
                               trace=_tail(getattr(error, "traceback_str", str(error))))
        except ray.exceptions.RayError as error:  # the worker died more than RETRIES times
            text = str(error).strip().splitlines()
            return CellOutcome(job.key, FAILED,
                               error=f"{type(error).__name__}: {text[0] if text else ''}",
                               trace=_tail(str(error)))
        if answer["files"] is not None:
            try:
                write_run_files(job.run_dir, answer["files"],
                                last=job.cell_files[-1] if job.cell_files else RESULT_FILE)
            except (OSError, ValueError) as error:
                return CellOutcome(job.key, FAILED, error=f"{type(error).__name__}: {error}")
        return CellOutcome(job.key, DONE, value=answer["value"], resumed=answer["resumed"])


def widest_node_cpus() -> int:
    """The CPUs of the cluster's widest live node (at least 1): the most a task can ask for and
    still be placed."""
    return max([1, *(math.floor(node["Resources"].get("CPU", 0)) for node in ray.nodes()
                     if node.get("Alive"))])


def check_reachable(address: str) -> None:
    """Refuse a ``HOST:PORT`` cluster address whose port does not answer within
    :data:`CONNECT_SECONDS` (``auto``, ``local`` and ``ray://`` addresses are left to Ray).

    Raises:
        ArgumentError: the address is not HOST:PORT, or nothing listens there.
    """
    if address in ("auto", "local") or "://" in address:
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ArgumentError(f"{{address}} = {address} is not HOST:PORT; give the head node's "
                            "address as 'ray start --head' prints it, e.g. 10.0.0.5:6379")
    try:
        socket.create_connection((host.strip("[]"), int(port)),
                                 timeout=CONNECT_SECONDS).close()
    except OSError as error:
        raise ArgumentError(
            f"no Ray cluster answers at {{address}} = {address} ({error.strerror or error}); "
            "start one with 'ray start --head' and give its address, or leave {address} and "
            "$RAY_ADDRESS unset for a local Ray") from None


def _tail(text: str, lines: int = 12) -> str:
    """The last ``lines`` lines of a remote traceback."""
    return "\n".join(text.strip().splitlines()[-lines:])
