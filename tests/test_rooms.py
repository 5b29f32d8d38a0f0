"""Rooms that say what they hold (issue 40): no module over 600 lines (transcribed data aside),
no function over 120, and no module naming in ``__all__`` what another room defines (a
re-export across rooms: the name has one home, and its importers import it from there; a
package's ``__init__`` may name its own modules' public names)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import qpriv

ROOT = Path(qpriv.__file__).parent
MODULES = sorted(ROOT.rglob("*.py"))
TRANSCRIBED = {"experiments/paper_numbers.py"}
"""Data typed in from the papers' tables, kept whole so that it reads against them."""


def _relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def long_functions(tree: ast.AST, *, limit: int = 120) -> list[tuple[str, int]]:
    """Every function (methods too) longer than ``limit`` lines, docstring included."""
    return [(node.name, node.end_lineno - node.lineno + 1) for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > limit]


def re_exports(tree: ast.Module, room: str) -> list[str]:
    """The names a module of ``room`` (``privacy``, ...) lists in its literal ``__all__`` but
    imports from another room of qpriv."""
    listed: list[str] = []
    elsewhere: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("qpriv."):
            if node.module.split(".")[1] != room:
                elsewhere.update(alias.asname or alias.name for alias in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names = target.elts if isinstance(target, ast.Tuple) else [target]
                if any(isinstance(n, ast.Name) and n.id == "__all__" for n in names):
                    listed = [e.value for e in getattr(node.value, "elts", [])
                              if isinstance(e, ast.Constant)]
    return [name for name in listed if name in elsewhere]


@pytest.mark.parametrize("path", MODULES, ids=_relative)
def test_no_module_over_600_lines_and_no_function_over_120(path):
    text = path.read_text()
    if _relative(path) not in TRANSCRIBED:
        assert len(text.splitlines()) <= 600, "split the module by job"
    assert long_functions(ast.parse(text)) == []


@pytest.mark.parametrize("path", [p for p in MODULES if p.parent != ROOT], ids=_relative)
def test_no_module_re_exports_a_name_another_room_defines(path):
    """The package's front door (``qpriv/__init__.py``) is the one place that names what lives
    in the rooms: its lazy map says where each public name is defined."""
    room = path.relative_to(ROOT).parts[0]
    assert re_exports(ast.parse(path.read_text()), room) == []


def test_the_checks_catch_what_they_look_for():
    long = "def f():\n" + "    x = 1\n" * 130
    assert long_functions(ast.parse(long)) == [("f", 131)]
    moved = ast.parse("from qpriv.forecasting.series import split_rows\n"
                      "__all__ = ['split_rows', 'g']\ndef g():\n    pass\n")
    assert re_exports(moved, "classification") == ["split_rows"]
    assert re_exports(moved, "forecasting") == []  # within its room
