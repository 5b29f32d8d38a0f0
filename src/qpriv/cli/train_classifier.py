"""``qpriv train-classifier``: DP-SGD (or clipping only) on a classical, Lipschitz or quantum
classifier, with the learning rate given or tuned on a validation split: the command fits
:class:`qpriv.classification.estimators.DPSGDClassifier`, the library's estimator, and prints
its result."""

from __future__ import annotations

import argparse

from qpriv.classification.estimators import DPSGDClassifier
from qpriv.classification.records import ClassifierResult
from qpriv.classification.request import ANALYTIC_TAU, DEFAULT_LR, DEFAULT_TAU
from qpriv.cli.common import (
    add_command,
    add_json_flag,
    add_seed_flags,
    emit_json,
    out_path,
    positive_int,
    print_wrapped,
    seed_of,
    thread_count,
)
from qpriv.errors import InvalidInputError


def clip_value(text: str) -> float | str | None:
    """An argparse type: a clipping threshold, ``structural``, ``analytic`` or ``none``
    (None)."""
    if text in ("structural", "analytic", "none"):
        return None if text == "none" else text
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a number, 'structural', 'analytic' or 'none', got {text!r}"
        ) from None


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``qpriv train-classifier`` to the subcommands ``sub``."""
    tc = add_command(sub, "train-classifier")
    tc.add_argument("--task", default="synthetic", help="synthetic, digits or folder:PATH")
    tc.add_argument("--model", default="quantum",
                    help="mlp, lipschitz, quantum, cnn or quantum-image")
    tc.add_argument("--clip", type=clip_value, default=1.5,
                    help="clipping threshold C, 'structural' (quantum: C = 2G/tau), 'analytic' "
                         "(lipschitz: clipless DP-SGD, noise calibrated to the analytic "
                         "per-example gradient bound) or 'none'")
    tc.add_argument("--batch", type=positive_int, default=64,
                    help="expected batch size (Poisson sampling)")
    tc.add_argument("--eps", type=float,
                    help="target eps of (eps, delta)-DP (default: none, no noise)")
    tc.add_argument("--delta", type=float, help="delta of --eps (default: 1e-5)")
    tc.add_argument("--epochs", type=positive_int, default=20, help="training epochs")
    add_seed_flags(tc)
    tc.add_argument("--lr", type=float, help=f"learning rate (default: {DEFAULT_LR:g})")
    tc.add_argument("--lr-grid", type=float, nargs="+", metavar="LR",
                    help="tune the rate: one run per LR on a validation split held out of the "
                         "training set, then train with the best (the choice is not accounted)")
    tc.add_argument("--optimizer", default="adam", help="adam or sgd")
    tc.add_argument("--preclip-noise", type=float, default=0.0,
                    help="std s of Gaussian noise added to every per-example gradient before "
                         "clipping (the paper's symmetrisation; not counted as privacy)")
    tc.add_argument("--tau", type=float,
                    help=f"logit temperature (quantum, default {DEFAULT_TAU:g}; --clip analytic, "
                         f"default {ANALYTIC_TAU:g})")
    tc.add_argument("--input-bound", type=float,
                    help="--clip analytic: inputs are clipped to this L2 norm (default: 16)")
    tc.add_argument("--bias-bound", type=float,
                    help="--clip analytic: biases are projected onto this L2 ball (default: 1)")
    tc.add_argument("--layers", type=positive_int,
                    help="circuit layers L (quantum; default: 8, 28 for quantum-image)")
    tc.add_argument("--depolarizing", type=float,
                    help="global depolarizing lambda (quantum; default: 0)")
    tc.add_argument("--shots", type=positive_int,
                    help="read-out shots S (quantum; default: exact expectations)")
    tc.add_argument("--unclipped-reference", action="store_true",
                    help="also train without clipping and report the distance from its loss")
    tc.add_argument("--threads", type=thread_count, help="torch CPU threads (default: torch's)")
    tc.add_argument("--out", type=out_path,
                    help="keep config, per-epoch checkpoints and result here (default: none, "
                         "nothing is written)")
    tc.add_argument("--resume", action="store_true",
                    help="continue the run in --out (same settings); a finished one is read")
    tc.add_argument("--quiet", action="store_true", help="no progress output")
    add_json_flag(tc)
    tc.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Tune the rate if asked, train, and print the accuracy, privacy and diagnostics."""
    if args.delta is not None and args.eps is None:
        raise InvalidInputError("--delta is the delta of --eps's (eps, delta)-DP: give --eps "
                                "with it, or leave both out for a run without noise")
    analytic = args.clip == "analytic"
    quantum_flags = [flag for flag, value in (("--tau", None if analytic else args.tau),
                                              ("--layers", args.layers),
                                              ("--depolarizing", args.depolarizing),
                                              ("--shots", args.shots)) if value is not None]
    if quantum_flags and args.model not in ("quantum", "quantum-image"):
        raise InvalidInputError(f"{', '.join(quantum_flags)} set the quantum models; model "
                                f"{args.model!r} takes none: leave them out")
    optional = {name: value for name, value in (("delta", args.delta),
                                                ("depolarizing", args.depolarizing))
                if value is not None}  # the library's defaults otherwise
    estimator = DPSGDClassifier(
        model=args.model, clip=args.clip, batch=args.batch, epochs=args.epochs,
        seed=seed_of(args), eps=args.eps, lr=args.lr, lr_grid=args.lr_grid,
        optimizer=args.optimizer, preclip_noise=args.preclip_noise, tau=args.tau,
        n_layers=args.layers, shots=args.shots, input_bound=args.input_bound,
        bias_bound=args.bias_bound, unclipped_reference=args.unclipped_reference,
        threads=args.threads, **optional)
    estimator.fit(args.task, out_dir=args.out, resume=args.resume,
                  progress=not (args.quiet or args.json))
    if args.json:
        emit_json(estimator.result_.to_json())
        return 0
    _print_result(estimator.result_, tuning=estimator.lr_tuning_)
    return 0


