"""``qpriv train``: train and test one forecaster (LDPT or a baseline) with
:func:`qpriv.forecasting.run.run_forecast`, which checks every budget and flag combination."""

from __future__ import annotations

import argparse
import textwrap

from qpriv.cli.common import (
    add_command,
    add_csv_format_flags,
    add_json_flag,
    add_seed_flags,
    csv_format_settings,
    emit_json,
    existing_path,
    out_path,
    positive_int,
    print_table,
    seed_of,
    thread_count,
)
from qpriv.errors import InvalidInputError, require_in_range
from qpriv.forecasting.linear_design import DEFAULTS, SELECT_CHOICES
from qpriv.forecasting.methods import (
    DEFAULT_BATCH,
    DEFAULT_EPOCHS,
    DEFAULT_EPS,
    METHODS,
    RECOMMENDED,
    TUNED_BATCH,
)
from qpriv.forecasting.records import ForecastResult
from qpriv.privacy.budget import FEATURE_PATH_DELTA


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``qpriv train`` to the subcommands ``sub``."""
    tr = add_command(sub, "train")
    src = tr.add_mutually_exclusive_group()
    src.add_argument("--dataset", default="ETTh1", help="ETTh1 or ETTh2")
    src.add_argument("--csv", help="any CSV with a 'date' column and numeric channels")
    tr.add_argument("--columns", nargs="+",
                    help="channels to use, of --csv or the dataset (default: all)")
    add_csv_format_flags(tr)
    tr.add_argument("--data-dir", type=existing_path, help="file or directory holding the dataset")
    tr.add_argument("--horizon", type=positive_int, default=24, help="forecast length H")
    tr.add_argument("--method", default=RECOMMENDED,
                    help=f"the forecaster (default: {RECOMMENDED}, the recommended private "
                         f"one): {', '.join(METHODS)}; 'qpriv methods' says what each claims")
    tr.add_argument("--eps", type=float,
                    help="the method's budget: eps_s per pass (ldpt, dp-input, bottleneck*) or "
                         "the run's global eps at --unit (dpsgd*, dp-linear) (default: "
                         f"{DEFAULT_EPS:g}); methods without noise take none")
    tr.add_argument("--unit", help="privacy unit of the guarantee: record (one value of one "
                                   "channel at one time step) or window (dp-linear; default "
                                   "record), window (dpsgd*)")
    tr.add_argument("--clip-range", type=float,
                    help="dp-linear at the record unit: values clipped to [-R, R] in z-scored "
                         f"units (default {DEFAULTS['record']['clip']:g})")
    tr.add_argument("--scaler", help="dp-linear at the record unit: 'private' (estimated "
                                     "under the guarantee, default) or 'public' (the training "
                                     "split's scaler declared public, released in the clear)")
    tr.add_argument("--select", choices=SELECT_CHOICES,
                    help="dp-linear: 'private' (default) chooses the design (output blocks, "
                         "ridge scale) among declared candidates inside the guarantee, on a "
                         "share of eps; 'fixed' takes the fixed design, chosen outside it")
    tr.add_argument("--period", type=positive_int,
                    help="public, ridge, dp-linear, dpsgd-linear: the seasonal period in rows "
                         "(default: from the timestamps' step: 24 hourly, 96 every 15 "
                         "minutes, 7 daily, 12 monthly)")
    tr.add_argument("--seq-len", type=positive_int, default=336,
                    help="look-back L (the paper's)")
    tr.add_argument("--batch", type=positive_int,
                    help=f"training batch (default: the method's, {DEFAULT_BATCH}; "
                         f"{TUNED_BATCH} for dpsgd-tuned); DP-SGD's expected Poisson batch")
    tr.add_argument("--epochs", type=positive_int,
                    help=f"training epochs (default: the method's, {DEFAULT_EPOCHS} for most)")
    tr.add_argument("--accounting", choices=("paper", "rigorous"), default="paper",
                    help="paper: --eps is the per-pass eps_s of Algorithm 1; rigorous: the "
                         "channel is calibrated for --eps-total at --delta per record over the "
                         "whole training, with per-window normalisation removed")
    tr.add_argument("--eps-total", type=float,
                    help="record-level eps over the whole training (--accounting rigorous)")
    tr.add_argument("--delta", type=float,
                    help="delta of the rigorous accounting of the LDPT feature path (default: "
                         f"{FEATURE_PATH_DELTA:g}); DP-SGD, DP-Input and Bottleneck-DP run at the "
                         "paper's 1e-6")
    tr.add_argument("--no-rigorous", action="store_true",
                    help="skip the rigorous accounting beside the paper's (a minute per new "
                         "setting, then cached)")
    add_seed_flags(tr)
    tr.add_argument("--max-train-windows", type=positive_int,
                    help="use at most this many training windows (default: all)")
    tr.add_argument("--max-eval-windows", type=positive_int,
                    help="use at most this many validation and test windows (default: all)")
    tr.add_argument("--eval-passes", type=positive_int, default=1,
                    help="test passes to average (predictions are stochastic)")
    tr.add_argument("--threads", type=thread_count,
                    help="torch CPU threads (default: torch's)")
    tr.add_argument("--out", type=out_path,
                    help="directory for config, checkpoints and result.json (default: none, "
                         "nothing is written)")
    tr.add_argument("--resume", action="store_true", help="continue the run in --out")
    tr.add_argument("--keep-checkpoints", action="store_true",
                    help="keep the last epoch's checkpoint of a finished run (by default only "
                         "its best weights stay); the backbone methods only, a linear "
                         "forecaster writes no checkpoints")
    tr.add_argument("--quiet", action="store_true", help="no progress bar")
    add_json_flag(tr)
    tr.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Train, then print the test scores and every privacy number with its label."""
    # the library is imported when the command runs, not with its parser: `qpriv train` with a
    # mistyped flag answers in well under a second (benchmarks/startup.py)
    from qpriv.forecasting.csv_input import CsvFormat
    from qpriv.forecasting.run import run_forecast
    from qpriv.report.render import write_report_html

    if args.keep_checkpoints and args.out is None:
        raise InvalidInputError("--keep-checkpoints keeps a finished run's last checkpoint in "
                                "--out, and without --out nothing is written: give --out DIR, "
                                "or drop --keep-checkpoints")
    # checked here to be named by its flag (the library calls it a described quantity)
    if args.accounting == "rigorous" and args.eps_total is not None:
        require_in_range("eps_total", args.eps_total, low=0.0,
                         hint="a privacy budget must be > 0")
    settings = csv_format_settings(args)
    result = run_forecast(
        dataset=args.dataset, csv=args.csv, columns=args.columns, data_dir=args.data_dir,
        csv_format=None if settings is None else CsvFormat(**settings),
        horizon=args.horizon, seq_len=args.seq_len, method=args.method, eps=args.eps,
        eps_total=args.eps_total, epochs=args.epochs, batch_size=args.batch,
        seed=seed_of(args),
        max_train_windows=args.max_train_windows, max_eval_windows=args.max_eval_windows,
        out_dir=args.out, resume=args.resume,
        progress=not args.quiet, threads=args.threads, eval_passes=args.eval_passes,
        accounting=args.accounting, delta=args.delta, rigorous=not args.no_rigorous,
        unit=args.unit, clip_range=args.clip_range, scaler=args.scaler, select=args.select,
        period=args.period, keep_checkpoints=args.keep_checkpoints,
    )
    failed: OSError | None = None
    try:
        report = None if args.out is None else write_report_html(args.out,
                                                                 data_dir=args.data_dir)
    except OSError as err:  # the run is written: say what it is before the report's one line
        report, failed = None, err
    if args.json:
        record = result.to_json()
        emit_json(record if report is None else {**record, "report": str(report)})
    else:
        _print_result(result)
        if args.out:
            print(f"  written to {args.out}")
            if report is not None:
                print(f"report: {report}")
    if failed is not None:
        raise failed  # main prints it as one line, exit 2
    return 0


