"""``qpriv account``: the rigorous (eps, delta) of the LDPT feature path beside the paper's
(:func:`qpriv.privacy.feature_path.accountant.account`), or the depolarizing p a rigorous
target needs (:func:`qpriv.privacy.feature_path.rigorous_calibration.rigorous_calibration`).

``--encoding amplitude`` (the default) accounts eq. 2's encoding at the assumed trace distance
``--d``; ``--encoding signed`` accounts ``ldpt-signed``'s channel: tokens of ``--dim`` values in
a register of twice as many amplitudes, at the neighbouring distance that ``--clip`` and
``--reference`` prove (4 c r / (c^2 + r^2)), read off the same
:class:`~qpriv.forecasting.config.ModelConfig` a run of ``ldpt-signed`` builds
(:func:`qpriv.forecasting.rigorous.accounted_register`).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from typing import Any

from qpriv.audits import lower_bound as empirical
from qpriv.cli.common import (
    add_command,
    add_json_flag,
    emit_json,
    positive_int,
    print_table,
    print_wrapped,
    seed_int,
)
from qpriv.errors import InvalidInputError, require_in_range
from qpriv.forecasting.config import ENCODINGS, ModelConfig
from qpriv.forecasting.rigorous import (
    accounted_register,
    encoding_assumptions,
    signed_neighbourhood,
)
from qpriv.privacy.calibration import DEFAULT_D
from qpriv.privacy.feature_path.accountant import account
from qpriv.privacy.feature_path.rigorous_calibration import rigorous_calibration
from qpriv.privacy.trace_distance import signed_reference_for_distance

D_TOLERANCE = 1e-9
"""Relative tolerance within which an explicit ``--d`` agrees with the signed encoding's proved
distance (it is derived from ``--clip`` and ``--reference``; a printed value rounds)."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``qpriv account`` to the subcommands ``sub``."""
    ac = add_command(sub, "account",
                     keyword_flags={"eps_total": "--target-eps"})
    which = ac.add_mutually_exclusive_group()
    which.add_argument("--eps", type=float, help="paper per-pass eps_s to calibrate p from "
                                                 "(default: 0.1)")
    which.add_argument("--p", type=float, help="account this depolarizing p instead")
    which.add_argument("--target-eps", type=float,
                       help="inverse: the p whose rigorous eps for --unit is this")
    ac.add_argument("--unit", choices=("token", "window", "record"),
                    help="unit of --target-eps (default: record); the table lists every unit")
    ac.add_argument("--delta", type=float, default=1e-5, help="delta of the rigorous eps")
    ac.add_argument("--epochs", type=positive_int, default=20, help="training epochs composed")
    ac.add_argument("--shots", type=positive_int, default=1024, help="N_s per token state")
    ac.add_argument("--dim", type=int, default=16,
                    help="token length D = 2^n (values per token; the signed encoding's "
                         "register holds 2 D amplitudes)")
    ac.add_argument("--stride", type=positive_int, default=4, help="patch stride s")
    ac.add_argument("--seq-len", type=positive_int, default=336, help="look-back L")
    ac.add_argument("--d", type=float,
                    help=f"trace-distance bound (full norm; default {DEFAULT_D:g}, the paper's "
                         "assumption); the signed encoding derives it from --clip and "
                         "--reference")
    ac.add_argument("--encoding", choices=ENCODINGS, default="amplitude",
                    help="amplitude: eq. 2, x / ||x|| (ldpt); signed: (x, r) / ||(x, r)|| on "
                         "one qubit more, at its proved trace distance (ldpt-signed)")
    ac.add_argument("--clip", type=float,
                    help=f"signed encoding: public range [-c, c] of a token's values "
                         f"(default {ModelConfig.clip:g}, ldpt-signed's)")
    ac.add_argument("--reference", type=float,
                    help="signed encoding: reference amplitude r (default: the r whose proved "
                         f"distance is d = {DEFAULT_D:g} at --clip, ldpt-signed's; 79.95 at "
                         "c = 2)")
    ac.add_argument("--d-model", type=positive_int, default=128,
                    help="model width d_model of sigma = p / sqrt(d_model)")
    ac.add_argument("--restarts", type=positive_int, default=4,
                    help="random restarts of the worst-pair search per unit")
    ac.add_argument("--lower-bound-trials", type=int, default=100_000,
                    help="releases per state of the distinguishing game (0: skip)")
    ac.add_argument("--seed", type=seed_int, default=0, help="seed of the searches and the game")
    add_json_flag(ac)
    ac.set_defaults(handler=run)


