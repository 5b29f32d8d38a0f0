"""A channel-independent linear forecaster, its differentially private fit, and the public floor.

Every forecaster here is one kernel K (H x L) applied to each channel's look-back alone,
``y_hat = K x``, with the rows of K summing to 1 and no bias. Such a model is equivariant to an
affine map of each channel (``K (a x + b 1) = a K x + b 1``), so it forecasts in any
per-channel units: the scaler matters to a fit only through the value clipping, and a model
fitted in one z-score's units applies unchanged in another's.

The kernel is ``K = P_pub + U W^T M`` (:mod:`qpriv.forecasting.linear_design` builds the maps):

* ``P_pub`` (H x L) is the **public** forecast (:func:`public_forecaster`): a fixed function of
  the look-back that reads no training data (by default 0.25 x the seasonal naive + 0.75 x the
  seasonal profile of the last 7 periods re-levelled to the last period's mean);
* ``M`` (d x L) a data-independent feature map (block means of the latest values, optionally
  an hour-of-period profile, after subtracting the look-back's mean);
* W (d x k) a ridge regression of the residual targets ``V^T (y - P_pub x)`` (the residual's
  means over k blocks of the horizon) on ``M x`` over all training windows and channels, so
  the ridge shrinks the fit toward the public forecast; U maps the k block means back to H
  steps.

:func:`fit_dp_linear` releases W by sufficient-statistics perturbation
(:mod:`qpriv.privacy.ssp`; Wang 2018, AdaSSP) at the window or the record unit, with the scaler
inside the guarantee (private quantiles, :mod:`qpriv.privacy.quantiles`) unless the user
declares it public, and by default with the design (features, output blocks, ridge scale)
chosen inside the guarantee too (:mod:`qpriv.forecasting.linear_select`); :func:`fit_ridge` is
the non-private reference on the same features.

Example::

    data = load_forecasting_data("ETTh1", seq_len=336, horizon=24)
    model, claims = fit_dp_linear(data, eps=1.0, unit="record", seed=0)
    evaluate(model, data.test)              # {"mse": ..., "mae": ...} in z-scored units
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import torch

from qpriv.errors import (
    InvalidInputError,
    require_budget,
    require_in_range,
    require_positive_int,
)
from qpriv.forecasting.linear_design import (
    DEFAULTS,
    SELECT_CHOICES,
    STANDARD_LINEAR,
    LinearSpec,
    kernel_from_weights,
    linear_maps,
    output_basis,
    prediction_basis,
    record_maps,
    sufficient_statistics,
)
from qpriv.forecasting.linear_scaler import Scaler, record_scaler
from qpriv.forecasting.linear_select import (
    PooledStatistics,
    base_spec,
    design_candidates,
    select_design,
)
from qpriv.forecasting.seasonality import PERIOD_NOTE, resolve_period
from qpriv.forecasting.windows import (
    WINDOW_COUNT_NOTE,
    ForecastData,
    WindowDataset,
)
from qpriv.privacy.claims import (
    Accounting,
    Kind,
    PrivacyClaim,
    Unit,
    require_meaningful_delta,
)
from qpriv.privacy.randomness import randomness_note
from qpriv.privacy.samplers import NoiseSampler, noise_sampler, sampler_note
from qpriv.privacy.ssp import (
    SSPNoise,
    gaussian_noise_multiplier,
    noise_scaled_ridge,
    perturb,
    psd_floor,
    record_sensitivities_projected,
    ridge_solve,
    split_noise_multiplier,
    ssp_noise,
    window_sensitivities,
)

__all__ = [
    "CONSTANT_CHANNEL_NOTE",
    "COVERS_LINEAR",
    "FIXED_DESIGN_NOTE",
    "MAX_DP_LINEAR_EPS",
    "SELECT_CHOICES",
    "DPLinearFit",
    "LinearForecaster",
    "LinearSpec",
    "check_dp_linear_eps",
    "default_spec",
    "evaluate",
    "fit_dp_linear",
    "fit_ridge",
    "floor_and_reference",
    "linear_maps",
    "noisy_ridge_solve",
    "output_basis",
    "prediction_basis",
    "protected_units",
    "public_forecaster",
    "record_maps",
    "statistic_sensitivities",
    "sufficient_statistics",
]

COVERS_LINEAR = "the linear forecaster's weights and every forecast computed from them"
CONSTANT_CHANNEL_NOTE = (
    "a channel the loader cannot z-score on the training split (constant, or values so large "
    "that its mean or std overflows float64) is refused before any fit, as is a file with an "
    "empty or non-finite cell: that refusal reads the training data and is not covered (the "
    "guarantee's neighbours are finite values that leave the channel z-scorable)")
"""What escapes a dp-linear claim besides the named hyper-parameters: whether it runs at all."""
FIXED_DESIGN_NOTE = (
    "the design (feature basis, output blocks, ridge scale) was fixed, not selected on this "
    "data (select='fixed'): its defaults were chosen among dp-linear fits on ETTh1's training "
    "split scored on its validation split, so on ETTh1 that choice read the training data "
    "and its cost is not accounted (on other data they are fixed constants)")
"""Named in a dp-linear claim whose design was not selected privately."""
RULES_NOTE = (
    "chosen without the data and not covered, as fixed rules: the look-back L, the horizon H, "
    "the candidate set (a function of L, H and the period), the public forecast, the clip "
    "ranges (per output block) and the budget shares; they were set once on ETTh1's "
    "validation split")
"""Named in every dp-linear claim: what the guarantee takes as given."""
MAX_DP_LINEAR_EPS = 1e6
"""The largest budget :func:`fit_dp_linear` takes. Its analytic Gaussian calibration stays
finite and warning-free for every delta in (0, 1) up to 1e6 (its root search first warns
near eps = 3.8e6 and fails soon after), and its private quantiles' logits stay far from
overflow; e^eps is then far beyond any meaningful guarantee. The same cap as DP-SGD's."""


