"""The public API: ``import qpriv`` gives the documented entry points, each with an example
that runs, the README's Python example runs, and ``help(qpriv)`` lists every entry point."""

from __future__ import annotations

import doctest
import inspect
import os
import pydoc
import re
from pathlib import Path

import pytest

import qpriv
from qpriv.forecasting.run import run_forecast

README = Path(__file__).resolve().parents[1] / "README.md"
NEEDS_DATA = {"train_forecaster", "load_run", "DPLinearForecaster"}
"""Entry points whose examples train on ETT (skipped without QPRIV_DATA_DIR)."""
HAS_DATA = bool(os.environ.get("QPRIV_DATA_DIR"))
FUNCTIONS = sorted(name for name in qpriv.__all__
                   if inspect.isfunction(getattr(qpriv, name))
                   or name in ("PrivacyClaim", "DPLinearForecaster", "DPSGDClassifier"))


def _doctests(name: str) -> list[doctest.DocTest]:
    obj = getattr(qpriv, name)
    return [t for t in doctest.DocTestFinder().find(obj, name) if t.examples]


def test_the_entry_points_are_the_library_functions() -> None:
    assert qpriv.train_forecaster is run_forecast
    assert {"train_forecaster", "load_run", "ForecastingRun", "Forecast", "train_classifier",
            "account", "calibrate", "METHODS", "PrivacyClaim", "Kind", "Accounting", "Unit",
            "InvalidInputError", "QprivError", "__version__"} <= set(qpriv.__all__)
    for name in qpriv.__all__:
        assert hasattr(qpriv, name), name
    assert "ldpt" in qpriv.METHODS and qpriv.Kind("composed") is qpriv.Kind.COMPOSED


@pytest.mark.parametrize("name", FUNCTIONS)
def test_every_entry_point_has_an_example_that_runs(name: str) -> None:
    if name in NEEDS_DATA and not HAS_DATA:
        pytest.skip("needs QPRIV_DATA_DIR (ETT)")
    tests = _doctests(name)
    assert tests, f"qpriv.{name} has no >>> example in its docstring"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in tests:
        runner.run(test)
    outcome = runner.summarize(verbose=False)
    assert outcome.attempted > 0 and outcome.failed == 0, f"{outcome.failed} failed in {name}"


def test_the_package_docstring_example_runs() -> None:
    runner = doctest.DocTestRunner()
    for test in doctest.DocTestFinder(recurse=False).find(qpriv, "qpriv"):
        runner.run(test)
    outcome = runner.summarize(verbose=False)
    assert outcome.attempted >= 2 and outcome.failed == 0


def test_a_failing_example_is_caught() -> None:
    parser = doctest.DocTestParser()
    test = parser.get_doctest(">>> qpriv.calibrate(0.1).p\n0.5\n", {"qpriv": qpriv},
                              "wrong", None, 0)
    runner = doctest.DocTestRunner()
    runner.run(test, out=lambda _: None)
    assert runner.summarize(verbose=False).failed == 1


def _readme_python() -> str:
    text = README.read_text()
    section = text.split("## Python API", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 1, "the Python API section holds one python block"
    return blocks[0]


@pytest.mark.skipif(not HAS_DATA, reason="needs QPRIV_DATA_DIR (ETT)")
def test_the_readme_example_runs(capsys) -> None:
    exec(compile(_readme_python(), "README.md", "exec"), {})
    first, second = capsys.readouterr().out.strip().splitlines()
    mse, label = first.split(" ", 1)
    assert 0 < float(mse) < 0.3423  # below the public floor's test MSE (the README's table)
    assert label == "1 (global (eps, delta)-DP, delta=1e-06, accounting=rigorous)"
    assert second == "True (24, 7)"


def test_help_lists_every_entry_point() -> None:
    text = pydoc.render_doc(qpriv, renderer=pydoc.plaintext)
    docstring = qpriv.__doc__ or ""
    for name in qpriv.__all__:
        assert name in docstring, f"the module docstring does not list {name}"
        assert re.search(rf"\b{re.escape(name)}\b", text), f"help(qpriv) does not show {name}"
