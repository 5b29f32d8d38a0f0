"""Forecasting new data with a finished run: the next H values of every channel, in the data's
own units, with timestamps that continue the series.

A run stores what inference needs in its ``result.json`` (``inference``, an
:class:`InferenceRecord`): the channels, the series' frequency and time span, the digest of the
training file and, for the LDPT backbone, the z-score scaler it used (the training split's
per-channel mean and std). The training file is not needed again. A linear forecaster stores no
scaler: its kernel is equivariant to per-channel affine maps (``K (a x + b) = a K x + b``), so
it forecasts in any units, exactly as it forecast the z-scored test split.

Every finished run (:func:`qpriv.forecasting.artifacts.load_run`) is a :class:`ForecastingRun`::

    run = load_run("runs/ldpt-eps0.1")
    frame = run.forecast("new-meters.csv")            # or a DataFrame; the last L rows
    frame = run.forecast(df, at="2018-01-01 12:00")   # the window ending at that timestamp
    frame.attrs["claims"]                             # the run's privacy claims, as JSON

The result is a DataFrame indexed by the H future timestamps with one column per channel (the
mean over the passes) and, for methods that draw noise at inference (LDPT, its ablations,
DP-Input, the bottlenecks), one ``<channel>_std`` column per channel: the standard deviation
over the passes, each with fresh noise as in training (ddof 1; NaN with a single pass).
Deterministic methods make one pass and have no spread columns.
"""

from __future__ import annotations

import functools
import math
import os
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from qpriv.errors import ArgumentError, InvalidInputError, require_positive_int
from qpriv.forecasting.csv_input import (
    CsvFormat,
    checked_dataframe,
    csv_header,
    load_frame,
    series_frequency,
)
from qpriv.forecasting.datasets import DATASETS, file_sha256
from qpriv.forecasting.records import ForecastRequest, ForecastResult
from qpriv.forecasting.series import ZScoreScaler
from qpriv.forecasting.windows import ForecastData
from qpriv.privacy.claims import PrivacyClaim
from qpriv.runs.files import atomic_write_json, atomic_write_text
from qpriv.training.seeding import derive_seed

__all__ = [
    "DEFAULT_NOISY_PASSES",
    "Forecast",
    "ForecastingRun",
    "InferenceRecord",
    "claims_path",
    "series_frequency",
]

DEFAULT_NOISY_PASSES = 10
"""Passes of a method that draws noise at inference, where its run evaluated with one."""
LINEAR_SCALER_NOTE = ("no scaler is stored: the linear forecaster is equivariant to per-channel "
                      "affine maps and forecasts in the data's own units (the run's errors, "
                      "z-scored and per channel in those units, reveal the training split's "
                      "std: the claim names it)")
BACKBONE_SCALER_NOTE = ("the z-score the model was trained and tested in: the training split's "
                        "per-channel mean and std (population), released in the clear with the "
                        "model and not accounted")
STD_SUFFIX = "_std"


def _same_frequency(a: str, b: str) -> bool:
    return pd.tseries.frequencies.to_offset(a) == pd.tseries.frequencies.to_offset(b)


SOURCE_NOTE = ("config.json records the training file's path and sha256 (so that a forecast "
               "or an audit can check the data it reads); they identify the file exactly and "
               "no guarantee covers them: share the weights and result.json, not config.json")
"""The note of a run trained on a user's CSV: its digest stays in the run's settings only."""


def source_notes(source_sha256: str | None) -> tuple[str, ...]:
    """The notes every claim of a run adds for its training file: :data:`SOURCE_NOTE` where
    the run's settings record a user's CSV by its digest (``source_sha256`` not None; a named
    dataset records none), since that digest escapes every guarantee; none otherwise."""
    return (SOURCE_NOTE,) if source_sha256 is not None else ()


def released_digest(digest: str | None) -> str | None:
    """``digest`` where it is a named dataset's published sha256 (public already), else None.

    The digest of private training data is outside every guarantee (changing one value
    changes it, and anyone holding a candidate file can confirm it exactly), so result.json
    and a forecast's output never carry it; config.json keeps it for the run's own checks
    (:data:`SOURCE_NOTE`)."""
    return digest if digest in {spec.sha256 for spec in DATASETS.values()} else None


MAX_PASSES = 10_000
"""The most passes a forecast averages: the spread of a mean over them is a hundredth of one
pass's, far below what a forecast's digits show."""


