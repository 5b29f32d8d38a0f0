"""Tests of qpriv.forecasting.datasets, .csv_input and .windows: locating, loading, splitting,
scaling and windowing.

Tests on the real ETT files read ``$QPRIV_DATA_DIR`` and skip when it does not hold them.
Everything else runs on small CSVs written to tmp dirs; the download path runs against a local
``http.server`` on 127.0.0.1, never the internet.
"""

from __future__ import annotations

import functools
import hashlib
import http.server
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from qpriv.errors import InvalidInputError
from qpriv.forecasting import datasets as fdatasets
from qpriv.forecasting.csv_input import CsvFormat, load_frame
from qpriv.forecasting.datasets import (
    CUSTOM,
    DATA_DIR_ENV,
    DATASETS,
    ETT_HOURLY,
    DatasetSpec,
    cache_dir,
    locate_dataset,
)
from qpriv.forecasting.series import ZScoreScaler, split_rows
from qpriv.forecasting.windows import ForecastData, WindowDataset, load_forecasting_data

_REAL_DIR = os.environ.get(DATA_DIR_ENV, "")


def _real_dir(filename: str = "ETTh1.csv") -> Path:
    if not _REAL_DIR or not (Path(_REAL_DIR) / filename).is_file():
        pytest.skip(f"real ETT data not available: set {DATA_DIR_ENV} to the ETT-small dir")
    return Path(_REAL_DIR)


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def _write_csv(path: Path, n_rows: int = 200, *, date_name: str = "date") -> Path:
    """A CSV whose channel 'ramp' is the row number, and a second, noisy channel."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {
            date_name: pd.date_range("2020-01-01", periods=n_rows, freq="h").astype(str),
            "ramp": np.arange(n_rows, dtype=float),
            "noise": rng.normal(size=n_rows),
        }
    )
    frame.to_csv(path, index=False)
    return path


def _write_text(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _register(monkeypatch: pytest.MonkeyPatch, payload: bytes, **fields: str) -> DatasetSpec:
    """Register a small fixture dataset 'Tiny' whose published sha256 is that of payload."""
    spec = DatasetSpec(
        name="Tiny",
        filename="tiny.csv",
        sha256=fields.get("sha256", hashlib.sha256(payload).hexdigest()),
        url=fields.get("url", "http://127.0.0.1:9/tiny.csv"),
        split=CUSTOM,
    )
    monkeypatch.setitem(DATASETS, "Tiny", spec)
    return spec


@pytest.fixture
def isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No QPRIV_DATA_DIR, a fresh user cache under tmp_path, no proxies; returns the cache."""
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("no_proxy", "*")
    monkeypatch.setattr(fdatasets, "_DIGESTS", {})
    return tmp_path / "xdg" / "qpriv" / "data"


@pytest.fixture
def tiny_payload(tmp_path: Path) -> bytes:
    return _write_csv(tmp_path / "payload.csv", 60).read_bytes()


