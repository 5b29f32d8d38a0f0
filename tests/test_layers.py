"""Imports run one way, bottom to top, and no module reaches back up.

The layers, bottom first: the error types; the shared leaves (tables, progress bars, torch
threads, the allocator setting); ``quantum`` (simulation); ``privacy`` (pure maths and the claim
type); ``runs`` (a run directory); ``training`` (the one trainer loop); ``forecasting`` and
``classification`` (the models, side by side and blind to each other); ``estimators``
(``qpriv.load``, which sends a saved folder to the family that wrote it) and ``federated`` (the
same forecasters fitted across sites that never pool their data); ``audits`` (they load
trained models); ``report`` (the HTML page of a run, and of the folders the layers above
register with it); ``experiments``; ``cli``; the package's front door, ``qpriv/__init__.py``;
``qpriv/__main__.py`` (``python -m qpriv``) above all. An
import inside a function counts like any other, and none is allowed below the command line: a
cycle means a concept is in the wrong room. The command line's handlers are the one exception:
a handler imports the library it calls when its command runs, so that parsing (``--version``, a
mistyped flag) starts without torch (``benchmarks/startup.py``). No layer below may import
``cli`` (checked here), so a deferred import there cannot hide a cycle; its direction is checked
as any other's.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import qpriv

LAYERS = {
    "errors": -1,
    "tables": 0, "progress": 0, "threads": 0, "allocator": 0,
    "quantum": 1,
    "privacy": 2,
    "runs": 3,
    "training": 4,
    "forecasting": 5, "classification": 5,
    "estimators": 6, "federated": 6,
    "audits": 7,
    "report": 8,
    "experiments": 9,
    "cli": 10,
    "__init__": 11,
    "__main__": 12,  # python -m qpriv: the command line
}
SOURCE = Path(qpriv.__file__).parent


def _imports(tree: ast.Module, package: str) -> list[tuple[ast.stmt, str, bool]]:
    """(node, imported qpriv module, inside a function) for every import of the package."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            inside.update(id(sub) for sub in ast.walk(node) if sub is not node)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the importing package
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            targets = [f"{module}.{a.name}" for a in node.names] if module else []
            for target in [module, *targets]:
                if target.startswith("qpriv."):
                    found.append((node, target, id(node) in inside))
        elif isinstance(node, ast.Import):
            found += [(node, a.name, id(node) in inside) for a in node.names
                      if a.name.startswith("qpriv.")]
    return found


def layer_of(module: str) -> str:
    """``qpriv.privacy.calibration`` -> ``privacy``; the package itself -> ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def violations(root: Path) -> list[str]:
    """Every import under ``root`` (a ``qpriv`` source tree) that runs upward or sideways
    between layers, or sits inside a function, as ``file:line: what``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root).with_suffix("")
        parts = ["qpriv", *relative.parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        module = ".".join(parts)
        package = module if path.name == "__init__.py" else ".".join(parts[:-1])
        own = layer_of(module) if len(parts) > 1 else "__init__"
        if own not in LAYERS:
            found.append(f"{relative}: the layer {own!r} is not in LAYERS; place it")
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        for node, target, in_function in _imports(tree, package):
            where = f"{relative}.py:{node.lineno}"
            if in_function and own != "cli":
                found.append(f"{where}: imports {target} inside a function")
            theirs = layer_of(target)
            if theirs == own or theirs not in LAYERS:  # a name from the package's front door
                continue                                # (e.g. __version__) or a sibling
            if LAYERS[theirs] >= LAYERS[own]:
                way = "up" if LAYERS[theirs] > LAYERS[own] else "sideways"
                found.append(f"{where}: {own} imports {target} ({way})")
    return found


def test_the_package_imports_only_downward():
    assert violations(SOURCE) == []


def _write(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.mark.parametrize(("relative", "text", "expected"), [
    ("privacy/bad.py", "from qpriv.forecasting.run import run_forecast\n",
     "privacy/bad.py:1: privacy imports qpriv.forecasting.run (up)"),
    ("privacy/bad.py", "def f():\n    from qpriv.audits import mia\n    return mia\n",
     "privacy/bad.py:2: imports qpriv.audits.mia inside a function"),
    ("forecasting/bad.py", "import qpriv.classification.models\n",
     "forecasting/bad.py:1: forecasting imports qpriv.classification.models (sideways)"),
    ("quantum/bad.py", "from ..training import trainer\n",
     "quantum/bad.py:1: quantum imports qpriv.training (up)"),
    ("newroom/x.py", "X = 1\n", "newroom/x: the layer 'newroom' is not in LAYERS; place it"),
])
def test_a_deliberate_upward_import_is_caught(tmp_path, relative, text, expected):
    _write(tmp_path, "forecasting/model.py", "from qpriv.privacy import calibration\n")
    assert violations(tmp_path) == []  # downward is fine
    _write(tmp_path, relative, text)
    assert expected in violations(tmp_path)