def protected_units(data: ForecastData, unit: str) -> int:
    """How many units dp-linear's guarantee protects: every value of every channel of the
    training rows (record), or every sliding training window (window)."""
    return int(data.train_raw.size) if unit == "record" else int(data.train.n_available)


def check_dp_linear_eps(eps: float) -> float:
    """Return dp-linear's budget ``eps`` if it is a finite number in
    (0, :data:`MAX_DP_LINEAR_EPS`], else raise :class:`~qpriv.errors.ArgumentError`."""
    return require_budget("eps", eps, cap=MAX_DP_LINEAR_EPS,
                          above="(and the noise calibration breaks down): fit the "
                                "non-private ridge (method ridge) instead")


# --------------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class LinearForecaster:
    """``y_hat[:, :, c] = kernel @ x[:, :, c]`` for every channel c (module docstring).

    ``kernel`` is (H, L) float64; ``name`` says which fit made it; ``details`` holds the fit's
    numbers (noise, ridge, clipping), for the result file.
    """

    kernel: np.ndarray
    spec: LinearSpec
    name: str
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def seq_len(self) -> int:
        return int(self.kernel.shape[1])

    @property
    def horizon(self) -> int:
        return int(self.kernel.shape[0])

    def predict(self, x: torch.Tensor | np.ndarray) -> torch.Tensor | np.ndarray:
        """Forecast (B, H, C) from look-backs (B, L, C), in x's own units and type."""
        if tuple(x.shape[-2:-1]) != (self.seq_len,) or x.ndim != 3:
            raise InvalidInputError(
                f"the forecaster takes look-backs of shape (B, {self.seq_len}, C); got "
                f"{tuple(x.shape)}")
        if isinstance(x, torch.Tensor):
            kernel = torch.as_tensor(self.kernel, dtype=x.dtype, device=x.device)
            return torch.einsum("hl,blc->bhc", kernel, x)
        return np.einsum("hl,blc->bhc", self.kernel, np.asarray(x, dtype=np.float64))


