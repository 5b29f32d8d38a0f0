"""What a report page is made of, before it is HTML: sections of tables, figures, paragraphs and
lists (:class:`Section`, :class:`Table`, :class:`Figure`, :class:`Text`, :class:`Bullets`), the
helpers that build them from raw values (:func:`table`, :func:`key_values`,
:func:`png_figure`) and the table of a run's privacy claims (:func:`claims_blocks`).
:mod:`qpriv.report.render` turns them into the page."""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from qpriv.privacy.claims import PrivacyClaim


def number_text(value: Any) -> str:
    """A table cell's text: floats to 4 significant digits (``f"{v:.4g}"``; whole numbers from
    10^4 up without exponent), integers as they are, booleans as yes/no, missing as a dash.

    >>> [number_text(v) for v in (0.330412, 12345.6, 1e-06, 7, True, None)]
    ['0.3304', '12346', '1e-06', '7', 'yes', '—']
    """
    value = value.item() if isinstance(value, np.generic) else value
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and 1e4 <= abs(value) < 1e15:
        return f"{value:.0f}"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.number)) and not isinstance(value, (bool, np.bool_))


@dataclass(frozen=True)
class Cell:
    """One table cell: its text, and whether it is a number (right-aligned)."""

    text: str
    numeric: bool


@dataclass(frozen=True)
class Table:
    """A table: ``kind`` tells the template how to draw the block."""

    caption: str
    headers: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    kind: str = "table"


@dataclass(frozen=True)
class Figure:
    """A PNG embedded as a data URI."""

    caption: str
    src: str
    kind: str = "figure"


@dataclass(frozen=True)
class Text:
    """A paragraph (inline `code` spans allowed)."""

    text: str
    kind: str = "text"


@dataclass(frozen=True)
class Bullets:
    """A list of short lines (inline `code` spans allowed); ``ordered`` numbers them."""

    items: tuple[str, ...]
    ordered: bool = False
    kind: str = "bullets"


Block = Table | Figure | Text | Bullets


@dataclass
class Section:
    """A headed part of the page: blocks, then sub-sections."""

    title: str
    blocks: list[Block] = field(default_factory=list)
    children: list[Section] = field(default_factory=list)
    anchor: str = ""


def table(caption: str, headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> Table:
    """A :class:`Table` of raw values: numbers formatted by :func:`number_text` and
    right-aligned, text left-aligned.

    >>> [cell.text for cell in table("", ["eps", "method"], [[0.1, "ldpt"]]).rows[0]]
    ['0.1', 'ldpt']
    """
    return Table(caption=caption, headers=tuple(headers), rows=tuple(
        tuple(Cell(number_text(value), _is_number(value) or value is None) for value in row)
        for row in rows))


def key_values(caption: str, pairs: Sequence[tuple[str, Any]], *,
               headers: tuple[str, str] = ("setting", "value")) -> Table:
    """A two-column table of ``(name, value)`` pairs; pairs without a value are left out."""
    return table(caption, headers, [[name, value] for name, value in pairs if value is not None])


def png_figure(caption: str, png: bytes) -> Figure:
    """A figure from PNG bytes, embedded as a base64 data URI."""
    return Figure(caption=caption,
                  src="data:image/png;base64," + base64.b64encode(png).decode("ascii"))


def claim_value(entry: Any) -> Any:
    """The ``value`` of a stored claim (a number stays a number)."""
    return entry.get("value") if isinstance(entry, Mapping) else entry


def claims_blocks(named: Sequence[tuple[str, PrivacyClaim]], *,
                  run_notes: Sequence[str] = ()) -> list[Block]:
    """Every claim as one row (eps, delta, kind, accounting, unit, covers, derivation, notes),
    and the notes, numbered once below the table (the rows cite them by number); the run's own
    privacy notes that no claim carries (runs written before claims had notes) follow them."""
    notes: list[str] = []
    if not named:
        extra = [Bullets(tuple(run_notes))] if run_notes else []
        return [Text("This run claims no privacy: no noise calibrated to a guarantee."), *extra]
    rows = []
    for name, claim in named:
        cited = []
        for note in claim.notes:
            if note not in notes:
                notes.append(note)
            cited.append(str(notes.index(note) + 1))
        details = "; ".join(f"{key} = {number_text(value)}"
                            for key, value in claim.details.items()
                            if isinstance(value, (int, float, str)) and len(str(value)) <= 40)
        rows.append([name, claim.value, claim.delta, claim.kind.value, claim.accounting.value,
                     claim.unit.value, claim.covers, details or "—", ", ".join(cited) or "—"])
    blocks: list[Block] = [table(
        "", ["claim", "eps", "delta", "kind", "accounting", "unit", "covers",
                           "derivation", "notes"], rows)]
    notes += [note for note in dict.fromkeys(run_notes) if note not in notes]
    if notes:
        blocks.append(Bullets(tuple(notes), ordered=True))
    return blocks