WIDTH = 100
"""The printed summary's line width."""


def _epoch_seconds(result: ForecastResult) -> str:
    """An epoch's wall time in its two parts: the progress bar's epoch lines show their sum
    (a line of "10.1 s/epoch" beside epochs of 30 s read as a wrong number)."""
    validation = [float(row.get("val_seconds") or 0.0) for row in result.history]
    mean = sum(validation) / len(validation) if validation else 0.0
    return f"{result.seconds_per_epoch:.1f} s training + {mean:.1f} s validation"


def _at_commas(text: str) -> str:
    """``text`` broken after its commas into lines of at most :data:`WIDTH` (a number stays
    beside its unit), the later ones indented."""
    lines, line = [], ""
    for part in text.split(", "):
        joined = f"{line}, {part}" if line else part
        if len(joined) + 1 > WIDTH and line.strip():
            lines.append(line + ",")
            line = "  " + part
        else:
            line = joined
    return "\n".join([*lines, line])


def _print_result(result: ForecastResult) -> None:
    """The run's scores, its privacy claims and the notes on what they leave out."""
    if result.mse is None:
        scores = "no test MSE (no epoch had a finite validation loss)"
    elif result.epochs is None:  # fitted in closed form
        scores = (f"test MSE {result.mse:.4f}, MAE {result.mae:.4f} (z-scored), val MSE "
                  f"{result.val_loss:.4f}, fitted in {result.seconds or 0.0:.2f} s")
    else:
        scores = (f"test MSE {result.mse:.4f}, MAE {result.mae:.4f} (z-scored), best val loss "
                  f"{result.val_loss:.4f} at epoch {result.best_epoch}/{result.epochs}, "
                  f"{_epoch_seconds(result)} per epoch")
    print(_at_commas(f"{result.method} on {result.dataset}, H = {result.horizon}: {scores}, "
                     f"{result.params_total:,} parameters"))
    if result.original_units:
        mse, mae = result.original_units["mse"], result.original_units["mae"]
        print("  test MSE and MAE per channel, in the data's own units:")
        print_table(["channel", "MSE", "MAE"],
                    [[name, f"{mse[name]:.6g}", f"{mae[name]:.6g}"] for name in mse])
    if result.diverged_epoch:
        print(f"  DIVERGED at epoch {result.diverged_epoch} (loss not finite); training "
              "stopped there")
    print(f"  privacy: {result.privacy}")
    for key, claim in result.claims.items():
        if claim.value is not None:
            print(f"  {key.replace('_', ' '):<14} {claim.label()}")
    if result.noise_scales:
        print("  noise          " + ", ".join(f"{name} = {value:.4g}"
                                              for name, value in result.noise_scales.items()))
    for unit, claim in result.rigorous_claims.items():
        print(f"  eps {unit:<10} {claim.value:.4g} at delta {claim.delta:g} "
              f"({claim.kind}, accounting={claim.accounting})")
    if result.rigorous.get("covers"):
        print(f"  rigorous eps hold for {result.rigorous['covers']}")
    for note in result.privacy_notes:  # some run to 400 characters: wrapped, not one line
        print(textwrap.fill(note, width=WIDTH, initial_indent="  note: ",
                            subsequent_indent="        "))
