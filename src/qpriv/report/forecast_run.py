"""The report's section of one forecasting run (``qpriv train --out``, or a released model):
its settings, its scores beside the public floor and the non-private ridge, every privacy
claim, the learning curves, and forecasts against the actual values for a few test windows
per channel, drawn with the model the run tested."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from qpriv.errors import InvalidInputError
from qpriv.forecasting.artifacts import LinearRun, LoadedRun, load_run
from qpriv.forecasting.linear import floor_and_reference
from qpriv.forecasting.records import ForecastResult
from qpriv.report.document import (
    Block,
    Section,
    Text,
    claims_blocks,
    key_values,
    png_figure,
    table,
)
from qpriv.report.plots import forecasts_png, learning_curves_png
from qpriv.report.result_files import REWRITE_FIX
from qpriv.runs.files import read_json_object
from qpriv.runs.layout import BEST_FILE, CONFIG_FILE, LINEAR_MODEL_FILE, RESULT_FILE
from qpriv.training.evaluation import seeded_noise
from qpriv.training.seeding import derive_seed

FORECAST_WINDOWS = 3
"""Test windows drawn per channel in the forecast-against-actual plots."""
MAX_FORECAST_WINDOWS = 12
"""The most test windows the forecast figure draws: each is a column of panels, and a wider
figure takes minutes to lay out and cannot be read on a page."""

SECRET_SEED_TEXT = "secret (drawn from the operating system, not recorded)"
"""How a report shows the seed of a run trained with a secret one."""


def _source_name(source: Any) -> str | None:
    return Path(str(source)).name if source else None


def forecast_run_section(run_dir: Path, *, title: str, data_dir: str | Path | None,
                         windows: int = FORECAST_WINDOWS) -> Section:
    """Settings, scores, claims, learning curves and forecasts of one forecasting run."""
    # a released model has no settings file: its result says what the report shows
    request = (read_json_object(run_dir / CONFIG_FILE, fix=REWRITE_FIX)
               if (run_dir / CONFIG_FILE).is_file() else {})
    raw = read_json_object(run_dir / RESULT_FILE, fix=REWRITE_FIX)
    try:
        result = ForecastResult.from_json(raw)
    except InvalidInputError as error:  # the message says result.json: name which one
        raise InvalidInputError(f"{run_dir}: {error}; {REWRITE_FIX}") from error
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
    trained = result.epochs is not None  # a closed-form fit has no epoch to pick
    scores += [("validation MSE (best epoch)" if trained else "validation MSE", result.val_loss),
               ("best epoch", result.best_epoch or None),
               ("seconds per epoch, training", result.seconds_per_epoch),
               ("seconds per epoch, validation", _mean_of(result.history, "val_seconds")),
               ("diverged at epoch", result.diverged_epoch)]
    if not trained:
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
    if isinstance(raw.get("federated"), Mapping):
        section.children.append(federated_section(raw["federated"]))
    named = [(key, claim) for key, claim in result.claims.items()]
    named += [(f"rigorous eps_{unit}", claim) for unit, claim in result.rigorous_claims.items()]
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


def federated_section(federated: Mapping[str, Any]) -> Section:
    """The sites of a federated run (``qpriv federate``): what each reported, who saw what
    (a FedAvg run's ``summary``, or federated dp-linear's SecAgg+ round)."""
    sites = [site for site in federated.get("sites") or () if isinstance(site, Mapping)]
    plan = federated.get("plan") or {}
    personal = federated.get("personal")
    own = [Text(f"A personal round: each site's errors are of its own kernel, pulled toward "
                f"the pooled kernel with shrink {personal.get('shrink')}; "
                f"{personal.get('kernels')}.")] if isinstance(personal, Mapping) else []
    summary = federated.get("summary") or (  # FedAvg runs say their own; dp-linear's round:
        f"{len(sites)} site(s) reported, of {plan.get('sites')} in the round (SecAgg+ "
        f"threshold {plan.get('threshold')}, colluding sites tolerated: "
        f"{plan.get('colluders')}). The server saw {federated.get('server_saw')}; no "
        "site's data or statistics left it in the clear.")
    return Section("Sites (federated)", blocks=[
        *own,
        Text(str(summary)),
        table("Each site's own test and validation errors of the released kernel (z-scored by "
              "its own training split), as it reported them",
              ["site", "test MSE", "test MAE", "public floor test MSE", "validation MSE",
               "training windows", "first timestamp", "last timestamp"],
              [[site.get("site"), site.get("mse"), site.get("mae"), site.get("floor_mse"),
                site.get("val_mse"),
                site.get("train_windows"), site.get("first"), site.get("last")]
               for site in sites])])


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
