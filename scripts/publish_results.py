"""Publish a finished full-budget grid's small outputs into the repository's results/ folder.

What is copied and what is refused: :mod:`qpriv.experiments.publish`. Bad input, an
unfinished grid or a budget other than full (without --allow-budget) exits with code 2 and one
line, and writes nothing.

    python scripts/publish_results.py --out runs/full --reproduce table3 \\
        --dest results/table3 --command "qpriv reproduce table3 --out runs/full"
    python scripts/publish_results.py --out runs/frontier --frontier ETTh1-H24-record \\
        --dest results/frontier-ETTh1-H24-record \\
        --command "qpriv frontier --dataset ETTh1 --horizon 24 --unit record --out runs/frontier"
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from qpriv.errors import ArgumentError, QprivError
from qpriv.experiments.grid import BUDGETS, FULL
from qpriv.experiments.publish import frontier, publish, reproduction, summary

FLAGS = {"budget": "--allow-budget"}
"""How the library's argument names are spelled on this command line."""


def parser() -> argparse.ArgumentParser:
    """The script's arguments."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--reproduce", metavar="ID",
                      help="a reproduction, e.g. table3 or qml-figure2 (qpriv reproduce --list)")
    what.add_argument("--frontier", metavar="DATASET-H<H>-<UNIT>",
                      help="a frontier's folder name, e.g. ETTh1-H24-record")
    p.add_argument("--out", required=True, help="the --out the grid was run with")
    p.add_argument("--dest", required=True, help="the folder to publish into, e.g. "
                                                 "results/table3 (a previous publication "
                                                 "there is replaced)")
    p.add_argument("--command", required=True,
                   help="the exact command that produced the grid, written into the README")
    p.add_argument("--seeds", type=int, nargs="+",
                   help="the seeds the reproduction ran with, if not the paper's")
    p.add_argument("--allow-budget", choices=[b for b in BUDGETS if b != FULL.name],
                   help="publish this budget instead of the full one (a test of the "
                        "pipeline; its README says so)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Check the grid and publish it; exit code 2 with one line on stderr if refused."""
    args = parser().parse_args(argv)
    budget = args.allow_budget or FULL.name
    try:
        if args.frontier is not None:
            if args.seeds:
                raise QprivError("--seeds applies to --reproduce only (a frontier's seeds are "
                                 "read from its frontier.csv); drop it")
            source = frontier(args.frontier, out_dir=args.out, budget=budget)
        else:
            source = reproduction(args.reproduce, out_dir=args.out, budget=budget,
                                  seeds=args.seeds)
        dest = publish(source, dest=args.dest, command=args.command)
    except ArgumentError as err:
        print(f"publish_results: error: {err.spelled(FLAGS)}", file=sys.stderr)
        return 2
    except QprivError as err:
        print(f"publish_results: error: {err}", file=sys.stderr)
        return 2
    written = summary(dest)
    cells = f", {len(source.cells)} cells" if source.cells else ""
    print(f"published {source.kind} {source.name} (budget {source.budget}{cells}) to {dest}: "
          f"{written['files']} files, {written['bytes'] / 1e3:.0f} kB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