class _Server:
    def __init__(self, root: Path) -> None:
        self.requests: list[str] = []
        log = self.requests

        class Handler(http.server.SimpleHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                log.append(self.path)

        handler = functools.partial(Handler, directory=str(root))
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[_Server]:
    root = tmp_path / "www"
    root.mkdir()
    srv = _Server(root)
    yield srv
    srv.close()


# --------------------------------------------------------------------------------------------
# the real ETT files
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def etth1() -> ForecastData:
    directory = _real_dir()
    return load_forecasting_data("ETTh1", data_dir=directory, allow_download=False)


@pytest.mark.parametrize("name", ["ETTh1", "ETTh2"])
def test_real_files_pass_their_checksums(name: str) -> None:
    directory = _real_dir(f"{name}.csv")
    path = locate_dataset(name, path=directory, allow_download=False)
    assert path == directory / f"{name}.csv"
    assert hashlib.sha256(path.read_bytes()).hexdigest() == DATASETS[name].sha256


def test_etth1_window_counts_h24(etth1: ForecastData) -> None:
    assert (len(etth1.train), len(etth1.val), len(etth1.test)) == (8281, 2857, 2857)
    assert etth1.split == ((0, 8640), (8640 - 336, 11520), (11520 - 336, 14400))
    assert etth1.channels == ("HUFL", "HULL", "MUFL", "MULL", "LUFL", "LULL", "OT")
    x, y = etth1.train[0]
    assert x.shape == (336, 7) and y.shape == (24, 7)
    assert x.dtype == y.dtype == torch.float32


@pytest.mark.parametrize("name", ["ETTh1", "ETTh2"])
def test_window_counts_h168_are_the_papers_etth2_counts(name: str) -> None:
    # The paper's "8137/2713/2713" for ETTh2 is the count at H = 168: (rows) - 336 - 168 + 1.
    # Both files have the same length, so the counts depend on H only, not on the file.
    data = load_forecasting_data(
        name, data_dir=_real_dir(f"{name}.csv"), horizon=168, allow_download=False
    )
    assert (len(data.train), len(data.val), len(data.test)) == (8137, 2713, 2713)


def test_scaler_is_fitted_on_train_rows_only(etth1: ForecastData) -> None:
    raw = pd.read_csv(etth1.source).drop(columns="date").to_numpy(dtype=np.float64)
    np.testing.assert_allclose(etth1.scaler.mean, raw[:8640].mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(etth1.scaler.std, raw[:8640].std(axis=0), rtol=1e-12)
    train = etth1.train.series.double()
    np.testing.assert_allclose(train.mean(0).numpy(), 0.0, atol=1e-5)
    np.testing.assert_allclose(train.std(0, unbiased=False).numpy(), 1.0, atol=1e-5)
    for split in (etth1.val, etth1.test):
        rows = split.series[split.seq_len :].double()  # the split's own rows, no look-back
        assert rows.mean(0).abs().max() > 0.05
        assert (rows.std(0) - 1).abs().max() > 0.05


def test_windows_are_contiguous_in_the_scaled_series(etth1: ForecastData) -> None:
    raw = pd.read_csv(etth1.source).drop(columns="date").to_numpy(dtype=np.float64)
    scaled = torch.from_numpy(
        ((raw - raw[:8640].mean(axis=0)) / raw[:8640].std(axis=0)).astype(np.float32)
    )
    L, H = etth1.seq_len, etth1.horizon
    for split in (etth1.train, etth1.val, etth1.test):
        for i in (0, 1, len(split) // 2, len(split) - 1):
            x, y = split[i]
            row = split.row_offset + i
            torch.testing.assert_close(x, scaled[row : row + L], rtol=0, atol=1e-5)
            torch.testing.assert_close(y, scaled[row + L : row + L + H], rtol=0, atol=1e-5)
    # the last test target is row 14399, the last row of the standard test period
    assert etth1.test.row_offset + len(etth1.test) - 1 + L + H == 14400


# --------------------------------------------------------------------------------------------
# splits, scaling and windows on a small CSV
# --------------------------------------------------------------------------------------------


def test_custom_csv_split_is_70_10_20_with_lookback(tmp_path: Path) -> None:
    data = load_forecasting_data(csv=_write_csv(tmp_path / "s.csv", 200), seq_len=10, horizon=5)
    assert data.convention == CUSTOM and data.dataset == "s"
    assert data.split == ((0, 140), (130, 160), (150, 200))
    assert (len(data.train), len(data.val), len(data.test)) == (126, 16, 36)
    # 'ramp' is the row number: unscaled windows give back the rows they cover
    for split in (data.train, data.val, data.test):
        for i in range(len(split)):
            x, y = split[i]
            ramp_x = data.scaler.inverse_transform(x)[:, 0]
            ramp_y = data.scaler.inverse_transform(y)[:, 0]
            first = split.row_offset + i
            torch.testing.assert_close(ramp_x, torch.arange(first, first + 10.0), atol=1e-4, rtol=0)
            torch.testing.assert_close(
                ramp_y, torch.arange(first + 10.0, first + 15.0), atol=1e-4, rtol=0
            )
    # the first validation and test targets follow the previous split's last row
    assert data.val.row_offset + 10 == 140 and data.test.row_offset + 10 == 160


def test_a_csv_with_a_gap_in_its_timestamps_is_refused_before_its_windows_join_it(
        tmp_path: Path) -> None:
    """A window reads L + H rows as equal steps: across a gap it would join two stretches of
    the series silently (a run trained on it also had no frequency to forecast with)."""
    path = _write_csv(tmp_path / "s.csv", 200)
    frame = pd.read_csv(path)
    frame.drop(index=range(60, 70)).to_csv(path, index=False)
    with pytest.raises(InvalidInputError) as info:
        load_forecasting_data(csv=path, seq_len=10, horizon=5)
    assert str(info.value) == (
        f"the timestamps of {path} are not evenly spaced: data row 61 (2020-01-03 11:00:00 -> "
        "2020-01-03 22:00:00) is a step of 0 days 11:00:00, where most are 0 days 01:00:00, "
        "and a window would join the rows across it as one step; fill the gaps (e.g. pandas "
        "resample and interpolate) so that every row is one step")
    # evenly spaced at another step, or at calendar steps of uneven length, is accepted
    for freq in ("D", "MS", "B"):
        frame = pd.read_csv(_write_csv(tmp_path / "s.csv", 200))
        frame["date"] = pd.date_range("2020-01-01", periods=200, freq=freq).astype(str)
        frame.to_csv(path, index=False)
        assert len(load_forecasting_data(csv=path, seq_len=10, horizon=5).train) == 126


def test_windows_are_views_and_batches_match_items(tmp_path: Path) -> None:
    data = load_forecasting_data(csv=_write_csv(tmp_path / "s.csv", 120), seq_len=8, horizon=3)
    ds = data.train
    x, y = ds[5]
    storage = ds.series.untyped_storage().data_ptr()
    assert x.untyped_storage().data_ptr() == storage == y.untyped_storage().data_ptr()
    # the three splits share one tensor of scaled rows
    assert data.test.series.untyped_storage().data_ptr() == storage
    idx = torch.tensor([0, 7, 3, len(ds) - 1, 7])
    xb, yb = ds.windows(idx)
    assert xb.shape == (5, 8, 2) and yb.shape == (5, 3, 2)
    assert xb.is_contiguous() and yb.is_contiguous()
    for b, i in enumerate(idx.tolist()):
        torch.testing.assert_close(xb[b], ds[i][0], rtol=0, atol=0)
        torch.testing.assert_close(yb[b], ds[i][1], rtol=0, atol=0)
    torch.testing.assert_close(ds[-1][0], ds[len(ds) - 1][0], rtol=0, atol=0)
    with pytest.raises(IndexError):
        ds[len(ds)]


def test_max_windows_are_evenly_spaced(tmp_path: Path) -> None:
    data = load_forecasting_data(
        csv=_write_csv(tmp_path / "s.csv", 300),
        seq_len=10,
        horizon=5,
        max_train_windows=7,
        max_eval_windows=4,
    )
    train = data.train
    assert train.n_available == 210 - 15 + 1 and len(train) == 7
    starts = train.starts.tolist()
    assert starts[0] == 0 and starts[-1] == train.n_available - 1
    assert starts == sorted(set(starts))
    gaps = np.diff(starts)
    assert gaps.max() - gaps.min() <= 1
    assert len(data.val) == len(data.test) == 4
    x, _ = train[3]
    torch.testing.assert_close(x, train.series[starts[3] : starts[3] + 10], rtol=0, atol=0)
    xb, _ = train.windows([3])
    torch.testing.assert_close(xb[0], x, rtol=0, atol=0)
    # a budget above the number of windows keeps them all
    full = WindowDataset(train.series, seq_len=10, horizon=5, max_windows=10_000)
    assert len(full) == train.n_available
    # even spacing never repeats a window, whatever the ratio
    for n in (2, 3, 50, 195):
        sub = WindowDataset(train.series, seq_len=10, horizon=5, max_windows=n)
        assert len(set(sub.starts.tolist())) == n


def test_scaler_round_trip_numpy_and_torch() -> None:
    values = np.random.default_rng(1).normal(3.0, 2.0, size=(50, 3))
    scaler = ZScoreScaler.fit(values)
    np.testing.assert_allclose(scaler.inverse_transform(scaler.transform(values)), values)
    tensor = torch.from_numpy(values.astype(np.float32))
    back = scaler.inverse_transform(scaler.transform(tensor))
    assert back.dtype == torch.float32
    torch.testing.assert_close(back, tensor)


def test_columns_select_channels_in_order_and_date_is_case_insensitive(tmp_path: Path) -> None:
    path = _write_csv(tmp_path / "s.csv", 100, date_name="Date")
    frame = load_frame(path, columns=["noise", "ramp"])
    assert list(frame.columns) == ["noise", "ramp"]
    assert isinstance(frame.index, pd.DatetimeIndex) and frame.index.name == "Date"
    assert list(load_frame(path, columns="ramp").columns) == ["ramp"]
    data = load_forecasting_data(csv=path, columns=["ramp"], seq_len=4, horizon=2)
    assert data.channels == ("ramp",) and data.train.n_channels == 1


def test_unselected_text_column_is_allowed(tmp_path: Path) -> None:
    text = "date,a,label\n" + "".join(f"2020-01-01 {h:02d}:00,{h},x{h}\n" for h in range(20))
    path = _write_text(tmp_path / "s.csv", text)
    assert list(load_frame(path, columns=["a"]).columns) == ["a"]
    with pytest.raises(InvalidInputError, match="non-numeric cell 'x0'"):
        load_frame(path)


# --------------------------------------------------------------------------------------------
# bad input: every case raises InvalidInputError with a message that names the problem
# --------------------------------------------------------------------------------------------


def _rows(cells: list[str], header: str = "date,a,b") -> str:
    return header + "\n" + "".join(f"2020-01-01 {h:02d}:00,{c}\n" for h, c in enumerate(cells))


_GOOD = [f"{i},{i * i % 7}" for i in range(10)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (_rows(_GOOD, header="time,a,b"), ["no date column", "'time'", "rename"]),
        (_rows(["1,2", "3,abc", *_GOOD]), ["non-numeric cell 'abc'", "'b'", "line 3"]),
        (_rows(["1,2", "3,", *_GOOD]), ["empty cell", "'b'", "line 3"]),
        (_rows([*_GOOD, "NaN,1"]), ["missing value ('NaN')", "'a'", "line 12"]),
        (_rows([*_GOOD, "inf,1"]), ["infinite value 'inf'", "'a'", "line 12"]),
        (_rows(["1,2"]), ["1 data row", "at least two"]),
        (_rows([]), ["0 data row", "at least two"]),
        ("date,a\n2020-01-01,1\nyesterday,2\n", ["unparseable", "'yesterday'", "line 3"]),
        ("date\n2020-01-01\n2020-01-02\n", ["no channel"]),
        ("date,a,a\n2020-01-01,1,2\n2020-01-02,3,4\n", ["names the columns ['a'] more than"]),
        ("date,a\n2020-01-02,1\n2020-01-01,2\n",
         ["not strictly increasing", "line 3 ('2020-01-01')", "line 2 ('2020-01-02')"]),
        ("date,a\n2020-01-01,1\n2020-01-01,2\n", ["not strictly increasing", "line 3"]),
        ("date,a\n2016-03-27 00:00+00:00,1\n2016-03-27 03:00+02:00,2\n2016-03-27 02:00,3\n",
         ["unparseable", "'2016-03-27 02:00'", "line 4", "give this one an offset too"]),
        # offsets differ: compared as instants, 03:00+02:00 is 01:00 UTC, before 02:00+00:00
        ("date,a\n2016-03-27 02:00+00:00,1\n2016-03-27 03:00+02:00,2\n",
         ["not strictly increasing", "line 3 ('2016-03-27 03:00+02:00')"]),
        ("date,a,b\n2020-01-01,1,2,3\n2020-01-02,3,4\n",
         ["cannot read", "as CSV: Expected 3 fields in line 2, saw 4; every row needs as many "
          "comma-separated fields as the header"]),
        ("date;a;b\n2020-01-01;1;2\n2020-01-02;3;4\n",
         ["is not comma-separated", "one field holding ';'"]),
        ("", ["the file is empty"]),
    ],
)
def test_bad_csv_is_rejected_with_a_clear_message(
    tmp_path: Path, text: str, expected: list[str]
) -> None:
    path = _write_text(tmp_path / "bad.csv", text)
    with pytest.raises(InvalidInputError) as info:
        load_frame(path)
    message = str(info.value)
    for part in expected:
        assert part in message
    assert str(path) in message or "no channel" in message


def test_a_file_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    path = tmp_path / "utf16.csv"
    path.write_bytes("date,a\n2020-01-01,1\n".encode("utf-16"))
    with pytest.raises(InvalidInputError, match=r"not UTF-8 text .*save it as UTF-8"):
        load_frame(path)


def test_dates_with_different_utc_offsets_are_read_as_instants(tmp_path: Path) -> None:
    # a daylight-saving change: the wall clock jumps from 01:00+01:00 to 03:00+02:00
    text = "date,a\n2016-03-27 00:00+01:00,1\n2016-03-27 01:00+01:00,2\n2016-03-27 03:00+02:00,3\n"
    frame = load_frame(_write_text(tmp_path / "dst.csv", text))
    # the same instants, shown in the last date's offset (UTC before: issue 42, D11)
    assert [str(t) for t in frame.index] == ["2016-03-27 01:00:00+02:00",
                                             "2016-03-27 02:00:00+02:00",
                                             "2016-03-27 03:00:00+02:00"]
    assert frame.index[0] == pd.Timestamp("2016-03-26 23:00:00+00:00")
    assert frame["a"].tolist() == [1.0, 2.0, 3.0]


def _dated(tmp_path: Path, dates: list[str]) -> Path:
    rows = "".join(f"{d},{i}\n" for i, d in enumerate(dates))
    return _write_text(tmp_path / "dated.csv", "date,a\n" + rows)


def test_day_first_dates_are_read_day_first_from_the_first_row(tmp_path: Path) -> None:
    # pandas infers one format from the first dates: rows 1-12 read month first (01/02 as
    # 2 January... as 1 February), then 13/01 refused. The whole column decides.
    days = [f"{d:02d}/01/1990" for d in range(1, 32)]
    frame = load_frame(_dated(tmp_path, days))
    assert frame.index[1] == pd.Timestamp("1990-01-02")
    assert frame.index[-1] == pd.Timestamp("1990-01-31")
    assert (frame.index[1:] - frame.index[:-1] == pd.Timedelta(days=1)).all()


def test_month_first_dates_stay_month_first(tmp_path: Path) -> None:
    frame = load_frame(_dated(tmp_path, [f"01/{d:02d}/1990 0:00" for d in range(1, 20)]))
    assert frame.index[1] == pd.Timestamp("1990-01-02")
    assert frame.index[-1] == pd.Timestamp("1990-01-19")


def test_mixed_or_undecidable_date_orders_are_refused_with_the_fix(tmp_path: Path) -> None:
    mixed = ["12/01/1990", "13/01/1990", "01/14/1990"]
    with pytest.raises(InvalidInputError, match=r"mixes day-first and month-first dates: "
                                                r"line 3 \('13/01/1990'\).*line 4 "
                                                r"\('01/14/1990'\).*ISO 8601"):
        load_frame(_dated(tmp_path, mixed))
    both = ["01/02/1990", "01/03/1990", "01/04/1990"]  # monthly day first, or daily month first
    with pytest.raises(InvalidInputError, match=r"read both day first and month first \(line "
                                                r"2: '01/02/1990'\).*ISO 8601"):
        load_frame(_dated(tmp_path, both))


def test_a_format_given_reads_what_inference_refuses(tmp_path: Path) -> None:
    """Issue 42, item 7: a file with another separator, date column and date format trains
    with --sep, --date-column and --date-format instead of being rewritten by hand."""
    dates = [f"{d:02d}.02.1990" for d in range(1, 13)]  # every one reads both ways
    text = "Zeit;a;b\n" + "".join(f"{d};{i};{i % 3}\n" for i, d in enumerate(dates))
    path = _write_text(tmp_path / "semi.csv", text)
    with pytest.raises(InvalidInputError, match=r"not comma-separated.*--sep ';'"):
        load_frame(path)
    with pytest.raises(InvalidInputError, match=r"no date column.*--date-column"):
        load_frame(path, fmt=CsvFormat(sep=";"))
    with pytest.raises(InvalidInputError, match=r"read both day first and month first"
                                                r".*--date-format"):
        load_frame(path, fmt=CsvFormat(sep=";", date_column="Zeit"))
    frame = load_frame(path, fmt=CsvFormat(sep=";", date_column="Zeit", date_format="%d.%m.%Y"))
    assert frame.index.name == "Zeit" and list(frame.columns) == ["a", "b"]
    assert frame.index[1] == pd.Timestamp("1990-02-02")  # day first, as the format says
    assert frame["b"].tolist() == [float(i % 3) for i in range(12)]
    month_first = load_frame(path, fmt=CsvFormat(sep=";", date_column="Zeit",
                                                  date_format="%m.%d.%Y"))
    assert month_first.index[1] == pd.Timestamp("1990-02-02")
    assert month_first.index[2] == pd.Timestamp("1990-03-02")
    with pytest.raises(InvalidInputError, match=r"'01.02.1990' at line 2.*does not match the "
                                                r"date format '%Y-%m-%d'.*--date-format"):
        load_frame(path, fmt=CsvFormat(sep=";", date_column="Zeit", date_format="%Y-%m-%d"))
    with pytest.raises(InvalidInputError, match=r"has no column 'When'.*\['Zeit', 'a', 'b'\]"):
        load_frame(path, fmt=CsvFormat(sep=";", date_column="When"))


@pytest.mark.parametrize(("kwargs", "expected"), [
    ({"sep": ";;"}, "not one field-separator character"),
    ({"sep": "\n"}, "not one field-separator character"),
    ({"date_format": "dd.mm.yyyy"}, "no strftime directive"),
    ({"date_column": " "}, "not a column name"),
])
def test_a_bad_csv_format_is_named(kwargs: dict, expected: str) -> None:
    with pytest.raises(InvalidInputError, match=expected):
        CsvFormat(**kwargs)


def test_missing_csv_file(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="does not exist"):
        load_frame(tmp_path / "nope.csv")


def test_unknown_column_is_named_with_the_available_ones(tmp_path: Path) -> None:
    path = _write_csv(tmp_path / "s.csv", 50)
    with pytest.raises(InvalidInputError) as info:
        load_frame(path, columns=["ramp", "OT"])
    assert "unknown column 'OT'" in str(info.value)
    assert "['ramp', 'noise']" in str(info.value)
    with pytest.raises(InvalidInputError, match="date column, not a channel"):
        load_frame(path, columns=["date"])
    with pytest.raises(InvalidInputError, match="more than once"):
        load_frame(path, columns=["ramp", "ramp"])


def test_constant_channel_on_train_rows(tmp_path: Path) -> None:
    # constant over the training rows (first 70 %), varying afterwards: still unusable
    cells = [f"{i},5" for i in range(70)] + [f"{i},{i}" for i in range(70, 100)]
    text = "date,a,b\n" + "".join(
        f"{day},{c}\n"
        for day, c in zip(pd.date_range("2020", periods=100, freq="h"), cells, strict=True)
    )
    path = _write_text(tmp_path / "c.csv", text)
    with pytest.raises(InvalidInputError) as info:
        load_forecasting_data(csv=path, seq_len=4, horizon=2)
    message = str(info.value)
    assert "channel 'b' is constant" in message
    assert "training rows [0, 70)" in message and str(path) in message
    assert "divide by zero" in message


def test_series_too_short_for_window_names_l_h_rows_and_minimum(tmp_path: Path) -> None:
    path = _write_csv(tmp_path / "s.csv", 100)  # train 70, val [70 - L, 80), test [80 - L, 100)
    with pytest.raises(InvalidInputError) as info:
        load_forecasting_data(csv=path, seq_len=10, horizon=12)
    message = str(info.value)
    assert "val split has 20 rows" in message and "10 look-back rows" in message
    assert "L = 10" in message and "H = 12" in message and "at least 22 rows" in message
    with pytest.raises(InvalidInputError, match=r"train split has 70 rows.*at least 80 rows"):
        load_forecasting_data(csv=path, seq_len=60, horizon=20)
    with pytest.raises(InvalidInputError, match="needs 14400 rows"):
        split_rows(1000, seq_len=336, horizon=24, convention=ETT_HOURLY)


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"seq_len": 0}, "seq_len = 0 is outside the valid range [1, inf)"),
        ({"horizon": -3}, "horizon = -3 is outside the valid range [1, inf)"),
        ({"seq_len": 2.5}, "seq_len = 2.5 is not an integer >= 1"),
        ({"horizon": True}, "horizon = True is not an integer >= 1"),
        ({"max_train_windows": 0}, "max_train_windows = 0 is outside"),
        ({"dataset": None}, "no data given"),
        ({"dataset": "ETTm3"}, "unknown dataset 'ETTm3'; known datasets: ETTh1, ETTh2"),
    ],
)
def test_bad_arguments(kwargs: dict, expected: str, isolated: Path) -> None:
    with pytest.raises(InvalidInputError) as info:
        load_forecasting_data(**{"allow_download": False, **kwargs})
    assert expected in str(info.value)
    if "unknown dataset" in expected:
        assert "--csv" in str(info.value)


