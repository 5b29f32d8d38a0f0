"""Test metrics in the data's own units, beside the z-scored ones every run reports.

A run scores its forecasts on the z-scored test split (the LDPT paper's protocol, and what the
field compares). A user reads errors in the units of the file: since the z-score is
``z = (x - mean) / std`` per channel, an error ``e_z`` in z-scored units is ``std * e_z`` in
the file's units (the mean cancels), so per channel

    MSE = std^2 * MSE_z        MAE = std * MAE_z

Example:

>>> from qpriv.forecasting.windows import ZScoreScaler
>>> import numpy as np
>>> scaler = ZScoreScaler(mean=np.array([5.0, 0.0]), std=np.array([2.0, 0.5]))
>>> metrics = original_units(channels=("a", "b"), scaler=scaler,
...                          by_channel={"mse": [1.0, 4.0], "mae": [0.5, 2.0]})
>>> metrics["mse"], metrics["mae"]
({'a': 4.0, 'b': 1.0}, {'a': 1.0, 'b': 1.0})
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from qpriv.errors import InvalidInputError
from qpriv.forecasting.series import ZScoreScaler

__all__ = ["METRIC_UNITS", "ORIGINAL_UNITS_NOTE", "original_units"]

METRIC_UNITS = ("z-scored: the test split's MSE and MAE with each channel standardised by the "
                "training split's mean and std, averaged over windows, horizon steps and "
                "channels (the LDPT paper's protocol); original_units has them per channel in "
                "the data's own units")
"""What a run's top-level ``mse``, ``mae`` and ``val_loss`` are measured in (its
``metric_units`` key)."""

ORIGINAL_UNITS_NOTE = ("test-split MSE and MAE per channel in the data's own units (the "
                       "z-scored errors times the training split's per-channel std); like "
                       "every test number, not covered by any privacy claim")


def original_units(*, channels: Sequence[str], scaler: ZScoreScaler,
                   by_channel: Mapping[str, Sequence[float]]) -> dict:
    """``{"mse": {channel: value}, "mae": {channel: value}, "note": ...}`` in the file's units,
    from the per-channel z-scored ``by_channel`` (``{"mse": [...], "mae": [...]}``, in the
    order of ``channels``) and the scaler that z-scored the data.

    Raises:
        InvalidInputError: the lengths of ``channels``, the scaler and the metrics differ.
    """
    std = np.asarray(scaler.std, dtype=np.float64)
    mse = np.asarray(by_channel["mse"], dtype=np.float64)
    mae = np.asarray(by_channel["mae"], dtype=np.float64)
    if not len(channels) == len(std) == len(mse) == len(mae):
        raise InvalidInputError(
            f"{len(channels)} channels, a scaler of {len(std)} and metrics of {len(mse)}: they "
            "must describe the same channels")
    names = [str(c) for c in channels]
    return {"mse": dict(zip(names, (mse * std**2).tolist(), strict=True)),
            "mae": dict(zip(names, (mae * std).tolist(), strict=True)),
            "note": ORIGINAL_UNITS_NOTE}
