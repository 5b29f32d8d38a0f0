"""Reading the result files a command left, for a report: a result table (CSV) checked whole
before a row of it is drawn (:class:`TableSpec`, :func:`read_table`), and a Markdown report's
title and bullet lists (:func:`markdown_title`, :func:`markdown_section`). A file that is cut
short, overwritten or edited is refused with the command that writes it again, never drawn as
a wrong row."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from qpriv.errors import InvalidInputError

REWRITE_FIX = "re-run the command that wrote it"
"""What to do about a damaged result file (the ``fix`` of
:func:`~qpriv.runs.files.read_json_object`)."""


@dataclass(frozen=True)
class TableSpec:
    """What a result table that a command writes must hold for its report to be right: the
    command (named in the fix), the columns read, those that every row fills and those that
    hold numbers. A file that breaks it is damaged (cut short, overwritten, edited) and is
    refused rather than drawn as a wrong row."""

    command: str
    columns: tuple[str, ...] = ()
    filled: tuple[str, ...] = ()
    numbers: tuple[str, ...] = ()
    paper_twins: bool = False
    """Whether the paper's numbers (``paper_<name>``) and the columns they stand beside
    (``<name>``) hold numbers too."""

    def number_columns(self, header: Sequence[str]) -> list[str]:
        """The columns of ``header`` that hold numbers."""
        twins = [n for n in header if n.startswith("paper_")] if self.paper_twins else []
        wanted = {*self.numbers, *twins, *(n.removeprefix("paper_") for n in twins)}
        return [name for name in header if name in wanted]

    def damaged(self, path: Path, problem: str) -> InvalidInputError:
        """The error for ``path`` with ``problem``: damaged, and how to write it again."""
        return InvalidInputError(
            f"{path} is damaged or was not written by {self.command} ({problem}); run "
            f"{self.command} again with the same --out to write it again (finished cells are "
            "kept)")


def read_table(path: Path, spec: TableSpec) -> tuple[list[str], list[dict[str, Any]]]:
    """A result CSV's columns and rows, missing values as None and numbers as Python's, once
    it is known to be whole: every line ends (pandas ends the file with a newline, a file cut
    short does not) and has the header's fields, ``spec``'s columns are there, its filled
    columns hold a value in every row and its number columns numbers. A file holding only a
    newline is pandas' table without rows or columns (every cell failed).

    Raises:
        InvalidInputError: the file cannot be read or breaks any of that (names the file,
            the problem and the command that writes it again).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise spec.damaged(path, f"{type(error).__name__}: {error}") from error
    if text == "\n" and not spec.columns:
        return [], []
    if not text.strip():
        raise spec.damaged(path, "the file is empty")
    if not text.endswith("\n"):
        raise spec.damaged(path, "its last line is cut short: the file was truncated")
    records = [record for record in csv.reader(io.StringIO(text)) if record]
    header = records[0]
    if len(records) == 1:  # every grid writes a row per setting, failed ones included
        raise spec.damaged(path, "it has a header and no rows")
    for number, record in enumerate(records[1:], 1):
        if len(record) != len(header):
            raise spec.damaged(path, f"row {number} has {len(record)} fields, the header "
                                     f"{len(header)}")
    missing = [name for name in spec.columns if name not in header]
    if missing:
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        raise spec.damaged(path, f"it lacks the column {', '.join(missing[:3])}{more}")
    try:
        frame = pd.read_csv(io.StringIO(text), keep_default_na=False, na_values=[""])
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as error:
        raise spec.damaged(path, f"not a readable CSV: {error}") from error
    for name in spec.filled:
        empty = frame.index[frame[name].isna()]
        if len(empty):
            raise spec.damaged(path, f"row {empty[0] + 1} has no {name}")
    for name in spec.number_columns(list(frame.columns)):
        values = pd.to_numeric(frame[name], errors="coerce")
        wrong = frame.index[values.isna() & frame[name].notna()]
        if len(wrong):
            raise spec.damaged(path, f"row {wrong[0] + 1}'s {name} is "
                                     f"{frame[name][wrong[0]]!r}, not a number")
    records = frame.astype(object).where(frame.notna(), None).to_dict("records")
    rows = [{key: value.item() if isinstance(value, np.generic) else value
             for key, value in record.items()} for record in records]
    return list(frame.columns), rows


def markdown_section(path: Path, heading: str) -> list[str]:
    """The bullet lines under ``## heading`` of a Markdown file (empty when absent)."""
    if not path.is_file():
        return []
    lines, inside = [], False
    for line in path.read_text().splitlines():
        if line.startswith("## "):
            inside = line[3:].strip() == heading
        elif inside and line.startswith("- "):
            lines.append(line[2:])
    return lines


def markdown_title(path: Path, fallback: str) -> str:
    """The ``# title`` on a Markdown file's first line (``fallback`` without one)."""
    if path.is_file():
        first = path.read_text().splitlines()[:1]
        if first and first[0].startswith("# "):
            return first[0][2:].strip()
    return fallback
