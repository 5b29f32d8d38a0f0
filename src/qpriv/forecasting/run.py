"""The front door of a forecasting run: data -> method -> model -> trainer -> metrics -> result.

Example::

    from qpriv.forecasting.run import run_forecast

    result = run_forecast(dataset="ETTh1", horizon=24, method="ldpt", eps=0.1, epochs=20,
                          out_dir="runs/ldpt-eps0.1")
    result.mse, result.claims["eps_per_pass"].value, result.claims["eps_advanced"].value

The result is a typed :class:`~qpriv.forecasting.records.ForecastResult`. Every input is
validated before anything is written. With ``out_dir`` the run writes
``config.json`` (what was asked), ``checkpoint.pt`` after every epoch, ``best.pt`` (the
best-validation weights) and, at the end, ``result.json``, each atomically; ``resume=True``
continues a killed run from its checkpoint to the same result as an uninterrupted one.
"""

from __future__ import annotations

import platform
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from qpriv.errors import ArgumentError, require_in_range
from qpriv.forecasting.config import ModelConfig
from qpriv.forecasting.csv_input import CsvFormat, format_setting
from qpriv.forecasting.datasets import DATASETS
from qpriv.forecasting.inference import InferenceRecord
from qpriv.forecasting.linear_run import TRAINED, run_linear
from qpriv.forecasting.methods import (
    DEFAULT_BATCH,
    DEFAULT_EPOCHS,
    LINEAR,
    RECOMMENDED,
    Method,
    MethodSetup,
    run_budget,
    setup_method,
)
from qpriv.forecasting.methods import method as method_entry
from qpriv.forecasting.metrics import METRIC_UNITS, original_units
from qpriv.forecasting.model import PAPER_PARAMETERS, LDPTForecaster
from qpriv.forecasting.recipe import ForecasterRecipe, ForecasterTrainConfig
from qpriv.forecasting.record_dpsgd import (
    check_backbone_settings,
    dpsgd_strategy,
    record_scaling,
    record_setup,
)
from qpriv.forecasting.records import ForecastResult
from qpriv.forecasting.rigorous import RIGOROUS_PRIVACY, rigorous_setup, rigorous_summary
from qpriv.forecasting.run_claims import name_the_source, run_claims
from qpriv.forecasting.windows import ForecastData, load_forecasting_data
from qpriv.privacy.budget import FEATURE_PATH_DELTA, GLOBAL_DELTA, PrivacyTarget, Spend
from qpriv.privacy.calibration import MAX_EPS
from qpriv.privacy.claims import Kind
from qpriv.privacy.composition import advanced_composition
from qpriv.privacy.randomness import run_seed
from qpriv.privacy.samplers import noise_sampler
from qpriv.runs.directory import check_out_dir, open_run, read_settings
from qpriv.runs.files import atomic_write_json
from qpriv.runs.layout import CHECKPOINT_FILE, RESULT_FILE
from qpriv.threads import check_threads, torch_threads
from qpriv.training.seeding import derive_seed, seed_everything
from qpriv.training.trainer import StepStrategy, Trainer, TrainResult

DEFAULT_DELTA_PRIME = 1e-6
ADDED_REQUEST_KEYS = {"accounting": "paper", "delta": FEATURE_PATH_DELTA,
                      "model": {"encoding": "amplitude", "clip": 2.0, "reference": None}}
"""Keys config.json gained after its first release, with what an older run did: it used the
paper's accounting, and delta (read only by the rigorous accounting, which came with these keys)
was the default; its model encoded tokens as eq. 2 does (``encoding``, and the signed
encoding's ``clip`` and ``reference``, which eq. 2 never reads, came with ``ldpt-signed``).
(``eps``, ``dpsgd`` and ``source_sha256``, the requested budget, DP-SGD's
settings and a user CSV's digest, came later; an older run has no default for them, so an
unfinished one is not resumed: its settings cannot be checked.)"""


def read_request(path: Path) -> dict:
    """A run's config.json, with :data:`ADDED_REQUEST_KEYS` filled in where an older run lacks
    them, so that runs written before and after compare by what they did."""
    return read_settings(path, defaults=ADDED_REQUEST_KEYS)


