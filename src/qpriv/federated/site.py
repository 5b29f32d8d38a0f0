"""One site of a federation: its own data, its update, its errors, its Flower ClientApp.

Everything a site runs lives here and needs NumPy and pandas alone (no torch, no accountant):
Flower starts a fresh ``flwr-clientapp`` process per site for every SecAgg+ stage, and each
imports this module, so its import time is paid some twenty times a round. The site reads
its CSV with :func:`qpriv.forecasting.series.read_series` and splits and z-scores it as
:func:`qpriv.forecasting.windows.load_forecasting_data` does (:func:`load_site`); it computes
central dp-linear's clipped sufficient statistics on its training split, quantised, with its
Skellam share (:func:`site_update`, the protocol of :mod:`qpriv.federated.protocol`); and it
reports the released kernel's errors on its own validation and test windows
(:func:`site_errors`, the same numbers as :func:`qpriv.forecasting.linear.evaluate`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pandas as pd
from flwr.client import ClientApp, NumPyClient
from flwr.client.mod import secaggplus_mod
from flwr.common import Context

from qpriv.errors import InvalidInputError
from qpriv.federated.plan import FederatedPlan, release_dims
from qpriv.forecasting.csv_input import series_frequency
from qpriv.forecasting.linear_design import sufficient_statistics
from qpriv.forecasting.linear_scaler import record_scaler
from qpriv.forecasting.series import SplitRows, ZScoreScaler, read_series, split_rows
from qpriv.privacy.samplers import cryptographic_generator, skellam_noise

__all__ = ["REFUSED", "SLOT", "SiteClient", "SiteData", "SiteSeries", "check_site", "client_app",
           "load_site", "noise_share", "quantise", "site_errors",
           "site_update", "training_rows"]


REFUSED = "refused"
"""The fit metric that carries a site's refusal (one line) to the server."""
SLOT = "slot"
"""The node config key and the fit and evaluate metric of a site's slot (personal rounds)."""


class SiteSeries(Protocol):
    """What a site's update reads of its data: :class:`SiteData` (a site's process) or
    :class:`qpriv.forecasting.windows.ForecastData` (the same file loaded centrally, as the
    tests and audits load it)."""

    dataset: str
    channels: tuple[str, ...]
    dates: pd.DatetimeIndex | None
    scaler: ZScoreScaler

    @property
    def n_channels(self) -> int: ...

    @property
    def train_raw(self) -> np.ndarray: ...

    @property
    def train_windows(self) -> int: ...


@dataclass(frozen=True)
class SiteData:
    """One site's series: the file's rows (float64, up to the end of the test split), their
    timestamps, the splits' row ranges and the z-score fitted on the training rows."""

    dataset: str
    channels: tuple[str, ...]
    dates: pd.DatetimeIndex
    values: np.ndarray
    split: SplitRows
    scaler: ZScoreScaler
    seq_len: int
    horizon: int

    @property
    def n_channels(self) -> int:
        return len(self.channels)

    @property
    def train_raw(self) -> np.ndarray:
        """The training rows as read from the file (read-only)."""
        start, stop = self.split.train
        return self.values[start:stop]

    @property
    def train_windows(self) -> int:
        """How many sliding windows the training split holds."""
        return self.windows("train")

    def windows(self, split: str) -> int:
        """How many sliding windows the split holds."""
        start, stop = getattr(self.split, split)
        return stop - start - self.seq_len - self.horizon + 1


def load_site(csv: str | Path, *, seq_len: int, horizon: int) -> SiteData:
    """A site's CSV read, split and z-scored as :func:`load_forecasting_data` reads it.

    Raises:
        InvalidInputError: a bad CSV, a constant channel or a split too short (its messages).
    """
    frame, source, name, convention = read_series(None, csv=csv, columns=None, data_dir=None,
                                                  allow_download=False, csv_format=None)
    rows = split_rows(len(frame), seq_len=seq_len, horizon=horizon, convention=convention)
    values = frame.to_numpy(dtype=np.float64)[:rows.test[1]]
    values.setflags(write=False)
    start, stop = rows.train
    scaler = ZScoreScaler.fit(values[start:stop], channels=list(frame.columns),
                              where=f"the training rows [{start}, {stop}) of {source}")
    return SiteData(dataset=name, channels=tuple(str(col) for col in frame.columns),
                    dates=pd.DatetimeIndex(frame.index), values=values, split=rows,
                    scaler=scaler, seq_len=seq_len, horizon=horizon)


