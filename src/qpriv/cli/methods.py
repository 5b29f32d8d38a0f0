"""``qpriv methods``: the forecasting methods of ``qpriv train`` with the privacy each claims."""

from __future__ import annotations

import argparse

from qpriv.cli.common import add_command, print_table
from qpriv.forecasting.methods import METHODS


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``qpriv methods`` to the subcommands ``sub``."""
    ms = add_command(sub, "methods", help="the forecasting methods of qpriv train, with the "
                                          "privacy each claims")
    ms.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Print the registry: name, claimed privacy, whether it takes --eps, summary."""
    rows = [[name, entry.privacy, "yes" if entry.needs_eps else "no", entry.summary]
            for name, entry in METHODS.items()]
    print_table(["method", "privacy it claims", "takes --eps", "what it is"], rows)
    return 0
