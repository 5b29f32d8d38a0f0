"""The ``qpriv`` commands: each one's name, the module that parses and runs it, and its line of
help, in the order ``qpriv --help`` lists them.

The table stands apart from the command modules so that ``qpriv --help``, ``--version`` and a
mistyped command answer without importing any of them: a command module imports the library it
calls (torch, QuTiP, SciPy), seconds that only the command that runs should pay
(``benchmarks/startup.py``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Command:
    """One ``qpriv`` command: ``module`` has ``add_parser(sub)``, which adds it to the
    subcommands ``sub`` with its handler."""

    name: str
    module: str
    help: str


COMMANDS = (
    Command("calibrate", "qpriv.cli.calibrate",
            "Algorithm 1 and Tables 7 and 1 for given budgets"),
    Command("audit", "qpriv.cli.audit", "privacy audits"),
    Command("attack", "qpriv.cli.attack", "attacks on a finished run"),
    Command("train", "qpriv.cli.train",
            "train and test one forecaster (the recommended private one, LDPT or a baseline)"),
    Command("forecast", "qpriv.cli.forecast",
            "forecast the next H values of a series with a finished run, in the data's own units"),
    Command("methods", "qpriv.cli.methods",
            "the forecasting methods of qpriv train, with the privacy each claims"),
    Command("quickstart", "qpriv.cli.quickstart",
            "the main job: classical vs LDPT, accounting, audit"),
    Command("train-classifier", "qpriv.cli.train_classifier",
            "DP-SGD (or clipping only) on a classical, Lipschitz or quantum model"),
    Command("reproduce", "qpriv.cli.reproduce",
            "a table or figure of either paper, ours beside the paper's numbers"),
    Command("frontier", "qpriv.cli.frontier",
            "the privacy-utility frontier at one unit: test MSE against eps per method, with "
            "what each eps covers"),
    Command("federate", "qpriv.cli.federate",
            "federated dp-linear over sites that never pool their data (Flower SecAgg+, real "
            "SuperLink and SuperNode processes on this machine)"),
    Command("account", "qpriv.cli.account",
            "rigorous (eps, delta) of the LDPT feature path beside the paper's, or the p a "
            "target needs"),
    Command("report", "qpriv.cli.report",
            "one self-contained report.html (settings, privacy claims, curves, forecasts, "
            "tables, frontier) for a run, quickstart, frontier or reproduce output"),
)

BY_NAME = {command.name: command for command in COMMANDS}
