"""What a classifier run is asked to do, checked before anything is computed.

:func:`validate_request` checks every argument of
:func:`qpriv.classification.run.train_classifier` (names the bad value and the valid range) and
returns a :class:`ClassifierRequest`, the frozen record of the validated arguments whose JSON
form (:meth:`ClassifierRequest.to_json`) is what a run writes to ``config.json`` and checks a
resumed run against. The defaults a request fills in (the quantum models' temperature and depth,
the public constants X, B and tau of clipless DP-SGD, ``clip="analytic"``) are here, beside the
checks that need the task's data (:func:`load_checked_task`, :func:`check_batch`) and the run
directory (:func:`check_out_dir`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path

from qpriv.classification.data import (
    ARRAYS,
    DEFAULT_IMAGE_SIZE,
    TASKS,
    ClassificationData,
    load_task,
)
from qpriv.classification.dpsgd import LR_HINT, MAX_LR
from qpriv.errors import (
    ArgumentError,
    InvalidInputError,
    require_in_range,
    require_positive_int,
)
from qpriv.runs.directory import check_out_dir as check_run_dir
from qpriv.runs.layout import CHECKPOINT_FILE, REFERENCE_FILE, RESULT_FILE
from qpriv.threads import check_threads

MODELS = ("mlp", "lipschitz", "quantum", "cnn", "quantum-image")
IMAGE_ONLY = ("cnn", "quantum-image")
QUANTUM = ("quantum", "quantum-image")
DEFAULT_LAYERS = {"quantum": 8, "quantum-image": 28}
"""Default circuit depth: 3 n L angles, so 96 for 4 qubits and 504 for the 6-qubit image
classifier (the paper's "around 500 trainable parameters")."""
ANALYTIC_DEFAULTS = {"input_bound": 16.0, "bias_bound": 1.0}
"""``clip="analytic"``: the input norm X and the bias bound B of
:class:`~qpriv.classification.models.ProjectedLipschitzMLP`. X = 16 was read off the synthetic
task's training inputs (norms 5-26, about 90 % below 16), so this default is a choice made on
the training data outside the guarantee, and a run's claim says so
(:func:`qpriv.classification.privacy.analytic_constants_note`); inputs above X are clipped to
it."""
ANALYTIC_TAU = 2.0
"""The logit temperature of ``clip="analytic"``, chosen together with the SGD base rate
:data:`qpriv.experiments.qml_protocol.CLIPLESS_LR` on the validation share of the training split
(``scripts/choose_clipless.py``: tau 0.5 / 1 / 2 x lr 0.003 ... 0.1, 15 epochs, |B| 64, seed
2024, no noise and eps 1 and 10): the best mean validation accuracy, 0.861, is tau 2 at lr 0.01
(tau 0.5: 0.854 at lr 0.003; tau 1: 0.848 at lr 0.003)."""
DEFAULT_TAU = 0.5
"""The logit temperature of the quantum models."""
MAX_BOUND = 1e6
"""The largest clipping threshold C, input bound X and bias bound B a run takes, and 1 / the
smallest temperature tau. A per-example gradient of norm 1e6 is far beyond any a trained model
meets (C above it clips nothing), and the diagnostics' noise variance, which squares sigma C,
and the analytic bound, which multiplies X and B by 1 / tau through the layers, overflow
float64 far above it (C near 1e154, X near 1e308)."""
DEFAULT_LR = 0.01
"""The learning rate of a run that is given none and tunes none."""


@dataclass(frozen=True)
class ClassifierRequest:
    """The validated arguments of one classifier run (:func:`validate_request` builds it).

    The fields are :func:`~qpriv.classification.run.train_classifier`'s arguments, in its
    order, after the defaults are filled in: ``tau`` (:data:`DEFAULT_TAU`, or
    :data:`ANALYTIC_TAU` for ``clip="analytic"``), ``n_layers`` of a quantum model
    (:data:`DEFAULT_LAYERS`) and, for ``clip="analytic"`` only, ``input_bound`` and
    ``bias_bound`` (:data:`ANALYTIC_DEFAULTS`; None otherwise). Every value is as JSON gives
    it back. ``default_input_bound`` says whether X is the default (the claim's note on the
    constants names where it came from); it is not part of the JSON form.
    """

    task: str
    model: str
    clip: float | str | None
    batch: int
    epochs: int
    seed: int | None
    lr: float
    eps: float | None
    delta: float
    optimizer: str
    preclip_noise: float
    tau: float
    n_layers: int | None
    depolarizing: float
    shots: int | None
    hidden: tuple[int, ...]
    image_size: int
    loader_layers: int
    loader_steps: int
    unclipped_reference: bool
    validation: float | None
    threads: int | None
    input_bound: float | None = None
    bias_bound: float | None = None
    default_input_bound: bool = True

    @property
    def lipschitz(self) -> float | None:
        """The Lipschitz constant of model ``lipschitz`` with a fixed C: C itself (None for
        any other model, and for ``clip="analytic"``, whose MLP is 1-Lipschitz)."""
        if self.model != "lipschitz" or self.clip == "analytic":
            return None
        return float(self.clip)

    def to_json(self) -> dict:
        """The request as ``config.json`` holds it: every field in order, ``hidden`` as a
        list, ``input_bound`` and ``bias_bound`` only with ``clip="analytic"``."""
        form = {f.name: getattr(self, f.name) for f in fields(self)
                if f.name != "default_input_bound"}
        form["hidden"] = list(self.hidden)
        if self.clip != "analytic":
            del form["input_bound"], form["bias_bound"]
        return form

    @classmethod
    def from_json(cls, form: Mapping) -> ClassifierRequest:
        """The request a run recorded (:meth:`to_json`'s form, as result.json's ``request``
        holds it; keys a later version added take the values earlier runs ran with).

        Raises:
            InvalidInputError: a setting is missing (not a classifier run's request).
        """
        names = {f.name for f in fields(cls)} - {"default_input_bound"}
        known = {key: value for key, value in form.items() if key in names}
        known["hidden"] = tuple(known.get("hidden") or ())
        try:
            return cls(**known)
        except TypeError as exc:
            raise InvalidInputError(f"a classifier run's request lacks a setting ({exc}): not "
                                    "what qpriv train-classifier writes") from None


def validate_request(
    *, task: str, model: str, clip: float | str | None, batch: int, epochs: int,
    seed: int | None, lr: float, eps: float | None, delta: float, optimizer: str,
    preclip_noise: float, tau: float | None, n_layers: int | None, depolarizing: float,
    shots: int | None, hidden: Sequence[int], image_size: int, loader_layers: int,
    loader_steps: int, unclipped_reference: bool, validation: float | None,
    threads: int | None, input_bound: float | None, bias_bound: float | None,
) -> ClassifierRequest:
    """Check every argument of :func:`~qpriv.classification.run.train_classifier` (those
    that need no data) and return them as a :class:`ClassifierRequest`.

    Raises:
        InvalidInputError: the first bad argument, named with its valid range (an
            :class:`~qpriv.errors.ArgumentError` where arguments do not go together).
    """
    hidden = tuple(hidden)
    _check_choices(task=task, model=model, clip=clip, eps=eps)
    require_positive_int("batch", batch)
    require_positive_int("epochs", epochs)
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise InvalidInputError(f"seed = {seed!r} is not an integer (or None for a secret one)")
    require_in_range("lr", lr, low=0.0, high=MAX_LR, hint=LR_HINT)
    if eps is not None:
        require_in_range("eps", eps, low=0.0, hint="a privacy budget must be > 0")
    require_in_range("delta", delta, low=0.0, high=1.0, high_inclusive=False,
                     hint="delta is a probability in (0, 1), typically 1e-5")
    require_in_range("preclip_noise", preclip_noise, low=0.0, low_inclusive=True)
    if tau is None:
        tau = ANALYTIC_TAU if clip == "analytic" else DEFAULT_TAU
    require_in_range("tau", tau, low=1.0 / MAX_BOUND, low_inclusive=True,
                     hint="the logits are <Z_k> / tau: give tau such as 0.1-10")
    if n_layers is not None:
        require_positive_int("n_layers", n_layers)
    require_in_range("depolarizing", depolarizing, low=0.0, high=1.0, low_inclusive=True)
    if shots is not None:
        require_positive_int("shots", shots)
    for width in hidden:
        require_positive_int("hidden width", width)
    require_positive_int("image_size", image_size)
    require_positive_int("loader_layers", loader_layers)
    require_positive_int("loader_steps", loader_steps)
    check_threads(threads)
    if validation is not None:
        require_in_range("validation", validation, low=0.0, high=1.0, high_inclusive=False,
                         hint="the share of the training split held out, e.g. 0.2")
    if optimizer not in ("adam", "sgd"):
        raise ArgumentError(f"{{optimizer}} = {ArgumentError.literal(repr(optimizer))} "
                            "is not one of ('adam', 'sgd')")
    bounds = _analytic_bounds(clip=clip, input_bound=input_bound, bias_bound=bias_bound,
                              preclip_noise=preclip_noise)
    if n_layers is None and model in QUANTUM:
        n_layers = DEFAULT_LAYERS[model]
    asked = {
        "task": task, "model": model, "clip": clip, "batch": batch, "epochs": epochs,
        "seed": seed, "lr": lr, "eps": eps, "delta": delta, "optimizer": optimizer,
        "preclip_noise": preclip_noise, "tau": tau, "n_layers": n_layers,
        "depolarizing": depolarizing, "shots": shots, "hidden": list(hidden),
        "image_size": image_size, "loader_layers": loader_layers,
        "loader_steps": loader_steps, "unclipped_reference": unclipped_reference,
        "validation": validation, "threads": threads, **bounds,
    }
    as_json = json.loads(json.dumps(asked))
    return ClassifierRequest(**{**as_json, "hidden": tuple(as_json["hidden"])},
                             default_input_bound=input_bound is None)


def _check_choices(*, task: str, model: str, clip: float | str | None,
                   eps: float | None) -> None:
    """The task, the model and the clipping, each and together."""
    if not isinstance(task, str) or not (task in ("synthetic", "digits", ARRAYS)
                                         or task.startswith("folder:")):
        raise ArgumentError(f"{{task}} = {ArgumentError.literal(repr(task))} is not one of "
                            f"{TASKS}")
    if model not in MODELS:
        raise ArgumentError(f"{{model}} = {ArgumentError.literal(repr(model))} is not one of "
                            f"{MODELS}")
    if isinstance(clip, str):
        if clip not in ("structural", "analytic"):
            raise ArgumentError(
                f"{{clip}} = {ArgumentError.literal(repr(clip))} is not valid: give a number "
                "> 0, 'structural', 'analytic' or None"
            )
        if clip == "analytic" and model != "lipschitz":
            raise InvalidInputError(
                f"clip = 'analytic' needs model 'lipschitz' (the projected 1-Lipschitz MLP "
                f"whose gradients are bounded by construction); {model!r} has no such bound"
            )
        if clip == "structural" and model not in QUANTUM:
            raise InvalidInputError(
                f"clip = 'structural' needs a quantum model ({QUANTUM}): Theorem 3.2 bounds "
                f"circuit gradients; {model!r} has no such bound"
            )
    elif clip is not None:
        require_in_range("clip", clip, low=0.0, high=MAX_BOUND,
                         hint="the clipping threshold C is > 0, and one above 1e6 clips "
                              "nothing a model meets: give C such as 0.1-10")
    if clip is None and eps is not None:
        raise ArgumentError("a private run ({eps} given) needs a clipping threshold: give "
                            "{clip} a number C > 0, or 'analytic' / 'structural' where the "
                            "model has a gradient bound")
    if clip is None and model == "lipschitz":
        raise ArgumentError("model 'lipschitz' takes its Lipschitz constant from {clip}: give "
                            "a number C > 0, or 'analytic' for clipless DP-SGD")


def _analytic_bounds(*, clip: float | str | None, input_bound: float | None,
                     bias_bound: float | None, preclip_noise: float) -> dict[str, float]:
    """``input_bound`` and ``bias_bound`` of ``clip="analytic"``, defaults filled in (empty
    for any other clip, which must be given neither)."""
    given = {"input_bound": input_bound, "bias_bound": bias_bound}
    bounds = {}
    if clip == "analytic":
        for key, default in ANALYTIC_DEFAULTS.items():
            value = default if given[key] is None else given[key]
            bounds[key] = require_in_range(
                key, value, low=0.0, low_inclusive=key == "bias_bound", high=MAX_BOUND,
                hint="a public norm bound of clip 'analytic', at most 1e6")
    elif any(v is not None for v in given.values()):
        raise ArgumentError("{input_bound} and {bias_bound} set the bound of {clip}; a "
                            f"clip of {clip!r} takes neither: leave them out",
                            values={"clip": "analytic"})
    if clip == "analytic" and preclip_noise:
        raise ArgumentError(
            f"{{preclip_noise}} = {preclip_noise!r} would break the bound of "
            "{clip} (noised gradients are unbounded): leave it at 0",
            values={"clip": "analytic"})
    return bounds


def check_out_dir(out_dir: str | Path | None, *, resume: bool = False) -> Path | None:
    """``out_dir`` as a Path if a classifier run may write there (None stays None): the rules of
    :func:`qpriv.runs.directory.check_out_dir`, a run marked by its result or checkpoints.

    Raises:
        InvalidInputError: it is a file or lies inside one; it already holds a run and
            ``resume`` is False; ``resume`` without an ``out_dir``, with one that does not
            exist or is empty, or with one that holds a run but no ``config.json`` (its
            settings cannot be checked).
    """
    return check_run_dir(out_dir, resume=resume, marks=(RESULT_FILE, CHECKPOINT_FILE,
                                                        REFERENCE_FILE))


def check_batch(task: str | ClassificationData, batch: int, *,
                image_size: int = DEFAULT_IMAGE_SIZE) -> None:
    """Refuse an expected ``batch`` above ``task``'s training set (what
    :func:`~qpriv.classification.run.train_classifier` refuses once it has loaded the task),
    for a caller that must know before it trains anything else, such as the learning-rate
    tuning's trials. ``task`` is a task's name or the data itself (arrays given to fit)."""
    data = task if isinstance(task, ClassificationData) else load_task(task,
                                                                       image_size=image_size)
    _check_batch(batch, task=data.name, n_train=len(data.y_train))


def load_checked_task(request: ClassifierRequest,
                      given: ClassificationData | None = None) -> ClassificationData:
    """The data of the request's task (``given``: arrays given to fit, task ``arrays``),
    checked against the request: the batch fits the training set (with ``validation``, the
    split held out of it is returned instead, and a trial on it takes the batch of the run it
    tunes, clamped to the split's size), and the model takes this kind of input (images, and a
    power-of-two side for ``quantum-image``).

    Raises:
        InvalidInputError: task ``arrays`` without the arrays, or a check above fails.
    """
    if (request.task == ARRAYS) != (given is not None):
        raise InvalidInputError(
            f"task = {ARRAYS!r} names arrays given to qpriv.DPSGDClassifier.fit(X, y), and "
            f"only them; name a task ({', '.join(TASKS)}) or fit on the arrays")
    data = given if given is not None else load_task(request.task,
                                                     image_size=request.image_size)
    if request.validation is None:
        _check_batch(request.batch, task=request.task, n_train=len(data.y_train))
    else:
        data = data.validation_split(request.validation)
    _check_model_for_task(request.model, data)
    return data


def _check_batch(batch: int, *, task: str, n_train: int) -> None:
    """Refuse an expected batch above the training set's size: every step would take the whole
    set, not the batch asked for (and the accountant's sampling rate would exceed 1)."""
    if batch > n_train:
        raise ArgumentError(f"{{batch}} = {batch} is outside the valid range [1, {n_train}]: "
                            f"task {ArgumentError.literal(repr(task))} has {n_train} training "
                            f"examples; give {{batch}} {n_train} or less")


def _check_model_for_task(model: str, data: ClassificationData) -> None:
    if model in IMAGE_ONLY and data.kind != "image":
        raise InvalidInputError(
            f"model {model!r} needs an image task (digits or folder:PATH); {data.name!r} is "
            "tabular"
        )
    if model == "quantum-image":
        side = data.x_train.shape[-1]
        if data.x_train.shape[-2] != side or side < 2 or side & (side - 1):
            raise InvalidInputError(
                f"model 'quantum-image' needs square images with a power-of-two side; got "
                f"{tuple(data.x_train.shape[1:])} (set image_size to 4, 8, 16, ...)"
            )
