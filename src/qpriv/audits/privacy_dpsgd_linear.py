"""A one-run audit of ``dpsgd-linear`` with Dirac canary windows.

The one-run game of Steinke, Nasr & Jagielski 2023 ("Privacy auditing with one (1) training
run"; :mod:`qpriv.audits.privacy_dpsgd`) needs canaries whose effects on the released model do
not mask one another. Input canaries drawn at random fail on the linear forecaster: its
trainable part is the d x k matrix W of ``K = P_pub + V W^T M`` (7 x 2 = 14 weights at the
default design), so a few hundred canaries' gradients overlap in 14 directions and the one that
was trained on cannot be told from the ones that were not.

**The canaries.** Canary i owns one coordinate (j, l) of W: it is a training window (all C
channels equal) whose look-back x has features ``M x = a e_j`` (the least-norm pre-image,
``x = a M^+ e_j``) and whose horizon is ``y = P_pub x - s b V e_l`` (a random sign s): far out
of the data in a direction the model can fit. Its gradient is ``(2 / H) a (s b e_l + a W_j)``
along row j, which for ``b >> a ||W||`` is the Dirac ``s e_j e_l^T`` with a norm far above the
clip C; clipped, each canary pushes exactly C along its own coordinate, the most any one window
may. These are the gradient ("Dirac") canaries of Steinke et al., realised as real windows that
go through the real trainer, not gradients inserted into it: the audit calls
:func:`qpriv.forecasting.linear_dpsgd.fit_dpsgd_linear` unchanged, on the auditor's dataset
with each canary window added with probability 1/2. At most d k canaries fit (one per
coordinate), so one run can certify at most about eps 1.4 at 95 % confidence (all 14 guesses
right): the game catches a broken mechanism (clipping skipped, the noise multiplier ignored,
each in most runs: below), not the gap between a correct claim and the truth.

**The score** reads the released kernel only: ``W^T = V^+ (K - P_pub) M^+`` (V has orthonormal
columns and M full row rank, both public), and canary i's score is ``-s W[j, l]``, how far the
weights moved against its gradient.

**The validation windows** are all m canaries (the auditor's choice: the validation split is
public, and the best-epoch selection it drives is post-processing of the private sequence of
weights, which DP-SGD's accounting covers). Their loss falls as the weights move along the
canaries' pushes, so the epoch released is a late one, after each included canary was sampled
several times; with the audit data's own validation windows the first epoch (one expected
sample per canary) would win, as no epoch at a small budget improves on it. The guesses (the k
highest "in", the k lowest "out") and the bound are those of :mod:`qpriv.audits.privacy_dpsgd`.

**The real windows** are a purely periodic series (:func:`quiet_dataset`), on which the public
forecast is nearly exact: their gradients almost vanish at W = 0, so that what moves a weight
is its canary and the noise, not the data's drift (on a noisy series that drift hides a
mechanism without noise entirely).

**What it can catch.** The trainer's RAdam scales each coordinate's step by its own gradient
history, so a canary whose clipping is skipped moves its weight by a few steps' worth, not by
its gradient's excess over C: on the test's data (999 windows, claim 0.25), seeds 0-3 get 11,
13, 14 and 12 of 14 guesses right with clipping skipped (bounds 0.14, 0.86, 1.43, 0.47), 13,
9, 12 and 12 with the noise multiplier ignored (0.86, 0, 0.47, 0.47), and 5-8 when correct.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd
import torch

from qpriv.audits.privacy_dpsgd import OneRunAudit, one_run_outcome
from qpriv.errors import InvalidInputError, require_positive_int
from qpriv.forecasting.linear_design import linear_maps
from qpriv.forecasting.linear_dpsgd import DPSGD_LINEAR_DESIGN, fit_dpsgd_linear
from qpriv.forecasting.windows import ForecastData, WindowDataset, load_forecasting_data

FEATURE_SIZE = 10.0
"""a: the canary's feature value, in the data's standard deviations."""
AUDIT_ROWS = 2880
"""Rows of the game's series (120 days, hourly: 1824 training windows)."""
AUDIT_SHAPE = {"seq_len": 168, "horizon": 24}
"""The game's window shape: the shortest look-back the design's features take (7 days)."""
TARGET_SIZE = 1e3
"""b: the canary's target offset along its output direction; b / a >> ||W||, so the gradient
stays on its coordinate wherever training takes W."""


def quiet_dataset(*, rows: int = AUDIT_ROWS, channels: int = 2) -> pd.DataFrame:
    """A purely periodic hourly series (a daily and a half-daily harmonic, phase-shifted per
    channel), ``rows`` x ``channels``, with its dates: the public forecast nearly fits it."""
    hours = np.arange(rows)
    values = np.stack([10.0 + 3.0 * np.sin(2 * np.pi * (hours + 5 * c) / 24)
                       + np.cos(2 * np.pi * hours / 12) for c in range(channels)], axis=1)
    dates = pd.date_range("2020-01-01", periods=rows, freq="h")
    return pd.DataFrame(values, index=pd.Index(dates, name="date"),
                        columns=[f"x{c}" for c in range(channels)])


