"""A forecasting series read, split and scaled, without windows: what needs no torch.

:func:`read_series` reads a named dataset's file, a CSV or a DataFrame and checks it;
:func:`split_rows` gives the row ranges of train, validation and test (the conventions of
:mod:`qpriv.forecasting.windows`, which cuts the windows); :class:`ZScoreScaler` is the
per-channel z-score fitted on the training rows. A federation's sites load their data through
these alone (:mod:`qpriv.federated.site`), so their processes start without importing torch.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from qpriv.errors import InvalidInputError, require_positive_int
from qpriv.forecasting.csv_input import (
    CsvFormat,
    check_evenly_spaced,
    checked_dataframe,
    load_frame,
)
from qpriv.forecasting.datasets import (
    CUSTOM,
    ETT_HOURLY,
    SplitConvention,
    dataset_spec,
    locate_dataset,
)

__all__ = ["DATAFRAME", "SplitRows", "ZScoreScaler", "read_series", "split_rows"]

DATAFRAME = "dataframe"
"""The dataset name of a series given as a pandas DataFrame (``csv=frame``)."""

# Informer / PatchTST borders of the hourly ETT files: 12, 16 and 20 months of 30 days x 24 h.
_ETT_HOURLY_BORDERS = (12 * 30 * 24, 16 * 30 * 24, 20 * 30 * 24)  # 8640, 11520, 14400
# Time-Series-Library "custom" loader: fractions of the rows in train and test (val: the rest).
_CUSTOM_TRAIN_FRACTION = 0.7
_CUSTOM_TEST_FRACTION = 0.2


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

    def transform(self, values: Any) -> Any:
        """Scale: ``(values - mean) / std`` over the last axis."""
        mean, std = self._like(values)
        return (values - mean) / std

    def inverse_transform(self, values: Any) -> Any:
        """Unscale: ``values * std + mean`` over the last axis."""
        mean, std = self._like(values)
        return values * std + mean

    def _like(self, values: Any) -> tuple:
        # a torch tensor is recognised by its new_tensor (same dtype and device) rather than by
        # isinstance, so that this module, which sites of a federation load, never imports torch
        if hasattr(values, "new_tensor"):
            return values.new_tensor(self.mean), values.new_tensor(self.std)
        return self.mean, self.std


def read_series(dataset: str | None, *, csv: str | Path | pd.DataFrame | None,
                 columns: Sequence[str] | None, data_dir: str | Path | None,
                 allow_download: bool, csv_format: CsvFormat | None,
                 ) -> tuple[pd.DataFrame, Path | None, str, SplitConvention]:
    """The checked series of :func:`load_forecasting_data`'s data, and where it came from:
    (frame, the file read or None for a DataFrame, the dataset's name, its split convention)."""
    frame_given = isinstance(csv, pd.DataFrame)
    if csv is not None and not (frame_given or isinstance(csv, (str, os.PathLike))):
        raise InvalidInputError(
            f"csv = {type(csv).__name__} is neither a file path nor a DataFrame: give the path "
            "of a CSV file or a pandas DataFrame (its index, or a 'date' column, the dates)")
    if frame_given:
        source, name, convention = None, DATAFRAME, CUSTOM
    elif csv is not None:
        source = Path(csv).expanduser().resolve()  # stored in config.json: found from anywhere
        name, convention = source.stem, CUSTOM
    elif dataset is not None:
        spec = dataset_spec(dataset)
        source = locate_dataset(spec.name, path=data_dir, allow_download=allow_download)
        name, convention = spec.name, spec.split
    else:
        raise InvalidInputError(
            "no data given: name a dataset (ETTh1, ETTh2; --dataset) or pass a CSV (--csv PATH)"
        )

    if csv_format is not None and (csv is None or frame_given):
        raise InvalidInputError("csv_format says how a CSV file is written; a named dataset's "
                                "file has its own, and a DataFrame is read as it is: leave "
                                "csv_format out")
    if frame_given:
        frame = checked_dataframe(csv, columns=columns)
    else:
        frame = load_frame(source, columns=columns, fmt=csv_format)
    if csv is not None:  # a named dataset's file is checked by its checksum
        check_evenly_spaced(frame, source=source if source is not None else "the DataFrame")
    return frame, source, name, convention