def signed_config(args: argparse.Namespace) -> ModelConfig:
    """The :class:`ModelConfig` of ``ldpt-signed`` at the command's token layout, clip and
    reference, checked: ``--clip`` and ``--reference`` > 0, and an explicit ``--d`` equal to
    the distance they prove (it is derived, never assumed, for this encoding)."""
    clip = ModelConfig.clip if args.clip is None else require_in_range(
        "--clip (public range c of the signed encoding)", args.clip, low=0.0,
        hint="values are clipped to [-c, c]; ldpt-signed's is 2")
    if args.reference is not None:
        require_in_range("--reference (amplitude r of the signed encoding)", args.reference,
                         low=0.0, hint="omit it for the r whose proved distance is 0.1")
    config = ModelConfig(encoding="signed", dim=args.dim, stride=args.stride,
                         seq_len=args.seq_len, clip=clip, reference=args.reference)
    proved = config.neighbour_d
    if args.d is not None and not math.isclose(args.d, proved, rel_tol=D_TOLERANCE):
        fix = ("omit --d" if not 0.0 < args.d < 2.0 else
               f"omit --d, or give --reference "
               f"{signed_reference_for_distance(d=args.d, clip=clip):.6g} for d = {args.d:g}")
        raise InvalidInputError(
            f"--d = {args.d:g} contradicts the signed encoding's proved trace distance "
            f"4 c r / (c^2 + r^2) = {proved:.6g} at --clip {clip:g}, --reference "
            f"{config.reference_amplitude:.6g}; d is derived for --encoding signed: {fix}")
    return config


def register(args: argparse.Namespace) -> tuple[ModelConfig | None, dict[str, Any]]:
    """The signed encoding's config (None for eq. 2) and the accountant's register keywords:
    ``--dim`` and ``--d`` as given for eq. 2, the config's register, proved d and token length
    for the signed encoding."""
    if args.encoding != "signed":
        if args.clip is not None or args.reference is not None:
            raise InvalidInputError(
                "--clip and --reference set the signed encoding; add --encoding signed, or "
                "drop them for eq. 2's amplitude encoding")
        return None, {"dim": args.dim, "d": DEFAULT_D if args.d is None else args.d}
    config = signed_config(args)
    return config, accounted_register(config)


def describe_signed(config: ModelConfig) -> str:
    """One line on the signed encoding's register and its proved distance."""
    return (f"signed encoding (ldpt-signed): tokens of D = {config.dim} values in a "
            f"register of {config.hilbert_dim} amplitudes (SIC-POVM of {config.hilbert_dim**2} "
            f"outcomes), c = {config.clip:g}, r = {config.reference_amplitude:.6g}, proved "
            f"d = 4 c r / (c^2 + r^2) = {config.neighbour_d:.6g}")


