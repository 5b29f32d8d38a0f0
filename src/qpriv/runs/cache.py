"""A JSON answer kept on disk: read back if a usable one is there, else computed and kept.

The experiments keep every cell's result, every attack and every classifier run; the rigorous
accounting keeps its summaries; ``qpriv train-classifier --lr-grid`` keeps its chosen rate. Each
is a :func:`cached_json`, which differ only in what a damaged or unusable kept file does.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from qpriv.errors import InvalidInputError
from qpriv.runs.files import atomic_write_json, read_json_object

Damaged = Literal["recompute", "refuse"]
Store = Literal["write", "by-compute", "if-possible"]


def _usable(kept: dict) -> bool:
    return True


def cached_json(path: str | Path | None, compute: Callable[[], dict], *, damaged: Damaged,
                fix: str, valid: Callable[[dict], bool] = _usable, reuse: bool = True,
                store: Store = "write") -> dict:
    """The JSON object kept in ``path`` if it is usable, else ``compute()``, then kept there.

    Args:
        path: where the answer is kept; None keeps nothing (``compute()`` every time).
        compute: the answer, a JSON-able dict (computed only when no usable one is kept).
        damaged: what a kept file that cannot be read, holds no JSON object or fails ``valid``
            does: ``"recompute"`` writes a notice (``qpriv: cannot read PATH: ...; FIX``) on
            stderr and computes the answer again; ``"refuse"`` raises.
        fix: the end of the message about such a file: what is done (``"it is trained
            again"``) or what to do (``"delete it to tune again"``).
        valid: whether a kept object answers this question (e.g. its settings are the ones
            asked now); it may raise :class:`~qpriv.errors.InvalidInputError` itself to name
            what differs.
        reuse: False computes and replaces whatever is kept (a fresh run over an old record).
        store: ``"write"`` keeps the answer atomically (a failure to write raises);
            ``"by-compute"`` where ``compute`` writes ``path`` itself (a run writing its own
            result); ``"if-possible"`` for a cache whose loss costs only time: a failure to
            write it is ignored.

    Raises:
        InvalidInputError: with ``damaged="refuse"``, the kept file is damaged or unusable;
            the message names it and ends with ``fix``.
    """
    path = None if path is None else Path(path)
    if path is not None and reuse and path.is_file():
        try:
            kept = read_json_object(path, fix=fix)
            if valid(kept):
                return kept
            raise InvalidInputError(f"{path} does not hold what is asked here; {fix}")
        except InvalidInputError as problem:
            if damaged == "refuse":
                raise
            print(f"qpriv: {problem}", file=sys.stderr)
    answer = compute()
    if path is not None and store == "write":
        atomic_write_json(path, answer)
    elif path is not None and store == "if-possible":
        with contextlib.suppress(OSError):
            atomic_write_json(path, answer)
    return answer
