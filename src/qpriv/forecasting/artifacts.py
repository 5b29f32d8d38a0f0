"""A finished forecasting run, read back from its directory to forecast, attack or audit it.

:func:`qpriv.forecasting.run.run_forecast` leaves ``config.json`` (the request), the model
(``best.pt``, the best-validation weights of the LDPT backbone, or ``linear.npz``, the kernel
of a linear forecaster) and, once it has finished, ``result.json``. :func:`load_run` turns
such a directory into a :class:`LoadedRun` (the backbone: the model with its best weights, its
:class:`~qpriv.forecasting.config.ModelConfig`) or a :class:`LinearRun` (the linear family),
each with the request and the result, the data splits the run used, reloaded the same way with
the same window limits, and forecasts of new data
(:class:`~qpriv.forecasting.inference.ForecastingRun`)::

    from qpriv.forecasting.artifacts import load_run

    run = load_run("runs/ldpt-eps0.1")
    data = run.data()                  # the run's train / val / test windows
    run.model(data.test.windows([0])[0]).shape
    run.forecast("new.csv")            # the next H values, in the data's own units

The attacks and audits read the backbone's weights: they load with :func:`load_backbone_run`,
which refuses a linear run. Every refusal is an :class:`~qpriv.errors.InvalidInputError` that
says why and what to do.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch

from qpriv.errors import InvalidInputError
from qpriv.forecasting.config import ModelConfig
from qpriv.forecasting.csv_input import CsvFormat
from qpriv.forecasting.datasets import DATASETS, file_sha256
from qpriv.forecasting.inference import ForecastingRun
from qpriv.forecasting.linear import LinearForecaster, LinearSpec
from qpriv.forecasting.methods import LINEAR, replace_config
from qpriv.forecasting.model import LDPTForecaster
from qpriv.forecasting.records import ForecastRequest, ForecastResult
from qpriv.forecasting.run import ADDED_REQUEST_KEYS
from qpriv.forecasting.series import DATAFRAME
from qpriv.forecasting.windows import ForecastData, load_forecasting_data
from qpriv.privacy.claims import Kind
from qpriv.runs.files import load_checkpoint, read_json_object
from qpriv.runs.layout import BEST_FILE, CONFIG_FILE, LINEAR_MODEL_FILE, RESULT_FILE
from qpriv.training.evaluation import seeded_noise

RERUN = "re-run the training into a fresh directory"

#: Keys of config.json that :func:`load_run` needs to rebuild the model and the data.
_REQUEST_KEYS = ("dataset", "source", "channels", "seq_len", "horizon", "method",
                 "max_train_windows", "max_eval_windows", "model")
#: Keys of result.json that the attacks and audits read.
_RESULT_KEYS = ("method", "privacy", "eps_per_pass", "windows", "best_epoch")


class _FinishedRun(ForecastingRun):
    """What both families share: the run's data, reloaded as the run loaded it."""

    def data(self, *, limit_eval: bool = True) -> ForecastData:
        """The run's data, loaded as the run loaded it (same file, channels, L, H and window
        limits). ``limit_eval=False`` keeps every validation and test window (e.g. to draw
        non-members for a membership attack from the whole test split); the training windows
        are always exactly the run's.

        Raises:
            InvalidInputError: the data cannot be found, or it no longer gives the run's
                window counts (a different file).
        """
        return _load_data(self.request, self.result, run_dir=self.run_dir,
                          data_dir=self.data_dir, limit_eval=limit_eval)


