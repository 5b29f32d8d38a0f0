"""How a grid's cells are run: here, one after the other (``local``), or as tasks on a Ray
cluster (``ray``, :mod:`qpriv.experiments.ray_executor`, the optional extra ``qpriv[ray]``).

A grid (``qpriv reproduce``, ``qpriv frontier``) hands its executor one :class:`CellJob` per
cell and gets back one :class:`CellOutcome` per cell, in the same order: ``kept`` (the cell was
finished before and is only read), ``done`` or ``failed`` (with its error; the other cells go
on). A cell is one run directory, finished once its ``result.json`` is written (atomically and
last), so any executor may run the cells in any order, on any machine, and again after a crash:
a cell with a checkpoint resumes from it.

Every node that runs a cell must run the driver's code on the driver's data: the driver's
:class:`Fingerprint` (qpriv's version, a digest of its source files, the sha256 of every
dataset) travels with each task, which refuses to run on a node that differs.

The executors are named in :data:`EXECUTORS` and made by :func:`make_executor`. The Ray
executor's module imports Ray at its top; it is loaded by name (``importlib``) only when asked
for, so the local executor, and every command that does not ask for Ray, never imports it.

Example::

    executor = make_executor("local")
    outcomes = executor.run(jobs, fingerprint=Fingerprint.here(["ETTh1"]), progress=False)
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib
import importlib.metadata
import socket
import traceback
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from qpriv.errors import ArgumentError, InvalidInputError, QprivError
from qpriv.forecasting.datasets import file_sha256, locate_dataset
from qpriv.progress import label, step_done, work_bar
from qpriv.runs.layout import CHECKPOINT_FILE

EXECUTORS = ("local", "ray")
"""The executors :func:`make_executor` knows, the first the default."""
RAY_MODULE = "qpriv.experiments.ray_executor"
"""The module of the Ray executor, imported only when ``ray`` is asked for."""
RAY_INSTALL = "pip install 'qpriv[ray]'"
CELL_ERRORS: tuple[type[BaseException], ...] = (QprivError, RuntimeError, ValueError, OSError)
"""What a failed cell raises: reported with its cell while the grid goes on. The local executor
stops the grid on anything else (a bug of qpriv); the Ray executor reports every error of a
task with its cell, so that one bug does not lose the other tasks' work."""
KEPT, DONE, FAILED = "kept", "done", "failed"
"""The states of a :class:`CellOutcome`."""
PACKAGE_ROOT = Path(__file__).resolve().parents[1]
"""The installed ``qpriv`` package, whose files :func:`source_sha256` digests."""


@dataclass(frozen=True)
class CellJob:
    """One cell of a grid, for an executor.

    ``work`` computes the cell (or, for a finished one, reads it) and returns what the grid
    needs of it (e.g. a table's metrics); it is called as ``work(progress=...)`` and must be a
    module-level function of the package or a :func:`functools.partial` of one, with
    picklable arguments, so that a Ray task can import it on another machine. ``cores``:
    the CPU cores it keeps busy (a Ray task asks for that many CPUs). ``finished``: the cell
    was finished before the grid started.
    ``cell_files``: the files of ``run_dir`` that make up the cell, the last one written last
    (a task run on another node than the driver's sends them back and the driver writes them
    as it arrives); None: every file of ``run_dir``, ``result.json`` last (a forecasting
    cell's folder). A classifier run names its one JSON file in a folder that many runs share.
    """

    key: str
    run_dir: Path
    work: Callable[..., Any]
    cores: int = 1
    finished: bool = False
    cell_files: tuple[str, ...] | None = None


@dataclass
class CellOutcome:
    """What became of one cell: ``state`` is ``kept``, ``done`` or ``failed``; ``value`` is
    what ``work`` returned; ``resumed`` says that the cell continued from a checkpoint."""

    key: str
    state: str
    value: Any = None
    error: str | None = None
    trace: str | None = None
    resumed: bool = False

    def failure(self) -> dict:
        """The failed cell as the grids' reports list it."""
        return {"cell": self.key, "error": self.error, "trace": self.trace}


