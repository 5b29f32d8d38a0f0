"""The run of a linear forecaster: data -> closed-form fit -> metrics and claims -> result.

:func:`qpriv.forecasting.run.run_forecast` hands the linear family of the method registry
(``public``, ``ridge``, ``dp-linear``; :mod:`qpriv.forecasting.linear`) to :func:`run_linear`.
The run writes the same files as a backbone run where they apply (``config.json`` first, then
the kernel and ``result.json``, atomically), and returns the same typed
:class:`~qpriv.forecasting.records.ForecastResult` (``mse``, ``mae`` on the z-scored test split,
``original_units`` per channel, ``val_loss``, ``windows``, ``privacy``), with DP's claim as
``claims["eps"]`` (result.json lists every claim under ``claims``).
"""

from __future__ import annotations

import math
import platform
import time
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np

from qpriv.errors import ArgumentError, require_in_range
from qpriv.forecasting.csv_input import CsvFormat, format_setting
from qpriv.forecasting.datasets import DATASETS
from qpriv.forecasting.dlinear import (
    DPSGD_SETTINGS,
    dlinear_record,
    fit_dlinear,
    fit_dpsgd_dlinear,
)
from qpriv.forecasting.inference import InferenceRecord, source_notes
from qpriv.forecasting.linear import (
    SELECT_CHOICES,
    LinearForecaster,
    LinearSpec,
    check_dp_linear_eps,
    default_spec,
    evaluate,
    fit_dp_linear,
    fit_ridge,
    linear_maps,
    protected_units,
    public_forecaster,
)
from qpriv.forecasting.linear_dpsgd import (
    DEFAULTS,
    DPSGD_LINEAR_DESIGN,
    dpsgd_linear_schedule,
    fit_dpsgd_linear,
)
from qpriv.forecasting.methods import LINEAR, RECOMMENDED
from qpriv.forecasting.methods import method as method_entry
from qpriv.forecasting.metrics import METRIC_UNITS, original_units
from qpriv.forecasting.records import ForecastResult
from qpriv.forecasting.seasonality import resolve_period
from qpriv.forecasting.windows import ForecastData, load_forecasting_data
from qpriv.privacy.budget import GLOBAL_DELTA
from qpriv.privacy.claims import PrivacyClaim, require_meaningful_delta
from qpriv.privacy.dpsgd_accounting import check_dpsgd_eps
from qpriv.runs.directory import check_out_dir, open_run
from qpriv.runs.files import atomic_savez, atomic_write_json
from qpriv.runs.layout import LINEAR_MODEL_FILE, RESULT_FILE
from qpriv.threads import torch_threads

DPSGD_TRAINED = ("dpsgd-linear", "dpsgd-dlinear")
"""The linear-family methods trained by DP-SGD on the kept training windows."""
DLINEAR = ("dlinear", "dpsgd-dlinear")
"""The linear-family methods of the DLinear architecture (no feature design)."""
TRAINED = ("dlinear", *DPSGD_TRAINED)
"""The linear-family methods trained by gradient steps at fixed settings (the others are fitted
in closed form)."""
SCALERS = ("private", "public")
"""How dp-linear treats the z-score scaler at the record unit: estimated under the guarantee
(``private``, the default) or declared public by the user (``public``: the loader's scaler,
fitted on the training split, released in the clear and named in the claim)."""


EVALUATION_NOTE = (
    "the run's reported errors are measurements outside the guarantee: the test and validation "
    "errors are z-scored by the loader's scaler (the training split's per-channel mean and "
    "std, fitted in the clear), and the per-channel errors in the file's units are the "
    "z-scored ones times that std, so together they reveal it; the kernel and its forecasts "
    "use no scaler")
"""Named in every linear method's claim: what the evaluation releases besides the model."""
PUBLIC_NOTE = ("the public forecast reads no training data; its fixed form (a blend of the "
               "seasonal naive forecast and the level-matched profile of the last (up to 7) "
               "seasonal periods, LinearSpec) was chosen once on ETTh1's validation split "
               "(H = 24), whose first windows' look-backs are the last L rows of the "
               "training split, so on ETTh1 that choice read those rows and is not itself "
               "private")
"""What the public floor's result says of how its one design was chosen."""
RECOMMENDED_NOTE = (f"{RECOMMENDED} is qpriv's recommended private forecaster, the default "
                    "method of qpriv train")
"""Named in the recommended method's claims."""