def site_errors(kernel: np.ndarray, data: SiteData, split: str) -> dict[str, float]:
    """MSE and MAE of ``y_hat = K x`` per channel over every window of ``split``, in the
    loader's z-scored units (float32 rows, as the windows of ``load_forecasting_data``)."""
    start, stop = getattr(data.split, split)
    series = data.scaler.transform(data.values[start:stop]).astype(np.float32)
    series = series.astype(np.float64)
    length = data.seq_len + data.horizon
    views = np.lib.stride_tricks.sliding_window_view(series, length, axis=0)  # (n, C, L + H)
    x, y = views[..., :data.seq_len], views[..., data.seq_len:]
    err = np.einsum("hl,ncl->nch", kernel, x) - y
    return {"mse": float(np.mean(err ** 2)), "mae": float(np.mean(np.abs(err)))}


def site_update(data: SiteSeries, plan: FederatedPlan, *, rng: np.random.Generator,
                slot: int | None = None) -> np.ndarray:
    """One site's integer vector: its clipped (A, B) on its training split, scaled by
    ``plan.scale`` and rounded, plus its Skellam share (module docstring). ``data`` is the
    site's own :func:`load_site` (or the same file's ``load_forecasting_data``). A personal
    plan (:mod:`qpriv.federated.personal`) puts the statistics in the site's ``slot`` (0 to
    sites - 1) and zeros in the other sites' slots.

    Raises:
        InvalidInputError: the site's channels or frequency differ from the plan's, it has
            more rows than the plan's bound, or a personal plan's slot is missing or out of
            range; refused before anything is computed or sent.
    """
    check_site(data, plan)
    if plan.personal and (slot is None or not 0 <= slot < plan.sites):
        raise InvalidInputError(f"site {data.dataset!r} has slot {slot}, not one of 0 to "
                                f"{plan.sites - 1}: give each site its own slot")
    maps = plan.maps()
    if plan.unit == "window":
        series, clip = data.train_raw, None
    else:
        scaler = "private" if plan.uses_private_scaler else "data"
        used, _, _ = record_scaler(scaler, fitted=data.scaler, raw=data.train_raw,
                                   eps=plan.eps, share=plan.scaler_share, rng=rng)
        series, clip = used.transform(data.train_raw), plan.clip
    c_y = plan.target_clip * math.sqrt(maps[2].shape[1])
    a, b = sufficient_statistics(series, features=maps[0], public=maps[1], outputs=maps[2],
                                 clip=clip, feature_clip=plan.feature_clip, target_clip=c_y,
                                 rescale=plan.unit == "window")
    vector = _slotted(a, b, plan, slot=int(slot)) if plan.personal else quantise(a, b, plan)
    return vector + noise_share(plan, dims=release_dims(plan)[1], rng=rng) if plan.noise \
        else vector


def quantise(a: np.ndarray, b: np.ndarray, plan: FederatedPlan) -> np.ndarray:
    """The integers a site sends before its noise: ``round(gamma s)`` of A's upper triangle,
    then of B (:mod:`qpriv.federated.protocol`'s docstring)."""
    return _encode(np.concatenate([a[np.triu_indices(a.shape[0])], b.ravel()]), plan)


def _slotted(a: np.ndarray, b: np.ndarray, plan: FederatedPlan, *, slot: int) -> np.ndarray:
    """A personal round's vector (:func:`qpriv.federated.plan.release_dims`): A's upper
    triangle in this site's slot of the A entries, B in its slot of the B entries, zeros in
    every other site's slots; rounded as :func:`quantise`."""
    upper, flat = a[np.triu_indices(a.shape[0])], b.ravel()
    a_all, b_all = np.zeros(plan.sites * upper.size), np.zeros(plan.sites * flat.size)
    a_all[slot * upper.size:(slot + 1) * upper.size] = upper
    b_all[slot * flat.size:(slot + 1) * flat.size] = flat
    return _encode(np.concatenate([a_all, b_all]), plan)


def _encode(values: np.ndarray, plan: FederatedPlan) -> np.ndarray:
    """``round(gamma v)`` as integers; a plan with ``quantised`` False (tests only, without
    noise) keeps the float statistics as they are."""
    if not plan.quantised:
        return np.asarray(values, dtype=np.float64)
    return np.rint(plan.scale * values).astype(np.int64)


def noise_share(plan: FederatedPlan, *, dims: tuple[int, int],
                rng: np.random.Generator) -> np.ndarray:
    """One site's Skellam share of the noise, ``Sk(mu_a_site)`` on A's ``dims[0]`` entries
    then ``Sk(mu_b_site)`` on B's ``dims[1]``, in the order :func:`site_update` draws them."""
    return np.concatenate([skellam_noise(plan.mu_a_site, (dims[0],), rng=rng),
                           skellam_noise(plan.mu_b_site, (dims[1],), rng=rng)])


