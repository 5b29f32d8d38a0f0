"""The documentation: a short README that points into a site that builds strictly, every page
of the site in its navigation, and every link of the README to a page that exists (issue 41)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _nav_pages() -> list[str]:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    return [next(iter(entry.values())) for entry in config["nav"]]


def test_the_readme_is_short_and_every_link_into_the_docs_resolves():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) < 150
    links = re.findall(r"\]\((docs/[^)#]+)", readme)
    assert {"docs/getting-started.md", "docs/api.md"} <= set(links)
    for link in links:
        assert (ROOT / link).is_file(), link


def test_every_page_is_in_the_navigation():
    pages = {path.name for path in DOCS.glob("*.md")}
    assert pages == set(_nav_pages())


def test_the_site_builds_strictly(tmp_path):
    pytest.importorskip("mkdocstrings", reason="the docs extra: pip install -e '.[dev]'")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    api = (tmp_path / "api" / "index.html").read_text()
    for name in ("DPLinearForecaster", "PublicForecaster", "CsvFormat", "PrivacyClaim",
                 "GLOBAL_DELTA"):
        assert name in api, name  # rendered from the docstrings
    assert (tmp_path / "getting-started" / "index.html").is_file()