@dataclass(frozen=True)
class InferenceRecord:
    """What forecasting new data needs from the training data, stored in ``result.json``.

    ``channels`` in the model's order; ``date_column`` the name of the file's date column;
    ``freq`` its pandas frequency (None: uneven); ``first_timestamp`` / ``last_timestamp`` /
    ``rows`` the training file's span; ``source_sha256`` its digest where that is a named
    dataset's published one (:func:`released_digest`; None for a user's CSV), to tell new data
    from the training file; ``scaler`` the z-score the model works in (None for the linear
    family, see the module docstring) and ``scaler_note`` what it is.
    """

    channels: tuple[str, ...]
    date_column: str
    freq: str | None
    first_timestamp: str
    last_timestamp: str
    rows: int
    source_sha256: str | None
    scaler: ZScoreScaler | None
    scaler_note: str

    @classmethod
    def from_data(cls, data: ForecastData, *, keep_scaler: bool) -> InferenceRecord:
        """The record of a run trained on ``data`` (its scaler kept when ``keep_scaler``)."""
        if data.dates is None:
            raise InvalidInputError("the data has no timestamps: load it with "
                                    "load_forecasting_data")
        dates = data.dates
        start, stop = data.split.train
        return cls(
            channels=tuple(data.channels), date_column=str(dates.name or "date"),
            freq=series_frequency(dates), first_timestamp=dates[0].isoformat(),
            last_timestamp=dates[-1].isoformat(), rows=len(dates),
            source_sha256=released_digest(data.source_sha256),
            scaler=data.scaler if keep_scaler else None,
            scaler_note=(f"{BACKBONE_SCALER_NOTE}; fitted on rows [{start}, {stop})"
                         if keep_scaler else LINEAR_SCALER_NOTE))

    def to_json(self) -> dict[str, Any]:
        """The JSON form stored as ``result.json``'s ``inference``."""
        scaler = None if self.scaler is None else {"mean": self.scaler.mean.tolist(),
                                                   "std": self.scaler.std.tolist()}
        return {"channels": list(self.channels), "date_column": self.date_column,
                "freq": self.freq, "first_timestamp": self.first_timestamp,
                "last_timestamp": self.last_timestamp, "rows": self.rows,
                "source_sha256": self.source_sha256, "scaler": scaler,
                "scaler_note": self.scaler_note}

    @classmethod
    def from_json(cls, entry: Mapping[str, Any]) -> InferenceRecord:
        """Read :meth:`to_json`'s form back.

        Raises:
            InvalidInputError: a missing or garbled field.
        """
        try:
            scaler = entry["scaler"]
            if scaler is not None:
                mean = np.asarray(scaler["mean"], dtype=np.float64)
                std = np.asarray(scaler["std"], dtype=np.float64)
                if mean.shape != std.shape or mean.shape != (len(entry["channels"]),):
                    raise ValueError("the scaler does not have one mean and std per channel")
                mean.setflags(write=False)
                std.setflags(write=False)
                scaler = ZScoreScaler(mean=mean, std=std)
            return cls(channels=tuple(str(c) for c in entry["channels"]),
                       date_column=str(entry["date_column"]), freq=entry["freq"],
                       first_timestamp=str(entry["first_timestamp"]),
                       last_timestamp=str(entry["last_timestamp"]), rows=int(entry["rows"]),
                       source_sha256=entry["source_sha256"], scaler=scaler,
                       scaler_note=str(entry.get("scaler_note", "")))
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidInputError(f"result.json's inference record lacks or garbles {exc}; "
                                    "re-run the training into a fresh directory") from exc


