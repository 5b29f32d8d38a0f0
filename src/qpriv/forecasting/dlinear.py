"""DLinear (Zeng et al. 2023, "Are Transformers Effective for Time Series Forecasting?"): a
moving-average split of the look-back into trend and seasonal parts, one linear head on each.

``y_hat = W_s (x - A x) + W_t A x`` per channel (one pair of heads shared by the channels, the
paper's default), A the moving average of :data:`MOVING_AVERAGE` steps with the ends
replicated (the paper's ``series_decomp``). The look-back's mean is subtracted before and
added back after (RevIN without the scale), so that the forecaster is equivariant to
per-channel affine maps, as qpriv's other linear forecasters are: a scaler then serves the
training alone. Every step is linear in x, so the trained model is one (H, L) kernel, a
:class:`~qpriv.forecasting.linear.LinearForecaster`, and runs, saves and reports as one.

Two methods: ``dlinear`` trains it by the one trainer loop without noise (the paper's
settings: learning rate 0.005, batch 32, 10 epochs), ``dpsgd-dlinear`` by DP-SGD
(:func:`qpriv.forecasting.linear_dpsgd.fit_dpsgd_linear`, at the window or the record unit)
with :data:`DPSGD_SETTINGS`: dpsgd-linear's clip, batch and epochs, and a learning rate fixed
without the data (below).

Why dpsgd-linear's learning rate (0.03) does not carry over: DLinear has 2 H L weights
(16,128 at L = 336, H = 24) against dpsgd-linear's few hundred, and DP-SGD adds N(0, (sigma
C / qN)^2) to every one of them at every step (about 25 per weight at the record unit, eps 1,
where sigma is about 2600). The trainer's RAdam takes its first steps un-normalised, as
momentum SGD, so each weight moves by about lr x 25 per step; the forecast, a sum over the
2L weights of a row, then moves by that times sqrt(2L), about 20 at lr = 0.03: the model
diverges (test MSE near 1000 on ETTh1). Past those steps each weight still walks by about lr
per step, lr sqrt(T) sqrt(2L) in a forecast after T steps. lr = 1e-4 keeps both under about
0.2 at eps 1 over dpsgd-linear's 170 steps: a bound on what the noise can do, fixed from the
dimensions and the noise scale, not from any validation score.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from qpriv.forecasting.linear import LinearForecaster, LinearSpec
from qpriv.forecasting.linear_dpsgd import DEFAULTS, DPSGD_LINEAR_DESIGN, fit_dpsgd_linear
from qpriv.forecasting.recipe import ForecasterRecipe, ForecasterTrainConfig
from qpriv.forecasting.windows import ForecastData
from qpriv.privacy.claims import PrivacyClaim
from qpriv.privacy.randomness import run_seed
from qpriv.training.trainer import Trainer

MOVING_AVERAGE = 25
"""The paper's moving-average window."""
SETTINGS: dict[str, Any] = {"lr": 0.005, "batch_size": 32, "epochs": 10}
"""The paper's training settings for the non-private ``dlinear``."""
DPSGD_SETTINGS: dict[str, Any] = {**DEFAULTS, "lr": 1e-4}
"""``dpsgd-dlinear``'s: dpsgd-linear's clip, batch and epochs, the learning rate bounded so that
the noise cannot carry the 2 H L weights away (module docstring)."""


def moving_average_matrix(seq_len: int, size: int = MOVING_AVERAGE) -> np.ndarray:
    """A (L, L): row i averages x[i - p .. i + p] (p = (size - 1) // 2), indices clipped to the
    look-back, i.e. the ends replicated as the paper's ``series_decomp`` pads them."""
    half = (size - 1) // 2
    matrix = np.zeros((seq_len, seq_len))
    for i in range(seq_len):
        for j in range(i - half, i - half + size):
            matrix[i, min(max(j, 0), seq_len - 1)] += 1.0 / size
    return matrix


