"""A forecaster's ``score(frame)``: the errors of its forecasts every H rows, in the data's own
units, equal to forecasting each window by hand and comparing."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from qpriv.errors import InvalidInputError
from qpriv.forecasting.estimators import PublicForecaster, RidgeForecaster


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    """A daily two-channel series with a weekly cycle."""
    days = pd.date_range("2019-01-01", periods=600, freq="D", name="date")
    rng = np.random.default_rng(5)
    return pd.DataFrame({"a": np.sin(2 * np.pi * np.arange(600) / 7) + rng.normal(0, .3, 600),
                         "b": rng.normal(0, 1, 600).cumsum() / 10}, index=days)


@pytest.mark.parametrize("estimator", [PublicForecaster(seq_len=56, horizon=7),
                                       RidgeForecaster(seq_len=56, horizon=7)])
def test_score_is_every_windows_forecast_against_what_followed(frame, estimator, tmp_path):
    model = estimator.fit(frame)
    new = frame.iloc[-(56 + 3 * 7 + 2):] * 3.0 + 1.0  # other units: the errors scale with them
    errors = [model.forecast(new.iloc[:end + 1]).to_numpy()
              - new.iloc[end + 1:end + 8].to_numpy() for end in (55, 62, 69)]
    scored = model.score(new)
    assert scored["forecasts"] == 3
    assert scored["mse"] == pytest.approx(np.mean(np.square(errors)), rel=1e-12)
    assert scored["mae"] == pytest.approx(np.mean(np.abs(errors)), rel=1e-12)
    new.to_csv(tmp_path / "new.csv")
    assert model.score(tmp_path / "new.csv") == pytest.approx(scored, rel=1e-9)
    with pytest.raises(InvalidInputError, match=r"hold no forecast to score: the run needs "
                                                r"L \+ H = 63 rows"):
        model.score(new.iloc[:62])
    assert model.score(new.iloc[:63])["forecasts"] == 1
