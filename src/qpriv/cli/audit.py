"""``qpriv audit channel | run | sidechannel | privacy``: the exact channel audit against
Theorem 1 of the LDPT paper, the paper's six audits (section 7.9) of a finished run, the paths
from a window to its forecast that bypass the channel, and the black-box privacy audit that
puts an empirical lower bound beside a method's guarantee."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from qpriv.cli.common import (
    Parser,
    add_command,
    add_json_flag,
    emit_json,
    existing_path,
    positive_int,
    print_table,
    print_wrapped,
    seed_int,
)
from qpriv.tables import format_table

if TYPE_CHECKING:
    from qpriv.audits.sidechannel_report import SideChannelReport


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``qpriv audit`` and its three audits to the subcommands ``sub``."""
    audit = add_command(sub, "audit")
    audit_sub = audit.add_subparsers(dest="audit", required=True, parser_class=Parser)
    ch = add_command(audit_sub, "channel",
                     help="exact D_max of neighbouring states vs Theorem 1")
    ch.add_argument("--eps", type=float, default=0.1, help="per-pass budget eps_s")
    ch.add_argument("--pairs", type=positive_int, default=2000,
                    help="neighbouring pure pairs searched")
    ch.add_argument("--d", type=float, default=0.1, help="trace-distance bound (full norm)")
    ch.add_argument("--dim", type=int, default=16, help="Hilbert space dimension D = 2^n")
    ch.add_argument("--seed", type=seed_int, default=0, help="seed of the pair search")
    add_json_flag(ch)
    ch.set_defaults(handler=run_channel)

    ar = add_command(audit_sub, "run",
                     help="the paper's six audits (section 7.9) of a finished run")
    ar.add_argument("run_dir", metavar="RUN_DIR", help="a finished run (qpriv train --out DIR)")
    ar.add_argument("--ladder", type=float, nargs="+", default=[0.1, 0.5, 1.0, 5.0],
                    help="eps of audits 5 and 6")
    ar.add_argument("--windows", type=positive_int, default=512,
                    help="test windows re-evaluated per eps and drawn for token states")
    ar.add_argument("--pairs", type=positive_int, default=2000,
                    help="neighbouring pairs of the channel audit")
    ar.add_argument("--seed", type=seed_int, default=0, help="seed of the audits' draws")
    ar.add_argument("--data-dir", type=existing_path,
                    help="file or directory holding the run's data")
    ar.add_argument("--compare", nargs="+", metavar="RUN_DIR",
                    help="runs of the same method, data and horizon at other eps: audit 5 "
                         "compares them (Table 3) (default: the finished runs beside RUN_DIR "
                         "that differ from it only in eps)")
    ar.add_argument("--no-discover", action="store_true",
                    help="do not look beside RUN_DIR for runs at other eps (audit 5 is then "
                         "not applicable without --compare)")
    add_json_flag(ar)
    ar.set_defaults(handler=run_run)

    sc = add_command(audit_sub, "sidechannel",
                     help="paths from the window to the forecast that bypass the channel")
    sc.add_argument("run_dir", metavar="RUN_DIR", nargs="?",
                    help="a finished run (qpriv train --out DIR); or give --method")
    sc.add_argument("--method", help="audit an untrained model of this method instead")
    sc.add_argument("--eps", type=float,
                    help="per-pass budget of --method (default: 0.1 where the method takes one)")
    sc.add_argument("--gate", type=float, help="gate g of --method (default: the method's)")
    sc.add_argument("--normalisation", choices=["revin", "fixed"],
                    help="normalisation of --method (revin: the paper; fixed: the fix; "
                         "default: the method's)")
    sc.add_argument("--windows", type=positive_int, default=16, help="windows probed")
    sc.add_argument("--seed", type=seed_int, default=0, help="seed of the model and the probes")
    sc.add_argument("--data-dir", type=existing_path, help="file or directory holding the data")
    sc.add_argument("--accounting", choices=["paper", "rigorous"], default="rigorous",
                    help="rigorous: offer and check the fix and label what leaves outside the "
                         "channel; paper: the leaks only")
    add_json_flag(sc)
    sc.set_defaults(handler=run_sidechannel)
    _add_privacy(audit_sub)