class DPLinearFit(NamedTuple):
    """What :func:`fit_dp_linear` returns: ``model, claims = fit_dp_linear(...)``."""

    model: LinearForecaster
    claims: tuple[PrivacyClaim, ...]


def public_forecaster(*, seq_len: int, horizon: int,
                      spec: LinearSpec = STANDARD_LINEAR) -> LinearForecaster:
    """The forecast that reads no training data: ``y_hat = P_pub x`` (:class:`LinearSpec`)."""
    _, public, _ = linear_maps(spec, seq_len=seq_len, horizon=horizon)
    return LinearForecaster(kernel=public, spec=spec, name=f"public ({spec.public})",
                            details={"reads_training_data": False})


def evaluate(model: LinearForecaster, windows: WindowDataset, *,
             batch_size: int = 1024, by_channel: bool = False) -> dict:
    """Test MSE and MAE over all windows, channels and steps, in the dataset's units
    (z-scored for :func:`load_forecasting_data`'s splits); ``by_channel`` adds
    ``by_channel``: ``{"mse": [...], "mae": [...]}``, one value per channel."""
    batch_size = require_positive_int("batch_size", batch_size)
    sq = torch.zeros(windows.n_channels, dtype=torch.float64)
    ab = torch.zeros(windows.n_channels, dtype=torch.float64)
    count = 0
    with torch.no_grad():
        for start in range(0, len(windows), batch_size):
            index = torch.arange(start, min(start + batch_size, len(windows)))
            x, y = windows.windows(index)
            err = model.predict(x.double()) - y.double()  # (B, H, C)
            sq += (err * err).sum(dim=(0, 1))
            ab += err.abs().sum(dim=(0, 1))
            count += err.shape[0] * err.shape[1]
    out: dict = {"mse": float(sq.sum()) / (count * len(sq)),
                 "mae": float(ab.sum()) / (count * len(ab))}
    if by_channel:
        out["by_channel"] = {"mse": (sq / count).tolist(), "mae": (ab / count).tolist()}
    return out


# --------------------------------------------------------------------------------------------
# Statistics
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# Fits
# --------------------------------------------------------------------------------------------


def fit_ridge(data: ForecastData, *, ridge: float = 10.0,
              spec: LinearSpec | None = None) -> LinearForecaster:
    """The non-private reference: the exact ridge on the same features and residual targets
    (no clipping, no noise), in the loader's z-scored units, on ``spec`` (by default the
    fixed design for the data's shapes, :func:`default_spec`). Not private."""
    ridge = require_in_range("ridge", ridge, low=0.0, low_inclusive=True)
    spec = default_spec(data) if spec is None else spec
    features, public, outputs = linear_maps(spec, seq_len=data.seq_len, horizon=data.horizon)
    a, b = sufficient_statistics(data.train.series.double().numpy(), features=features,
                                 public=public, outputs=outputs)
    weights = ridge_solve(a, b, ridge=ridge)
    return LinearForecaster(
        kernel=kernel_from_weights(features=features, public=public, targets=outputs,
                                   weights=weights),
        spec=spec, name="ridge (not private)", details={"ridge": ridge})


def default_spec(data: ForecastData, *, period: int | None = None) -> LinearSpec:
    """The fixed design for the data's look-back and period (2 output blocks of block means):
    what ``select='fixed'`` fits and the ridge reference's features. ``period`` None: read
    from the data's timestamps (:func:`qpriv.forecasting.seasonality.seasonal_period`)."""
    return base_spec(seq_len=data.seq_len, period=resolve_period(data.dates, period))