class Executor(Protocol):
    """Runs the cells of a grid (see the module docstring)."""

    name: str

    def run(self, jobs: Sequence[CellJob], *, fingerprint: Fingerprint, progress: bool,
            announce: Callable[[str], None] | None = None) -> list[CellOutcome]:
        """Run ``jobs``; return their outcomes in the same order. ``announce`` receives a line
        per cell as it starts, ends or fails; ``progress`` shows a bar over the cells."""
        ...

    def session(self) -> AbstractContextManager[None]:
        """A block over which a cluster joined by :meth:`run` is kept (a grid that hands out
        its runs in several batches joins once)."""
        ...


# -- the same code and data on every node ---------------------------------------------------


@functools.cache
def source_sha256() -> str:
    """The sha256 of qpriv's source files (every ``.py`` and ``.json`` of the package, by
    relative path): two installs that differ in one line differ here."""
    digest = hashlib.sha256()
    for path in sorted(PACKAGE_ROOT.rglob("*")):
        if path.suffix in (".py", ".json") and "__pycache__" not in path.parts \
                and path.is_file():
            digest.update(path.relative_to(PACKAGE_ROOT).as_posix().encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def qpriv_version() -> str:
    """The installed qpriv's version (``not installed`` where the package is only on the
    path)."""
    try:
        return importlib.metadata.version("qpriv")
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


@dataclass(frozen=True)
class Fingerprint:
    """The code and the data a grid's cells ran with: qpriv's version and source digest,
    ``(name, sha256)`` of each dataset, found from ``data_dir`` as qpriv always finds them, and
    ``(path, sha256)`` of each user file the cells read (``qpriv frontier --csv``)."""

    version: str
    source_sha256: str
    datasets: tuple[tuple[str, str], ...] = ()
    data_dir: str | None = None
    files: tuple[tuple[str, str], ...] = ()

    @classmethod
    def here(cls, datasets: Iterable[str] = (), *, data_dir: str | Path | None = None,
             files: Iterable[str | Path] = ()) -> Fingerprint:
        """This machine's fingerprint for ``datasets`` (each located, or downloaded, and
        verified as :func:`~qpriv.forecasting.datasets.locate_dataset` does) and ``files``
        (each read where its path says)."""
        digests = tuple((name, file_sha256(locate_dataset(name, path=data_dir)))
                        for name in sorted(set(datasets)))
        kept = tuple((str(path), _file_digest(Path(path))) for path in sorted(set(map(str,
                                                                                        files))))
        return cls(version=qpriv_version(), source_sha256=source_sha256(), datasets=digests,
                   data_dir=None if data_dir is None else str(data_dir), files=kept)

    def check_here(self) -> None:
        """Refuse to run a cell where the code or the data differ from this fingerprint's.

        Raises:
            InvalidInputError: in one line naming the node, what differs and the fix.
        """
        here = Fingerprint.here([name for name, _ in self.datasets], data_dir=self.data_dir,
                                files=[path for path, _ in self.files])
        node = socket.gethostname()
        if (here.version, here.source_sha256) != (self.version, self.source_sha256):
            raise InvalidInputError(
                f"node {node} runs qpriv {here.version} (source sha256 "
                f"{here.source_sha256[:12]}) but the driver runs qpriv {self.version} (source "
                f"sha256 {self.source_sha256[:12]}); install the driver's qpriv (the same "
                "version and commit) on every node")
        for (name, want), (_, have) in zip(self.datasets, here.datasets, strict=True):
            if have != want:
                raise InvalidInputError(
                    f"dataset {name} on node {node} has sha256 {have[:12]} but the driver's "
                    f"has {want[:12]}; give every node the driver's file")
        for (path, want), (_, have) in zip(self.files, here.files, strict=True):
            if have != want:
                raise InvalidInputError(
                    f"file {path} on node {node} has sha256 {have[:12]} but the driver's has "
                    f"{want[:12]}; give every node the driver's file at that path")


def _file_digest(path: Path) -> str:
    """A user file's sha256, or the line that says it is missing (on a node without it)."""
    if not path.is_file():
        raise InvalidInputError(f"{path} cannot be found on {socket.gethostname()}; give every "
                                "node the driver's file at that path")
    return file_sha256(path)


# -- the executors --------------------------------------------------------------------------


def run_here(job: CellJob, *, progress: bool,
             announce: Callable[[str], None] | None = None) -> CellOutcome:
    """Run one job in this process: its outcome, a failure (:data:`CELL_ERRORS`) included."""
    resumed = not job.finished and (job.run_dir / CHECKPOINT_FILE).is_file()
    try:
        value = job.work(progress=progress)
    except CELL_ERRORS as error:
        if announce:
            announce(f"  failed: {type(error).__name__}: {error}")
        return CellOutcome(job.key, FAILED, error=f"{type(error).__name__}: {error}",
                           trace=traceback.format_exc(limit=3))
    return CellOutcome(job.key, KEPT if job.finished else DONE, value=value, resumed=resumed)


class LocalExecutor:
    """The cells one after the other in this process (qpriv's default)."""

    name = "local"

    def session(self) -> AbstractContextManager[None]:
        """Nothing to join."""
        return contextlib.nullcontext()

    def run(self, jobs: Sequence[CellJob], *, fingerprint: Fingerprint, progress: bool,
            announce: Callable[[str], None] | None = None) -> list[CellOutcome]:
        """Run ``jobs`` in order (``fingerprint`` is this machine's: nothing to check)."""
        outcomes = []
        with work_bar(total=len(jobs), desc="cells", unit="cell", enabled=progress) as bar:
            def say(line: str) -> None:
                if announce:
                    with bar.external_write_mode():
                        announce(line)

            for i, job in enumerate(jobs, 1):
                bar.set_postfix_str(job.key, refresh=True)
                say(f"[{i}/{len(jobs)}] {job.key}")
                with label(f"[{i}/{len(jobs)} {job.key}]"):
                    outcomes.append(run_here(job, progress=progress, announce=say))
                bar.update(1)
                step_done()  # a job of several parts (the quickstart) moves its overall bar
        return outcomes


def make_executor(name: str = "local", *, address: str | None = None) -> Executor:
    """The executor called ``name`` (one of :data:`EXECUTORS`).

    Args:
        name: ``local`` (the cells one after the other, here) or ``ray`` (one Ray task per
            unfinished cell).
        address: the Ray cluster (``ray`` only; None: ``$RAY_ADDRESS``, else a local Ray
            started for the grid and stopped after it).

    Raises:
        InvalidInputError: an unknown name; an empty address, or one for the local executor;
            ``ray`` where Ray is not installed, or with a HOST:PORT address (given or
            ``$RAY_ADDRESS``) where nothing answers.
    """
    if name not in EXECUTORS:
        raise InvalidInputError(f"executor {name!r} is not one of {', '.join(EXECUTORS)}")
    if address is not None and not address.strip():  # e.g. an unset shell variable
        raise ArgumentError("{address} is empty; give the Ray head node's HOST:PORT, or leave "
                            "{address} out (then $RAY_ADDRESS, else a local Ray)")
    if name == "local":
        if address is not None:
            raise ArgumentError("{address} names a Ray cluster, which only {executor} uses; "
                                "add it or leave {address} out", values={"executor": "ray"})
        return LocalExecutor()
    try:
        module = importlib.import_module(RAY_MODULE)
    except ModuleNotFoundError as missing:
        if missing.name is None or missing.name.split(".")[0] != "ray":
            raise
        raise ArgumentError("{executor} needs Ray, which is not installed here; install it with "
                            f"{RAY_INSTALL}", values={"executor": "ray"}) from None
    return module.RayExecutor(address=address)
