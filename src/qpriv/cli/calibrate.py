"""``qpriv calibrate``: Algorithm 1 of the LDPT paper (Table 7's calibration chain) and Table 1's
composition (eqs. 16 and 17) for given per-pass budgets."""

from __future__ import annotations

import argparse

from qpriv.cli.common import (
    add_command,
    add_json_flag,
    emit_json,
    positive_int,
    print_table,
    print_wrapped,
)
from qpriv.privacy.calibration import FIDELITY_NOTE, calibrate
from qpriv.privacy.composition import advanced_composition, basic_composition


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``qpriv calibrate`` to the subcommands ``sub``."""
    cal = add_command(sub, "calibrate")
    cal.add_argument("--eps", type=float, nargs="+", default=[0.1, 0.5, 1.0, 5.0],
                     help="per-pass budgets eps_s")
    cal.add_argument("--epochs", type=positive_int, default=20,
                     help="epochs T of the composition")
    cal.add_argument("--delta-prime", type=float, default=1e-6,
                     help="delta' of advanced composition (eq. 17)")
    cal.add_argument("--d", type=float, default=0.1, help="trace-distance bound (full norm)")
    cal.add_argument("--dim", type=int, default=16, help="Hilbert space dimension D = 2^n")
    cal.add_argument("--alpha", type=float, default=0.8, help="channel share of eps_s")
    cal.add_argument("--d-model", type=positive_int, default=128,
                     help="model width d_model of sigma = p / sqrt(d_model)")
    add_json_flag(cal)
    cal.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Print Tables 7 and 1 (or their JSON) for ``args.eps``."""
    rows, notes = [], []
    for eps in args.eps:
        cal = calibrate(eps, d=args.d, dim=args.dim, alpha=args.alpha, d_model=args.d_model)
        row = {k: getattr(cal, k) for k in
               ("eps_s", "eps_ch", "eps_me", "p", "gamma", "sigma", "fidelity", "fidelity_paper")}
        row["eps_basic"] = basic_composition(eps, epochs=args.epochs)
        row["eps_advanced"] = advanced_composition(
            eps, epochs=args.epochs, delta_prime=args.delta_prime
        )
        rows.append(row)
        notes += [f"eps_s = {eps:g}: {n}" for n in cal.notes]
    if any(r["fidelity_paper"] is not None for r in rows):
        notes.append(FIDELITY_NOTE)
    if args.json:
        emit_json({
            "rows": rows,
            "epochs": args.epochs,
            "delta_prime": args.delta_prime,
            "labels": {
                "eps_s": "local eps-QDP per pass, accounting=paper",
                "eps_ch": "local eps-QDP per pass (channel share), accounting=paper",
                "eps_me": "local eps-QDP per pass (measurement share), accounting=paper",
                "eps_basic": "composed over epochs (eq. 16), accounting=paper",
                "eps_advanced": "composed over epochs with delta' (eq. 17), accounting=paper",
            },
            "notes": notes,
        })
        return 0
    print_wrapped("Table 7: calibration chain (local eps-QDP per pass, accounting=paper; "
                  f"d = {args.d:g}, D = {args.dim}, d_model = {args.d_model})")
    print_table(
        ["eps_s", "eps_ch", "eps_me", "p", "gamma", "sigma", "fidelity", "fidelity (paper)"],
        [[r["eps_s"], r["eps_ch"], r["eps_me"], r["p"], r["gamma"], r["sigma"], r["fidelity"],
          r["fidelity_paper"]] for r in rows],
    )
    print(f"\nTable 1: composition over T = {args.epochs} epochs "
          f"(composed, accounting=paper; delta' = {args.delta_prime:g})")
    print_table(
        ["eps_s", "basic T*eps_s", "advanced (eq. 17)"],
        [[r["eps_s"], r["eps_basic"], r["eps_advanced"]] for r in rows],
    )
    for note in notes:
        print_wrapped(f"note: {note}")
    print_wrapped("These are the paper's formulas for one use of the channel per token. The "
                  "features release N_s shots of each token's state, which they do not account "
                  "for (`qpriv account` does).", indent="")
    return 0
