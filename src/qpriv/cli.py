"""The ``qpriv`` command line.

Every privacy number it prints carries its kind (local eps-QDP per pass, composed, or global
(eps, delta)-DP) and its accounting (``paper`` or ``rigorous``). With ``--json`` the last line of
standard output is one JSON object. Bad input exits with code 2 and one line on stderr.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from qpriv.audits import lower_bound as empirical
from qpriv.audits.channel import audit_channel
from qpriv.audits.mia import mia_on_run
from qpriv.audits.paper import run_audits
from qpriv.audits.sidechannel import audit_sidechannel
from qpriv.classification.run import TUNING_FILE, check_out_dir, train_classifier
from qpriv.classification.tuning import tune_learning_rate
from qpriv.errors import InvalidInputError, QprivError
from qpriv.experiments import quickstart as quick
from qpriv.experiments.runner import experiment_list, print_list, run_experiment
from qpriv.forecasting.methods import METHODS
from qpriv.forecasting.methods import method as method_entry
from qpriv.forecasting.run import run_forecast
from qpriv.privacy import accounting
from qpriv.privacy.calibration import FIDELITY_NOTE, calibrate
from qpriv.privacy.composition import advanced_composition, basic_composition
from qpriv.runs.files import atomic_write_json, read_json_object
from qpriv.tables import format_table


class UsageError(QprivError):
    """A command-line argument that argparse rejected."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit code 2, no usage dump
        raise UsageError(f"{self.prog}: {message} (see '{self.prog} --help')")


def _emit_json(payload: dict) -> None:
    print(json.dumps(payload, allow_nan=False, default=_jsonable))


def _jsonable(value: object) -> object:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


# --- qpriv calibrate ------------------------------------------------------------------------

