"""What every ``qpriv`` command uses: the parser that fails in one line, the argument types,
the help layout, JSON output, the words for library arguments and the hint after Ctrl-C."""

from __future__ import annotations

import argparse
import json
import math
import textwrap
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from qpriv.cli.commands import BY_NAME
from qpriv.errors import InvalidInputError, QprivError, require_seed
from qpriv.experiments.executors import EXECUTORS
from qpriv.tables import TABLE_WIDTH, format_table
from qpriv.threads import MAX_THREADS, check_threads

JSON_HELP = "print one JSON object (the last line of standard output)"
KEYWORD_FLAGS = {"out_dir": "--out", "batch_size": "--batch", "grid": "--lr-grid", "eps_s": "--eps"}
"""Library keyword arguments whose flag is not their name with dashes."""


class UsageError(QprivError):
    """A command-line argument that argparse rejected."""


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """argparse's help with ``(default: ...)`` after every option whose default is a value
    (not for None or False, and not where the help text already says what the default is)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if action.default is None or action.default is False or "default" in text:
            return action.help
        return super()._get_help_string(action)


class Parser(argparse.ArgumentParser):
    """An argument parser that reports bad input in one line, with exit code 2, and no usage
    dump (:func:`qpriv.cli.main` prints the line)."""

    def __init__(self, *args: object, keyword_flags: Mapping[str, str] | None = None,
                 **kwargs: object) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)
        self.keyword_flags = dict(keyword_flags or {})
        """This command's words for library keyword arguments that no flag of it is named
        after (``qpriv account``: ``eps_total`` is ``--target-eps``), beside
        :data:`KEYWORD_FLAGS`."""

    def error(self, message: str) -> None:  # type: ignore[override]
        commands = next((action for action in self._actions
                         if isinstance(action, argparse._SubParsersAction)), None)
        if commands is not None and message.startswith("the following arguments are required"):
            raise UsageError(f"{self.prog} needs a command, one of: "
                             f"{', '.join(commands.choices)} (see '{self.prog} --help')")
        # the top parser's errors are printed after "qpriv: error:" already
        named = f"{self.prog}: " if " " in self.prog else ""
        raise UsageError(f"{named}{message} (see '{self.prog} --help')")


def add_command(subparsers: argparse._SubParsersAction, name: str, *, help: str | None = None,
                keyword_flags: Mapping[str, str] | None = None) -> argparse.ArgumentParser:
    """A subcommand whose ``--help`` opens with its one-line description (a ``qpriv`` command's
    is in :data:`qpriv.cli.commands.COMMANDS`); ``keyword_flags`` names the flags of library
    keyword arguments this command spells its own way (:attr:`Parser.keyword_flags`)."""
    help = help if help is not None else BY_NAME[name].help
    return subparsers.add_parser(name, help=help, description=help,
                                 keyword_flags=keyword_flags)


def add_csv_format_flags(parser: argparse.ArgumentParser) -> None:
    """``--date-column``, ``--date-format`` and ``--sep``: how a ``--csv`` file is written,
    where it is not the default (:class:`qpriv.forecasting.csv_input.CsvFormat`)."""
    parser.add_argument("--date-column", metavar="NAME",
                        help="--csv: the timestamps' column (default: the one named 'date', "
                             "any case)")
    parser.add_argument("--date-format", metavar="FORMAT",
                        help="--csv: the dates' strftime format, e.g. '%%d.%%m.%%Y %%H:%%M' "
                             "(default: inferred; day or month first decided on the whole "
                             "column)")
    parser.add_argument("--sep", metavar="CHAR",
                        help="--csv: the field separator, e.g. ';' or 'tab' (default: ',')")


def csv_format_settings(args: argparse.Namespace) -> dict[str, str] | None:
    """The keyword arguments of a ``CsvFormat`` from :func:`add_csv_format_flags`' flags, or
    None where none is given.

    Raises:
        InvalidInputError: one is given without ``--csv`` (a named dataset's file has its own
            format).
    """
    given = {key: value for key, value in (("date_column", args.date_column),
                                           ("date_format", args.date_format),
                                           ("sep", args.sep)) if value is not None}
    if not given:
        return None
    if getattr(args, "csv", None) is None:
        flags = ", ".join("--" + key.replace("_", "-") for key in given)
        verb = "says" if len(given) == 1 else "say"
        raise InvalidInputError(f"{flags} {verb} how a --csv file is written; a named dataset's "
                                "file has its own format: give --csv PATH, or leave them out")
    if given.get("sep", "").lower() in ("tab", "\\t"):
        given["sep"] = "\t"
    return given


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    """``--json``: print one JSON object instead of the tables."""
    parser.add_argument("--json", action="store_true", help=JSON_HELP)


def add_seed_flags(parser: argparse.ArgumentParser, *, default: int = 2024) -> None:
    """``--seed S`` (recorded, reproducible) or ``--secret-seed`` (drawn from the operating
    system, recorded nowhere: :mod:`qpriv.privacy.randomness`); :func:`seed_of` reads them."""
    seeding = parser.add_mutually_exclusive_group()
    seeding.add_argument("--seed", type=seed_int, default=default,
                         help="seed of the run, recorded so that it can be reproduced; the "
                              "privacy claims then hold only against whoever does not know it")
    seeding.add_argument("--secret-seed", action="store_true",
                         help="draw the seed from the operating system's entropy and record "
                              "none: a run whose noise nobody can replay (for a release); "
                              "the noise then comes from cryptographic samplers")


def seed_of(args: argparse.Namespace) -> int | None:
    """The seed :func:`add_seed_flags` asked for: None for a secret one."""
    return None if args.secret_seed else args.seed


GRID_DEFAULTS = {"data_dir": None, "threads": 1, "executor": EXECUTORS[0], "address": None,
                 "quiet": False}
"""The defaults of :func:`add_grid_flags`' options by destination (``--out``'s is each
command's own)."""