def run_forecast(
    *, dataset: str = "ETTh1", csv: str | Path | None = None,
    columns: Sequence[str] | None = None, horizon: int = 24, method: str = RECOMMENDED,
    eps: float | None = None, eps_total: float | None = None, epochs: int | None = None,
    batch_size: int | None = None, seed: int | None = 2024,
    max_train_windows: int | None = None, max_eval_windows: int | None = None,
    out_dir: str | Path | None = None, resume: bool = False, progress: bool = True,
    data_dir: str | Path | None = None, threads: int | None = None, seq_len: int = 336,
    eval_passes: int = 1, overrides: Mapping[str, Any] | None = None,
    delta_prime: float = DEFAULT_DELTA_PRIME, accounting: str = "paper",
    delta: float | None = None, rigorous: bool = True, unit: str | None = None,
    clip_range: float | None = None, scaler: str | None = None, select: str | None = None,
    period: int | None = None, keep_checkpoints: bool = False,
    csv_format: CsvFormat | None = None,
) -> ForecastResult:
    """Train and test one forecaster; return (and, with ``out_dir``, write) the result.

    Examples:
        Seconds: a tiny model on 64 windows of ETTh1, found through ``QPRIV_DATA_DIR``:

        >>> result = run_forecast(method="ldpt", eps=0.5, seq_len=64, epochs=1,
        ...                       max_train_windows=64, max_eval_windows=32, progress=False,
        ...                       rigorous=False, overrides={"d_model": 16, "n_heads": 2,
        ...                                                  "d_ff": 32, "n_shots": 64})
        >>> claim = result.claims["eps_per_pass"]
        >>> claim.value, str(claim.accounting)
        (0.5, 'paper')
        >>> result.mse > 0
        True

    Args:
        dataset, csv, columns, data_dir, max_train_windows, max_eval_windows, csv_format: the
            data, as in :func:`qpriv.forecasting.windows.load_forecasting_data`.
        horizon: forecast length H >= 1. seq_len: look-back L (336 in the paper).
        method: a registered method (:data:`qpriv.forecasting.methods.METHODS`): ``classical``,
            ``ldpt``, ``ldpt-clean``, ...
        eps: per-pass budget eps_s > 0 of ``accounting="paper"`` for methods that calibrate
            to one (default 0.1); a method without noise takes none.
        eps_total: the record-level eps over the whole training of ``accounting="rigorous"``
            (required there, refused otherwise); see
            :func:`qpriv.forecasting.methods.run_budget`.
        epochs, seed, eval_passes: the protocol (the LDPT paper, section 7.2); ``epochs`` None
            takes the method's (50 for ``dpsgd-tuned``, 20 otherwise). A method's learning-rate
            warm-up shrinks in proportion when ``epochs`` is below the method's own. ``seed``
            None draws a secret seed from the operating system and records none: the run
            for a release, whose noise nobody can replay (:mod:`qpriv.privacy.randomness`;
            a recorded seed lets anyone who reads it replay the mechanism, and the claims of
            such a run say so).
        batch_size: training batch (default: the method's, 512 for ``dpsgd-tuned``, 64
            otherwise); DP-SGD's Poisson sampling uses it as the expected batch size.
        out_dir: where to write config, checkpoints and result; None writes nothing.
        keep_checkpoints: keep the last epoch's ``checkpoint.pt`` of a finished run (by
            default only the best weights, ``best.pt``, stay beside the result); refused for
            the linear family, which writes no checkpoints.
        resume: continue the run in ``out_dir`` from its checkpoint (same settings required);
            a finished run's ``result.json`` is read back as it is.
        progress: a tqdm bar per epoch on stderr.
        threads: torch CPU threads for this run (restored afterwards); None leaves them.
        overrides: model settings that replace the method's (ablations), e.g.
            ``{"n_shots": 256}``, ``{"k": 1.0}``, ``{"norm": "layernorm"}``.
        delta_prime: delta' of advanced composition (eq. 17).
        accounting: ``"paper"`` (``eps`` is the per-pass eps_s of Algorithm 1) or
            ``"rigorous"`` (``eps_total`` is the record-level eps over the whole training at
            ``delta``; the channel's p comes from the rigorous accountant and per-window
            normalisation is removed, see :mod:`qpriv.forecasting.rigorous`).
        delta: delta of the rigorous accounting of the feature path (None: 1e-5). Methods
            with a delta of their own (DP-SGD, DP-Input, Bottleneck-DP: the paper's 1e-6)
            refuse one, rather than ignore it.
        rigorous: add the rigorous (eps, delta) of token, window and record beside the paper's
            numbers for methods with the channel (about a minute the first time a setting is
            seen, then cached).
        period: the linear family's seasonal period in rows (None: read from the
            timestamps, :func:`qpriv.forecasting.seasonality.seasonal_period`).

    Returns:
        The run's :class:`~qpriv.forecasting.records.ForecastResult` (result.json holds its
        JSON form, ``to_json()``): test ``mse`` and ``mae`` (z-scored; None when training
        diverged before any finite validation loss), ``original_units``, ``val_loss``,
        ``best_epoch``, ``diverged_epoch``, ``params``, the noise (``p``, ``gamma``,
        ``sigma``, ...) and every privacy number a typed ``PrivacyClaim`` (``claims``, and
        for LDPT ``rigorous_claims``).

    Raises:
        InvalidInputError: any bad argument (before any file is written), a missing dataset,
            an ``out_dir`` that already holds a run without ``resume``, a ``resume`` on an
            ``out_dir`` that does not exist or is empty, or a ``resume`` whose settings differ
            from the checkpointed run.
    """
    entry = method_entry(method)
    target = checked_target(entry, eps=eps, eps_total=eps_total, accounting=accounting)
    if csv is not None and data_dir is not None:
        raise ArgumentError("{data_dir} says where to find a named dataset; {csv} names its "
                            "file itself: leave {data_dir} out")
    unit = entry.check_unit(unit)
    if entry.family == LINEAR:
        _refuse_training_settings(method, epochs=epochs, batch_size=batch_size,
                                  overrides=overrides, eval_passes=eval_passes,
                                  keep_checkpoints=keep_checkpoints)
        return run_linear(
            method=method, dataset=dataset, csv=csv, columns=columns, data_dir=data_dir,
            horizon=horizon, seq_len=seq_len, eps=None if target is None else target.eps_release,
            delta=delta, unit=unit, clip_range=clip_range, scaler=scaler, select=select,
            period=period, seed=seed, max_train_windows=max_train_windows,
            max_eval_windows=max_eval_windows, out_dir=out_dir, resume=resume, threads=threads,
            csv_format=csv_format)
    scaler = check_backbone_settings(entry, unit=unit, clip_range=clip_range, scaler=scaler,
                                     select=select)
    _refuse_period(method, period=period)
    plan = plan_run(method, target=target, delta=delta, seq_len=seq_len, horizon=horizon,
                    overrides=overrides, epochs=epochs, batch_size=batch_size, seed=seed,
                    eval_passes=eval_passes, progress=progress, scaler=scaler)
    return _run_backbone(
        plan, method=method, target=target, accounting=accounting, delta_prime=delta_prime,
        asked=_DataRequest(dataset=dataset, csv=csv, columns=columns, data_dir=data_dir,
                           seq_len=seq_len, horizon=horizon, max_train_windows=max_train_windows,
                           max_eval_windows=max_eval_windows, csv_format=csv_format),
        overrides=overrides, seed=seed, eval_passes=eval_passes, out_dir=out_dir,
        resume=resume, threads=threads, rigorous=rigorous, progress=progress,
        keep_checkpoints=keep_checkpoints)


