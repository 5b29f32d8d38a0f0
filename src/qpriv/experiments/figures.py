"""Plots of the reproductions (matplotlib's object API: no pyplot state and no backend to
set; each is rendered into a file object).

Every plot takes the rows, a ``title`` and a ``stamp`` (the budget it ran at, e.g. from
:func:`qpriv.experiments.grid.budget_stamp`), printed in the figure's lower right corner so a
figure made at a small budget cannot pass for the paper's; each returns the figure.
Test MSE spans from the classical ~0.3 to DP-SGD's ~1 on one axis, so its axes are
logarithmic rather than split.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import partial
from textwrap import fill
from typing import IO, Any

from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator


def _log_y(ax: Any) -> None:
    """A logarithmic y-axis labelled in plain numbers: 0.1, 0.2, 0.3, 0.4, 0.5, 0.7, 1, ...
    within two decades; across more (DP-SGD at the record unit reaches 1000 above a floor of
    0.4) the ticks between the decades are labelled at 2 and 5 only, and across more than
    five decades not at all, so that their labels never run into each other."""
    plain = FuncFormatter(lambda value, _: f"{value:g}")

    def minor(value: float, _: int) -> str:
        low, high = ax.get_ylim()
        decades = math.log10(high / low)
        mantissa = round(value / 10 ** math.floor(math.log10(value) + 1e-9), 6)
        if decades > 5 or (decades > 2 and mantissa not in (2.0, 5.0)):
            return ""
        return f"{value:g}"

    ax.set_yscale("log")
    ax.yaxis.set_minor_locator(LogLocator(base=10, subs=(2.0, 3.0, 4.0, 5.0, 7.0)))
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(FuncFormatter(minor))
    ax.margins(y=0.1)  # no line on the frame


def _mse_text(value: float) -> str:
    """A point's MSE as its label: three digits (0.326, 21.1), whole numbers from 1000 on
    (1305, not 1.31e+03; from 999.5 on, which three digits would round to 1e+03)."""
    return f"{value:.0f}" if value >= 999.5 else f"{value:.3g}"


def _unstack(ax: Any, labels: Sequence[Any], *, gap_pt: float = 1.0) -> None:
    """Move apart the point labels of one eps that would overlap (ETTh1, H = 96, eps 1:
    dpsgd-linear's 0.659 hid under dpsgd-dlinear's 0.72). Each label hangs below its point
    (``va="top"``); going down from the highest point, a label that would reach into the one
    above starts below it instead, and a stack that leaves the axes at the bottom moves up
    as one. Written here: the labels of one eps only need an order down the axis, which
    these few lines give exactly, where a general label-repelling package moves them off
    their points in two dimensions. Call it once the axes' limits and layout are final."""
    points_per_pixel = 72.0 / ax.figure.dpi
    by_eps: dict[tuple[float, str], list[Any]] = {}
    for label in labels:  # the labels right of their points apart from those left of theirs
        by_eps.setdefault((label.xy[0], label.get_horizontalalignment()), []).append(label)
    bottom_of_axes = ax.transAxes.transform((0, 0))[1] * points_per_pixel
    for column in by_eps.values():
        column.sort(key=lambda label: -label.xy[1])
        # in points on the figure: each point's height, and its label's wanted top
        heights = [ax.transData.transform(label.xy)[1] * points_per_pixel for label in column]
        tall = [1.45 * label.get_fontsize() for label in column]  # text and its white ground
        tops, floor = [], math.inf
        for height, label, size in zip(heights, column, tall, strict=True):
            top = min(height + label.xyann[1], floor - gap_pt)
            tops.append(top)
            floor = top - size
        lift = max(0.0, bottom_of_axes + gap_pt - floor)
        for label, height, top in zip(column, heights, tops, strict=True):
            label.xyann = (label.xyann[0], top + lift - height)


