"""Atomic writes of results and checkpoints.

Every file is written to a temporary file in the target's directory, flushed to disk and moved
over the target with ``os.replace``: a reader (or a run resumed after a crash) sees either the
previous complete file or the new complete file, never a half-written one.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import pickle
import secrets
import time
import zipfile
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np
import torch
from tqdm import tqdm

from qpriv.errors import InvalidInputError

STALE_AFTER_SECONDS = 15 * 60
"""A temporary file of an atomic write this old belongs to a writer that was killed."""


def _atomic_write(path: str | Path, write: Callable[[IO[bytes]], None]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{secrets.token_hex(8)}.tmp"
    try:
        # mode 0o666 less the umask, as for any new file (tempfile would make it 0o600)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except OSError as err:  # named by the file asked for, not by its hidden temporary twin
        raise type(err)(err.errno, err.strerror, str(path)) from err
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        if isinstance(err, OSError) and err.filename is None and err.errno is not None:
            # a full disk fails inside write or fsync, with no file named: name the target
            raise type(err)(err.errno, err.strerror, str(path)) from err
        raise
    return path


def _json_ready(value: Any) -> Any:
    """Non-finite floats become None (strict JSON has no NaN or Infinity)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_ready(v) for v in value]
    return value


def atomic_write_json(path: str | Path, data: Any) -> Path:
    """Write ``data`` as indented, strict JSON (NaN and infinities as null), atomically."""
    text = json.dumps(_json_ready(data), indent=2, sort_keys=False, allow_nan=False) + "\n"
    return _atomic_write(path, lambda handle: handle.write(text.encode()))


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path``, atomically."""
    return _atomic_write(path, lambda handle: handle.write(text.encode()))


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path``, atomically (e.g. a PNG rendered into memory)."""
    return _atomic_write(path, lambda handle: handle.write(data))


def atomic_savez(path: str | Path, **arrays: np.ndarray) -> Path:
    """``numpy.savez(**arrays)`` to ``path``, atomically (a linear run's ``linear.npz``)."""
    return _atomic_write(path, lambda handle: np.savez(handle, **arrays))


def atomic_torch_save(path: str | Path, obj: Any) -> Path:
    """``torch.save(obj)`` to ``path``, atomically."""
    return _atomic_write(path, lambda handle: torch.save(obj, handle))


def load_checkpoint(path: str | Path, *, fix: str = "delete it and re-run") -> dict:
    """Load a checkpoint written by :func:`atomic_torch_save` on the CPU (``weights_only``).

    Raises:
        InvalidInputError: the file cannot be read or is not a checkpoint (a truncated or
            overwritten file); the message names it and ends with ``fix``.
    """
    path = Path(path)
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except (OSError, RuntimeError, EOFError, pickle.UnpicklingError, zipfile.BadZipFile) as exc:
        raise _damaged(path, exc, fix=fix) from exc
    return _require_dict(path, state, what="a checkpoint", fix=fix)


def read_json_object(path: str | Path, *, fix: str) -> dict:
    """A JSON object read from ``path``.

    Raises:
        InvalidInputError: the file cannot be read, is not JSON (e.g. truncated) or holds no
            JSON object; the message names it and ends with ``fix``.
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _damaged(path, exc, fix=fix) from exc
    return _require_dict(path, data, what="a JSON object", fix=fix)


def changed_settings(saved: dict, current: dict, *, ignore: Collection[str] = ()) -> list[str]:
    """The keys, sorted, whose values differ between a run's ``saved`` settings (read back from
    JSON) and ``current`` ones (compared as JSON would store them), ``ignore`` left out: what
    stops a resume."""
    current = json.loads(json.dumps(current))
    return sorted(k for k in set(saved) | set(current)
                  if k not in ignore and saved.get(k) != current.get(k))


def remove_stale_temporaries(directory: str | Path,
                             older_than: float = STALE_AFTER_SECONDS) -> list[Path]:
    """Delete the temporary files (``.NAME.HEX.tmp``) that killed atomic writes left in
    ``directory``, if older than ``older_than`` seconds (a live writer's are seconds old);
    return them. Nothing reads them, but each can be checkpoint-sized."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    removed = []
    now = time.time()
    for path in directory.glob(".*.tmp"):
        with contextlib.suppress(OSError):  # gone already, or not ours to remove
            if path.is_file() and now - path.stat().st_mtime > older_than:
                path.unlink()
                removed.append(path)
    return removed


@dataclass(frozen=True)
class Written:
    """What a command wrote under a folder: ``files`` regular files of ``size`` bytes."""

    files: int
    size: int

    def __str__(self) -> str:
        """``1.23MB in 9 files`` (tqdm's SI sizes), or ``nothing``."""
        if not self.files:
            return "nothing"
        size = tqdm.format_sizeof(self.size, suffix="B", divisor=1000)
        return f"{size} in {self.files} file{'' if self.files == 1 else 's'}"


MTIME_LAG = 0.1
"""Seconds a file's modification time may lag :func:`time.time`: Linux stamps files from its
coarse clock (one tick, 4 ms at 250 Hz, measured up to 4.2 ms here), so a file written just
after a command started can carry a time before it."""


def written_since(root: str | Path, *, since: float) -> Written:
    """The regular files under ``root`` last modified at or after ``since`` (a
    :func:`time.time`, less :data:`MTIME_LAG`), and their total size: what a command that
    started then wrote there (a file it only read back, such as a finished run it reused, is not
    counted)."""
    files = size = 0
    for path in Path(root).rglob("*"):
        with contextlib.suppress(OSError):  # removed meanwhile (a stale temporary)
            stat = path.stat()
            if path.is_file() and stat.st_mtime >= since - MTIME_LAG:
                files += 1
                size += stat.st_size
    return Written(files=files, size=size)


def _damaged(path: Path, exc: BaseException, *, fix: str) -> InvalidInputError:
    """Why ``path`` could not be read: a permission, a missing file or a directory as such
    (re-running would not help), anything else as a damaged file, with ``fix``."""
    if isinstance(exc, PermissionError):
        return InvalidInputError(f"cannot read {path}: permission denied; give the user who "
                                 "runs qpriv read access to it (chmod u+r), or run qpriv as "
                                 "its owner")
    if isinstance(exc, FileNotFoundError):
        return InvalidInputError(f"cannot read {path}: it does not exist; {fix}")
    if isinstance(exc, IsADirectoryError):
        return InvalidInputError(f"cannot read {path}: it is a directory, not a file; {fix}")
    text = str(exc).strip().splitlines()
    reason = f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
    return InvalidInputError(f"cannot read {path}: the file is damaged ({reason}); {fix}")


def _require_dict(path: Path, value: Any, *, what: str, fix: str) -> dict:
    if not isinstance(value, dict):
        raise InvalidInputError(f"{path} holds {type(value).__name__}, not {what}; {fix}")
    return value