def floor_and_reference(data: ForecastData, *, period: int | None = None) -> dict[str, float]:
    """Test MSE (z-scored, on ``data``'s test split) of the public floor, which reads no
    training data, and of the non-private ridge, both on the fixed design for the data's
    shapes (:func:`default_spec`): what ``qpriv train --method public`` and ``--method ridge``
    report on the same data. Any forecaster's score is read between the two: capture =
    (floor - score) / (floor - ridge). Seconds."""
    spec = default_spec(data, period=period)
    floor = public_forecaster(seq_len=data.seq_len, horizon=data.horizon, spec=spec)
    return {"public": evaluate(floor, data.test)["mse"],
            "ridge": evaluate(fit_ridge(data, spec=spec), data.test)["mse"]}


def fit_dp_linear(
    data: ForecastData,
    *,
    eps: float,
    delta: float = 1e-6,
    unit: str = "record",
    seed: int | None = 0,
    select: str = "private",
    spec: LinearSpec | None = None,
    scaler: Scaler = "private",
    scaler_share: float | None = None,
    select_share: float | None = None,
    clip: float | None = None,
    feature_clip: float | None = None,
    target_clip: float | None = None,
    share_a: float | None = None,
    ridge_scale: float | None = None,
    period: int | None = None,
    noise: bool = True,
) -> DPLinearFit:
    """The linear forecaster, (eps, delta)-DP at the window or the record unit.

    Steps (module docstring for the model): (1) the scaler, private by default: per-channel
    location and scale by private quantiles at ``scaler_share * eps`` (pure DP); or declared
    public: ``"data"`` takes the loader's scaler (fitted on the training split in the clear; the
    claim then does not cover it) and a :class:`ZScoreScaler` gives the statistics in the file's
    units (record unit only: the window unit divides each row by its own look-back's std).
    (2) Record unit: values clipped to [-R, R] (``clip``) in that scaler's units. Both units:
    each row's features and residual targets projected onto balls of radius ``feature_clip`` and
    ``target_clip * sqrt(k)`` (k output blocks). (3) ``select="private"`` (default): the design
    is chosen among :func:`qpriv.forecasting.linear_select.design_candidates` by
    :func:`qpriv.forecasting.linear_select.select_design` from a Gaussian release spending
    ``select_share`` of the Gaussian budget; ``"fixed"``: ``spec`` (default
    :func:`default_spec`) and ``ridge_scale``, declared as chosen outside the guarantee. (4) A
    and B over all training windows and channels, Gaussian noise calibrated with the
    sensitivities of :func:`statistic_sensitivities`, ``share_a`` of it on A. (5) PSD repair,
    and the ridge ``ridge_scale * sigma_A * sqrt(d)`` (AdaSSP; shrinks toward the public one).
    Accounting: the Gaussian releases (selection and fit) compose exactly as one Gaussian
    mechanism (:func:`qpriv.privacy.ssp.split_noise_multiplier`), calibrated by the analytic
    Gaussian mechanism to ``eps - eps_scaler``; the scaler composes by basic composition.

    The model is equivariant to per-channel affine maps, so the scaler serves the clipping alone.
    ``seed`` seeds the noise (NumPy's: reproducible, replayable by whoever knows it, as the claim
    says); None draws all of it (scaler, selection, fit) from OpenDP's vetted samplers on an
    OS-keyed cryptographic generator (:class:`qpriv.privacy.samplers.VettedSampler`), named in
    the claim's ``noise_sampler``. ``noise=False``, for tests only, draws none, promising nothing.

    Raises:
        InvalidInputError: a bad eps (> 0, at most :data:`MAX_DP_LINEAR_EPS`), delta, unit,
            share, clip or select, or an unknown scaler.
    """
    eps, delta = _check_request(data, eps=eps, delta=delta, unit=unit, select=select,
                                fixed_design=spec is not None or ridge_scale is not None)
    defaults, the_unit = DEFAULTS[unit], Unit(unit)
    share_a, select_share, c_x, c_y = _shares_and_clips(
        defaults, share_a=share_a, select_share=select_share, feature_clip=feature_clip,
        target_clip=target_clip)
    period = resolve_period(data.dates, period)
    rng = noise_sampler(seed)  # seeded NumPy, or OpenDP's vetted samplers for a release
    raw = data.train_raw  # the file's own values: see ForecastData.train_raw

    if the_unit == Unit.WINDOW:  # each row divided by its look-back's std: no scaler
        series, r, eps_scaler, scaler_note = raw, None, 0.0, WINDOW_SCALER_NOTE
    else:
        r = require_in_range("clip", defaults["clip"] if clip is None else clip, low=0.0,
                             hint="the value range R (z-scored units) must be > 0, e.g. 3")
        used, eps_scaler, scaler_note = record_scaler(
            scaler, fitted=data.scaler, raw=raw, eps=eps, rng=rng,
            share=defaults["scaler_share"] if scaler_share is None else scaler_share)
        series = used.transform(raw)
    eps_gauss = eps - eps_scaler
    z = gaussian_noise_multiplier(eps=eps_gauss, delta=delta)
    if select == "private":
        z_select, z_fit = split_noise_multiplier(z, (select_share, 1.0 - select_share))
        chosen = select_design(
            series, candidates=design_candidates(seq_len=data.seq_len, horizon=data.horizon,
                                                 period=period),
            seq_len=data.seq_len, horizon=data.horizon, unit=unit,
            n_channels=data.n_channels, noise_multiplier=z_select, share_a=share_a, clip=r,
            feature_clip=c_x, target_clip=c_y, rng=rng, noisy=noise)
        spec, ridge_scale, pooled = chosen.chosen.spec, chosen.chosen.ridge_scale, chosen.pooled
        selection = {"select": select, "share": select_share, "eps_share_note": (
            f"{select_share:g} of the Gaussian budget (1/z^2) on the selection release, "
            f"{1 - select_share:g} on the fit"), **chosen.details}
    else:
        z_fit, pooled, selection = z, None, {"select": select}
        spec = default_spec(data, period=period) if spec is None else spec
        ridge_scale = defaults["ridge_scale"] if ridge_scale is None else ridge_scale
    ridge_scale = require_in_range("ridge_scale", ridge_scale, low=0.0, low_inclusive=True)
    features, public, outputs = linear_maps(spec, seq_len=data.seq_len, horizon=data.horizon)
    d_a, d_b, clipping = statistic_sensitivities(the_unit, (features, public, outputs),
                                        n_channels=data.n_channels, clip=r, feature_clip=c_x,
                                        target_clip=c_y)
    a, b = sufficient_statistics(series, features=features, public=public, outputs=outputs,
                                 clip=r, feature_clip=c_x, target_clip=clipping["target_clip"],
                                 rescale=the_unit == Unit.WINDOW)
    release = ssp_noise(sensitivity_a=d_a, sensitivity_b=d_b, noise_multiplier=z_fit,
                        share_a=share_a, eps=eps_gauss, delta=delta)
    weights, ridge = noisy_ridge_solve(a, b, release, pooled=pooled, rng=rng, noise=noise,
                                       ridge_scale=ridge_scale)
    details = {
        "mechanism": "sufficient-statistics perturbation (AdaSSP-style ridge), analytic "
                     "Gaussian (Balle & Wang 2018)",
        "eps_scaler": eps_scaler, "eps_gaussian": eps_gauss,
        "composition": "basic (scaler + Gaussian releases); the Gaussian releases (selection "
                       "and fit) compose exactly as one Gaussian mechanism (1/z^2 adds)",
        "noise_multiplier_total": z, "noise_multiplier": release.noise_multiplier,
        "sigma_a": release.sigma_a, "sigma_b": release.sigma_b, "sensitivity_a": d_a,
        "sensitivity_b": d_b, "share_a": share_a, "ridge": ridge, "ridge_scale": ridge_scale,
        "output_blocks": int(outputs.shape[1]), "features": int(features.shape[0]),
        "scaler": "none" if the_unit == Unit.WINDOW else
                  (scaler if isinstance(scaler, str) else "given"), **clipping,
        "selection": selection, "period": period, "noise_sampler": rng.name,
    }
    kernel = kernel_from_weights(features=features, public=public, targets=outputs,
                                 weights=weights)
    return DPLinearFit(model=LinearForecaster(kernel=kernel, spec=spec, details=details,
                                              name=f"dp-linear ({unit}, eps={eps:g})"),
                       claims=(_claim(eps, delta, the_unit, details=details,
                                      scaler_note=scaler_note, secret=seed is None),))