# --------------------------------------------------------------------------------------------
# locating files: search order, checksums, offline error, download
# --------------------------------------------------------------------------------------------


def test_cache_dir_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_dir() == tmp_path / "qpriv" / "data"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache_dir() == Path.home() / ".cache" / "qpriv" / "data"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/dir")  # ignored, as XDG says
    assert cache_dir() == Path.home() / ".cache" / "qpriv" / "data"


def test_cache_dir_on_macos_is_library_caches(monkeypatch: pytest.MonkeyPatch,
                                             tmp_path: Path) -> None:
    import importlib

    import platformdirs

    monkeypatch.setattr(sys, "platform", "darwin")  # (Windows' variant imports win32 APIs)
    monkeypatch.setenv("HOME", str(tmp_path))
    try:
        importlib.reload(platformdirs)  # it picks its implementation by sys.platform
        assert cache_dir() == tmp_path / "Library" / "Caches" / "qpriv" / "data"
    finally:
        monkeypatch.undo()
        importlib.reload(platformdirs)


def test_search_order_explicit_then_env_then_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, isolated: Path, tiny_payload: bytes
) -> None:
    _register(monkeypatch, tiny_payload)
    places = {}
    for place in ("explicit", "env", "cache"):
        directory = isolated if place == "cache" else tmp_path / place
        directory.mkdir(parents=True)
        (directory / "tiny.csv").write_bytes(tiny_payload)
        places[place] = directory / "tiny.csv"
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "env"))

    assert (
        locate_dataset("Tiny", path=tmp_path / "explicit", allow_download=False)
        == (places["explicit"])
    )
    assert (
        locate_dataset("tiny", path=places["explicit"], allow_download=False)
        == (places["explicit"])
    )
    assert locate_dataset("Tiny", allow_download=False) == places["env"]
    places["env"].unlink()
    assert locate_dataset("Tiny", allow_download=False) == places["cache"]
    monkeypatch.delenv(DATA_DIR_ENV)
    assert locate_dataset("Tiny", allow_download=False) == places["cache"]
    # the front door goes through the same search and uses the registry's split
    data = load_forecasting_data("Tiny", data_dir=tmp_path / "explicit", seq_len=4, horizon=2)
    assert data.dataset == "Tiny" and data.source == places["explicit"]
    assert data.split == ((0, 42), (38, 48), (44, 60))


