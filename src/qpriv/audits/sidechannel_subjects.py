"""What the side-channel audit is run on: a finished run or an untrained model of a registered
method, probed on the dataset's training windows where they are on this machine and on a
seeded synthetic series otherwise. :func:`audit_sidechannel` is the front door of ``qpriv audit
sidechannel``; the audit itself is :func:`~qpriv.audits.sidechannel.sidechannel_audit`.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
from torch import Tensor

from qpriv.audits.sidechannel import sidechannel_audit
from qpriv.audits.sidechannel_report import NotApplicable, SideChannelReport, linear_not_applicable
from qpriv.errors import ArgumentError, InvalidInputError, require_positive_int
from qpriv.forecasting.artifacts import LinearRun, load_backbone_run, load_run
from qpriv.forecasting.config import ModelConfig
from qpriv.forecasting.methods import DEFAULT_EPS, LINEAR, setup_method
from qpriv.forecasting.methods import method as method_entry
from qpriv.forecasting.model import LDPTForecaster
from qpriv.forecasting.windows import load_forecasting_data

MAX_WINDOWS = 4096
"""The most windows the audit probes: it asks which paths exist, which a few windows show."""


def synthetic_windows(*, count: int, seq_len: int, n_channels: int, seed: int) -> Tensor:
    """``count`` windows ``(count, seq_len, n_channels)`` of a seeded synthetic series: a daily
    (24-step) cycle with random amplitude and phase, a random walk and white noise per channel,
    z-scored per channel over the whole series (as the data loader does with real data)."""
    count = require_positive_int("count (windows)", count)
    seq_len = require_positive_int("seq_len", seq_len)
    n_channels = require_positive_int("n_channels", n_channels)
    g = torch.Generator().manual_seed(int(seed))
    length = seq_len + count - 1
    t = torch.arange(length, dtype=torch.float64).unsqueeze(1)
    amplitude = 0.5 + torch.rand(n_channels, generator=g, dtype=torch.float64)
    phase = 2 * math.pi * torch.rand(n_channels, generator=g, dtype=torch.float64)
    series = amplitude * torch.sin(2 * math.pi * t / 24 + phase)
    series = series + 0.1 * torch.randn(length, n_channels, generator=g,
                                        dtype=torch.float64).cumsum(0)
    series = series + 0.2 * torch.randn(length, n_channels, generator=g, dtype=torch.float64)
    series = (series - series.mean(0)) / series.std(0, unbiased=False)
    starts = torch.arange(count).unsqueeze(1) + torch.arange(seq_len)
    return series[starts].to(torch.float32)


def audit_windows(
    *, count: int, seq_len: int, horizon: int, n_channels: int, seed: int,
    dataset: str = "ETTh1", data_dir: str | Path | None = None,
) -> tuple[Tensor, str]:
    """``count`` evenly spaced training windows of ``dataset`` if it is on this machine (the
    path given, ``$QPRIV_DATA_DIR`` or the user cache; nothing is downloaded), else
    :func:`synthetic_windows`; with a description of which. A ``data_dir`` given that does not
    hold the dataset is refused, not replaced.

    Raises:
        InvalidInputError: ``count`` < 1, or ``data_dir`` given and the dataset not found
            there (or damaged).
    """

    count = require_positive_int("count (windows)", count)
    try:
        data = load_forecasting_data(dataset, seq_len=seq_len, horizon=horizon,
                                     data_dir=data_dir, allow_download=False,
                                     max_train_windows=count)
    except InvalidInputError as exc:
        if data_dir is not None:  # data asked for by name is never swapped for synthetic
            raise
        reason = str(exc).split(". Looked at")[0]
        windows = synthetic_windows(count=count, seq_len=seq_len, n_channels=n_channels,
                                    seed=seed)
        return windows, f"{count} synthetic windows ({reason})"
    idx = torch.arange(len(data.train))
    return data.train.windows(idx)[0], (
        f"{len(idx)} evenly spaced {data.dataset} training windows from {data.source}")


def method_model(
    method: str, *, eps: float | None, overrides: dict | None = None, seq_len: int = 336,
    horizon: int = 24, n_channels: int = 7, seed: int = 0,
) -> LDPTForecaster:
    """An untrained model of a registered method (the audit is structural: it asks which paths
    exist, not what the weights learned), initialised from ``seed`` without touching the global
    random state."""

    base = ModelConfig(seq_len=seq_len, horizon=horizon, n_channels=n_channels)
    setup = setup_method(method, base=base, eps=eps, overrides=overrides)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        return LDPTForecaster(setup.config)


def audit_sidechannel(
    *,
    run_dir: str | Path | None = None,
    method: str | None = None,
    eps: float | None = None,
    gate: float | None = None,
    normalisation: str | None = None,
    windows: int = 16,
    seed: int = 0,
    data_dir: str | Path | None = None,
    accounting: str = "rigorous",
) -> SideChannelReport | NotApplicable:
    """The front door of ``qpriv audit sidechannel``: audit a finished run or a method (a
    linear forecaster's, run or method, is :class:`NotApplicable`).

    With ``run_dir``: the trained model of that run
    (:func:`qpriv.forecasting.artifacts.load_backbone_run`) on ``windows`` evenly spaced windows
    of its training split (synthetic windows, said so in the report, if its data cannot be
    found and no ``data_dir`` was given). With ``method``: an untrained model of the method at
    the paper's sizes (L = 336, H = 24) with ``gate`` and ``normalisation`` overriding the
    method's, on ETTh1 training windows if ETTh1 is on this machine (or ``data_dir``, which
    must hold it), synthetic ones otherwise.

    Raises:
        InvalidInputError: neither or both of ``run_dir`` and ``method``; ``windows`` outside
            [1, :data:`MAX_WINDOWS`]; ``eps``, ``gate`` or ``normalisation`` with ``run_dir``;
            ``eps`` for a method without noise; a ``data_dir`` without the data; anything
            :func:`~qpriv.audits.sidechannel.sidechannel_audit`,
            :func:`~qpriv.forecasting.artifacts.load_backbone_run` or the method setup rejects.
    """
    count = require_positive_int("windows", windows)
    if count > MAX_WINDOWS:
        raise ArgumentError(f"{{windows}} = {count} is above {MAX_WINDOWS}: the audit asks "
                            "which paths exist, and a few windows show them; probe at most "
                            f"{MAX_WINDOWS}")
    if (run_dir is None) == (method is None):
        raise InvalidInputError(
            "audit either a finished run (RUN_DIR) or a method (--method M), not "
            + ("both" if run_dir is not None else "neither")
        )
    if run_dir is not None:
        given = [name for name, value in (("eps", eps), ("gate", gate),
                                          ("normalisation", normalisation)) if value is not None]
        if given:
            raise InvalidInputError(
                f"{', '.join(given)}: only with --method (an untrained model of a method); a "
                "run is audited as it was trained"
            )
        return _audit_run(run_dir, count=count, seed=seed, data_dir=data_dir,
                          accounting=accounting)
    if method_entry(method).family == LINEAR:
        return linear_not_applicable(method, f"method {method}")
    if eps is not None and not method_entry(method).needs_eps:
        raise ArgumentError(f"method {method!r} adds no noise and takes no {{eps}}; leave it "
                            "out")
    if eps is None and method_entry(method).needs_eps:
        eps = DEFAULT_EPS
    overrides = {name: value for name, value in (("gate", gate), ("normalisation", normalisation))
                 if value is not None}
    base = ModelConfig()
    x, source = audit_windows(count=count, seq_len=base.seq_len, horizon=base.horizon,
                              n_channels=base.n_channels, seed=seed, data_dir=data_dir)
    model = method_model(method, eps=eps, overrides=overrides, n_channels=int(x.shape[2]),
                         seed=seed)
    cfg = model.config
    budget = f"eps {eps:g}, " if eps is not None and cfg.p > 0 else ""
    subject = (f"untrained {method} model ({budget}gate {cfg.gate:g}, normalisation "
               f"{cfg.normalisation}; weights from seed {seed}): the audit is structural")
    return sidechannel_audit(model, x, seed=seed, accounting=accounting, windows_source=source,
                             subject=subject)


def _audit_run(run_dir: str | Path, *, count: int, seed: int, data_dir: str | Path | None,
               accounting: str) -> SideChannelReport | NotApplicable:
    found = load_run(run_dir, data_dir=data_dir)
    if isinstance(found, LinearRun):
        return linear_not_applicable(found.result.method,
                                     f"{found.result.method} run {found.run_dir}")
    run = load_backbone_run(run_dir, data_dir=data_dir)
    cfg = run.config
    try:
        train = run.data(limit_eval=False).train
    except InvalidInputError as exc:
        if data_dir is not None:  # data asked for by name is never swapped for synthetic
            raise
        x = synthetic_windows(count=count, seq_len=cfg.seq_len, n_channels=cfg.n_channels,
                              seed=seed)
        source = f"{count} synthetic windows (the run's data: {exc})"
    else:
        idx = torch.linspace(0, len(train) - 1, min(count, len(train))).round().long().unique()
        x = train.windows(idx)[0]
        source = f"{len(idx)} evenly spaced training windows of the run ({train!r})"
    subject = f"trained {run.method} model of run {run.run_dir} (best epoch {run.best_epoch})"
    return sidechannel_audit(run.model, x, seed=seed, accounting=accounting,
                             windows_source=source, subject=subject)