@dataclass(frozen=True)
class _DataRequest:
    """The data a backbone run asked for, as :func:`load_forecasting_data` takes it."""

    dataset: str
    csv: str | Path | None
    columns: Sequence[str] | None
    data_dir: str | Path | None
    seq_len: int
    horizon: int
    max_train_windows: int | None
    max_eval_windows: int | None
    csv_format: CsvFormat | None

    def load(self) -> ForecastData:
        return load_forecasting_data(
            self.dataset, csv=self.csv, columns=self.columns, seq_len=self.seq_len,
            horizon=self.horizon, data_dir=self.data_dir,
            max_train_windows=self.max_train_windows, max_eval_windows=self.max_eval_windows,
            csv_format=self.csv_format)


def _run_backbone(plan: RunPlan, *, method: str, target: PrivacyTarget | None,
                  accounting: str, delta_prime: float, asked: _DataRequest,
                  overrides: Mapping[str, Any] | None, seed: int | None, eval_passes: int,
                  out_dir: str | Path | None, resume: bool, threads: int | None,
                  rigorous: bool, progress: bool, keep_checkpoints: bool) -> ForecastResult:
    """:func:`run_forecast` for a method of the LDPT backbone, its settings checked and
    planned: check the rest, load the data, train (or read the finished run back), state
    the claims and write the result."""
    check_threads(threads)  # before anything is written
    if plan.setup.eps_per_pass is not None:
        advanced_composition(plan.setup.eps_per_pass, epochs=plan.epochs,
                             delta_prime=delta_prime)
    out = check_out_dir(out_dir, resume=resume, marks=(CHECKPOINT_FILE, RESULT_FILE))
    with torch_threads(threads) as used_threads:
        data = asked.load()
        scaling = (None if plan.scaler is None else record_scaling(
            data, scaler=plan.scaler, eps=target.eps,
            rng=noise_sampler(None if plan.secret
                              else derive_seed(plan.train_config.seed, "scaler"))))
        data = data if scaling is None else scaling.data
        setup = replace(plan.setup, config=replace(plan.setup.config,
                                                   n_channels=data.n_channels))
        plan = replace(plan, setup=setup)
        strategy = dpsgd_strategy(setup, n_train=len(data.train),
                                  train_config=plan.train_config, secure=plan.secret)
        # before training: a failure here costs nothing, and the answer is cached
        rigorous_part = (
            {"rigorous": rigorous_summary(setup.config, epochs=plan.epochs, delta=plan.delta,
                                          progress=progress)}
            if rigorous and setup.config.use_quantum and setup.config.p > 0
            and setup.privacy in (Kind.LOCAL_QDP, RIGOROUS_PRIVACY) else {})
        request = _request(plan, data=data, asked=asked, method=method, target=target,
                           accounting=accounting, overrides=overrides,
                           delta_prime=delta_prime, seed=seed, eval_passes=eval_passes)
        # the file of a named dataset may be found elsewhere on resume (another
        # QPRIV_DATA_DIR, the user cache): it is verified against its published sha256, so
        # the bytes are the same and only a user CSV's path counts as a setting
        finished = open_run(out, request, resume=resume, defaults=ADDED_REQUEST_KEYS,
                            ignore={"source"} if data.dataset in DATASETS else ())
        if finished is not None:
            return ForecastResult.from_json(finished)
        trained = train_planned(plan, data=data, strategy=strategy, out=out, resume=resume)
        if scaling is not None:  # test metrics in the loader's z-units, as every run's
            trained = replace(trained, test=scaling.loader_units(trained.test,
                                                                 trained.by_channel))

    result = {
        "method": method, "dataset": data.dataset, "horizon": asked.horizon,
        "seq_len": asked.seq_len, "seed": seed,
        **_outcome(trained, data=data),
        **_feature_counts(trained.model),
        **run_claims(setup, epochs=plan.epochs, delta_prime=delta_prime,
                     strategy=trained.trainer.strategy.report(), target=target,
                     delta=plan.delta, secret=plan.secret, scaling=scaling),
        **rigorous_part,
        "model": setup.config.as_dict(),
        "train": plan.recorded_train,
        "strategy": trained.trainer.strategy.report(),
        "history": trained.fit.history,
        "environment": {"torch": torch.__version__, "python": platform.python_version(),
                        "device": str(trained.trainer.device), "threads": used_threads},
    }
    if scaling is not None:  # the scaler the model runs in: private, or declared public
        result["inference"]["scaler_note"] = scaling.note
    name_the_source(result, source_sha256=request["source_sha256"])
    if out is not None:
        atomic_write_json(out / RESULT_FILE, result)
        if not keep_checkpoints:  # the finished run keeps best.pt; resuming needs no more
            (out / CHECKPOINT_FILE).unlink(missing_ok=True)
    # typed from the very object result.json holds: a run and its resume read the same
    return ForecastResult.from_json(result)