@dataclass(frozen=True)
class Forecast:
    """One forecast of a run and what it says about itself.

    ``frame``: the H future timestamps (index, named as the training file's date column) by
    channel means and, for a noisy method, ``<channel>_std`` spreads. ``passes`` the passes
    averaged (1 for a deterministic method), ``noisy`` whether the method draws noise at
    inference. ``source`` the file read (or ``"a DataFrame"``), ``new_data`` whether its sha256
    differs from the training file's (None for a DataFrame: no file to compare).
    ``window_end`` the last timestamp of the look-back. ``claims`` the run's privacy claims.
    """

    frame: pd.DataFrame
    channels: tuple[str, ...]
    run_dir: Path
    method: str
    privacy: str
    source: str
    source_sha256: str | None
    training_sha256: str | None
    new_data: bool | None
    window_end: pd.Timestamp
    seq_len: int
    freq: str
    passes: int
    noisy: bool
    seed: int | None
    claims: tuple[PrivacyClaim, ...]

    @property
    def spread_columns(self) -> dict[str, str]:
        """channel -> the column of its spread (empty for a deterministic method)."""
        return _spread_columns(self.channels) if self.noisy else {}

    def summary(self) -> dict[str, Any]:
        """Everything but the values: the run, the data, the passes and the claims (each with
        value, delta, kind, accounting, unit and covers), as JSON."""
        return {
            "run": str(self.run_dir), "method": self.method, "privacy": self.privacy,
            "source": self.source, "source_sha256": self.source_sha256,
            "training_sha256": released_digest(self.training_sha256),
            "new_data": self.new_data,
            "window_end": self.window_end.isoformat(), "seq_len": self.seq_len,
            "horizon": len(self.frame), "freq": self.freq, "channels": list(self.channels),
            "passes": self.passes, "noisy": self.noisy, "seed": self.seed,
            "spread": ("standard deviation over the passes (ddof 1), column <channel>_std"
                       if self.noisy else None),
            "claims": [claim_json(claim) for claim in self.claims],
        }

    def to_json(self) -> dict[str, Any]:
        """:meth:`summary` with the timestamps, the forecasts and the spreads (NaN as null)."""
        spreads = self.spread_columns
        return {
            **self.summary(),
            "timestamps": [t.isoformat() for t in self.frame.index],
            "forecast": {c: _finite_list(self.frame[c]) for c in self.channels},
            "std": ({c: _finite_list(self.frame[col]) for c, col in spreads.items()}
                    if spreads else None),
        }

    def write_csv(self, path: str | Path, *, overwrite: bool = False) -> tuple[Path, Path]:
        """Write the frame to the CSV ``path`` (its date column first, full precision) and the
        :meth:`summary` beside it as ``<path>.claims.json``, each atomically; return both
        paths. ``pandas.read_csv(path, index_col=0, parse_dates=True)`` reads the frame back.
        Neither may be the data read, nor lie in the run's directory; existing files are
        replaced only when ``overwrite``.

        Raises:
            InvalidInputError: see :func:`check_output_path`.
        """
        read = Path(self.source)
        keep = [self.run_dir, *([read] if read.is_file() else [])]
        path = check_output_path(path, overwrite=overwrite, keep=keep)
        sidecar = claims_path(path)
        atomic_write_json(sidecar, self.summary())
        atomic_write_text(path, self.frame.to_csv(index_label=self.frame.index.name))
        return path, sidecar


def claims_path(path: str | Path) -> Path:
    """Where :meth:`Forecast.write_csv` puts the claims of the CSV ``path``."""
    path = Path(path)
    return path.with_name(path.name + ".claims.json")


def check_output_path(path: str | Path, *, overwrite: bool = False,
                      keep: Sequence[str | Path] = ()) -> Path:
    """``path`` as a Path if a forecast CSV (and its ``<path>.claims.json``) may be written
    there: never over a file of ``keep`` (the data read, a run's directory and the files it
    holds; a new file inside it is fine), and over an existing file only when ``overwrite``.

    Raises:
        InvalidInputError: ``path`` is a directory; its directory is a file, does not exist
            or is not writable; it or its claims file is one of ``keep`` or lies inside one;
            it or its claims file exists and ``overwrite`` is False.
    """
    path = Path(path).expanduser()
    if path.is_dir():
        raise InvalidInputError(f"--out {path} is a directory; name the CSV file to write, "
                                f"e.g. {path / 'forecast.csv'}")
    if path.parent.exists() and not path.parent.is_dir():
        raise InvalidInputError(f"--out {path}: {path.parent} is a file, not a directory; "
                                "write elsewhere")
    if not path.parent.is_dir():
        raise InvalidInputError(f"--out {path}: its directory {path.parent} does not exist; "
                                "create it first or write elsewhere")
    if not os.access(path.parent, os.W_OK):
        raise InvalidInputError(f"--out {path}: its directory {path.parent} is not writable; "
                                "write elsewhere")
    kept_paths = [Path(kept).expanduser().resolve() for kept in keep]
    for target in (path, claims_path(path)):
        resolved = target.resolve()
        for kept in kept_paths:
            # a new file inside a kept folder (RUN/fc.csv) overwrites nothing the forecast reads
            if resolved == kept or (kept in resolved.parents and resolved.exists()):
                raise InvalidInputError(
                    f"--out {path} would overwrite {target} of {kept}, which this forecast "
                    "reads; write the forecast elsewhere")
        if target.exists() and not overwrite:
            raise InvalidInputError(f"--out {path}: {target} exists; pass --force to replace "
                                    "it, or write elsewhere")
    return path


