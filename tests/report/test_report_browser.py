"""The reports of a tiny quickstart and a tiny frontier, opened in a real browser (the system's
chromium, driven by Playwright): every image loads, the tables hold the result files' numbers.

The browser is Debian's ``chromium`` (``.ci/run`` installs it with apt-get where it is missing)
or the binary named by ``$QPRIV_CHROMIUM``; Playwright's own browser download is not used.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest

from qpriv.cli import main
from qpriv.runs.layout import REPORT_FILE

sync_api = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed (pip install -e '.[dev]')")

CHROMIUM = os.environ.get("QPRIV_CHROMIUM") or shutil.which("chromium")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.environ.get("QPRIV_DATA_DIR"),
                       reason="QPRIV_DATA_DIR (the ETT csv files) not set"),
    pytest.mark.skipif(CHROMIUM is None,
                       reason="no chromium binary: install Debian's chromium (apt-get install "
                              "chromium; .ci/run does) or set QPRIV_CHROMIUM to one"),
]

QUICKSTART = ["quickstart", "--epochs", "1", "--max-train-windows", "16", "--max-eval-windows",
              "8", "--eval-passes", "2", "--frontier-budget", "tiny", "--quiet"]


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """A tiny quickstart (about a minute on two busy cores) and a frontier over its cells
    (every cell reused), each with the report path it printed."""
    out = tmp_path_factory.mktemp("quickstart")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main([*QUICKSTART, "--out", str(out)]) == 0
        assert main(["frontier", "--budget", "tiny", "--eps", "0.1", "1", "--out",
                     str(out / "frontier"), "--json"]) == 0
    lines = printed.getvalue().strip().splitlines()
    quickstart_line = next(line for line in lines if line.startswith("report: "))
    frontier = json.loads(lines[-1])
    return {"quickstart": (out, Path(quickstart_line.removeprefix("report: "))),
            "frontier": (Path(frontier["files"]["csv"]).parent,
                         Path(frontier["files"]["report"]))}


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                              args=["--no-sandbox"])
        yield chromium
        chromium.close()


def _open(browser, report: Path, screenshot: Path) -> tuple[list[int], dict[str, list]]:
    """Open ``report`` offline; return every image's natural width and the cells of every
    table, keyed by its header row, and save a screenshot."""
    page = browser.new_page(viewport={"width": 1100, "height": 1400})
    requests = []
    page.on("request", lambda request: requests.append(request.url))
    page.goto(report.as_uri())
    page.wait_for_load_state("load")
    widths = page.evaluate("Array.from(document.images).map(img => img.naturalWidth)")
    tables = page.evaluate("""Array.from(document.querySelectorAll('table')).map(table =>
        Array.from(table.rows).map(row => Array.from(row.cells).map(cell => [
            cell.innerText.trim(), getComputedStyle(cell).textAlign])))""")
    page.screenshot(path=str(screenshot))
    page.close()
    # nothing came from the network (the images are data URIs)
    assert all(url.startswith(("data:", "file:")) for url in requests), requests
    keyed = {" | ".join(cell[0] for cell in rows[0]): rows for rows in tables}
    return widths, keyed


def _rows(tables: dict[str, list], header: str) -> list[dict[str, tuple[str, str]]]:
    """The rows of the table whose header row has ``header``, as {column: (text, align)}."""
    for key, rows in tables.items():
        headers = key.split(" | ")
        if header in headers:
            return [dict(zip(headers, (tuple(cell) for cell in row), strict=True))
                    for row in rows[1:]]
    raise AssertionError(f"no table with a {header!r} column")


def test_the_quickstart_report_in_a_browser(outputs, browser, tmp_path):
    out, report = outputs["quickstart"]
    assert report == out / REPORT_FILE and report.is_file()
    shot = tmp_path / "quickstart.png"
    widths, tables = _open(browser, report, shot)
    # the frontier plot, and per run (three) the learning curves and the forecasts
    assert len(widths) == 7 and all(width > 0 for width in widths)
    assert shot.stat().st_size > 10_000
    compared = {row["run"][0]: row for row in _rows(tables, "dMSE % vs classical")}
    assert list(compared) == ["classical", "LDPT eps=1.0", "LDPT eps=0.1"]
    for label, folder in (("classical", "classical"), ("LDPT eps=1.0", "LDPT_eps1.0"),
                          ("LDPT eps=0.1", "LDPT_eps0.1")):
        result = json.loads((out / folder / "result.json").read_text())
        assert compared[label]["test MSE"] == (f"{result['mse_mean']:.4g}", "right")
        assert compared[label]["test MAE"] == (f"{result['mae_mean']:.4g}", "right")
        assert compared[label]["run"][1] in ("left", "start")
    assert compared["LDPT eps=0.1"]["eps per pass (paper)"][0] == "0.1"
    frontier = pd.read_csv(next((out / "frontier").glob("*/tiny/frontier.csv")))
    _check_frontier_table(tables, frontier)


def test_the_frontier_report_in_a_browser(outputs, browser, tmp_path):
    where, report = outputs["frontier"]
    assert report == where / REPORT_FILE and report.is_file()
    shot = tmp_path / "frontier.png"
    widths, tables = _open(browser, report, shot)
    assert len(widths) == 1 and widths[0] > 0
    assert shot.stat().st_size > 10_000
    _check_frontier_table(tables, pd.read_csv(where / "frontier.csv"))


def _check_frontier_table(tables: dict[str, list], frontier: pd.DataFrame) -> None:
    shown = _rows(tables, "MSE sd")
    assert len(shown) == len(frontier)
    for row, (_, expected) in zip(shown, frontier.iterrows(), strict=True):
        assert row["method"][0] == expected["method"]
        assert row["test MSE"] == (f"{expected['mse_mean']:.4g}", "right")
        sd = "—" if pd.isna(expected["mse_sd"]) else f"{expected['mse_sd']:.4g}"
        assert row["MSE sd"][0] == sd
        assert row["covers unit"][0] == ("yes" if expected["covers_unit"] else "no")