def test_local_checksum_mismatch_is_an_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, isolated: Path, tiny_payload: bytes
) -> None:
    _register(monkeypatch, tiny_payload)
    (tmp_path / "tiny.csv").write_bytes(tiny_payload.replace(b"2020", b"2021", 1))
    with pytest.raises(InvalidInputError) as info:
        locate_dataset("Tiny", path=tmp_path, allow_download=True)
    message = str(info.value)
    assert "fails its checksum" in message and str(tmp_path / "tiny.csv") in message
    assert "--csv" in message


def test_local_checksum_is_computed_once_per_file_version(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, isolated: Path, tiny_payload: bytes
) -> None:
    _register(monkeypatch, tiny_payload)
    path = tmp_path / "tiny.csv"
    path.write_bytes(tiny_payload)
    calls = []
    real = fdatasets._sha256_file

    def counting(p: Path) -> str:
        calls.append(p)
        return real(p)

    monkeypatch.setattr(fdatasets, "_sha256_file", counting)
    for _ in range(3):
        locate_dataset("Tiny", path=path, allow_download=False)
    assert len(calls) == 1
    # a changed file (new mtime and size) is hashed again, and then fails
    path.write_bytes(tiny_payload + b"\n")
    with pytest.raises(InvalidInputError, match="fails its checksum"):
        locate_dataset("Tiny", path=path, allow_download=False)
    assert len(calls) == 2


