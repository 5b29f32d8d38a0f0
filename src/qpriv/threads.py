"""The CPU thread count of torch and of the BLAS library (numpy's, scipy's) for the length of a
block, restored afterwards."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from threadpoolctl import threadpool_limits

from qpriv.errors import InvalidInputError

MAX_THREADS = 1024
"""The most CPU threads a block takes: torch starts every one of them, and far beyond any
machine's cores that fails outright (100,000 crashed the process, with no message)."""


def check_threads(threads: int | None) -> int | None:
    """``threads`` if it is None or an integer in [1, :data:`MAX_THREADS`].

    Raises:
        InvalidInputError: anything else.
    """
    if threads is not None and (isinstance(threads, bool) or int(threads) != threads
                                or threads < 1):
        raise InvalidInputError(f"threads = {threads!r} is not an integer >= 1")
    if threads is not None and threads > MAX_THREADS:
        raise InvalidInputError(
            f"threads = {threads} is outside the valid range [1, {MAX_THREADS}]: torch starts "
            "every thread it is given; give at most the machine's cores")
    return threads


@contextlib.contextmanager
def torch_threads(threads: int | None) -> Iterator[int]:
    """Run torch, and the BLAS library under numpy and scipy, on ``threads`` CPU threads
    inside the block (None: leave the caller's setting), then restore the caller's; yields
    torch's count in effect.

    Small tensors on a shared CPU run far faster on one thread than on several: torch's thread
    hand-offs dominate such work. The BLAS library is held to the same count because a matrix
    product's last bits depend on how many threads sum it: a run gives the same numbers in
    any process (a Ray worker starts with one BLAS thread, this shell with one per core).

    Raises:
        InvalidInputError: ``threads`` is not an integer >= 1.
    """
    # torch is imported here, where threads are set, not with the module: the command line
    # checks --threads with check_threads and must start without torch (benchmarks/startup.py)
    import torch

    check_threads(threads)
    saved = torch.get_num_threads()
    if threads is None:
        yield saved
        return
    torch.set_num_threads(int(threads))
    try:
        with threadpool_limits(limits=int(threads), user_api="blas"):
            yield torch.get_num_threads()
    finally:
        torch.set_num_threads(saved)


@contextlib.contextmanager
def one_torch_thread() -> Iterator[None]:
    """Run torch (and BLAS) on one thread inside the block, then restore the caller's setting.

    For work on tensors of a few hundred numbers (the rigorous accountant's worst-pair search,
    the distinguishing game of :mod:`qpriv.audits.lower_bound`): on a shared CPU, torch's thread
    hand-offs make such work tens of times slower than one thread.
    """
    with torch_threads(1):
        yield
