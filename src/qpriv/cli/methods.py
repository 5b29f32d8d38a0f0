"""``qpriv methods``: the forecasting methods of ``qpriv train`` with the privacy each claims."""

from __future__ import annotations

import argparse

from qpriv.cli.common import add_command, print_table
from qpriv.forecasting.methods import METHODS, RECOMMENDED


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``qpriv methods`` to the subcommands ``sub``."""
    ms = add_command(sub, "methods")
    ms.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Print the registry: name, claimed privacy, whether it takes --eps, summary."""
    rows = [[f"{name} (recommended)" if name == RECOMMENDED else name, entry.privacy,
             "yes" if entry.needs_eps else "no", entry.summary]
            for name, entry in METHODS.items()]
    print_table(["method", "privacy it claims", "takes --eps", "what it is"], rows)
    print(f"\nRecommended: {RECOMMENDED}, the default of 'qpriv train': its guarantee covers\n"
          "the weights and every forecast, and it beats the public floor. The papers' methods\n"
          "are one --method away.")
    return 0