@dataclass(frozen=True)
class LoadedRun(_FinishedRun):
    """A finished run of the LDPT backbone: its files as read, and the model with its
    best-validation weights.

    ``request`` is config.json and ``result`` result.json, typed
    (:mod:`qpriv.forecasting.records`); ``config`` the model's :class:`ModelConfig`; ``model`` an
    :class:`LDPTForecaster` on the CPU in eval mode holding the weights of ``best.pt`` (epoch
    ``best_epoch``). ``data_dir`` is where the data is (the only place looked at; None: the path
    the run recorded where that file exists, else ``$QPRIV_DATA_DIR`` and the user cache).
    """

    run_dir: Path
    request: ForecastRequest
    result: ForecastResult
    config: ModelConfig
    model: LDPTForecaster
    best_epoch: int
    data_dir: Path | None = None

    @property
    def method(self) -> str:
        """The method name (``ldpt``, ``classical``, ...)."""
        return self.result.method

    @property
    def eps_per_pass(self) -> float | None:
        """The per-pass budget the run claims (local eps-QDP per pass, ``paper``), or None."""
        return self.result.eps_per_pass

    @property
    def claims_local_qdp(self) -> bool:
        """Whether the run claims local eps-QDP per pass through a calibrated channel."""
        return (self.result.privacy == Kind.LOCAL_QDP and self.eps_per_pass is not None
                and isinstance(self.result.calibration, dict))

    @property
    def noisy(self) -> bool:
        """Whether the model draws noise on every pass (shots, injections, input noise)."""
        return self.config.noisy_inference

    def predict_window(self, window: np.ndarray, *, passes: int, seed: int) -> np.ndarray:
        """``passes`` forecasts (passes, H, C) of the look-back ``window`` (L, C), in the
        data's own units: z-scored with the run's scaler, through the model as it is tested
        (eval mode, pass m's noise seeded by ``seed + m``), and back."""
        scaler = self.inference.scaler
        if scaler is None:
            raise InvalidInputError(f"run {self.run_dir}'s inference record has no scaler; "
                                    "re-run the training into a fresh directory")
        x = torch.as_tensor(scaler.transform(np.asarray(window, dtype=np.float64))[None],
                            dtype=torch.float32)
        draws = []
        with torch.no_grad():
            for m in range(passes):
                with seeded_noise(self.model, seed + m):
                    draws.append(self.model(x)[0].double().numpy())
        return scaler.inverse_transform(np.stack(draws))

    def model_with_noise(self, *, p: float, sigma: float) -> LDPTForecaster:
        """A copy of the trained model whose channel runs at ``p`` and whose injections at
        ``sigma`` (every other setting and every weight unchanged), in eval mode on the CPU."""
        config = replace_config(self.config, p=p, sigma=sigma)
        model = LDPTForecaster(config)
        model.load_state_dict(self.model.state_dict())
        return model.eval()


@dataclass(frozen=True)
class LinearRun(_FinishedRun):
    """A finished run of a linear forecaster (``public``, ``ridge``, ``dp-linear``,
    ``dpsgd-linear``): its files as read, and the kernel as a
    :class:`~qpriv.forecasting.linear.LinearForecaster`.

    The kernel is equivariant to per-channel affine maps, so it forecasts the data's own units
    directly, as it forecast the z-scored test split: no scaler is stored or used.
    """

    run_dir: Path
    request: ForecastRequest
    result: ForecastResult
    model: LinearForecaster
    data_dir: Path | None = None
    keeps_scaler = False

    @property
    def noisy(self) -> bool:
        """A linear forecast draws no noise: False."""
        return False

    def predict_window(self, window: np.ndarray, *, passes: int, seed: int) -> np.ndarray:
        """The kernel's forecast (1, H, C) of ``window`` (L, C), in its own units (``passes``
        and ``seed`` have no effect)."""
        return self.model.predict(np.asarray(window, dtype=np.float64)[None])


