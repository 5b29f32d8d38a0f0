"""``qpriv report DIR``: what a folder holds decides the page; the page's tables hold the result
files' numbers (4 significant digits), every claim with its kind, accounting and unit, the
images are embedded PNGs, and the forecasts drawn are the model's evaluated ones."""

from __future__ import annotations

import base64
import io
import json
import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

import qpriv
from qpriv.cli import main
from qpriv.errors import ArgumentError, InvalidInputError
from qpriv.experiments import frontier_plan, frontier_rows
from qpriv.experiments.report_sections import FRONTIER, QUICKSTART, REPRODUCE
from qpriv.forecasting import datasets
from qpriv.forecasting.artifacts import load_run
from qpriv.forecasting.config import ModelConfig
from qpriv.forecasting.model import LDPTForecaster
from qpriv.forecasting.records import ForecastResult
from qpriv.forecasting.run import run_forecast
from qpriv.privacy.samplers import VETTED, VETTED_SAMPLER_NOTE
from qpriv.report.contents import CLASSIFIER, RUN, detect
from qpriv.report.document import number_text
from qpriv.report.forecast_run import MAX_FORECAST_WINDOWS, forecast_windows, reference_block
from qpriv.report.plots import learning_curves_png
from qpriv.report.render import render_report, write_report_html
from qpriv.runs.layout import REPORT_FILE

FIXTURES = Path(__file__).parents[1] / "fixtures" / "pre_refactor"
ETTH1_CHANNELS = ["HUFL", "HULL", "MUFL", "MULL", "LUFL", "LULL", "OT"]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"



