"""One self-contained ``report.html`` for a run, a quickstart, a frontier or a reproduction.

:func:`write_report_html` reads what a command left in a directory and writes one HTML page
beside it: the settings, every privacy claim (value, delta, kind, accounting, unit, what it
covers and its notes), the learning curves, forecasts against the actual values for a few test
windows per channel, the comparison table and the frontier plot where there is one. Images are
PNGs (matplotlib) embedded as base64 data URIs and the styles are inline, so the page opens
offline and can be mailed as one file. What a directory holds decides what the page shows
(:func:`detect`):

* a forecasting run (``qpriv train --out``: ``config.json`` and ``result.json``);
* a classifier run (``qpriv train-classifier --out``: its ``result.json`` names a ``task``);
* a quickstart (``qpriv quickstart --out``: one folder per run and ``frontier/``), or any folder
  of finished runs;
* a frontier (``qpriv frontier``: ``frontier.csv``, ``frontier.md``, ``frontier.png``), or the
  ``--out`` folder above it;
* a reproduction (``qpriv reproduce``: ``results.csv``, ``table.md``, ``figure.png``), or the
  ``--out`` folder above it.

Example::

    path = write_report_html("runs/quickstart")   # runs/quickstart/report.html
"""

from __future__ import annotations

import base64
import csv
import io
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
import numpy as np
import pandas as pd
import torch
from markupsafe import Markup, escape

from qpriv.errors import ArgumentError, InvalidInputError, require_positive_int
from qpriv.experiments.frontier import (
    FRONTIER_CSV,
    FRONTIER_MD,
    FRONTIER_PNG,
    ROLES,
    FrontierReport,
    explain,
)
from qpriv.experiments.paper_numbers import PAPER_TABLES
from qpriv.experiments.quickstart import QUICKSTART_RUNS, quickstart_rows, run_dir_name
from qpriv.experiments.registry import EXPERIMENTS
from qpriv.experiments.runner import (
    EPS_COLUMNS,
    FIGURE_PNG,
    REPORT_JSON,
    RESULTS_CSV,
    epsilon_legend,
)
from qpriv.forecasting.artifacts import LinearRun, LoadedRun, load_run
from qpriv.forecasting.linear import floor_and_reference
from qpriv.forecasting.records import ForecastResult
from qpriv.privacy.claims import PrivacyClaim
from qpriv.runs.files import atomic_write_text, read_json_object
from qpriv.runs.layout import (
    BEST_FILE,
    CONFIG_FILE,
    LINEAR_MODEL_FILE,
    REPORT_FILE,
    RESULT_FILE,
)
from qpriv.training.evaluation import seeded_noise
from qpriv.training.seeding import derive_seed

FORECAST_WINDOWS = 3
"""Test windows drawn per channel in the forecast-against-actual plots."""
MAX_FORECAST_WINDOWS = 12
"""The most test windows the forecast figure draws: each is a column of panels, and a wider
figure takes minutes to lay out and cannot be read on a page."""

RUN = "run"
CLASSIFIER = "classifier"
QUICKSTART = "quickstart"
FRONTIER = "frontier"
REPRODUCE = "reproduce"
KINDS = (RUN, CLASSIFIER, QUICKSTART, FRONTIER, REPRODUCE)
"""What a report can be about (see the module docstring)."""

_FIX = "re-run the command that wrote it"

SECRET_SEED_TEXT = "secret (drawn from the operating system, not recorded)"
"""How a report shows the seed of a run trained with a secret one."""


# -- what a directory holds -------------------------------------------------------------------


@dataclass(frozen=True)
class Contents:
    """What :func:`detect` found in a directory: its kind and the folders to report on."""

    kind: str
    directory: Path
    runs: tuple[Path, ...] = ()
    frontiers: tuple[Path, ...] = ()
    reproductions: tuple[Path, ...] = ()


def _is_run(path: Path) -> bool:
    """A run folder, or a released model (its result and weights, no settings)."""
    return (path / RESULT_FILE).is_file() and any(
        (path / name).is_file() for name in (CONFIG_FILE, LINEAR_MODEL_FILE, BEST_FILE))


def _is_classifier_run(path: Path) -> bool:
    result = read_json_object(path / RESULT_FILE, fix=_FIX)
    return "task" in result and not isinstance(result.get("model"), Mapping)


def _nested(directory: Path, name: str) -> tuple[Path, ...]:
    """Folders ``directory/<name of a grid>/<budget>`` holding ``name`` (an ``--out`` root)."""
    return tuple(sorted(path.parent for path in directory.glob(f"*/*/{name}")
                        if path.is_file()))


