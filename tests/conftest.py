"""Fixtures shared by every test folder."""

import importlib.util
import io
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest
import torch

from qpriv.forecasting import rigorous
from qpriv.forecasting.datasets import DATA_DIR_ENV, cache_dir
from qpriv.forecasting.run import run_forecast

# The ETT tests read $QPRIV_DATA_DIR; where it is unset but the files sit in the user cache
# (where qpriv itself looks, or downloads them), the tests use those rather than skip.
if not os.environ.get(DATA_DIR_ENV) and (cache_dir() / "ETTh1.csv").is_file():
    os.environ[DATA_DIR_ENV] = str(cache_dir())


SERIAL_GROUPS = {"federation": lambda item: item.path.parent.name == "federated"
                 and item.get_closest_marker("slow") is not None,
                 "ray": lambda item: "local_ray" in getattr(item, "fixturenames", ())
                 or item.path.name.startswith("test_ray_")}
"""Tests that must not run beside one another when pytest-xdist spreads the suite over
workers (``make test``: ``-n 2 --dist loadgroup``), each group kept on one worker in turn: the
federations start a SuperLink and a SuperNode per site whose SecAgg+ stages run under timeouts
(two federations at once on two cores would be slower than they allow), and the Ray tests each
start a local cluster sized to the machine's two cores (through ``local_ray``, or their own)."""


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups from the marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``@pytest.mark.needs_ett``: skipped, and saying why, where the ETT files are not set;
    the tests of :data:`SERIAL_GROUPS` marked with their ``xdist_group``, the federations
    first: they are the longest group (about 8 of the suite's 17 minutes, mostly waiting on
    the stages' processes), so their worker starts on them while the other takes the rest."""
    for item in items:
        for group, member in SERIAL_GROUPS.items():
            if member(item):
                item.add_marker(pytest.mark.xdist_group(group))
    items.sort(key=lambda item: not SERIAL_GROUPS["federation"](item))  # stable: else in order
    if os.environ.get(DATA_DIR_ENV):
        return
    skip = pytest.mark.skip(reason=f"{DATA_DIR_ENV} (the ETT csv files) not set")
    for item in items:
        if item.get_closest_marker("needs_ett"):
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def single_thread():
    """Run each test on one torch thread (the samplers and per-example gradients issue many
    small ops; on a shared 2-core CPU, thread hand-offs dominate) and restore the caller's
    setting afterwards."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def nan_classifier_weights(monkeypatch):
    """Every model that ``train_classifier`` builds starts with one NaN weight, so its first
    epoch diverges."""
    import qpriv.classification.run as run

    build = run.build_model

    def poisoned(*args, **kwargs):
        net = build(*args, **kwargs)
        with torch.no_grad():
            next(net.parameters()).view(-1)[0] = float("nan")
        return net

    monkeypatch.setattr(run, "build_model", poisoned)


#: A tiny finished LDPT run (ETTh1, D = 16, 1 epoch on 64 windows; about 2 s), made by the
#: ``tiny_ldpt_run`` fixture for the attack and audit tests.
TINY_RUN = {"dataset": "ETTh1", "method": "ldpt", "epochs": 1, "horizon": 24, "seq_len": 64,
            "max_train_windows": 64, "max_eval_windows": 32, "progress": False, "threads": 1,
            "rigorous": False,
            "overrides": {"d_model": 16, "n_heads": 2, "d_ff": 32, "n_shots": 64}}


@pytest.fixture(scope="session")
def tiny_ldpt_run(tmp_path_factory):
    """``make(eps)``: the directory of a tiny finished LDPT run at per-pass budget eps, made
    once per session (read-only: copy it before changing files). Skips without the ETT data
    ($QPRIV_DATA_DIR)."""
    if not os.environ.get("QPRIV_DATA_DIR"):
        pytest.skip("QPRIV_DATA_DIR (the ETT csv files) not set")
    root = tmp_path_factory.mktemp("runs")
    made = {}

    def make(eps: float):
        if eps not in made:
            made[eps] = root / f"ldpt-eps{eps:g}"
            run_forecast(eps=eps, out_dir=made[eps], **TINY_RUN)
        return made[eps]

    return make


@pytest.fixture(scope="session")
def ldpt_run_dir(tiny_ldpt_run):
    """The tiny LDPT run at eps = 0.1 (see ``tiny_ldpt_run``)."""
    return tiny_ldpt_run(0.1)


class _Terminal(io.StringIO):
    """A stream that says it is a terminal, so tqdm draws its bars into it."""

    def isatty(self) -> bool:
        return True


@pytest.fixture
def terminal(monkeypatch):
    """``terminal()`` in a test replaces stderr by a terminal-like buffer and returns it
    (``.getvalue()``): progress bars are drawn where stderr is a terminal, and only lines where
    it is not (a log, capsys). (pytest sets stderr again between a fixture and its test.)"""

    def install() -> _Terminal:
        stream = _Terminal()
        monkeypatch.setattr(sys, "stderr", stream)
        return stream

    return install


@pytest.fixture
def private_cache(tmp_path, monkeypatch):
    """A fresh rigorous-accounting cache, so that a test computes the claims rather than reads
    a stale answer (on disk or in memory)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    rigorous._cached_summary.cache_clear()
    yield
    rigorous._cached_summary.cache_clear()


SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


@pytest.fixture(scope="session")
def load_script() -> Callable[[str], ModuleType]:
    """``load_script("carry_cells")``: the module of ``scripts/carry_cells.py`` (the scripts
    are no package, so they are loaded from their file)."""

    def load(name: str) -> ModuleType:
        spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # a dataclass of the script looks its module up there
        spec.loader.exec_module(module)
        return module

    return load