def test_a_given_path_without_the_file_is_an_error_not_a_fallback(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, isolated: Path, tiny_payload: bytes
) -> None:
    """--data-dir names the one place to read: a folder that lacks the file is refused even
    where $QPRIV_DATA_DIR and the cache hold a good copy."""
    _register(monkeypatch, tiny_payload)
    for directory in (tmp_path / "env", isolated):
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "tiny.csv").write_bytes(tiny_payload)
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "env"))
    (tmp_path / "empty").mkdir()
    for given, named in ((tmp_path / "empty", tmp_path / "empty" / "tiny.csv"),
                         (tmp_path / "missing", tmp_path / "missing")):
        with pytest.raises(InvalidInputError) as info:
            locate_dataset("Tiny", path=given, allow_download=True)
        message = str(info.value)
        assert f"{named}: not found" in message
        assert "--data-dir" in message and str(tmp_path / "env") not in message
    assert locate_dataset("Tiny", allow_download=False) == tmp_path / "env" / "tiny.csv"


def test_offline_without_file_lists_every_place_and_the_fixes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, isolated: Path, tiny_payload: bytes
) -> None:
    spec = _register(monkeypatch, tiny_payload)
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "envdir"))
    with pytest.raises(InvalidInputError) as info:
        locate_dataset("Tiny", allow_download=False)
    message = str(info.value)
    for part in (
        f"{tmp_path / 'envdir' / 'tiny.csv'} (not found: no such directory)",
        str(isolated / "tiny.csv"),
        spec.url,
        "disabled",
        f"set {DATA_DIR_ENV}",
        "--data-dir",
        "internet access",
    ):
        assert part in message
    monkeypatch.delenv(DATA_DIR_ENV)
    with pytest.raises(InvalidInputError, match=r"\$QPRIV_DATA_DIR: \(not set\)"):
        locate_dataset("Tiny", allow_download=False)


