"""Timing shared by the benchmarks (imported as a sibling module: run them as scripts)."""

from __future__ import annotations

import time
from collections.abc import Callable


def best_seconds(run: Callable[[], object], repeats: int) -> float:
    """Minimum wall time of ``repeats`` calls after one warm-up call."""
    run()
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
    return best
