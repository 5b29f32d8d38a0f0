"""Forecasters as estimators: configure, ``fit(data)``, ``predict()``; qpriv's front door.

Each class is one method of ``qpriv train`` with that method's settings as constructor
arguments, after scikit-learn's estimator contract: ``get_params`` / ``set_params``, ``fit``
returns the estimator, and what fitting learns ends in ``_`` (``result_``, ``claims_``,
``run_``). ``fit`` runs the method exactly as ``qpriv train --out`` does
(:func:`qpriv.forecasting.run.run_forecast`) into a run folder, ``out_dir`` or a temporary
one the estimator keeps, and reads it back (:func:`qpriv.forecasting.artifacts.load_run`):
an estimator, a CLI run and a released folder are the same files and the same numbers.
"""

from __future__ import annotations

import inspect
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from qpriv.errors import InvalidInputError
from qpriv.forecasting.artifacts import LinearRun, LoadedRun, load_run
from qpriv.forecasting.csv_input import CsvFormat, checked_dataframe, load_frame
from qpriv.forecasting.datasets import DATASETS
from qpriv.forecasting.methods import LINEAR, METHODS, budget_arguments
from qpriv.forecasting.records import ForecastResult
from qpriv.forecasting.run import run_forecast
from qpriv.privacy.budget import FEATURE_PATH_DELTA, GLOBAL_DELTA, PrivacyTarget, Spend
from qpriv.privacy.claims import PrivacyClaim

__all__ = ["DPLinearForecaster", "Forecaster", "PublicForecaster", "RidgeForecaster",
           "TransformerForecaster", "load"]

Data = str | Path | pd.DataFrame
"""What ``fit`` takes: a dataset's name (``"ETTh1"``), a CSV's path, or a DataFrame."""


