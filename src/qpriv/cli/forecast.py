"""``qpriv forecast``: the next H values of every channel from a finished run, in the data's own
units, with :meth:`qpriv.forecasting.inference.ForecastingRun.forecast_report`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from qpriv.cli.common import (
    add_command,
    add_json_flag,
    emit_json,
    existing_path,
    out_path,
    positive_int,
    print_table,
    print_wrapped,
    seed_int,
)
from qpriv.errors import ArgumentError
from qpriv.forecasting.datasets import dataset_spec, locate_dataset

if TYPE_CHECKING:
    from qpriv.forecasting.inference import Forecast


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``qpriv forecast`` to the subcommands ``sub``."""
    fc = add_command(sub, "forecast")
    fc.add_argument("run_dir", metavar="RUN_DIR", help="a finished run (qpriv train --out DIR)")
    src = fc.add_mutually_exclusive_group(required=True)
    src.add_argument("--csv", help="a CSV with a 'date' column and the run's channels (the "
                                   "training file or new data)")
    src.add_argument("--dataset", help="a named dataset (ETTh1, ETTh2)")
    fc.add_argument("--data-dir", type=existing_path,
                    help="file or directory holding --dataset")
    when = fc.add_mutually_exclusive_group()
    when.add_argument("--last", action="store_true",
                      help="forecast after the window ending at the last row (the default)")
    when.add_argument("--at", metavar="DATETIME",
                      help="forecast after the window ending at this timestamp of the data")
    fc.add_argument("--passes", type=positive_int,
                    help="passes with fresh noise to average, for methods that draw noise at "
                         "inference (default: the run's evaluation passes, at least 10); no "
                         "effect on deterministic methods")
    fc.add_argument("--seed", type=seed_int,
                    help="seed of the noise of the passes (default: derived from the run's)")
    fc.add_argument("--out", type=out_path, metavar="FILE.csv",
                    help="write the forecasts to this CSV and the run's privacy claims beside "
                         "it (FILE.csv.claims.json); never the data read nor a file of the "
                         "run")
    fc.add_argument("--force", action="store_true",
                    help="replace --out and its claims file if they exist")
    add_json_flag(fc)
    fc.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Forecast, print (or write) the values, and the run's claims beside them."""
    # imported when the command runs, not with its parser (benchmarks/startup.py)
    from qpriv.forecasting.artifacts import load_run
    from qpriv.forecasting.inference import check_output_path

    run_ = load_run(args.run_dir)
    if args.csv is not None:
        if args.data_dir is not None:
            raise ArgumentError("{data_dir} says where to find a named dataset; {csv} names its "
                                "file itself: leave {data_dir} out")
        source = args.csv
    else:
        source = locate_dataset(dataset_spec(args.dataset).name, path=args.data_dir)
    # before any work; the data read is kept where it is a file (a directory is refused below)
    read = [source] if Path(source).is_file() else []
    out = None if args.out is None else check_output_path(
        args.out, overwrite=args.force, keep=[run_.run_dir, *read])
    report = run_.forecast_report(source, at=args.at, passes=args.passes, seed=args.seed)
    written = report.write_csv(out, overwrite=args.force) if out is not None else None
    if args.json:
        payload = report.to_json()
        payload["out"] = None if written is None else str(written[0])
        payload["claims_file"] = None if written is None else str(written[1])
        emit_json(payload)
        return 0
    _print_report(report, values=written is None)
    if written is not None:
        print(f"written to {written[0]} (the run's privacy claims: {written[1]})")
    return 0


def _print_report(report: Forecast, *, values: bool) -> None:
    """What was forecast from what, the values (when ``values``), and the claims."""
    new = {True: "new data (its sha256 differs from the training file's)",
           False: "the training file itself", None: "data"}[report.new_data]
    print_wrapped(f"{report.method} run {report.run_dir}: the next {len(report.frame)} steps "
                  f"({report.freq}) after {report.window_end}, from the {report.seq_len} rows "
                  f"ending there in {report.source}: {new}")
    if report.noisy:
        print(f"  mean and standard deviation over {report.passes} passes with fresh noise "
              "(the method draws noise at inference, as in training)")
    else:
        print("  one pass: the method draws no noise at inference (passes have no effect, "
              "no spread)")
    if values:
        frame = report.frame
        rows = [[stamp.isoformat(), *(f"{v:.6g}" for v in row)]
                for stamp, row in zip(frame.index, frame.to_numpy(), strict=True)]
        print_table([str(frame.index.name), *map(str, frame.columns)], rows)
    print(f"  privacy: {report.privacy}")
    for claim in report.claims:
        print_wrapped(f"claim {claim.label()}, unit {claim.unit.value}: covers {claim.covers}",
                      first="  ")