def run_linear(
    *, method: str, dataset: str, csv: str | Path | None, columns: Sequence[str] | None,
    data_dir: str | Path | None, horizon: int, seq_len: int, eps: float | None,
    delta: float | None, unit: str | None, clip_range: float | None, scaler: str | None,
    seed: int | None, select: str | None = None, period: int | None = None,
    max_train_windows: int | None,
    max_eval_windows: int | None,
    out_dir: str | Path | None, resume: bool, threads: int | None,
    csv_format: CsvFormat | None = None,
) -> ForecastResult:
    """Fit and test one linear forecaster (see :func:`qpriv.forecasting.run.run_forecast`,
    whose checks have run: ``eps`` is the method's budget and ``unit`` one it offers).

    Raises:
        InvalidInputError: a setting the method does not take (``delta``, ``clip_range`` or
            ``scaler`` for a method without a guarantee, ``scaler`` at the window unit), bad
            values (checked by :func:`qpriv.forecasting.linear.fit_dp_linear`), or a used
            ``out_dir``.
    """
    entry = method_entry(method)
    private = entry.needs_eps
    eps, delta, select = _checked_settings(method, eps=eps, delta=delta, unit=unit,
                                           clip_range=clip_range, scaler=scaler, select=select)
    out = check_out_dir(out_dir, resume=resume, marks=(RESULT_FILE,))
    with torch_threads(threads) as used_threads:
        data = load_forecasting_data(
            dataset, csv=csv, columns=columns, seq_len=seq_len, horizon=horizon,
            data_dir=data_dir, max_train_windows=max_train_windows,
            max_eval_windows=max_eval_windows, csv_format=csv_format)
        # a look-back too short for the features is refused; after the data, which refuses
        # one longer than the series before its L x L maps are built
        period = resolve_period(data.dates, period)
        spec = replace(DPSGD_LINEAR_DESIGN, period=period) if method == "dpsgd-linear" \
            else default_spec(data, period=period)
        linear_maps(spec, seq_len=seq_len, horizon=horizon)
        if private:  # a delta of 1/n or more promises nothing: refused before any file
            require_meaningful_delta(delta, units=len(data.train) if method in DPSGD_TRAINED
                                     and unit == "window" else protected_units(data, unit),
                                     unit=unit)
        request = {
            "dataset": data.dataset, "source": str(data.source or ""),
            "source_sha256": None if csv is None else data.source_sha256,
            "channels": list(data.channels), **format_setting(csv_format),
            "seq_len": seq_len, "horizon": horizon,
            "method": method, "eps_per_pass": None, "eps": eps, "delta": delta, "unit": unit,
            "clip_range": clip_range, "scaler": scaler, "seed": seed,
            "max_train_windows": max_train_windows, "max_eval_windows": max_eval_windows,
            "model": {"family": LINEAR, **_model_record(method, spec)},
            **({"select": select} if select is not None else {}),
        }
        if method in DPSGD_TRAINED:  # too few windows: refused, nothing written
            dpsgd_linear_schedule(len(data.train), DPSGD_SETTINGS if method == "dpsgd-dlinear"
                                  else DEFAULTS)
        finished = open_run(out, request, resume=resume,
                            ignore={"source"} if data.dataset in DATASETS else ())
        if finished is not None:
            return ForecastResult.from_json(finished)
        tic = time.perf_counter()
        model, claims = _fit(method, data, spec=spec, eps=eps, delta=delta, unit=unit,
                             seed=seed, clip_range=clip_range, scaler=scaler, select=select,
                             period=period)
        seconds = time.perf_counter() - tic
        # a user's CSV: its digest in config.json escapes every guarantee, so each claim says so
        source = source_notes(request["source_sha256"])
        recommended = (RECOMMENDED_NOTE,) if method == RECOMMENDED else ()
        claims = tuple(replace(claim, notes=(*claim.notes, EVALUATION_NOTE, *source,
                                             *recommended))
                       for claim in claims)
        test, val = evaluate(model, data.test, by_channel=True), evaluate(model, data.val)
        # the kernel is equivariant to per-channel affine maps: the z-scored errors times the
        # loader's std are the errors of the forecasts made in the file's own units
        by_channel = original_units(channels=data.channels, scaler=data.scaler,
                                    by_channel=test.pop("by_channel"))
    claim_entries = [claim.to_json() for claim in claims]
    result = {
        "method": method, "dataset": data.dataset, "horizon": horizon, "seq_len": seq_len,
        "seed": seed, **test, "metric_units": METRIC_UNITS, "original_units": by_channel,
        "val_loss": val["mse"], "best_epoch": None, "epochs": None,
        "diverged_epoch": None, "seconds": seconds,
        # "train" is the loader's count (a run read back checks its data by it); "train_read"
        # the windows the method actually read
        "windows": {"train": len(data.train), "train_read": _windows_read(method, data),
                    "val": len(data.val), "test": len(data.test), "channels": data.n_channels},
        "params": {"total": int(model.kernel.size)},
        "inference": InferenceRecord.from_data(data, keep_scaler=False).to_json(),
        "privacy": entry.privacy, "eps_per_pass": None,
        **({"eps": claim_entries[0]} if claim_entries else {}),
        "claims": claim_entries, "unit": unit,
        "model": {"family": LINEAR, "name": model.name, **_model_record(method, model.spec)},
        "fit": model.details,
        "privacy_notes": list(dict.fromkeys([
            *(note for claim in claims for note in claim.notes),
            *([PUBLIC_NOTE] if method == "public" else []), *source])),
        "environment": {"python": platform.python_version(), "numpy": np.__version__,
                        "threads": used_threads},
    }
    if out is not None:
        atomic_savez(out / LINEAR_MODEL_FILE, kernel=model.kernel)
        atomic_write_json(out / RESULT_FILE, result)
    # typed from the very object result.json holds: a run and its resume read the same
    return ForecastResult.from_json(result)