class Forecaster:
    """One forecasting method as an estimator (see the module docstring). Subclasses name the
    method (``method``) and their settings (the constructor's keyword arguments)."""

    method: ClassVar[str] = ""
    _params: dict[str, Any]

    def __init__(self, **params: Any) -> None:
        self._params = dict(params)
        self._folder: tempfile.TemporaryDirectory | None = None
        self._data: Data | None = None

    def __repr__(self) -> str:
        shown = ", ".join(f"{key}={value!r}" for key, value in self._params.items())
        return f"{type(self).__name__}({shown})"

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The settings, as the constructor took them (scikit-learn's contract)."""
        return dict(self._params)

    def set_params(self, **params: Any) -> Forecaster:
        """Change settings before the next ``fit``; an unknown one is refused."""
        unknown = sorted(set(params) - set(self._params))
        if unknown:
            raise InvalidInputError(f"{type(self).__name__} has no setting {unknown}; its "
                                    f"settings are {sorted(self._params)}")
        self._params.update(params)
        return self

    def _run_settings(self) -> dict[str, Any]:
        """The keyword arguments of :func:`run_forecast` beyond the data: the settings, a typed
        ``budget`` turned into the arguments that spend it (:func:`budget_arguments`)."""
        settings = {key: value for key, value in self._params.items() if key != "method"}
        budget = settings.pop("budget", None)
        if budget is None:
            return settings
        spent = budget_arguments(self.method, budget)
        defaults = {name: parameter.default for name, parameter
                    in inspect.signature(type(self).__init__).parameters.items()}
        crossed = sorted(key for key in ("eps", "delta", "unit", "accounting")
                         if key in settings and settings[key] != defaults.get(key))
        if crossed:
            raise InvalidInputError(f"budget= states eps, delta and unit; leave {crossed} at "
                                    "their defaults, or give them without a budget")
        settings = {key: value for key, value in settings.items()
                    if key not in ("eps", "delta", "unit", "accounting")}
        return {**settings, **spent}

    def fit(self, data: Data, *, columns: Sequence[str] | None = None,
            csv_format: CsvFormat | None = None, data_dir: str | Path | None = None,
            out_dir: str | Path | None = None, progress: bool = False) -> Forecaster:
        """Fit (or train) the method on ``data`` and keep the run: a dataset's name found as
        ``qpriv train --dataset`` finds it (``data_dir``), a CSV's path or a DataFrame, its
        ``columns`` (default: all) read as ``csv_format`` says; the run is written to
        ``out_dir`` (default: a temporary folder, kept while the estimator lives; ``save``
        copies it). Returns the estimator.

        Raises:
            InvalidInputError: anything :func:`run_forecast` refuses (bad data, settings that
                do not go together, a used ``out_dir``).
        """
        source = _source(data, data_dir=data_dir, csv_format=csv_format)
        if out_dir is None:
            self._folder = tempfile.TemporaryDirectory(prefix="qpriv-")
            folder = Path(self._folder.name) / "run"
        else:
            self._folder, folder = None, Path(out_dir)
        result = run_forecast(method=self.method, columns=columns, out_dir=folder,
                              progress=progress, **source, **self._run_settings())
        self._adopt(load_run(folder, data_dir=data_dir), data, result)
        return self

    def _adopt(self, run: LinearRun | LoadedRun, data: Data | None,
               result: ForecastResult | None = None) -> None:
        self.run_ = run
        self.result_ = run.result if result is None else result
        self.claims_: tuple[PrivacyClaim, ...] = tuple(self.result_.claims.values())
        self._data = data

    @property
    def mse_(self) -> float | None:
        """The fitted run's test MSE (z-scored, on its test split; lower is better)."""
        return self._fitted().result_.mse

    def _fitted(self) -> Forecaster:
        if not hasattr(self, "run_"):
            raise InvalidInputError(f"this {type(self).__name__} is not fitted yet: call "
                                    "fit(data) first (or qpriv.load(folder))")
        return self

    def predict(self, *, passes: int | None = None, seed: int | None = None) -> pd.DataFrame:
        """The next H values of every channel after the fitted data's last row, in its own
        units (:meth:`~qpriv.forecasting.inference.ForecastingRun.forecast`)."""
        run = self._fitted().run_
        data = self._data
        if data is None or (isinstance(data, str) and data in DATASETS):
            data = run.request.source or None  # a named dataset: the file the run read
        if data is None:
            raise InvalidInputError("a loaded run does not know the data it was fitted on: "
                                    "give it with forecast(data)")
        return run.forecast(data, passes=passes, seed=seed)

    def forecast(self, data: str | Path | pd.DataFrame, *, at: str | pd.Timestamp | None = None,
                 passes: int | None = None, seed: int | None = None) -> pd.DataFrame:
        """The next H values after ``data``'s last row (or the row at ``at``), in its units."""
        return self._fitted().run_.forecast(data, at=at, passes=passes, seed=seed)

    def score(self, data: str | Path | pd.DataFrame, *, passes: int | None = None,
              seed: int | None = None) -> dict[str, float]:
        """The forecasts' errors on ``data`` (a DataFrame or a CSV's path), in its own units:
        a forecast every H rows from the first look-back of L rows on, each against the H
        rows that follow it; ``mse`` and ``mae`` are the means over every target value of
        every channel (a gap in the targets is left out), ``forecasts`` how many were made.

        Raises:
            InvalidInputError: ``data`` has fewer than L + H rows, or :meth:`forecast` refuses
                it.
        """
        run = self._fitted().run_
        channels, seq_len, horizon = run.inference.channels, run.request.seq_len, \
            run.request.horizon
        truth = (checked_dataframe(data, columns=channels, selectable=False,
                                   allow_missing=True) if isinstance(data, pd.DataFrame) else
                 load_frame(data, columns=channels, selectable=False, allow_missing=True,
                            fmt=CsvFormat.from_dict(run.request.raw.get("csv_format"))))
        ends = range(seq_len - 1, len(truth) - horizon, horizon)
        if not ends:
            raise InvalidInputError(f"{len(truth)} rows hold no forecast to score: the run "
                                    f"needs L + H = {seq_len + horizon} rows or more")
        errors = np.concatenate([
            run.forecast(truth.iloc[end + 1 - seq_len:end + 1], passes=passes,
                         seed=seed)[list(channels)].to_numpy()
            - truth.iloc[end + 1:end + 1 + horizon].to_numpy() for end in ends])
        return {"mse": float(np.nanmean(errors**2)), "mae": float(np.nanmean(np.abs(errors))),
                "forecasts": len(ends)}

    def save(self, directory: str | Path) -> Path:
        """Copy the run folder to ``directory`` (which must not exist); ``qpriv.load`` reads it
        back, and ``qpriv forecast`` and ``qpriv report`` take it."""
        target = Path(directory).expanduser()
        if target.exists():
            raise InvalidInputError(f"{target} exists; save into a new folder")
        shutil.copytree(self._fitted().run_.run_dir, target)
        return target


class DPLinearForecaster(Forecaster):
    """``dp-linear``: the recommended private forecaster, global (eps, delta)-DP at the record
    (one value of one channel at one time step) or window unit, on its weights and so on every
    forecast; the design is selected inside the guarantee (``select="private"``).

    Examples:
        Seconds: ETTh1, found through ``QPRIV_DATA_DIR``; a CSV's path or a DataFrame fits the same
        way:

        >>> import qpriv
        >>> model = qpriv.DPLinearForecaster(eps=1.0, horizon=24).fit("ETTh1")
        >>> print(model.claims_[0].label())
        1 (global (eps, delta)-DP, delta=1e-06, accounting=rigorous)
        >>> model.predict().shape          # the next 24 hours of the 7 channels, in their units
        (24, 7)
        >>> model.mse_ < qpriv.PublicForecaster(horizon=24).fit("ETTh1").mse_   # beats the floor
        True

        The budget typed, what its eps is spent on said (here: the released model, per window):

        >>> from qpriv.privacy.budget import PrivacyTarget, Spend
        >>> window = qpriv.DPLinearForecaster(
        ...     budget=PrivacyTarget(1.0, Spend.RELEASE, unit="window")).fit("ETTh1")
        >>> print(window.claims_[0].unit)
        window
    """

    method = "dp-linear"

    def __init__(self, *, eps: float = 1.0, delta: float = GLOBAL_DELTA, unit: str = "record",
                 horizon: int = 24, seq_len: int = 336, select: str = "private",
                 scaler: str | None = None, clip_range: float | None = None,
                 period: int | None = None, seed: int | None = 2024,
                 budget: PrivacyTarget | None = None) -> None:
        super().__init__(eps=eps, delta=delta, unit=unit, horizon=horizon, seq_len=seq_len,
                         select=select, scaler=scaler, clip_range=clip_range, period=period,
                         seed=seed, budget=budget)


class PublicForecaster(Forecaster):
    """``public``: the floor, a forecast that reads no training data (eps = 0 at every unit):
    a private forecaster is worth its noise only below it."""

    method = "public"

    def __init__(self, *, horizon: int = 24, seq_len: int = 336,
                 period: int | None = None) -> None:
        super().__init__(horizon=horizon, seq_len=seq_len, period=period)


class RidgeForecaster(Forecaster):
    """``ridge``: the non-private reference on dp-linear's features (no guarantee)."""

    method = "ridge"

    def __init__(self, *, horizon: int = 24, seq_len: int = 336,
                 period: int | None = None) -> None:
        super().__init__(horizon=horizon, seq_len=seq_len, period=period)


class TransformerForecaster(Forecaster):
    """A method of the LDPT backbone (``ldpt``, ``classical``, ``dpsgd``, ...; ``qpriv
    methods`` lists them), trained by the paper's protocol: minutes an epoch on a CPU.

    ``eps`` is the method's own budget: the per-pass eps_s of the paper's accounting for the
    channel and the per-pass baselines, the released weights' eps for DP-SGD. A typed
    ``budget`` says which: ``PrivacyTarget(eps, Spend.PER_PASS)``, ``PrivacyTarget(eps,
    Spend.RELEASE)`` (DP-SGD), or ``PrivacyTarget(eps_total, Spend.OVER_TRAINING, delta=...)``
    for the rigorous record-level budget over the whole training (LDPT's channel).
    """

    def __init__(self, *, method: str = "ldpt", eps: float | None = None,
                 horizon: int = 24, seq_len: int = 336, epochs: int | None = None,
                 batch_size: int | None = None, accounting: str = "paper",
                 delta: float | None = None, overrides: Mapping[str, Any] | None = None,
                 max_train_windows: int | None = None, max_eval_windows: int | None = None,
                 seed: int | None = 2024, threads: int | None = None,
                 budget: PrivacyTarget | None = None) -> None:
        entry = METHODS.get(method)
        if entry is None or entry.family == LINEAR:
            raise InvalidInputError(
                f"{method!r} is not a method of the LDPT backbone; those are "
                f"{[n for n, m in METHODS.items() if m.family != LINEAR]} (the linear family "
                "has its own estimators: DPLinearForecaster, PublicForecaster, "
                "RidgeForecaster)")
        super().__init__(method=method, eps=eps, horizon=horizon, seq_len=seq_len,
                         epochs=epochs, batch_size=batch_size, accounting=accounting,
                         delta=delta, overrides=overrides, max_train_windows=max_train_windows,
                         max_eval_windows=max_eval_windows, seed=seed, threads=threads,
                         budget=budget)

    @property
    def method(self) -> str:  # type: ignore[override]
        """The backbone method this estimator trains."""
        return self._params["method"]


ESTIMATORS: dict[str, type[Forecaster]] = {
    cls.method: cls for cls in (DPLinearForecaster, PublicForecaster, RidgeForecaster)}
"""The linear family's estimator of each method; every other method is a
:class:`TransformerForecaster`."""


def load(directory: str | Path, *, data_dir: str | Path | None = None) -> Forecaster:
    """The estimator of the finished run (or released model) in ``directory``, fitted: its
    settings from the run's files, its model read back (:func:`load_run`). ``predict`` needs
    the fitted data, which a folder records only as a path: a moved or released run forecasts
    what ``forecast(data)`` is given.

    Examples:
        Seconds: ETTh1, found through ``QPRIV_DATA_DIR``:

        >>> import tempfile, qpriv
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     model = qpriv.PublicForecaster(horizon=24).fit("ETTh1")
        ...     again = qpriv.load(model.save(folder + "/floor"))
        ...     again.predict().equals(model.predict())
        True
    """
    run = load_run(directory, data_dir=data_dir)
    request = run.request.raw
    method = run.result.method
    cls = ESTIMATORS.get(method)
    if cls is None:
        estimator: Forecaster = TransformerForecaster(method=method)
    else:
        estimator = cls()
    estimator.set_params(**_recorded_settings(request, estimator.get_params()))
    source = request.get("source") or None
    estimator._adopt(run, source if source and Path(source).is_file() else None)
    return estimator


def _recorded_settings(request: Mapping[str, Any], params: Mapping[str, Any]
                       ) -> dict[str, Any]:
    """The settings among ``params`` that config.json records, as a new fit takes them back: a
    backbone run records the feature path's delta even where it used none (the default, which
    the methods without a feature path refuse as a setting), an empty ``overrides`` for none,
    its batch with the training configuration, and a rigorous run's eps as the budget over the
    whole training it is (``budget``)."""
    if (request.get("model") or {}).get("family") == LINEAR:
        recorded = dict(request)
    else:
        recorded = {**request, "batch_size": (request.get("train") or {}).get("batch_size")}
        if recorded.get("accounting") == "rigorous":  # its eps is the budget over training
            recorded["budget"] = PrivacyTarget(eps=recorded.pop("eps"), spend=Spend.OVER_TRAINING,
                                               delta=recorded.pop("delta", None))
            del recorded["accounting"]
        elif recorded.get("delta") == FEATURE_PATH_DELTA:
            del recorded["delta"]
    return {key: recorded[key] for key in params
            if key != "method" and recorded.get(key) not in (None, {})}


def _source(data: Data, *, data_dir: str | Path | None,
            csv_format: CsvFormat | None) -> dict[str, Any]:
    """The data arguments of :func:`run_forecast` for ``fit``'s ``data``."""
    if isinstance(data, pd.DataFrame):
        return {"csv": data, "csv_format": csv_format}
    if isinstance(data, str) and data in DATASETS:
        return {"dataset": data, "data_dir": data_dir, "csv_format": csv_format}
    if isinstance(data, (str, Path)):
        return {"csv": data, "csv_format": csv_format}
    raise InvalidInputError(f"cannot fit on a {type(data).__name__}: give a dataset's name "
                            f"({', '.join(DATASETS)}), a CSV's path or a pandas DataFrame")