def _request(plan: RunPlan, *, data: ForecastData, asked: _DataRequest, method: str,
             target: PrivacyTarget | None, accounting: str,
             overrides: Mapping[str, Any] | None, delta_prime: float, seed: int | None,
             eval_passes: int) -> dict:
    """What a backbone run was asked, as config.json records it and a resume compares it."""
    setup = plan.setup
    return {
        "dataset": data.dataset, "source": str(data.source or ""),
        "source_sha256": data.source_sha256 if asked.csv is not None else None,
        "channels": list(data.channels), **format_setting(asked.csv_format),
        "seq_len": asked.seq_len, "horizon": asked.horizon, "method": method,
        "eps_per_pass": setup.eps_per_pass, "epochs": plan.epochs, "seed": seed,
        "max_train_windows": asked.max_train_windows,
        "max_eval_windows": asked.max_eval_windows,
        "eval_passes": eval_passes, "overrides": dict(overrides or {}),
        "accounting": accounting, "delta": plan.delta,
        "eps": None if target is None else target.eps,
        "dpsgd": dict(setup.dpsgd) if setup.dpsgd else None,
        "delta_prime": delta_prime, "model": setup.config.as_dict(),
        # neither the bars nor drawing the noise ahead changes what is computed
        "train": {k: v for k, v in plan.recorded_train.items()
                  if k not in ("progress", "draw_ahead")},
    }