def grid_flags_set(args: argparse.Namespace, *, out: str) -> list[str]:
    """The options of :func:`add_grid_flags` that ``args`` holds at other than their defaults
    (``out``: the command's default ``--out``), as typed: ``--out``, ``--data-dir``, ..."""
    flags = ["--out"] if args.out != out else []
    return flags + [f"--{name.replace('_', '-')}" for name, default in GRID_DEFAULTS.items()
                    if getattr(args, name) != default]


def add_grid_flags(parser: argparse.ArgumentParser, *, out: str) -> None:
    """The options every grid command (``qpriv reproduce``, ``qpriv frontier``) takes: where its
    cells and reports go (default ``out``), the data, threads per cell, ``--executor local|ray``
    and ``--address`` (where the cells run), ``--quiet`` and ``--json``."""
    parser.add_argument("--out", type=out_path, default=out,
                        help="cells and reports go here; finished cells are never recomputed")
    parser.add_argument("--data-dir", type=existing_path, default=GRID_DEFAULTS["data_dir"],
                        help="file or directory holding the datasets")
    parser.add_argument("--threads", type=thread_count, default=GRID_DEFAULTS["threads"],
                        help="torch threads per forecasting cell (1 is the fastest on a "
                             "shared 2-core CPU); a classifier run always takes one, so that a "
                             "stored run's numbers do not depend on the machine")
    parser.add_argument("--executor", choices=EXECUTORS, default=GRID_DEFAULTS["executor"],
                        help="local: the cells one after the other here; ray: one Ray task per "
                             "unfinished cell, or classifier run (pip install 'qpriv[ray]')")
    parser.add_argument("--address", default=GRID_DEFAULTS["address"],
                        help="the Ray cluster for --executor ray (default: $RAY_ADDRESS, else "
                             "a local Ray started for the command and stopped after)")
    parser.add_argument("--quiet", action="store_true", help="no progress output")
    add_json_flag(parser)


def emit_json(payload: dict) -> None:
    """Print ``payload`` as one JSON line (non-finite floats as null)."""
    print(json.dumps(payload, allow_nan=False, default=_jsonable))


def _jsonable(value: object) -> object:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def existing_path(text: str) -> str:
    """An argparse type: a file or directory that exists (never a silent fallback elsewhere)."""
    if not text.strip() or not Path(text).expanduser().exists():
        raise argparse.ArgumentTypeError(f"{text!r} does not exist")
    return text