def claim_json(claim: PrivacyClaim) -> dict[str, Any]:
    """A claim's JSON form, with ``delta`` always present (null for a pure eps)."""
    return {"delta": claim.delta, **claim.to_json()}


def _finite_list(values: pd.Series) -> list[float | None]:
    return [float(v) if math.isfinite(v) else None for v in values]


def _spread_columns(channels: Sequence[str]) -> dict[str, str]:
    """channel -> ``<channel>_std``, an underscore more while the name is a channel's own."""
    taken = set(channels)
    out = {}
    for channel in channels:
        name = f"{channel}{STD_SUFFIX}"
        while name in taken:
            name = f"{channel}_{name[len(channel):]}"
        taken.add(name)
        out[channel] = name
    return out


@dataclass(frozen=True)
class _Series:
    """The data a forecast reads: the run's channels as float64, by timestamp."""

    values: np.ndarray
    index: pd.DatetimeIndex
    source: str
    sha256: str | None


class ForecastingRun(ABC):
    """What every finished run offers: forecasts of new data, in the data's own units.

    Subclasses (:class:`qpriv.forecasting.artifacts.LoadedRun` for the LDPT backbone,
    :class:`qpriv.forecasting.artifacts.LinearRun` for the linear family) hold ``run_dir``,
    ``request``, ``result`` and ``data_dir``, load the run's data (:meth:`data`) and make the
    passes of one window (:meth:`predict_window`).
    """

    run_dir: Path
    request: ForecastRequest
    result: ForecastResult
    data_dir: Path | None
    keeps_scaler: bool = True
    """Whether the model works in the training scaler's units (the backbone) or in any
    (the linear family)."""

    @property
    def method(self) -> str:
        """The method name (``ldpt``, ``classical``, ``dp-linear``, ...)."""
        return self.result.method

    @property
    @abstractmethod
    def noisy(self) -> bool:
        """Whether a forward pass draws noise, so that passes differ."""

    @abstractmethod
    def data(self, *, limit_eval: bool = True) -> ForecastData:
        """The run's data, loaded as the run loaded it."""

    @abstractmethod
    def predict_window(self, window: np.ndarray, *, passes: int, seed: int) -> np.ndarray:
        """``passes`` forecasts ``(passes, H, C)`` of one look-back ``window (L, C)``, both in
        the data's own units (float64); pass m draws its noise from ``seed + m``."""

    @functools.cached_property
    def inference(self) -> InferenceRecord:
        """What forecasting needs (``result.json``'s ``inference``); for a run from before it
        was stored, recomputed from the run's training file.

        Raises:
            InvalidInputError: an old run whose training file cannot be found.
        """
        entry = self.result.raw.get("inference")
        if isinstance(entry, Mapping):
            return InferenceRecord.from_json(entry)
        try:
            data = self.data()
        except InvalidInputError as exc:
            raise InvalidInputError(
                f"run {self.run_dir} was trained before runs stored what forecasting needs (the "
                f"scaler, the frequency), and its training data cannot be read again ({exc}); "
                "pass its file with data_dir= or re-run the training") from exc
        return InferenceRecord.from_data(data, keep_scaler=self.keeps_scaler)

    @property
    def claims(self) -> tuple[PrivacyClaim, ...]:
        """Every privacy claim the run states: its own and, for LDPT, the rigorous token,
        window and record claims beside them."""
        entries = self.result.raw.get("claims")
        claims = ([PrivacyClaim.from_json(e) for e in entries] if isinstance(entries, list)
                  else list(self.result.claims.values()))
        return (*claims, *self.result.rigorous_claims.values())

    @property
    def default_passes(self) -> int:
        """The passes a forecast averages by default: the run's evaluation passes, at least
        :data:`DEFAULT_NOISY_PASSES` for a noisy method; one for a deterministic one."""
        if not self.noisy:
            return 1
        used = self.request.raw.get("eval_passes") or 1
        return int(used) if used > 1 else DEFAULT_NOISY_PASSES

    def forecast(self, data: pd.DataFrame | str | Path, *, at: str | pd.Timestamp | None = None,
                 passes: int | None = None, seed: int | None = None) -> pd.DataFrame:
        """The next H values of every channel after the look-back window ending at ``at``
        (default: the last row), in the data's own units.

        ``data`` is a DataFrame (a DatetimeIndex or a ``date`` column, and the run's channels
        as columns of any float or integer dtype; other columns are ignored) or the path of a
        CSV (as ``qpriv train --csv`` reads). The result is :meth:`forecast_report`'s frame:
        indexed by the future timestamps, one column per channel (the mean over ``passes``),
        and ``<channel>_std`` columns for a noisy method; ``frame.attrs`` holds the method,
        ``new_data``, ``passes`` and ``claims`` (JSON).

        Raises:
            InvalidInputError: see :meth:`forecast_report`.
        """
        report = self.forecast_report(data, at=at, passes=passes, seed=seed)
        summary = report.summary()
        frame = report.frame.copy()
        frame.attrs = {key: summary[key] for key in ("run", "method", "privacy", "new_data",
                                                     "window_end", "passes", "noisy", "claims")}
        return frame

    def forecast_report(self, data: pd.DataFrame | str | Path, *,
                        at: str | pd.Timestamp | None = None, passes: int | None = None,
                        seed: int | None = None) -> Forecast:
        """:meth:`forecast` with everything about it (:class:`Forecast`).

        ``passes`` (default :attr:`default_passes`) has no effect on a deterministic method;
        ``seed`` (default: derived from the run's seed) seeds the noise of pass m as
        ``seed + m``.

        Raises:
            InvalidInputError: ``passes`` < 1 or above :data:`MAX_PASSES`; a CSV that is
                missing, a directory or unreadable; data without the run's channels (the
                missing ones are named), with another frequency than the run's (both named) or
                with bad values; ``at`` not a timestamp of the data, or with fewer than L rows
                up to it.
        """
        if passes is not None:
            passes = require_positive_int("passes", passes)
            if passes > MAX_PASSES:
                raise ArgumentError(
                    f"{{passes}} = {passes} is above {MAX_PASSES}, whose mean already has a "
                    f"hundredth of one pass's spread; ask for at most {MAX_PASSES}")
        record = self.inference
        if record.freq is None:
            raise InvalidInputError(
                f"run {self.run_dir} was trained on a series without a regular frequency, so "
                "its forecasts have no timestamps to continue; train on evenly spaced data")
        # a CSV is read as the run's training file was written (its date column, separator)
        fmt = CsvFormat.from_dict(self.request.raw.get("csv_format"))
        series = _read_series(data, record.channels, fmt=fmt)
        freq = series_frequency(series.index)
        if freq is None and len(series.index) >= 3:
            raise InvalidInputError(
                f"the timestamps of {series.source} are not evenly spaced (pandas finds no "
                f"frequency); the run's series is {record.freq!r}: give evenly spaced rows")
        if freq is not None and not _same_frequency(freq, record.freq):
            raise InvalidInputError(
                f"the frequency of {series.source} is {freq!r} but the run was trained on "
                f"{record.freq!r} data; forecast a series with the run's frequency")
        seq_len = self.request.seq_len
        end = _window_end(series.index, at=at, seq_len=seq_len, source=series.source)
        window = series.values[end - seq_len + 1:end + 1]
        gaps = np.argwhere(~np.isfinite(window))
        if gaps.size:
            row, col = gaps[0]
            raise InvalidInputError(
                f"column {record.channels[col]!r} of {series.source} has a missing value at "
                f"{series.index[end - seq_len + 1 + row]}, inside the {seq_len} rows this "
                f"forecast reads (ending {series.index[end]}); fill or interpolate it, or "
                "forecast from an earlier point (--at)")
        used_passes = (self.default_passes if passes is None else passes) if self.noisy else 1
        if seed is None:
            # a run with a secret seed recorded none: its forecasts draw from seed 0's stream
            seed = derive_seed(int(self.request.raw.get("seed") or 0), "forecast")
        draws = self.predict_window(window, passes=used_passes, seed=seed)
        last = series.index[end]
        offset = pd.tseries.frequencies.to_offset(record.freq)
        stamps = pd.date_range(start=last, periods=draws.shape[1] + 1, freq=offset)[1:]
        frame = pd.DataFrame(draws.mean(axis=0), columns=list(record.channels),
                             index=pd.DatetimeIndex(stamps, name=record.date_column))
        if self.noisy:
            spread = (draws.std(axis=0, ddof=1) if used_passes > 1
                      else np.full(draws.shape[1:], np.nan))
            for i, column in enumerate(_spread_columns(record.channels).values()):
                frame[column] = spread[:, i]
        trained_on = self._training_sha256(record)
        return Forecast(
            frame=frame, channels=record.channels, run_dir=self.run_dir, method=self.method,
            privacy=self.result.privacy, source=series.source, source_sha256=series.sha256,
            training_sha256=trained_on,
            new_data=(None if series.sha256 is None or trained_on is None
                      else series.sha256 != trained_on),
            window_end=last, seq_len=seq_len, freq=record.freq, passes=used_passes,
            noisy=self.noisy, seed=int(seed) if self.noisy else None, claims=self.claims)

    def _training_sha256(self, record: InferenceRecord) -> str | None:
        if record.source_sha256 is not None:
            return record.source_sha256
        if self.request.source_sha256 is not None:
            return self.request.source_sha256
        spec = DATASETS.get(self.request.dataset)
        return None if spec is None else spec.sha256