def _finish(fig: Figure, *, stamp: str, out: IO[bytes], bottom: float = 0.03,
            arrange: Callable[[], None] | None = None) -> Figure:
    """Stamp the budget in the lower right corner, lay out (the axes above ``bottom``, a
    fraction of the height), call ``arrange`` (what needs the final layout), write PNG to
    ``out``."""
    fig.text(0.995, 0.005, stamp, ha="right", va="bottom", fontsize=7, color="0.35")
    fig.tight_layout(rect=(0, bottom, 1, 1))
    if arrange is not None:
        arrange()
    fig.savefig(out, format="png")
    return fig


def mse_vs_eps(rows: Sequence[dict], *, title: str, stamp: str, out: IO[bytes]) -> Figure:
    """Figures 3 and 4: test MSE (log axis) against the budget eps (log axis), one line per
    method with a budget (ours solid, the paper's dashed where it has the number), classical
    as a horizontal line."""
    fig = Figure(figsize=(8.4, 4.2), dpi=120)
    ax = fig.subplots()
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
    eps_values = sorted({r["eps"] for r in rows if r["eps"] is not None})
    ax.set_xticks(eps_values, [f"{e:g}" for e in eps_values])
    ax.minorticks_off()
    _log_y(ax)
    ax.set_xlabel("eps (per pass for LDPT, DP-Input and bottlenecks; global for DP-SGD)")
    ax.set_ylabel("test MSE (z-scored, log axis)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    return _finish(fig, stamp=stamp, out=out)


def mse_vs_horizon(rows: Sequence[dict], *, title: str, stamp: str,
                   out: IO[bytes]) -> Figure:
    """Figure 4: test MSE (log axis) against the horizon H, one panel per dataset, one line
    per (method, eps), ours solid and the paper's dashed."""
    datasets = list(dict.fromkeys(r["dataset"] for r in rows))
    fig = Figure(figsize=(5.2 * len(datasets), 4.0), dpi=120)
    axes = fig.subplots(1, len(datasets), squeeze=False)
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
        horizons = sorted({r["horizon"] for r in rows if r["dataset"] == dataset})
        ax.set_xticks(horizons, [str(h) for h in horizons])
        ax.minorticks_off()
        _log_y(ax)
        ax.set_xlabel("horizon H")
        ax.set_ylabel("test MSE (z-scored, log axis)")
        ax.set_title(f"{dataset}: {title}", fontsize=9)
        ax.legend(fontsize=7)
    return _finish(fig, stamp=stamp, out=out)



def frontier_plot(rows: Sequence[dict], *, title: str, stamp: str, out: IO[bytes]) -> Figure:
    """``qpriv frontier``: test MSE (log axis) against eps (log axis), one line per method
    with error bars (mean +- sd over its seeds, ``mse_mean`` / ``mse_sd``). A method whose
    guarantee covers the chosen unit and the weights is drawn solid in colour, each point
    labelled with its MSE (they lie close to the floor); one that does not is grey, dashed
    (a guarantee at another unit) or dotted (covers neither the targets nor the weights), and
    its legend entry says so (``reading``). Rows without eps (the references) are labelled
    horizontal lines: the public floor black dash-dot, the non-private ones in colour, each in
    its own dash (two can score alike).
    One panel, one y-axis; the legend sits to the right of the axes, clear of the lines."""
    fig = Figure(figsize=(11.0, 4.8), dpi=120)
    ax = fig.subplots()
    labels = _frontier_lines(ax, rows)
    _log_y(ax)
    ax.set_ylabel("test MSE (z-scored, log axis), mean ± sd over seeds")
    if ax.get_legend_handles_labels()[1]:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    else:  # every cell failed: say so on the axes, not with an empty legend
        ax.text(0.5, 0.5, "no cell has a test MSE: frontier.md lists the failed cells", ha="center",
                va="center", transform=ax.transAxes, fontsize=10, color="0.35")
    fig.suptitle(fill(title, 110), fontsize=9)
    return _finish(fig, stamp=stamp, out=out, arrange=lambda: _unstack(ax, labels))


def _frontier_lines(ax: Any, rows: Sequence[dict]) -> list[Any]:
    """The lines of :func:`frontier_plot` on one panel; returns the points' MSE labels."""
    labels = []
    methods = [m for m in dict.fromkeys(r["method"] for r in rows)
               if any(r["method"] == m and r["eps"] is not None for r in rows)]
    colour = 0
    greys = iter(("0.35", "0.55", "0.45", "0.65", "0.25"))
    for method in methods:
        mine = sorted((r for r in rows if r["method"] == method and r["eps"] is not None
                       and r.get("mse_mean") is not None), key=lambda r: r["eps"])
        if not mine:
            continue
        first = mine[0]
        eps = [r["eps"] for r in mine]
        mse = [r["mse_mean"] for r in mine]
        sd = [r.get("mse_sd") or 0.0 for r in mine]
        seeds = max(r.get("n_seeds") or 0 for r in mine)
        label = fill(f"{method}: {first['reading']} (n={seeds})", 48)
        if first["covers_unit"] and first["covers_weights"]:
            ax.errorbar(eps, mse, yerr=sd, fmt="o-", color=f"C{colour}", capsize=3, lw=1.8,
                        label=label)
            for x, y in zip(eps, mse, strict=True):
                # beside the point (left of the last, inside the axes), on a white ground:
                # clear of its error bar, and readable where the point sits on the floor's line
                last = x == max(eps)
                labels.append(ax.annotate(
                    _mse_text(y), (x, y), textcoords="offset points",
                    xytext=(-7 if last else 7, -3), ha="right" if last else "left", va="top",
                    fontsize=7, color=f"C{colour}", zorder=5,
                    bbox={"boxstyle": "square,pad=0.1", "fc": "white", "ec": "none",
                          "alpha": 0.85}))
            colour += 1
        else:
            style = "s--" if first["covers_weights"] else "^:"
            ax.errorbar(eps, mse, yerr=sd, fmt=style, color=next(greys, "0.5"), capsize=3,
                        lw=1.4, label=label)
    # the non-private references each in their own dash as well as colour: two of them can
    # score alike (ETTh2, H = 24: ridge 0.1746, classical 0.1749), and a solid line drawn over
    # another would hide it
    dashes = iter(("-", (0, (5, 3)), (0, (1, 2)), (0, (6, 2, 1, 2))))
    for r in rows:
        if r["eps"] is not None or r.get("mse_mean") is None:
            continue
        label = fill(f"{r['method']}: {r['reading']} ({r['mse_mean']:.3f})", 48)
        if r["covers_unit"]:
            ax.axhline(r["mse_mean"], color="black", ls="-.", lw=1.2, label=label)
        else:
            ax.axhline(r["mse_mean"], color=f"C{colour}", ls=next(dashes, "-"), lw=1.3,
                       alpha=0.9, label=label)
            colour += 1
    ax.set_xscale("log")
    eps_values = sorted({r["eps"] for r in rows if r["eps"] is not None})
    ax.set_xticks(eps_values, [f"{e:g}" for e in eps_values])
    ax.minorticks_off()
    ax.set_xlabel("eps (each line's own notion: see its legend entry)")
    return labels


# -- the private-training paper (qml-figure2 ... qml-figure10) ---------------------------------

LABELS = {
    "test_accuracy": "test accuracy", "population_grad_norm": "population gradient ||g||",
    "distance_from_unclipped_loss": "|L - L_unclipped| (train)",
    "alignment": "alignment A_C (eq. 14)", "clipping_bias_norm": "clipping bias ||b_C||",
    "mean_example_norm": "mean per-example norm", "max_example_norm": "max per-example norm",
    "clip_probability": "clipping probability", "mse_total": "update MSE (eq. 12)",
    "mse_sampling_variance": "sampling variance", "mse_noise_variance": "noise variance",
    "mse_bias_squared": "squared clipping bias",
}


def qml_accuracy_vs_clip(rows: Sequence[dict], *, title: str, stamp: str,
                         out: IO[bytes]) -> Figure:
    """Figures 2 and 7 of the private-training paper: test accuracy (mean +- std over seeds)
    against C (log axis), one panel per eps (Figure 7) or per batch size (Figure 2), one line
    per model; a row without a number C (the clipless Lipschitz MLP) is a dashed horizontal
    line with its +- std band, labelled "clipless (no C)" (:func:`qml_accuracy_vs_clip_panel`).
    The panels share one legend, below them, so that it covers no line."""
    by = "eps" if any(r.get("eps") is not None for r in rows) else "batch"
    panels = sorted(dict.fromkeys(r[by] for r in rows))
    fig = Figure(figsize=(max(4.2 * len(panels), 6.4), 4.6), dpi=120)
    axes = fig.subplots(1, len(panels), squeeze=False, sharey=True)
    entries: dict[str, Any] = {}
    for ax, panel in zip(axes[0], panels, strict=True):
        qml_accuracy_vs_clip_panel(ax, [r for r in rows if r[by] == panel], legend=False)
        ax.set_title(f"{'eps' if by == 'eps' else '|B|'} = {panel:g}", fontsize=9)
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            entries.setdefault(label, handle)
    axes[0][0].set_ylabel("test accuracy")
    fig.suptitle(fill(title, 75), fontsize=9)
    fig.legend(list(entries.values()), list(entries), loc="lower center", ncol=len(entries),
               fontsize=8, frameon=False, bbox_to_anchor=(0.5, 0.035))
    return _finish(fig, stamp=stamp, out=out, bottom=0.12)


def qml_accuracy_vs_clip_panel(ax: Any, rows: Sequence[dict], *, legend: bool = True) -> None:
    """One panel of :func:`qml_accuracy_vs_clip`: a line per model over the rows at a number
    C; each row whose ``clip`` is a mode (``"analytic"``) a horizontal line, never at a C;
    with its own legend unless ``legend`` is False (the figure's is shared)."""
    at_c = [r for r in rows if _has_number_c(r) and r.get("accuracy") is not None]
    models = list(dict.fromkeys(r["model"] for r in at_c))
    for i, model in enumerate(models):
        points = sorted((r["clip"], r["accuracy"], r.get("accuracy_std") or 0.0)
                        for r in at_c if r["model"] == model)
        clips, acc, std = zip(*points, strict=True)
        ax.errorbar(clips, acc, yerr=std, fmt="o-", color=f"C{i}", capsize=3, label=model)
    modes = [r for r in rows if not _has_number_c(r) and r.get("accuracy") is not None]
    for i, row in enumerate(modes, len(models)):
        acc, std = row["accuracy"], row.get("accuracy_std") or 0.0
        bound = row.get("sensitivity")
        # "nothing clipped" only where the rows measured it (p_clip at the last epoch)
        clipped = row.get("clip_probability")
        clipping = ("nothing clipped" if clipped == 0 else "p_clip not measured"
                    if clipped is None else f"p_clip {clipped:.2g}: the bound failed")
        scale = ("noise sigma Delta, " if row.get("eps") is not None else "") + clipping
        label = f"{row['model']}, clipless (no C)" + (
            "" if bound is None else f": {scale}, Delta = {bound:.3g}")
        ax.axhline(acc, color=f"C{i}", ls="--", lw=1.5, label=label)
        if std:
            ax.axhspan(acc - std, acc + std, color=f"C{i}", alpha=0.15, lw=0)
    ax.set_xscale("log")
    ax.set_xlabel("clipping threshold C")
    if legend:
        ax.legend(fontsize=7)


def _has_number_c(row: dict) -> bool:
    return isinstance(row["clip"], int | float) and not isinstance(row["clip"], bool)


def qml_epoch_panels(rows: Sequence[dict], *, title: str, stamp: str, out: IO[bytes],
                     metrics: Sequence[str], log: Sequence[str] = ()) -> Figure:
    """Per-epoch curves of the private-training paper's Figures 3-6, 8 and 10: one panel per
    metric, one line per variant (mean over seeds, shaded +- std). Extra lines where the rows
    carry them: C and Theorem 3.2's bound (norm panels), the unclipped twin's accuracy."""
    fig = Figure(figsize=(max(4.0 * len(metrics), 6.4), 4.0), dpi=120)
    axes = fig.subplots(1, len(metrics), squeeze=False)
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    for ax, metric in zip(axes[0], metrics, strict=True):
        bounds: set[float] = set()
        for i, variant in enumerate(variants):
            mine = [r for r in rows if r["variant"] == variant and r.get(metric) is not None]
            if not mine:
                continue
            epochs = [r["epoch"] for r in mine]
            mean = [r[metric] for r in mine]
            std = [r.get(f"{metric}_std") or 0.0 for r in mine]
            ax.plot(epochs, mean, "-", marker="." if len(mine) < 30 else None,
                    color=f"C{i}", label=variant)
            low = [max(m - s, m / 10) if metric in log else m - s
                   for m, s in zip(mean, std, strict=True)]  # a log axis has no zero
            ax.fill_between(epochs, low, [m + s for m, s in zip(mean, std, strict=True)],
                            color=f"C{i}", alpha=0.2, lw=0)
            if metric == "test_accuracy" and mine[0].get("unclipped_accuracy") is not None:
                ax.axhline(mine[0]["unclipped_accuracy"], color=f"C{i}", ls=":", lw=1,
                           label=f"{variant}, unclipped twin")
            bound = mine[0].get("theorem_3_2_bound")
            if metric == "max_example_norm" and bound is not None and bound not in bounds:
                bounds.add(bound)
                ax.axhline(bound, color="grey", ls="--", lw=1,
                           label=f"{mine[0]['model']}: Theorem 3.2 bound 2G/tau")
        if metric.endswith("example_norm"):
            clips = {r["clip"] for r in rows if r.get("clip") is not None}
            for clip in clips:
                ax.axhline(clip, color="black", lw=1, label=f"C = {clip:g}")
        if metric in log:
            ax.set_yscale("log")
        ax.set_xlabel("epoch")
        ax.set_ylabel(LABELS.get(metric, metric))
        ax.legend(fontsize=6)
    fig.suptitle(fill(title, 75), fontsize=9)
    return _finish(fig, stamp=stamp, out=out)


FIGURES: dict[str, Callable[..., None]] = {
    "mse_vs_eps": mse_vs_eps,
    "mse_vs_horizon": mse_vs_horizon,
    "frontier": frontier_plot,
    "qml_accuracy_vs_clip": qml_accuracy_vs_clip,
    "qml_population_gradient": partial(
        qml_epoch_panels, metrics=("population_grad_norm", "test_accuracy",
                                   "distance_from_unclipped_loss"),
        log=("population_grad_norm",)),
    "qml_alignment": partial(qml_epoch_panels, metrics=("alignment", "clipping_bias_norm")),
    "qml_example_norms": partial(qml_epoch_panels,
                                 metrics=("mean_example_norm", "max_example_norm"),
                                 log=("max_example_norm",)),
    "qml_clip_probability": partial(qml_epoch_panels, metrics=("clip_probability",)),
    "qml_update_mse": partial(
        qml_epoch_panels, metrics=("test_accuracy", "mse_total", "mse_sampling_variance",
                                   "mse_noise_variance", "mse_bias_squared"),
        log=("mse_total", "mse_sampling_variance", "mse_noise_variance", "mse_bias_squared")),
    "qml_images": partial(qml_epoch_panels,
                          metrics=("test_accuracy", "distance_from_unclipped_loss")),
}
