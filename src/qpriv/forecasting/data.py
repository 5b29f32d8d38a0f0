"""Forecasting data: find the ETT files, load CSVs, split, z-score and cut sliding windows.

The one front door is :func:`load_forecasting_data`::

    from qpriv.forecasting.data import load_forecasting_data

    data = load_forecasting_data("ETTh1", seq_len=336, horizon=24)
    len(data.train), len(data.val), len(data.test)     # 8281, 2857, 2857
    x, y = data.train[0]                                # (336, 7), (24, 7) float32
    xb, yb = data.train.windows(torch.arange(64))      # (64, 336, 7), (64, 24, 7)

Where the named files come from (:func:`locate_dataset`), in this order: a path you give
(``data_dir=`` / ``--data-dir``: the file itself or a directory that holds it), the directory in
``$QPRIV_DATA_DIR``, the user cache (:func:`cache_dir`: ``~/.cache/qpriv/data`` on Linux),
and last a download from the dataset's canonical address into that cache. Every file is checked
against the published sha256, so a dataset name always means the same bytes.

Splits follow the conventions the field compares against:

* ETT hourly (Informer / PatchTST): train rows [0, 8640), validation [8640 - L, 11520),
  test [11520 - L, 14400), i.e. 12 / 4 / 4 months of 30 days x 24 hours.
* Any other CSV (Time-Series-Library's "custom" loader): 70 % / 10 % / 20 % of the rows, with
  the same look-back overlap of L rows at the start of validation and test.

The validation and test splits start L rows before their first target so that their first
window forecasts the first row after the previous split. A z-score scaler (population std,
as scikit-learn's ``StandardScaler``) is fitted on the training rows only and applied to all.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import logging
import operator
import os
import sys
import tempfile
import time
import urllib.error
import urllib.request
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, NamedTuple, TypeVar

import numpy as np
import pandas as pd
import torch
from torch.utils.data import Dataset

from qpriv.errors import InvalidInputError, require_positive_int

__all__ = [
    "CUSTOM",
    "DATASETS",
    "DATA_DIR_ENV",
    "ETT_HOURLY",
    "DatasetSpec",
    "ForecastData",
    "SplitRows",
    "WindowDataset",
    "ZScoreScaler",
    "cache_dir",
    "cache_root",
    "dataset_spec",
    "load_forecasting_data",
    "load_frame",
    "locate_dataset",
    "split_rows",
]

log = logging.getLogger(__name__)

DATA_DIR_ENV = "QPRIV_DATA_DIR"
"""Environment variable naming a directory that holds the dataset files."""

DOWNLOAD_TIMEOUT_S = 60.0
"""Socket timeout of a dataset download, in seconds."""
STALE_DOWNLOAD_S = 3600.0
"""A partial download (``.NAME.*.part``) this old in the cache was killed: it is removed."""

SplitConvention = Literal["ett-hourly", "custom"]
ETT_HOURLY: SplitConvention = "ett-hourly"
CUSTOM: SplitConvention = "custom"

# Informer / PatchTST borders of the hourly ETT files: 12, 16 and 20 months of 30 days x 24 h.
_ETT_HOURLY_BORDERS = (12 * 30 * 24, 16 * 30 * 24, 20 * 30 * 24)  # 8640, 11520, 14400
# Time-Series-Library "custom" loader: fractions of the rows in train and test (val: the rest).
_CUSTOM_TRAIN_FRACTION = 0.7
_CUSTOM_TEST_FRACTION = 0.2

_HASH_CHUNK = 1 << 20


# --------------------------------------------------------------------------------------------
# Registry and locating files
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DatasetSpec:
    """A named dataset: its file name, published sha256, canonical address and split rule."""

    name: str
    filename: str
    sha256: str
    url: str
    split: SplitConvention


_ETT_URL = "https://raw.githubusercontent.com/zhouhaoyi/ETDataset/main/ETT-small/"

DATASETS: dict[str, DatasetSpec] = {
    "ETTh1": DatasetSpec(
        name="ETTh1",
        filename="ETTh1.csv",
        sha256="f18de3ad269cef59bb07b5438d79bb3042d3be49bdeecf01c1cd6d29695ee066",
        url=_ETT_URL + "ETTh1.csv",
        split=ETT_HOURLY,
    ),
    "ETTh2": DatasetSpec(
        name="ETTh2",
        filename="ETTh2.csv",
        sha256="a3dc2c597b9218c7ce1cd55eb77b283fd459a1d09d753063f944967dd6b9218b",
        url=_ETT_URL + "ETTh2.csv",
        split=ETT_HOURLY,
    ),
}
"""The named datasets, by name. ETT: CC BY-ND 4.0, zhouhaoyi/ETDataset (Informer, AAAI 2021)."""


def dataset_spec(name: str) -> DatasetSpec:
    """Return the registry entry of ``name`` (case-insensitive), or raise listing known names."""
    by_lower = {key.lower(): spec for key, spec in DATASETS.items()}
    spec = by_lower.get(str(name).lower())
    if spec is None:
        known = ", ".join(sorted(DATASETS))
        raise InvalidInputError(
            f"unknown dataset {name!r}; known datasets: {known}. For any other CSV with a "
            "'date' column and numeric channels, pass the file with --csv PATH "
            "(load_forecasting_data(csv=PATH)); it is split 70/10/20."
        )
    return spec


def cache_root() -> Path:
    """qpriv's user cache, where the platform keeps them (platformdirs): on Linux
    ``$XDG_CACHE_HOME/qpriv`` or ``~/.cache/qpriv`` (an unset, empty or relative
    ``XDG_CACHE_HOME`` is ignored, as the XDG base-directory specification asks), on macOS
    ``~/Library/Caches/qpriv``, on Windows ``%LOCALAPPDATA%\\qpriv\\Cache``."""
    import platformdirs

    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if xdg and not Path(xdg).is_absolute() and sys.platform.startswith("linux"):
        return Path.home() / ".cache" / "qpriv"
    return platformdirs.user_cache_path("qpriv", appauthor=False)


def cache_dir() -> Path:
    """The user cache for downloaded datasets: :func:`cache_root` ``/ "data"``."""
    return cache_root() / "data"


def locate_dataset(
    name: str, *, path: str | Path | None = None, allow_download: bool = True
) -> Path:
    """Return the path of the named dataset's file, verified against its published sha256.

    Looks, in order, at ``path`` (the file itself, or a directory holding it), the directory in
    ``$QPRIV_DATA_DIR``, and the user cache (:func:`cache_dir`); then, if ``allow_download``,
    downloads the file from its canonical address into the cache (verified, written atomically).
    The first place that has the file wins; a file found there whose checksum does not match is
    an error (it is never silently replaced). Local checksums are computed once per process for
    a given path, modification time and size.

    Raises:
        InvalidInputError: unknown name; a file that fails its checksum; or no file anywhere
            and no download possible (the message lists every place looked at and the fixes).
    """
    spec = dataset_spec(name)
    looked: list[str] = []
    for where, candidate in _candidates(spec, path):
        if candidate is None:
            looked.append(f"{where}: (not set)")
            continue
        if candidate.is_file():
            _verify_checksum(spec, candidate)
            return candidate
        folder = candidate.parent
        reason = ("not found" if folder.is_dir() else
                  f"not found: {folder} is a file, not a directory" if folder.exists() else
                  "not found: no such directory")
        looked.append(f"{where}: {candidate} ({reason})")

    target = cache_dir() / spec.filename
    if not allow_download:
        looked.append(f"download from {spec.url}: disabled (allow_download=False)")
        raise InvalidInputError(_not_found_message(spec, looked))
    try:
        return _download(spec, target)
    except (OSError, http.client.HTTPException) as exc:
        # an error naming a file is the cache's; the network's (URLError, a timeout or reset
        # while reading) name none
        if isinstance(exc, OSError) and not isinstance(exc, urllib.error.URLError) \
                and exc.filename is not None:
            raise InvalidInputError(
                f"dataset {spec.name}: the user cache {target.parent} cannot be written "
                f"({exc}); set XDG_CACHE_HOME to a writable directory, or put {spec.filename} "
                f"in a directory named by ${DATA_DIR_ENV} or --data-dir"
            ) from exc
        looked.append(f"download from {spec.url} into {target.parent}: failed ({exc})")
        raise InvalidInputError(_not_found_message(spec, looked)) from exc


def _candidates(spec: DatasetSpec, path: str | Path | None) -> list[tuple[str, Path | None]]:
    """The local places to look at, in order, with a label for messages (None: not set)."""
    given: Path | None = None
    if path is not None:
        given = Path(path).expanduser()
        if given.is_dir():
            given = given / spec.filename
    env = os.environ.get(DATA_DIR_ENV, "")
    from_env = Path(env).expanduser() / spec.filename if env else None
    return [
        ("path given (data_dir= / --data-dir)", given),
        (f"${DATA_DIR_ENV}", from_env),
        ("user cache", cache_dir() / spec.filename),
    ]


def _not_found_message(spec: DatasetSpec, looked: Sequence[str]) -> str:
    places = "; ".join(looked)
    return (
        f"dataset {spec.name}: no usable {spec.filename}. Looked at: {places}. "
        f"Provide it in one of these ways: set {DATA_DIR_ENV} to a directory that holds "
        f"{spec.filename}; pass the file or its directory (--data-dir DIR, or data_dir= / path= "
        f"in Python); or run once with internet access so that qpriv downloads it from "
        f"{spec.url} into {cache_dir()} (verified by sha256)."
    )


_DIGESTS: dict[tuple[str, int, int], str] = {}
"""sha256 of local files already hashed in this process, by (resolved path, mtime_ns, size)."""


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(_HASH_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _file_key(path: Path) -> tuple[str, int, int]:
    stat = path.stat()
    return (str(path.resolve()), stat.st_mtime_ns, stat.st_size)


def _cached_sha256(path: Path) -> str:
    key = _file_key(path)
    if key not in _DIGESTS:
        _DIGESTS[key] = _sha256_file(path)
    return _DIGESTS[key]


def file_sha256(path: str | Path) -> str:
    """The sha256 of a file's bytes (computed once per path, size and modification time): what
    a run records of a user CSV, so that a changed file is never taken for the one trained on."""
    return _cached_sha256(Path(path))


def _verify_checksum(spec: DatasetSpec, path: Path) -> None:
    actual = _cached_sha256(path)
    if actual != spec.sha256:
        raise InvalidInputError(
            f"dataset {spec.name}: {path} fails its checksum (sha256 {actual}, published "
            f"{spec.sha256}): it is modified, truncated or a different file. Replace it with the "
            f"unmodified {spec.filename} (delete it and let qpriv download it from {spec.url}), "
            "or load a modified file as a custom CSV with --csv PATH (70/10/20 split)."
        )


def _download(spec: DatasetSpec, target: Path) -> Path:
    """Download ``spec.url`` to ``target``: temp file in the same directory, sha256, replace."""
    target.parent.mkdir(parents=True, exist_ok=True)
    for stale in target.parent.glob(f".{spec.filename}.*.part"):  # a killed download's
        with contextlib.suppress(OSError):
            if time.time() - stale.stat().st_mtime > STALE_DOWNLOAD_S:
                stale.unlink()
    log.info("downloading %s from %s to %s", spec.name, spec.url, target)
    handle = tempfile.NamedTemporaryFile(  # noqa: SIM115 (closed below, unlinked on failure)
        dir=target.parent, prefix=f".{spec.filename}.", suffix=".part", delete=False
    )
    tmp = Path(handle.name)
    try:
        digest = hashlib.sha256()
        with handle, urllib.request.urlopen(spec.url, timeout=DOWNLOAD_TIMEOUT_S) as response:
            for chunk in iter(lambda: response.read(_HASH_CHUNK), b""):
                digest.update(chunk)
                handle.write(chunk)
        actual = digest.hexdigest()
        if actual != spec.sha256:
            raise InvalidInputError(
                f"dataset {spec.name}: the file downloaded from {spec.url} fails its checksum "
                f"(sha256 {actual}, published {spec.sha256}); nothing was written to "
                f"{target.parent}. Retry later, or place the unmodified {spec.filename} in "
                f"${DATA_DIR_ENV} or pass it with --data-dir."
            )
        tmp.chmod(0o644)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    _DIGESTS[_file_key(target)] = actual
    return target


# --------------------------------------------------------------------------------------------
# Loading a CSV
# --------------------------------------------------------------------------------------------


def load_frame(path: str | Path, *, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """Read a CSV with a ``date`` column and numeric channels into a checked DataFrame.

    The date column is found by name, case-insensitively, and becomes the (parsed) index; the
    other columns are the channels, as float64, in file order, or those named in ``columns``
    in that order (a single string means one column). Only the selected channels must be
    numeric.

    Raises:
        InvalidInputError: missing or unreadable file; no date column; an unknown, repeated
            or date column in ``columns``; no channel; an empty, NaN, infinite or non-numeric
            cell (the message gives the column and the file line); an unparseable date; fewer
            than two rows.
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise InvalidInputError(f"CSV file {path} does not exist (or is not a file)")
    try:  # header=None: pandas would quietly rename a repeated name (HUFL -> HUFL.1)
        raw = pd.read_csv(path, header=None, dtype=str, keep_default_na=False,
                          skipinitialspace=True)
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"cannot read {path} as CSV: it is not UTF-8 text ({exc.reason} "
                                f"at byte {exc.start}); save it as UTF-8") from exc
    except pd.errors.EmptyDataError as exc:
        raise InvalidInputError(f"cannot read {path} as CSV: the file is empty") from exc
    except pd.errors.ParserError as exc:  # pandas' text: "Error tokenizing data. C error: ..."
        detail = " ".join(str(exc).split()).split("C error: ")[-1]
        raise InvalidInputError(
            f"cannot read {path} as CSV: {detail}; every row needs as many comma-separated "
            "fields as the header") from exc
    header = raw.iloc[0].astype(str).str.strip().tolist()
    sep = next((sep for sep in (";", "\t", "|") if sep in header[0]), None)
    if len(header) == 1 and sep is not None:
        raise InvalidInputError(
            f"{path} is not comma-separated: its header {header[0]!r} is one field holding "
            f"{sep!r}; write the file with commas between the fields")
    raw = raw.iloc[1:].reset_index(drop=True)
    raw.columns = header
    repeated = sorted({name for name in header if header.count(name) > 1})
    if repeated:
        raise InvalidInputError(
            f"{path} names the columns {repeated} more than once; give every column its own name"
        )

    date_cols = [col for col in raw.columns if col.lower() == "date"]
    if not date_cols:
        raise InvalidInputError(
            f"{path} has no date column: expected a column named 'date' (any case); its columns "
            f"are {list(raw.columns)}. Add or rename the timestamp column to 'date'."
        )
    if len(date_cols) > 1:
        raise InvalidInputError(
            f"{path} has several date columns {date_cols}; keep one column named 'date'."
        )
    date_col = date_cols[0]
    available = [col for col in raw.columns if col != date_col]
    channels = _select_channels(path, available, date_col, columns)

    if len(raw) < 2:
        raise InvalidInputError(
            f"{path} has {len(raw)} data row(s); a forecasting series needs at least two "
            "(in practice seq_len + horizon rows in each split)."
        )

    values = {col: _numeric_column(path, raw, col) for col in channels}
    dates = _parse_dates(path, raw[date_col])
    frame = pd.DataFrame(values, index=pd.DatetimeIndex(dates, name=date_col))
    return frame


