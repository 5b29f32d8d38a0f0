"""``qpriv quickstart``: classical vs LDPT at two budgets, with both accountings and the channel
audit (:mod:`qpriv.experiments.quickstart`)."""

from __future__ import annotations

import argparse
import time

from qpriv.cli.common import (
    add_command,
    add_json_flag,
    emit_json,
    existing_path,
    number,
    out_path,
    positive_int,
    print_table,
    print_wrapped,
    seed_int,
)
from qpriv.experiments import quickstart as quick
from qpriv.experiments import report_sections  # noqa: F401 (registers a quickstart's section)
from qpriv.experiments.frontier_render import terminal_table
from qpriv.progress import tell
from qpriv.report.render import write_report_html
from qpriv.runs.files import written_since


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``qpriv quickstart`` to the subcommands ``sub``."""
    qs = add_command(sub, "quickstart")
    qs.add_argument("--dataset", default="ETTh1", help="ETTh1 or ETTh2")
    qs.add_argument("--horizon", type=positive_int, default=24, help="forecast length H")
    qs.add_argument("--epochs", type=positive_int, default=quick.QUICK_EPOCHS,
                    help="training epochs of each run")
    qs.add_argument("--max-train-windows", type=positive_int, default=quick.QUICK_TRAIN_WINDOWS,
                    help="training windows of each run")
    qs.add_argument("--max-eval-windows", type=positive_int, default=quick.QUICK_EVAL_WINDOWS,
                    help="validation and test windows of each run")
    qs.add_argument("--eval-passes", type=positive_int, default=quick.QUICK_EVAL_PASSES,
                    help="test passes averaged (predictions are stochastic)")
    qs.add_argument("--seed", type=seed_int, default=2024, help="seed of every run")
    qs.add_argument("--data-dir", type=existing_path, help="file or directory holding the data")
    qs.add_argument("--out", type=out_path,
                    help="keep runs here; an interrupted quickstart resumes from it")
    qs.add_argument("--frontier-budget", choices=("quick", "tiny", "full"), default="quick",
                    help="budget of the closing privacy-utility frontier (qpriv frontier)")
    qs.add_argument("--quiet", action="store_true", help="no progress bars")
    add_json_flag(qs)
    qs.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Say the plan, train the three runs, audit, run the frontier; print the table, the audit,
    the frontier and where everything was written; exit code 1 if the audit or a frontier cell
    fails."""
    started = time.time()
    quick_plan = quick.plan_quickstart(
        dataset=args.dataset, horizon=args.horizon, epochs=args.epochs,
        max_train_windows=args.max_train_windows, max_eval_windows=args.max_eval_windows,
        eval_passes=args.eval_passes, seed=args.seed, out_dir=args.out,
        frontier_budget=args.frontier_budget)
    if not args.json:
        print_wrapped(f"qpriv quickstart: classical vs LDPT on {args.dataset}, H = "
                      f"{args.horizon}, then the privacy-utility frontier (a short budget; "
                      "`qpriv train` runs the full protocol)")
        for line in quick_plan.lines():
            print_wrapped(line, indent="      ")
        print(end="", flush=True)
    outcome = quick.run_quickstart(
        quick_plan, data_dir=args.data_dir, progress=not (args.quiet or args.json),
        on_result=None if args.json else (
            lambda planned, result, seconds: tell(quick.run_line(planned, result, seconds))))
    rows = quick.quickstart_rows(outcome.results)
    audit, frontier = outcome.audit, outcome.frontier
    report = None if args.out is None else write_report_html(args.out, data_dir=args.data_dir)
    written = written_since(args.out, since=started) if args.out else None
    failed = not audit.passed or bool(frontier.failures)
    if args.json:
        emit_json({"rows": rows, "audit": quick.audit_row(audit), "epochs": args.epochs,
                   "max_train_windows": args.max_train_windows,
                   "eval_passes": args.eval_passes,
                   "report": None if report is None else str(report),
                   "reused": [p.run.label for p in quick_plan.runs if p.reused],
                   "seconds": outcome.seconds, "planned_seconds": quick_plan.seconds,
                   "written": None if written is None else
                   {"files": written.files, "bytes": written.size},
                   "frontier": frontier.as_dict() if args.out else
                   {k: v for k, v in frontier.as_dict().items() if k != "files"}})
        return 1 if failed else 0
    passes = args.eval_passes
    print()
    print_table(
        ["run", "MSE", "MAE", "dMSE %", "eps/pass", "eps adv.", "eps token", "eps record", "p",
         "sigma"],
        [[r["label"], r["mse"], r["mae"],
          None if r["delta_mse_pct"] is None else f"{r['delta_mse_pct']:+.1f}",
          number(r["eps_per_pass"]), number(r["eps_advanced"]),
          number(r["eps_token_rigorous"]), number(r["eps_record_rigorous"]), r["p"], r["sigma"]]
         for r in rows],
    )
    print_wrapped(
        f"MSE/MAE: on the z-scored test windows, the mean over {passes} test passes (LDPT's "
        "predictions are noisy; the lines above give the same mean). eps/pass: local eps-QDP "
        "per pass (d = 0.1, full trace norm), accounting=paper; eps adv.: advanced composition "
        f"over {args.epochs} epochs, delta' = 1e-6, accounting=paper. eps token and eps record:"
        f" rigorous (eps, delta = 1e-5) of one token state's N_s-shot release and of one record "
        f"over the {args.epochs} epochs (every shot, token and window holding it), composed, "
        "accounting=rigorous (qpriv account).")
    print_wrapped(
        f"channel audit at eps_s = {audit.eps_s:g}: worst exact D_max {audit.dmax_max:.4f} <= "
        f"Theorem 1 bound {audit.eps_ch_bound:.4f} over {audit.pairs} neighbouring pairs "
        f"(slack {audit.slack:.2f}x): {'PASS' if audit.passed else 'FAIL'}")
    print_wrapped(
        "caveat: the paper's per-pass eps does not count the N_s shots released per token; "
        "both accountings hold for the released quantum features only: RevIN's statistics "
        "and the forecast targets reach the trained model without the channel "
        "(`qpriv audit sidechannel`, `qpriv train --accounting rigorous`).")
    print()
    print(terminal_table(outcome.frontier), end="")
    print(f"every column, and how to read each row: {outcome.frontier.files['markdown']}")
    print()
    print(f"done in {outcome.seconds / 60:.1f} min (planned: about "
          f"{quick_plan.seconds / 60:.1f} min)"
          + ("" if written is None else f"; written: {written} under {args.out}"))
    print("\n".join(quick.written_lines(quick_plan, outcome)))
    if report is not None:
        print(f"report: {report}")
    return 1 if failed else 0