def run(args: argparse.Namespace) -> int:
    """Print the accounting table (or the inverse calibration) with its assumptions."""
    if args.lower_bound_trials < 0:
        raise InvalidInputError(f"--lower-bound-trials = {args.lower_bound_trials} must be >= 0 "
                                "(0 skips the distinguishing game)")
    if args.unit is not None and args.target_eps is None:
        raise InvalidInputError(f"--unit {args.unit} is the unit of --target-eps; without it "
                                "the table lists every unit: add --target-eps or leave --unit "
                                "out")
    signed, geometry = register(args)
    common = {"delta": args.delta, **geometry, "n_shots": args.shots,
              "stride": args.stride, "seq_len": args.seq_len, "epochs": args.epochs,
              "restarts": args.restarts, "seed": args.seed}
    encoding = None if signed is None else {
        "encoding": "signed", "clip": signed.clip, "reference": signed.reference_amplitude,
        "d": signed.neighbour_d, "d_proved": True, "hilbert_dim": signed.hilbert_dim,
        "token_length": signed.dim,
        "neighbourhood": signed_neighbourhood(signed, normalisation_known=False)}
    if args.target_eps is not None:
        cal = rigorous_calibration(eps_total=args.target_eps,
                                              unit=args.unit or "record",
                                              d_model=args.d_model, **common)
        if args.json:
            emit_json(cal.as_dict() if encoding is None else {**cal.as_dict(),
                                                              "encoding": encoding})
            return 0
        got = cal.achieved
        if signed is not None:
            print(describe_signed(signed))
        print(f"Rigorous calibration: (eps = {cal.eps_target:g}, delta = {cal.delta:g}) for "
              f"{got.description} (composed, accounting=rigorous; {got.count:,} shots composed)")
        print(f"  p = {cal.p:.6f}, gamma = {cal.gamma:.4f} (t = {cal.t:g}), "
              f"sigma = {cal.sigma:.4f} (d_model = {cal.d_model})")
        print(f"  achieved eps {got.eps:.4f} (PLD), RDP cross-check {got.eps_rdp:.4f}")
        print(f"  the paper's chain calls this p eps_s = {cal.eps_s_paper:.4g} "
              "(local eps-QDP per pass, accounting=paper)")
        for note in cal.notes:
            print_wrapped(f"note: {note}", first="  ")
        return 0
    eps_s = 0.1 if args.p is None and args.eps is None else args.eps
    report = account(eps_s=eps_s, p=args.p, progress=not args.json, **common)
    if signed is not None:
        report = dataclasses.replace(report, assumptions=encoding_assumptions(
            signed, report.assumptions, normalisation_known=False))
    lower = None
    if args.lower_bound_trials:
        lower = empirical.pair_lower_bound(
            report.row("token").pair, p=report.p, n_shots=args.shots,
            trials=args.lower_bound_trials, delta=args.delta, seed=args.seed,
            progress=not args.json)
    # a lower bound above the upper bound means one of them is wrong: not a result to use
    inconsistent = lower is not None and lower.eps_lower > report.row("token").eps
    if args.json:
        emit_json({**report.as_dict(), "lower_bound": lower.as_dict() if lower else None,
                   **({"lower_bound_exceeds_rigorous": True} if inconsistent else {}),
                   **({} if encoding is None else {"encoding": encoding})})
        return 1 if inconsistent else 0
    paper = report.paper
    per_pass = f"{paper['eps_per_pass']['value']:.4g} per pass"
    composed = (f"{paper['eps_advanced']['value']:.4g} composed ({args.epochs} epochs, adv., "
                f"delta' {paper['eps_advanced']['delta_prime']:g})")
    print(f"Rigorous accounting of the LDPT feature path at p = {report.p:.4f} "
          f"({'paper calibration of eps_s' if report.eps_s_given else 'paper chain: eps_s'} = "
          f"{report.eps_s:.4g}); D = {args.dim}, N_s = {args.shots}, s = {args.stride}, "
          f"L = {args.seq_len}, d = {geometry['d']:g}")
    if signed is not None:
        print(f"  {describe_signed(signed)}")
    print_table(
        ["unit", "shots composed", "paper eps", f"rigorous eps, delta {args.delta:g}",
         "RDP check", "seconds"],
        [[r.unit, f"{r.count:,}", per_pass if r.unit in ("token", "window") else composed,
          r.eps, r.eps_rdp, f"{r.seconds:.1f}"] for r in report.rows],
    )
    for r in report.rows:
        print(f"  {r.unit}: {r.description}; " + " x ".join(f"{n:,} {what}"
                                                            for what, n in r.factors))
    print_wrapped(
        "rigorous: composed, accounting=rigorous (dp-accounting PLD of the worst pair found; "
        "RDP check: exact discrete RDP with dp-accounting's conversion, an independent upper "
        "bound, usually the looser; both bounds hold, so where it is lower it is the better); "
        "paper eps: local eps-QDP per pass and its composition, accounting=paper, which count "
        "neither the shots nor the tokens and windows that hold a record")
    if lower is not None:
        refuted = empirical.paper_refuted(lower, paper["eps_per_pass"]["value"])
        print(f"empirical lower bound, {report.row('token').description}: eps >= "
              f"{lower.eps_lower:.4f} at delta {lower.delta:g} (eps >= {lower.eps_lower_pure:.4f}"
              f" at delta 0), {lower.confidence:.0%} Clopper-Pearson, {lower.trials:,} releases "
              f"per state, {lower.seconds:.1f} s; "
              + (f"<= rigorous {report.row('token').eps:.4f}; " if not inconsistent else
                 f"EXCEEDS the rigorous {report.row('token').eps:.4f}: the accountant or the "
                 "sampler is wrong (report it); ")
              + ("exceeds" if refuted else "does not exceed")
              + f" the paper's {paper['eps_per_pass']['value']:g} per pass")
    print("assumptions:")
    for item in report.assumptions:
        print(f"  - {item}")
    print(f"({report.seconds:.1f} s)")
    return 1 if inconsistent else 0