def _select_channels(
    path: Path, available: list[str], date_col: str, columns: Sequence[str] | None
) -> list[str]:
    if columns is None:
        selected = list(available)
    else:
        selected = [columns] if isinstance(columns, str) else [str(col) for col in columns]
        for col in selected:
            if col == date_col:
                raise InvalidInputError(
                    f"column {col!r} of {path} is the date column, not a channel; "
                    f"available channels: {available}"
                )
            if col not in available:
                raise InvalidInputError(
                    f"unknown column {col!r} in {path}; available channels: {available}"
                )
        repeated = sorted({col for col in selected if selected.count(col) > 1})
        if repeated:
            raise InvalidInputError(f"columns {repeated} are selected more than once")
    if not selected:
        raise InvalidInputError(
            f"{path} has no channel to forecast: it needs numeric columns besides {date_col!r}"
            if columns is None
            else f"columns is empty; choose from {available}"
        )
    return selected


def _numeric_column(path: Path, raw: pd.DataFrame, col: str) -> np.ndarray:
    text = raw[col].astype(str).str.strip()
    values = pd.to_numeric(text, errors="coerce").to_numpy(dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(values))
    if bad.size == 0:
        return values
    row = int(bad[0])
    cell = text.iloc[row]
    if cell == "":
        problem = "an empty cell"
    elif np.isnan(values[row]) and cell.lower() in {"nan", "na", "n/a", "null", "none"}:
        problem = f"a missing value ({cell!r})"
    elif np.isnan(values[row]):
        problem = f"a non-numeric cell {cell!r}"
    else:
        problem = f"an infinite value {cell!r}"
    more = f" ({bad.size} bad cells in this column)" if bad.size > 1 else ""
    raise InvalidInputError(
        f"column {col!r} of {path} has {problem} at line {row + 2} (data row {row + 1}){more}; "
        "every channel needs a finite number in every row: fill or interpolate the gaps, or "
        "leave the column out with --columns / columns=."
    )