WINDOW_SCALER_NOTE = ("no scaler is used or released: each row is normalised by its own "
                      "look-back's mean and std, so the fit is invariant to per-channel affine "
                      "maps of the data")
"""The scaler note of a dp-linear claim at the window unit."""


def _check_request(data: ForecastData, *, eps: float, delta: float, unit: str, select: str,
                   fixed_design: bool) -> tuple[float, float]:
    """:func:`fit_dp_linear`'s budget, unit and selection checked, before anything is read."""
    eps = check_dp_linear_eps(eps)
    delta = require_in_range("delta", delta, low=0.0, high=1.0, high_inclusive=False,
                             hint="delta is a probability in (0, 1), typically 1e-6")
    if unit not in DEFAULTS:
        raise InvalidInputError(f"unit = {unit!r} is not a privacy unit; use 'record' or "
                                "'window'")
    require_meaningful_delta(delta, units=protected_units(data, unit), unit=unit)
    if select not in SELECT_CHOICES:
        raise InvalidInputError(f"select = {select!r} is not one of {SELECT_CHOICES}: "
                                "'private' chooses the design inside the guarantee, 'fixed' "
                                "takes the given spec")
    if select == "private" and fixed_design:
        raise InvalidInputError("spec and ridge_scale are chosen by the private selection; "
                                "pass select='fixed' to give them")
    return eps, delta


