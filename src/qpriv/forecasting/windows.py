"""Forecasting series as model inputs: split, z-score and cut sliding windows.

The one front door is :func:`load_forecasting_data`::

    from qpriv.forecasting.windows import load_forecasting_data

    data = load_forecasting_data("ETTh1", seq_len=336, horizon=24)
    len(data.train), len(data.val), len(data.test)     # 8281, 2857, 2857
    x, y = data.train[0]                                # (336, 7), (24, 7) float32
    xb, yb = data.train.windows(torch.arange(64))      # (64, 336, 7), (64, 24, 7)

A named dataset's file is found by :func:`qpriv.forecasting.datasets.locate_dataset`; a CSV
is read by :func:`qpriv.forecasting.csv_input.load_frame`.

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

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch.utils.data import Dataset

from qpriv.errors import InvalidInputError, require_positive_int
from qpriv.forecasting.csv_input import CsvFormat
from qpriv.forecasting.datasets import SplitConvention, file_sha256
from qpriv.forecasting.series import (
    SplitRows,
    ZScoreScaler,
    read_series,
    split_rows,
)

__all__ = [
    "WINDOW_COUNT_NOTE",
    "ForecastData",
    "WindowDataset",
    "load_forecasting_data",
]

WINDOW_COUNT_NOTE = (
    "the number of training windows (and of rows) is reported exactly and treated as public: "
    "adding or removing a window changes it, so the window-unit guarantee is for data sets of "
    "that size (a DP-SGD sample rate reveals it too)")
"""Named in every window-unit claim of a forecaster (add or remove one window)."""

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
    back to the file's units. ``train_raw`` holds the training rows exactly as read from the
    file (float64, read-only): a private mechanism that works in the file's units reads these,
    since rows mapped back from the float32 z-scores depend, through rounding, on the scaler
    and so on every training value. ``split`` holds the row ranges in the file (val and test
    include their L look-back rows); ``convention`` is ``"ett-hourly"`` or ``"custom"``.
    ``dates`` are the timestamps of every row of the file (None where the data was not read
    from a file). ``source_sha256`` is the digest of the file read (None for a DataFrame, whose
    ``source`` is None).
    """

    dataset: str
    source: Path | None
    channels: tuple[str, ...]
    scaler: ZScoreScaler
    train: WindowDataset
    val: WindowDataset
    test: WindowDataset
    seq_len: int
    horizon: int
    convention: SplitConvention
    split: SplitRows
    train_raw: np.ndarray
    dates: pd.DatetimeIndex | None = None
    source_sha256: str | None = None

    @property
    def n_channels(self) -> int:
        """Number of channels C."""
        return len(self.channels)

    @property
    def train_windows(self) -> int:
        """Sliding training windows (all of them, whatever ``max_train_windows`` kept)."""
        return int(self.train.n_available)


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
    csv_format: CsvFormat | None = None,
) -> ForecastData:
    """Load, split, z-score and window a forecasting series.

    Args:
        dataset: a registered name (``ETTh1``, ``ETTh2``; see
            :data:`~qpriv.forecasting.datasets.DATASETS`), located by :func:`locate_dataset`
            and split by its convention (ETT hourly borders).
        csv: any CSV with a ``date`` column instead of a named dataset; it takes precedence
            over ``dataset`` (and ``data_dir`` is not used) and is split 70/10/20. The result's
            ``dataset`` is the file's stem.
        columns: channels to keep, in this order (default: all but the date).
        seq_len: look-back L (>= 1).
        horizon: forecast length H (>= 1).
        data_dir: the dataset's file or a directory holding it (the only place looked at;
            None: ``$QPRIV_DATA_DIR``, the user cache, then a download).
        allow_download: download a named dataset that is not found locally.
        max_train_windows: at most this many evenly spaced training windows (None: all).
        max_eval_windows: the same for validation and test.
        csv_format: how ``csv`` is written where it is not the default (its date column, date
            format, separator: :class:`~qpriv.forecasting.csv_input.CsvFormat`).

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

    frame, source, name, convention = read_series(
        dataset, csv=csv, columns=columns, data_dir=data_dir, allow_download=allow_download,
        csv_format=csv_format)
    rows = split_rows(len(frame), seq_len=seq_len, horizon=horizon, convention=convention)
    values = frame.to_numpy(dtype=np.float64)
    train_start, train_end = rows.train
    scaler = ZScoreScaler.fit(
        values[train_start:train_end],
        channels=list(frame.columns),
        where=f"the training rows [{train_start}, {train_end}) of "
              f"{source if source is not None else 'the DataFrame'}",
    )
    used = rows.test[1]
    series = torch.from_numpy(scaler.transform(values[:used]).astype(np.float32))
    train_raw = values[train_start:train_end].copy()
    train_raw.setflags(write=False)

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
        train_raw=train_raw,
        dates=pd.DatetimeIndex(frame.index),
        source_sha256=None if source is None else file_sha256(source),
    )
