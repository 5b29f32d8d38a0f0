"""Keep freed heap memory in the process (glibc), for the DP-SGD step's large buffers.

Per-window gradients are tens of MB per step (the head alone is 64 x 248,832 floats at the
paper's size). glibc serves blocks that large with ``mmap`` and gives them back with ``munmap``
on every free, so each DP-SGD step pays page faults on fresh memory: on a 2-core CPU that
was 10-40 % of the step, and most of the run-to-run spread of ``benchmarks/dpsgd_cost.py``.
No library we depend on sets this (PyTorch leaves the allocator to the process; jemalloc or
tcmalloc would fix it but cannot be loaded after start-up), so we ask glibc through
``mallopt``: no ``mmap`` for large blocks, and no trimming of the heap's top. Freed memory is
then reused by the next step; the process keeps its peak heap instead of returning it.

This changes the allocator of the whole process. A program that embeds qpriv and would rather
keep glibc's defaults sets ``QPRIV_HOLD_FREED_MEMORY=0`` in the environment.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

M_TRIM_THRESHOLD = -1
M_MMAP_MAX = -4
OPT_OUT = "QPRIV_HOLD_FREED_MEMORY"
"""Set to ``0`` to leave the allocator alone."""
_applied: bool | None = None


def hold_freed_memory() -> bool:
    """Ask glibc to keep freed memory for reuse (once per process); True if it agreed.

    A no-op returning False off Linux or without glibc (macOS, musl, Windows), where the
    allocator differs and nothing is changed, and where ``QPRIV_HOLD_FREED_MEMORY=0``.
    """
    global _applied
    if _applied is None:
        _applied = False
        if os.environ.get(OPT_OUT, "").strip() == "0":
            return False
        if sys.platform.startswith("linux"):
            try:
                libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
                mallopt = libc.mallopt
            except (OSError, AttributeError):
                return False
            mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
            # mallopt returns 1 on success
            _applied = (mallopt(M_MMAP_MAX, 0) == 1
                        and mallopt(M_TRIM_THRESHOLD, 2**31 - 1) == 1)
    return _applied