def load_run(run_dir: str | Path, *,
             data_dir: str | Path | None = None) -> LoadedRun | LinearRun:
    """Read the finished run in ``run_dir`` (written by ``run_forecast(out_dir=...)``): a
    :class:`LoadedRun` for the LDPT backbone, a :class:`LinearRun` for the linear family; both
    forecast new data (:meth:`~qpriv.forecasting.inference.ForecastingRun.forecast`).

    Examples:
        Seconds: a tiny run on 64 windows of ETTh1, found through ``QPRIV_DATA_DIR``:

        >>> import tempfile
        >>> from qpriv.forecasting.run import run_forecast
        >>> with tempfile.TemporaryDirectory() as out:
        ...     _ = run_forecast(method="classical", seq_len=64, epochs=1, max_train_windows=64,
        ...                      max_eval_windows=32, progress=False, out_dir=out,
        ...                      overrides={"d_model": 16, "n_heads": 2, "d_ff": 32})
        ...     run = load_run(out)
        ...     frame = run.forecast(run.data().source)   # after the file's last row
        >>> run.method, run.best_epoch
        ('classical', 1)
        >>> frame.shape, str(frame.index[0]), frame.attrs["new_data"]
        ((24, 7), '2018-06-26 20:00:00', False)

    Args:
        run_dir: the run's directory (``qpriv train --out DIR``).
        data_dir: the dataset's file or a directory holding it, searched before the path the
            run recorded (for a run moved from another machine).

    Raises:
        InvalidInputError: ``run_dir`` is missing or not a directory; it has no config.json (not
            a run), no result.json (not finished: resume it), or no best.pt (linear.npz); a
            file is unreadable or not what run_forecast writes; the weights do not fit the
            recorded model; the run diverged before it had a model. The data is checked only
            when :meth:`LoadedRun.data` is called.
    """
    path, request, parsed = _open(run_dir)
    if _is_linear(request):
        return _load_linear(path, request, parsed,
                            data_dir=None if data_dir is None else Path(data_dir).expanduser())
    return _load_backbone(path, request, parsed, data_dir=data_dir)


def load_backbone_run(run_dir: str | Path, *, data_dir: str | Path | None = None) -> LoadedRun:
    """:func:`load_run` for the attacks and audits, which read the LDPT backbone's weights.

    Raises:
        InvalidInputError: as :func:`load_run`, and for a run of the linear family.
    """
    path, request, parsed = _open(run_dir)
    if _is_linear(request):
        raise InvalidInputError(
            f"{path} is a run of the linear forecaster {request['method']!r}, saved as one "
            f"kernel ({LINEAR_MODEL_FILE}): this reads runs of the LDPT backbone (best.pt)")
    return _load_backbone(path, request, parsed, data_dir=data_dir)


def _is_linear(request: dict) -> bool:
    return isinstance(request.get("model"), dict) and request["model"].get("family") == LINEAR


def _released_request(path: Path) -> dict | None:
    """The settings of a released model (``result.json`` with the weights, ``linear.npz`` of
    a linear forecaster or ``best.pt`` of the LDPT backbone, shared without ``config.json``, as
    every claim's notes advise), rebuilt from its result: what a forecast needs (method,
    shapes, channels, the model's settings; the backbone's scaler is in the result's
    ``inference``). The training file's path and digest are not in it, so a forecast is given
    its data and a report its test data (``--data-dir``). None where the folder is not one."""
    if not (path / RESULT_FILE).is_file():
        return None
    weights = LINEAR_MODEL_FILE if (path / LINEAR_MODEL_FILE).is_file() else \
        BEST_FILE if (path / BEST_FILE).is_file() else None
    if weights is None:
        return None
    result = _read_json(path / RESULT_FILE, keys=_RESULT_KEYS)
    inference = result.get("inference") if isinstance(result.get("inference"), dict) else {}
    model = result.get("model")
    linear = isinstance(model, dict) and model.get("family") == LINEAR
    windows = result.get("windows") if isinstance(result.get("windows"), dict) else {}
    if not (isinstance(model, dict) and inference and linear == (weights == LINEAR_MODEL_FILE)):
        return None
    return {**ADDED_REQUEST_KEYS, "method": result["method"],
            "dataset": result.get("dataset", ""), "source": "", "source_sha256": None,
            "channels": inference.get("channels"), "seq_len": result.get("seq_len"),
            "horizon": result.get("horizon"), "seed": result.get("seed"), "model": model,
            "eps": _claimed(result, "eps") or _claimed(result, "eps_per_pass"),
            "eps_per_pass": _claimed(result, "eps_per_pass"), "unit": result.get("unit"),
            # the windows it used: with a limit, the limit; without one, every window, which
            # a limit of that count keeps too (the loader spaces a limited set evenly)
            "max_train_windows": windows.get("train"), "max_eval_windows": windows.get("test")}


