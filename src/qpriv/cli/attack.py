"""``qpriv attack mia``: the loss-threshold membership inference of the LDPT paper's Table 9 on a
finished run."""

from __future__ import annotations

import argparse

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
from qpriv.privacy.claims import PrivacyClaim


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``qpriv attack`` and its attacks to the subcommands ``sub``."""
    attack = add_command(sub, "attack")
    attack_sub = attack.add_subparsers(dest="attack", required=True, parser_class=Parser)
    mia = add_command(attack_sub, "mia", help="loss-threshold membership inference (Table 9)")
    mia.add_argument("run_dir", metavar="RUN_DIR", help="a finished run (qpriv train --out DIR)")
    mia.add_argument("--n", type=positive_int, default=1000,
                     help="training and test windows each (the paper's 1000)")
    mia.add_argument("--folds", type=positive_int, default=5,
                     help="cross-validation folds of the attack model")
    mia.add_argument("--seed", type=seed_int, default=2024, help="seed of the windows drawn")
    mia.add_argument("--data-dir", type=existing_path,
                     help="file or directory holding the run's data")
    add_json_flag(mia)
    mia.set_defaults(handler=run_mia)


def run_mia(args: argparse.Namespace) -> int:
    """Print the attack's accuracy, AUC and TPR at low FPR against the run's privacy claim."""
    # imported when the command runs, not with its parser (benchmarks/startup.py)
    from qpriv.audits.mia import mia_on_run

    report = mia_on_run(args.run_dir, n=args.n, seed=args.seed, folds=args.folds,
                        data_dir=args.data_dir)
    if args.json:
        emit_json(report)
        return 0
    attack = report["attack"]
    if report["eps_per_pass"]:
        claim = f"eps per pass {PrivacyClaim.from_json(report['eps_per_pass']).label()}"
    elif isinstance(report.get("eps"), dict) and report["eps"]["value"] is not None:
        claim = f"eps {PrivacyClaim.from_json(report['eps']).label()}"
    else:
        claim = "no privacy claim"
    print_wrapped(f"Loss-threshold membership inference on {report['run']} "
                  f"({report['method']}, {claim}, H = {report['horizon']}): "
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
    print_table(["metric", "value", "note"], rows)
    print_wrapped(f"protocol: {report['protocol']}")
    print_wrapped(f"meaning: {report['meaning']}")
    for note in report["notes"]:
        print_wrapped(f"note: {note}")
    return 0
