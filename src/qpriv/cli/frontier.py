"""``qpriv frontier``: the privacy-utility frontier under one stated unit
(:mod:`qpriv.experiments.frontier`): test MSE against eps, every line labelled with what its
epsilon covers."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from qpriv.cli.common import (
    add_command,
    add_csv_format_flags,
    add_grid_flags,
    csv_format_settings,
    emit_json,
    positive_int,
)
from qpriv.errors import InvalidInputError
from qpriv.experiments import report_sections  # noqa: F401 (registers a frontier's section)
from qpriv.experiments.frontier import run_frontier
from qpriv.experiments.frontier_plan import (
    CSV_METHODS,
    DEFAULT_BACKBONE_SEEDS,
    DEFAULT_EPS,
    DEFAULT_METHODS,
    DEFAULT_SEEDS,
    UNITS,
)
from qpriv.experiments.frontier_render import terminal_table
from qpriv.forecasting.csv_input import CsvFormat
from qpriv.forecasting.linear import MAX_DP_LINEAR_EPS
from qpriv.privacy.calibration import MAX_EPS
from qpriv.privacy.dpsgd_accounting import MAX_DPSGD_EPS
from qpriv.report.render import write_report_html


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``qpriv frontier`` to the subcommands ``sub``."""
    fr = add_command(sub, "frontier")
    data = fr.add_mutually_exclusive_group()
    data.add_argument("--dataset", default="ETTh1", help="dataset name")
    data.add_argument("--csv", help="your own CSV with a 'date' column and numeric channels "
                                    "(the closed-form methods by default: seconds)")
    fr.add_argument("--columns", nargs="+", help="--csv: the channels to use (default: all)")
    add_csv_format_flags(fr)
    fr.add_argument("--horizon", type=positive_int, default=24, help="forecast length H")
    fr.add_argument("--unit", choices=UNITS, default="record",
                    help="the privacy unit the frontier is stated at")
    fr.add_argument("--eps", type=float, nargs="+", default=list(DEFAULT_EPS),
                    help="privacy budgets, each > 0 and in every chosen method's range "
                         f"(per-pass ones such as ldpt: at most {MAX_EPS:g}; dp-linear: at "
                         f"most {MAX_DP_LINEAR_EPS:g}; DP-SGD: at most {MAX_DPSGD_EPS:g}), "
                         "checked before any cell runs")
    fr.add_argument("--methods", nargs="+",
                    help="methods: private ones (dp-linear, dpsgd), ldpt (drawn as covering "
                         "neither targets nor weights) and references without eps (public, "
                         f"ridge, classical) (default: {' '.join(DEFAULT_METHODS)}; with --csv "
                         f"{' '.join(CSV_METHODS)}, seconds in all: the trained ones take "
                         "minutes a cell at the full budget)")
    fr.add_argument("--seeds", type=positive_int, default=DEFAULT_SEEDS,
                    help="noise seeds of the closed-form methods (one for those without noise)")
    fr.add_argument("--backbone-seeds", type=positive_int, default=DEFAULT_BACKBONE_SEEDS,
                    help="seeds of the trained methods (dpsgd, ldpt, classical)")
    fr.add_argument("--quick", action="store_true",
                    help="the quick budget for the trained methods: 1 epoch on 256 windows "
                         "(default: the paper's full budget)")
    fr.add_argument("--budget", choices=("full", "quick", "tiny"),
                    help="explicit budget (tiny: the test suite's)")
    add_grid_flags(fr, out="runs/frontier")
    fr.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the frontier and print its table (or JSON); exit code 1 if a cell failed."""
    if args.quick and args.budget not in (None, "quick"):
        raise InvalidInputError(f"--quick and --budget {args.budget} ask for two budgets; give "
                                "one")
    budget = args.budget or ("quick" if args.quick else "full")
    quiet = args.quiet or args.json
    if args.columns is not None and args.csv is None:
        raise InvalidInputError("--columns chooses the channels of a --csv file; a named "
                                "dataset's frontier uses all its channels: give --csv PATH, or "
                                "leave --columns out")
    settings = csv_format_settings(args)
    report = run_frontier(
        csv=args.csv, columns=args.columns,
        csv_format=None if settings is None else CsvFormat(**settings),
        dataset=args.dataset, horizon=args.horizon, unit=args.unit, eps=args.eps,
        methods=args.methods, seeds=args.seeds, backbone_seeds=args.backbone_seeds,
        budget=budget, out_dir=args.out, data_dir=args.data_dir, progress=not quiet,
        threads=args.threads, executor=args.executor, address=args.address)
    page = write_report_html(Path(report.files["csv"]).parent, data_dir=args.data_dir)
    report.files["report"] = str(page)
    if args.json:
        emit_json(report.as_dict())
    else:
        print(terminal_table(report), end="")
        print(f"every column, and how to read each row: {report.files['markdown']}")
        print(f"written to {Path(report.files['markdown']).parent} "
              f"({report.seconds:.0f} s, {len(report.failures)} failed cells)", file=sys.stdout)
        print(f"report: {page}")
    return 1 if report.failures else 0
