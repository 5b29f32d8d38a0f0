"""What a directory holds, and so what its report shows (:func:`detect`).

In order: a forecasting run (``qpriv train --out``: ``config.json`` and ``result.json``, or a
released model: its result and weights); a classifier run (``qpriv train-classifier --out``,
or ``DPSGDClassifier.save``'s result and weights: its ``result.json`` names a ``task``); a
folder of a kind a layer above registered (:mod:`qpriv.report.registry`: a frontier, a
reproduction); a folder of forecasting runs (a quickstart's ``--out``), with the registered
folders it holds; an ``--out`` folder above registered folders only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from qpriv.errors import InvalidInputError
from qpriv.report.registry import folder_kind, folder_kinds, runs_kind
from qpriv.report.result_files import REWRITE_FIX
from qpriv.runs.files import read_json_object
from qpriv.runs.layout import (
    BEST_FILE,
    CLASSIFIER_MODEL_FILE,
    CONFIG_FILE,
    LINEAR_MODEL_FILE,
    RESULT_FILE,
)

RUN = "run"
"""The kind of a forecasting run's report."""
CLASSIFIER = "classifier"
"""The kind of a classifier run's report."""

_RUN_TITLES = {RUN: "forecasting run", CLASSIFIER: "classifier run"}


@dataclass(frozen=True)
class Contents:
    """What :func:`detect` found in a directory: its kind and the folders to report on."""

    kind: str
    title: str
    """How the page's title names the kind (``forecasting run``)."""
    directory: Path
    runs: tuple[Path, ...] = ()
    folders: Mapping[str, tuple[Path, ...]] = field(default_factory=dict)
    """The folders found of each registered kind that has some (:mod:`qpriv.report.registry`),
    in the order the kinds were registered."""


def is_run(path: Path) -> bool:
    """A run folder, or a released model (its result and weights, no settings: a linear
    forecaster's, a backbone's, or a saved classifier's)."""
    return (path / RESULT_FILE).is_file() and any(
        (path / name).is_file()
        for name in (CONFIG_FILE, LINEAR_MODEL_FILE, BEST_FILE, CLASSIFIER_MODEL_FILE))


def is_classifier_run(path: Path) -> bool:
    """Whether the run in ``path`` trained a classifier (its result names a ``task``)."""
    result = read_json_object(path / RESULT_FILE, fix=REWRITE_FIX)
    return "task" in result and not isinstance(result.get("model"), Mapping)


def _run_order(path: Path) -> tuple[int, str]:
    """The runs of a folder in the order its registered kind lists them, the others after
    them by name."""
    names = list(runs_kind().labels)
    return (names.index(path.name) if path.name in names else len(names), path.name)


def detect(directory: str | Path) -> Contents:
    """What ``directory`` holds, and so what its report shows (see the module docstring).

    Raises:
        InvalidInputError: it does not exist, is not a directory, or holds none of them.
    """
    path = Path(directory).expanduser()
    if not path.is_dir():
        what = "does not exist" if not path.exists() else "is not a directory"
        raise InvalidInputError(f"report directory {path} {what}; give the folder a qpriv "
                                "command wrote (e.g. qpriv train --out DIR)")
    if is_run(path):
        kind = CLASSIFIER if is_classifier_run(path) else RUN
        return Contents(kind, _RUN_TITLES[kind], path, runs=(path,))
    found: dict[str, tuple[Path, ...]] = {}
    for entry in folder_kinds():
        folders = entry.detect(path)
        if folders == (path,):  # the directory is one: its page shows it alone
            return Contents(entry.kind, entry.title, path, folders={entry.kind: folders})
        if folders:
            found[entry.kind] = folders
    runs = tuple(sorted((child for child in path.iterdir() if child.is_dir() and is_run(child)
                         and not is_classifier_run(child)), key=_run_order))
    if runs:
        return Contents(runs_kind().kind, runs_kind().title, path, runs=runs, folders=found)
    if found:
        first = folder_kind(next(iter(found)))
        return Contents(first.kind, first.title, path, folders=found)
    expected = [f"a run ({CONFIG_FILE} and {RESULT_FILE}, from qpriv train --out or "
                "train-classifier --out)", runs_kind().expected,
                *(entry.expected for entry in folder_kinds())]
    raise InvalidInputError(
        f"{path} holds nothing to report on: expected {', '.join(expected[:-1])} or "
        f"{expected[-1]}; give one of those folders")