def detect(directory: str | Path) -> Contents:
    """What ``directory`` holds, and so what its report shows (see the module docstring).

    Raises:
        InvalidInputError: it does not exist, is not a directory, or holds none of them.
    """
    path = Path(directory).expanduser()
    if not path.is_dir():
        what = "does not exist" if not path.exists() else "is not a directory"
        raise InvalidInputError(f"report directory {path} {what}; give the folder a qpriv "
                                "command wrote (e.g. qpriv train --out DIR)")
    if _is_run(path):
        return Contents(CLASSIFIER if _is_classifier_run(path) else RUN, path, runs=(path,))
    if (path / FRONTIER_CSV).is_file():
        return Contents(FRONTIER, path, frontiers=(path,))
    if (path / RESULTS_CSV).is_file():
        return Contents(REPRODUCE, path, reproductions=(path,))
    runs = tuple(sorted((child for child in path.iterdir() if child.is_dir() and _is_run(child)
                         and not _is_classifier_run(child)), key=_quickstart_order))
    frontiers = _nested(path / "frontier", FRONTIER_CSV) + _nested(path, FRONTIER_CSV)
    reproductions = _nested(path, RESULTS_CSV)
    if runs:
        return Contents(QUICKSTART, path, runs=runs, frontiers=frontiers,
                        reproductions=reproductions)
    if frontiers or reproductions:
        return Contents(FRONTIER if frontiers else REPRODUCE, path, frontiers=frontiers,
                        reproductions=reproductions)
    raise InvalidInputError(
        f"{path} holds nothing to report on: expected a run ({CONFIG_FILE} and {RESULT_FILE}, "
        "from qpriv train --out or train-classifier --out), a quickstart's --out (run folders "
        f"and frontier/), a frontier ({FRONTIER_CSV}) or a reproduction ({RESULTS_CSV}, "
        "table.md); give one of those folders")


_QUICKSTART_LABELS = {run_dir_name(run): run.label for run in QUICKSTART_RUNS}


def _quickstart_order(path: Path) -> tuple[int, str]:
    """The quickstart's runs in its own order, any other run after them by name."""
    names = list(_QUICKSTART_LABELS)
    return (names.index(path.name) if path.name in names else len(names), path.name)


# -- the page's pieces --------------------------------------------------------------------------


def number_text(value: Any) -> str:
    """A table cell's text: floats to 4 significant digits (``f"{v:.4g}"``; whole numbers from
    10^4 up without exponent), integers as they are, booleans as yes/no, missing as a dash."""
    value = value.item() if isinstance(value, np.generic) else value
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and 1e4 <= abs(value) < 1e15:
        return f"{value:.0f}"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.number)) and not isinstance(value, (bool, np.bool_))


@dataclass(frozen=True)
class Cell:
    """One table cell: its text, and whether it is a number (right-aligned)."""

    text: str
    numeric: bool


@dataclass(frozen=True)
class Table:
    """A table: ``kind`` tells the template how to draw the block."""

    caption: str
    headers: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    kind: str = "table"


@dataclass(frozen=True)
class Figure:
    """A PNG embedded as a data URI."""

    caption: str
    src: str
    kind: str = "figure"


@dataclass(frozen=True)
class Text:
    """A paragraph (inline `code` spans allowed)."""

    text: str
    kind: str = "text"


@dataclass(frozen=True)
class Bullets:
    """A list of short lines (inline `code` spans allowed); ``ordered`` numbers them."""

    items: tuple[str, ...]
    ordered: bool = False
    kind: str = "bullets"


Block = Table | Figure | Text | Bullets


@dataclass
class Section:
    """A headed part of the page: blocks, then sub-sections."""

    title: str
    blocks: list[Block] = field(default_factory=list)
    children: list[Section] = field(default_factory=list)
    anchor: str = ""