def test_download_verifies_and_writes_into_the_cache(
    monkeypatch: pytest.MonkeyPatch,
    server: _Server,
    tmp_path: Path,
    isolated: Path,
    tiny_payload: bytes,
) -> None:
    (tmp_path / "www" / "tiny.csv").write_bytes(tiny_payload)
    _register(monkeypatch, tiny_payload, url=f"{server.url}/tiny.csv")
    path = locate_dataset("Tiny")
    assert path == isolated / "tiny.csv"
    assert path.read_bytes() == tiny_payload
    assert sorted(p.name for p in isolated.iterdir()) == ["tiny.csv"]  # no temp file left
    assert server.requests == ["/tiny.csv"]
    assert locate_dataset("Tiny") == path  # now found in the cache
    assert server.requests == ["/tiny.csv"]


def test_download_checksum_mismatch_leaves_nothing_in_the_cache(
    monkeypatch: pytest.MonkeyPatch,
    server: _Server,
    tmp_path: Path,
    isolated: Path,
    tiny_payload: bytes,
) -> None:
    (tmp_path / "www" / "tiny.csv").write_bytes(tiny_payload)
    _register(monkeypatch, tiny_payload, url=f"{server.url}/tiny.csv", sha256="0" * 64)
    with pytest.raises(InvalidInputError) as info:
        locate_dataset("Tiny")
    message = str(info.value)
    assert "downloaded from" in message and "fails its checksum" in message
    assert "nothing was written" in message
    assert list(isolated.iterdir()) == []


