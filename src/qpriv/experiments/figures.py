"""Plots of the reproductions (matplotlib, Agg backend, rendered into a file object)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import IO


def mse_vs_eps(rows: Sequence[dict], *, title: str, out: IO[bytes]) -> None:
    """Figures 3 and 4: test MSE against the budget eps (log axis), one line per method with
    a budget (ours solid, the paper's dashed where it has the number), classical as a
    horizontal line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=120)
    methods = [m for m in dict.fromkeys(r["method"] for r in rows) if m != "classical"]
    for i, method in enumerate(methods):
        points = sorted((r["eps"], r.get("mse"), r.get("paper_mse")) for r in rows
                        if r["method"] == method and r["eps"] is not None)
        colour = f"C{i}"
        ours = [(e, m) for e, m, _ in points if m is not None]
        if ours:
            ax.plot(*zip(*ours, strict=True), "o-", color=colour, label=f"{method} (ours)")
        paper = [(e, p) for e, _, p in points if p is not None]
        if paper:
            ax.plot(*zip(*paper, strict=True), "s--", color=colour, alpha=0.6,
                    label=f"{method} (paper)")
    for r in rows:
        if r["method"] == "classical" and r.get("mse") is not None:
            ax.axhline(r["mse"], color="black", lw=1, label="classical (ours)")
            if r.get("paper_mse") is not None:
                ax.axhline(r["paper_mse"], color="black", lw=1, ls="--", alpha=0.6,
                           label="classical (paper)")
    ax.set_xscale("log")
    ax.set_xlabel("eps (per pass for LDPT, DP-Input and bottlenecks; global for DP-SGD)")
    ax.set_ylabel("test MSE (z-scored)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, format="png")
    plt.close(fig)


def mse_vs_horizon(rows: Sequence[dict], *, title: str, out: IO[bytes]) -> None:
    """Figure 4: test MSE against the horizon H, one panel per dataset, one line per
    (method, eps), ours solid and the paper's dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    datasets = list(dict.fromkeys(r["dataset"] for r in rows))
    fig, axes = plt.subplots(1, len(datasets), figsize=(5.2 * len(datasets), 4.0), dpi=120,
                             squeeze=False)
    series = list(dict.fromkeys((r["method"], r["eps"]) for r in rows))
    for ax, dataset in zip(axes[0], datasets, strict=True):
        for i, (method, eps) in enumerate(series):
            points = sorted((r["horizon"], r.get("mse"), r.get("paper_mse")) for r in rows
                            if r["dataset"] == dataset and r["method"] == method
                            and r["eps"] == eps)
            label = method if eps is None else f"{method} eps={eps:g}"
            ours = [(h, m) for h, m, _ in points if m is not None]
            paper = [(h, p) for h, _, p in points if p is not None]
            if ours:
                ax.plot(*zip(*ours, strict=True), "o-", color=f"C{i}", label=f"{label} (ours)")
            if paper:
                ax.plot(*zip(*paper, strict=True), "s--", color=f"C{i}", alpha=0.6,
                        label=f"{label} (paper)")
        ax.set_xscale("log")
        ax.set_xlabel("horizon H")
        ax.set_ylabel("test MSE (z-scored)")
        ax.set_title(f"{dataset}: {title}", fontsize=9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, format="png")
    plt.close(fig)


FIGURES: dict[str, Callable[..., None]] = {"mse_vs_eps": mse_vs_eps,
                                           "mse_vs_horizon": mse_vs_horizon}