def checked_target(entry: Method, *, eps: float | None, eps_total: float | None,
                   accounting: str) -> PrivacyTarget | None:
    """The budget of a run of ``entry`` (:func:`run_budget`), with a linear method's misplaced
    rigorous accounting refused first, in words that lead out: the per-pass eps_s of the LDPT
    paper's Algorithm 1 (``accounting="paper"``), or the record-level eps over the whole
    training (``"rigorous"``, checked > 0); None for a method without noise.

    Raises:
        InvalidInputError: a budget the method or its accounting does not take.
    """
    if entry.family == LINEAR and (accounting == "rigorous" or eps_total is not None):
        # before run_budget, whose advice for the LDPT methods would send a linear run in a
        # circle ({accounting} needs {eps_total}, which needs {accounting}, refused here)
        given = [name for name, value in (("accounting", accounting == "rigorous" or None),
                                          ("eps_total", eps_total)) if value is not None]
        raise ArgumentError(
            "{accounting} and {eps_total} calibrate the channel of an LDPT method with finite "
            f"shots; method {entry.name!r} has none: leave "
            + " and ".join(f"{{{name}}}" for name in given) + " out"
            + (" and give its budget as {eps} (its guarantee is already the rigorous one, "
               "at the unit given by {unit})" if entry.needs_eps else ""),
            values={"accounting": "rigorous"})
    target = run_budget(entry.name, eps=eps, eps_total=eps_total, accounting=accounting)
    if target is not None and target.spend is Spend.OVER_TRAINING:
        target = replace(target, eps=require_in_range(
            "eps_total (rigorous, record level)", target.eps, low=0.0,
            hint="a privacy budget must be > 0"))
    return target


def _refuse_period(method: str, *, period: int | None) -> None:
    """Refuse the linear family's seasonal period for a method of the backbone, which learns
    its own (its other dp-linear settings: :func:`check_backbone_settings`)."""
    if period is not None:
        raise ArgumentError(f"{{period}} sets the linear forecasters' seasonal period; method "
                            f"{method!r} learns its own: leave {{period}} out")


