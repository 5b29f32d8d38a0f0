"""Reading a user's forecasting CSV: a ``date`` column and numeric channels, checked cell by
cell, with messages that name the column, the file line and the fix."""

from __future__ import annotations

import datetime
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from qpriv.errors import InvalidInputError

__all__ = ["CsvFormat", "check_evenly_spaced", "checked_dataframe", "csv_header",
           "format_setting", "load_frame", "series_frequency"]


@dataclass(frozen=True)
class CsvFormat:
    """How a CSV is written, where it departs from what is read by default.

    ``date_column``: the timestamps' column (default: the one named ``date``, any case).
    ``date_format``: a ``strftime`` format such as ``%d.%m.%Y %H:%M`` (default: inferred, the
    day and month order decided on the whole column). ``sep``: the field separator, one
    character (default ``,``). A run records a format that is not the default in config.json,
    and reads its training file and every forecast's file with it.
    """

    date_column: str | None = None
    date_format: str | None = None
    sep: str = ","

    def __post_init__(self) -> None:
        if self.date_column is not None and (not isinstance(self.date_column, str)
                                             or not self.date_column.strip()):
            raise InvalidInputError(f"date_column = {self.date_column!r} is not a column name; "
                                    "give the name of the timestamps' column")
        if self.date_format is not None and (not isinstance(self.date_format, str)
                                             or "%" not in self.date_format):
            raise InvalidInputError(
                f"date_format = {self.date_format!r} has no strftime directive; write it like "
                "'%d.%m.%Y %H:%M' (%d day, %m month, %Y year, %H hour, %M minute)")
        if not isinstance(self.sep, str) or len(self.sep) != 1 or self.sep in "\"\r\n":
            raise InvalidInputError(f"sep = {self.sep!r} is not one field-separator character; "
                                    "give e.g. ',' or ';' (a tab: '\\t')")

    @property
    def is_default(self) -> bool:
        """Whether this is how every CSV is read when nothing is said."""
        return self == CsvFormat()

    def as_dict(self) -> dict[str, Any]:
        """The JSON form stored in a run's config.json."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> CsvFormat:
        """Read :meth:`as_dict`'s form back (None: the default format)."""
        if data is None:
            return cls()
        if not isinstance(data, Mapping) or set(data) - {"date_column", "date_format", "sep"}:
            raise InvalidInputError(f"csv_format {data!r} is not a CSV format's settings")
        return cls(**data)


def format_setting(csv_format: CsvFormat | None) -> dict[str, Any]:
    """config.json's ``csv_format`` key, present only where the training CSV is not written
    the default way (so that every run before the key, and every default one, compares equal
    on resume), with which the run reads its file and forecasts' files again."""
    if csv_format is None or csv_format.is_default:
        return {}
    return {"csv_format": csv_format.as_dict()}


