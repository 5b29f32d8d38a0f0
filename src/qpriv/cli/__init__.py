"""The qpriv command line.

Every privacy number it prints carries its kind (local eps-QDP per pass, composed, or global
(eps, delta)-DP) and its accounting (paper or rigorous). With --json the last line of standard
output is one JSON object. Bad input exits with code 2 and one line on stderr; the rules about
which arguments go together live in the library, and an error about them names the flags.

One module per command, each with its parser beside its handler, listed in
:mod:`~qpriv.cli.commands` and imported only when its command runs; what they share is in
:mod:`~qpriv.cli.common`.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import importlib.metadata
import os
import sys
from collections.abc import Sequence

from qpriv.cli.commands import BY_NAME, COMMANDS
from qpriv.cli.common import Parser, after_interrupt, command_parser, flag_names
from qpriv.errors import ArgumentError, QprivError


def chosen_command(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names: its first word that is not an option (the top parser's
    options, ``--help`` and ``--version``, take no value); None if that is no command."""
    first = next((word for word in argv if not word.startswith("-")), None)
    return first if first in BY_NAME else None


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The ``qpriv`` argument parser for ``argv`` (default: this process's arguments).

    Only the command ``argv`` names is imported and given its flags; every other command is
    listed by name and help (:data:`qpriv.cli.commands.COMMANDS`), so that ``qpriv --help``,
    ``--version`` and a mistyped command answer in well under a second."""
    argv = sys.argv[1:] if argv is None else argv
    parser = Parser(prog="qpriv", description=" ".join(" ".join(__doc__.split("\n\n")[:2])
                                                     .split()))
    parser.add_argument("--version", action="version",
                        version=f"qpriv {importlib.metadata.version('qpriv')}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    chosen = chosen_command(argv)
    for command in COMMANDS:
        if command.name == chosen:
            importlib.import_module(command.module).add_parser(sub)
        else:
            sub.add_parser(command.name, help=command.help)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``qpriv`` console script: run one command, return its exit code."""
    args = None
    parser = build_parser(argv)
    try:
        args = parser.parse_args(argv)
        return args.handler(args)
    except ArgumentError as err:  # named by the flags of the command that ran
        print(f"qpriv: error: {err.spelled(flag_names(command_parser(parser, args)))}",
              file=sys.stderr)
        return 2
    except QprivError as err:
        print(f"qpriv: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"qpriv: interrupted{after_interrupt(args)}", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `qpriv calibrate | head`: the reader left, nothing to report
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as err:  # a path the user gave that cannot be read or made (--out a/b
        if err.filename is None:  # with a a file, an unwritable place): one line, not a trace
            raise
        fix = ("free some space there, or write elsewhere; nothing was left half-written"
               if err.errno in (errno.ENOSPC, errno.EDQUOT) else
               "check that path (a file read must exist and be readable, a folder written to "
               "writable)")
        print(f"qpriv: error: cannot use {err.filename}: {err.strerror}; {fix}",
              file=sys.stderr)
        return 2
