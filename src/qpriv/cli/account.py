"""``qpriv account``: the rigorous (eps, delta) of the LDPT feature path beside the paper's
(:func:`qpriv.privacy.accounting.account`), or the depolarizing p a rigorous target needs
(:func:`qpriv.privacy.accounting.rigorous_calibration`)."""

from __future__ import annotations

import argparse

from qpriv.audits import lower_bound as empirical
from qpriv.cli.common import add_command, add_json_flag, emit_json, positive_int, print_table
from qpriv.errors import InvalidInputError
from qpriv.privacy import accounting


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``qpriv account`` to the subcommands ``sub``."""
    ac = add_command(sub, "account", help="rigorous (eps, delta) of the LDPT feature path beside "
                                          "the paper's, or the p a target needs")
    which = ac.add_mutually_exclusive_group()
    which.add_argument("--eps", type=float, help="paper per-pass eps_s to calibrate p from "
                                                 "(default: 0.1)")
    which.add_argument("--p", type=float, help="account this depolarizing p instead")
    which.add_argument("--target-eps", type=float,
                       help="inverse: the p whose rigorous eps for --unit is this")
    ac.add_argument("--unit", choices=("token", "window", "record"), default="record",
                    help="unit of --target-eps")
    ac.add_argument("--delta", type=float, default=1e-5, help="delta of the rigorous eps")
    ac.add_argument("--epochs", type=positive_int, default=20, help="training epochs composed")
    ac.add_argument("--shots", type=positive_int, default=1024, help="N_s per token state")
    ac.add_argument("--dim", type=int, default=16, help="token length D = 2^n")
    ac.add_argument("--stride", type=positive_int, default=4, help="patch stride s")
    ac.add_argument("--seq-len", type=positive_int, default=336, help="look-back L")
    ac.add_argument("--d", type=float, default=0.1, help="trace-distance bound (full norm)")
    ac.add_argument("--d-model", type=positive_int, default=128,
                    help="model width d_model of sigma = p / sqrt(d_model)")
    ac.add_argument("--restarts", type=positive_int, default=4,
                    help="random restarts of the worst-pair search per unit")
    ac.add_argument("--lower-bound-trials", type=int, default=100_000,
                    help="releases per state of the distinguishing game (0: skip)")
    ac.add_argument("--seed", type=int, default=0, help="seed of the searches and the game")
    add_json_flag(ac)
    ac.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Print the accounting table (or the inverse calibration) with its assumptions."""
    common = {"delta": args.delta, "d": args.d, "dim": args.dim, "n_shots": args.shots,
              "stride": args.stride, "seq_len": args.seq_len, "epochs": args.epochs,
              "restarts": args.restarts, "seed": args.seed}
    if args.target_eps is not None:
        cal = accounting.rigorous_calibration(eps_total=args.target_eps, unit=args.unit,
                                              d_model=args.d_model, **common)
        if args.json:
            emit_json(cal.as_dict())
            return 0
        got = cal.achieved
        print(f"Rigorous calibration: (eps = {cal.eps_target:g}, delta = {cal.delta:g}) for "
              f"{got.description} (composed, accounting=rigorous; {got.count:,} shots composed)")
        print(f"  p = {cal.p:.6f}, gamma = {cal.gamma:.4f} (t = {cal.t:g}), "
              f"sigma = {cal.sigma:.4f} (d_model = {cal.d_model})")
        print(f"  achieved eps {got.eps:.4f} (PLD), RDP cross-check {got.eps_rdp:.4f}")
        print(f"  the paper's chain calls this p eps_s = {cal.eps_s_paper:.4g} "
              "(local eps-QDP per pass, accounting=paper)")
        for note in cal.notes:
            print(f"  note: {note}")
        return 0
    if args.lower_bound_trials < 0:
        raise InvalidInputError(f"--lower-bound-trials = {args.lower_bound_trials} must be >= 0 "
                                "(0 skips the distinguishing game)")
    eps_s = 0.1 if args.p is None and args.eps is None else args.eps
    report = accounting.account(eps_s=eps_s, p=args.p, progress=not args.json, **common)
    lower = None
    if args.lower_bound_trials:
        lower = empirical.pair_lower_bound(
            report.row("token").pair, p=report.p, n_shots=args.shots,
            trials=args.lower_bound_trials, delta=args.delta, seed=args.seed,
            progress=not args.json)
    if args.json:
        emit_json({**report.as_dict(), "lower_bound": lower.as_dict() if lower else None})
        return 0
    paper = report.paper
    per_pass = f"{paper['eps_per_pass']['value']:.4g} per pass"
    composed = (f"{paper['eps_advanced']['value']:.4g} composed ({args.epochs} epochs, adv., "
                f"delta' {paper['eps_advanced']['delta_prime']:g})")
    print(f"Rigorous accounting of the LDPT feature path at p = {report.p:.4f} "
          f"({'paper calibration of eps_s' if report.eps_s_given else 'paper chain: eps_s'} = "
          f"{report.eps_s:.4g}); D = {args.dim}, N_s = {args.shots}, s = {args.stride}, "
          f"L = {args.seq_len}, d = {args.d:g}")
    print_table(
        ["unit", "shots composed", "paper eps (accounting=paper)",
         f"rigorous eps at delta {args.delta:g}", "RDP check", "seconds"],
        [[r.unit, f"{r.count:,}", per_pass if r.unit in ("token", "window") else composed,
          r.eps, r.eps_rdp, f"{r.seconds:.1f}"] for r in report.rows],
    )
    for r in report.rows:
        print(f"  {r.unit}: {r.description}; " + " x ".join(f"{n:,} {what}"
                                                            for what, n in r.factors))
    print("rigorous: composed, accounting=rigorous (dp-accounting PLD of the worst pair found; "
          "RDP check: exact discrete RDP with dp-accounting's conversion, an independent upper "
          "bound, usually the looser; both bounds hold, so where it is lower it is the better); "
          "paper: local eps-QDP per pass and its composition, which count neither the shots nor "
          "the tokens and windows that hold a record")
    if lower is not None:
        refuted = empirical.paper_refuted(lower, paper["eps_per_pass"]["value"])
        print(f"empirical lower bound, {report.row('token').description}: eps >= "
              f"{lower.eps_lower:.4f} at delta {lower.delta:g} (eps >= {lower.eps_lower_pure:.4f}"
              f" at delta 0), {lower.confidence:.0%} Clopper-Pearson, {lower.trials:,} releases "
              f"per state, {lower.seconds:.1f} s; <= rigorous {report.row('token').eps:.4f}; "
              + ("exceeds" if refuted else "does not exceed")
              + f" the paper's {paper['eps_per_pass']['value']:g} per pass")
    print("assumptions:")
    for item in report.assumptions:
        print(f"  - {item}")
    print(f"({report.seconds:.1f} s)")
    return 0