def _refuse_training_settings(method: str, *, epochs: int | None, batch_size: int | None,
                              overrides: Mapping[str, Any] | None, eval_passes: int,
                              keep_checkpoints: bool) -> None:
    """Refuse the settings of a trained backbone for a linear method: fitted in closed form, or
    trained (:data:`~qpriv.forecasting.linear_run.TRAINED`) at its own fixed settings."""
    ignored = {"epochs": epochs, "batch_size": batch_size, "overrides": overrides or None,
               "eval_passes": None if eval_passes == 1 else eval_passes}
    given = [name for name, value in ignored.items() if value is not None]
    how = ("trains at fixed settings (its learning rate, batch and epochs are constants of "
           "the method, not set per run)" if method in TRAINED else "is fitted in closed form")
    if given:
        raise ArgumentError(f"method {method!r} {how}: it takes no "
                            + ", ".join(f"{{{name}}}" for name in given) + "; leave "
                            + ("it" if len(given) == 1 else "them") + " out")
    if keep_checkpoints:
        raise ArgumentError(f"method {method!r} writes no checkpoints (a linear forecaster "
                            "is fitted or trained in one go, its kernel saved with its "
                            "result); leave {keep_checkpoints} out")


@dataclass(frozen=True)
class RunPlan:
    """A backbone run's settings once checked (:func:`plan_run`): the method built at its
    budget, the training configuration (and what of it is recorded), the delta it is accounted
    at, and whether its seed is secret."""

    setup: MethodSetup
    train_config: ForecasterTrainConfig
    delta: float
    secret: bool
    scaler: str | None = None
    """A DP-SGD method at the record unit: its scaler, private or declared public."""

    @property
    def epochs(self) -> int:
        return self.train_config.epochs

    @property
    def recorded_train(self) -> dict:
        """The training configuration as the run records it: a secret seed is written nowhere."""
        return self.train_config.as_dict() | ({"seed": None} if self.secret else {})


def plan_run(method: str, *, target: PrivacyTarget | None, delta: float | None, seq_len: int,
             horizon: int, overrides: Mapping[str, Any] | None, epochs: int | None,
             batch_size: int | None, seed: int | None, eval_passes: int, progress: bool,
             scaler: str | None = None) -> RunPlan:
    """Build the backbone method at its budget and check its training settings and delta;
    ``scaler`` (a DP-SGD method at the record unit): how its scaler is treated.

    ``target`` is :func:`checked_target`'s. The protocol is the LDPT paper's (section 7.2):
    ``epochs`` None takes the method's, and a learning-rate warm-up shrinks with it; a
    rigorous target replaces the channel's p and sigma by the rigorous accountant's
    (:func:`qpriv.forecasting.rigorous.rigorous_setup`); ``seed`` None draws a secret one.
    The model is planned with one channel: the caller sets ``n_channels`` from its data.

    Raises:
        InvalidInputError: a budget or override the method refuses
            (:func:`~qpriv.forecasting.methods.setup_method`), or a delta it cannot take or
            outside (0, 1).
    """
    base = ModelConfig(seq_len=seq_len, horizon=horizon, n_channels=1)
    if target is None:
        build_eps = None
    elif target.spend is Spend.OVER_TRAINING:
        # rigorous_setup replaces the paper chain's p and sigma: only the method's structure
        # is kept, so any budget the chain accepts will do to build it
        build_eps = min(target.eps, MAX_EPS)
    else:
        build_eps = target.eps
    setup = setup_method(method, base=base, eps=build_eps, overrides=overrides)
    if scaler is not None:
        setup = record_setup(setup, scaler=scaler)
    training = {"epochs": DEFAULT_EPOCHS, "batch_size": DEFAULT_BATCH, **setup.training}
    if epochs is not None:
        if training.get("warmup_epochs"):
            training["warmup_epochs"] = training["warmup_epochs"] * epochs // training["epochs"]
        training["epochs"] = epochs
    if batch_size is not None:
        training["batch_size"] = batch_size
    secret = seed is None
    # a secret seed drives every stream as a given one would, and is written nowhere
    train_config = ForecasterTrainConfig(seed=run_seed(seed), eval_passes=eval_passes,
                               progress=progress, **training)
    if delta is None:
        delta = FEATURE_PATH_DELTA
    elif not (setup.config.use_quantum and setup.privacy == Kind.LOCAL_QDP):
        own = setup.dpsgd is not None or "delta" in setup.noise
        raise ArgumentError(
            f"{{delta}} = {delta:g} cannot be set for method {method!r}: "
            + (f"it runs at the paper's delta = {GLOBAL_DELTA:g}" if own else
               "it has no feature path to account")
            + "; {delta} sets the rigorous accounting of the LDPT feature path (ldpt and the "
            "ablations that keep the channel)"
        )
    delta = require_in_range("delta", delta, low=0.0, high=1.0, high_inclusive=False,
                             hint="delta is a probability, typically 1e-5")
    if target is not None and target.spend is Spend.OVER_TRAINING:
        setup = rigorous_setup(setup, eps_total=target.eps, delta=delta,
                               epochs=train_config.epochs)
    return RunPlan(setup=setup, train_config=train_config, delta=delta, secret=secret,
                   scaler=scaler)