class Page(HTMLParser):
    """The tables (rows of (text, right-aligned) cells), images and text of a page."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.tables: list[list[list[tuple[str, bool]]]] = []
        self.images: list[str] = []
        self.text: list[str] = []
        self._cell: list[str] | None = None
        self._numeric = False
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell, self._numeric = [], found.get("class") == "num"
        elif tag == "img":
            self.images.append(found["src"] or "")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append(("".join(self._cell).strip(), self._numeric))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        self.text.append(data)

    def table_with(self, header: str) -> list[dict[str, tuple[str, bool]]]:
        """The rows of the first table with column ``header``, as {header: (text, numeric)}."""
        for rows in self.tables:
            headers = [text for text, _ in rows[0]]
            if header in headers:
                return [dict(zip(headers, row, strict=True)) for row in rows[1:]]
        raise AssertionError(f"no table with a {header!r} column")


def _write(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def _forecast_run(where: Path, fixture: str = "train_ldpt.json", *,
                  weights: bool = True) -> Path:
    """A run folder from a stored result: its settings, its result and (``weights``) untrained
    weights of its model in best.pt. Its data file is recorded where there is none."""
    result = json.loads((FIXTURES / fixture).read_text())
    _write(where / "config.json", {
        "method": result["method"], "dataset": "ETTh1",
        "source": str(where / "gone" / "ETTh1.csv"), "channels": ETTH1_CHANNELS,
        "seq_len": result["seq_len"], "horizon": result["horizon"],
        "max_train_windows": result["windows"]["train"],
        "max_eval_windows": result["windows"]["test"], "model": result["model"]})
    _write(where / "result.json", result)
    if weights:
        model = LDPTForecaster(ModelConfig(**result["model"]))
        torch.save({"model": model.state_dict(), "epoch": result["best_epoch"]},
                   where / "best.pt")
    return where


@pytest.fixture
def no_data(tmp_path, monkeypatch):
    """No ETT file where a run looks for it without a data_dir ($QPRIV_DATA_DIR, the cache)."""
    monkeypatch.delenv("QPRIV_DATA_DIR", raising=False)
    monkeypatch.setattr(datasets, "cache_dir", lambda: tmp_path / "no-cache")


def _classifier_run(where: Path) -> Path:
    result = json.loads((FIXTURES / "train_classifier_quantum.json").read_text())
    _write(where / "config.json", result["request"])
    _write(where / "result.json", result)
    return where


def _frontier_folder(where: Path) -> Path:
    rows = [
        {"method": "dp-linear", "eps": 1.0, "unit": "record", "role": frontier_plan.COVERS,
         "reading": "covers the record unit and the weights", "claim_kind":
         "global (eps, delta)-DP", "claim_accounting": "rigorous", "claim_unit": "record",
         "delta": 1e-6, "covers": "the weights", "covers_unit": True, "covers_weights": True,
         "mse_mean": 0.39673276, "mse_sd": 0.00166060, "mae_mean": 0.3961697,
         "mae_sd": 0.0012035, "n_seeds": 5, "failed_seeds": 0, "seeds": "2024 2025",
         "family": "linear", "seq_len": 336, "train_windows": 64, "test_windows": 32,
         "budget": "tiny"},
        {"method": "public", "eps": None, "unit": "record", "role": frontier_plan.FLOOR,
         "reading": "the floor: reads no training data", "claim_kind": None,
         "claim_accounting": None, "claim_unit": None, "delta": None,
         "covers": frontier_rows.FLOOR_COVERS, "covers_unit": True,
         "covers_weights": True, "mse_mean": 0.40831, "mse_sd": None, "mae_mean": 0.40101,
         "mae_sd": None, "n_seeds": 1, "failed_seeds": 0, "seeds": "2024", "family": "linear",
         "seq_len": 336, "train_windows": 64, "test_windows": 32, "budget": "tiny"},
    ]
    where.mkdir(parents=True)
    pd.DataFrame(rows, columns=list(frontier_rows.COLUMNS)).to_csv(where / "frontier.csv",
                                                                   index=False)
    (where / "frontier.md").write_text(
        "# Privacy-utility frontier: ETTh1, H = 24, record unit\n\n## Failed cells\n\n"
        "- `ETTh1-H24-dpsgd-eps1-s2024`: RuntimeError: boom\n")
    (where / "frontier.png").write_bytes(learning_curves_png(
        [{"epoch": 1, "loss": 1.0}], panels=[("loss", [("loss", "loss")])]))
    return where


def _reproduction(where: Path) -> Path:
    where.mkdir(parents=True)
    rows = [
        {"dataset": "ETTh1", "horizon": 24, "method": "ldpt", "eps": 0.1, "seeds": 1,
         "mse": 1.0420345, "paper_mse": 0.3581},
        {"dataset": "ETTh1", "horizon": 24, "method": "classical", "eps": None, "seeds": 1,
         "mse": 0.90190, "paper_mse": 0.3384},
    ]
    pd.DataFrame(rows).to_csv(where / "results.csv", index=False)
    _write(where / "report.json", {"id": "figure3", "budget": "tiny", "rows": rows,
                                   "columns": list(rows[0]), "failures": [
        {"cell": "ETTh1-H24-dpsgd-eps0.1-s2024", "error": "RuntimeError: boom"}]})
    return where


# -- what a folder is -----------------------------------------------------------------------


def test_detect_tells_each_output_apart(tmp_path):
    run = _forecast_run(tmp_path / "run")
    assert detect(run).kind == RUN
    assert detect(_classifier_run(tmp_path / "clf")).kind == CLASSIFIER
    fr = _frontier_folder(tmp_path / "fr" / "ETTh1-H24-record" / "tiny")
    assert detect(fr).kind == FRONTIER and detect(fr).folders == {FRONTIER: (fr,)}
    # the --out folder above a frontier or a reproduction finds them
    assert detect(tmp_path / "fr").folders == {FRONTIER: (fr,)}
    rp = _reproduction(tmp_path / "rp" / "figure3" / "tiny")
    assert detect(rp).kind == REPRODUCE
    assert detect(tmp_path / "rp").kind == REPRODUCE
    assert detect(tmp_path / "rp").folders == {REPRODUCE: (rp,)}


def test_a_quickstart_lists_its_runs_in_its_own_order_and_its_frontier(tmp_path):
    out = tmp_path / "qs"
    for name in ("LDPT_eps0.1", "classical", "LDPT_eps1.0"):
        _forecast_run(out / name)
    (out / "notes").mkdir()  # not a run
    fr = _frontier_folder(out / "frontier" / "ETTh1-H24-record" / "tiny")
    found = detect(out)
    assert found.kind == QUICKSTART
    assert [p.name for p in found.runs] == ["classical", "LDPT_eps1.0", "LDPT_eps0.1"]
    assert found.folders == {FRONTIER: (fr,)}


@pytest.mark.parametrize("make", [
    lambda tmp: tmp / "missing",
    lambda tmp: (tmp / "afile").write_text("x") and tmp / "afile",
    lambda tmp: tmp,
])
def test_anything_else_is_one_line_and_exit_2_and_writes_nothing(tmp_path, capsys, make):
    target = make(tmp_path)
    assert main(["report", str(target)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("qpriv: error:")
    assert str(target) in err[0]
    assert not list(tmp_path.rglob(REPORT_FILE))
    with pytest.raises(InvalidInputError, match=r"frontier\.csv"):
        detect(tmp_path)


def test_a_run_is_reported_without_the_experiments(tmp_path):
    """The report of a run (``qpriv train --out`` writes one) loads no experiments module; a
    folder of runs where none registered what one is shows as a plain folder of runs."""
    run = _forecast_run(tmp_path / "runs" / "b")
    _forecast_run(tmp_path / "runs" / "a")
    code = ("import sys; from qpriv.report.contents import detect; "
            "from qpriv.report.render import render_report; "
            f"page = render_report({str(run)!r}); found = detect({str(run.parent)!r}); "
            "print(found.kind, [p.name for p in found.runs], 'Run b' in page, "
            "[m for m in sys.modules if m.startswith('qpriv.experiments')])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(Path(qpriv.__file__).parents[1])})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "runs ['a', 'b'] True []"


def test_number_text_keeps_four_significant_digits():
    assert number_text(0.330412) == "0.3304"
    assert number_text(11.470667) == "11.47"
    assert number_text(1e-06) == "1e-06"
    assert number_text(12345.6) == "12346"
    assert number_text(np.float64(0.5)) == "0.5"
    assert number_text(7) == "7"
    assert [number_text(v) for v in (None, float("nan"), True, False)] == ["—", "—", "yes", "no"]


# -- what a page shows ----------------------------------------------------------------------


def test_a_run_report_shows_every_claim_and_the_scores(tmp_path, no_data):
    run = _forecast_run(tmp_path / "run")
    result = json.loads((run / "result.json").read_text())
    page = Page(render_report(run))
    claims = {row["claim"][0]: row for row in page.table_with("covers")}
    assert list(claims) == ["eps_per_pass", "eps_basic", "eps_advanced", "rigorous eps_token",
                            "rigorous eps_window", "rigorous eps_record"]
    assert claims["eps_per_pass"]["eps"] == ("0.1", True)
    assert claims["eps_advanced"]["eps"] == (f"{result['eps_advanced']['value']:.4g}", True)
    record = claims["rigorous eps_record"]
    assert record["eps"] == (f"{result['rigorous']['eps_record']['value']:.4g}", True)
    assert (record["delta"][0], record["kind"][0], record["accounting"][0], record["unit"][0]) \
        == ("1e-05", "composed", "rigorous", "record")
    assert claims["eps_per_pass"]["kind"] == ("local eps-QDP per pass", False)
    assert claims["eps_per_pass"]["unit"][0] == "token"
    # a run written before claims carried notes: the run's notes are printed once each
    html = render_report(run)
    for note in result["privacy_notes"]:
        assert html.count(note.replace("'", "&#39;")) == 1
    assert claims["eps_basic"]["notes"][0] == "—"
    scores = {row["score"][0]: row["value"] for row in page.table_with("score")}
    assert scores["test MSE (z-scored)"] == (f"{result['mse']:.4g}", True)
    assert scores["best epoch"] == ("2", True)
    assert scores["validation MSE (best epoch)"] == (f"{result['val_loss']:.4g}", True)
    settings = {row["setting"][0]: row["value"] for row in page.table_with("setting")}
    assert settings["method"] == ("ldpt", False)
    # the learning curves are an embedded PNG; the forecasts need the data: said so
    assert len(page.images) == 1 and page.images[0].startswith("data:image/png;base64,")
    assert base64.b64decode(page.images[0].split(",", 1)[1]).startswith(PNG_MAGIC)
    assert "Forecasts not drawn: cannot load the data of run" in html
    # nothing is loaded from the network (a note may quote where the data is downloaded from)
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)


def test_a_classifier_report_shows_its_claim_and_curves(tmp_path):
    run = _classifier_run(tmp_path / "clf")
    result = json.loads((run / "result.json").read_text())
    page = Page(render_report(run))
    (claim,) = page.table_with("covers")
    assert claim["eps"] == (f"{result['eps']['value']:.4g}", True)
    assert claim["accounting"][0] == "rigorous"
    assert claim["delta"][0] == "1e-05"
    scores = {row["score"][0]: row["value"][0] for row in page.table_with("score")}
    assert scores["accuracy (test)"] == f"{result['accuracy']:.4g}"
    assert len(page.images) == 1
    # a saved classifier (DPSGDClassifier.save: its result and weights, no config.json) is
    # the same page
    saved = tmp_path / "saved"
    _write(saved / "result.json", result)
    (saved / "classifier.pt").write_bytes(b"weights")
    assert detect(saved).kind == CLASSIFIER
    assert Page(render_report(saved)).table_with("covers") == [claim]


def test_a_frontier_report_holds_the_csv_numbers(tmp_path):
    where = _frontier_folder(tmp_path / "ETTh1-H24-record" / "tiny")
    page = Page(render_report(where))
    rows = {row["method"][0]: row for row in page.table_with("test MSE")}
    assert rows["dp-linear"]["test MSE"] == ("0.3967", True)
    assert rows["dp-linear"]["MSE sd"] == ("0.001661", True)
    assert rows["dp-linear"]["covers unit"][0] == "yes"
    assert rows["dp-linear"]["delta"] == ("1e-06", True)
    assert rows["public"]["eps"] == ("—", True)
    assert rows["public"]["test MSE"] == ("0.4083", True)
    assert rows["public"]["reading"] == ("the floor: reads no training data", False)
    text = "".join(page.text)
    assert "Privacy-utility frontier: ETTh1, H = 24, record unit (budget tiny)" in text
    assert "ETTh1-H24-dpsgd-eps1-s2024: RuntimeError: boom" in text  # the failed cell
    assert "linear: L = 336, 64 training windows, 32 test windows" in text
    assert len(page.images) == 1
    png = base64.b64decode(page.images[0].split(",", 1)[1])
    assert png == (where / "frontier.png").read_bytes()


def test_a_reproduction_report_holds_ours_beside_the_papers(tmp_path):
    where = _reproduction(tmp_path / "figure3" / "tiny")
    page = Page(render_report(where))
    rows = {row["method"][0]: row for row in page.table_with("paper_mse")}
    assert rows["ldpt"]["mse"] == ("1.042", True)
    assert rows["ldpt"]["paper_mse"] == ("0.3581", True)
    assert rows["classical"]["eps"] == ("—", True)
    text = "".join(page.text)
    assert "figure3: MSE against eps" in text and "(budget tiny)" in text
    assert "What each epsilon column is" in text
    assert "ETTh1-H24-dpsgd-eps0.1-s2024: RuntimeError: boom" in text


# -- real runs -------------------------------------------------------------------------------


@pytest.mark.needs_ett
def test_the_forecasts_drawn_are_the_ones_the_run_was_tested_on(ldpt_run_dir):
    """With every test window (one evaluation batch), the drawn forecasts give the run's own
    test MSE: the same model, weights, windows and evaluation noise."""
    run = load_run(ldpt_run_dir)
    drawn = forecast_windows(run, count=10_000)
    assert len(drawn.index) == run.result.windows["test"]
    mse = float(np.mean((drawn.forecast - drawn.actual) ** 2))
    assert mse == pytest.approx(run.result.mse, rel=1e-5)
    few = forecast_windows(run, count=3)
    assert list(few.index) == [0, 16, 31] and few.forecast.shape == (3, 24, 7)


@pytest.mark.needs_ett
def test_a_linear_run_draws_the_forecasts_it_was_tested_on(tmp_path):
    """A dp-linear run (linear.npz, no epochs): with every test window the drawn forecasts give
    its own test MSE, and its page carries the forecast figure but no learning curves."""
    out = tmp_path / "linear"
    result = run_forecast(method="dp-linear", eps=1.0, unit="record", seq_len=168, horizon=24,
                          max_train_windows=256, max_eval_windows=48, out_dir=out,
                          progress=False)
    run = load_run(out)
    drawn = forecast_windows(run, count=10_000)
    assert len(drawn.index) == result.windows["test"] == 48
    mse = float(np.mean((drawn.forecast - drawn.actual) ** 2))
    assert mse == pytest.approx(result.mse, rel=1e-9)
    page = Page(render_report(out))
    assert len(page.images) == 1 and "3 test windows" in "".join(page.text)


@pytest.mark.needs_ett
def test_a_secret_seed_linear_runs_page_names_its_noise_sampler(tmp_path):
    """The sampler a release's noise came from is on its page: in the claim's derivation and
    as a numbered note."""
    out = tmp_path / "secret"
    run_forecast(method="dp-linear", eps=1.0, unit="record", seq_len=168, horizon=24,
                 max_train_windows=256, max_eval_windows=48, out_dir=out, seed=None,
                 progress=False)
    page = Page(render_report(out))
    assert f"noise_sampler = {VETTED}" in page.table_with("covers")[0]["derivation"][0]
    assert sum(text.count(VETTED_SAMPLER_NOTE) for text in page.text) == 1


@pytest.mark.needs_ett
def test_a_real_run_report_draws_curves_and_forecasts(ldpt_run_dir, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(ldpt_run_dir, run)
    assert main(["report", str(run), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert payload == {"report": str(run / REPORT_FILE), "kind": RUN}
    html = (run / REPORT_FILE).read_text()
    page = Page(html)
    # the claims cite their notes by number; each note is printed once
    result = json.loads((run / "result.json").read_text())
    claims = {row["claim"][0]: row for row in page.table_with("covers")}
    notes = result["eps_per_pass"]["notes"]
    assert claims["eps_per_pass"]["notes"][0] == ", ".join(str(i + 1) for i in range(len(notes)))
    for note in notes:
        assert html.count(note.replace("'", "&#39;")) == 1
    assert len(page.images) == 2  # learning curves, forecasts
    assert "3 test windows" in "".join(page.text)
    assert not list(run.glob("*.tmp*"))


@pytest.mark.needs_ett
def test_data_that_cannot_be_found_is_said_on_the_page(ldpt_run_dir, tmp_path, monkeypatch):
    run = tmp_path / "run"
    shutil.copytree(ldpt_run_dir, run)
    config = json.loads((run / "config.json").read_text())
    _write(run / "config.json", {**config, "source": str(tmp_path / "gone" / "ETTh1.csv")})
    monkeypatch.delenv("QPRIV_DATA_DIR")
    monkeypatch.setattr(datasets, "cache_dir", lambda: tmp_path / "no-cache")
    page = Page(write_report_html(run).read_text())
    text = " ".join(page.text)
    assert "Forecasts not drawn: cannot load the data of run" in text
    assert len(page.images) == 1  # the learning curves still are


# -- bad input: one line, exit 2, nothing written -------------------------------------------------


def _refused(target: Path, capsys, *needles: str, argv: tuple[str, ...] = ()) -> str:
    """``qpriv report target`` exits 2 with one line naming ``needles``, no traceback, and
    leaves no report.html (nor a temporary one) behind."""
    assert main(["report", str(target), *argv]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("qpriv: error:"), captured.err
    for needle in needles:
        assert needle in lines[0]
    assert "Traceback" not in captured.err and captured.out == ""
    root = target if target.is_dir() else target.parent
    assert not list(root.rglob(REPORT_FILE)) and not list(root.rglob("*.tmp"))
    return lines[0]


def _cut(text: str) -> str:
    """``text`` cut in the middle of its last row (as a copy or a write interrupted)."""
    return text[:text.rstrip("\n").rindex("\n") + 12]


def _edit_cell(text: str, *, column: str, value: str) -> str:
    """``text`` (a CSV) with ``column`` of its first row set to ``value``."""
    frame = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)
    frame.loc[0, column] = value
    return frame.to_csv(index=False)


@pytest.mark.parametrize(("damage", "needle"), [
    (lambda text: "a,b\n1,2\n", "it lacks the column method, eps, unit and 19 more"),
    (_cut, "its last line is cut short"),
    (lambda text: text.replace(",tiny\n", "\n", 1), "row 1 has 24 fields, the header 25"),
    (lambda text: _edit_cell(text, column="mse_mean", value="0.39x"),
     "row 1's mse_mean is '0.39x', not a number"),
    (lambda text: _edit_cell(text, column="method", value=""), "row 1 has no method"),
    (lambda text: _edit_cell(text, column="role", value="best"), "role 'best' is none of"),
    (lambda text: "", "the file is empty"),
    (lambda text: text.splitlines(keepends=True)[0], "it has a header and no rows"),
])
def test_a_damaged_frontier_table_is_refused(tmp_path, capsys, damage, needle):
    """A frontier.csv that is not whole, or not qpriv frontier's, is never drawn as a wrong or
    empty frontier (nor a KeyError): one line names the file and how to write it again."""
    where = _frontier_folder(tmp_path / "ETTh1-H24-record" / "tiny")
    path = where / "frontier.csv"
    path.write_text(damage(path.read_text()))
    line = _refused(where, capsys, str(path), "not written by qpriv frontier", needle,
                    "run qpriv frontier again with the same --out")
    assert "frontier.md" not in line


@pytest.mark.parametrize(("damage", "needle"), [
    (_cut, "its last line is cut short"),
    # a whole row lost: only report.json, written with it, tells
    (lambda text: text[:text.rstrip("\n").rindex("\n") + 1], "1 rows where report.json records 2"),
    (lambda text: "a,b\n1,2\n", "its columns are not those report.json records"),
    (lambda text: _edit_cell(text, column="paper_mse", value="n/a"),
     "row 1's paper_mse is 'n/a', not a number"),
    (lambda text: _edit_cell(text, column="mse", value="1.04e"),
     "row 1's mse is '1.04e', not a number"),
])
def test_a_damaged_reproduction_table_is_refused(tmp_path, capsys, damage, needle):
    where = _reproduction(tmp_path / "figure3" / "tiny")
    path = where / "results.csv"
    path.write_text(damage(path.read_text()))
    _refused(where, capsys, str(path), "not written by qpriv reproduce", needle)
    # the --out folder above it too
    _refused(tmp_path, capsys, str(path), needle)


def test_a_reproduction_whose_every_cell_failed_says_so(tmp_path):
    """Every cell failed: pandas writes a table without rows or columns (one newline)."""
    where = tmp_path / "figure3" / "tiny"
    where.mkdir(parents=True)
    (where / "results.csv").write_text(pd.DataFrame([]).to_csv(index=False))
    _write(where / "report.json", {"id": "figure3", "budget": "tiny", "rows": [], "columns": [],
                                   "failures": [{"cell": "c", "error": "RuntimeError: boom"}]})
    text = "".join(Page(render_report(where)).text)
    assert "No rows: every cell failed." in text and "c: RuntimeError: boom" in text


@pytest.mark.parametrize(("damage", "needle"), [
    (lambda run: (run / "best.pt").unlink(),
     "has no best.pt (the best-validation weights); the run directory is incomplete. Re-run "
     "the training into a fresh directory"),
    (lambda run: (run / "best.pt").write_bytes(b"not a checkpoint"),
     "best.pt: the file is damaged"),
])
def test_a_run_without_its_weights_is_refused(tmp_path, capsys, no_data, damage, needle):
    """A run directory missing its weights, or with damaged ones, is incomplete: refused as
    every command that reads a run refuses it, not a page whose forecasts are "not drawn"."""
    run = _forecast_run(tmp_path / "run")
    damage(run)
    _refused(run, capsys, str(run), needle)
    # nor does a quickstart holding it get a page
    quickstart = tmp_path / "qs"
    shutil.copytree(run, quickstart / "classical")
    _refused(quickstart, capsys, needle)


def test_a_run_that_diverged_before_it_had_a_model_is_reported(tmp_path):
    """Training that diverged before any finite validation loss leaves no best.pt: the run is
    complete, and its page says why there are no forecasts."""
    run = _forecast_run(tmp_path / "run", weights=False)
    result = json.loads((run / "result.json").read_text())
    _write(run / "result.json", {**result, "diverged_epoch": 1, "best_epoch": 0, "mse": None,
                                 "mae": None})
    text = " ".join(Page(write_report_html(run).read_text()).text)
    assert "Forecasts not drawn: training diverged at epoch 1" in text


def test_more_windows_than_the_figure_holds_are_refused(tmp_path, capsys, no_data):
    run = _forecast_run(tmp_path / "run")
    _refused(run, capsys, f"--windows = 100000000 is outside the valid range [1, "
                          f"{MAX_FORECAST_WINDOWS}]", argv=("--windows", "100000000"))
    with pytest.raises(ArgumentError, match=r"windows = 13 is outside"):
        render_report(run, windows=MAX_FORECAST_WINDOWS + 1)
    assert main(["report", str(run), "--windows", str(MAX_FORECAST_WINDOWS)]) == 0


@pytest.fixture(scope="module")
def ridge_run(tmp_path_factory) -> Path:
    """A ridge run (closed form, seconds) whose test split holds 4 windows."""
    if not os.environ.get("QPRIV_DATA_DIR"):
        pytest.skip("QPRIV_DATA_DIR (the ETT csv files) not set")
    out = tmp_path_factory.mktemp("ridge") / "run"
    run_forecast(method="ridge", seq_len=168, horizon=24, max_train_windows=64,
                 max_eval_windows=4, out_dir=out, progress=False)
    return out


@pytest.mark.parametrize(("damage", "needle"), [
    (lambda run: (run / "linear.npz").unlink(),
     "has no linear.npz (the fitted kernel); the run directory is incomplete"),
    (lambda run: (run / "linear.npz").write_bytes(b"not a kernel"), "it is damaged"),
])
def test_a_linear_run_without_its_kernel_is_refused(ridge_run, tmp_path, capsys, damage,
                                                   needle):
    run = tmp_path / "run"
    shutil.copytree(ridge_run, run)
    damage(run)
    _refused(run, capsys, str(run / "linear.npz") if "damaged" in needle else str(run), needle)


@pytest.mark.parametrize("make", [
    lambda tmp: tmp / "empty",
    lambda tmp: tmp / "empty" / "notes.txt",
])
def test_a_data_dir_without_the_runs_data_is_refused(ridge_run, tmp_path, capsys, make):
    """A --data-dir that does not hold the run's data is refused, as by every command that
    reads a run's data (not a page whose forecasts are "not drawn")."""
    run = tmp_path / "run"
    shutil.copytree(ridge_run, run)
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("date,x\n")
    data = make(tmp_path)
    _refused(run, capsys, f"cannot load the data of run {run}", str(data),
             argv=("--data-dir", str(data)))


