"""Timing shared by the benchmarks (imported as a sibling module: run them as scripts)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence

from qpriv.errors import InvalidInputError


def best_seconds(run: Callable[[], object], repeats: int) -> float:
    """Minimum wall time of ``repeats`` calls after one warm-up call."""
    return best_seconds_interleaved([run], repeats)[0]


def best_seconds_interleaved(runs: Sequence[Callable[[], object]], repeats: int) -> list[float]:
    """Minimum wall time of each of ``runs`` over ``repeats`` rounds, after one warm-up round.

    The runs alternate within every round, so a slow spell of the machine (another process, a
    frequency change) falls on all of them alike instead of on whichever ran during it: the
    right timer for a ratio of two runs, which :func:`best_seconds` called twice is not.
    """
    for run in runs:
        run()
    best = [float("inf")] * len(runs)
    for _ in range(repeats):
        for index, run in enumerate(runs):
            started = time.perf_counter()
            run()
            best[index] = min(best[index], time.perf_counter() - started)
    return best


def run_benchmark(main: Callable[[], None]) -> None:
    """Run ``main``; a bad input (no data, a bad option) is one line on stderr and exit 2, as
    the ``qpriv`` command does, instead of a traceback."""
    try:
        main()
    except InvalidInputError as error:
        print(f"{sys.argv[0]}: error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