def _add_privacy(audit_sub: argparse._SubParsersAction) -> None:
    pa = add_command(audit_sub, "privacy",
                     help="an empirical lower bound on a method's eps, beside its claim")
    pa.add_argument("run_dir", metavar="RUN_DIR", nargs="?",
                    help="a finished private run: audit its method at its unit and budget; "
                         "or give --method, --unit and --eps")
    pa.add_argument("--method", help="dp-linear, fed-dp-linear, dpsgd-linear, dpsgd, "
                                     "classifier or clipless")
    pa.add_argument("--unit", help="dp-linear, fed-dp-linear: record (default) or window; "
                                   "dpsgd-linear, dpsgd: window; classifier, clipless: example")
    pa.add_argument("--eps", type=float, help="the claimed budget")
    pa.add_argument("--delta", type=float,
                    help="the claimed delta (default: 1e-6 for dp-linear, fed-dp-linear, "
                         "dpsgd-linear and dpsgd, 1e-5 for classifier and clipless)")
    pa.add_argument("--canary", choices=["worst", "random"], default="worst",
                    help="dp-linear, fed-dp-linear: the worst-case neighbour the sensitivity "
                         "proof names, or a random one")
    pa.add_argument("--trials", type=positive_int, default=2000,
                    help="dp-linear, fed-dp-linear: releases drawn from each of D and D'")
    pa.add_argument("--sites", type=positive_int,
                    help="fed-dp-linear: sites in the federation (2 to 64, default: 3), one of "
                         "which drops out")
    pa.add_argument("--observe", choices=["statistics", "kernel"], default="statistics",
                    help="dp-linear: the attacker reads the noisy statistics the kernel is "
                         "solved from, or only the kernel")
    pa.add_argument("--canaries", type=positive_int,
                    help="canaries of the one-run game (default: 200 for classifier, 60 for "
                         "clipless, 100 for dpsgd; dpsgd-linear: one per weight, 14, the "
                         "most)")
    pa.add_argument("--seed", type=seed_int, default=0, help="seed of the audit's draws")
    add_json_flag(pa)
    pa.set_defaults(handler=run_privacy)


def run_channel(args: argparse.Namespace) -> int:
    """Print the channel audit; exit code 1 if a pair exceeds Theorem 1's bound."""
    # imported when the command runs, not with its parser (benchmarks/startup.py)
    from qpriv.audits.channel import audit_channel

    audit = audit_channel(args.eps, d=args.d, dim=args.dim, pairs=args.pairs, seed=args.seed)
    claims = audit.claims()
    payload = {
        "eps_s": audit.eps_s, "eps_ch_bound": audit.eps_ch_bound, "dmax_max": audit.dmax_max,
        "dmax_closed_form": audit.dmax_closed_form, "slack": audit.slack, "p": audit.p,
        "gamma": audit.gamma, "d": audit.d, "dim": audit.dim, "pairs": audit.pairs,
        "passed": audit.passed, "kind": audit.kind, "accounting": audit.accounting,
        "claims": [claim.to_json() for claim in claims],
    }
    if args.json:
        emit_json(payload)
    else:
        print_wrapped(f"Channel audit at eps_s = {audit.eps_s:g} (p = {audit.p:.4f}, "
                      f"gamma = {audit.gamma:.4f}, D = {audit.dim}, d = {audit.d:g}, "
                      f"{audit.pairs} neighbouring pure pairs through the simulated Lindblad "
                      "channel)")
        print_wrapped(f"Theorem 1 bound eps_ch        {audit.eps_ch_bound:.6f}  ({audit.kind}, "
                      f"accounting={audit.accounting})", first="  ", indent="    ")
        print(f"  worst exact D_max found       {audit.dmax_max:.6f}")
        print(f"  worst case, closed form       {audit.dmax_closed_form:.6f}")
        print(f"  slack (bound / worst D_max)   {audit.slack:.2f}x")
        print(f"  {'PASS' if audit.passed else 'FAIL'}: 0 < D_max <= eps_ch")
        for claim in claims:
            print_wrapped(f"claim: eps {claim.label()}, unit {claim.unit}: {claim.covers}",
                          first="  ")
            for note in claim.notes:
                print_wrapped(f"note: {note}", first="    ")
    return 0 if audit.passed else 1


def run_run(args: argparse.Namespace) -> int:
    """Print the six audits of a run; exit code 1 if an applicable one failed."""
    # imported when the command runs, not with its parser (benchmarks/startup.py)
    from qpriv.audits.paper import run_audits

    audits = run_audits(args.run_dir, ladder=args.ladder, windows=args.windows,
                        pairs=args.pairs, seed=args.seed, data_dir=args.data_dir,
                        compare=args.compare or (), discover=not args.no_discover)
    failed = [a.number for a in audits if a.passed is False]
    if args.json:
        emit_json({"run": args.run_dir, "audits": [a.as_dict() for a in audits],
                   "failed": failed, "all_applicable_passed": not failed,
                   "accounting": "paper", "kind": "local eps-QDP per pass"})
        return 1 if failed else 0
    print(f"Section 7.9 audits of {args.run_dir} (local eps-QDP per pass, accounting=paper)")
    print_table(
        ["#", "audit", "status", "measured", "threshold"],
        [[a.number, a.name, a.status.upper() if a.passed is not None else a.status,
          a.measured, a.threshold] for a in audits],
    )
    details = {a.detail for a in audits}
    if len(details) == 1:  # one reason for all (a linear run: none of them applies)
        print_wrapped(f"1-{len(audits)}. {details.pop()}")
    else:
        for a in audits:
            print_wrapped(f"{a.number}. {a.detail}")
    return 1 if failed else 0