class CanaryWindows:
    """Canary windows as the trainer fetches them: ``(m, L, C)`` look-backs, ``(m, H, C)``
    horizons."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor) -> None:
        self.x, self.y = x, y

    def __len__(self) -> int:
        return self.x.shape[0]

    def windows(self, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        idx = torch.as_tensor(index, dtype=torch.long)
        return self.x[idx], self.y[idx]


class WindowsWithCanaries:
    """The training windows the trainer fetches: the real ones, then the included canaries
    (``(m, L, C)`` look-backs and ``(m, H, C)`` horizons), indexed after them."""

    def __init__(self, real: WindowDataset, x: torch.Tensor, y: torch.Tensor) -> None:
        self.real, self.x, self.y = real, x, y

    def __len__(self) -> int:
        return len(self.real) + self.x.shape[0]

    def windows(self, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        idx = torch.as_tensor(index, dtype=torch.long)
        canary = idx >= len(self.real)
        x, y = self.real.windows(torch.where(canary, 0, idx))
        x[canary] = self.x[idx[canary] - len(self.real)]
        y[canary] = self.y[idx[canary] - len(self.real)]
        return x, y


def dirac_windows(data: ForecastData, *, coordinates: np.ndarray, signs: np.ndarray
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """The canary windows of ``coordinates`` (m x 2: j, l) and ``signs`` (module docstring),
    each with all of ``data``'s channels equal."""
    features, public, outputs = linear_maps(DPSGD_LINEAR_DESIGN, seq_len=data.seq_len,
                                            horizon=data.horizon)
    preimage = np.linalg.pinv(features)                                       # (L, d)
    x = FEATURE_SIZE * preimage[:, coordinates[:, 0]].T                       # (m, L)
    y = x @ public.T - TARGET_SIZE * signs[:, None] * outputs[:, coordinates[:, 1]].T
    channels = data.n_channels
    return (torch.tensor(np.repeat(x[:, :, None], channels, axis=2), dtype=torch.float32),
            torch.tensor(np.repeat(y[:, :, None], channels, axis=2), dtype=torch.float32))


def released_weights(kernel: np.ndarray, *, seq_len: int, horizon: int) -> np.ndarray:
    """W (d x k) read back from a released kernel ``K = P_pub + V W^T M``."""
    features, public, outputs = linear_maps(DPSGD_LINEAR_DESIGN, seq_len=seq_len,
                                            horizon=horizon)
    return (np.linalg.pinv(outputs) @ (kernel - public) @ np.linalg.pinv(features)).T


def audit_dpsgd_linear_one_run(*, eps: float = 1.0, delta: float = 1e-6,
                               canaries: int | None = None, guesses: int | None = None,
                               seed: int = 0, confidence: float = 0.95,
                               data: ForecastData | None = None) -> OneRunAudit:
    """The one-run game on ``dpsgd-linear`` at (``eps``, ``delta``) per window: ``canaries``
    Dirac windows (default and most: one per weight, d k), each added with probability 1/2,
    one :func:`~qpriv.forecasting.linear_dpsgd.fit_dpsgd_linear` run, ``guesses`` k a side
    (default: half the canaries, so every canary is guessed). ``data``: the auditor's dataset
    (default: :func:`quiet_dataset` at :data:`AUDIT_SHAPE`).

    Raises:
        InvalidInputError: more canaries than weights, or a bad count.
    """
    start = time.perf_counter()
    if data is None:
        data = load_forecasting_data(csv=quiet_dataset(), **AUDIT_SHAPE)
    features, _, outputs = linear_maps(DPSGD_LINEAR_DESIGN, seq_len=data.seq_len,
                                       horizon=data.horizon)
    weights = features.shape[0] * outputs.shape[1]
    m = weights if canaries is None else require_positive_int("canaries", canaries)
    if m > weights:
        raise InvalidInputError(f"canaries = {m} exceeds the {weights} weights of dpsgd-linear "
                                f"(one Dirac window per weight); use at most {weights}")
    k = m // 2 if guesses is None else require_positive_int("guesses", guesses)
    rng = np.random.default_rng(seed)
    cells = rng.permutation(weights)[:m]
    coordinates = np.stack([cells // outputs.shape[1], cells % outputs.shape[1]], axis=1)
    signs = rng.choice([-1.0, 1.0], size=m)
    member = torch.as_tensor(rng.random(m) < 0.5)
    x_can, y_can = dirac_windows(data, coordinates=coordinates, signs=signs)
    train = WindowsWithCanaries(data.train, x_can[member], y_can[member])
    model, claim = fit_dpsgd_linear(replace(data, train=train, val=CanaryWindows(x_can, y_can)),
                                    eps=eps, delta=delta, seed=seed + 1)
    weights_released = released_weights(model.kernel, seq_len=data.seq_len,
                                         horizon=data.horizon)
    scores = torch.as_tensor(-signs * weights_released[coordinates[:, 0], coordinates[:, 1]])
    details: dict[str, Any] = model.details
    return one_run_outcome(
        claim=claim, scores=scores, member=member, guesses=k, confidence=confidence,
        canary_words=f"{m} Dirac canary windows (one per weight of W, clipped gradients "
                     "along it)",
        noise_multiplier=details["noise_multiplier"], steps=details["steps"], start=start)
