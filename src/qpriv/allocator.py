"""Keep freed tensor memory in the process for reuse, instead of handing it back to the system
after every training step.

glibc's allocator serves every block above its mmap threshold (at most 32 MB) with a fresh
``mmap`` and returns it with ``munmap`` when freed, and it trims the heap's free top back to the
system. A training step of the LDPT backbone at batch 64 allocates and frees activations of
20-50 MB (a ``(64, 7, 81, 256)`` float32 tensor is 37 MB) and each batch's injection noise: so
every step faults its pages in again from zeroed memory. Measured on a 2-core CPU, one thread,
384 ETTh1 windows: about 380,000 page faults and 0.9 s of system time per classical epoch of
6 s, and the draw-ahead thread of :mod:`qpriv.training.ahead` faulting at the same time as the
training thread contends with it for the process's memory map. Drawing 29 million normals
into a fresh tensor took 0.20 s, into a reused one 0.12 s.

:func:`reusing_freed_memory` sets glibc's ``M_MMAP_MAX`` to 0 (every block from the heap) and
``M_TRIM_THRESHOLD`` to the largest value (the heap is not trimmed) for the length of a block,
the trainer's loop over an epoch's batches, so a step's buffers are reused by the next step at
no system cost. On leaving it restores glibc's defaults and returns the free memory to the
system (``malloc_trim``), so that a validation pass with larger batches does not stack its
buffers on the training step's (measured on ETTh1 at the paper's size: a full LDPT epoch and its
validation peak at 2.0 GiB with the setting scoped so, against 2.2 GiB without it; left on for
the whole process, 10 batches and the validation already peaked at 3.65 GiB). glibc's dynamic
mmap threshold stays off once the trim threshold has been set, so afterwards blocks above
128 KiB are mapped as by glibc's initial default. Written by hand
with ``ctypes`` because no maintained Python package sets these options, and PyTorch's CPU
tuning advice (jemalloc or tcmalloc through ``LD_PRELOAD``) acts only at process start, which a
library cannot do. Elsewhere than glibc (macOS, Windows, musl) it does nothing, and a program
embedding qpriv that wants glibc's defaults throughout sets ``QPRIV_HOLD_FREED_MEMORY=0``.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import platform
import threading
from collections.abc import Iterator

M_TRIM_THRESHOLD = -1
"""glibc ``mallopt`` option: free heap top above this many bytes is returned to the system."""
M_MMAP_MAX = -4
"""glibc ``mallopt`` option: the most blocks served by ``mmap`` at a time (0: none)."""
OPT_OUT = "QPRIV_HOLD_FREED_MEMORY"
"""Environment variable: ``0`` leaves the allocator alone."""
_NEVER_TRIM = 2**31 - 1  # mallopt takes a C int
_DEFAULTS = ((M_MMAP_MAX, 65536), (M_TRIM_THRESHOLD, 128 * 1024))  # glibc's own


def _glibc() -> ctypes.CDLL | None:
    """The process's C library when it is glibc (the one whose options are set here)."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    libc = ctypes.CDLL(None)
    libc.mallopt.argtypes, libc.mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    libc.malloc_trim.argtypes, libc.malloc_trim.restype = (ctypes.c_size_t,), ctypes.c_int
    return libc


_LIBC = _glibc()
_depth = 0  # nested or concurrent blocks (trainers in threads) restore at the last one out
_lock = threading.Lock()


@contextlib.contextmanager
def reusing_freed_memory() -> Iterator[bool]:
    """Inside the block, freed memory stays in the process for reuse (module docstring);
    afterwards glibc's defaults are back and the free memory is returned to the system.
    Yields whether the setting is in effect (False where the C library is not glibc, or
    where ``QPRIV_HOLD_FREED_MEMORY=0``)."""
    global _depth
    if _LIBC is None or os.environ.get(OPT_OUT, "").strip() == "0":
        yield False
        return
    with _lock:
        if _depth == 0:
            _LIBC.mallopt(M_MMAP_MAX, 0)
            _LIBC.mallopt(M_TRIM_THRESHOLD, _NEVER_TRIM)
        _depth += 1
    try:
        yield True
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                for option, value in _DEFAULTS:
                    _LIBC.mallopt(option, value)
                _LIBC.malloc_trim(0)