def _sidechannel_table(report: SideChannelReport) -> str:
    return format_table(
        ["probe", "valid", "state change", "forecast change", "relative", "leak via"],
        [[r.name, r.valid, r.state_change, r.output_change, r.relative_change,
          ", ".join(r.paths) if r.valid else r.reason] for r in report.probes],
    )


def run_sidechannel(args: argparse.Namespace) -> int:
    """Print the side-channel audit; exit code 1 if a path bypasses the channel."""
    # imported when the command runs, not with its parser (benchmarks/startup.py)
    from qpriv.audits.sidechannel_report import NotApplicable
    from qpriv.audits.sidechannel_subjects import audit_sidechannel

    report = audit_sidechannel(
        run_dir=args.run_dir, method=args.method, eps=args.eps, gate=args.gate,
        normalisation=args.normalisation, windows=args.windows, seed=args.seed,
        data_dir=args.data_dir, accounting=args.accounting,
    )
    if isinstance(report, NotApplicable):
        if args.json:
            emit_json(report.as_dict())
        else:
            print_wrapped(f"Side-channel audit of the {report.subject}: not applicable: "
                          f"{report.reason}")
        return 0
    if args.json:
        emit_json(report.as_dict())
        return 0 if report.passed else 1
    print(f"Side-channel audit (accounting={report.accounting_mode}) of the {report.subject}")
    print(f"  on {report.windows_source}; a probe is valid if no encoded state moves by more "
          f"than {report.state_tolerance:g}, a leak is a forecast change above "
          f"{report.tolerance:g} x the forecast RMS {report.forecast_rms:.4g} (same noise, same "
          "channel output)")
    print(_sidechannel_table(report))
    for leak in report.leaks:
        print_wrapped(f"LEAK {leak.path}: up to {leak.size:.4g} ({leak.relative:.3g} x the "
                      f"forecast RMS) in {len(leak.probes)} probe(s); {leak.explanation}")
    for note in report.notes:
        print_wrapped(f"note: {note}")
    print(f"{'PASS' if report.passed else 'FAIL'}: "
          + ("no path outside the channel moved the forecast" if report.passed
             else f"{len(report.leaks)} path(s) bypass the channel"))
    for name, entry in report.accounting.items():
        if isinstance(entry, dict):
            value = "—" if entry["value"] is None else f"{entry['value']:g}"
            print(f"  {name}: {value} ({entry['kind']}, accounting={entry['accounting']}): "
                  f"{entry['meaning']}")
            if "note" in entry:
                print(f"    {entry['note']}")
        else:
            print(f"  {name}: {entry}")
    fix = report.fix
    if fix is not None:
        if fix.get("changes") is None:
            print(f"fix: {fix['note']}")
        else:
            fixed = fix.get("audit")
            verdict = "" if fixed is None else (
                f": the same probes on it {'PASS' if fixed.passed else 'FAIL'}")
            print(f"fix (rigorous): set {fix['changes']}{verdict}")
            print(f"  {fix['note']}")
    return 0 if report.passed else 1


def run_privacy(args: argparse.Namespace) -> int:
    """Print a method's claim and the audit's lower bound; exit code 1 if the bound exceeds
    the claim."""
    # imported when the command runs, not with its parser (benchmarks/startup.py)
    from qpriv.audits.privacy import audit_privacy, run_settings
    from qpriv.errors import ArgumentError

    if args.run_dir is not None:
        if args.method is not None or args.eps is not None:
            raise ArgumentError("give RUN_DIR or --method/--eps, not both")
        settings = run_settings(args.run_dir)
    elif args.method is None or args.eps is None:
        raise ArgumentError("give RUN_DIR, or --method and --eps (and --unit, --delta)")
    else:
        settings = {"method": args.method, "eps": args.eps}
    for name in ("unit", "delta"):
        if getattr(args, name) is not None:
            settings[name] = getattr(args, name)
    audit = audit_privacy(**settings, canary=args.canary, trials=args.trials, seed=args.seed,
                          observe=args.observe, canaries=args.canaries, sites=args.sites)
    if args.json:
        emit_json(audit.as_dict())
        return 0 if audit.passed else 1
    print(f"Privacy audit of {audit.method} ({audit.details['game']} game)")
    print_wrapped(f"claim:       eps {audit.claim.label()}, unit {audit.claim.unit}",
                  first="  ", indent="    ")
    print_wrapped(f"lower bound: eps {audit.lower_bound.label()}", first="  ", indent="    ")
    for note in audit.lower_bound.notes:
        print_wrapped(f"how: {note}", first="  ", indent="    ")
    if "ceiling" in audit.details:
        print_wrapped(f"the canary moves the release by {audit.details['reach']:.3g} x the "
                      "proven sensitivity; a perfect test expects at most "
                      f"{audit.details['ceiling']:.4g} from a game of this size",
                      first="  ", indent="    ")
    print(f"{'PASS' if audit.passed else 'FAIL'}: the lower bound "
          + ("stays at or below the claim" if audit.passed else "exceeds the claim"))
    return 0 if audit.passed else 1
