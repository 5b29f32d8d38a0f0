"""dp-linear's released statistics on generated series and generated neighbours: replacing one
record (record unit) or adding one window (window unit) moves A and B by at most the
sensitivities the fit calibrates its noise to."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from qpriv.forecasting.linear import LinearSpec, linear_maps, record_maps, sufficient_statistics
from qpriv.privacy.ssp import record_sensitivities_projected, window_sensitivities

L, H = 16, 4
DESIGNS = st.sampled_from([
    LinearSpec(period=4, recent=(1, 2, 4, 8), public_days=2, output_blocks=2),
    LinearSpec(period=4, recent=(1, 4), public_days=2, output_blocks=1),
    LinearSpec(period=4, recent=(2, 8, 16), public_days=3, output_blocks=4),
])
VALUES = st.floats(-1e3, 1e3, allow_nan=False)
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
                                                         st.integers(1, 3)), elements=VALUES),
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