def load_frame(path: str | Path, *, columns: Sequence[str] | None = None,
               selectable: bool = True, allow_missing: bool = False,
               fmt: CsvFormat | None = None) -> pd.DataFrame:
    """Read a CSV with a ``date`` column and numeric channels into a checked DataFrame.

    The date column is found by name, case-insensitively, and becomes the (parsed) index; the
    other columns are the channels, as float64, in file order, or those named in ``columns``
    in that order (a single string means one column). Only the selected channels must be
    numeric. ``selectable`` False: the caller's ``columns`` are fixed (a trained run's
    channels), so a bad cell's message does not offer to leave its column out.
    ``allow_missing``: an empty or NA cell is read as NaN, for a caller that checks only the
    rows it uses (a forecast reads its look-back alone); text and infinities are still refused.
    ``fmt``: the date column, date format and separator where they are not the default
    (:class:`CsvFormat`).

    Raises:
        InvalidInputError: missing or unreadable file; no date column; an unknown, repeated
            or date column in ``columns``; no channel; an empty, NaN, infinite or non-numeric
            cell (the message gives the column and the file line); an unparseable date; fewer
            than two rows.
    """
    fmt = fmt if fmt is not None else CsvFormat()
    path = _existing_file(path)
    raw = _read_text_table(path, sep=fmt.sep)
    if _cut_short(path) and len(raw) > 1:
        # many exported files end without a line break: refuse a cut by what it is, a last
        # row with fewer fields than the header or an empty last field, and name its line
        last = raw.iloc[-1]
        fields = int(sum(isinstance(cell, str) and cell.strip() != "" for cell in last))
        if fields < raw.shape[1]:
            raise InvalidInputError(
                f"{path}, line {len(raw)} (the last): {fields} of {raw.shape[1]} fields, and "
                "no line break after it: the file was cut inside that row (a copy or download "
                "stopped early); get the whole file, or delete the cut row")
    header = raw.iloc[0].astype(str).str.strip().tolist()
    sep = next((sep for sep in (",", ";", "\t", "|") if sep in header[0] and sep != fmt.sep),
               None)
    if len(header) == 1 and sep is not None:
        raise InvalidInputError(
            f"{path} is not {_SEPARATED.get(fmt.sep, repr(fmt.sep) + '-separated')}: its header "
            f"{header[0]!r} is one field holding {sep!r}; read it with --sep {sep!r} "
            f"(sep={sep!r} / CsvFormat(sep={sep!r}) in Python)")
    raw = raw.iloc[1:].reset_index(drop=True)
    raw.columns = header
    repeated = sorted({name for name in header if header.count(name) > 1})
    if repeated:
        raise InvalidInputError(
            f"{path} names the columns {repeated} more than once; give every column its own name"
        )

    if fmt.date_column is not None:
        if fmt.date_column not in raw.columns:
            raise InvalidInputError(
                f"{path} has no column {fmt.date_column!r} (the date column asked for); its "
                f"columns are {list(raw.columns)}")
        date_cols = [fmt.date_column]
    else:
        date_cols = [col for col in raw.columns if col.lower() == "date"]
    if not date_cols:
        raise InvalidInputError(
            f"{path} has no date column: expected a column named 'date' (any case); its columns "
            f"are {list(raw.columns)}. Name the timestamps' column with --date-column "
            "(date_column=), or rename it to 'date'."
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

    values = {col: _numeric_column(path, raw, col, selectable=selectable,
                                   allow_missing=allow_missing) for col in channels}
    dates = _parse_dates(path, raw[date_col], date_format=fmt.date_format)
    frame = pd.DataFrame(values, index=pd.DatetimeIndex(dates, name=date_col))
    return frame


def checked_dataframe(frame: pd.DataFrame, *, columns: Sequence[str] | None = None,
                      selectable: bool = True, allow_missing: bool = False) -> pd.DataFrame:
    """A user's DataFrame as :func:`load_frame` reads a CSV: timestamps from its
    DatetimeIndex or its one ``date`` column (any case), the channels (all other columns, or
    ``columns`` in that order) as float64. ``allow_missing``: a NaN is a gap the caller checks
    where it matters (a forecast's look-back); otherwise refused, as is an infinity.

    Raises:
        InvalidInputError: no timestamps, an unknown channel, a column that is not numbers, a
            non-finite value, timestamps not strictly increasing, fewer than two rows.
    """
    if not isinstance(frame, pd.DataFrame):
        raise InvalidInputError(f"expected a pandas DataFrame, got {type(frame).__name__}")
    if isinstance(frame.index, pd.DatetimeIndex):
        index, date_col = frame.index, None
    else:
        dates = [c for c in frame.columns if str(c).lower() == "date"]
        if len(dates) != 1:
            raise InvalidInputError(
                "the DataFrame needs its timestamps as a DatetimeIndex or as one 'date' column; "
                f"its columns are {list(frame.columns)}")
        date_col = dates[0]
        try:
            index = pd.DatetimeIndex(pd.to_datetime(frame[date_col]))
        except (ValueError, TypeError) as exc:
            raise InvalidInputError(f"the DataFrame's {date_col!r} column does not parse as "
                                    f"dates: {exc}") from exc
    available = [str(c) for c in frame.columns if c != date_col]
    where = Path("the DataFrame")
    channels = _select_channels(where, available, str(date_col or "date"), columns)
    for column in channels:
        dtype = frame[column].dtype
        if not (pd.api.types.is_float_dtype(dtype) or pd.api.types.is_integer_dtype(dtype)) \
                or pd.api.types.is_bool_dtype(dtype):
            raise InvalidInputError(f"column {column!r} of the DataFrame is {dtype}, not "
                                    "numbers; convert it to float")
    values = frame[channels].to_numpy(dtype=np.float64)
    bad = np.argwhere(np.isinf(values) if allow_missing else ~np.isfinite(values))
    if bad.size:
        row, col = bad[0]
        what = "an infinite" if np.isinf(values[row, col]) else "a missing (NaN)"
        raise InvalidInputError(
            f"column {channels[col]!r} of the DataFrame has {what} value at {index[row]}; "
            + ("give finite numbers" if allow_missing else "every channel needs a finite "
               "number in every row: fill or interpolate the gaps, or leave the column out"))
    if len(index) < 2:
        raise InvalidInputError(f"the DataFrame has {len(index)} row(s); a forecasting series "
                                "needs at least two")
    if not (np.diff(index.asi8) > 0).all():
        raise InvalidInputError("the DataFrame's timestamps are not strictly increasing; sort "
                                "it by time and keep one row per timestamp")
    return pd.DataFrame(values, columns=channels,
                        index=pd.DatetimeIndex(index, name=str(date_col or index.name or "date")))


def csv_header(path: str | Path, *, sep: str = ",") -> list[str]:
    """The column names in the first line of the CSV ``path`` (stripped, the date column
    included; fields separated by ``sep``), read without parsing the rest: to compare a
    file's columns with a run's.

    Raises:
        InvalidInputError: a missing file, a directory, or a file that is not UTF-8 CSV.
    """
    path = _existing_file(path)
    return _read_text_table(path, nrows=1, sep=sep).iloc[0].astype(str).str.strip().tolist()


def _existing_file(path: str | Path) -> Path:
    path = Path(path).expanduser()
    if path.is_dir():
        raise InvalidInputError(f"CSV file {path} is a directory; give the CSV file itself")
    if not path.is_file():
        raise InvalidInputError(f"CSV file {path} does not exist")
    return path


_SEPARATED = {",": "comma-separated", ";": "semicolon-separated", "\t": "tab-separated",
              "|": "pipe-separated"}


def _read_text_table(path: Path, *, nrows: int | None = None, sep: str = ",") -> pd.DataFrame:
    """Every cell of the CSV as text, the header as row 0."""
    try:  # header=None: pandas would quietly rename a repeated name (HUFL -> HUFL.1)
        return pd.read_csv(path, header=None, dtype=str, keep_default_na=False,
                           skipinitialspace=True, nrows=nrows, sep=sep)
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"cannot read {path} as CSV: it is not UTF-8 text ({exc.reason} "
                                f"at byte {exc.start}); save it as UTF-8") from exc
    except pd.errors.EmptyDataError as exc:
        raise InvalidInputError(f"cannot read {path} as CSV: the file is empty") from exc
    except pd.errors.ParserError as exc:  # pandas' text: "Error tokenizing data. C error: ..."
        detail = " ".join(str(exc).split()).split("C error: ")[-1]
        raise InvalidInputError(
            f"cannot read {path} as CSV: {detail}; every row needs as many "
            f"{_SEPARATED.get(sep, repr(sep) + '-separated')} fields as the header") from exc


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


