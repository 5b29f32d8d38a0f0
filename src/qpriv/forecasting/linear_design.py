"""The data-independent design of the linear forecaster: its feature map, public forecast,
output basis and the sufficient statistics a fit reads (:mod:`qpriv.forecasting.linear`).

Every forecaster of the family is one kernel K (H x L) applied to each channel's look-back
alone, ``K = P_pub + U W^T M``:

* ``P_pub`` (H x L), the public forecast: reads no training data;
* ``M = G C`` (d x L), block means of the latest values (and optionally an hour-of-period
  profile) after subtracting the look-back's mean, so ``M 1 = 0``;
* ``V`` (H x k), the target map: a row's targets are ``V^T (y - P_pub x)``; ``U = V (V^T V)^-1``
  maps k fitted targets back to H steps (``U = V`` for an orthonormal V).

The output side scales with the horizon. With ``output_scale="mean"`` (the default) the k
targets are the **means** of the residual over k consecutive blocks of the horizon, so a row's
target norm, and with it the clip it needs and the record sensitivity's target term (a sum of
column norms that is exactly k for the identity part, whatever H), does not grow with H; with
``"orthonormal"`` (the design fixed at H = 24 before) the targets are block sums over
``sqrt(block length)``, whose norm grows like ``sqrt(H)``: a fixed clip then cuts most of the
signal at H = 336 or 720 (the README's capture table measures it).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np

from qpriv.errors import InvalidInputError, require_in_range, require_positive_int

__all__ = [
    "OUTPUT_SCALES",
    "PUBLIC_KINDS",
    "STANDARD_LINEAR",
    "LinearSpec",
    "base_spec",
    "block_edges",
    "kernel_from_weights",
    "linear_maps",
    "output_basis",
    "prediction_basis",
    "recent_edges",
    "record_maps",
    "sufficient_statistics",
]

PUBLIC_KINDS = ("naive", "profile", "profile-level")
OUTPUT_SCALES = ("mean", "orthonormal")


@dataclass(frozen=True)
class LinearSpec:
    """The data-independent parts of the linear forecaster.

    Attributes:
        period: the seasonal period in rows (24 for hourly data).
        recent: block edges, counted back from the end of the look-back: edges (1, 4, 24)
            give three features, the mean of the last value, of the 3 before it and of the 20
            before those (an empty tuple: none).
        profile_days: periods averaged per hour in the profile features (0: none).
        profile_pool: hours of the period pooled into one profile feature (divides period).
        centre: the features subtract the mean of the last ``centre`` look-back values (None:
            of the whole look-back).
        output_blocks: the residual forecast is constant on this many near-equal blocks of
            the horizon (at most H): fewer outputs, less noise.
        output_scale: ``"mean"`` (targets are the blocks' mean residuals) or
            ``"orthonormal"`` (block sums over sqrt(block length)); module docstring.
        public: the public forecast: ``"naive"`` (repeat the last period), ``"profile"``
            (mean of each hour over the last ``public_days`` periods) or ``"profile-level"``
            (that profile moved to the mean level of the last period).
        public_days: periods averaged by the public profile.
        naive_weight: the public forecast is this fixed blend of the seasonal naive forecast
            and the one named by ``public`` (0: none of the naive).
    """

    period: int = 24
    recent: tuple[int, ...] = (1, 3, 6, 12, 24, 48, 96)
    profile_days: int = 0
    profile_pool: int = 1
    output_blocks: int = 2
    centre: int | None = None
    public: str = "profile-level"
    public_days: int = 7
    naive_weight: float = 0.25
    output_scale: str = "mean"

    def __post_init__(self) -> None:
        require_positive_int("period", self.period)
        if self.public not in PUBLIC_KINDS:
            raise InvalidInputError(
                f"public = {self.public!r} is not a public forecast; use one of {PUBLIC_KINDS}")
        if self.output_scale not in OUTPUT_SCALES:
            raise InvalidInputError(f"output_scale = {self.output_scale!r} is not one of "
                                    f"{OUTPUT_SCALES}")
        require_positive_int("public_days", self.public_days)
        require_in_range("naive_weight", self.naive_weight, low=0.0, high=1.0,
                         low_inclusive=True, hint="a blend weight lies in [0, 1]")
        object.__setattr__(self, "recent", tuple(int(e) for e in self.recent))
        if any(e < 1 for e in self.recent) or list(self.recent) != sorted(set(self.recent)):
            raise InvalidInputError(f"recent = {self.recent} must be increasing edges >= 1")
        if self.profile_days < 0:
            raise InvalidInputError(f"profile_days = {self.profile_days} must be >= 0")
        require_positive_int("profile_pool", self.profile_pool)
        require_positive_int("output_blocks", self.output_blocks)
        if self.period % self.profile_pool:
            raise InvalidInputError(f"profile_pool = {self.profile_pool} must divide period = "
                                    f"{self.period}")
        if self.centre is not None:
            require_positive_int("centre", self.centre)
        if not self.recent and self.profile_days == 0:
            raise InvalidInputError("the feature map is empty: set recent or profile_days > 0")

    def rows_needed(self) -> int:
        """The shortest look-back L the features and the public forecast can read."""
        return max(self.recent[-1] if self.recent else 0, self.centre or 0,
                   self.period * max(self.profile_days, self.public_days))


STANDARD_LINEAR = LinearSpec()


def check_lengths(spec: LinearSpec, seq_len: int, horizon: int) -> None:
    """Refuse a look-back too short for ``spec`` (the message names the fix)."""
    need = spec.rows_needed()
    if seq_len < need:
        raise InvalidInputError(
            f"seq_len L = {seq_len} is shorter than the {need} rows the features need "
            f"(recent = {spec.recent}, {max(spec.profile_days, spec.public_days)} periods of "
            f"{spec.period}); use a look-back (seq_len, --seq-len) of at least {need}")
    require_positive_int("horizon", horizon)


def profile_rows(*, seq_len: int, horizon: int, period: int, days: int) -> np.ndarray:
    """(H, L): row j averages the look-back at the phase of step j over the last ``days``
    periods."""
    rows = np.zeros((horizon, seq_len))
    for j in range(horizon):
        for d in range(1, days + 1):
            rows[j, seq_len - d * period + j % period] += 1.0 / days
    return rows


def block_edges(horizon: int, blocks: int) -> tuple[int, ...]:
    """Edges ``round(H j / k)``, j = 0..k, of k near-equal consecutive blocks (k capped at H).
    Nested: the edges of k blocks are among those of any multiple of k."""
    k = min(require_positive_int("output_blocks", blocks), horizon)
    return tuple(int(np.floor(horizon * j / k + 0.5)) for j in range(k + 1))


def output_basis(horizon: int, blocks: int, scale: str = "orthonormal") -> np.ndarray:
    """V (H x k): block indicators divided by the block length (``"mean"``: ``V^T r`` is the
    blocks' means) or by its square root (``"orthonormal"``)."""
    edges = block_edges(horizon, blocks)
    basis = np.zeros((horizon, len(edges) - 1))
    for j, (lo, hi) in enumerate(itertools.pairwise(edges)):
        basis[lo:hi, j] = 1.0 / (hi - lo if scale == "mean" else np.sqrt(hi - lo))
    return basis


def prediction_basis(targets: np.ndarray) -> np.ndarray:
    """U = V (V^T V)^-1 (H x k): maps fitted targets back to the horizon's steps, so that
    ``V^T U = I`` (U = V for orthonormal columns; the block indicators for block means)."""
    v = np.asarray(targets, dtype=np.float64)
    return v @ np.linalg.inv(v.T @ v)


def kernel_from_weights(*, features: np.ndarray, public: np.ndarray, targets: np.ndarray,
                        weights: np.ndarray) -> np.ndarray:
    """``K = P_pub + U W^T M`` (H x L) for weights W (d x k)."""
    return public + prediction_basis(targets) @ np.asarray(weights).T @ features


def linear_maps(spec: LinearSpec, *, seq_len: int,
                horizon: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(M, P_pub, V): the feature map (d x L, ``M 1 = 0``), the public forecast (H x L, rows
    summing to 1) and the target map (H x k), all fixed functions of the shapes (module
    docstring). The model is ``K = P_pub + U W^T M`` (:func:`kernel_from_weights`)."""
    check_lengths(spec, seq_len, horizon)
    period = spec.period
    naive = profile_rows(seq_len=seq_len, horizon=horizon, period=period, days=1)
    if spec.public == "naive":
        public = naive
    else:
        public = profile_rows(seq_len=seq_len, horizon=horizon, period=period,
                              days=spec.public_days)
        if spec.public == "profile-level":
            shape = profile_rows(seq_len=seq_len, horizon=period, period=period,
                                 days=spec.public_days).mean(axis=0)
            last = np.zeros(seq_len)
            last[seq_len - period:] = 1.0 / period
            public = public - shape + last
        public = spec.naive_weight * naive + (1.0 - spec.naive_weight) * public
    blocks = []
    lo = 0
    for hi in spec.recent:
        row = np.zeros((1, seq_len))
        row[0, seq_len - hi:seq_len - lo] = 1.0 / (hi - lo)
        blocks.append(row)
        lo = hi
    if spec.profile_days:
        hours = profile_rows(seq_len=seq_len, horizon=period, period=period,
                             days=spec.profile_days)
        blocks.append(hours.reshape(period // spec.profile_pool, spec.profile_pool,
                                    seq_len).mean(axis=1))
    pooled = np.vstack(blocks)
    centre = spec.centre or seq_len
    weights = np.zeros(seq_len)
    weights[seq_len - centre:] = 1.0 / centre
    centring = np.eye(seq_len) - np.outer(np.ones(seq_len), weights)
    return (pooled @ centring, public,
            output_basis(horizon, spec.output_blocks, spec.output_scale))


def record_maps(features: np.ndarray, public: np.ndarray,
                outputs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The linear maps from one window's L + H values (look-back, then horizon) to its row's
    features and residual targets as :func:`sufficient_statistics` computes them (before the
    rows are projected): ``[M, 0]`` and ``V^T [-P_pub, I]``. Their column norms bound what one
    record does to the statistics (:func:`qpriv.privacy.ssp.record_sensitivities_projected`)."""
    horizon = public.shape[0]
    window_map = np.hstack([features, np.zeros((features.shape[0], horizon))])
    target_map = outputs.T @ np.hstack([-public, np.eye(horizon)])
    return window_map, target_map


def project_rows(rows: np.ndarray, radius: float) -> np.ndarray:
    """Each row projected onto the ball of ``radius`` (1-Lipschitz).

    A row whose norm is not a finite double (its entries, or their squares, overflowed: values
    near 1e154 and beyond, or a row divided by a look-back's std near 0) has no computable
    direction and becomes 0, inside the ball, so every bound that rests on the rows lying in
    it still holds. (Before, ``inf * 0`` made such a row NaN, and one window of it turned the
    whole release into NaN: a change no noise covers.)
    """
    with np.errstate(over="ignore", invalid="ignore"):
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        projected = rows * np.minimum(1.0, radius / np.maximum(norms, 1e-300))
    return np.where(np.isfinite(norms), projected, 0.0)


def sufficient_statistics(series: np.ndarray, *, features: np.ndarray, public: np.ndarray,
                          outputs: np.ndarray, clip: float | None = None,
                          feature_clip: float | None = None,
                          target_clip: float | None = None,
                          rescale: bool = False,
                          windows: slice | None = None) -> tuple[np.ndarray, np.ndarray]:
    """A = sum Phi Phi^T and B = sum Phi R^T over every sliding window and channel of
    ``series`` (T, C): ``Phi = M x``, ``R = V^T (y - P_pub x)`` for window (x, y).

    ``clip`` R clips every value to [-R, R] first; ``feature_clip`` / ``target_clip`` project
    each row's Phi and R onto balls (the window unit's bounds). None skips a step.
    ``rescale`` divides each row's Phi and R by its look-back's standard deviation first (a
    weighted ridge of the same linear model, invariant to per-channel affine maps; a constant
    look-back's row is dropped). ``windows`` keeps the windows whose start row lies in that
    slice (every window by default): disjoint slices give statistics of disjoint rows.
    """
    values = np.asarray(series, dtype=np.float64)
    if clip is not None:
        values = np.clip(values, -clip, clip)
    seq_len = features.shape[1]
    horizon = public.shape[0]
    d = features.shape[0]
    # R = V^T y - (V^T P_pub) x: an (L x k) map instead of the (L x H) forecast of every row
    target_of_lookback = public.T @ outputs
    a, b = np.zeros((d, d)), np.zeros((d, outputs.shape[1]))
    for c in range(values.shape[1]):
        win = np.lib.stride_tricks.sliding_window_view(values[:, c], seq_len + horizon)
        if windows is not None:
            win = win[windows]
        x, y = win[:, :seq_len], win[:, seq_len:]
        phi = x @ features.T
        res = y @ outputs - x @ target_of_lookback
        if rescale:
            with np.errstate(over="ignore", invalid="ignore"):  # project_rows drops such rows
                spread = x.std(axis=1, keepdims=True)
                inverse = np.divide(1.0, spread, out=np.zeros_like(spread), where=spread > 0)
                phi, res = phi * inverse, res * inverse
        if feature_clip is not None:
            phi = project_rows(phi, feature_clip)
        if target_clip is not None:
            res = project_rows(res, target_clip)
        a += phi.T @ phi
        b += phi.T @ res
    return a, b


SELECT_CHOICES = ("private", "fixed")
"""How dp-linear's design is chosen: among the candidates inside the guarantee, or fixed."""

#: Defaults chosen on ETTh1's validation split (H = 24, 3 noise seeds) over feature bases,
#: output blocks, ridge scales 2-50 and the row clips; the record unit's value range R was
#: chosen again (1, 1.5, 2; 10 noise seeds at eps 0.1, 0.5, 1 and 5) once the private scaler
#: estimated its scale from the median absolute deviation: 1.5 is better than 2 at eps <= 1
#: and level at 5, where 1 falls behind. The target clip is per output block (the rows'
#: k block means are clipped to ``target_clip * sqrt(k)``), chosen at H = 24, 96, 336 and 720
#: on ETTh1 (0.5 and 1 per block at the record unit, 1 and 2 at the window unit). The test
#: split was not used.
DEFAULTS: dict[str, dict[str, Any]] = {
    "record": {"clip": 1.5, "feature_clip": 1.0, "target_clip": 1.0, "share_a": 0.5,
               "ridge_scale": 10.0, "scaler_share": 0.1, "select_share": 0.1},
    "window": {"feature_clip": 2.0, "target_clip": 2.0, "share_a": 0.5,
               "ridge_scale": 10.0, "select_share": 0.1},
}


def recent_edges(*, seq_len: int, period: int) -> tuple[int, ...]:
    """Block edges 1, 3, 6, 12, ... (doubling) up to four periods or the look-back, whichever
    is shorter: (1, 3, 6, 12, 24, 48, 96) for hourly data and L = 336."""
    limit = min(4 * period, seq_len)
    edges = [1]
    nxt = 3
    while nxt <= limit:
        edges.append(nxt)
        nxt *= 2
    return tuple(edges)


def base_spec(*, seq_len: int, period: int, output_blocks: int = 2) -> LinearSpec:
    """The design's fixed parts for (L, period): recent blocks (:func:`recent_edges`) and the
    public forecast over as many whole periods (at most 7) as the look-back holds."""
    days = max(1, min(7, seq_len // period))
    if seq_len < period:
        raise InvalidInputError(
            f"seq_len L = {seq_len} is shorter than one period ({period} rows): the public "
            f"forecast repeats the last period; use a look-back (seq_len, --seq-len) of at "
            f"least {period}")
    return LinearSpec(period=period, recent=recent_edges(seq_len=seq_len, period=period),
                      public_days=days, output_blocks=output_blocks)