def _to_datetime(text: pd.Series, *, utc: bool) -> pd.Series:
    with warnings.catch_warnings():  # "could not infer format": a bad date is reported after
        warnings.simplefilter("ignore", UserWarning)
        return pd.to_datetime(text, errors="coerce", utc=utc)


def _parse_dates(path: Path, text: pd.Series) -> pd.DatetimeIndex:
    text = text.astype(str).str.strip()
    in_utc = False
    try:
        parsed = _to_datetime(text, utc=False)
    except (ValueError, TypeError) as exc:
        if "mixed timezones" not in str(exc).lower():
            raise InvalidInputError(f"cannot parse the date column of {path}: {exc}") from exc
        # Dates with different UTC offsets (a daylight-saving change, say) name instants
        # unambiguously: compare them in UTC. A date without an offset among them is refused.
        parsed = _to_datetime(text, utc=True)
        in_utc = True
    bad = np.flatnonzero(parsed.isna().to_numpy())
    if bad.size:
        row = int(bad[0])
        hint = ("; the other dates carry a UTC offset, so give this one an offset too (e.g. "
                "'2016-07-01 00:00:00+00:00')" if in_utc else
                "; write every date in one format, e.g. ISO 8601 '2016-07-01 00:00:00'")
        raise InvalidInputError(
            f"the date column of {path} has an unparseable or empty date {text.iloc[row]!r} at "
            f"line {row + 2} (data row {row + 1}){hint}."
        )
    index = pd.DatetimeIndex(parsed)
    steps = np.flatnonzero(np.diff(index.asi8) <= 0)
    if steps.size:  # windows are cut in file order: it must be time order
        row = int(steps[0]) + 1
        raise InvalidInputError(
            f"the dates of {path} are not strictly increasing: line {row + 2} "
            f"({text.iloc[row]!r}) does not come after line {row + 1} ({text.iloc[row - 1]!r}); "
            "sort the file by date and keep one row per timestamp"
        )
    return index