def check_site(data: SiteSeries, plan: FederatedPlan) -> None:
    """Refuse a site whose columns, frequency or size do not fit the plan (one line each)."""
    channels = tuple(plan.channels.split(","))
    if tuple(data.channels) != channels:
        raise InvalidInputError(
            f"site {data.dataset!r} has columns {', '.join(data.channels)}, not the "
            f"federation's {', '.join(channels)}: give every site the same columns in the same "
            "order")
    freq = _frequency(data)
    if freq != plan.freq:
        raise InvalidInputError(f"site {data.dataset!r} is sampled at frequency {freq!r}, not "
                                f"the federation's {plan.freq!r}: resample it first")
    rows = training_rows(data)
    if rows > plan.max_rows:
        raise InvalidInputError(f"site {data.dataset!r} has {rows} training rows (windows x "
                                f"channels), above the plan's bound {plan.max_rows}: raise it")


def training_rows(data: SiteSeries) -> int:
    """Rows of a site's statistics: every sliding training window times every channel."""
    return data.train_windows * data.n_channels


def _frequency(data: SiteSeries) -> str:
    """The site's pandas frequency as its run record states it ("uneven" for none)."""
    freq = None if data.dates is None else series_frequency(data.dates)
    return "uneven" if freq is None else freq


class SiteClient(NumPyClient):
    """One site: its CSV stays here; it sends only its masked noisy statistics. A site that
    cannot take part (its file unreadable, its columns, frequency or size not the plan's)
    sends zeros, which leave the sum as it is, and the one-line reason in its fit metrics
    (``REFUSED``): SecAgg+ masks the vector, not the metrics, and the server turns the reason
    into the run's error."""

    def __init__(self, csv: str, seed: int | None, slot: int | None = None) -> None:
        self.csv, self.seed, self.slot = csv, seed, slot

    def _data(self, config: dict[str, Any]) -> SiteData:
        return load_site(self.csv, seq_len=int(config["seq_len"]),
                         horizon=int(config["horizon"]))

    def fit(self, parameters: list[np.ndarray],
            config: dict[str, Any]) -> tuple[list[np.ndarray], int, dict[str, Any]]:
        plan = FederatedPlan.from_config(config)
        rng = (cryptographic_generator() if self.seed is None  # a release: unpredictable
               else np.random.default_rng(self.seed))            # the tests' replayable shares
        try:
            vector = site_update(self._data(config), plan, rng=rng, slot=self.slot)
        except InvalidInputError as exc:  # a refusal: zeros in the sum, the reason in words
            return [np.zeros(sum(release_dims(plan)[1]))], 1, {REFUSED: str(exc)}
        return [vector.astype(np.float64)], 1, {} if self.slot is None else {SLOT: self.slot}

    def evaluate(self, parameters: list[np.ndarray],
                 config: dict[str, Any]) -> tuple[float, int, dict[str, Any]]:
        data = self._data(config)
        kernel = np.asarray(parameters[0], dtype=np.float64)
        test, val = site_errors(kernel, data, "test"), site_errors(kernel, data, "val")
        # the public floor on the same windows: it reads no training data (the plan's P_pub)
        floor = site_errors(FederatedPlan.from_config(config).maps()[1], data, "test")
        count = data.windows("test") * data.horizon * data.n_channels
        return test["mse"], count, {
            "site": data.dataset, "mse": test["mse"], "mae": test["mae"],
            "floor_mse": floor["mse"], "floor_mae": floor["mae"],
            "val_mse": val["mse"], "test_windows": data.windows("test"),
            "train_windows": data.windows("train"), "val_windows": data.windows("val"),
            "rows": len(data.dates), "first": data.dates[0].isoformat(),
            "last": data.dates[-1].isoformat(), "date_column": str(data.dates.name or "date"),
            "freq": series_frequency(data.dates) or "uneven",
            **({} if self.slot is None else {SLOT: self.slot})}


def _client(context: Context) -> Any:
    seed, slot = context.node_config.get("seed"), context.node_config.get(SLOT)
    return SiteClient(str(context.node_config["csv"]),
                      None if seed in (None, "") else int(seed),
                      None if slot in (None, "") else int(slot)).to_client()


client_app = ClientApp(client_fn=_client, mods=[secaggplus_mod])
"""The sites' Flower ClientApp (``qpriv.federated.site:client_app``)."""