def _claimed(result: dict, key: str) -> float | None:
    """The value of the claim ``result[key]`` (None where the run makes none)."""
    claim = result.get(key)
    return claim.get("value") if isinstance(claim, dict) else None


def _open(run_dir: str | Path) -> tuple[Path, dict, ForecastRequest]:
    """The run directory and its config.json, as read and as parsed (every field's type
    checked), once it is known to hold a finished run."""
    path = Path(run_dir).expanduser()
    if not path.exists():
        raise InvalidInputError(f"run directory {path} does not exist")
    if not path.is_dir():
        raise InvalidInputError(f"run directory {path} is not a directory")
    if not (path / CONFIG_FILE).is_file():
        released = _released_request(path)
        if released is None:
            raise InvalidInputError(
                f"{path} is not a qpriv run: it has no {CONFIG_FILE}; pass the directory given "
                "to `qpriv train --out DIR` (or, for a released model, a folder with its "
                f"{RESULT_FILE} and its weights, {LINEAR_MODEL_FILE} or {BEST_FILE})")
        return path, released, ForecastRequest.from_json(released)
    request = {**ADDED_REQUEST_KEYS, **_read_json(path / CONFIG_FILE, keys=_REQUEST_KEYS)}
    try:
        parsed = ForecastRequest.from_json(request)  # every field's type, before any is used
    except InvalidInputError as exc:
        raise InvalidInputError(f"{path}: {exc}") from exc
    if not (path / RESULT_FILE).is_file():
        raise InvalidInputError(
            f"{path} is not a finished run: it has {CONFIG_FILE} but no {RESULT_FILE} (training "
            f"stopped before the end); resume it with `qpriv train --method "
            f"{request['method']} ... --out {path} --resume` (the same settings as before), "
            "then use it"
        )
    return path, request, parsed


def _load_linear(path: Path, request: dict, parsed: ForecastRequest, *,
                 data_dir: Path | None) -> LinearRun:
    result = _read_json(path / RESULT_FILE, keys=_RESULT_KEYS)
    _same_run(path, request, result)
    model_file = path / LINEAR_MODEL_FILE
    if not model_file.is_file():
        raise InvalidInputError(f"{path} has no {LINEAR_MODEL_FILE} (the fitted kernel); the run "
                                f"directory is incomplete. {RERUN[0].upper()}{RERUN[1:]}")
    try:
        with np.load(model_file, allow_pickle=False) as stored:
            kernel = np.asarray(stored["kernel"], dtype=np.float64)
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
        raise InvalidInputError(f"cannot read {model_file} ({exc}): it is damaged or not a "
                                f"kernel; {RERUN}") from exc
    shape = (request["horizon"], request["seq_len"])
    if kernel.shape != shape:
        raise InvalidInputError(f"{model_file} holds a kernel of shape {kernel.shape}, not the "
                                f"run's (H, L) = {shape}; the directory mixes two runs")
    if not np.isfinite(kernel).all():
        raise InvalidInputError(f"{model_file} holds a kernel with non-finite entries (NaN or "
                                f"inf), which no fit writes: it is damaged; {RERUN}")
    try:
        # the fitted design (a private selection chooses it at fit time); runs written before
        # block-mean targets had orthonormal ones and no output_scale
        fitted = result.get("model") if isinstance(result.get("model"), dict) else {}
        stored = fitted.get("spec") or request["model"].get("spec", {})
        spec = LinearSpec(**{"output_scale": "orthonormal", **stored})
    except (TypeError, InvalidInputError) as exc:
        raise InvalidInputError(f"{path / CONFIG_FILE}: the linear model's settings are not a "
                                f"LinearSpec ({exc}); {RERUN}") from exc
    model_entry = result.get("model") if isinstance(result.get("model"), dict) else {}
    model = LinearForecaster(kernel=kernel, spec=spec,
                             name=str(model_entry.get("name", request["method"])),
                             details=dict(result.get("fit") or {}))
    return LinearRun(run_dir=path, request=parsed,
                     result=ForecastResult.from_json(result), model=model, data_dir=data_dir)