# --------------------------------------------------------------------------------------------
# Splits and scaling
# --------------------------------------------------------------------------------------------


class SplitRows(NamedTuple):
    """Row ranges [start, stop) of the three splits in the file; val and test include the
    L look-back rows before their first target."""

    train: tuple[int, int]
    val: tuple[int, int]
    test: tuple[int, int]


def split_rows(
    n_rows: int, *, seq_len: int, horizon: int, convention: SplitConvention
) -> SplitRows:
    """Row ranges of train, val and test for a series of ``n_rows`` rows.

    ``"ett-hourly"``: [0, 8640), [8640 - L, 11520), [11520 - L, 14400) (Informer / PatchTST);
    needs 14400 rows. ``"custom"``: n_train = int(0.7 n), n_test = int(0.2 n), the rest val;
    [0, n_train), [n_train - L, n - n_test), [n - n_test - L, n) (Time-Series-Library).

    Raises:
        InvalidInputError: unknown convention, too few rows for the ETT borders, or a split
            with fewer than L + H rows (it could not hold one window).
    """
    seq_len = require_positive_int("seq_len", seq_len)
    horizon = require_positive_int("horizon", horizon)
    if convention == ETT_HOURLY:
        train_end, val_end, test_end = _ETT_HOURLY_BORDERS
        if n_rows < test_end:
            raise InvalidInputError(
                f"the ETT hourly split needs {test_end} rows (train [0, {train_end}), val up to "
                f"{val_end}, test up to {test_end}); the series has {n_rows}"
            )
    elif convention == CUSTOM:
        train_end = int(n_rows * _CUSTOM_TRAIN_FRACTION)
        test_rows = int(n_rows * _CUSTOM_TEST_FRACTION)
        val_end, test_end = n_rows - test_rows, n_rows
    else:
        raise InvalidInputError(
            f"unknown split convention {convention!r}; use {ETT_HOURLY!r} or {CUSTOM!r}"
        )
    rows = SplitRows(
        train=(0, train_end),
        val=(train_end - seq_len, val_end),
        test=(val_end - seq_len, test_end),
    )
    need = seq_len + horizon
    for split, (start, stop) in zip(SplitRows._fields, rows, strict=True):
        if stop - start < need:
            lookback = "" if split == "train" else f", including its {seq_len} look-back rows"
            raise InvalidInputError(
                f"the {split} split has {max(stop - start, 0)} rows (rows [{max(start, 0)}, "
                f"{stop}) of {n_rows}, {convention} convention{lookback}), but seq_len L = "
                f"{seq_len} plus horizon H = {horizon} needs at least {need} rows for one "
                "window; use a shorter seq_len or horizon, or a longer series."
            )
    return rows


