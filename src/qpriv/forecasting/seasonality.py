"""The seasonal period of a series, read from its timestamps' spacing.

The linear forecasters' design (:mod:`qpriv.forecasting.linear_design`) needs one period in
rows: the public forecast repeats and averages whole periods, and the recent blocks reach back
four periods. It is the natural cycle of the sampling step:

* a step shorter than a day that divides it: the rows per day (hourly 24, 15-minute 96,
  10-minute 144);
* daily: a week (7); business daily: a working week (5);
* weekly: a year (52); monthly: a year (12); quarterly: a year (4);
* anything else (yearly, a step that does not divide a day): 1, no season: the public
  forecast then repeats the last value.

The period reads only the spacing of the timestamps, which the loader has already required to
be even: a property of how the file was sampled, not of any value in it. A user who knows
better (a weekly cycle in hourly data, 168) gives it (``period``, ``--period``).
"""

from __future__ import annotations

import pandas as pd

from qpriv.errors import require_positive_int
from qpriv.forecasting.csv_input import series_frequency

__all__ = ["NO_DATES_PERIOD", "PERIOD_NOTE", "resolve_period", "seasonal_period"]

NO_DATES_PERIOD = 24
"""The period assumed for a series built without timestamps (arrays in a test or a notebook):
hourly, the ETT files' step."""

PERIOD_NOTE = ("the seasonal period is read from the timestamps' spacing (how the file was "
               "sampled, not its values) or given by the user; it shapes the public forecast "
               "and the candidate designs")
"""What a claim says of the period its design used."""

_CALENDAR = {"D": 7, "B": 5, "W": 52, "MS": 12, "ME": 12, "M": 12, "QS": 4, "QE": 4, "Q": 4}
"""Periods of the calendar steps, keyed by the pandas frequency's name (anchors dropped)."""


def seasonal_period(dates: pd.DatetimeIndex | None) -> int:
    """The period in rows of a series sampled at ``dates`` (module docstring); 24 where there
    are no timestamps (:data:`NO_DATES_PERIOD`) and 1 where the step has no natural cycle or
    the spacing cannot be read (fewer than three timestamps, uneven steps)."""
    if dates is None:
        return NO_DATES_PERIOD
    index = pd.DatetimeIndex(dates)
    freq = series_frequency(index)
    if freq is None:
        return 1
    offset = pd.tseries.frequencies.to_offset(freq)
    day = pd.Timedelta(days=1)
    if isinstance(offset, pd.offsets.Tick):
        step = pd.Timedelta(offset)
        if step < day and day % step == pd.Timedelta(0):
            return int(day // step)
        return 7 if step == day else 1
    if offset.n != 1:
        return 1
    return _CALENDAR.get(offset.rule_code.split("-")[0], 1)


def resolve_period(dates: pd.DatetimeIndex | None, period: int | None) -> int:
    """``period`` where given (checked), else :func:`seasonal_period` of ``dates``."""
    return seasonal_period(dates) if period is None else require_positive_int("period", period)
