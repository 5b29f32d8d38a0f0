"""Timing shared by the benchmarks (imported as a sibling module: run them as scripts).

Every benchmark prints, as its last line, one JSON object (:func:`print_record`) with its
ratios and the machine facts it measured (:func:`machine_facts`: torch threads, the fp32 matmul
throughput, the load average when it ran), so that runs on different machines and days can be
compared line by line.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence

import torch

from qpriv.errors import InvalidInputError


def best_seconds(run: Callable[[], object], repeats: int) -> float:
    """Minimum wall time of ``repeats`` calls after one warm-up call."""
    return best_seconds_interleaved([run], repeats)[0]


def best_seconds_interleaved(runs: Sequence[Callable[[], object]], repeats: int, *,
                             clock: Callable[[], float] = time.perf_counter) -> list[float]:
    """Minimum time of each of ``runs`` over ``repeats`` rounds, after one warm-up round.

    The runs alternate within every round, so a slow spell of the machine (another process, a
    frequency change) falls on all of them alike instead of on whichever ran during it: the
    right timer for a ratio of two runs, which :func:`best_seconds` called twice is not.
    ``clock``: wall time by default; ``time.thread_time`` counts only the CPU time of the
    calling thread (for single-threaded work on a machine shared with other processes).
    """
    for run in runs:
        run()
    best = [float("inf")] * len(runs)
    for _ in range(repeats):
        for index, run in enumerate(runs):
            started = clock()
            run()
            best[index] = min(best[index], clock() - started)
    return best


def dp_linear_arguments(parser: argparse.ArgumentParser, *, repeats: int) -> None:
    """The options of a benchmark that fits dp-linear: the data, its horizon, the unit and
    budget, the rounds and the torch threads."""
    parser.add_argument("--dataset", default="ETTh1")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--horizon", type=int, default=24)
    parser.add_argument("--unit", default="record", choices=["record", "window"])
    parser.add_argument("--eps", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=repeats)
    parser.add_argument("--threads", type=int, default=1)


def matmul_gflops(*, n: int = 2048, repeats: int = 5) -> float:
    """fp32 throughput of a large ``torch.mm`` (n x n by n x n) on the current torch threads,
    in GFLOP/s (best of ``repeats``)."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.mm(a, b)
    best = float("inf")
    for _ in range(repeats):
        tic = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - tic)
    return 2 * n**3 / best / 1e9


def machine_facts(*, matmul: bool = True) -> dict:
    """What a benchmark's numbers depend on, measured now: torch threads and version, CPUs,
    the 1-minute load average (other work on the machine) and the fp32 matmul throughput."""
    facts = {
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_average_1min": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
    }
    if matmul:
        facts["matmul_gflops"] = round(matmul_gflops(), 2)
    return facts


def print_record(benchmark: str, record: dict, facts: dict) -> None:
    """The benchmark's last line: one JSON object of its results and the machine facts."""
    print(json.dumps({"benchmark": benchmark, **record, "machine": facts}))


def run_benchmark(main: Callable[[], None]) -> None:
    """Run ``main``; a bad input (no data, a bad option) is one line on stderr and exit 2, as
    the ``qpriv`` command does, instead of a traceback."""
    try:
        main()
    except InvalidInputError as error:
        print(f"{sys.argv[0]}: error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
