"""A Griffe extension for the API pages: the docstrings' Sphinx roles (``:func:`x```,
``:class:`~a.b.C```) shown as code, as Sphinx would show them (``x``, ``C``).

The docstrings cross-reference with Sphinx roles, which Markdown does not read; no maintained
Griffe extension translates them (griffe-sphinx reads attribute comments, not roles), so these
few lines do, in the build of the site only.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:func|class|meth|mod|data|attr|obj|exc|const):`(~?)([^`]+)`")


def _code(match: re.Match[str]) -> str:
    short, target = match.group(1), match.group(2)
    return f"`{target.rsplit('.', 1)[-1] if short else target}`"


class SphinxRoles(griffe.Extension):
    """Rewrite every loaded object's docstring once, before it is rendered."""

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = ROLE.sub(_code, obj.docstring.value)
