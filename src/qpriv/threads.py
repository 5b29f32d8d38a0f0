"""torch's CPU thread count for the length of a block, restored afterwards."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from qpriv.errors import InvalidInputError


def check_threads(threads: int | None) -> int | None:
    """``threads`` if it is None or an integer >= 1.

    Raises:
        InvalidInputError: anything else.
    """
    if threads is not None and (isinstance(threads, bool) or int(threads) != threads
                                or threads < 1):
        raise InvalidInputError(f"threads = {threads!r} is not an integer >= 1")
    return threads


@contextlib.contextmanager
def torch_threads(threads: int | None) -> Iterator[int]:
    """Run torch on ``threads`` CPU threads inside the block (None: leave the caller's
    setting), then restore the caller's; yields the count in effect.

    Small tensors on a shared CPU run far faster on one thread than on several: torch's thread
    hand-offs dominate such work.

    Raises:
        InvalidInputError: ``threads`` is not an integer >= 1.
    """
    check_threads(threads)
    saved = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(int(threads))
    try:
        yield torch.get_num_threads()
    finally:
        torch.set_num_threads(saved)