def test_more_windows_than_the_split_holds_draws_them_all_and_says_so(ridge_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(ridge_run, run)
    assert main(["report", str(run), "--windows", "6"]) == 0
    page = Page((run / REPORT_FILE).read_text())
    assert len(page.images) == 1
    assert ("for 4 test windows (all the run's test split holds: 6 were asked)"
            in "".join(page.text))


def test_a_run_report_shows_the_floor_and_the_reference_beside_its_score(ridge_run, tmp_path):
    """Issue 42, item 5: the page read a score with nothing to compare it with. The floor and
    the reference are fitted on the run's own data: a ridge run is its own reference (capture
    100 %), a public run its own floor (capture 0 %)."""
    public_run = tmp_path / "public"
    run_forecast(method="public", seq_len=168, horizon=24, max_train_windows=64,
                 max_eval_windows=4, out_dir=public_run, progress=False)
    for run_dir, own, capture in ((ridge_run, "ridge: non-private reference, same features",
                                   "100%"),
                                  (public_run, "public floor: reads no training data", "0%")):
        result = ForecastResult.from_json(json.loads((run_dir / "result.json").read_text()))
        block = reference_block(run_dir, result=result, data_dir=None)
        rows = {row[0].text: row[1].text for row in block.rows}
        assert rows[own] == number_text(result.mse)
        assert rows["capture = (floor - run) / (floor - ridge)"] == capture
    # a closed-form fit picks no epoch: its validation score is not labelled with one
    scores = {row["score"][0]: row["value"] for row in Page(render_report(ridge_run))
              .table_with("score")}
    assert "validation MSE (best epoch)" not in scores and "best epoch" not in scores
    assert scores["validation MSE"][0] == number_text(
        json.loads((ridge_run / "result.json").read_text())["val_loss"])


def test_forecasts_are_drawn_in_the_datas_own_units(ridge_run):
    """Issue 42, item 5: the plot was z-scored while f.csv and train's errors are in the data's
    units: the actual values drawn are the file's own rows."""
    run = load_run(ridge_run)
    drawn = forecast_windows(run, count=2)
    _, actual, _ = drawn.in_data_units()
    raw = pd.read_csv(run.data().source)[list(run.request.channels)].to_numpy()
    for window, row in enumerate(drawn.file_rows):
        expected = raw[row:row + actual.shape[1]]
        assert np.allclose(actual[window], expected, rtol=1e-5, atol=1e-4)