def _print_result(result: ClassifierResult, *, tuning: dict | None) -> None:
    """The accuracy, the privacy claim and the final gradient diagnostics."""
    print(f"{result.model} on {result.task}: test accuracy {result.accuracy:.4f} "
          f"({result.parameters} trainable parameters, lr {result.lr:g})")
    if result.diverged_epoch:
        print(f"  DIVERGED at epoch {result.diverged_epoch} (training loss not finite); "
              "training stopped there and the model predicts no class")
    if tuning:
        print(f"  lr tuning: {tuning['privacy']}")
    print(f"  privacy: {result.privacy}")
    if result.claim is not None:
        print(f"  eps {result.claim.label()}, {result.claim.details.get('accountant')}; "
              f"noise multiplier {result.noise_multiplier:.4g}")
    diag = result.final_diagnostics
    for key in ("clip_probability", "alignment", "clipping_bias_norm", "mean_example_norm",
                "max_example_norm"):
        if key in diag:
            value = "undefined" if diag[key] is None else f"{diag[key]:.4g}"
            print(f"  {key.replace('_', ' ')}: {value}")
    bound = result.raw.get("gradient_bound") or {}
    if "derivation" in bound:  # clip "analytic": the bound the noise is calibrated to
        print(f"  {analytic_bound_line(bound)}")
    if result.diagnostics_scope:
        print(f"  diagnostics: {result.diagnostics_scope}")
    for note in result.privacy_notes:
        print_wrapped(f"note: {note}", first="  ")


def analytic_bound_line(bound: dict) -> str:
    """The line of a clipless run's bound: Delta, and "nothing was clipped" only where the run
    shows it (no step's guard clipped at Delta, no measured norm above it); otherwise what
    the guard did, since then the run has clipping bias (its eps still holds: the guard
    clips at Delta)."""
    ratio = bound["max_example_norm_over_bound"]
    clipped = bound.get("max_epoch_clip_fraction", 0.0)
    measured = ("" if ratio is None else
                f"; the largest per-example norm measured, over every epoch, is "
                f"{ratio:.3f} x Delta")
    held = ("nothing was clipped" if clipped == 0 and (ratio is None or ratio <= 1) else
            f"BOUND NOT MET: the guard clipped at Delta (up to {clipped:.3g} of an epoch's "
            "examples), so this run has clipping bias")
    return (f"analytic per-example gradient bound Delta = {bound['per_example_norm_bound']:.4g}"
            f" (the noise is sigma x Delta, {held}{measured})")