_Array = TypeVar("_Array", np.ndarray, torch.Tensor)


@dataclass(frozen=True, eq=False)
class ZScoreScaler:
    """Per-channel z-score: ``(x - mean) / std`` with the population std (ddof = 0).

    ``mean`` and ``std`` are float64 arrays of shape (C,), read-only. Both transforms act on
    the last axis of numpy arrays or torch tensors (any device, the input's dtype).
    """

    mean: np.ndarray
    std: np.ndarray

    @classmethod
    def fit(
        cls,
        values: np.ndarray,
        *,
        channels: Sequence[str] | None = None,
        where: str = "the fitting rows",
    ) -> ZScoreScaler:
        """Fit on ``values`` of shape (rows, C); a constant channel (std 0) is an error."""
        values = np.asarray(values, dtype=np.float64)
        if values.ndim != 2 or values.shape[0] < 1:
            raise InvalidInputError(
                f"the scaler needs a (rows, channels) array, got {values.shape}"
            )
        with np.errstate(over="ignore", invalid="ignore"):  # overflow is reported below
            mean = values.mean(axis=0)
            std = values.std(axis=0)
        names = list(channels) if channels is not None else [str(i) for i in range(len(std))]
        for i in np.flatnonzero(~(np.isfinite(mean) & np.isfinite(std))):
            raise InvalidInputError(
                f"channel {names[i]!r} on {where} has values too large to z-score in float64 "
                "(its mean or std overflows); rescale the column, e.g. to other units"
            )
        for i, (m, s) in enumerate(zip(mean, std, strict=True)):
            if not s > 1e-12 * max(1.0, abs(m)):
                raise InvalidInputError(
                    f"channel {names[i]!r} is constant on {where} (value {m:g}, std {s:g}): "
                    "its z-score would divide by zero. Leave it out with --columns / columns=."
                )
        mean.setflags(write=False)
        std.setflags(write=False)
        return cls(mean=mean, std=std)

    def transform(self, values: _Array) -> _Array:
        """Scale: ``(values - mean) / std`` over the last axis."""
        mean, std = self._like(values)
        return (values - mean) / std

    def inverse_transform(self, values: _Array) -> _Array:
        """Unscale: ``values * std + mean`` over the last axis."""
        mean, std = self._like(values)
        return values * std + mean

    def _like(self, values: np.ndarray | torch.Tensor) -> tuple:
        if isinstance(values, torch.Tensor):
            kwargs = {"dtype": values.dtype, "device": values.device}
            return torch.tensor(self.mean, **kwargs), torch.tensor(self.std, **kwargs)
        return self.mean, self.std


