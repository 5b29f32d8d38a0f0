"""The record unit's scaler for dp-linear: private quantiles or declared public.

The record unit clips z-scored values to [-R, R]; the z-score comes from :func:`private_scaler`
(inside the guarantee) unless the user declares one public. Central dp-linear
(:mod:`qpriv.forecasting.linear`) and every site of a federation (:mod:`qpriv.federated.site`)
use these; they need NumPy alone, so a site's process never imports torch.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from qpriv.errors import InvalidInputError, require_in_range
from qpriv.forecasting.series import ZScoreScaler
from qpriv.privacy.quantiles import log_grid, private_location_scale
from qpriv.privacy.samplers import NoiseSampler

__all__ = ["Scaler", "private_scaler", "record_scaler"]

Scaler = Literal["private", "data"] | ZScoreScaler
"""A scaler treatment: 'private', 'data' (the loader's, declared public) or a public one."""


def private_scaler(raw: np.ndarray, *, eps: float,
                   rng: np.random.Generator | NoiseSampler) -> ZScoreScaler:
    """Per-channel (median, 1.4826 x median absolute deviation) by private quantiles on a
    log-spaced grid
    (:func:`qpriv.privacy.quantiles.private_location_scale`), eps-DP in total at the record
    unit (in exact arithmetic): a record is one value of one channel, so the channels'
    estimates compose in parallel and each channel gets all of eps; its rank sensitivity is 1.
    ``raw`` is the training rows as read from the file
    (:attr:`qpriv.forecasting.windows.ForecastData.train_raw`). The window unit needs no
    scaler (:func:`qpriv.forecasting.linear.fit_dp_linear` normalises each row by itself)."""
    raw = np.asarray(raw, dtype=np.float64)
    grid = log_grid()
    pairs = [private_location_scale(raw[:, c], eps=eps, rng=rng, grid=grid)
             for c in range(raw.shape[1])]
    mean = np.array([p[0] for p in pairs])
    std = np.array([p[1] for p in pairs])
    mean.setflags(write=False)
    std.setflags(write=False)
    return ZScoreScaler(mean=mean, std=std)


def record_scaler(scaler: Scaler, *, fitted: ZScoreScaler, raw: np.ndarray, eps: float,
                  share: float,
                  rng: np.random.Generator | NoiseSampler) -> tuple[ZScoreScaler, float, str]:
    """(scaler, eps it spends, the claim's note) for the record unit's clipping: a given
    public scaler, the loader's ``fitted`` one ('data', declared public) or
    :func:`private_scaler` on ``raw`` at ``share x eps`` ('private')."""
    if isinstance(scaler, ZScoreScaler):
        return scaler, 0.0, ("the scaler (per-channel location and scale) was given by the user "
                             "and declared public; it is used only to clip values to [-R, R]")
    if scaler == "data":
        return fitted, 0.0, (
            "the scaler was fitted on the training split in the clear and declared public by "
            "the user: it is NOT covered (it is used only to clip values to [-R, R]; the "
            "forecasts do not depend on it otherwise)")
    if scaler == "private":
        share = require_in_range("scaler_share", share, low=0.0, high=1.0,
                                 high_inclusive=False,
                                 hint="the share of eps spent on the private scaler lies in "
                                      "(0, 1)")
        eps_scaler = share * eps
        used = private_scaler(raw, eps=eps_scaler, rng=rng)
        return used, eps_scaler, (
            "the scaler (per-channel median and median absolute deviation) is private: "
            f"exponential-mechanism quantiles on a data-independent log grid at eps = "
            f"{eps_scaler:.4g}, "
            "inside the claim; it is used only to clip values to [-R, R] (the model is "
            "affine-equivariant)")
    raise InvalidInputError(
        f"scaler = {scaler!r} is not a scaler treatment; use 'private' (default), 'data' (the "
        "loader's scaler, declared public) or a ZScoreScaler of public statistics")