def table(caption: str, headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> Table:
    """A :class:`Table` of raw values: numbers formatted by :func:`number_text` and
    right-aligned, text left-aligned."""
    return Table(caption=caption, headers=tuple(headers), rows=tuple(
        tuple(Cell(number_text(value), _is_number(value) or value is None) for value in row)
        for row in rows))


def key_values(caption: str, pairs: Sequence[tuple[str, Any]], *,
               headers: tuple[str, str] = ("setting", "value")) -> Table:
    """A two-column table of ``(name, value)`` pairs; pairs without a value are left out."""
    return table(caption, headers, [[name, value] for name, value in pairs if value is not None])


def png_figure(caption: str, png: bytes) -> Figure:
    """A figure from PNG bytes, embedded as a base64 data URI."""
    return Figure(caption=caption,
                  src="data:image/png;base64," + base64.b64encode(png).decode("ascii"))


def _claim_value(entry: Any) -> Any:
    """The ``value`` of a stored claim (a number stays a number)."""
    return entry.get("value") if isinstance(entry, Mapping) else entry


def claims_blocks(named: Sequence[tuple[str, PrivacyClaim]], *,
                  run_notes: Sequence[str] = ()) -> list[Block]:
    """Every claim as one row (eps, delta, kind, accounting, unit, covers, derivation, notes),
    and the notes, numbered once below the table (the rows cite them by number); the run's own
    privacy notes that no claim carries (runs written before claims had notes) follow them."""
    notes: list[str] = []
    if not named:
        extra = [Bullets(tuple(run_notes))] if run_notes else []
        return [Text("This run claims no privacy: no noise calibrated to a guarantee."), *extra]
    rows = []
    for name, claim in named:
        cited = []
        for note in claim.notes:
            if note not in notes:
                notes.append(note)
            cited.append(str(notes.index(note) + 1))
        details = "; ".join(f"{key} = {number_text(value)}"
                            for key, value in claim.details.items()
                            if isinstance(value, (int, float, str)) and len(str(value)) <= 40)
        rows.append([name, claim.value, claim.delta, claim.kind.value, claim.accounting.value,
                     claim.unit.value, claim.covers, details or "—", ", ".join(cited) or "—"])
    blocks: list[Block] = [table(
        "", ["claim", "eps", "delta", "kind", "accounting", "unit", "covers",
                           "derivation", "notes"], rows)]
    notes += [note for note in dict.fromkeys(run_notes) if note not in notes]
    if notes:
        blocks.append(Bullets(tuple(notes), ordered=True))
    return blocks


# -- plots ----------------------------------------------------------------------------------------


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _png(fig: Any) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    _pyplot().close(fig)
    return buffer.getvalue()


def learning_curves_png(history: Sequence[Mapping[str, Any]], *,
                        panels: Sequence[tuple[str, Sequence[tuple[str, str]]]],
                        best_epoch: int | None = None) -> bytes:
    """One panel per ``(y label, [(history key, legend), ...])`` against the epoch; the best
    epoch (if given) marked on every panel."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 3.0), dpi=90,
                             squeeze=False)
    epochs = [int(record["epoch"]) for record in history]
    for ax, (ylabel, series) in zip(axes[0], panels, strict=True):
        for key, label in series:
            values = [record.get(key) for record in history]
            values = [math.nan if v is None else float(v) for v in values]
            ax.plot(epochs, values, "o-", ms=3, label=label)
        if best_epoch:
            ax.axvline(best_epoch, color="grey", ls="--", lw=1,
                       label=f"best epoch ({best_epoch})")
        ax.xaxis.set_major_locator(plt.MaxNLocator(integer=True))
        ax.set_xlabel("epoch")
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    return _png(fig)


def forecasts_png(*, lookback: np.ndarray, actual: np.ndarray, forecast: np.ndarray,
                  channels: Sequence[str], titles: Sequence[str]) -> bytes:
    """Rows: channels; columns: windows. Each panel: the look-back's tail, the actual values
    and the forecast after it. Arrays are ``(windows, steps, channels)``."""
    plt = _pyplot()
    n_windows, n_channels = lookback.shape[0], lookback.shape[2]
    horizon = actual.shape[1]
    tail = min(lookback.shape[1], max(2 * horizon, 48))
    fig, axes = plt.subplots(n_channels, n_windows, figsize=(3.6 * n_windows,
                                                               1.6 * n_channels + 0.7),
                             dpi=90, squeeze=False, sharex=True)
    past = np.arange(-tail, 0)
    ahead = np.arange(0, horizon)
    for w in range(n_windows):
        axes[0][w].set_title(titles[w], fontsize=9)
        for c in range(n_channels):
            ax = axes[c][w]
            ax.plot(past, lookback[w, -tail:, c], color="0.55", lw=1, label="look-back")
            ax.plot(ahead, actual[w, :, c], color="black", lw=1.2, label="actual")
            ax.plot(ahead, forecast[w, :, c], color="C3", lw=1.2, label="forecast")
            ax.axvline(-0.5, color="0.8", lw=0.8)
            ax.tick_params(labelsize=8)
            if w == 0:
                ax.set_ylabel(channels[c], fontsize=9)
    axes[-1][0].set_xlabel("step (0 = first forecast step)", fontsize=9)
    axes[0][-1].legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return _png(fig)


# -- a forecasting run --------------------------------------------------------------------------


def _source_name(source: Any) -> str | None:
    return Path(str(source)).name if source else None


def forecast_run_section(run_dir: Path, *, title: str, data_dir: str | Path | None,
                         windows: int = FORECAST_WINDOWS) -> Section:
    """Settings, scores, claims, learning curves and forecasts of one forecasting run."""
    # a released model has no settings file: its result says what the report shows
    request = (read_json_object(run_dir / CONFIG_FILE, fix=_FIX)
               if (run_dir / CONFIG_FILE).is_file() else {})
    raw = read_json_object(run_dir / RESULT_FILE, fix=_FIX)
    try:
        result = ForecastResult.from_json(raw)
    except InvalidInputError as error:  # the message says result.json: name which one
        raise InvalidInputError(f"{run_dir}: {error}; {_FIX}") from error
    train = raw.get("train") or {}
    section = Section(title=title)
    settings = [
        ("method", result.method), ("dataset", result.dataset or request.get("dataset")),
        ("data file", _source_name(request.get("source"))),
        ("channels", ", ".join(request.get("channels") or ()) or None),
        ("look-back L", raw.get("seq_len", request.get("seq_len"))),
        ("horizon H", result.horizon),
        ("seed", SECRET_SEED_TEXT if "seed" in raw and raw["seed"] is None
         else raw.get("seed", request.get("seed"))),
        ("epochs", result.epochs), ("batch", train.get("batch_size")),
        ("training windows", result.windows.get("train")),
        ("validation windows", result.windows.get("val")),
        ("test windows", result.windows.get("test")),
        ("parameters", result.params_total),
        ("evaluation passes", train.get("eval_passes", request.get("eval_passes"))),
        ("privacy", result.privacy),
        *((f"noise: {name}", value) for name, value in result.noise_scales.items()),
    ]
    section.blocks.append(key_values("Settings", settings))
    none = "none: no epoch had a finite validation loss"
    scores = [("test MSE (z-scored)", none if result.mse is None else result.mse),
              ("test MAE (z-scored)", result.mae)]
    if raw.get("mse_mean") is not None:
        spread = raw.get("mse_std")
        if spread is not None and spread <= 1e-12 * abs(raw["mse_mean"]):
            spread = "0 (no noise at inference: every pass is the same)"  # not 6.8e-17
        scores += [(f"test MSE, mean of {raw.get('passes')} passes", raw["mse_mean"]),
                   ("test MSE, sd over passes", spread),
                   (f"test MAE, mean of {raw.get('passes')} passes", raw.get("mae_mean"))]
    scores += [("validation MSE (best epoch)", result.val_loss),
               ("best epoch", result.best_epoch or None),
               ("seconds per epoch, training", result.seconds_per_epoch),
               ("seconds per epoch, validation", _mean_of(result.history, "val_seconds")),
               ("diverged at epoch", result.diverged_epoch)]
    if result.epochs is None:
        scores.append(("seconds (closed-form fit)", raw.get("seconds")))
    section.blocks.append(key_values("Scores", scores, headers=("score", "value")))
    section.blocks.append(reference_block(run_dir, result=result, data_dir=data_dir))
    units = raw.get("original_units") or {}
    if isinstance(units.get("mse"), Mapping) and isinstance(units.get("mae"), Mapping):
        section.blocks.append(table(
            "Test errors per channel in the data's own units (the z-scored errors times the "
            "training split's per-channel std), as qpriv train prints them",
            ["channel", "test MSE", "test MAE"],
            [[name, value, units["mae"].get(name)] for name, value in units["mse"].items()]))
    named = [(key, claim) for key, claim in result.claims.items()]
    named += [(f"rigorous {key}", PrivacyClaim.from_json(entry))
              for key, entry in result.rigorous.items()
              if key.startswith("eps_") and isinstance(entry, Mapping)]
    section.children.append(Section("Privacy claims", blocks=claims_blocks(
        named, run_notes=[str(note) for note in result.privacy_notes])))
    curves = Section("Learning curves")
    if result.history:
        curves.blocks.append(png_figure(
            "Training and validation loss (MSE, z-scored) per epoch; the dashed line marks "
            "the best-validation epoch, whose weights were tested",
            learning_curves_png(result.history, best_epoch=result.best_epoch or None,
                                panels=[("loss (MSE)", [("train_loss", "train loss"),
                                                        ("val_loss", "validation loss")])])))
    else:
        curves.blocks.append(Text("No learning curves: this forecaster is fitted in closed "
                                  "form, in one step."))
    section.children.append(curves)
    section.children.append(Section("Forecasts against the actual values",
                                    blocks=forecast_blocks(run_dir, result=result,
                                                           data_dir=data_dir,
                                                           windows=windows)))
    return section


def _mean_of(history: Sequence[Mapping[str, Any]], key: str) -> float | None:
    values = [float(row[key]) for row in history if row.get(key) is not None]
    return sum(values) / len(values) if values else None


def reference_block(run_dir: Path, *, result: ForecastResult,
                    data_dir: str | Path | None) -> Block:
    """The run's test MSE beside the public floor (reads no training data) and the
    non-private ridge, fitted on the run's own data and scored on its test split
    (:func:`~qpriv.forecasting.linear.floor_and_reference`, seconds), with the capture
    (floor - run) / (floor - ridge); a note instead where they cannot be computed.

    Raises:
        InvalidInputError: ``data_dir`` does not hold the run's data.
    """
    if result.mse is None:
        return Text("No floor or reference shown: the run has no test score.")
    try:
        run = load_run(run_dir, data_dir=data_dir)
        spec = run.request.model.get("spec") if isinstance(run, LinearRun) else None
        period = spec.get("period") if isinstance(spec, Mapping) else None
        scores = floor_and_reference(run.data(), period=period)
    except InvalidInputError as error:
        if data_dir is not None:  # the data the caller named is not the run's
            raise
        return Text(f"Floor and non-private reference not computed: {error}")
    floor, ridge = scores["public"], scores["ridge"]
    capture = ((floor - result.mse) / (floor - ridge)) if floor > ridge else None
    rows = [(f"this run ({result.method})", result.mse),
            ("public floor: reads no training data", floor),
            ("ridge: non-private reference, same features", ridge),
            ("capture = (floor - run) / (floor - ridge)",
             None if capture is None else f"{capture:.0%}")]
    return key_values("Test MSE (z-scored) beside the floor a private method must beat and the "
                      "non-private reference, both fitted on this run's data and scored on its "
                      "test split", rows, headers=("forecaster", "test MSE"))


@dataclass(frozen=True)
class Forecasts:
    """Test windows and the trained model's forecasts of them, in z-scored units."""

    index: np.ndarray
    """The windows' positions in the run's test split."""
    lookback: np.ndarray
    """``(windows, L, C)``."""
    actual: np.ndarray
    """``(windows, H, C)``."""
    forecast: np.ndarray
    """``(windows, H, C)``."""
    file_rows: tuple[int, ...]
    """The data row (0-based, in the file) of each window's first forecast step."""
    scaler: Any = None
    """The loader's z-scaler of the run's data (:meth:`in_data_units` maps back with it)."""

    def in_data_units(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(lookback, actual, forecast)`` in the data's own units."""
        return tuple(np.asarray(self.scaler.inverse_transform(np.asarray(a, dtype=np.float64)))
                     for a in (self.lookback, self.actual, self.forecast))


def forecast_windows(run: LoadedRun | LinearRun, *,
                     count: int = FORECAST_WINDOWS) -> Forecasts:
    """The model's forecasts of ``count`` test windows of ``run``, evenly spaced (first and
    last included). A backbone model runs in one batch with its noise seeded as in the run's
    evaluation (so that with every test window the forecasts are those the run's test MSE was
    measured on, where they fit in one evaluation batch); a linear kernel is deterministic.

    Raises:
        InvalidInputError: the run's data cannot be found, or is not the file it used.
    """
    data = run.data()
    test = data.test
    index = np.unique(np.linspace(0, len(test) - 1, min(count, len(test))).round()
                      ).astype(np.int64)
    x, y = test.windows(index)
    if isinstance(run, LinearRun):
        prediction = run.model.predict(x.numpy().astype(np.float64))
    else:
        seed = derive_seed(int(run.request.raw.get("seed") or 0), "evaluation")
        with torch.no_grad(), seeded_noise(run.model, seed):
            prediction = run.model(x).numpy()
    return Forecasts(index=index, lookback=x.numpy(), actual=y.numpy(),
                     forecast=np.asarray(prediction, dtype=np.float64),
                     file_rows=tuple(test.row_offset + int(test.starts[i]) + test.seq_len
                                     for i in index), scaler=data.scaler)


def forecast_blocks(run_dir: Path, *, result: ForecastResult, data_dir: str | Path | None,
                    windows: int) -> list[Block]:
    """The plot of :func:`forecast_windows` for the run in ``run_dir`` (``result`` its
    result.json): per channel, the look-back's tail, the actual values and the forecast, for
    ``windows`` test windows (all the split holds where it holds fewer, said in the caption).
    A run that diverged before it had a model, or whose data cannot be found where it looks
    with no ``data_dir`` given (a run moved from another machine), gets a note instead.

    Raises:
        InvalidInputError: the run's weights or settings are missing or damaged (the run
            directory is incomplete: :func:`~qpriv.forecasting.artifacts.load_run`), or
            ``data_dir`` does not hold the run's data.
    """
    if result.diverged_epoch and not any((run_dir / name).is_file()
                                         for name in (BEST_FILE, LINEAR_MODEL_FILE)):
        return [Text(f"Forecasts not drawn: training diverged at epoch {result.diverged_epoch} "
                     "(loss not finite) before any epoch had a finite validation loss, so the "
                     "run has no model.")]
    run = load_run(run_dir, data_dir=data_dir)
    try:
        drawn = forecast_windows(run, count=windows)
    except InvalidInputError as error:
        if data_dir is not None:  # the data the caller named is not the run's
            raise
        return [Text(f"Forecasts not drawn: {error}")]
    horizon = drawn.actual.shape[1]
    total = run.result.windows.get("test", "?")
    titles = [f"window {i + 1}/{total}, rows {row}-{row + horizon - 1}"
              for i, row in zip(drawn.index, drawn.file_rows, strict=True)]
    lookback, actual, forecast = drawn.in_data_units()
    png = forecasts_png(lookback=lookback, actual=actual, forecast=forecast,
                        channels=run.request.channels, titles=titles)
    count = len(drawn.index)
    fewer = (f" (all the run's test split holds: {windows} were asked)" if count < windows
             else "")
    return [png_figure(
        f"Forecasts of the best-validation model for {count} test windows{fewer}, per "
        "channel in the data's own units: the look-back's tail (grey), the actual values "
        "(black) and the forecast (red)", png)]


# -- a classifier run ---------------------------------------------------------------------------


def classifier_run_section(run_dir: Path, *, title: str) -> Section:
    """Settings, scores, the claim and the learning curves of one classifier run."""
    raw = read_json_object(run_dir / RESULT_FILE, fix=_FIX)
    task = raw.get("task") or {}
    dpsgd = raw.get("dpsgd") or {}
    request = raw.get("request") or {}
    clip = raw.get("clip")
    settings = [
        ("task", task.get("task")), ("model", raw.get("model")),
        ("training examples", task.get("n_train")), ("test examples", task.get("n_test")),
        ("classes", task.get("n_classes")), ("parameters", raw.get("parameters")),
        ("clip C", clip.get("value") if isinstance(clip, Mapping) else clip),
        ("batch", dpsgd.get("batch_size")), ("epochs", dpsgd.get("epochs")),
        ("learning rate", dpsgd.get("lr")), ("optimizer", dpsgd.get("optimizer")),
        ("seed", request.get("seed")), ("target eps", request.get("eps")),
        ("noise multiplier", _claim_value(raw.get("noise_multiplier"))),
        ("privacy", str(raw.get("privacy"))),
    ]
    scores = [(f"accuracy ({raw.get('evaluated_on', 'test')})", raw.get("accuracy")),
              ("training accuracy", raw.get("train_accuracy")),
              ("diverged at epoch", raw.get("diverged_epoch")), ("seconds", raw.get("seconds")),
              *((f"final {key.replace('_', ' ')}", value)
                for key, value in (raw.get("final_diagnostics") or {}).items()
                if key not in ("train_accuracy", "test_accuracy"))]
    section = Section(title=title, blocks=[
        key_values("Settings", settings), key_values("Scores", scores, headers=("score", "value"))])
    named = ([("eps", PrivacyClaim.from_json(raw["eps"]))]
             if isinstance(raw.get("eps"), Mapping) else [])
    section.children.append(Section("Privacy claims", blocks=claims_blocks(
        named, run_notes=[str(note) for note in raw.get("privacy_notes") or ()])))
    history = raw.get("history") or []
    curves = Section("Learning curves")
    if history:
        curves.blocks.append(png_figure(
            "Loss and accuracy per epoch (training and test)",
            learning_curves_png(history, panels=[
                ("loss", [("train_loss", "train loss"), ("test_loss", "test loss")]),
                ("accuracy", [("train_accuracy", "train accuracy"),
                              ("test_accuracy", "test accuracy")])])))
    else:
        curves.blocks.append(Text("No epochs recorded."))
    section.children.append(curves)
    return section


# -- a quickstart ---------------------------------------------------------------------------------


def comparison_section(runs: Sequence[Path]) -> Section:
    """The quickstart's table: every run's test MSE and MAE (mean over the evaluation passes),
    the change against ``classical`` and its privacy numbers, labelled."""
    results = [{"label": _QUICKSTART_LABELS.get(run.name, run.name),
                **read_json_object(run / RESULT_FILE, fix=_FIX)} for run in runs]
    rows = quickstart_rows(results)
    section = Section("Comparison")
    section.blocks.append(table(
        "Runs compared", ["run", "method", "test MSE", "test MAE", "dMSE % vs classical",
                          "eps per pass (paper)", "eps composed, advanced (paper)",
                          "eps token (rigorous)", "eps record (rigorous)", "p", "sigma"],
        [[r["label"], r["method"], r["mse"], r["mae"], r["delta_mse_pct"],
          _claim_value(r["eps_per_pass"]), _claim_value(r["eps_advanced"]),
          _claim_value(r["eps_token_rigorous"]), _claim_value(r["eps_record_rigorous"]),
          r["p"], r["sigma"]] for r in rows]))
    section.blocks.append(Text(
        "MSE and MAE on the z-scored test windows (the mean over the evaluation passes where "
        "there were several). eps per pass: local eps-QDP per pass (trace distance d = 0.1, "
        "full norm), accounting=paper; composed: advanced composition over the epochs "
        "(delta' = 1e-6), accounting=paper; rigorous: (eps, delta) of one token's N_s-shot "
        "release and of one record over the whole training (`qpriv account`). Feature-path "
        "epsilons hold for the released quantum features only: the forecast targets and "
        "RevIN's statistics reach the trained model without the channel. The channel audit "
        "is printed by `qpriv quickstart` and `qpriv audit channel`."))
    return section


# -- a frontier -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class TableSpec:
    """What a result table that a command writes must hold for its report to be right: the
    command (named in the fix), the columns read, those that every row fills and those that
    hold numbers. A file that breaks it is damaged (cut short, overwritten, edited) and is
    refused rather than drawn as a wrong row."""

    command: str
    columns: tuple[str, ...] = ()
    filled: tuple[str, ...] = ()
    numbers: tuple[str, ...] = ()
    paper_twins: bool = False
    """Whether the paper's numbers (``paper_<name>``) and the columns they stand beside
    (``<name>``) hold numbers too."""

    def number_columns(self, header: Sequence[str]) -> list[str]:
        """The columns of ``header`` that hold numbers."""
        twins = [n for n in header if n.startswith("paper_")] if self.paper_twins else []
        wanted = {*self.numbers, *twins, *(n.removeprefix("paper_") for n in twins)}
        return [name for name in header if name in wanted]

    def damaged(self, path: Path, problem: str) -> InvalidInputError:
        """The error for ``path`` with ``problem``: damaged, and how to write it again."""
        return InvalidInputError(
            f"{path} is damaged or was not written by {self.command} ({problem}); run "
            f"{self.command} again with the same --out to write it again (finished cells are "
            "kept)")


FRONTIER_TABLE = TableSpec(
    command="qpriv frontier",
    columns=("method", "eps", "unit", "role", "reading", "claim_kind", "claim_accounting",
             "claim_unit", "delta", "covers_unit", "covers_weights", "mse_mean", "mse_sd",
             "mae_mean", "mae_sd", "n_seeds", "failed_seeds", "family", "seq_len",
             "train_windows", "test_windows", "budget"),
    filled=("method", "unit", "role", "reading", "covers_unit", "covers_weights", "n_seeds",
            "failed_seeds", "family", "budget"),
    numbers=("eps", "delta", "mse_mean", "mse_sd", "mae_mean", "mae_sd", "n_seeds",
             "failed_seeds", "seq_len", "train_windows", "test_windows"))
"""What :func:`frontier_section` reads from ``frontier.csv``."""


def _read_table(path: Path, spec: TableSpec) -> tuple[list[str], list[dict[str, Any]]]:
    """A result CSV's columns and rows, missing values as None and numbers as Python's, once
    it is known to be whole: every line ends (pandas ends the file with a newline, a file cut
    short does not) and has the header's fields, ``spec``'s columns are there, its filled
    columns hold a value in every row and its number columns numbers. A file holding only a
    newline is pandas' table without rows or columns (every cell failed).

    Raises:
        InvalidInputError: the file cannot be read or breaks any of that (names the file,
            the problem and the command that writes it again).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise spec.damaged(path, f"{type(error).__name__}: {error}") from error
    if text == "\n" and not spec.columns:
        return [], []
    if not text.strip():
        raise spec.damaged(path, "the file is empty")
    if not text.endswith("\n"):
        raise spec.damaged(path, "its last line is cut short: the file was truncated")
    records = [record for record in csv.reader(io.StringIO(text)) if record]
    header = records[0]
    if len(records) == 1:  # every grid writes a row per setting, failed ones included
        raise spec.damaged(path, "it has a header and no rows")
    for number, record in enumerate(records[1:], 1):
        if len(record) != len(header):
            raise spec.damaged(path, f"row {number} has {len(record)} fields, the header "
                                     f"{len(header)}")
    missing = [name for name in spec.columns if name not in header]
    if missing:
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        raise spec.damaged(path, f"it lacks the column {', '.join(missing[:3])}{more}")
    try:
        frame = pd.read_csv(io.StringIO(text), keep_default_na=False, na_values=[""])
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as error:
        raise spec.damaged(path, f"not a readable CSV: {error}") from error
    for name in spec.filled:
        empty = frame.index[frame[name].isna()]
        if len(empty):
            raise spec.damaged(path, f"row {empty[0] + 1} has no {name}")
    for name in spec.number_columns(list(frame.columns)):
        values = pd.to_numeric(frame[name], errors="coerce")
        wrong = frame.index[values.isna() & frame[name].notna()]
        if len(wrong):
            raise spec.damaged(path, f"row {wrong[0] + 1}'s {name} is "
                                     f"{frame[name][wrong[0]]!r}, not a number")
    records = frame.astype(object).where(frame.notna(), None).to_dict("records")
    rows = [{key: value.item() if isinstance(value, np.generic) else value
             for key, value in record.items()} for record in records]
    return list(frame.columns), rows


def _markdown_section(path: Path, heading: str) -> list[str]:
    """The bullet lines under ``## heading`` of a Markdown file (empty when absent)."""
    if not path.is_file():
        return []
    lines, inside = [], False
    for line in path.read_text().splitlines():
        if line.startswith("## "):
            inside = line[3:].strip() == heading
        elif inside and line.startswith("- "):
            lines.append(line[2:])
    return lines


def _markdown_title(path: Path, fallback: str) -> str:
    if path.is_file():
        first = path.read_text().splitlines()[:1]
        if first and first[0].startswith("# "):
            return first[0][2:].strip()
    return fallback


def frontier_section(where: Path) -> Section:
    """The frontier in ``where``: its plot, its table (what each row's claim is and covers,
    test MSE and MAE with their sd over the seeds), how to read the rows, the settings."""
    _, rows = _read_table(where / FRONTIER_CSV, FRONTIER_TABLE)
    unknown = next((r["role"] for r in rows if r["role"] not in ROLES), None)
    if unknown is not None:
        raise FRONTIER_TABLE.damaged(where / FRONTIER_CSV, f"role {unknown!r} is none of "
                                                           f"{', '.join(ROLES)}")
    title = _markdown_title(where / FRONTIER_MD, f"Privacy-utility frontier: {where}")
    budget = rows[0]["budget"] if rows else where.name
    section = Section(f"{title} (budget {budget})")
    png = where / FRONTIER_PNG
    if png.is_file():
        section.blocks.append(png_figure(
            "Test MSE against eps, one line per method (mean ± sd over the seeds); the public "
            "floor and the non-private references as horizontal lines; methods whose guarantee "
            "does not cover the unit or the weights in grey", png.read_bytes()))
    else:
        section.blocks.append(Text("frontier.png is missing from this folder."))
    section.blocks.append(table(
        "Frontier", ["method", "eps", "claim (kind, accounting, unit)", "delta", "covers unit",
                     "covers weights", "test MSE", "MSE sd", "test MAE", "MAE sd", "seeds",
                     "failed seeds", "reading"],
        [[r["method"], r["eps"],
          "—" if r["claim_kind"] is None else
          f"{r['claim_kind']}, {r['claim_accounting']}, {r['claim_unit']}",
          r["delta"], r["covers_unit"], r["covers_weights"], r["mse_mean"], r["mse_sd"],
          r["mae_mean"], r["mae_sd"], r["n_seeds"], r["failed_seeds"], r["reading"]]
         for r in rows]))
    unit = rows[0]["unit"] if rows else ""
    report = FrontierReport(dataset="", horizon=0, unit=unit, budget=str(budget), rows=rows)
    section.children.append(Section("How to read the rows", blocks=[
        Bullets(tuple(line.removeprefix("- ") for line in explain(report)))]))
    settings = sorted({(r["family"], r["seq_len"], r["train_windows"], r["test_windows"])
                       for r in rows if r["seq_len"] is not None}, key=str)
    if settings:
        section.children.append(Section("Settings", blocks=[Bullets(tuple(
            f"{family}: L = {number_text(seq_len)}, {number_text(train)} training windows, "
            f"{number_text(test)} test windows" for family, seq_len, train, test in settings))]))
    failed = _markdown_section(where / FRONTIER_MD, "Failed cells")
    if failed:
        section.children.append(Section("Failed cells", blocks=[Bullets(tuple(failed))]))
    return section


# -- a reproduction -------------------------------------------------------------------------------


REPRODUCE_TABLE = TableSpec(command="qpriv reproduce", numbers=EPS_COLUMNS, paper_twins=True)
"""What :func:`reproduce_section` reads from ``results.csv`` (its columns are the
experiment's)."""


def _read_reproduction(where: Path, summary: Mapping[str, Any]
                       ) -> tuple[list[str], list[dict[str, Any]]]:
    """``results.csv`` of a reproduction (:func:`_read_table`), and where ``summary``
    (``report.json``, written with it) records its columns and rows, the same ones."""
    path = where / RESULTS_CSV
    columns, rows = _read_table(path, REPRODUCE_TABLE)
    stored_columns, stored_rows = summary.get("columns"), summary.get("rows")
    if isinstance(stored_columns, list) and stored_columns and stored_columns != columns:
        raise REPRODUCE_TABLE.damaged(path, f"its columns are not those {REPORT_JSON} records")
    if isinstance(stored_rows, list) and len(stored_rows) != len(rows):
        raise REPRODUCE_TABLE.damaged(path, f"{len(rows)} rows where {REPORT_JSON} records "
                                            f"{len(stored_rows)}")
    return columns, rows


def reproduce_section(where: Path) -> Section:
    """A reproduction in ``where``: its figure, its table (ours beside the paper's numbers),
    what each epsilon column is, the notes on the paper's numbers and any failed cells."""
    summary = (read_json_object(where / REPORT_JSON, fix=_FIX)
               if (where / REPORT_JSON).is_file() else {})
    columns, rows = _read_reproduction(where, summary)
    exp_id = str(summary.get("id", where.parent.name))
    exp = EXPERIMENTS.get(exp_id)
    title = f"{exp_id}: {exp.title}" if exp is not None else exp_id
    section = Section(f"{title} (budget {summary.get('budget', where.name)})")
    figure = where / FIGURE_PNG
    if figure.is_file():
        section.blocks.append(png_figure(f"{title}: ours (solid) and the paper's (dashed), "
                                         "where it prints the number", figure.read_bytes()))
    shown = [c for c in columns if c != "overrides"]
    if rows:
        section.blocks.append(table(
            "Results (paper_* columns: the paper's numbers as printed)", shown,
            [[row.get(c) for c in shown] for row in rows]))
    else:
        section.blocks.append(Text("No rows: every cell failed."))
    legend = epsilon_legend(rows, shown)
    if legend:
        section.children.append(Section("What each epsilon column is", blocks=[
            Bullets(tuple(line.removeprefix("- ") for line in legend))]))
    if exp is not None and exp.paper in PAPER_TABLES and PAPER_TABLES[exp.paper].notes:
        section.children.append(Section("Notes on the paper's numbers", blocks=[
            Bullets(tuple(PAPER_TABLES[exp.paper].notes))]))
    failures = summary.get("failures") or []
    if failures:
        section.children.append(Section("Failed cells", blocks=[Bullets(tuple(
            f"`{f.get('cell')}`: {f.get('error')}" for f in failures))]))
    return section


# -- the page -------------------------------------------------------------------------------------


def _code_spans(text: str) -> Markup:
    """Escape ``text`` and turn its `backtick` spans into <code> elements."""
    return Markup(re.sub(r"`([^`]+)`", r"<code>\1</code>", str(escape(text))))


_ENVIRONMENT = jinja2.Environment(
    loader=jinja2.PackageLoader("qpriv.experiments", "templates"),
    autoescape=jinja2.select_autoescape(["html"]), undefined=jinja2.StrictUndefined,
    trim_blocks=True, lstrip_blocks=True)
_ENVIRONMENT.filters["code_spans"] = _code_spans

_TITLES = {RUN: "forecasting run", CLASSIFIER: "classifier run", QUICKSTART: "quickstart",
           FRONTIER: "privacy-utility frontier", REPRODUCE: "reproduction"}


def report_sections(contents: Contents, *, data_dir: str | Path | None = None,
                    windows: int = FORECAST_WINDOWS) -> list[Section]:
    """The page's sections for what :func:`detect` found."""
    sections: list[Section] = []
    if contents.kind == QUICKSTART:
        sections.append(comparison_section(contents.runs))
    sections += [frontier_section(where) for where in contents.frontiers]
    sections += [reproduce_section(where) for where in contents.reproductions]
    for run in contents.runs:
        label = _QUICKSTART_LABELS.get(run.name, run.name)
        if contents.kind == CLASSIFIER:
            sections.append(classifier_run_section(run, title=f"Classifier run {run.name}"))
        elif contents.kind == RUN:
            sections.append(forecast_run_section(run, title=f"Run {run.name}",
                                                 data_dir=data_dir, windows=windows))
        else:
            sections.append(forecast_run_section(run, title=f"Run {label} ({run.name}/)",
                                                 data_dir=data_dir, windows=windows))
    for number, section in enumerate(sections, 1):
        section.anchor = f"section-{number}"
    return sections


def render_report(directory: str | Path, *, data_dir: str | Path | None = None,
                  windows: int = FORECAST_WINDOWS) -> str:
    """The report of ``directory`` as one self-contained HTML page (see :func:`detect`).

    Args:
        directory: a folder a qpriv command wrote.
        data_dir: where a run's data is (None: its recorded path where that file exists,
            else ``$QPRIV_DATA_DIR`` and the user cache, where data that cannot be found is
            said so on the page instead of the forecast plots).
        windows: test windows drawn per channel, 1 to :data:`MAX_FORECAST_WINDOWS` (a run
            whose test split holds fewer draws them all, and says so).

    Raises:
        InvalidInputError: ``windows`` is outside that range; the directory holds nothing to
            report on; a result file or table in it is damaged; a run in it lacks its
            weights or has damaged ones; ``data_dir`` does not hold a run's data.
    """
    if require_positive_int("windows", windows) > MAX_FORECAST_WINDOWS:
        raise ArgumentError(f"{{windows}} = {windows!r} is outside the valid range [1, "
                            f"{MAX_FORECAST_WINDOWS}]: the forecast figure draws each test "
                            "window as a column of panels")
    contents = detect(directory)
    sections = report_sections(contents, data_dir=data_dir, windows=windows)
    return _ENVIRONMENT.get_template("report.html").render(
        title=f"qpriv report: {_TITLES[contents.kind]} ({contents.directory})",
        kind=contents.kind, sections=sections)


def write_report_html(directory: str | Path, *, data_dir: str | Path | None = None,
                      windows: int = FORECAST_WINDOWS) -> Path:
    """Write :func:`render_report`'s page to ``directory/report.html`` atomically; return its
    path. Raises as :func:`render_report` does, before anything is written."""
    page = render_report(directory, data_dir=data_dir, windows=windows)
    return atomic_write_text(Path(directory).expanduser() / REPORT_FILE, page)