def test_download_failure_lists_places(
    monkeypatch: pytest.MonkeyPatch, server: _Server, isolated: Path, tiny_payload: bytes
) -> None:
    _register(monkeypatch, tiny_payload, url=f"{server.url}/missing.csv")
    with pytest.raises(InvalidInputError) as info:
        locate_dataset("Tiny")
    message = str(info.value)
    assert "failed" in message and "404" in message and str(isolated / "tiny.csv") in message
    assert list(isolated.iterdir()) == []


def test_an_unwritable_cache_is_named_not_blamed_on_the_network(
    monkeypatch: pytest.MonkeyPatch, server: _Server, tmp_path: Path, tiny_payload: bytes
) -> None:
    blocker = tmp_path / "afile"
    blocker.write_text("not a directory")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    _register(monkeypatch, tiny_payload, url=f"{server.url}/tiny.csv")
    with pytest.raises(InvalidInputError, match=r"the user cache .*afile/qpriv/data cannot be "
                                                r"written .*set XDG_CACHE_HOME"):
        locate_dataset("Tiny")
    assert server.requests == []


def test_a_timeout_while_reading_is_the_networks_not_the_caches(
    monkeypatch: pytest.MonkeyPatch, isolated: Path, tiny_payload: bytes
) -> None:
    _register(monkeypatch, tiny_payload)

    def stalled(spec, target):
        raise TimeoutError("The read operation timed out")

    monkeypatch.setattr(fdatasets, "_download", stalled)
    with pytest.raises(InvalidInputError, match=r"download from .*: failed \(The read "
                                                r"operation timed out\).*internet access"):
        locate_dataset("Tiny")


