"""The report's plots, drawn with matplotlib (its Agg backend, no display) into PNG bytes that
:func:`qpriv.report.document.png_figure` embeds: learning curves per epoch and forecasts
against the actual values."""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _png(fig: Any) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    _pyplot().close(fig)
    return buffer.getvalue()


def learning_curves_png(history: Sequence[Mapping[str, Any]], *,
                        panels: Sequence[tuple[str, Sequence[tuple[str, str]]]],
                        best_epoch: int | None = None) -> bytes:
    """One panel per ``(y label, [(history key, legend), ...])`` against the epoch; the best
    epoch (if given) marked on every panel."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 3.0), dpi=90,
                             squeeze=False)
    epochs = [int(record["epoch"]) for record in history]
    for ax, (ylabel, series) in zip(axes[0], panels, strict=True):
        for key, label in series:
            values = [record.get(key) for record in history]
            values = [math.nan if v is None else float(v) for v in values]
            ax.plot(epochs, values, "o-", ms=3, label=label)
        if best_epoch:
            ax.axvline(best_epoch, color="grey", ls="--", lw=1,
                       label=f"best epoch ({best_epoch})")
        ax.xaxis.set_major_locator(plt.MaxNLocator(integer=True))
        ax.set_xlabel("epoch")
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    return _png(fig)


def forecasts_png(*, lookback: np.ndarray, actual: np.ndarray, forecast: np.ndarray,
                  channels: Sequence[str], titles: Sequence[str]) -> bytes:
    """Rows: channels; columns: windows. Each panel: the look-back's tail, the actual values
    and the forecast after it. Arrays are ``(windows, steps, channels)``."""
    plt = _pyplot()
    n_windows, n_channels = lookback.shape[0], lookback.shape[2]
    horizon = actual.shape[1]
    tail = min(lookback.shape[1], max(2 * horizon, 48))
    fig, axes = plt.subplots(n_channels, n_windows, figsize=(3.6 * n_windows,
                                                               1.6 * n_channels + 0.7),
                             dpi=90, squeeze=False, sharex=True)
    past = np.arange(-tail, 0)
    ahead = np.arange(0, horizon)
    for w in range(n_windows):
        axes[0][w].set_title(titles[w], fontsize=9)
        for c in range(n_channels):
            ax = axes[c][w]
            ax.plot(past, lookback[w, -tail:, c], color="0.55", lw=1, label="look-back")
            ax.plot(ahead, actual[w, :, c], color="black", lw=1.2, label="actual")
            ax.plot(ahead, forecast[w, :, c], color="C3", lw=1.2, label="forecast")
            ax.axvline(-0.5, color="0.8", lw=0.8)
            ax.tick_params(labelsize=8)
            if w == 0:
                ax.set_ylabel(channels[c], fontsize=9)
    axes[-1][0].set_xlabel("step (0 = first forecast step)", fontsize=9)
    axes[0][-1].legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return _png(fig)
