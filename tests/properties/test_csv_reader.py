"""The CSV reader on generated files: random separators, byte-order marks, line endings (LF,
CRLF, CR), padded and quoted fields, a missing final newline, missing values, duplicate and
unsorted timestamps, huge and tiny values.
Every file gives either the frame it holds, value for value, or one InvalidInputError of one
line; never another exception, never a silently different number."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qpriv.errors import InvalidInputError
from qpriv.forecasting.csv_input import CsvFormat, load_frame

FINITE = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False, width=64),
    st.floats(min_value=-1e6, max_value=1e6, allow_nan=False),
    st.sampled_from([0.0, -0.0, 5e-324, -5e-324, 2.2250738585072014e-308,
                     1.7976931348623157e308, -1.7976931348623157e308, 1e-300, 123456789.125]),
)
MISSING = st.sampled_from(["", "nan", "NaN", "NA"])
SETTINGS = settings(max_examples=120, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


@st.composite
def csv_files(draw):
    """(text, separator, values (rows x channels, NaN where a cell is missing), timestamps)."""
    rows = draw(st.integers(2, 12))
    channels = draw(st.integers(1, 3))
    sep = draw(st.sampled_from([",", ";", "\t", "|"]))
    values = np.array([[draw(FINITE) for _ in range(channels)] for _ in range(rows)])
    missing = draw(st.lists(st.tuples(st.integers(0, rows - 1), st.integers(0, channels - 1)),
                            max_size=2))
    cells = [[repr(float(v)) for v in row] for row in values]
    for r, c in missing:
        values[r, c] = np.nan
        cells[r][c] = draw(MISSING)
    stamps = list(pd.date_range("2021-03-27", periods=rows, freq="h"))
    order = draw(st.sampled_from(["sorted", "duplicate", "shuffled"]))
    if order == "duplicate":
        i = draw(st.integers(1, rows - 1))
        stamps[i] = stamps[i - 1]
    elif order == "shuffled":
        stamps = draw(st.permutations(stamps))
    newline = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    pad = draw(st.sampled_from(["", " "]))  # a space after each separator
    quote = draw(st.sampled_from(["", '"']))  # every field quoted, or none

    def row(fields: list[str]) -> str:
        return (sep + pad).join(f"{quote}{field}{quote}" for field in fields)

    lines = [row(["date", *[f"c{i}" for i in range(channels)]])]
    lines += [row([str(stamp), *cell]) for stamp, cell in zip(stamps, cells, strict=True)]
    text = newline.join(lines) + (newline if draw(st.booleans()) else "")
    bom = "\ufeff" if draw(st.booleans()) else ""
    return bom + text, sep, values, pd.DatetimeIndex(stamps)


@SETTINGS
@given(csv_files())
def test_the_reader_gives_the_file_or_one_line_of_refusal(tmp_path, case):
    text, sep, values, stamps = case
    path = tmp_path / "series.csv"
    path.write_bytes(text.encode("utf-8"))
    increasing = bool(np.all(np.diff(stamps.asi8) > 0))
    try:
        frame = load_frame(path, fmt=CsvFormat(sep=sep))
    except InvalidInputError as error:
        message = str(error)
        assert "\n" not in message and message
        assert np.isnan(values).any() or not increasing, message
        return
    assert not np.isnan(values).any() and increasing
    assert list(frame.columns) == [f"c{i}" for i in range(values.shape[1])]
    np.testing.assert_array_equal(frame.index.asi8, stamps.asi8)
    got = frame.to_numpy(dtype=np.float64)
    # bit for bit: the file holds each double's shortest repr, which reads back exactly
    assert got.tobytes() == values.tobytes() or np.array_equal(got, values), (got, values)
    assert all(math.copysign(1.0, a) == math.copysign(1.0, b)
               for a, b in zip(got.ravel(), values.ravel(), strict=True))


@pytest.mark.parametrize("value", [1.7976931348623157e308, 5e-324, 2.2250738585072014e-308,
                                   0.1 + 0.2, -1.0000000000000002])
def test_extreme_values_read_back_exactly(tmp_path, value):
    """Explicit examples of the property: the largest and smallest doubles and values one ulp
    off a round number are read as written."""
    path = tmp_path / "series.csv"
    path.write_text(f"date,x\n2020-01-01 00:00,{value!r}\n2020-01-01 01:00,1.0\n")
    assert load_frame(path)["x"].iloc[0] == value
