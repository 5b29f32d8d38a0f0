"""``qpriv federate``: federated dp-linear over sites that never pool their data.

Starts a Flower SuperLink and one SuperNode per ``--site`` on this machine, runs one round of
federated dp-linear through SecAgg+ (:func:`qpriv.federated.processes.federate`), stops every
process and writes a released linear run folder (``--out``) that ``qpriv forecast`` and
``qpriv report`` read.
"""

from __future__ import annotations

import argparse

from qpriv.cli.common import add_command, add_json_flag, emit_json, positive_int, print_wrapped
from qpriv.errors import ArgumentError


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``qpriv federate`` to the subcommands ``sub``."""
    fd = add_command(sub, "federate", keyword_flags={"sites": "--site", "out_dir": "--out"})
    fd.add_argument("--site", action="append", default=[], metavar="FILE.csv",
                    help="one site's CSV (a date column and the same channels at every site); "
                         "give it once per site, at least twice")
    fd.add_argument("--method", choices=("dp-linear",), default="dp-linear",
                    help="the federated method (default: dp-linear, one round of SecAgg+)")
    fd.add_argument("--unit", choices=("record", "window"), default="record",
                    help="privacy unit (default: record)")
    fd.add_argument("--eps", type=float, default=1.0, help="privacy budget (default: 1)")
    fd.add_argument("--delta", type=float, default=1e-6, help="delta (default: 1e-6)")
    fd.add_argument("--horizon", type=positive_int, default=24, help="forecast length H")
    fd.add_argument("--seq-len", type=positive_int, default=336, help="look-back L")
    fd.add_argument("--threshold", type=positive_int,
                    help="sites that must survive the round (default: all); the noise is sized "
                         "for this many")
    fd.add_argument("--colluders", type=int, default=0,
                    help="other sites that may collude with the server (default: 0)")
    fd.add_argument("--scaler", choices=("private", "public"), default="private",
                    help="the record unit's scaler at each site: 'private' (estimated under "
                         "the guarantee, default) or 'public' (each site's training split's "
                         "scaler declared public, NOT covered; the claim says so)")
    fd.add_argument("--personal", action="store_true",
                    help="release one kernel per site, pulled toward the pooled kernel, "
                         "beside the pooled one (same claim; default: one kernel for all)")
    fd.add_argument("--timeout", type=float, default=300.0,
                    help="the whole run's time limit in seconds (default: 300)")
    fd.add_argument("--out", help="the run folder to write (default: nothing written)")
    add_json_flag(fd)
    fd.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the federation, print the model's errors and its claim."""
    # imported when the command runs, not with its parser (benchmarks/startup.py)
    from qpriv.federated.processes import federate

    if len(args.site) < 2:
        raise ArgumentError(f"{len(args.site)} {{site}} given: a federation needs at least 2 "
                            "sites; give {site} once per site's CSV")
    result = federate(args.site, out_dir=args.out, unit=args.unit, eps=args.eps,
                      delta=args.delta, seq_len=args.seq_len, horizon=args.horizon,
                      threshold=args.threshold, colluders=args.colluders,
                      scaler="data" if args.scaler == "public" else "private",
                      deadline_s=args.timeout, personal=args.personal)
    if args.json:
        emit_json(result)
        return 0
    claim = result["eps"]
    print_wrapped(f"federated dp-linear over {len(result['federated']['sites'])} sites "
                  f"({claim['survivors']} survived, threshold {claim['threshold']}): test MSE "
                  f"{result['mse']:.4f} (z-scored, pooled over the sites)")
    if "personal" in result["federated"]:
        print("  each site scored its own kernel (--personal)")
    for site in result["federated"]["sites"]:
        print(f"  {site['site']}: test MSE {site['mse']:.4f}, MAE {site['mae']:.4f}")
    print_wrapped(f"  privacy: ({claim['value']:.4g}, {claim['delta']:g})-DP at the "
                  f"{claim['unit']} unit against the server and {claim['colluders']} colluding "
                  f"site(s), tolerating {claim['dropouts_tolerated']} dropped site(s)")
    if args.out:
        print(f"written to {args.out}")
    return 0