def test_a_data_dir_variable_naming_a_file_says_so(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, isolated: Path, tiny_payload: bytes
) -> None:
    _register(monkeypatch, tiny_payload)
    (tmp_path / "tiny.csv").write_bytes(tiny_payload)
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "tiny.csv"))
    with pytest.raises(InvalidInputError, match=r"\$QPRIV_DATA_DIR: .*tiny.csv/tiny.csv \(not "
                                                r"found: .*tiny.csv is a file, not a directory"):
        locate_dataset("Tiny", allow_download=False)


def test_a_killed_downloads_leftover_goes_with_the_next_download(
    monkeypatch: pytest.MonkeyPatch, server: _Server, tmp_path: Path, isolated: Path,
    tiny_payload: bytes,
) -> None:
    (tmp_path / "www" / "tiny.csv").write_bytes(tiny_payload)
    _register(monkeypatch, tiny_payload, url=f"{server.url}/tiny.csv")
    isolated.mkdir(parents=True, exist_ok=True)
    old, fresh = isolated / ".tiny.csv.abc123.part", isolated / ".tiny.csv.def456.part"
    old.write_bytes(b"half")
    fresh.write_bytes(b"another download, still running")
    os.utime(old, (0, 0))
    locate_dataset("Tiny")
    assert sorted(p.name for p in isolated.iterdir()) == [fresh.name, "tiny.csv"]


def test_values_too_large_to_scale_are_named_not_called_constant(tmp_path: Path) -> None:
    text = "date,a,b\n" + "".join(
        f"{day},{i},{1e308 if i % 2 else -1e308}\n"
        for i, day in enumerate(pd.date_range("2020", periods=100, freq="h"))
    )
    path = _write_text(tmp_path / "big.csv", text)
    with pytest.raises(InvalidInputError, match=r"channel 'b' .* has values too large to z-score"):
        load_forecasting_data(csv=path, seq_len=4, horizon=2)


def test_a_csv_cut_inside_its_last_row_is_named_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "cut.csv"
    path.write_text("date,a,b\n2020-01-01 00:00,1.25,2\n2020-01-01 01:00,1.5,3\n"
                    "2020-01-01 02:00,1.7")
    with pytest.raises(InvalidInputError, match=r"cut.csv, line 4 \(the last\): 2 of 3 fields, "
                                                r"and no line break after it"):
        load_frame(path)
    path.write_text(path.read_text() + ",")  # cut after the separator: an empty field
    with pytest.raises(InvalidInputError, match=r"line 4 .*2 of 3 fields"):
        load_frame(path)
    path.write_text(path.read_text()[:-1] + "5,4\n")  # the same file, whole
    assert load_frame(path)["a"].tolist() == [1.25, 1.5, 1.75]


@pytest.mark.parametrize("shape", ["no final newline", "crlf", "bom", "slash dates"])
def test_the_standard_benchmark_files_shapes_are_read(tmp_path: Path, shape: str) -> None:
    """exchange_rate.csv (daily, dates like 1990/1/1 0:00, no final newline) and files
    exported on other systems (CRLF line ends, a byte-order mark) train as they are."""
    rows = [("1990/1/1 0:00" if shape == "slash dates" else "1990-01-01 00:00", "0.7855", "1.61"),
            ("1990/1/2 0:00" if shape == "slash dates" else "1990-01-02 00:00", "0.7818", "1.6"),
            ("1990/1/3 0:00" if shape == "slash dates" else "1990-01-03 00:00", "0.7867", "1.63")]
    end = "\r\n" if shape == "crlf" else "\n"
    text = end.join(["date,a,OT", *(",".join(row) for row in rows)])
    text = ("\ufeff" if shape == "bom" else "") + text + ("" if shape != "crlf" else end)
    path = tmp_path / "exchange.csv"
    path.write_bytes(text.encode("utf-8"))
    frame = load_frame(path)
    assert frame["OT"].tolist() == [1.61, 1.6, 1.63]
    assert frame.index[-1] == pd.Timestamp("1990-01-03")


def test_a_directory_given_as_the_csv_is_named(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="is a directory; give the CSV file itself"):
        load_frame(tmp_path)