_MISSING = {"", "nan", "na", "n/a", "null", "none"}
"""How a CSV cell says it has no value."""


def _numeric_column(path: Path, raw: pd.DataFrame, col: str, *, selectable: bool,
                    allow_missing: bool = False) -> np.ndarray:
    text = raw[col].astype(str).str.strip()
    values = pd.to_numeric(text, errors="coerce").to_numpy(dtype=np.float64, copy=True)
    bad = ~np.isfinite(values)
    if allow_missing:
        gap = bad & text.str.lower().isin(_MISSING).to_numpy()
        values[gap] = np.nan
        bad &= ~gap
    bad = np.flatnonzero(bad)
    if bad.size == 0:
        return values
    row = int(bad[0])
    cell = text.iloc[row]
    if cell == "":
        problem = "an empty cell"
    elif np.isnan(values[row]) and cell.lower() in _MISSING:
        problem = f"a missing value ({cell!r})"
    elif np.isnan(values[row]):
        problem = f"a non-numeric cell {cell!r}"
    else:
        problem = f"an infinite value {cell!r}"
    more = f" ({bad.size} bad cells in this column)" if bad.size > 1 else ""
    fix = ("every channel needs a finite number in every row: fill or interpolate the gaps, "
           "or leave the column out with --columns / columns=." if selectable else
           "every channel the run forecasts needs a finite number in every row: fill or "
           "interpolate the gaps.")
    raise InvalidInputError(
        f"column {col!r} of {path} has {problem} at line {row + 2} (data row {row + 1}){more}; "
        + fix)


