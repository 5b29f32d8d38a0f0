"""Timing shared by the benchmarks (imported as a sibling module: run them as scripts)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from qpriv.errors import InvalidInputError


def best_seconds(run: Callable[[], object], repeats: int) -> float:
    """Minimum wall time of ``repeats`` calls after one warm-up call."""
    run()
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
    return best


def run_benchmark(main: Callable[[], None]) -> None:
    """Run ``main``; a bad input (no data, a bad option) is one line on stderr and exit 2, as
    the ``qpriv`` command does, instead of a traceback."""
    try:
        main()
    except InvalidInputError as error:
        print(f"{sys.argv[0]}: error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
