"""Plain-text and Markdown tables for the command line and the reproduction reports."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence


def format_cell(value: object, digits: int = 4, *, significant: bool = False) -> str:
    """Render one cell: floats with ``digits`` decimals (scientific when tiny or beyond 1e12,
    grouped when large), ``None`` as an em dash, booleans as yes/no. ``significant=True``
    writes floats below 10,000 with ``digits`` significant digits and no trailing zeros
    instead (5.8, not 5.8000; 0.1235; 1e-06), as the reports do.

    >>> format_cell(5.8), format_cell(5.8, significant=True)
    ('5.8000', '5.8')
    >>> format_cell(0.123456, significant=True), format_cell(12345.6, significant=True)
    ('0.1235', '12,346')
    >>> format_cell(1.42e302)
    '1.42e+302'
    """
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if abs(value) >= 1e12:  # beyond a grouped integer's use: a 300-digit eps is e^eps
            return f"{value:.{max(digits - 2, 1)}e}"
        if abs(value) >= 1e4:
            return f"{value:,.0f}"
        if significant:
            return f"{value:.{digits}g}"
        if 0 < abs(value) < 10 ** (-digits + 1):
            return f"{value:.{max(digits - 2, 1)}e}"
        return f"{value:.{digits}f}"
    return str(value)


TABLE_WIDTH = 100
"""The widest line a plain table the command line prints may take: its widest text column
wraps to fit."""


def _is_number(text: str) -> bool:
    """Whether a rendered cell is a number (or the em dash of a missing one)."""
    if text == "—":
        return True
    try:
        float(text.replace(",", "").lstrip("+"))
    except ValueError:
        return False
    return True


def format_table(
    headers: Sequence[str], rows: Sequence[Sequence[object]], *, markdown: bool = False,
    max_width: int | None = None, significant: bool = False,
) -> str:
    """Align ``rows`` under ``headers``: numbers to the right, text to the left;
    ``markdown=True`` gives a GitHub-flavoured table. ``max_width`` (plain tables only) wraps
    the widest text column so that every line fits, where the other columns leave it room.
    ``significant``: floats to 4 significant digits without trailing zeros
    (:func:`format_cell`)."""
    cells = [[format_cell(v, significant=significant) for v in row] for row in rows]
    numeric = [all(_is_number(r[i]) for r in cells) for i in range(len(headers))]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    total = sum(widths) + 2 * (len(widths) - 1)
    if not markdown and max_width is not None and total > max_width:
        text_columns = [i for i in range(len(headers)) if not numeric[i]]
        if text_columns:
            wide = max(text_columns, key=lambda i: widths[i])
            room = max(widths[wide] - (total - max_width), len(headers[wide]), 12)
            widths[wide] = room
            cells = [[*r[:wide], textwrap.fill(r[wide], width=room), *r[wide + 1:]]
                     for r in cells]

    def line(values: Sequence[str]) -> str:
        if markdown:
            return "| " + " | ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)) + " |"
        return "  ".join(v.rjust(w) if right else v.ljust(w)
                         for v, w, right in zip(values, widths, numeric, strict=True)).rstrip()

    def lines(values: Sequence[str]) -> list[str]:
        """One row, over as many lines as its tallest (wrapped) cell."""
        parts = [v.split("\n") for v in values]
        height = max(len(p) for p in parts)
        return [line([p[k] if k < len(p) else "" for p in parts]) for k in range(height)]

    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|" if markdown else "  ".join(
        "-" * w for w in widths
    )
    body = [text for r in cells for text in lines(r)]
    return "\n".join([line(list(headers)), rule, *body])
