"""Rooms that say what they hold (issue 40): no module over 600 lines (transcribed data aside),
no function over 120, no module naming in ``__all__`` what another room defines (a
re-export across rooms: the name has one home, and its importers import it from there; a
package's ``__init__`` may name its own modules' public names), and no module taking a
private name (one leading underscore) from another room: what a room lends is public, named
for what it is and documented, in its home module (the scripts and benchmarks, outside every
room, take only public names too)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import qpriv

ROOT = Path(qpriv.__file__).parent
MODULES = sorted(ROOT.rglob("*.py"))
REPOSITORY = Path(__file__).resolve().parents[1]
OUTSIDE = sorted(path for folder in ("scripts", "benchmarks")
                 for path in (REPOSITORY / folder).glob("*.py"))
"""The repository's scripts and benchmarks: qpriv's users, in no room."""
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


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _room(module: str) -> str:
    """``qpriv.audits.privacy_linear`` -> ``audits``, ``qpriv.errors`` -> ``errors``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def private_imports(tree: ast.Module, module: str | None) -> list[str]:
    """The private names ``module`` (``qpriv.audits.privacy_linear``, a package's
    ``qpriv.audits.__init__``; None: a script, in no room) takes from another room of qpriv,
    as ``line: qpriv.room.module._name``: imported (``from qpriv.forecasting.linear import
    _solve``; relative imports resolved), or read as an attribute of what it imported
    (``linear._solve``, ``Trainer._step``)."""
    package = None if module is None else module.rsplit(".", 1)[0]
    bound: dict[str, str] = {}  # a name the module binds -> the qpriv object it is
    taken: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = node.module or ""
            if node.level and package is not None:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join([*base, source] if source else base)
            if source == "qpriv" or source.startswith("qpriv."):
                for alias in node.names:
                    bound[alias.asname or alias.name] = f"{source}.{alias.name}"
                    taken.append((node.lineno, f"{source}.{alias.name}"))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "qpriv" or alias.name.startswith("qpriv."):
                    bound[alias.asname or "qpriv"] = alias.name if alias.asname else "qpriv"
                    taken.append((node.lineno, alias.name))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            chain, base = [node.attr], node.value
            while isinstance(base, ast.Attribute):
                chain.insert(0, base.attr)
                base = base.value
            if isinstance(base, ast.Name) and base.id in bound:
                taken.append((node.lineno, ".".join([bound[base.id], *chain])))
    here = None if module is None else _room(module)
    return [f"{line}: {name}" for line, name in sorted(set(taken))
            if any(_private(part) for part in name.split(".")) and _room(name) != here]


@pytest.mark.parametrize("path", MODULES, ids=_relative)
def test_no_module_takes_a_private_name_from_another_room(path):
    """A name another room needs is public in its home module (a good name, a docstring, type
    hints): a private one may change without notice, and its users would not know."""
    module = ".".join(["qpriv", *path.relative_to(ROOT).with_suffix("").parts])
    assert private_imports(ast.parse(path.read_text()), module) == []


@pytest.mark.parametrize("path", OUTSIDE, ids=lambda p: p.relative_to(REPOSITORY).as_posix())
def test_no_script_or_benchmark_takes_a_private_name_of_qpriv(path):
    assert private_imports(ast.parse(path.read_text()), None) == []


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
    borrowed = ast.parse(
        "from qpriv.forecasting.run import _plan, plan_run\n"
        "from qpriv.forecasting import linear\n"
        "from qpriv.training import Trainer\n"
        "from ..privacy.claims import _kinds, __version__\n"
        "import qpriv.runs.files as files\n"
        "def f():\n"
        "    return linear._solve(), Trainer._train_epoch, files.__name__, files._tmp\n")
    assert private_imports(borrowed, "qpriv.audits.game") == [
        "1: qpriv.forecasting.run._plan", "4: qpriv.privacy.claims._kinds",
        "7: qpriv.forecasting.linear._solve", "7: qpriv.runs.files._tmp",
        "7: qpriv.training.Trainer._train_epoch"]
    assert private_imports(borrowed, "qpriv.forecasting.game") == [  # its own room's
        "4: qpriv.privacy.claims._kinds", "7: qpriv.runs.files._tmp",
        "7: qpriv.training.Trainer._train_epoch"]
    assert private_imports(ast.parse("from qpriv.errors import _line\n"), None) == [
        "1: qpriv.errors._line"]
    front = ast.parse("from . import _own\nfrom .game import _own\nfrom ..runs import _tmp\n")
    assert private_imports(front, "qpriv.audits.__init__") == ["3: qpriv.runs._tmp"]
