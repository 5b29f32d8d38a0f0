"""Reversible instance normalisation (RevIN, Kim et al., ICLR 2022): stage 1 and 10 of the LDPT
pipeline (the LDPT paper, section 5.1).

Each window is z-scored per channel with its own mean and standard deviation, the model works on
the normalised series, and the prediction is mapped back with the same statistics. The
statistics are detached, as in RevIN. They reach the output without passing the quantum channel:
they are a side channel outside the privacy claim, which the audit reports
(:mod:`qpriv.audits.sidechannel`). Built with ``per_window=False`` the module computes no
statistics: the series passes as given (already z-scored with the training split's statistics
by the data loader) and only the data-independent affine map remains, which closes that side
channel.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor, nn


class WindowStats(NamedTuple):
    """Per-window, per-channel statistics of the raw input, shape (B, C, 1) each; None where
    the module is built with ``per_window=False``."""

    mean: Tensor
    std: Tensor


class RevIN(nn.Module):
    """RevIN with a learnable per-channel affine map (weight 1, bias 0 at init).

    ``forward`` normalises ``(B, C, L)`` series and returns both the z-scored series ``z`` (what
    the quantum feature path reads: nothing learned precedes the channel) and the affine image
    ``weight * z + bias`` (what the classical embedding reads); ``denormalise`` inverts the
    affine map and the z-score on ``(B, C, H)`` predictions. With ``per_window=False``, ``z``
    is the input itself, the statistics are None and ``denormalise`` inverts the affine map only.
    """

    def __init__(self, n_channels: int, *, eps: float = 1e-5, per_window: bool = True) -> None:
        super().__init__()
        self.eps = eps
        self.per_window = per_window
        self.weight = nn.Parameter(torch.ones(n_channels, 1))
        self.bias = nn.Parameter(torch.zeros(n_channels, 1))

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor, WindowStats | None]:
        """``x (B, C, L)`` -> ``(weight * z + bias, z, stats)`` with ``z = (x - mean) / std``
        (``z = x`` and ``stats = None`` without per-window statistics)."""
        z, stats = self.standardise(x)
        return z * self.weight + self.bias, z, stats

    def standardise(self, x: Tensor) -> tuple[Tensor, WindowStats | None]:
        """``x (B, C, L)`` -> ``(z, stats)``: the z-score alone, which reads no parameter (what
        the quantum feature path sees, drawn ahead of the pass)."""
        if not self.per_window:
            return x, None
        mean = x.mean(dim=-1, keepdim=True).detach()  # (B, C, 1)
        std = torch.sqrt(x.var(dim=-1, keepdim=True, unbiased=False) + self.eps).detach()
        return (x - mean) / std, WindowStats(mean, std)

    def denormalise(self, y: Tensor, stats: WindowStats | None) -> Tensor:
        """``y (B, C, H)`` -> ``((y - bias) / weight) * std + mean`` (RevIN's inverse; without
        statistics ``(y - bias) / weight``)."""
        y = (y - self.bias) / (self.weight + self.eps**2)
        return y if stats is None else y * stats.std + stats.mean
