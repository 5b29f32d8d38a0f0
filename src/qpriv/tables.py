"""Plain-text and Markdown tables for the command line and the reproduction reports."""

from __future__ import annotations

from collections.abc import Sequence


def format_cell(value: object, digits: int = 4) -> str:
    """Render one cell: floats with ``digits`` decimals (scientific when tiny, grouped when
    large), ``None`` as an em dash, booleans as yes/no."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if abs(value) >= 1e4:
            return f"{value:,.0f}"
        if 0 < abs(value) < 10 ** (-digits + 1):
            return f"{value:.{max(digits - 2, 1)}e}"
        return f"{value:.{digits}f}"
    return str(value)


def format_table(
    headers: Sequence[str], rows: Sequence[Sequence[object]], *, markdown: bool = False
) -> str:
    """Align ``rows`` under ``headers``; ``markdown=True`` gives a GitHub-flavoured table."""
    cells = [[format_cell(v) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        if markdown:
            return "| " + " | ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)) + " |"
        return "  ".join(v.rjust(w) for v, w in zip(values, widths, strict=True))

    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|" if markdown else "  ".join(
        "-" * w for w in widths
    )
    return "\n".join([line(headers), rule, *(line(r) for r in cells)])
