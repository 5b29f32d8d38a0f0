"""``qpriv reproduce``: a table or figure of either paper, ours beside the paper's numbers
(:mod:`qpriv.experiments.runner`)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from qpriv.cli.common import (
    add_command,
    add_grid_flags,
    emit_json,
    grid_flags_set,
    seed_int,
)
from qpriv.errors import InvalidInputError
from qpriv.experiments.runner import experiment_list, print_list, run_experiment
from qpriv.runs.files import written_since

DEFAULT_OUT = "runs/reproduce"
"""Where a reproduction's cells and reports go unless ``--out`` says otherwise."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``qpriv reproduce`` to the subcommands ``sub``."""
    rp = add_command(sub, "reproduce")
    rp.add_argument("id", nargs="?", help="table1 ... table16, tableA1 ... tableA6, figure3, "
                                          "figure4 (LDPT paper); qml-figure2 ... qml-figure10 "
                                          "(private-training paper) (see --list)")
    rp.add_argument("--list", action="store_true",
                    help="list the experiments (or only the one named) and their cost")
    rp.add_argument("--quick", action="store_true",
                    help="a budget that finishes in minutes on 2 CPU cores (fewer epochs and "
                         "windows) (default: the paper's full budget)")
    rp.add_argument("--budget", choices=("full", "quick", "tiny"),
                    help="explicit budget (tiny: the test suite's)")
    rp.add_argument("--seeds", type=seed_int, nargs="+",
                    help="seeds (default: the paper's); the tables that train nothing (table1, "
                         "table2, table7) take none")
    add_grid_flags(rp, out=DEFAULT_OUT)
    rp.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """List the experiments, or run one and print its report; exit code 1 if a cell failed."""
    if args.list:  # every experiment, or the one named
        run_flags = [flag for flag, given in (
            ("--quick", args.quick), ("--budget", args.budget is not None),
            ("--seeds", args.seeds is not None)) if given] + grid_flags_set(args, out=DEFAULT_OUT)
        if run_flags:  # they were ignored: a list runs and reads nothing
            verb = "sets" if len(run_flags) == 1 else "set"
            raise InvalidInputError(f"--list only lists the experiments and their cost; "
                                    f"{', '.join(run_flags)} {verb} a run: leave them out, or "
                                    "drop --list to run")
        if args.json:
            emit_json({"experiments": experiment_list(args.id)})
        else:
            print_list(experiment_id=args.id)
        return 0
    if not args.id:
        raise InvalidInputError("name an experiment (e.g. qpriv reproduce table3 --quick) or "
                                "pass --list")
    if args.quick and args.budget not in (None, "quick"):
        raise InvalidInputError(f"--quick and --budget {args.budget} ask for two budgets; give "
                                "one")
    budget = args.budget or ("quick" if args.quick else "full")
    quiet = args.quiet or args.json
    started = time.time()
    report = run_experiment(
        args.id, budget=budget, seeds=args.seeds, out_dir=args.out, data_dir=args.data_dir,
        progress=not quiet, threads=args.threads, executor=args.executor, address=args.address,
        announce=None if quiet else (lambda line: print(line, file=sys.stderr)),
    )
    written = written_since(args.out, since=started)
    if args.json:
        emit_json({**report.as_dict(),
                   "written": {"files": written.files, "bytes": written.size}})
    else:
        print(Path(report.files["markdown"]).read_text(), end="")
        print(f"written to {Path(report.files['markdown']).parent} "
              f"({report.seconds:.0f} s, {len(report.failures)} failed cells)")
        print(f"wrote {written} under {args.out} (finished cells it reused are not counted)")
    return 1 if report.failures else 0
