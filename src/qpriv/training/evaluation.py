"""Evaluation of a stochastic forecaster: MSE and MAE on z-scored windows (the LDPT paper,
section 7.2).

LDPT's predictions are random (fresh shots and injection noise on every pass), so a metric is
the metric of one pass whose noise is drawn from a fixed evaluation seed, and, when asked, the
mean and standard deviation over M passes with seeds ``seed, seed + 1, ...``. The model's own
noise stream is saved before and restored after, so evaluating mid-training does not change
what training draws next.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Protocol

import torch
from torch import Tensor, nn

from qpriv.training.ahead import draw_ahead as ahead_of


class WindowSource(Protocol):
    """What the trainer needs of a dataset: a length and a batched fetch of windows."""

    def __len__(self) -> int: ...

    def windows(self, index: Tensor) -> tuple[Tensor, Tensor]:
        """``index (B,)`` -> ``x (B, L, C)``, ``y (B, H, C)``."""
        ...


def autocast(device: torch.device, *, enabled: bool) -> contextlib.AbstractContextManager:
    """Mixed precision on CUDA (bf16 where supported, else fp16); full float32 on the CPU."""
    if not enabled or device.type != "cuda":
        return contextlib.nullcontext()
    dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.autocast("cuda", dtype=dtype)


@contextlib.contextmanager
def seeded_noise(model: nn.Module, seed: int) -> Iterator[None]:
    """Run the block with the model's noise streams seeded by ``seed``; restore them after.

    A model without noise streams (no ``seed_noise``) is left as it is.
    """
    if not hasattr(model, "seed_noise"):
        yield
        return
    saved = model.noise_state()
    model.seed_noise(seed)
    try:
        yield
    finally:
        model.load_noise_state(saved)


@torch.no_grad()
def evaluate(
    model: nn.Module,
    data: WindowSource,
    *,
    seed: int,
    passes: int = 1,
    batch_size: int = 256,
    amp: bool = False,
    by_channel: bool = False,
    draw_ahead: bool = True,
) -> dict:
    """MSE and MAE of ``model`` on ``data`` (z-scored targets), over ``passes`` noise seeds.

    Returns ``mse`` and ``mae`` of the first pass (seed ``seed``), and for ``passes > 1`` also
    ``mse_mean``, ``mse_std``, ``mae_mean``, ``mae_std`` over the passes and ``passes``.
    ``by_channel`` adds ``by_channel``: ``{"mse": [...], "mae": [...]}``, one value per channel
    of the first pass (their mean is ``mse`` and ``mae``: every channel has as many values).
    ``draw_ahead``: on the CPU, a model with ``draws_ahead`` has each batch's pass noise drawn
    one batch ahead in a background thread (:mod:`qpriv.training.ahead`; the same values).
    """
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    mses, maes = [], []
    channel_sq = channel_ab = None
    try:
        for m in range(passes):
            sq = ab = 0.0
            count = 0
            with seeded_noise(model, seed + m):
                batches = _fetch(data, batch_size=batch_size, device=device)
                ahead = draw_ahead and device.type == "cpu" and getattr(model, "draws_ahead",
                                                                        False)
                stream = (ahead_of(model.draw_noise, batches) if ahead
                          else ((x, y, None) for x, y in batches))
                for x, y, noise in stream:
                    with autocast(device, enabled=amp):
                        pred = model(x) if noise is None else model(x, noise=noise)
                    err = pred.float() - y
                    sq += float(err.square().sum())
                    ab += float(err.abs().sum())
                    count += err.numel()
                    if by_channel and m == 0:  # (B, H, C): sums over windows and steps
                        part_sq = err.double().square().sum(dim=(0, 1)).cpu()
                        part_ab = err.double().abs().sum(dim=(0, 1)).cpu()
                        channel_sq = part_sq if channel_sq is None else channel_sq + part_sq
                        channel_ab = part_ab if channel_ab is None else channel_ab + part_ab
            mses.append(sq / count)
            maes.append(ab / count)
    finally:
        model.train(was_training)
    out: dict = {"mse": mses[0], "mae": maes[0]}
    if by_channel and channel_sq is not None:
        per_channel = count / channel_sq.numel()
        out["by_channel"] = {"mse": (channel_sq / per_channel).tolist(),
                             "mae": (channel_ab / per_channel).tolist()}
    if passes > 1:
        out.update(passes=passes, mse_mean=_mean(mses), mse_std=_std(mses),
                   mae_mean=_mean(maes), mae_std=_std(maes))
    return out


def _fetch(data: WindowSource, *, batch_size: int,
           device: torch.device) -> Iterator[tuple[Tensor, Tensor]]:
    """The windows of ``data`` in order, in batches, on ``device``."""
    for index in torch.arange(len(data)).split(batch_size):
        x, y = data.windows(index)
        yield x.to(device), y.to(device)


@torch.no_grad()
def per_window_losses(
    model: nn.Module,
    data: WindowSource,
    *,
    seed: int,
    index: Tensor | None = None,
    batch_size: int = 256,
) -> Tensor:
    """The MSE of each window over its (H, C) targets, from one pass seeded by ``seed``.

    What a loss-threshold membership inference attack observes (LDPT paper section 7.11): the
    per-sample losses of one stochastic pass. ``index`` selects windows (default: all, in
    order); the result is a float64 CPU tensor with one loss per selected window. The model's
    noise streams are restored afterwards, as in :func:`evaluate`.
    """
    device = next(model.parameters()).device
    index = torch.arange(len(data)) if index is None else torch.as_tensor(index, dtype=torch.long)
    was_training = model.training
    model.eval()
    losses = []
    try:
        with seeded_noise(model, seed):
            for part in index.split(batch_size):
                x, y = data.windows(part)
                err = model(x.to(device)).float() - y.to(device)
                losses.append(err.square().mean(dim=(1, 2)).double().cpu())
    finally:
        model.train(was_training)
    return torch.cat(losses) if losses else torch.zeros(0, dtype=torch.float64)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _std(values: list[float]) -> float:
    mean = _mean(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