_NUMERIC_DATE = r"^(\d{1,2})[/.\-](\d{1,2})[/.\-](\d{2,4})(?:\D|$)"
"""A date written day and month first in some order (``13/01/1990``, ``1.13.1990 0:00``)."""


def _to_datetime(text: pd.Series, *, utc: bool, dayfirst: bool = False,
                 date_format: str | None = None) -> pd.Series:
    with warnings.catch_warnings():  # "could not infer format": a bad date is reported after
        warnings.simplefilter("ignore", UserWarning)
        if date_format is not None:
            return pd.to_datetime(text, errors="coerce", utc=utc, format=date_format)
        return pd.to_datetime(text, errors="coerce", utc=utc, dayfirst=dayfirst)


def _day_first(path: Path, text: pd.Series) -> bool:
    """Whether the dates are written day first, decided on the whole column: pandas infers one
    format from the first dates, so ``01/02/1990`` would be read month first and a later
    ``13/02/1990`` refused, after twelve rows were read wrong. A column whose first field
    exceeds 12 somewhere is day first, whose second field does is month first; both, or
    neither (every date reads both ways), is refused: the file does not say which it is."""
    parts = text.str.extract(_NUMERIC_DATE)
    if parts.isna().any().any():  # not every date is written day/month first: pandas reads it
        return False
    first, second = parts[0].astype(int), parts[1].astype(int)
    day_first, month_first = first > 12, second > 12
    iso = ("; rewrite the dates as ISO 8601 'YYYY-MM-DD' (e.g. '1990-01-13'), which reads one "
           "way, or give the file's format with --date-format (e.g. '%d/%m/%Y')")
    if day_first.any() and month_first.any():
        a, b = int(np.argmax(day_first.to_numpy())), int(np.argmax(month_first.to_numpy()))
        raise InvalidInputError(
            f"the date column of {path} mixes day-first and month-first dates: line {a + 2} "
            f"({text.iloc[a]!r}) can only be day first, line {b + 2} ({text.iloc[b]!r}) only "
            f"month first{iso}")
    if not day_first.any() and not month_first.any() and (first != second).any():
        row = int(np.argmax((first != second).to_numpy()))
        raise InvalidInputError(
            f"the dates of {path} read both day first and month first (line {row + 2}: "
            f"{text.iloc[row]!r}), and none has a day above 12 to tell which{iso}")
    return bool(day_first.any())


