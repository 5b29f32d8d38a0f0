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
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import torch


def _atomic_write(path: str | Path, write: Callable[[IO[bytes]], None]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{secrets.token_hex(8)}.tmp"
    # mode 0o666 less the umask, as for any new file (tempfile would make it 0o600)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
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


def atomic_torch_save(path: str | Path, obj: Any) -> Path:
    """``torch.save(obj)`` to ``path``, atomically."""
    return _atomic_write(path, lambda handle: torch.save(obj, handle))


def load_checkpoint(path: str | Path) -> dict:
    """Load a checkpoint written by :func:`atomic_torch_save` on the CPU (``weights_only``)."""
    return torch.load(Path(path), map_location="cpu", weights_only=True)