def _model_record(method: str, spec: LinearSpec) -> dict:
    """The model as config.json and result.json record it: the feature design of the fitted
    forecasters, DLinear's architecture and training settings for the DLinear methods (which
    use no design)."""
    return dlinear_record(method) if method in DLINEAR else {"spec": asdict(spec)}


def _checked_settings(method: str, *, eps: float | None, delta: float | None,
                      unit: str | None, clip_range: float | None, scaler: str | None,
                      select: str | None) -> tuple[float | None, float | None, str | None]:
    """:func:`run_linear`'s settings checked before anything is read or written: (eps, delta,
    select) as the fit takes them (delta and select defaulted where the method has them)."""
    private = method_entry(method).needs_eps
    if not private:
        for name, value in (("delta", delta), ("clip_range", clip_range), ("scaler", scaler)):
            if value is not None:
                raise ArgumentError(f"method {method!r} states no privacy guarantee, so it "
                                    f"takes no {{{name}}}; leave it out")
    if select is not None and method != "dp-linear":
        raise ArgumentError(f"{{select}} chooses dp-linear's design; method {method!r} has "
                            "none to choose: leave {select} out")
    if select is not None and select not in SELECT_CHOICES:
        raise ArgumentError(f"{{select}} = {select!r} is not one of {', '.join(SELECT_CHOICES)}")
    if method == "dp-linear" and select is None:
        select = "private"
    if scaler is not None and scaler not in SCALERS:
        raise ArgumentError(f"{{scaler}} = {scaler!r} is not one of {', '.join(SCALERS)}")
    if scaler is not None and unit == "window":
        raise ArgumentError("the window unit normalises each window by its own statistics and "
                            "uses no scaler; leave {scaler} out")
    if private:
        # dp-linear's own range; dpsgd-linear trains by DP-SGD
        eps = check_dp_linear_eps(eps) if method == "dp-linear" else check_dpsgd_eps(eps)
        delta = require_in_range("delta", GLOBAL_DELTA if delta is None else delta, low=0.0,
                                 high=1.0, high_inclusive=False,
                                 hint="delta is a probability in (0, 1), typically 1e-6")
    if clip_range is not None and not 0 < clip_range < math.inf:
        raise ArgumentError(f"{{clip_range}} = {clip_range:g} is not a finite number > 0; give "
                            "the value range R in z-scored units, e.g. 2")
    if clip_range is not None and method in DPSGD_TRAINED:
        raise ArgumentError("{clip_range} sets dp-linear's value range; DP-SGD clips each "
                            "window's gradient instead, which bounds a replaced value's effect "
                            "whatever it is: leave {clip_range} out")
    if clip_range is not None and unit == "window":
        raise ArgumentError("the window unit clips each window's features, not its values; "
                            "leave {clip_range} out")
    return eps, delta, select


def _fit(method: str, data: ForecastData, *, spec: LinearSpec, eps: float | None,
         delta: float | None, unit: str | None, seed: int | None, clip_range: float | None,
         scaler: str | None, select: str | None,
         period: int) -> tuple[LinearForecaster, tuple[PrivacyClaim, ...]]:
    """The method's model on ``data`` (the fixed design ``spec`` where it takes one), and its
    claims (none for the public floor and ridge)."""
    if method == "public":
        return public_forecaster(seq_len=data.seq_len, horizon=data.horizon, spec=spec), ()
    if method == "ridge":
        return fit_ridge(data, spec=spec), ()
    if method == "dlinear":
        return fit_dlinear(data, seed=seed), ()
    if method == "dpsgd-dlinear":
        model, claim = fit_dpsgd_dlinear(data, eps=eps, delta=delta, seed=seed, unit=unit,
                                         scaler=scaler)
        return model, (claim,)
    if method == "dpsgd-linear":
        model, claim = fit_dpsgd_linear(data, eps=eps, delta=delta, seed=seed, spec=spec,
                                        unit=unit, scaler=scaler)
        return model, (claim,)
    model, claims = fit_dp_linear(data, eps=eps, delta=delta, unit=unit, seed=seed,
                                  clip=clip_range, select=select, period=period,
                                  scaler="data" if scaler == "public" else "private")
    return model, tuple(claims)


def _windows_read(method: str, data: ForecastData) -> int:
    """The training windows ``method`` read: none for the public floor; for the closed-form
    fits (ridge, dp-linear) every sliding window of the training rows, whatever
    ``max_train_windows`` kept for the trainers; DP-SGD's the kept ones."""
    if method == "public":
        return 0
    if method in TRAINED:
        return len(data.train)
    return int(data.train.n_available)
