"""The seasonal period from the timestamps, and the linear forecasters at other frequencies.

Two generated series stand in for the field's other sampling steps: a 15-minute one (a daily
cycle of 96 rows, a weekly one, a slow level and AR(1) noise) and a daily one (a weekly cycle
of 7). On both, the public floor built from the detected period is no worse on the validation
split than repeating the last value or the last period, and the noiseless dp-linear is within
3 % of the ridge on the same period's features.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from qpriv.cli import main
from qpriv.forecasting.linear import (
    LinearForecaster,
    default_spec,
    evaluate,
    fit_dp_linear,
    fit_ridge,
    public_forecaster,
)
from qpriv.forecasting.linear_design import profile_rows
from qpriv.forecasting.seasonality import NO_DATES_PERIOD, resolve_period, seasonal_period
from qpriv.forecasting.windows import load_forecasting_data


@pytest.mark.parametrize(("freq", "period"), [
    ("h", 24), ("15min", 96), ("10min", 144), ("2h", 12), ("D", 7), ("B", 5), ("W-SUN", 52),
    ("MS", 12), ("ME", 12), ("QS-JAN", 4), ("YS", 1), ("7min", 1), ("2D", 1),
])
def test_period_of_each_sampling_step(freq: str, period: int) -> None:
    assert seasonal_period(pd.date_range("2021-01-04", periods=60, freq=freq)) == period


def test_period_without_timestamps_and_given() -> None:
    assert seasonal_period(None) == NO_DATES_PERIOD == 24
    assert seasonal_period(pd.DatetimeIndex(["2021-01-01", "2021-01-02"])) == 1
    hourly = pd.date_range("2021-01-01", periods=60, freq="h")
    assert resolve_period(hourly, None) == 24
    assert resolve_period(hourly, 168) == 168


def _series(kind: str, rows: int, *, channels: int = 3, seed: int = 0) -> pd.DataFrame:
    """A seasonal series: a near-unit-root level, a cycle of one period (two harmonics, its
    amplitude drifting), a slower cycle, and AR(1) noise."""
    rng = np.random.default_rng(seed)
    period, freq, slow = (96, "15min", 96 * 7) if kind == "15min" else (7, "D", 365)
    t = np.arange(rows)
    out = {}
    for c in range(channels):
        phi = 1.0 - 1.0 / (20 * period)
        shocks = rng.normal(0.0, 1.2 * np.sqrt(1.0 - phi ** 2), rows)
        noise = rng.normal(0.0, 0.3, rows)
        level, ar = np.zeros(rows), np.zeros(rows)
        for i in range(1, rows):
            level[i] = phi * level[i - 1] + shocks[i]
            ar[i] = 0.9 * ar[i - 1] + noise[i]
        amp = 1.0 + 0.3 * np.sin(2 * np.pi * t / (5 * slow) + c)
        cycle = amp * (np.sin(2 * np.pi * t / period + c)
                       + 0.4 * np.sin(4 * np.pi * t / period + 2 * c))
        out[f"x{c}"] = 5.0 + level + cycle + 0.3 * np.sin(2 * np.pi * t / slow + c) + ar
    frame = pd.DataFrame(out, index=pd.date_range("2020-01-01", periods=rows, freq=freq))
    frame.index.name = "date"
    return frame


SERIES = {"15min": (12_000, 336, 96), "daily": (3_000, 96, 28)}
"""kind: (rows, L, H): a day ahead from a week back; four weeks ahead from about three months."""


@pytest.fixture(scope="module", params=sorted(SERIES))
def generated(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    kind = request.param
    rows, seq_len, horizon = SERIES[kind]
    path = tmp_path_factory.mktemp(kind) / f"{kind}.csv"
    _series(kind, rows).to_csv(path)
    data = load_forecasting_data(csv=path, seq_len=seq_len, horizon=horizon)
    return kind, path, data


def _last_value(seq_len: int, horizon: int, spec) -> LinearForecaster:
    kernel = np.zeros((horizon, seq_len))
    kernel[:, -1] = 1.0
    return LinearForecaster(kernel=kernel, spec=spec, name="last value", details={})


def test_floor_uses_the_detected_period_and_beats_the_plain_forecasts(generated) -> None:
    kind, _, data = generated
    spec = default_spec(data)
    assert spec.period == {"15min": 96, "daily": 7}[kind]
    floor = evaluate(public_forecaster(seq_len=data.seq_len, horizon=data.horizon, spec=spec),
                     data.val)["mse"]
    last = evaluate(_last_value(data.seq_len, data.horizon, spec), data.val)["mse"]
    seasonal = LinearForecaster(
        kernel=profile_rows(seq_len=data.seq_len, horizon=data.horizon, period=spec.period,
                            days=1), spec=spec, name="seasonal naive", details={})
    naive = evaluate(seasonal, data.val)["mse"]
    assert floor <= min(last, naive)
    # the hourly period on these series is the wrong cycle: the floor it builds is worse
    wrong = evaluate(public_forecaster(seq_len=data.seq_len, horizon=data.horizon,
                                       spec=default_spec(data, period=24)), data.val)["mse"]
    assert wrong > floor


def test_noiseless_dp_linear_within_3_percent_of_ridge(generated) -> None:
    _, _, data = generated
    ridge = evaluate(fit_ridge(data), data.test)["mse"]
    for unit in ("record", "window"):
        fit = fit_dp_linear(data, eps=1000.0, unit=unit, noise=False)
        assert fit.claims[0].details["period"] == default_spec(data).period
        mse = evaluate(fit.model, data.test)["mse"]
        assert mse <= 1.03 * ridge, (unit, mse, ridge)


def test_train_reads_the_period_and_takes_one(generated, capsys: pytest.CaptureFixture) -> None:
    kind, path, data = generated
    args = ["train", "--csv", str(path), "--method", "public", "--seq-len", str(data.seq_len),
            "--horizon", str(data.horizon), "--json", "--quiet"]
    assert main(args) == 0
    detected = json.loads(capsys.readouterr().out)
    assert detected["model"]["spec"]["period"] == {"15min": 96, "daily": 7}[kind]
    assert main([*args, "--period", "3"]) == 0
    assert json.loads(capsys.readouterr().out)["model"]["spec"]["period"] == 3


@pytest.mark.parametrize(("extra", "message"), [
    (["--method", "classical", "--period", "24"], "--period sets the linear forecasters'"),
    (["--method", "public", "--period", "0"], "--period"),
])
def test_train_refuses_a_bad_period(tmp_path: Path, extra: list[str], message: str,
                                    capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "daily.csv"
    _series("daily", 600).to_csv(path)
    assert main(["train", "--csv", str(path), "--seq-len", "96", "--horizon", "7",
                 *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err