def _load_backbone(path: Path, request: dict, parsed: ForecastRequest, *,
                   data_dir: str | Path | None) -> LoadedRun:
    result = _read_json(path / RESULT_FILE, keys=_RESULT_KEYS)
    _same_run(path, request, result)
    config = _model_config(request["model"], where=path / CONFIG_FILE)
    if isinstance(result.get("model"), dict) and result["model"] != request["model"]:
        raise InvalidInputError(
            f"{path}: the model settings in {RESULT_FILE} differ from those in {CONFIG_FILE}; "
            "the directory mixes two runs. Re-run it into a fresh directory"
        )
    if result.get("diverged_epoch") and not (path / BEST_FILE).is_file():
        raise InvalidInputError(
            f"{path}: training diverged at epoch {result['diverged_epoch']} (loss not finite) "
            f"before any epoch had a finite validation loss, so the run has no model ({BEST_FILE}) "
            "to attack or audit"
        )
    best = _read_best(path / BEST_FILE)
    model = LDPTForecaster(config)
    try:
        model.load_state_dict(best["model"])
    except RuntimeError as exc:
        raise InvalidInputError(
            f"{path / BEST_FILE}: the weights do not fit the model recorded in {CONFIG_FILE} "
            f"({str(exc).splitlines()[0]}); the directory mixes two runs"
        ) from exc
    model.eval()
    return LoadedRun(run_dir=path, request=parsed,
                     result=ForecastResult.from_json(result), config=config, model=model,
                     best_epoch=int(best.get("epoch", result["best_epoch"])),
                     data_dir=None if data_dir is None else Path(data_dir).expanduser())


def _same_run(path: Path, request: dict, result: dict) -> None:
    """Refuse a directory whose config.json and result.json describe different runs (a file
    copied in from another run, or edited by hand)."""
    windows = result.get("windows") if isinstance(result.get("windows"), dict) else {}
    pairs = [("method", request["method"], result.get("method")),
             ("dataset", request["dataset"], result.get("dataset")),
             ("horizon", request["horizon"], result.get("horizon")),
             ("seq_len", request["seq_len"], result.get("seq_len")),
             ("channels", len(request["channels"]), windows.get("channels"))]
    differ = [f"{key} {wanted!r} vs {found!r}" for key, wanted, found in pairs
              if found is not None and found != wanted]
    if differ:
        raise InvalidInputError(
            f"{path}: {CONFIG_FILE} and {RESULT_FILE} describe different runs "
            f"({'; '.join(differ)}); the directory mixes two runs. {RERUN[0].upper()}{RERUN[1:]}")


CLASSIFIER_KEYS = frozenset({"task", "model", "clip"})
"""Keys of a ``train-classifier`` run's settings that a forecasting run's lack."""


def _read_json(path: Path, *, keys: tuple[str, ...]) -> dict:
    data = read_json_object(path, fix=RERUN)
    missing = [k for k in keys if k not in data]
    if missing and data.keys() >= CLASSIFIER_KEYS:
        raise InvalidInputError(
            f"{path.parent} holds a classifier run (qpriv train-classifier), not a forecasting "
            "run; give the folder of a forecasting run (qpriv train --out DIR)")
    if missing:
        raise InvalidInputError(
            f"{path} lacks {missing}: it was not written by this version of qpriv's "
            "run_forecast. Re-run the training into a fresh directory"
        )
    return data


