"""The kinds of folder a report shows beyond a single run, registered by the layers above.

The report package itself knows a run (:mod:`qpriv.report.forecast_run`,
:mod:`qpriv.report.classifier_run`) and a folder of runs. What a layer above writes (the
experiments' frontiers, reproductions and quickstarts) it knows only through this registry:
the module that defines such a kind registers it when it is imported, and whoever builds the
report of such a folder imports that module first (``qpriv report`` does). Two kinds of entry:

* :func:`register_section`: a folder a command writes (a frontier's ``frontier.csv``), found
  where the report's directory is one or holds some (an ``--out`` folder above them), each
  drawn as one section;
* :func:`register_runs_section`: what a folder of finished runs is (a quickstart's ``--out``):
  its name, the labels and order of its runs, and the section that leads its page (the runs
  compared). Without one, such a folder is :data:`RUNS`: its runs by name, nothing compared.

Example (the registration of a frontier, in :mod:`qpriv.experiments.report_sections`)::

    register_section("frontier", title="privacy-utility frontier",
                     expected="a frontier (frontier.csv)", detect=frontiers_in,
                     build=frontier_section)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from qpriv.errors import ArgumentError
from qpriv.report.document import Section


@dataclass(frozen=True)
class FolderKind:
    """A kind of folder that a command writes, and how a report shows it."""

    kind: str
    """Its name, and the page's kind where the report's directory is one (``frontier``)."""
    title: str
    """How the page's title names it (``privacy-utility frontier``)."""
    expected: str
    """What a directory holds to be one, for the error that lists what a report can show
    (``a frontier (frontier.csv)``)."""
    detect: Callable[[Path], tuple[Path, ...]]
    """The folders of this kind that a directory is (``(directory,)``) or holds (``()``:
    none)."""
    build: Callable[[Path], Section]
    """The section of one such folder."""


@dataclass(frozen=True)
class RunsKind:
    """What a folder of finished runs is, and how a report shows it."""

    kind: str
    """Its name, the page's kind (``quickstart``)."""
    title: str
    """How the page's title names it."""
    expected: str
    """What such a folder holds, for the error that lists what a report can show."""
    labels: Mapping[str, str]
    """A run folder's name -> the run's label, in the order the page lists the runs (any
    other run after them, by name)."""
    build: Callable[[Sequence[Path]], Section] | None = None
    """The section that leads the page, of the runs in that order (None: none)."""


RUNS = RunsKind(kind="runs", title="folder of runs",
                expected="a folder of runs (each from qpriv train --out)", labels={})
"""A folder of finished runs where no layer above has registered what one is."""

_FOLDERS: dict[str, FolderKind] = {}
_runs_kind = RUNS


def register_section(kind: str, *, title: str, expected: str,
                     detect: Callable[[Path], tuple[Path, ...]],
                     build: Callable[[Path], Section]) -> None:
    """Register a kind of folder (see :class:`FolderKind`); registering ``kind`` again
    replaces it in its place. A directory that several kinds find to be theirs is the first
    registered's, and the sections of the folders it holds follow in that order."""
    _FOLDERS[kind] = FolderKind(kind=kind, title=title, expected=expected, detect=detect,
                                build=build)


def register_runs_section(kind: str, *, title: str, expected: str, labels: Mapping[str, str],
                          build: Callable[[Sequence[Path]], Section]) -> None:
    """Register what a folder of finished runs is (see :class:`RunsKind`); registering
    ``kind`` again replaces it.

    Raises:
        ArgumentError: another kind is registered for a folder of runs already.
    """
    global _runs_kind
    if _runs_kind is not RUNS and _runs_kind.kind != kind:
        raise ArgumentError(f"a folder of runs is a {_runs_kind.kind!r} already; it cannot also "
                            f"be a {kind!r}")
    _runs_kind = RunsKind(kind=kind, title=title, expected=expected, labels=dict(labels),
                        build=build)


def folder_kinds() -> tuple[FolderKind, ...]:
    """The registered kinds of folder, in the order they were registered."""
    return tuple(_FOLDERS.values())


def folder_kind(kind: str) -> FolderKind:
    """The registered kind of folder named ``kind`` (a ``KeyError`` if there is none)."""
    return _FOLDERS[kind]


def runs_kind() -> RunsKind:
    """What a folder of finished runs is: the registered kind, else :data:`RUNS`."""
    return _runs_kind