@dataclass(frozen=True)
class TrainedRun:
    """What training left (:func:`train_planned`): the model at its best weights, the trainer
    and its fit, the test metrics (``mse``, ``mae``: None where training diverged before any
    finite validation loss) and the per-channel ones that
    :func:`~qpriv.forecasting.metrics.original_units` reads."""

    model: LDPTForecaster
    trainer: Trainer
    fit: TrainResult
    test: dict
    by_channel: dict | None


def train_planned(plan: RunPlan, *, data: ForecastData, strategy: StepStrategy | None,
                  out: Path | None, resume: bool) -> TrainedRun:
    """Train the planned model on ``data`` (resuming from ``out``) and test its best weights.

    The model's initial weights are seeded from the plan's seed (``"model-init"``), so an
    auditor who knows the plan can draw them again; ``strategy`` is the step (None: plain,
    or :func:`~qpriv.forecasting.record_dpsgd.dpsgd_strategy` for DP-SGD); ``out`` None
    writes no checkpoint."""
    seed_everything(derive_seed(plan.train_config.seed, "model-init"))
    model = LDPTForecaster(plan.setup.config)
    trainer = Trainer(model, train=data.train, val=data.val, config=plan.train_config,
                      recipe=ForecasterRecipe(),
                      checkpoint_dir=out, strategy=strategy)
    fit = trainer.fit(resume=resume)
    # a run that diverged before any finite validation loss holds NaN weights: no test
    # number rather than a NaN one
    test = (trainer.evaluate(data.test, by_channel=True) if fit.best_epoch
            else {"mse": None, "mae": None})
    by_channel = test.pop("by_channel", None)
    return TrainedRun(model=model, trainer=trainer, fit=fit, test=test, by_channel=by_channel)


def _outcome(trained: TrainedRun, *, data: ForecastData) -> dict:
    """The result's numbers of a trained run: test metrics (z-scored and in data units), the
    fit, the window counts, the parameters and what inference needs."""
    fit = trained.fit
    return {
        **trained.test,
        "metric_units": METRIC_UNITS,
        "original_units": (None if trained.by_channel is None else original_units(
            channels=data.channels, scaler=data.scaler, by_channel=trained.by_channel)),
        "val_loss": fit.best_val_loss,
        "best_epoch": fit.best_epoch,
        "epochs": trained.trainer.config.epochs,
        "diverged_epoch": fit.diverged_epoch,
        "seconds_per_epoch": fit.seconds_per_epoch,
        "windows": {"train": len(data.train), "val": len(data.val), "test": len(data.test),
                    "channels": data.n_channels},
        "params": {**trained.model.parameter_counts(), "paper": dict(PAPER_PARAMETERS)},
        "inference": InferenceRecord.from_data(data, keep_scaler=True).to_json(),
    }




def _feature_counts(model: LDPTForecaster) -> dict:
    """How many tokens went through the channel in this process, and how many had no
    direction (encoded as the uniform superposition)."""
    if model.features is None:
        return {}
    stats = model.features.stats
    return {"quantum_features": {"tokens": stats.n_states, "zero_norm_tokens": stats.n_zero_norm,
                                 "counted": "in this process (a resumed run counts from resume)"}}
