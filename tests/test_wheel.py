"""The package as a user installs it (issue 41, item 5): the wheel, not the editable checkout,
runs the command line, holds its package data (the SIC-POVM fiducials, the report template) and
trains the public floor."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh interpreter environment whose qpriv is the built wheel: the wheel unpacked into
    its site-packages, the dependencies read from this environment's (a path, so the
    checkout's editable hook is not among them)."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "source"  # the build writes its own folders: keep them out of the checkout
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns(
        "__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", str(source), "-w", str(tmp / "dist")], check=True,
                   capture_output=True)
    (wheel,) = (tmp / "dist").glob("qpriv-*.whl")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp / "venv")],
                   check=True)
    site = Path(sysconfig.get_paths(vars={"base": str(tmp / "venv"),
                                           "platbase": str(tmp / "venv")})["purelib"])
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return tmp / "venv" / "bin" / "python"


def _run(python: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), *args], capture_output=True, text=True,
                          cwd=python.parents[2], env={**os.environ, "PYTHONPATH": ""})


def test_the_wheel_runs_the_command_line_from_itself(installed):
    where = _run(installed, "-c", "import qpriv, qpriv.cli; print(qpriv.cli.__file__)")
    assert where.returncode == 0, where.stderr
    assert str(installed.parents[1]) in where.stdout and str(ROOT / "src") not in where.stdout
    version = _run(installed, "-m", "qpriv", "--version")
    assert version.returncode == 0 and version.stdout.startswith("qpriv ")
    data = _run(installed, "-c", "from qpriv.quantum.povm import available_sic_dims, sic_povm;"
                "print(len(available_sic_dims()), sic_povm(16).shape);"
                "import qpriv.report.render as r; print(r.write_report_html.__name__)")
    assert data.returncode == 0, data.stderr
    assert data.stdout.split("\n")[1] == "write_report_html"


@pytest.mark.skipif(not os.environ.get("QPRIV_DATA_DIR"), reason="needs QPRIV_DATA_DIR (ETT)")
def test_the_wheel_trains_the_public_floor(installed):
    done = _run(installed, "-m", "qpriv", "train", "--method", "public", "--json")
    assert done.returncode == 0, done.stderr
    assert '"method": "public"' in done.stdout.splitlines()[-1]