def _parse_dates(path: Path, text: pd.Series, *,
                 date_format: str | None = None) -> pd.DatetimeIndex:
    text = text.astype(str).str.strip()
    in_utc = False
    # a format given is followed exactly; without one, the day and month order is decided on
    # the whole column (:func:`_day_first`)
    dayfirst = False if date_format is not None else _day_first(path, text)
    try:
        parsed = _to_datetime(text, utc=False, dayfirst=dayfirst, date_format=date_format)
    except (ValueError, TypeError) as exc:
        if "mixed timezones" not in str(exc).lower():
            raise InvalidInputError(f"cannot parse the date column of {path}: {exc}") from exc
        # Dates with different UTC offsets (a daylight-saving change, say) name instants
        # unambiguously: compare them in UTC. A date without an offset among them is refused.
        parsed = _to_datetime(text, utc=True, dayfirst=dayfirst, date_format=date_format)
        in_utc = True
    bad = np.flatnonzero(parsed.isna().to_numpy())
    if bad.size:
        row = int(bad[0])
        hint = (f"; it does not match the date format {date_format!r}: fix the date, or give "
                "the format the file uses (--date-format)" if date_format is not None else
                "; the other dates carry a UTC offset, so give this one an offset too (e.g. "
                "'2016-07-01 00:00:00+00:00')" if in_utc else
                "; write every date in one format, e.g. ISO 8601 '2016-07-01 00:00:00', or "
                "give the file's format with --date-format (e.g. '%d.%m.%Y %H:%M')")
        raise InvalidInputError(
            f"the date column of {path} has an unparseable or empty date {text.iloc[row]!r} at "
            f"line {row + 2} (data row {row + 1}){hint}."
        )
    index = pd.DatetimeIndex(parsed)
    if in_utc:
        # instants compared in UTC, shown in the offset of the file's last date: forecasts,
        # which continue from it, keep the user's clock instead of switching to UTC
        index = index.tz_convert(datetime.timezone(pd.Timestamp(text.iloc[-1]).utcoffset()))
    steps = np.flatnonzero(np.diff(index.asi8) <= 0)
    if steps.size:  # windows are cut in file order: it must be time order
        row = int(steps[0]) + 1
        raise InvalidInputError(
            f"the dates of {path} are not strictly increasing: line {row + 2} "
            f"({text.iloc[row]!r}) does not come after line {row + 1} ({text.iloc[row - 1]!r}); "
            "sort the file by date and keep one row per timestamp"
        )
    return index


def _cut_short(path: Path) -> bool:
    """Whether the non-empty file ``path`` lacks its final line break: a file cut inside its
    last value parses as a shorter, wrong number, so such a file is refused, not read."""
    with path.open("rb") as handle:
        handle.seek(0, 2)
        if handle.tell() == 0:
            return False
        handle.seek(-1, 2)
        return handle.read(1) not in (b"\n", b"\r")


def series_frequency(index: pd.DatetimeIndex) -> str | None:
    """The pandas frequency of evenly spaced ``index`` (``"h"``, ``"D"``, ``"B"``, ``"MS"``,
    ...), or None for fewer than three timestamps or uneven steps."""
    if len(index) < 3:
        return None
    try:
        with warnings.catch_warnings():  # pandas 3 announces an offset instead of a string
            warnings.simplefilter("ignore", DeprecationWarning)
            freq = pd.infer_freq(index)
    except (TypeError, ValueError):
        return None
    return None if freq is None else pd.tseries.frequencies.to_offset(freq).freqstr


def check_evenly_spaced(frame: pd.DataFrame, *, source: str | Path) -> str | None:
    """The frequency of ``frame``'s timestamps (:func:`series_frequency`); refuse a series of
    three or more rows whose steps are uneven, naming the first step that differs from the
    most common one. A window is L + H consecutive rows, read as L + H equal steps: across a
    gap it would silently join two stretches of the series.

    Raises:
        InvalidInputError: uneven timestamps.
    """
    index = pd.DatetimeIndex(frame.index)
    freq = series_frequency(index)
    if freq is not None or len(index) < 3:
        return freq
    steps = pd.Series(index[1:] - index[:-1])
    usual = steps.mode().iloc[0]
    odd = int(np.flatnonzero((steps != usual).to_numpy())[0]) + 1
    raise InvalidInputError(
        f"the timestamps of {source} are not evenly spaced: data row {odd + 1} "
        f"({index[odd - 1]} -> {index[odd]}) is a step of {steps.iloc[odd - 1]}, where most "
        f"are {usual}, and a window would join the rows across it as one step; fill the gaps "
        "(e.g. pandas resample and interpolate) so that every row is one step")
