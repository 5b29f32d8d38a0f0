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
from qpriv.privacy.claims import PrivacyClaim


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``qpriv federate`` to the subcommands ``sub``."""
    fd = add_command(sub, "federate", keyword_flags={"sites": "--site", "out_dir": "--out"})
    fd.add_argument("--site", action="append", default=[], metavar="FILE.csv",
                    help="one site's CSV (a date column and the same channels at every site); "
                         "give it once per site, at least twice")
    fd.add_argument("--method", choices=("dp-linear", "ldpt-fedavg", "dp-fedavg"),
                    default="dp-linear",
                    help="the federated method (default: dp-linear, one round of SecAgg+); "
                         "ldpt-fedavg: LDPT trained by FedAvg, each site's feature-path noise "
                         "its own (claims per site, weights not covered); dp-fedavg: the "
                         "linear model by DP-FedAvg, (eps, delta)-DP at the site unit")
    fd.add_argument("--unit", choices=("record", "window", "site"),
                    help="privacy unit (default: record for dp-linear, site for dp-fedavg; "
                         "ldpt-fedavg's claims are per token and take none)")
    fd.add_argument("--eps", type=float,
                    help="privacy budget (default: 1; ldpt-fedavg: the per-pass eps_s, "
                         "default 0.1)")
    fd.add_argument("--delta", type=float,
                    help="delta (default: 1e-6; ldpt-fedavg takes none)")
    fd.add_argument("--horizon", type=positive_int, default=24, help="forecast length H")
    fd.add_argument("--seq-len", type=positive_int,
                    help="look-back L (default: 336, or the --budget's)")
    fd.add_argument("--rounds", type=positive_int, default=3,
                    help="FedAvg methods: rounds of local training and averaging (default: 3)")
    fd.add_argument("--local-epochs", type=positive_int, default=1,
                    help="FedAvg methods: epochs each site trains per round (default: 1)")
    fd.add_argument("--budget", choices=("full", "quick", "tiny"),
                    help="FedAvg methods: the sites' training windows and evaluation windows "
                         "of that experiment budget, and for ldpt-fedavg its L and model size "
                         "(default: full, every window)")
    fd.add_argument("--clip", type=float,
                    help="dp-fedavg: the clipping norm C of a site's update (default: 0.01)")
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
    fd.add_argument("--timeout", type=float,
                    help="the whole run's time limit in seconds (default: 300; FedAvg "
                         "methods: 3600)")
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
    if args.method != "dp-linear":
        return _run_fedavg(args)
    for flag, value in (("budget", args.budget), ("clip", args.clip)):
        if value is not None:
            raise ArgumentError(f"{{{flag}}} is a FedAvg method's; dp-linear takes none: "
                                f"leave {{{flag}}} out")
    if args.unit == "site":
        raise ArgumentError("the site unit is dp-fedavg's; dp-linear protects a record or a "
                            "window: use {unit} record or window, or {method} dp-fedavg")
    result = federate(args.site, out_dir=args.out, unit=args.unit or "record",
                      eps=1.0 if args.eps is None else args.eps,
                      delta=1e-6 if args.delta is None else args.delta,
                      seq_len=args.seq_len or 336, horizon=args.horizon,
                      threshold=args.threshold, colluders=args.colluders,
                      scaler="data" if args.scaler == "public" else "private",
                      deadline_s=args.timeout or 300.0, personal=args.personal)
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
        floor = (f" (public floor {site['floor_mse']:.4f})" if "floor_mse" in site else "")
        print(f"  {site['site']}: test MSE {site['mse']:.4f}{floor}, MAE {site['mae']:.4f}")
    print_wrapped(f"  privacy: ({claim['value']:.4g}, {claim['delta']:g})-DP at the "
                  f"{claim['unit']} unit against the server and {claim['colluders']} colluding "
                  f"site(s), tolerating {claim['dropouts_tolerated']} dropped site(s)")
    if args.out:
        print(f"written to {args.out}")
    return 0


def _run_fedavg(args: argparse.Namespace) -> int:
    """``--method ldpt-fedavg | dp-fedavg``: train by FedAvg, print the errors and claims."""
    from qpriv.experiments.grid import BUDGETS
    from qpriv.federated.fedavg_run import federate_fedavg

    ldpt = args.method == "ldpt-fedavg"
    wanted = None if ldpt else "site"
    if args.unit is not None and args.unit != wanted:
        raise ArgumentError(
            "ldpt-fedavg's claims are per token on each site's feature path: leave {unit} out"
            if ldpt else "dp-fedavg protects a whole site: use {unit} site")
    if ldpt and (args.delta is not None or args.clip is not None):
        raise ArgumentError("ldpt-fedavg calibrates its channel by the paper's per-pass eps_s "
                            "and clips no update: leave {delta} and {clip} out")
    for flag, given in (("threshold", args.threshold is not None),
                        ("colluders", args.colluders != 0), ("personal", args.personal),
                        ("scaler", args.scaler != "private")):
        if given:
            raise ArgumentError(f"{{{flag}}} is federated dp-linear's (its secure sum); "
                                f"{args.method} takes none: leave {{{flag}}} out")
    budget = BUDGETS[args.budget or "full"]
    seq_len = args.seq_len or (budget.seq_len if ldpt else 336)
    result = federate_fedavg(
        args.site, method=args.method, out_dir=args.out, rounds=args.rounds,
        local_epochs=args.local_epochs,
        eps=args.eps if args.eps is not None else 0.1 if ldpt else 1.0, delta=args.delta,
        seq_len=seq_len, horizon=args.horizon, max_train_windows=budget.max_train_windows,
        max_eval_windows=budget.max_eval_windows,
        overrides=dict(budget.model) if ldpt else None, clip=args.clip,
        deadline_s=args.timeout or 3600.0)
    if args.json:
        emit_json(result)
        return 0
    print_wrapped(f"{args.method} over {len(result['federated']['sites'])} sites, "
                  f"{args.rounds} round(s) of {args.local_epochs} local epoch(s): test MSE "
                  f"{result['mse']:.4f} (z-scored, pooled over the sites)")
    for site in result["federated"]["sites"]:
        print(f"  {site['site']}: test MSE {site['mse']:.4f}, MAE {site['mae']:.4f}")
    for entry in result["claims"]:
        claim = PrivacyClaim.from_json(entry)
        print_wrapped(f"  privacy: {claim.label()} at the {claim.unit} unit; covers "
                      f"{claim.covers}")
    if args.out:
        print(f"written to {args.out}")
    return 0
