"""DP-SGD forecasters' step (:func:`dpsgd_strategy`), at the window or the record unit, and at
the record unit its scaler, noise and claim.

A record is one value of one channel at one time step of the training series
(:class:`~qpriv.privacy.claims.Unit`). DP-SGD's per-window clipping bounds what a replaced
value does to each window's gradient, whatever the value (so no value clip is needed), and
:mod:`qpriv.privacy.record_dpsgd` accounts the k = L + H windows that hold it under qpriv's
Poisson batches. One more thing moves with a record: the z-score scaler, fitted on the whole
training split, rescales every window. It is therefore either private (per-channel median and
MAD by private quantiles, :func:`qpriv.forecasting.linear_scaler.private_scaler`, at
:data:`SCALER_SHARE` of eps, pure DP, composed with DP-SGD's (eps, delta) by basic
composition: DP-SGD then runs on data scaled by a released statistic, which both neighbours
share), or declared public by the user (the loader's scaler, not covered), as for dp-linear.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from qpriv.errors import ArgumentError
from qpriv.forecasting.linear_scaler import private_scaler
from qpriv.forecasting.methods import Method, MethodSetup
from qpriv.forecasting.recipe import ForecasterTrainConfig
from qpriv.forecasting.series import ZScoreScaler
from qpriv.forecasting.windows import ForecastData, WindowDataset
from qpriv.privacy.claims import PrivacyClaim
from qpriv.privacy.dpsgd_accounting import dpsgd_schedule, noise_multiplier_for
from qpriv.privacy.record_dpsgd import (
    record_noise_multiplier_for,
    windows_holding_record,
)
from qpriv.privacy.samplers import NoiseSampler, as_sampler
from qpriv.training.dpsgd import DPSGDStrategy
from qpriv.training.seeding import derive_seed

SCALERS = ("private", "public")
"""How a DP-SGD forecaster at the record unit treats the z-score scaler (as dp-linear)."""
SCALER_SHARE = 0.1
"""The share of a record-unit eps spent on the private scaler (dp-linear's default)."""
NO_VALUE_CLIP = ("the record neighbourhood is any replacement of one value: the per-window "
                 "gradient clip bounds each window's change whatever the value, so no value "
                 "range is needed or assumed")


@dataclass(frozen=True)
class RecordScaling:
    """The data rescaled for a record-unit run, the eps the scaler spent, the claim's note and
    the loader's scaler (``loader``), in whose z-units every run reports its test metrics."""

    data: ForecastData
    eps_scaler: float
    note: str
    scaler: str
    loader: ZScoreScaler

    def loader_units(self, test: dict, by_channel: dict | None) -> dict:
        """``test``'s MSE and MAE in the loader's z-units, from the per-channel errors in the
        run's own (``by_channel``): a channel's error scales by std_run / std_loader."""
        if by_channel is None:
            return test
        ratio = np.asarray(self.data.scaler.std) / np.asarray(self.loader.std)
        mse = np.asarray(by_channel["mse"], dtype=np.float64) * ratio ** 2
        mae = np.asarray(by_channel["mae"], dtype=np.float64) * ratio
        return {**test, "mse": float(mse.mean()), "mae": float(mae.mean())}


def check_backbone_settings(entry: Method, *, unit: str | None, clip_range: float | None,
                            scaler: str | None, select: str | None) -> str | None:
    """A backbone method's dp-linear-style settings checked: refused, but for the scaler of
    a DP-SGD method (one that offers the record unit), :func:`check_record_settings`."""
    given = {"clip_range": clip_range, "scaler": scaler, "select": select}
    if "record" in entry.units:
        given = {"select": select}
    for name, value in given.items():
        if value is not None:
            raise ArgumentError(f"{{{name}}} sets the dp-linear fit; method {entry.name!r} "
                                f"takes none: leave {{{name}}} out")
    if "record" not in entry.units:
        return None
    return check_record_settings(entry.name, unit=unit, scaler=scaler, clip_range=clip_range)


def record_setup(setup: MethodSetup, *, scaler: str) -> MethodSetup:
    """A DP-SGD method's setup at the record unit: its DP-SGD step told so, with the eps left
    once a private scaler took its :data:`SCALER_SHARE`."""
    spec = dict(setup.dpsgd or {})
    share = SCALER_SHARE if scaler == "private" else 0.0
    return replace(setup, dpsgd={**spec, "eps": spec["eps"] * (1 - share), "unit": "record",
                                 "scaler": scaler})


def check_record_settings(method: str, *, unit: str | None, scaler: str | None,
                          clip_range: float | None) -> str | None:
    """The scaler treatment of a DP-SGD run (``"private"`` by default at the record unit,
    None at the window unit), its settings checked before anything is read.

    Raises:
        ArgumentError: a scaler outside :data:`SCALERS`, a scaler at the window unit, or a
            value clip (DP-SGD at the record unit needs none).
    """
    if clip_range is not None:
        raise ArgumentError(f"{{clip_range}} sets dp-linear's value range; method {method!r} "
                            "clips each window's gradient instead, which bounds a replaced "
                            "value's effect whatever it is: leave {clip_range} out")
    if scaler is not None and scaler not in SCALERS:
        raise ArgumentError(f"{{scaler}} = {scaler!r} is not one of {', '.join(SCALERS)}")
    if unit != "record":
        if scaler is not None:
            raise ArgumentError(f"{{scaler}} chooses the scaler of a record-unit run; method "
                                f"{method!r} at the {unit} unit leaves the scaler out of its "
                                "claim (and says so): leave {scaler} out or add {unit} record")
        return None
    return "private" if scaler is None else scaler


def rescale(data: ForecastData, scaler: ZScoreScaler) -> ForecastData:
    """``data`` z-scored by ``scaler`` instead of the loader's. The training windows come from
    the file's own training rows (:attr:`ForecastData.train_raw`), so that nothing of the
    loader's scaler reaches them; validation and test rows are mapped back through it."""
    train = _with_series(data.train, torch.from_numpy(
        scaler.transform(np.asarray(data.train_raw)).astype(np.float32)))

    def moved(split: WindowDataset) -> WindowDataset:
        raw = data.scaler.inverse_transform(split.series.double().numpy())
        return _with_series(split, torch.from_numpy(scaler.transform(raw).astype(np.float32)))

    return replace(data, scaler=scaler, train=train, val=moved(data.val),
                   test=moved(data.test))


def _with_series(split: WindowDataset, series: torch.Tensor) -> WindowDataset:
    """The same windows (starts, sizes) over ``series``, rows for rows."""
    copy = object.__new__(WindowDataset)
    copy.__dict__.update(split.__dict__)
    copy.series = series
    return copy


def record_scaling(data: ForecastData, *, scaler: str, eps: float,
                   rng: np.random.Generator | NoiseSampler) -> RecordScaling:
    """The scaler of a record-unit DP-SGD run: private at :data:`SCALER_SHARE` x ``eps``, or
    the loader's declared public (module docstring). ``rng``: the private quantiles' draws
    (:func:`qpriv.privacy.samplers.noise_sampler`: OpenDP's vetted samplers for a secret seed,
    as dp-linear's); the note names which."""
    if scaler == "public":
        return RecordScaling(data=data, eps_scaler=0.0, scaler=scaler, loader=data.scaler, note=(
            "the z-score scaler was fitted on the training split in the clear and declared "
            "public by the user: it is NOT covered (a replaced value moves it, and through it "
            "every scaled window)"))
    eps_scaler = SCALER_SHARE * eps
    used = private_scaler(data.train_raw, eps=eps_scaler, rng=rng)
    return RecordScaling(data=rescale(data, used), eps_scaler=eps_scaler, scaler=scaler,
                         loader=data.scaler, note=(
        "the z-score scaler is private: per-channel median and 1.4826 x MAD by "
        f"exponential-mechanism quantiles on a data-independent grid at eps = {eps_scaler:.4g} "
        "(pure DP, a record touches one channel), inside the claim by basic composition; "
        f"its draws come from the {as_sampler(rng).name} sampler"))


def dpsgd_strategy(setup: MethodSetup, *, n_train: int, train_config: ForecasterTrainConfig,
                   secure: bool = False) -> DPSGDStrategy | None:
    """The DP-SGD step of a method that asks for it (None: plain steps), its noise multiplier
    for this training set's sample rate and steps: Opacus's RDP accountant at the window unit,
    :func:`record_noise` at the record unit (``setup.dpsgd["unit"]``); ``secure`` (a secret
    seed): its noise from the cryptographic sampler."""
    if setup.dpsgd is None:
        return None
    spec = setup.dpsgd
    q, steps = dpsgd_schedule(n_train=n_train, batch_size=train_config.batch_size,
                              epochs=train_config.epochs)
    k = None
    if spec.get("unit") == "record":
        sigma, k = record_noise(eps=spec["eps"], delta=spec["delta"], sample_rate=q,
                                steps=steps, seq_len=setup.config.seq_len,
                                horizon=setup.config.horizon, n_train=n_train)
    else:
        sigma = noise_multiplier_for(eps=spec["eps"], delta=spec["delta"], sample_rate=q,
                                     steps=steps)
    return DPSGDStrategy(
        clip=spec["clip"], noise_multiplier=sigma, sample_rate=q,
        steps_per_epoch=steps // train_config.epochs, delta=spec["delta"],
        seed=derive_seed(train_config.seed, "dp-noise"), target_eps=spec["eps"],
        secure=secure, windows_per_record=k)


def record_noise(*, eps: float, delta: float, sample_rate: float, steps: int,
                 seq_len: int, horizon: int, n_train: int) -> tuple[float, int]:
    """(sigma, k): the noise multiplier for a record-level (eps, delta) of DP-SGD's part and the
    number of training windows that hold one record."""
    k = windows_holding_record(seq_len=seq_len, horizon=horizon, n_windows=n_train)
    sigma = record_noise_multiplier_for(eps=eps, delta=delta, sample_rate=sample_rate,
                                        steps=steps, windows_per_record=k)
    return sigma, k


def record_claim(dpsgd: PrivacyClaim, scaling: RecordScaling, *, notes: tuple[str, ...],
                 covers: str | None = None) -> PrivacyClaim:
    """DP-SGD's record-level claim with the scaler's eps added (basic composition)."""
    details: dict[str, Any] = {**dpsgd.details, "eps_dpsgd": dpsgd.value,
                               "eps_scaler": scaling.eps_scaler, "scaler": scaling.scaler,
                               "composition": "basic (private scaler + DP-SGD)"}
    value = None if dpsgd.value is None else dpsgd.value + scaling.eps_scaler
    return replace(dpsgd, value=value, covers=covers or dpsgd.covers, details=details,
                   notes=(*dpsgd.notes, scaling.note, NO_VALUE_CLIP, *notes))


def record_privacy(strategy: dict, scaling: RecordScaling, *, privacy: str,
                   notes: tuple[str, ...]) -> dict:
    """The privacy part of a record-unit DP-SGD run's result: the strategy's report composed
    with the scaler (:func:`record_claim`), ``notes`` added."""
    claim = record_claim(PrivacyClaim.from_json(strategy["eps"]), scaling, notes=(
        "hyper-parameters and the validation split used for model selection are not "
        "accounted", *notes))
    return {"privacy": privacy, "eps_per_pass": None, "eps": claim.to_json(),
            "noise_multiplier": strategy["noise_multiplier"], "privacy_notes": list(claim.notes)}