def _read_series(data: pd.DataFrame | str | Path, channels: Sequence[str], *,
                 fmt: CsvFormat | None = None) -> _Series:
    """The run's ``channels`` of ``data`` (a DataFrame or a CSV path, written as ``fmt`` says:
    the run's training file's format) as float64 rows."""
    if isinstance(data, pd.DataFrame):
        return _series_of_frame(data, channels)
    if not isinstance(data, (str, Path)):
        raise InvalidInputError(f"cannot forecast a {type(data).__name__}: give a pandas "
                                "DataFrame or the path of a CSV")
    path = Path(data).expanduser()
    fmt = fmt if fmt is not None else CsvFormat()
    header = csv_header(path, sep=fmt.sep)
    missing = [c for c in channels if c not in header]
    if missing:
        raise InvalidInputError(
            f"{path} lacks the run's channels {missing} (the run forecasts {list(channels)}; "
            f"the file has {header}); give a CSV with those columns")
    # gaps outside the look-back do not matter: the forecast checks the rows it reads
    frame = load_frame(path, columns=list(channels), selectable=False, allow_missing=True,
                       fmt=fmt)
    return _Series(values=frame.to_numpy(dtype=np.float64), index=pd.DatetimeIndex(frame.index),
                   source=str(path), sha256=file_sha256(path))