def noisy_ridge_solve(a: np.ndarray, b: np.ndarray, release: SSPNoise, *,
                      pooled: PooledStatistics | None,
                      rng: np.random.Generator | NoiseSampler, noise: bool,
                      ridge_scale: float) -> tuple[np.ndarray, float]:
    """The weights from the statistics (A, B) released with ``release``'s noise (and, where the
    design was selected privately, averaged with the selection release's view of the same
    statistics, ``pooled``), PSD-repaired, under the ridge the noise sets; and that ridge.

    The release and solve of sufficient-statistics perturbation (Wang 2018, "Revisiting
    differentially private linear regression: optimal and adaptive prediction & estimation in
    linear regression", AdaSSP): the Gaussian release (:func:`qpriv.privacy.ssp.perturb`,
    drawn by ``rng``), then, as post-processing, ``W = (psd(A + E) + lambda I)^{-1} (B + F)``
    with ``lambda = ridge_scale * sigma_A * sqrt(d)``
    (:func:`qpriv.privacy.ssp.noise_scaled_ridge`; sigma_A of the averaged A where
    ``pooled``, :meth:`~qpriv.forecasting.linear_select.PooledStatistics.combine`, is given).
    ``noise=False`` (tests) draws nothing and keeps the ridge the noise would have set.
    :func:`fit_dp_linear` releases its weights through this one step."""
    noisy_a, noisy_b = perturb(a, b, release, rng=rng) if noise else (a, b)
    # noise=False (tests) keeps the ridge the noise would have set: the noiseless twin is
    # the ridge shrunk toward the public forecast by that data-independent amount
    var_a = release.sigma_a ** 2
    if pooled is not None and noise:  # the selection release's view of the same statistics
        noisy_a, noisy_b, var_a = pooled.combine(noisy_a, noisy_b, var_a=var_a,
                                                 var_b=release.sigma_b ** 2)
    ridge = noise_scaled_ridge(math.sqrt(var_a), a.shape[0], scale=ridge_scale)
    return ridge_solve(psd_floor(noisy_a), noisy_b, ridge=ridge), ridge