def _model_config(settings: Any, *, where: Path) -> ModelConfig:
    known = {f.name for f in fields(ModelConfig)}
    if not isinstance(settings, dict) or set(settings) - known:
        unknown = sorted(set(settings) - known) if isinstance(settings, dict) else settings
        raise InvalidInputError(
            f"{where}: the model settings are not a ModelConfig (unknown: {unknown}); "
            "re-run the training into a fresh directory"
        )
    try:
        return ModelConfig(**settings)
    except InvalidInputError as exc:
        raise InvalidInputError(f"{where}: invalid model settings: {exc}") from exc


def _read_best(path: Path) -> dict:
    if not path.is_file():
        raise InvalidInputError(
            f"{path.parent} has no {BEST_FILE} (the best-validation weights); the run directory is "
            "incomplete. Re-run the training into a fresh directory"
        )
    best = load_checkpoint(path, fix=RERUN)
    if not isinstance(best.get("model"), dict):
        raise InvalidInputError(f"{path} holds no model weights (no 'model' state dict)")
    return best


def _load_data(request: ForecastRequest, result: ForecastResult, *, run_dir: Path,
               data_dir: Path | None, limit_eval: bool) -> ForecastData:
    source = Path(request.source)
    name = request.dataset
    kwargs = {
        "columns": list(request.channels),
        "seq_len": request.seq_len,
        "horizon": request.horizon,
        "max_train_windows": request.max_train_windows,
        "max_eval_windows": request.max_eval_windows if limit_eval else None,
    }
    # a user CSV has its sha256 recorded, a named dataset none: a CSV that happens to be
    # called ETTh1.csv is still read as a CSV, with the split it was trained on
    is_csv = request.source_sha256 is not None or name not in DATASETS
    try:
        if not is_csv:
            # the file the run recorded where it is still there (a run made elsewhere records
            # a path this machine may lack: then the usual places, checked by sha256 anyway)
            where = data_dir if data_dir is not None else source if source.is_file() else None
            data = load_forecasting_data(name, data_dir=where, allow_download=False, **kwargs)
        else:
            csv = source
            if data_dir is not None:
                csv = data_dir / source.name if data_dir.is_dir() else data_dir
            if not str(request.source):  # released, or trained on a DataFrame: no file
                if data_dir is None:
                    what = ("trained on a DataFrame" if request.dataset == DATAFRAME else
                            "a released model")
                    raise InvalidInputError(
                        f"it is {what}, which records no training file; pass its data as a "
                        "file with data_dir= / --data-dir")
            elif not csv.is_file():
                raise InvalidInputError(
                    f"its CSV {csv} cannot be found; pass the file (or the directory holding "
                    f"{source.name}) with data_dir= / --data-dir"
                )
            recorded = request.source_sha256  # None: a run from before it was recorded
            if recorded is not None and file_sha256(csv) != recorded:
                raise InvalidInputError(
                    f"its CSV {csv} is not the file the run trained on (its sha256 differs from "
                    f"the recorded {recorded[:12]}...); pass that file with data_dir= / "
                    "--data-dir"
                )
            fmt = CsvFormat.from_dict(request.raw.get("csv_format"))  # as it was trained
            data = load_forecasting_data(None, csv=csv, csv_format=fmt, **kwargs)
    except InvalidInputError as exc:
        raise InvalidInputError(f"cannot load the data of run {run_dir}: {exc}") from exc
    expected = result.windows
    splits = ("train", "val", "test") if limit_eval else ("train",)
    found = {split: len(getattr(data, split)) for split in splits}
    differ = {s: (n, expected.get(s)) for s, n in found.items() if n != expected.get(s)}
    if differ or data.n_channels != expected.get("channels", data.n_channels):
        raise InvalidInputError(
            f"the data found for run {run_dir} ({data.source}) does not give the run's windows "
            f"(found vs recorded: {differ or 'channels differ'}): it is a different file. Pass "
            "the file the run used with data_dir= / --data-dir"
        )
    return data