def _cmd_calibrate(args: argparse.Namespace) -> int:
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
        _emit_json({
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
    print("Table 7: calibration chain (local eps-QDP per pass, accounting=paper; "
          f"d = {args.d:g}, D = {args.dim}, d_model = {args.d_model})")
    print(format_table(
        ["eps_s", "eps_ch", "eps_me", "p", "gamma", "sigma", "fidelity", "fidelity (paper)"],
        [[r["eps_s"], r["eps_ch"], r["eps_me"], r["p"], r["gamma"], r["sigma"], r["fidelity"],
          r["fidelity_paper"]] for r in rows],
    ))
    print(f"\nTable 1: composition over T = {args.epochs} epochs "
          f"(composed, accounting=paper; delta' = {args.delta_prime:g})")
    print(format_table(
        ["eps_s", "basic T*eps_s", "advanced (eq. 17)"],
        [[r["eps_s"], r["eps_basic"], r["eps_advanced"]] for r in rows],
    ))
    for note in notes:
        print(f"note: {note}")
    print("These are the paper's formulas for one use of the channel per token. The features "
          "release N_s shots of each token's state, which they do not account for "
          "(`qpriv account` does).")
    return 0


# --- qpriv audit channel --------------------------------------------------------------------

def _cmd_audit_channel(args: argparse.Namespace) -> int:
    audit = audit_channel(args.eps, d=args.d, dim=args.dim, pairs=args.pairs, seed=args.seed)
    payload = {
        "eps_s": audit.eps_s, "eps_ch_bound": audit.eps_ch_bound, "dmax_max": audit.dmax_max,
        "dmax_closed_form": audit.dmax_closed_form, "slack": audit.slack, "p": audit.p,
        "gamma": audit.gamma, "d": audit.d, "dim": audit.dim, "pairs": audit.pairs,
        "passed": audit.passed, "kind": audit.kind, "accounting": audit.accounting,
    }
    if args.json:
        _emit_json(payload)
    else:
        print(f"Channel audit at eps_s = {audit.eps_s:g} (p = {audit.p:.4f}, "
              f"gamma = {audit.gamma:.4f}, D = {audit.dim}, d = {audit.d:g}, "
              f"{audit.pairs} neighbouring pure pairs through the simulated Lindblad channel)")
        print(f"  Theorem 1 bound eps_ch        {audit.eps_ch_bound:.6f}  ({audit.kind}, "
              f"accounting={audit.accounting})")
        print(f"  worst exact D_max found       {audit.dmax_max:.6f}")
        print(f"  worst case, closed form       {audit.dmax_closed_form:.6f}")
        print(f"  slack (bound / worst D_max)   {audit.slack:.2f}x")
        print(f"  {'PASS' if audit.passed else 'FAIL'}: 0 < D_max <= eps_ch")
    return 0 if audit.passed else 1


# --- qpriv audit run ------------------------------------------------------------------------

def _cmd_audit_run(args: argparse.Namespace) -> int:
    audits = run_audits(args.run_dir, ladder=args.ladder, windows=args.windows,
                        pairs=args.pairs, seed=args.seed, data_dir=args.data_dir,
                        compare=args.compare or (), discover=not args.no_discover)
    failed = [a.number for a in audits if a.passed is False]
    if args.json:
        _emit_json({"run": args.run_dir, "audits": [a.as_dict() for a in audits],
                    "failed": failed, "all_applicable_passed": not failed,
                    "accounting": "paper", "kind": "local eps-QDP per pass"})
        return 1 if failed else 0
    print(f"Section 7.9 audits of {args.run_dir} (local eps-QDP per pass, accounting=paper)")
    print(format_table(
        ["#", "audit", "status", "measured", "threshold"],
        [[a.number, a.name, a.status.upper() if a.passed is not None else a.status,
          a.measured, a.threshold] for a in audits],
    ))
    for a in audits:
        print(f"{a.number}. {a.detail}")
    return 1 if failed else 0


# --- qpriv audit sidechannel ----------------------------------------------------------------

def _sidechannel_table(report) -> str:
    return format_table(
        ["probe", "valid", "state change", "forecast change", "relative", "leak via"],
        [[r.name, r.valid, r.state_change, r.output_change, r.relative_change,
          ", ".join(r.paths) if r.valid else r.reason] for r in report.probes],
    )


def _cmd_audit_sidechannel(args: argparse.Namespace) -> int:
    report = audit_sidechannel(
        run_dir=args.run_dir, method=args.method,
        eps=0.1 if args.method is not None and args.eps is None else args.eps,
        gate=args.gate, normalisation=args.normalisation, windows=args.windows, seed=args.seed,
        data_dir=args.data_dir, accounting=args.accounting,
    )
    if args.json:
        _emit_json(report.as_dict())
        return 0 if report.passed else 1
    print(f"Side-channel audit (accounting={report.accounting_mode}) of the {report.subject}")
    print(f"  on {report.windows_source}; a probe is valid if no encoded state moves by more "
          f"than {report.state_tolerance:g}, a leak is a forecast change above "
          f"{report.tolerance:g} x the forecast RMS {report.forecast_rms:.4g} (same noise, same "
          "channel output)")
    print(_sidechannel_table(report))
    for leak in report.leaks:
        print(f"LEAK {leak.path}: up to {leak.size:.4g} ({leak.relative:.3g} x the forecast "
              f"RMS) in {len(leak.probes)} probe(s); {leak.explanation}")
    for note in report.notes:
        print(f"note: {note}")
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


# --- qpriv attack mia -----------------------------------------------------------------------

def _cmd_attack_mia(args: argparse.Namespace) -> int:
    report = mia_on_run(args.run_dir, n=args.n, seed=args.seed, folds=args.folds,
                        data_dir=args.data_dir)
    if args.json:
        _emit_json(report)
        return 0
    attack = report["attack"]
    if report["eps_per_pass"]:
        claim = f"eps per pass {_labelled(report['eps_per_pass'])}"
    elif isinstance(report.get("eps"), dict) and report["eps"]["value"] is not None:
        claim = f"eps {_labelled(report['eps'])}"
    else:
        claim = "no privacy claim"
    print(f"Loss-threshold membership inference on {report['run']} ({report['method']}, "
          f"{claim}, H = {report['horizon']}): "
          f"{attack['n_members']} training vs {attack['n_nonmembers']} test windows, "
          f"{attack['folds']}-fold cross-validated (Table 9)")
    rows = [
        ["attack accuracy", attack["accuracy"], f"chance 0.5, std error "
                                                f"{attack['accuracy_std_error']:.3f}"],
        ["AUC", attack["auc"], f"chance 0.5, null std {attack['auc_null_std']:.3f}"],
        ["AUC of the raw loss", attack["auc_loss_threshold"], "no fitted parameter"],
        ["loss gap (train - test)", attack["loss_gap"], "Table 9's sign"],
        ["train MSE (members)", attack["member_loss_mean"], ""],
        ["test MSE (non-members)", attack["nonmember_loss_mean"], ""],
    ]
    rows += [[f"TPR at {t['target_fpr']:g} FPR", t["tpr"],
              f"at FPR {t['achieved_fpr']:.4g}" + ("" if t["resolved"] else ", below resolution")]
             for t in attack["tpr_at_fpr"]]
    print(format_table(["metric", "value", "note"], rows))
    for note in report["notes"]:
        print(f"note: {note}")
    return 0


# --- qpriv train ----------------------------------------------------------------------------

def _labelled(entry: object) -> str:
    """``0.1 (local eps-QDP per pass, accounting=paper)`` from a labelled result entry, with
    the entry's delta (or delta', or the composed total delta) where it has one."""
    if not isinstance(entry, dict):
        return "—"
    deltas = [f"{name}={entry[key]:g}" for key, name in
              (("delta", "delta"), ("delta_prime", "delta'"), ("delta_total", "total delta"))
              if entry.get(key) is not None]
    return (f"{entry['value']:.4g} ({', '.join([entry['kind'], *deltas])}, "
            f"accounting={entry['accounting']})")


def _value(entry: object) -> float | None:
    """The number of a labelled entry, or the entry itself (None stays None)."""
    return entry["value"] if isinstance(entry, dict) else entry


DEFAULT_TRAIN_EPS = 0.1
"""``qpriv train``'s budget for a method that calibrates to one when --eps is not given."""


def _cmd_methods(args: argparse.Namespace) -> int:
    rows = [[name, entry.privacy, "yes" if entry.needs_eps else "no", entry.summary]
            for name, entry in METHODS.items()]
    print(format_table(["method", "privacy it claims", "takes --eps", "what it is"], rows))
    return 0


def _cmd_train(args: argparse.Namespace) -> int:
    eps = args.eps
    if args.accounting == "rigorous":
        if args.eps_total is None:
            raise InvalidInputError("--accounting rigorous needs --eps-total E (the record-level "
                                    "eps over the whole training, at --delta)")
        if args.eps is not None:
            raise InvalidInputError("--eps is the paper's per-pass budget; --accounting rigorous "
                                    "takes --eps-total only")
        eps = args.eps_total
    elif args.eps_total is not None:
        raise InvalidInputError("--eps-total is the rigorous budget: pass --accounting rigorous "
                                "with it, or --eps for the paper's per-pass budget")
    elif not method_entry(args.method).needs_eps:
        if eps is not None:
            raise InvalidInputError(f"method {args.method!r} adds no noise and takes no --eps; "
                                    "leave it out")
    elif eps is None:
        eps = DEFAULT_TRAIN_EPS
    if args.csv and args.data_dir:
        raise InvalidInputError("--data-dir says where to find a named dataset; --csv names its "
                                "file itself: leave --data-dir out")
    result = run_forecast(
        dataset=args.dataset, csv=args.csv, columns=args.columns, data_dir=args.data_dir,
        horizon=args.horizon, seq_len=args.seq_len, method=args.method, eps=eps,
        epochs=args.epochs, batch_size=args.batch, seed=args.seed,
        max_train_windows=args.max_train_windows, max_eval_windows=args.max_eval_windows,
        out_dir=args.out, resume=args.resume,
        progress=not args.quiet, threads=args.threads, eval_passes=args.eval_passes,
        accounting=args.accounting, delta=args.delta, rigorous=not args.no_rigorous,
    )
    if args.json:
        _emit_json(result)
        return 0
    params = result["params"]
    if result["mse"] is None:
        scores = "no test MSE (no epoch had a finite validation loss)"
    else:
        scores = (f"test MSE {result['mse']:.4f}, MAE {result['mae']:.4f} (z-scored), "
                  f"best val loss {result['val_loss']:.4f} at epoch {result['best_epoch']}/"
                  f"{result['epochs']}")
    print(f"{result['method']} on {result['dataset']}, H = {result['horizon']}: {scores}, "
          f"{result['seconds_per_epoch']:.1f} s/epoch, {params['total']:,} parameters")
    if result.get("diverged_epoch"):
        print(f"  DIVERGED at epoch {result['diverged_epoch']} (loss not finite); training "
              "stopped there")
    print(f"  privacy: {result['privacy']}")
    for key in ("eps_per_pass", "eps_basic", "eps_advanced", "eps", "eps_total"):
        if isinstance(result.get(key), dict) and result[key]["value"] is not None:
            print(f"  {key.replace('_', ' '):<14} {_labelled(result[key])}")
    scales = [f"{name} = {_value(result[name]):.4g}"
              for name in ("p", "gamma", "sigma", "noise_multiplier") if name in result]
    if scales:
        print(f"  noise          {', '.join(scales)}")
    for unit in ("token", "window", "record"):
        entry = (result.get("rigorous") or {}).get(f"eps_{unit}")
        if entry:
            print(f"  eps {unit:<10} {entry['value']:.4g} at delta {entry['delta']:g} "
                  f"({entry['kind']}, accounting={entry['accounting']})")
    if (result.get("rigorous") or {}).get("covers"):
        print(f"  rigorous eps hold for {result['rigorous']['covers']}")
    for note in result.get("privacy_notes", []):
        print(f"  note: {note}")
    if args.out:
        print(f"  written to {args.out}")
    return 0


# --- qpriv quickstart -----------------------------------------------------------------------

def _cmd_quickstart(args: argparse.Namespace) -> int:
    for name in ("epochs", "max_train_windows", "max_eval_windows", "eval_passes"):
        if getattr(args, name) is None:
            setattr(args, name, getattr(quick, f"QUICK_{name.removeprefix('max_').upper()}"))

    def announce(run, result) -> None:
        if not args.json:
            print(f"  {run.label}: test MSE {result['mse']:.4f} "
                  f"({result['seconds_per_epoch']:.1f} s/epoch)", flush=True)

    if not args.json:
        print(f"qpriv quickstart: classical vs LDPT on {args.dataset}, H = {args.horizon}, "
              f"{args.epochs} epochs on {args.max_train_windows} training windows "
              "(a short budget; `qpriv train` runs the full protocol)", flush=True)
    results, audit = quick.run_quickstart(
        dataset=args.dataset, horizon=args.horizon, epochs=args.epochs,
        max_train_windows=args.max_train_windows, max_eval_windows=args.max_eval_windows,
        eval_passes=args.eval_passes, seed=args.seed, out_dir=args.out,
        data_dir=args.data_dir, progress=not (args.quiet or args.json), on_result=announce,
    )
    # predictions are stochastic: report the mean over the evaluation passes (SPEC section 5)
    for r in results:
        r["mse"], r["mae"] = r.get("mse_mean", r["mse"]), r.get("mae_mean", r["mae"])
    classical = next((r for r in results if r["method"] == "classical"), None)
    rows = []
    for r in results:
        delta = (100 * (r["mse"] / classical["mse"] - 1)) if classical else None
        rows.append({
            "label": r["label"], "method": r["method"], "mse": r["mse"], "mae": r["mae"],
            "delta_mse_pct": None if r is classical else delta,
            "eps_per_pass": r.get("eps_per_pass"), "eps_advanced": r.get("eps_advanced"),
            "sigma": r.get("sigma"), "p": r.get("p"), "privacy": r["privacy"],
            "eps_record_rigorous": (r.get("rigorous") or {}).get("eps_record"),
            "eps_token_rigorous": (r.get("rigorous") or {}).get("eps_token"),
        })
    audit_row = {
        "eps_s": audit.eps_s, "eps_ch_bound": audit.eps_ch_bound, "dmax_max": audit.dmax_max,
        "slack": audit.slack, "pairs": audit.pairs, "passed": audit.passed,
        "kind": audit.kind, "accounting": audit.accounting,
    }
    if args.json:
        _emit_json({"rows": rows, "audit": audit_row, "epochs": args.epochs,
                    "max_train_windows": args.max_train_windows,
                    "eval_passes": args.eval_passes})
        return 0
    print()
    print(format_table(
        ["run", "MSE", "MAE", "dMSE %", "eps per pass", "eps composed (adv.)",
         "eps token (rig.)", "eps record (rig.)", "p", "sigma"],
        [[r["label"], r["mse"], r["mae"],
          None if r["delta_mse_pct"] is None else f"{r['delta_mse_pct']:+.1f}",
          _value(r["eps_per_pass"]), _value(r["eps_advanced"]),
          _value(r["eps_token_rigorous"]), _value(r["eps_record_rigorous"]), r["p"], r["sigma"]]
         for r in rows],
    ))
    print(f"eps per pass: local eps-QDP per pass (d = 0.1, full trace norm), accounting=paper; "
          f"composed: advanced composition over {args.epochs} epochs, delta' = 1e-6, "
          f"accounting=paper. Rigorous: (eps, delta = 1e-5) of one token state's N_s-shot "
          f"release and of one record over the {args.epochs} epochs (every shot, token and "
          f"window holding it), composed, accounting=rigorous (qpriv account). MSE/MAE on the "
          f"z-scored test windows, mean of {args.eval_passes} noise passes.")
    print(f"channel audit at eps_s = {audit.eps_s:g}: worst exact D_max {audit.dmax_max:.4f} <= "
          f"Theorem 1 bound {audit.eps_ch_bound:.4f} over {audit.pairs} neighbouring pairs "
          f"(slack {audit.slack:.2f}x): {'PASS' if audit.passed else 'FAIL'}")
    print("caveat: the paper's per-pass eps does not count the N_s shots released per token; "
          "both accountings hold for the released quantum features only: RevIN's statistics "
          "and the forecast targets reach the trained model without the channel "
          "(`qpriv audit sidechannel`, `qpriv train --accounting rigorous`).")
    return 0 if audit.passed else 1


# --- qpriv train-classifier ---------------------------------------------------------------

DEFAULT_CLASSIFIER_LR = 0.01


def _clip_value(text: str) -> float | str | None:
    if text in ("structural", "none"):
        return None if text == "none" else text
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a number, 'structural' or 'none', got {text!r}"
        ) from None


def _cmd_train_classifier(args: argparse.Namespace) -> int:
    if args.delta is not None and args.eps is None:
        raise InvalidInputError("--delta is the delta of --eps's (eps, delta)-DP: give --eps "
                                "with it, or leave both out for a run without noise")
    quantum_flags = [flag for flag, value in (("--tau", args.tau), ("--layers", args.layers),
                                              ("--depolarizing", args.depolarizing),
                                              ("--shots", args.shots)) if value is not None]
    if quantum_flags and args.model not in ("quantum", "quantum-image"):
        raise InvalidInputError(f"{', '.join(quantum_flags)} set the quantum models; model "
                                f"{args.model!r} takes none: leave them out")
    optional = {name: value for name, value in (("delta", args.delta), ("tau", args.tau),
                                                ("depolarizing", args.depolarizing))
                if value is not None}  # the library's defaults otherwise
    settings = dict(
        task=args.task, model=args.model, clip=args.clip, batch=args.batch, epochs=args.epochs,
        seed=args.seed, eps=args.eps, optimizer=args.optimizer,
        preclip_noise=args.preclip_noise, n_layers=args.layers, shots=args.shots,
        threads=args.threads, **optional,
    )
    quiet = args.quiet or args.json
    tuning = None
    if args.lr_grid:
        if args.lr is not None:
            raise InvalidInputError("give --lr or --lr-grid, not both: the grid chooses the rate")
        out = check_out_dir(args.out, resume=args.resume)  # before the trials, not after
        kept = None if out is None else out / TUNING_FILE
        if args.resume and kept is not None and kept.is_file():
            tuning = read_json_object(kept, fix="delete it to tune again")
            tried = sorted(t.get("lr") for t in tuning.get("trials", []) if isinstance(t, dict))
            if tried != sorted(set(args.lr_grid)) or "lr" not in tuning:
                raise InvalidInputError(f"{kept} tuned over another --lr-grid; resume with "
                                        "the same grid, or start afresh in another --out")
        else:
            tuning = tune_learning_rate(grid=args.lr_grid, **settings)
            if kept is not None:  # a resumed run trains with the rate chosen here
                atomic_write_json(kept, tuning)
        if not quiet:
            trials = ", ".join(f"{t['lr']:g}: {t['validation_accuracy']:.3f}"
                               for t in tuning["trials"])
            print(f"learning rate {tuning['lr']:g} chosen on the validation split ({trials})",
                  file=sys.stderr)
    lr = tuning["lr"] if tuning else (args.lr if args.lr is not None else DEFAULT_CLASSIFIER_LR)
    result = train_classifier(**settings, lr=lr, unclipped_reference=args.unclipped_reference,
                              out_dir=args.out, resume=args.resume, lr_tuning=tuning,
                              progress=not quiet)
    if args.json:
        _emit_json(result)
        return 0
    diag = result["final_diagnostics"]
    print(f"{result['model']} on {result['task']['task']}: test accuracy "
          f"{result['accuracy']:.4f} ({result['parameters']} trainable parameters, lr {lr:g})")
    if result.get("diverged_epoch"):
        print(f"  DIVERGED at epoch {result['diverged_epoch']} (training loss not finite); "
              "training stopped there and the model predicts no class")
    if tuning:
        print(f"  lr tuning: {tuning['privacy']}")
    print(f"  privacy: {result['privacy']}")
    if isinstance(result.get("eps"), dict):
        eps = result["eps"]
        print(f"  eps {eps['value']:.4g} at delta {eps['delta']:g} ({eps['kind']}, "
              f"accounting={eps['accounting']}, {eps['accountant']}); noise multiplier "
              f"{result['noise_multiplier']['value']:.4g}")
    for key in ("clip_probability", "alignment", "clipping_bias_norm", "mean_example_norm",
                "max_example_norm"):
        if key in diag:
            value = "undefined" if diag[key] is None else f"{diag[key]:.4g}"
            print(f"  {key.replace('_', ' ')}: {value}")
    if "diagnostics_scope" in result:
        print(f"  diagnostics: {result['diagnostics_scope']}")
    for note in result.get("privacy_notes", []):
        print(f"  note: {note}")
    return 0


# --- qpriv reproduce ------------------------------------------------------------------------

def _cmd_reproduce(args: argparse.Namespace) -> int:
    if args.list:
        if args.json:
            _emit_json({"experiments": experiment_list()})
        else:
            print_list()
        return 0
    if not args.id:
        raise InvalidInputError("name an experiment (e.g. qpriv reproduce table3 --quick) or "
                                "pass --list")
    if args.quick and args.budget not in (None, "quick"):
        raise InvalidInputError(f"--quick and --budget {args.budget} ask for two budgets; give "
                                "one")
    budget = args.budget or ("quick" if args.quick else "full")
    quiet = args.quiet or args.json
    report = run_experiment(
        args.id, budget=budget, seeds=args.seeds, out_dir=args.out, data_dir=args.data_dir,
        progress=not quiet, threads=args.threads,
        announce=None if quiet else (lambda line: print(line, file=sys.stderr)),
    )
    if args.json:
        _emit_json(report.as_dict())
    else:
        print(Path(report.files["markdown"]).read_text(), end="")
        print(f"written to {Path(report.files['markdown']).parent} "
              f"({report.seconds:.0f} s, {len(report.failures)} failed cells)")
    return 1 if report.failures else 0


# --- qpriv account --------------------------------------------------------------------------

def _cmd_account(args: argparse.Namespace) -> int:
    common = {"delta": args.delta, "d": args.d, "dim": args.dim, "n_shots": args.shots,
              "stride": args.stride, "seq_len": args.seq_len, "epochs": args.epochs,
              "restarts": args.restarts, "seed": args.seed}
    if args.target_eps is not None:
        cal = accounting.rigorous_calibration(eps_total=args.target_eps, unit=args.unit,
                                              d_model=args.d_model, **common)
        if args.json:
            _emit_json(cal.as_dict())
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
        _emit_json({**report.as_dict(), "lower_bound": lower.as_dict() if lower else None})
        return 0
    paper = report.paper
    per_pass = f"{paper['eps_per_pass']['value']:.4g} per pass"
    composed = (f"{paper['eps_advanced']['value']:.4g} composed ({args.epochs} epochs, adv., "
                f"delta' {paper['eps_advanced']['delta_prime']:g})")
    print(f"Rigorous accounting of the LDPT feature path at p = {report.p:.4f} "
          f"({'paper calibration of eps_s' if report.eps_s_given else 'paper chain: eps_s'} = "
          f"{report.eps_s:.4g}); D = {args.dim}, N_s = {args.shots}, s = {args.stride}, "
          f"L = {args.seq_len}, d = {args.d:g}")
    print(format_table(
        ["unit", "shots composed", "paper eps (accounting=paper)",
         f"rigorous eps at delta {args.delta:g}", "RDP check", "seconds"],
        [[r.unit, f"{r.count:,}", per_pass if r.unit in ("token", "window") else composed,
          r.eps, r.eps_rdp, f"{r.seconds:.1f}"] for r in report.rows],
    ))
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


# --- parser ---------------------------------------------------------------------------------

def _existing_path(text: str) -> str:
    """An argparse type: a file or directory that exists (never a silent fallback elsewhere)."""
    if not text.strip() or not Path(text).expanduser().exists():
        raise argparse.ArgumentTypeError(f"{text!r} does not exist")
    return text


def _out_path(text: str) -> str:
    """An argparse type: a non-empty output path."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path; name the output directory")
    return text


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The ``qpriv`` argument parser."""
    parser = _Parser(prog="qpriv", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    cal = sub.add_parser("calibrate", help="Algorithm 1 and Tables 7 and 1 for given budgets")
    cal.add_argument("--eps", type=float, nargs="+", default=[0.1, 0.5, 1.0, 5.0],
                     help="per-pass budgets eps_s (default: 0.1 0.5 1 5)")
    cal.add_argument("--epochs", type=_positive_int, default=20)
    cal.add_argument("--delta-prime", type=float, default=1e-6)
    cal.add_argument("--d", type=float, default=0.1, help="trace-distance bound (full norm)")
    cal.add_argument("--dim", type=int, default=16, help="Hilbert space dimension D = 2^n")
    cal.add_argument("--alpha", type=float, default=0.8, help="channel share of eps_s")
    cal.add_argument("--d-model", type=_positive_int, default=128)
    cal.add_argument("--json", action="store_true", help="print one JSON object")
    cal.set_defaults(handler=_cmd_calibrate)

    audit = sub.add_parser("audit", help="privacy audits")
    audit_sub = audit.add_subparsers(dest="audit", required=True, parser_class=_Parser)
    ch = audit_sub.add_parser("channel", help="exact D_max of neighbouring states vs Theorem 1")
    ch.add_argument("--eps", type=float, default=0.1, help="per-pass budget eps_s")
    ch.add_argument("--pairs", type=_positive_int, default=2000)
    ch.add_argument("--d", type=float, default=0.1)
    ch.add_argument("--dim", type=int, default=16)
    ch.add_argument("--seed", type=int, default=0)
    ch.add_argument("--json", action="store_true")
    ch.set_defaults(handler=_cmd_audit_channel)
    ar = audit_sub.add_parser("run", help="the paper's six audits (section 7.9) of a finished run")
    ar.add_argument("run_dir", metavar="RUN_DIR", help="a finished run (qpriv train --out DIR)")
    ar.add_argument("--ladder", type=float, nargs="+", default=[0.1, 0.5, 1.0, 5.0],
                    help="eps of audits 5 and 6 (default: 0.1 0.5 1 5)")
    ar.add_argument("--windows", type=_positive_int, default=512,
                    help="test windows re-evaluated per eps and drawn for token states")
    ar.add_argument("--pairs", type=_positive_int, default=2000,
                    help="neighbouring pairs of the channel audit")
    ar.add_argument("--seed", type=int, default=0)
    ar.add_argument("--data-dir", type=_existing_path,
                    help="file or directory holding the run's data")
    ar.add_argument("--compare", nargs="+", metavar="RUN_DIR",
                    help="runs of the same method, data and horizon at other eps: audit 5 "
                         "compares them (Table 3); default: the finished runs beside RUN_DIR "
                         "that differ from it only in eps")
    ar.add_argument("--no-discover", action="store_true",
                    help="do not look beside RUN_DIR for runs at other eps (audit 5 is then "
                         "not applicable without --compare)")
    ar.add_argument("--json", action="store_true")
    ar.set_defaults(handler=_cmd_audit_run)
    sc = audit_sub.add_parser(
        "sidechannel", help="paths from the window to the forecast that bypass the channel")
    sc.add_argument("run_dir", metavar="RUN_DIR", nargs="?",
                    help="a finished run (qpriv train --out DIR); or give --method")
    sc.add_argument("--method", help="audit an untrained model of this method instead")
    sc.add_argument("--eps", type=float, help="per-pass budget of --method (default 0.1)")
    sc.add_argument("--gate", type=float, help="gate g of --method (overrides the method's)")
    sc.add_argument("--normalisation", choices=["revin", "fixed"],
                    help="normalisation of --method (revin: the paper; fixed: the fix)")
    sc.add_argument("--windows", type=_positive_int, default=16, help="windows probed")
    sc.add_argument("--seed", type=int, default=0)
    sc.add_argument("--data-dir", type=_existing_path, help="file or directory holding the data")
    sc.add_argument("--accounting", choices=["paper", "rigorous"], default="rigorous")
    sc.add_argument("--json", action="store_true")
    sc.set_defaults(handler=_cmd_audit_sidechannel)
    attack = sub.add_parser("attack", help="attacks on a finished run")
    attack_sub = attack.add_subparsers(dest="attack", required=True, parser_class=_Parser)
    mia = attack_sub.add_parser("mia", help="loss-threshold membership inference (Table 9)")
    mia.add_argument("run_dir", metavar="RUN_DIR", help="a finished run (qpriv train --out DIR)")
    mia.add_argument("--n", type=_positive_int, default=1000,
                     help="training and test windows each (default 1000, as the paper)")
    mia.add_argument("--folds", type=_positive_int, default=5,
                     help="cross-validation folds of the attack model")
    mia.add_argument("--seed", type=int, default=2024)
    mia.add_argument("--data-dir", type=_existing_path,
                     help="file or directory holding the run's data")
    mia.add_argument("--json", action="store_true")
    mia.set_defaults(handler=_cmd_attack_mia)
    tr = sub.add_parser("train", help="train and test one forecaster (LDPT or a baseline)")
    src = tr.add_mutually_exclusive_group()
    src.add_argument("--dataset", default="ETTh1", help="ETTh1 or ETTh2 (default ETTh1)")
    src.add_argument("--csv", help="any CSV with a 'date' column and numeric channels")
    tr.add_argument("--columns", nargs="+",
                    help="channels to use, of --csv or the dataset (default: all)")
    tr.add_argument("--data-dir", type=_existing_path, help="file or directory holding the dataset")
    tr.add_argument("--horizon", type=_positive_int, default=24)
    tr.add_argument("--method", default="ldpt",
                    help="classical, ldpt, ldpt-clean, dpsgd, dpsgd-tuned, dp-input, bottleneck, "
                         "bottleneck-dp, ldpt-<ablation>; `qpriv methods` lists them")
    tr.add_argument("--eps", type=float,
                    help="the method's budget: eps_s per pass (ldpt, dp-input, bottleneck*; "
                         "default 0.1) or the run's global eps (dpsgd*); methods without noise "
                         "take none")
    tr.add_argument("--seq-len", type=_positive_int, default=336,
                    help="look-back L (default 336, the paper's)")
    tr.add_argument("--batch", type=_positive_int,
                    help="training batch (default: the method's, 64; 512 for dpsgd-tuned); "
                         "DP-SGD's expected Poisson batch")
    tr.add_argument("--epochs", type=_positive_int, default=None,
                    help="training epochs (default: the method's, 20 for most)")
    tr.add_argument("--accounting", choices=("paper", "rigorous"), default="paper",
                    help="paper: --eps is the per-pass eps_s of Algorithm 1; rigorous: the "
                         "channel is calibrated for --eps-total at --delta per record over the "
                         "whole training, with per-window normalisation removed")
    tr.add_argument("--eps-total", type=float, help="record-level eps (--accounting rigorous)")
    tr.add_argument("--delta", type=float,
                    help="delta of the rigorous accounting of the LDPT feature path (default "
                         "1e-5); DP-SGD, DP-Input and Bottleneck-DP run at the paper's 1e-6")
    tr.add_argument("--no-rigorous", action="store_true",
                    help="skip the rigorous accounting beside the paper's (a minute per new "
                         "setting, then cached)")
    tr.add_argument("--seed", type=int, default=2024)
    tr.add_argument("--max-train-windows", type=_positive_int)
    tr.add_argument("--max-eval-windows", type=_positive_int)
    tr.add_argument("--eval-passes", type=_positive_int, default=1,
                    help="test passes to average (predictions are stochastic)")
    tr.add_argument("--threads", type=_positive_int, help="torch CPU threads")
    tr.add_argument("--out", type=_out_path,
                    help="directory for config, checkpoints and result.json")
    tr.add_argument("--resume", action="store_true", help="continue the run in --out")
    tr.add_argument("--quiet", action="store_true", help="no progress bar")
    tr.add_argument("--json", action="store_true")
    tr.set_defaults(handler=_cmd_train)
    ms = sub.add_parser("methods", help="the forecasting methods of qpriv train, with the "
                                        "privacy each claims")
    ms.set_defaults(handler=_cmd_methods)
    qs = sub.add_parser("quickstart", help="the main job: classical vs LDPT, accounting, audit")
    qs.add_argument("--dataset", default="ETTh1")
    qs.add_argument("--horizon", type=_positive_int, default=24)
    # defaults: the quickstart budget in qpriv.experiments.quickstart (not imported here: the
    # parser stays free of torch so that `qpriv calibrate` starts fast)
    qs.add_argument("--epochs", type=_positive_int)
    qs.add_argument("--max-train-windows", type=_positive_int)
    qs.add_argument("--max-eval-windows", type=_positive_int)
    qs.add_argument("--eval-passes", type=_positive_int)
    qs.add_argument("--seed", type=int, default=2024)
    qs.add_argument("--data-dir", type=_existing_path)
    qs.add_argument("--out", type=_out_path,
                    help="keep runs here; an interrupted quickstart resumes from it")
    qs.add_argument("--quiet", action="store_true")
    qs.add_argument("--json", action="store_true")
    qs.set_defaults(handler=_cmd_quickstart)
    tc = sub.add_parser("train-classifier",
                        help="DP-SGD (or clipping only) on a classical, Lipschitz or quantum model")
    tc.add_argument("--task", default="synthetic", help="synthetic, digits or folder:PATH")
    tc.add_argument("--model", default="quantum",
                    help="mlp, lipschitz, quantum, cnn or quantum-image")
    tc.add_argument("--clip", type=_clip_value, default=1.5,
                    help="clipping threshold C, 'structural' (C = 2G/tau) or 'none'")
    tc.add_argument("--batch", type=_positive_int, default=64)
    tc.add_argument("--eps", type=float, help="target eps of (eps, delta)-DP; none: no noise")
    tc.add_argument("--delta", type=float, help="delta of --eps (default 1e-5)")
    tc.add_argument("--epochs", type=_positive_int, default=20)
    tc.add_argument("--seed", type=int, default=2024)
    tc.add_argument("--lr", type=float,
                    help=f"learning rate (default {DEFAULT_CLASSIFIER_LR:g})")
    tc.add_argument("--lr-grid", type=float, nargs="+", metavar="LR",
                    help="tune the rate: one run per LR on a validation split held out of the "
                         "training set, then train with the best (the choice is not accounted)")
    tc.add_argument("--optimizer", default="adam", help="adam or sgd")
    tc.add_argument("--preclip-noise", type=float, default=0.0,
                    help="std s of Gaussian noise added to every per-example gradient before "
                         "clipping (the paper's symmetrisation; not counted as privacy)")
    tc.add_argument("--tau", type=float, help="logit temperature (quantum; default 0.5)")
    tc.add_argument("--layers", type=_positive_int, help="circuit layers L (quantum)")
    tc.add_argument("--depolarizing", type=float, help="global lambda (quantum; default 0)")
    tc.add_argument("--shots", type=_positive_int, help="read-out shots S (quantum)")
    tc.add_argument("--unclipped-reference", action="store_true",
                    help="also train without clipping and report the distance from its loss")
    tc.add_argument("--threads", type=_positive_int)
    tc.add_argument("--out", type=_out_path,
                    help="keep config, per-epoch checkpoints and result here")
    tc.add_argument("--resume", action="store_true",
                    help="continue the run in --out (same settings); a finished one is read")
    tc.add_argument("--quiet", action="store_true")
    tc.add_argument("--json", action="store_true")
    tc.set_defaults(handler=_cmd_train_classifier)
    rp = sub.add_parser("reproduce", help="a table or figure of either paper, ours beside "
                                          "the paper's numbers")
    rp.add_argument("id", nargs="?", help="table1 ... table16, tableA1 ... tableA6, figure3, "
                                          "figure4 (LDPT paper); qml-figure2 ... qml-figure10 "
                                          "(private-training paper) (see --list)")
    rp.add_argument("--list", action="store_true", help="list the experiments and their cost")
    rp.add_argument("--quick", action="store_true",
                    help="a budget that finishes in minutes on 2 CPU cores (fewer epochs and "
                         "windows); default: the paper's full budget")
    rp.add_argument("--budget", choices=("full", "quick", "tiny"),
                    help="explicit budget (tiny: the test suite's)")
    rp.add_argument("--seeds", type=int, nargs="+", help="seeds (default: the paper's)")
    rp.add_argument("--out", type=_out_path, default="runs/reproduce",
                    help="cells and reports go here; finished cells are never recomputed")
    rp.add_argument("--data-dir", type=_existing_path)
    rp.add_argument("--threads", type=_positive_int, default=1,
                    help="torch threads per cell (default 1, the fastest on a shared 2-core CPU)")
    rp.add_argument("--quiet", action="store_true")
    rp.add_argument("--json", action="store_true")
    rp.set_defaults(handler=_cmd_reproduce)
    ac = sub.add_parser("account", help="rigorous (eps, delta) of the LDPT feature path beside "
                                        "the paper's, or the p a target needs")
    which = ac.add_mutually_exclusive_group()
    which.add_argument("--eps", type=float, help="paper per-pass eps_s to calibrate p from "
                                                 "(default 0.1)")
    which.add_argument("--p", type=float, help="account this depolarizing p instead")
    which.add_argument("--target-eps", type=float,
                       help="inverse: the p whose rigorous eps for --unit is this")
    ac.add_argument("--unit", choices=("token", "window", "record"), default="record",
                    help="unit of --target-eps (default record)")
    ac.add_argument("--delta", type=float, default=1e-5)
    ac.add_argument("--epochs", type=_positive_int, default=20)
    ac.add_argument("--shots", type=_positive_int, default=1024, help="N_s per token state")
    ac.add_argument("--dim", type=int, default=16, help="token length D = 2^n")
    ac.add_argument("--stride", type=_positive_int, default=4)
    ac.add_argument("--seq-len", type=_positive_int, default=336)
    ac.add_argument("--d", type=float, default=0.1, help="trace-distance bound (full norm)")
    ac.add_argument("--d-model", type=_positive_int, default=128)
    ac.add_argument("--restarts", type=_positive_int, default=4,
                    help="random restarts of the worst-pair search per unit")
    ac.add_argument("--lower-bound-trials", type=int, default=100_000,
                    help="releases per state of the distinguishing game (0: skip)")
    ac.add_argument("--seed", type=int, default=0)
    ac.add_argument("--json", action="store_true")
    ac.set_defaults(handler=_cmd_account)
    return parser


def _after_interrupt(args: argparse.Namespace | None) -> str:
    """How to go on after Ctrl-C, for the commands that keep their work."""
    command = getattr(args, "command", None)
    out = getattr(args, "out", None)
    if command in ("train", "train-classifier") and out:
        return f"; rerun with --out {out} --resume to continue from the last finished epoch"
    if command == "reproduce":
        return "; run the same command again: finished cells are kept"
    if command == "quickstart":
        return ("; run it again with the same --out to continue" if out else
                "; nothing was kept (give --out to keep finished runs)")
    return ""


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``qpriv`` console script."""
    args = None
    try:
        args = build_parser().parse_args(argv)
        return args.handler(args)
    except QprivError as err:
        print(f"qpriv: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"qpriv: interrupted{_after_interrupt(args)}", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `qpriv calibrate | head`: the reader left, nothing to report
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as err:  # a path the user gave that cannot be read or made (--out a/b
        if err.filename is None:  # with a a file, an unwritable place): one line, not a trace
            raise
        print(f"qpriv: error: cannot use {err.filename}: {err.strerror}; check the paths given "
              "(--out, --csv, --data-dir)", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