def _shares_and_clips(defaults: dict[str, Any], *, share_a: float | None,
                      select_share: float | None, feature_clip: float | None,
                      target_clip: float | None) -> tuple[float, float, float, float]:
    """The budget shares and row clips :func:`fit_dp_linear` uses: each given one checked,
    each missing one the unit's default (:data:`DEFAULTS`)."""
    def given(name: str, value: float | None) -> float:
        return defaults[name] if value is None else value

    select_share = require_in_range(
        "select_share", given("select_share", select_share), low=0.0, high=1.0,
        high_inclusive=False,
        hint="the share of the Gaussian budget spent on selection lies in (0, 1)")
    return (given("share_a", share_a), select_share,
            require_in_range("feature_clip", given("feature_clip", feature_clip), low=0.0),
            require_in_range("target_clip", given("target_clip", target_clip), low=0.0))


def statistic_sensitivities(unit: Unit, maps: tuple[np.ndarray, np.ndarray, np.ndarray], *,
                            n_channels: int, clip: float | None, feature_clip: float,
                            target_clip: float) -> tuple[float, float, dict[str, Any]]:
    """(Delta_A, Delta_B) of the statistics at ``unit`` on the design's ``(features, public,
    outputs)`` maps, and the clipping that bounds them (``target_clip`` is per output block:
    the rows' radius is ``target_clip * sqrt(k)``): :func:`qpriv.privacy.ssp.window_sensitivities`
    (C rows per window) or :func:`qpriv.privacy.ssp.record_sensitivities_projected` (from the
    column norms of the window's linear maps, :func:`record_maps`)."""
    features, public, outputs = maps
    c_y_rows = target_clip * math.sqrt(outputs.shape[1])
    if unit == Unit.WINDOW:
        d_a, d_b = window_sensitivities(rows_per_unit=n_channels, feature_clip=feature_clip,
                                        target_clip=c_y_rows)
        return d_a, d_b, {"feature_clip": feature_clip, "target_clip": c_y_rows,
                          "target_clip_per_block": target_clip,
                          "row_scaling": "each row divided by its look-back's std"}
    window_map, target_map = record_maps(features, public, outputs)
    d_a, d_b = record_sensitivities_projected(window_map, target_map, bound=clip,
                                              feature_clip=feature_clip, target_clip=c_y_rows)
    return d_a, d_b, {"clip": clip, "feature_clip": feature_clip, "target_clip": c_y_rows,
                      "target_clip_per_block": target_clip,
                      "bound": "projected rows (column norms)"}


def _claim(eps: float, delta: float, unit: Unit, *, details: dict[str, Any],
           scaler_note: str, secret: bool) -> PrivacyClaim:
    """dp-linear's one claim: its budget at ``unit`` with what it takes as given (notes)."""
    selection, period = details["selection"], details["period"]
    private = selection["select"] == "private"
    notes = (
        scaler_note,
        RULES_NOTE if private else FIXED_DESIGN_NOTE,
        f"{PERIOD_NOTE}: {period} rows",
        CONSTANT_CHANNEL_NOTE,
        randomness_note(secret=secret),
        sampler_note(details["noise_sampler"]),
    )
    if private:
        notes += (f"the design ({selection['chosen']}) was selected inside the guarantee among "
                  f"{len(selection['candidates'])} declared candidates: {selection['mechanism']}"
                  f"; {selection['eps_share_note']}",)
    if unit == Unit.WINDOW:
        notes += (WINDOW_COUNT_NOTE,)
    if unit == Unit.RECORD:
        notes += (f"record: one value of one channel at one time step of the training series, "
                  f"replaced by any other value (event-level DP): the mechanism itself clips "
                  f"every value to [-{details['clip']:g}, {details['clip']:g}] in the "
                  "scaler's units, so the change it sees is at most "
                  f"{2 * details['clip']:g}",)
    return PrivacyClaim(value=eps, delta=delta, kind=Kind.GLOBAL_DP,
                        accounting=Accounting.RIGOROUS, unit=unit, covers=COVERS_LINEAR,
                        notes=notes, details=details)
