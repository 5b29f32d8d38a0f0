"""dp-linear's released statistics on generated series and generated neighbours: replacing one
record (record unit) or adding one window (window unit) moves A and B by at most the
sensitivities the fit calibrates its noise to. The defect found here (a window whose rows
overflow made the whole release NaN) has its explicit examples at the end."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from qpriv.forecasting.linear import (
    LinearSpec,
    fit_dp_linear,
    linear_maps,
    record_maps,
    sufficient_statistics,
)
from qpriv.forecasting.windows import load_forecasting_data
from qpriv.privacy.ssp import record_sensitivities_projected, window_sensitivities

L, H = 16, 4
DESIGNS = st.sampled_from([
    LinearSpec(period=4, recent=(1, 2, 4, 8), public_days=2, output_blocks=2),
    LinearSpec(period=4, recent=(1, 4), public_days=2, output_blocks=1),
    LinearSpec(period=4, recent=(2, 8, 16), public_days=3, output_blocks=4),
])
VALUES = st.floats(-1e3, 1e3, allow_nan=False)
RAW_VALUES = st.one_of(VALUES, st.floats(allow_nan=False, allow_infinity=False),
                       st.sampled_from([1e300, -1e300, 1e-160, 1.7976931348623157e308]))
"""The window unit reads the file's values as they are: any finite double."""
SETTINGS = settings(max_examples=150, deadline=None)


@SETTINGS
@given(design=DESIGNS, series=arrays(np.float64, st.tuples(st.integers(L + H, 60),
                                                         st.integers(1, 3)), elements=VALUES),
       where=st.tuples(st.floats(0, 1, exclude_max=True), st.integers(0, 2)), new=VALUES,
       clip=st.floats(0.1, 5.0), feature_clip=st.floats(0.1, 10.0),
       target_clip=st.floats(0.1, 10.0))
def test_one_record_moves_the_statistics_by_at_most_the_record_sensitivity(
        design, series, where, new, clip, feature_clip, target_clip):
    m, public, v = linear_maps(design, seq_len=L, horizon=H)
    row, channel = int(where[0] * series.shape[0]), where[1] % series.shape[1]
    other = series.copy()
    other[row, channel] = new
    kwargs = {"features": m, "public": public, "outputs": v, "clip": clip,
              "feature_clip": feature_clip, "target_clip": target_clip}
    a0, b0 = sufficient_statistics(series, **kwargs)
    a1, b1 = sufficient_statistics(other, **kwargs)
    d_a, d_b = record_sensitivities_projected(*record_maps(m, public, v), bound=clip,
                                              feature_clip=feature_clip,
                                              target_clip=target_clip)
    assert np.linalg.norm(a1 - a0) <= d_a * (1 + 1e-9) + 1e-12
    assert np.linalg.norm(b1 - b0) <= d_b * (1 + 1e-9) + 1e-12


@SETTINGS
@given(design=DESIGNS, series=arrays(np.float64, st.tuples(st.integers(L + H + 1, 60),
                                                         st.integers(1, 3)),
                                     elements=RAW_VALUES),
       first=st.booleans(), feature_clip=st.floats(0.1, 10.0),
       target_clip=st.floats(0.1, 10.0))
def test_one_window_moves_the_statistics_by_at_most_the_window_sensitivity(
        design, series, first, feature_clip, target_clip):
    """The window unit's statistics (each row divided by its look-back's std) with and without
    the first or the last window (all its channels)."""
    m, public, v = linear_maps(design, seq_len=L, horizon=H)
    kwargs = {"features": m, "public": public, "outputs": v, "rescale": True,
              "feature_clip": feature_clip, "target_clip": target_clip}
    a0, b0 = sufficient_statistics(series, **kwargs)
    a1, b1 = sufficient_statistics(series, windows=slice(1, None) if first else slice(0, -1),
                                   **kwargs)
    d_a, d_b = window_sensitivities(rows_per_unit=series.shape[1], feature_clip=feature_clip,
                                    target_clip=target_clip)
    assert np.linalg.norm(a1 - a0) <= d_a * (1 + 1e-9) + 1e-12
    assert np.linalg.norm(b1 - b0) <= d_b * (1 + 1e-9) + 1e-12


def _window_statistics(series: np.ndarray, **kwargs) -> tuple[np.ndarray, np.ndarray]:
    m, public, v = linear_maps(DESIGNS_EXAMPLE, seq_len=L, horizon=H)
    return sufficient_statistics(series, features=m, public=public, outputs=v, rescale=True,
                                 feature_clip=2.0, target_clip=2.0, **kwargs)


DESIGNS_EXAMPLE = LinearSpec(period=4, recent=(1, 2, 4, 8), public_days=2, output_blocks=2)


def test_a_window_that_overflows_stays_inside_the_window_sensitivity():
    """Found here: a look-back that varies by 1e-160 before a horizon at 1e300 (its residual
    divided by that std overflows), or values near the largest double (the features overflow),
    made the window's rows NaN, and with them the whole of A and B, whatever the other windows
    held: adding one window changed the release by more than any noise covers. Such rows are
    now dropped (0, inside the ball)."""
    d_a, d_b = window_sensitivities(rows_per_unit=1, feature_clip=2.0, target_clip=2.0)
    calm = np.sin(np.arange(L + H + 10))[:, None]
    for window in (np.r_[np.tile([0.0, 1e-160], L // 2), np.full(H, 1e300)],
                   np.r_[np.tile([1.7e308, -1.7e308], L // 2), np.full(H, 1.7e308)]):
        series = np.r_[window[:, None], calm]
        with_it, without = _window_statistics(series), _window_statistics(
            series, windows=slice(1, None))
        for got, rest, bound in zip(with_it, without, (d_a, d_b), strict=True):
            assert np.isfinite(got).all()
            assert np.linalg.norm(got - rest) <= bound * (1 + 1e-9)


def test_a_file_the_loader_accepts_cannot_make_the_window_release_nan(tmp_path):
    """The same defect end to end: 300 hourly rows whose values the loader accepts (a stretch
    varying by 1e-160, then four rows at 1e150) gave a NaN kernel at the window unit."""
    rng = np.random.default_rng(0)
    values = 10 + 3 * np.sin(2 * np.pi * np.arange(300) / 4) + rng.normal(size=300)
    values[100:148] = np.tile([0.0, 1e-160], 24)
    values[148:152] = 1e150
    frame = pd.DataFrame({"date": pd.date_range("2020-01-01", periods=300, freq="h"),
                          "x": values})
    frame.to_csv(tmp_path / "spiky.csv", index=False)
    data = load_forecasting_data(csv=tmp_path / "spiky.csv", seq_len=48, horizon=4)
    fit = fit_dp_linear(data, eps=1.0, unit="window", seed=0)
    assert np.isfinite(np.asarray(fit.model.kernel)).all()