class DLinear(nn.Module):
    """(B, L, C) -> (B, H, C): trend and seasonal heads on the mean-removed look-back."""

    def __init__(self, *, seq_len: int, horizon: int, size: int = MOVING_AVERAGE) -> None:
        super().__init__()
        self.size = size
        self.register_buffer("average", torch.tensor(moving_average_matrix(seq_len, size),
                                                     dtype=torch.float32))
        # the paper's initialisation: every head weight 1 / L
        self.seasonal = nn.Parameter(torch.full((horizon, seq_len), 1.0 / seq_len))
        self.trend = nn.Parameter(torch.full((horizon, seq_len), 1.0 / seq_len))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        level = x.mean(dim=1, keepdim=True)                               # (B, 1, C)
        z = x - level
        trend = torch.einsum("kl,blc->bkc", self.average, z)             # (B, L, C)
        out = (torch.einsum("hl,blc->bhc", self.seasonal, z - trend)
               + torch.einsum("hl,blc->bhc", self.trend, trend))          # (B, H, C)
        return out + level

    def kernel(self) -> np.ndarray:
        """The (H, L) kernel of :meth:`forward`: (W_s (I - A) + W_t A) (I - J / L) + J / L."""
        ws, wt = self.seasonal.detach().double(), self.trend.detach().double()
        a = self.average.double()
        horizon, seq_len = ws.shape
        centre = torch.eye(seq_len, dtype=torch.float64) - 1.0 / seq_len
        mean = torch.full((horizon, seq_len), 1.0 / seq_len, dtype=torch.float64)
        return ((ws @ (torch.eye(seq_len, dtype=torch.float64) - a) + wt @ a) @ centre
                + mean).numpy()

    def forecaster(self, *, name: str, details: dict[str, Any],
                   spec: LinearSpec = DPSGD_LINEAR_DESIGN) -> LinearForecaster:
        """The trained model as a :class:`LinearForecaster` (float64)."""
        return LinearForecaster(kernel=self.kernel(), spec=spec, name=name,
                                details={"architecture": "DLinear",
                                         "moving_average": self.size, **details})


def fit_dlinear(data: ForecastData, *, seed: int | None = 2024, progress: bool = False
                ) -> LinearForecaster:
    """``dlinear``: DLinear trained without noise (:data:`SETTINGS`), the epoch of the best
    validation MSE kept."""
    seed = run_seed(seed)
    model = DLinear(seq_len=data.seq_len, horizon=data.horizon)
    config = ForecasterTrainConfig(
        epochs=SETTINGS["epochs"], batch_size=SETTINGS["batch_size"], lr=SETTINGS["lr"],
        lr_quantum_attention=SETTINGS["lr"], weight_decay=0.0,
        plateau_patience=SETTINGS["epochs"], seed=seed, device="cpu", progress=progress)
    fit = Trainer(model, train=data.train, val=data.val, config=config,
                  recipe=ForecasterRecipe()).fit()
    return model.forecaster(name="dlinear", details={
        "best_epoch": fit.best_epoch, "history": fit.history, **SETTINGS})


def fit_dpsgd_dlinear(data: ForecastData, *, eps: float, delta: float = 1e-6,
                      seed: int | None = 2024, unit: str = "window", scaler: str | None = None,
                      progress: bool = False) -> tuple[LinearForecaster, PrivacyClaim]:
    """``dpsgd-dlinear``: DLinear trained by DP-SGD at the window or record unit."""
    model = DLinear(seq_len=data.seq_len, horizon=data.horizon)
    return fit_dpsgd_linear(data, eps=eps, delta=delta, seed=seed, unit=unit, scaler=scaler,
                            progress=progress, model=model, method="dpsgd-dlinear",
                            settings=DPSGD_SETTINGS)


def dlinear_record(method: str) -> dict[str, Any]:
    """What config.json records of a DLinear method's model: the architecture and its training
    settings (no feature design: DLinear reads the whole look-back)."""
    return {"architecture": "DLinear", "moving_average": MOVING_AVERAGE,
            "train": dict(DPSGD_SETTINGS if method == "dpsgd-dlinear" else SETTINGS)}