def out_path(text: str) -> str:
    """An argparse type: a non-empty output path."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path; name the output directory")
    return text


def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def thread_count(text: str) -> int:
    """An argparse type: a CPU thread count, as :func:`qpriv.threads.check_threads` takes it."""
    value = positive_int(text)
    try:
        return check_threads(value)
    except InvalidInputError:
        raise argparse.ArgumentTypeError(
            f"expected at most {MAX_THREADS} threads (torch starts every one), got {value}; "
            "give at most the machine's cores") from None


def seed_int(text: str) -> int:
    """An argparse type: a seed, as :func:`qpriv.errors.require_seed` takes it."""
    expected = "expected a seed (an integer in [0, 2**63)), got"
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{expected} {text!r}") from None
    try:
        return require_seed("seed", value)
    except InvalidInputError:
        raise argparse.ArgumentTypeError(f"{expected} {value}") from None


def number(entry: object) -> object:
    """The number of a labelled privacy entry, or the entry itself (None stays None)."""
    return entry["value"] if isinstance(entry, dict) else entry


def _parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                yield from _parsers(child)


def command_parser(parser: argparse.ArgumentParser,
                   args: argparse.Namespace | None) -> argparse.ArgumentParser:
    """The parser of the command ``args`` ran (``qpriv train``'s for ``qpriv train ...``),
    whose flags an error names; ``parser`` itself where no command was parsed."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and args is not None:
            chosen = action.choices.get(getattr(args, action.dest, None) or "")
            if chosen is not None:
                return command_parser(chosen, args)
    return parser


def flag_names(parser: argparse.ArgumentParser) -> dict[str, str]:
    """Library keyword argument -> the flag that sets it, over every command of ``parser``
    (``eps_total`` -> ``--eps-total``), for :meth:`qpriv.errors.ArgumentError.spelled`; the
    words ``parser`` itself gives (:attr:`Parser.keyword_flags`) come first."""
    names = {**KEYWORD_FLAGS, **getattr(parser, "keyword_flags", {})}
    for each in _parsers(parser):
        for action in each._actions:
            if action.option_strings and action.dest != "help":
                names.setdefault(action.dest, max(action.option_strings, key=len))
    return names


def after_interrupt(args: argparse.Namespace | None) -> str:
    """How to go on after Ctrl-C, for the commands that keep their work."""
    command = getattr(args, "command", None)
    out = getattr(args, "out", None)
    if command in ("train", "train-classifier") and out:
        return f"; rerun with --out {out} --resume to continue from the last finished epoch"
    if command in ("reproduce", "frontier"):
        return "; run the same command again: finished cells are kept"
    if command == "quickstart":
        return ("; run it again with the same --out to continue" if out else
                "; nothing was kept (give --out to keep finished runs)")
    return ""


def print_wrapped(text: str, *, first: str = "", indent: str = "  ") -> None:
    """Print ``text`` wrapped at :data:`~qpriv.tables.TABLE_WIDTH` columns, its first line
    led by ``first`` and its later lines indented by ``indent`` (more than ``first``, so that a
    reader sees where one item ends)."""
    print(textwrap.fill(text, width=TABLE_WIDTH, initial_indent=first,
                        subsequent_indent=first + indent, break_on_hyphens=False))


def print_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """Print a plain table (numbers right, text left) that fits :data:`TABLE_WIDTH`: its widest
    text column wrapped, and where numbers alone are too wide (a forecast of many channels), its
    columns in consecutive tables, each led by the first column, as pandas prints a wide frame."""
    text = format_table(headers, rows, max_width=TABLE_WIDTH)
    if max(map(len, text.splitlines())) <= TABLE_WIDTH or len(headers) < 3:
        print(text)
        return
    groups: list[list[int]] = [[]]
    for column in range(1, len(headers)):
        trial = format_table([headers[0], *(headers[c] for c in [*groups[-1], column])],
                             [[row[0], *(row[c] for c in [*groups[-1], column])]
                              for row in rows])  # unwrapped: a group must fit as it is
        if groups[-1] and max(map(len, trial.splitlines())) > TABLE_WIDTH:
            groups.append([])
        groups[-1].append(column)
    print("\n\n".join(
        format_table([headers[0], *(headers[c] for c in group)],
                     [[row[0], *(row[c] for c in group)] for row in rows],
                     max_width=TABLE_WIDTH) for group in groups))