def _series_of_frame(frame: pd.DataFrame, channels: Sequence[str]) -> _Series:
    missing = [c for c in channels if c not in frame.columns]
    if missing:
        raise InvalidInputError(
            f"the DataFrame lacks the run's channels {missing} (the run forecasts "
            f"{list(channels)}; the frame has {list(frame.columns)}); add those columns")
    checked = checked_dataframe(frame, columns=list(channels), selectable=False,
                                allow_missing=True)  # a gap matters only inside the look-back
    return _Series(values=checked.to_numpy(), index=pd.DatetimeIndex(checked.index),
                   source="a DataFrame", sha256=None)


def _window_end(index: pd.DatetimeIndex, *, at: str | pd.Timestamp | None, seq_len: int,
                source: str) -> int:
    """The row of the look-back's last value: the last row, or the row at ``at``."""
    if at is None:
        end = len(index) - 1
        where = f"its last row ({index[-1]})"
    else:
        try:
            stamp = pd.Timestamp(at)
        except (ValueError, TypeError) as exc:
            raise InvalidInputError(f"--at {at!r} is not a timestamp; write it as the data's "
                                    "dates are written, e.g. '2016-07-01 00:00:00'") from exc
        if index.tz is not None and stamp.tz is None:
            stamp = stamp.tz_localize(index.tz)
        elif index.tz is None and stamp.tz is not None:
            raise InvalidInputError(f"--at {at!r} carries a UTC offset but the dates of {source} "
                                    "have none; give it without one")
        end = int(index.get_indexer([stamp])[0])
        if end < 0:
            raise InvalidInputError(
                f"--at {at!r} is not a timestamp of {source} (its rows run from {index[0]} to "
                f"{index[-1]}); give one of its dates")
        where = f"{stamp}"
    if end + 1 < seq_len:
        raise InvalidInputError(
            f"{source} has {end + 1} rows up to and including {where}, but the run's look-back "
            f"needs L = {seq_len}; give a later --at or a longer series")
    return end
