"""The rules of a run directory shared by the forecaster and the classifier.

A run writes its settings (:data:`~qpriv.runs.layout.CONFIG_FILE`) before any training, its
checkpoints while it trains and its result (:data:`~qpriv.runs.layout.RESULT_FILE`) at the end.
A directory that holds a run is only continued on request (``resume``), and only with the same
settings: a resumed run then reaches the result of an uninterrupted one, and a finished run's
result is returned as it is.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from qpriv.errors import ArgumentError, InvalidInputError
from qpriv.runs.files import (
    atomic_write_bytes,
    atomic_write_json,
    changed_settings,
    read_json_object,
)
from qpriv.runs.layout import CONFIG_FILE, RESULT_FILE, RUN_FILES

NEW_RUN = "start a new run in another out_dir"


def check_folder(folder: str | Path, *, flag: str = "--out") -> Path:
    """``folder`` as a Path if a folder can be made there: it is a directory, or its nearest
    existing ancestor is (a grid checks this before any cell runs, so that a file in the way
    is one message, not one failure per cell).

    Raises:
        InvalidInputError: ``folder`` or an ancestor of it is a file.
    """
    path = Path(folder)
    for place in (path, *path.parents):
        if place.exists():
            if not place.is_dir():
                what = "exists" if place == path else f"lies inside {place}, which exists"
                raise InvalidInputError(f"{flag} {path} {what} and is not a directory; name "
                                        "a folder")
            break
    return path


def visible_entries(folder: Path) -> list[str]:
    """The names in ``folder`` but hidden ones (``.name``), sorted; none where it is no
    folder."""
    if not folder.is_dir():
        return []
    return sorted(path.name for path in folder.iterdir() if not path.name.startswith("."))


def first_names(names: Sequence[str], count: int = 3) -> str:
    """The first ``count`` of ``names`` for a message, "..." after them where there are more."""
    return ", ".join(names[:count]) + (", ..." if len(names) > count else "")


def check_out_dir(out_dir: str | Path | None, *, resume: bool, marks: Collection[str]
                  ) -> Path | None:
    """``out_dir`` as a Path if a run may write there (None stays None).

    Args:
        out_dir: the run directory, or None for a run that writes nothing.
        resume: continue (or read back) the run in ``out_dir``.
        marks: the files whose presence shows that ``out_dir`` holds a run (its result and
            its checkpoints).

    Raises:
        InvalidInputError: ``out_dir`` is a file or lies inside one; it holds other files
            but none of a run (:data:`~qpriv.runs.layout.RUN_FILES`); it holds a run and
            ``resume`` is False; ``resume`` without an ``out_dir``, with one that does not
            exist or is empty (nothing to continue), or with one that holds a run but no
            :data:`~qpriv.runs.layout.CONFIG_FILE` (its settings cannot be checked).
    """
    if out_dir is None:
        if resume:
            raise ArgumentError("{resume} needs {out_dir}: the folder of the run to continue")
        return None
    out = check_folder(out_dir, flag="out_dir")
    others = visible_entries(out)
    if resume and not others:
        # resuming nothing would start a new run as if resume were not given
        raise ArgumentError(f"no run to resume at {ArgumentError.literal(out)}; drop {{resume}} "
                            "to start one")
    held = [name for name in marks if (out / name).exists()]
    # a run writes several files into its own folder: never mix them into a folder of other
    # files (an unfinished run that got as far as its settings is still a run)
    if others and not RUN_FILES.intersection(others):
        raise ArgumentError(f"{{out_dir}} {ArgumentError.literal(out)} holds other files "
                            f"({ArgumentError.literal(first_names(others))}) and no qpriv run; "
                            "a run writes several files into its own folder: choose a new or "
                            "empty {out_dir}")
    if held and not resume:
        what = "a finished run" if RESULT_FILE in held else "an unfinished run"
        raise ArgumentError(f"{{out_dir}} {ArgumentError.literal(out)} already holds {what}; "
                            "add {resume} to continue or read it, or choose another {out_dir}")
    if held and not (out / CONFIG_FILE).is_file():
        what = "a result" if RESULT_FILE in held else "a checkpoint"
        raise InvalidInputError(f"cannot resume the run in {out}: it holds {what} but no "
                                f"{CONFIG_FILE}, so its settings cannot be checked against these; "
                                f"{NEW_RUN}")
    return out


def read_settings(path: str | Path, *, defaults: Mapping[str, Any] | None = None) -> dict:
    """A run's saved settings (its :data:`~qpriv.runs.layout.CONFIG_FILE`), with ``defaults``
    (keys the file gained in later versions, with what an older run did) filled in where the
    run lacks them, so that runs written before and after compare by what they did. A default
    that is a mapping fills the keys missing from a saved mapping under the same key (settings
    that gained fields, such as the model's); a saved value that is not a mapping is kept."""
    saved = read_json_object(path, fix=f"the run's settings cannot be checked: {NEW_RUN}")
    filled = {**(defaults or {}), **saved}
    for key, default in (defaults or {}).items():
        if isinstance(default, Mapping) and isinstance(saved.get(key), Mapping):
            filled[key] = {**default, **saved[key]}
    return filled


def open_run(out: Path | None, request: dict, *, resume: bool,
             defaults: Mapping[str, Any] | None = None, ignore: Collection[str] = ()
             ) -> dict | None:
    """Write ``request`` to ``out``'s config (atomically) before a run trains; on resume, check
    it against the saved one instead. Return the saved result of a run that has finished with
    these settings (None: train).

    Args:
        out: the run directory, checked by :func:`check_out_dir` (None: nothing is written).
        request: the run's settings, as JSON.
        resume: continue the run in ``out``.
        defaults: see :func:`read_settings`.
        ignore: keys that may differ on resume (they do not change what is computed).

    Raises:
        InvalidInputError: on resume, the settings differ from the saved ones (the message
            names the keys), or the saved run predates a key set here, so it cannot be checked.
    """
    if out is None:
        return None
    path = out / CONFIG_FILE
    if not (resume and path.is_file()):
        atomic_write_json(path, request)
        return None
    saved = read_settings(path, defaults=defaults)
    if 2 * len(saved.keys() & request.keys()) < len(request):
        # another command's run (a classifier's settings against a forecaster's): a list of
        # every differing key would read as if a few flags were off
        raise InvalidInputError(f"cannot resume the run in {out}: it holds another kind of "
                                "run (its settings share few keys with these: another qpriv "
                                f"command wrote it); {NEW_RUN}")
    changed = changed_settings(saved, request, ignore=ignore)
    unrecorded = [k for k in changed if k not in saved and request.get(k) is not None]
    if changed and changed == unrecorded:
        raise InvalidInputError(
            f"cannot resume the run in {out}: it was written by an older qpriv that did not "
            f"record {unrecorded}, so these settings cannot be checked against its own; "
            f"{NEW_RUN}")
    if changed:
        raise InvalidInputError(f"cannot resume the run in {out}: its settings differ in "
                                f"{changed}; resume with the same settings, or {NEW_RUN}")
    if not (out / RESULT_FILE).is_file():
        return None
    # finished with these very settings: the result stands (evaluation is seeded, so
    # evaluating again would only repeat it)
    return read_json_object(out / RESULT_FILE, fix=f"delete it to evaluate the run in {out} again")


def run_files(run_dir: str | Path, *, names: Collection[str] | None = None
              ) -> dict[str, bytes]:
    """The finished run in ``run_dir`` as ``{file name: bytes}``: every file of the directory
    but the temporaries of atomic writes (``.NAME.HEX.tmp``), or only ``names`` (a run that
    is one file of a folder many share), to be written elsewhere by :func:`write_run_files`
    (a run computed on another machine)."""
    run_dir = Path(run_dir)
    if names is not None:
        return {name: (run_dir / name).read_bytes() for name in names}
    return {path.name: path.read_bytes() for path in sorted(run_dir.iterdir())
            if path.is_file() and not path.name.startswith(".")}


def write_run_files(run_dir: str | Path, files: Mapping[str, bytes], *,
                    last: str = RESULT_FILE) -> bool:
    """Write the files of a finished run (:func:`run_files`) into ``run_dir``, each atomically
    and ``last`` (the file whose presence marks the run finished:
    :data:`~qpriv.runs.layout.RESULT_FILE`, or a classifier run's one JSON) last, so that the
    run never counts as finished before every file is in place. Nothing is written where
    ``run_dir`` already holds the same ``last`` (a file system shared with the machine that
    computed it); return whether anything was written.

    Raises:
        InvalidInputError: ``files`` holds no ``last``, or a name that is not a plain file
            name.
    """
    run_dir = Path(run_dir)
    for name in files:
        if Path(name).name != name or name.startswith(".") or name in ("", ".."):
            raise InvalidInputError(f"{name!r} is not a file name of a run; a run's files are "
                                    "plain names such as result.json")
    if last not in files:
        raise InvalidInputError(f"the files of a finished run hold no {last} "
                                f"({', '.join(sorted(files)) or 'none'}); compute the run again")
    result = run_dir / last
    if result.is_file() and result.read_bytes() == files[last]:
        return False
    for name in sorted(files, key=lambda name: name == last):
        atomic_write_bytes(run_dir / name, files[name])
    return True
