"""``qpriv report DIR``: one self-contained ``report.html`` for what a command wrote
(:mod:`qpriv.report`): a run, a quickstart, a frontier or a reproduction."""

from __future__ import annotations

import argparse

from qpriv.cli.common import add_command, add_json_flag, emit_json, existing_path, positive_int
from qpriv.experiments import report_sections  # noqa: F401 (registers their kinds of folder)
from qpriv.report.contents import detect
from qpriv.report.forecast_run import FORECAST_WINDOWS, MAX_FORECAST_WINDOWS
from qpriv.report.render import write_report_html
from qpriv.runs.layout import REPORT_FILE


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``qpriv report`` to the subcommands ``sub``."""
    rp = add_command(sub, "report")
    rp.add_argument("dir", metavar="DIR",
                    help="the folder a command wrote: train --out, train-classifier --out, "
                         "quickstart --out, a frontier's (frontier.csv) or a reproduction's "
                         f"(results.csv); {REPORT_FILE} is written into it")
    rp.add_argument("--data-dir", type=existing_path,
                    help="file or directory holding the runs' data, for the forecast plots "
                         "(default: the path each run recorded, then $QPRIV_DATA_DIR; data "
                         "not found there is said on the page)")
    rp.add_argument("--windows", type=positive_int, default=FORECAST_WINDOWS,
                    help=f"test windows drawn per channel in the forecast plots, at most "
                         f"{MAX_FORECAST_WINDOWS} (all of a run's test split where it holds "
                         "fewer)")
    add_json_flag(rp)
    rp.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Write the report and print its path."""
    kind = detect(args.dir).kind
    path = write_report_html(args.dir, data_dir=args.data_dir, windows=args.windows)
    if args.json:
        emit_json({"report": str(path), "kind": kind})
    else:
        print(f"report: {path}")
    return 0
