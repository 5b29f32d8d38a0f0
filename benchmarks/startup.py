"""Start-up time of the ``qpriv`` command line: ``--version``, ``--help`` and a mistyped flag of
each command, each a fresh process, beside a bare Python and an ``import torch`` measured in the
same run (the floor and the cost the command line avoids).

A command imports only its own module, and its parser imports no numerical library beyond
numpy (:mod:`qpriv.cli.commands`): the target is under 1 s on an idle machine for ``--version``
and a bad flag of ``train`` and ``forecast``. The last line is one JSON object.

    python benchmarks/startup.py --repeats 5
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

from _timing import machine_facts, print_record, run_benchmark

from qpriv.cli.commands import COMMANDS

CLI = "import sys; from qpriv.cli import main; sys.exit(main())"
"""What the ``qpriv`` console script runs."""
TARGET_S = 1.0
TARGETED = ("--version", "--bogus", "train --bogus", "forecast --bogus")
"""The invocations the target covers; the other commands are measured and reported."""


def seconds(argv: list[str], repeats: int) -> float:
    """Best wall time of ``repeats`` fresh processes running ``argv``."""
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    python = seconds([sys.executable, "-c", "pass"], args.repeats)
    torch_s = seconds([sys.executable, "-c", "import torch"], args.repeats)
    calls = ["--version", "--help", "--bogus",
             *(f"{command.name} --bogus" for command in COMMANDS)]
    times = {call: seconds([sys.executable, "-c", CLI, *call.split()], args.repeats)
             for call in calls}
    print(f"bare python {python:.3f} s, import torch {torch_s:.3f} s")
    for call, value in times.items():
        mark = ("target" if value < TARGET_S else "OVER TARGET") if call in TARGETED else ""
        print(f"qpriv {call:<28} {value:6.3f} s  {value / torch_s:5.2f}x import torch  {mark}")
    print_record("startup", {
        "seconds": {call: round(value, 4) for call, value in times.items()},
        "bare_python_s": round(python, 4), "import_torch_s": round(torch_s, 4),
        "over_import_torch": {call: round(value / torch_s, 3) for call, value in times.items()},
        "targeted_under_1s": all(times[call] < TARGET_S for call in TARGETED),
    }, machine_facts(matmul=False))


if __name__ == "__main__":
    run_benchmark(main)