# --------------------------------------------------------------------------------------------
# Windows
# --------------------------------------------------------------------------------------------


class WindowDataset(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """Sliding windows (stride 1) over one split of a scaled series.

    Item i is ``(x, y)``: x the L rows starting at window start s_i, y the H rows after them,
    float32 tensors of shape (L, C) and (H, C) that are views of the stored series (no copy
    per window). :meth:`windows` fetches a batch by an index tensor in one gather, for
    training loops that batch without a DataLoader.

    Args:
        series: (T, C) float tensor of this split's rows, stored as given (not copied).
        seq_len: look-back L.
        horizon: forecast length H.
        max_windows: keep at most this many windows, evenly spaced over the split (first and
            last window included, starts rounded to the nearest row), so that a small budget
            still sees the whole period; None keeps all T - L - H + 1.
        row_offset: row of ``series[0]`` in the source file (for reports and checks).
    """

    def __init__(
        self,
        series: torch.Tensor,
        *,
        seq_len: int,
        horizon: int,
        max_windows: int | None = None,
        row_offset: int = 0,
    ) -> None:
        self.seq_len = require_positive_int("seq_len", seq_len)
        self.horizon = require_positive_int("horizon", horizon)
        if not isinstance(series, torch.Tensor) or series.ndim != 2:
            raise InvalidInputError("series must be a 2-D tensor (rows, channels)")
        self.series = series
        self.row_offset = int(row_offset)
        self.n_available = series.shape[0] - self.seq_len - self.horizon + 1
        if self.n_available < 1:
            raise InvalidInputError(
                f"a series of {series.shape[0]} rows holds no window of seq_len L = "
                f"{self.seq_len} plus horizon H = {self.horizon} (needs at least "
                f"{self.seq_len + self.horizon} rows)"
            )
        device = series.device
        if max_windows is None or max_windows >= self.n_available:
            if max_windows is not None:
                require_positive_int("max_windows", max_windows)
            self.starts = torch.arange(self.n_available, device=device)
        else:
            n = require_positive_int("max_windows", max_windows)
            spaced = np.floor(np.linspace(0, self.n_available - 1, n) + 0.5).astype(np.int64)
            self.starts = torch.as_tensor(spaced, device=device)
        self._all = len(self.starts) == self.n_available
        self._x_rows = torch.arange(self.seq_len, device=device)
        self._y_rows = torch.arange(self.seq_len, self.seq_len + self.horizon, device=device)

    @property
    def n_channels(self) -> int:
        """Number of channels C."""
        return int(self.series.shape[1])

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        i = operator.index(index)
        n = len(self.starts)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"window {index} out of range for {n} windows")
        start = i if self._all else int(self.starts[i])
        mid = start + self.seq_len
        return self.series[start:mid], self.series[mid : mid + self.horizon]

    def windows(
        self, index: torch.Tensor | Sequence[int] | np.ndarray
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Batch of windows by item index: x of shape (B, L, C), y of shape (B, H, C).

        One advanced-indexing gather each for x and y (contiguous results, on the series'
        device); ``windows(idx)[0][b]`` equals ``self[idx[b]][0]``.
        """
        idx = torch.as_tensor(index, dtype=torch.long, device=self.series.device)
        starts = self.starts[idx].unsqueeze(-1)
        return self.series[starts + self._x_rows], self.series[starts + self._y_rows]

    def to(self, device: torch.device | str) -> WindowDataset:
        """The same windows with the series on ``device`` (self if already there)."""
        device = torch.device(device)
        if self.series.device == device:
            return self
        moved = object.__new__(WindowDataset)
        moved.__dict__.update(self.__dict__)
        moved.series = self.series.to(device)
        moved.starts = self.starts.to(device)
        moved._x_rows = self._x_rows.to(device)
        moved._y_rows = self._y_rows.to(device)
        return moved

    def __repr__(self) -> str:
        subset = "" if self._all else f" of {self.n_available}"
        return (
            f"WindowDataset({len(self)}{subset} windows, L={self.seq_len}, H={self.horizon}, "
            f"C={self.n_channels}, rows from {self.row_offset})"
        )


# --------------------------------------------------------------------------------------------
# Front door
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ForecastData:
    """Train, validation and test windows of one scaled series, and what made them.

    The three datasets are views of one float32 tensor of the scaled rows; ``scaler`` maps
    back to the file's units. ``split`` holds the row ranges in the file (val and test
    include their L look-back rows); ``convention`` is ``"ett-hourly"`` or ``"custom"``.
    """

    dataset: str
    source: Path
    channels: tuple[str, ...]
    scaler: ZScoreScaler
    train: WindowDataset
    val: WindowDataset
    test: WindowDataset
    seq_len: int
    horizon: int
    convention: SplitConvention
    split: SplitRows

    @property
    def n_channels(self) -> int:
        """Number of channels C."""
        return len(self.channels)


def load_forecasting_data(
    dataset: str | None = "ETTh1",
    *,
    csv: str | Path | None = None,
    columns: Sequence[str] | None = None,
    seq_len: int = 336,
    horizon: int = 24,
    data_dir: str | Path | None = None,
    allow_download: bool = True,
    max_train_windows: int | None = None,
    max_eval_windows: int | None = None,
) -> ForecastData:
    """Load, split, z-score and window a forecasting series.

    Args:
        dataset: a registered name (``ETTh1``, ``ETTh2``; see :data:`DATASETS`), located by
            :func:`locate_dataset` and split by its convention (ETT hourly borders).
        csv: any CSV with a ``date`` column instead of a named dataset; it takes precedence
            over ``dataset`` (and ``data_dir`` is not used) and is split 70/10/20. The result's
            ``dataset`` is the file's stem.
        columns: channels to keep, in this order (default: all but the date).
        seq_len: look-back L (>= 1).
        horizon: forecast length H (>= 1).
        data_dir: the dataset's file or a directory holding it (searched first).
        allow_download: download a named dataset that is not found locally.
        max_train_windows: at most this many evenly spaced training windows (None: all).
        max_eval_windows: the same for validation and test.

    Returns:
        :class:`ForecastData`; the scaler is fitted on the training rows only.

    Raises:
        InvalidInputError: bad arguments, a file that cannot be found or fails its checksum,
            a bad CSV (see :func:`load_frame`), a channel constant on the training rows, or a
            split too short for L + H.

    Example::

        data = load_forecasting_data("ETTh1", seq_len=336, horizon=96, max_eval_windows=512)
        x, y = data.train.windows(torch.randint(len(data.train), (64,)))
    """
    seq_len = require_positive_int("seq_len", seq_len)
    horizon = require_positive_int("horizon", horizon)
    for name, value in (
        ("max_train_windows", max_train_windows),
        ("max_eval_windows", max_eval_windows),
    ):
        if value is not None:
            require_positive_int(name, value)

    if csv is not None:
        source = Path(csv).expanduser()
        name, convention = source.stem, CUSTOM
    elif dataset is not None:
        spec = dataset_spec(dataset)
        source = locate_dataset(spec.name, path=data_dir, allow_download=allow_download)
        name, convention = spec.name, spec.split
    else:
        raise InvalidInputError(
            "no data given: name a dataset (ETTh1, ETTh2; --dataset) or pass a CSV (--csv PATH)"
        )

    frame = load_frame(source, columns=columns)
    rows = split_rows(len(frame), seq_len=seq_len, horizon=horizon, convention=convention)
    values = frame.to_numpy(dtype=np.float64)
    train_start, train_end = rows.train
    scaler = ZScoreScaler.fit(
        values[train_start:train_end],
        channels=list(frame.columns),
        where=f"the training rows [{train_start}, {train_end}) of {source}",
    )
    used = rows.test[1]
    series = torch.from_numpy(scaler.transform(values[:used]).astype(np.float32))

    def windows(split: tuple[int, int], max_windows: int | None) -> WindowDataset:
        start, stop = split
        return WindowDataset(
            series[start:stop],
            seq_len=seq_len,
            horizon=horizon,
            max_windows=max_windows,
            row_offset=start,
        )

    return ForecastData(
        dataset=name,
        source=source,
        channels=tuple(str(col) for col in frame.columns),
        scaler=scaler,
        train=windows(rows.train, max_train_windows),
        val=windows(rows.val, max_eval_windows),
        test=windows(rows.test, max_eval_windows),
        seq_len=seq_len,
        horizon=horizon,
        convention=convention,
        split=rows,
    )

