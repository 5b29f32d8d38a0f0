"""The front door of a private classifier run: task -> model -> DP-SGD -> diagnostics -> JSON.

Example::

    from qpriv.classification.run import train_classifier

    result = train_classifier(task="synthetic", model="quantum", clip=1.5, batch=64, eps=10.0,
                              epochs=20, seed=2024, lr=0.03)
    result["accuracy"], result["eps"]["value"], result["final_diagnostics"]["alignment"]

``eps=None`` trains without noise: clipping only (the paper's Figure 2 setting) or, with
``clip=None``, plain unclipped training. ``clip="structural"`` (quantum models) uses Theorem
3.2's C = 2 G / tau, which never clips. ``clip="analytic"`` (``lipschitz``) is clipless DP-SGD:
the projected 1-Lipschitz MLP (:class:`qpriv.classification.models.ProjectedLipschitzMLP`)
whose every per-example gradient is bounded by Delta, the noise calibrated to Delta.

Every input is validated before anything is computed. With ``out_dir`` the run writes
``config.json`` (what was asked) first and ``result.json`` at the end, atomically.
"""

from __future__ import annotations

import json
import math
import platform
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import torch
from torch import nn

from qpriv.classification.bounds import (
    clipping_bias_bound,
    cross_entropy_lipschitz,
    structural_clip,
)
from qpriv.classification.data import DEFAULT_IMAGE_SIZE, TASKS, ClassificationData, load_task
from qpriv.classification.dpsgd import LR_HINT, MAX_LR, DPSGDConfig, train_dpsgd
from qpriv.classification.loader import fit_loaders
from qpriv.classification.models import (
    GroupNormCNN,
    LipschitzMLP,
    ProjectedLipschitzMLP,
    QuantumClassifier,
    TanhMLP,
    count_parameters,
)
from qpriv.errors import (
    ArgumentError,
    InvalidInputError,
    require_in_range,
    require_positive_int,
)
from qpriv.privacy.claims import COVERS_WEIGHTS, Accounting, Kind, PrivacyClaim, Unit
from qpriv.privacy.dpsgd_accounting import ACCOUNTANTS, dpsgd_epsilon, noise_multiplier_for
from qpriv.privacy.randomness import randomness_note, run_seed
from qpriv.quantum.states import amplitude_encode
from qpriv.runs.directory import check_out_dir as check_run_dir
from qpriv.runs.directory import open_run
from qpriv.runs.files import atomic_write_json
from qpriv.runs.layout import CHECKPOINT_FILE, REFERENCE_FILE, RESULT_FILE
from qpriv.threads import check_threads, torch_threads
from qpriv.training.seeding import derive_seed, seed_everything
from qpriv.training.trainer import DIVERGENCE_NOTE, diverged_epoch

MODELS = ("mlp", "lipschitz", "quantum", "cnn", "quantum-image")
IMAGE_ONLY = ("cnn", "quantum-image")
QUANTUM = ("quantum", "quantum-image")
DEFAULT_LAYERS = {"quantum": 8, "quantum-image": 28}
"""Default circuit depth: 3 n L angles, so 96 for 4 qubits and 504 for the 6-qubit image
classifier (the paper's "around 500 trainable parameters")."""
ANALYTIC_DEFAULTS = {"input_bound": 16.0, "bias_bound": 1.0}
"""``clip="analytic"``: the input norm X and the bias bound B of :class:`ProjectedLipschitzMLP`.
X = 16 was read off the synthetic task's training inputs (norms 5-26, about 90 % below 16), so
this default is a choice made on the training data outside the guarantee, and a run's claim says
so (:func:`analytic_constants_note`); inputs above X are clipped to it."""
ANALYTIC_TAU = 2.0
"""The logit temperature of ``clip="analytic"``, chosen together with the SGD base rate
:data:`qpriv.experiments.qml.CLIPLESS_LR` on the validation share of the training split
(``scripts/choose_clipless.py``: tau 0.5 / 1 / 2 x lr 0.003 ... 0.1, 15 epochs, |B| 64, seed
2024, no noise and eps 1 and 10): the best mean validation accuracy, 0.861, is tau 2 at lr 0.01
(tau 0.5: 0.854 at lr 0.003; tau 1: 0.848 at lr 0.003)."""


def analytic_constants_note(*, task: str, input_bound: float, bias_bound: float, tau: float,
                            default_input_bound: bool) -> str:
    """The claim's note on clipless DP-SGD's public constants X, B and tau: their values, and
    which were chosen on training data outside the guarantee (the default X on the synthetic
    task's training inputs; the default tau and the figures' rate on its validation share)."""
    if not default_input_bound:
        origin = "given by the user"
    elif task == "synthetic":
        origin = ("the default, read off this task's training inputs: about the 90th "
                  "percentile of their norms")
    else:
        origin = "the default, read off the synthetic task's training inputs, not this task's"
    return (f"clipless DP-SGD's public constants are not accounted: the input bound "
            f"X = {input_bound:g} ({origin}), the bias bound B = {bias_bound:g} and the "
            f"temperature tau = {tau:g}; the default tau ({ANALYTIC_TAU:g}) and the figures' "
            "rate were chosen on the validation share of the synthetic task's training split")

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
ACCOUNTANT = ACCOUNTANTS["rdp"]
ACCOUNTING_NOTE = (
    f"{ACCOUNTANT}: sigma from opacus.accountants.utils.get_noise_multiplier("
    "accountant='rdp') for the run's sample rate, steps and delta; eps read back from the "
    "same accountant"
)


def train_classifier(
    *,
    task: str,
    model: str,
    clip: float | str | None,
    batch: int,
    epochs: int,
    seed: int | None,
    lr: float = DEFAULT_LR,
    eps: float | None = None,
    delta: float = 1e-5,
    optimizer: str = "adam",
    preclip_noise: float = 0.0,
    tau: float | None = None,
    n_layers: int | None = None,
    depolarizing: float = 0.0,
    shots: int | None = None,
    hidden: Sequence[int] = (32, 32),
    input_bound: float | None = None,
    bias_bound: float | None = None,
    image_size: int = DEFAULT_IMAGE_SIZE,
    loader_layers: int = 3,
    loader_steps: int = 200,
    unclipped_reference: bool = False,
    diagnostics: bool = True,
    validation: float | None = None,
    out_dir: str | Path | None = None,
    resume: bool = False,
    lr_tuning: dict | None = None,
    threads: int | None = None,
    progress: bool = False,
) -> dict:
    """Train one classifier with DP-SGD (or clipping only) and return a JSON-able result.

    Examples:
        Seconds: one epoch of a small MLP on the synthetic task at eps = 10:

        >>> result = train_classifier(task="synthetic", model="mlp", clip=1.0, batch=64,
        ...                           epochs=1, seed=2024, eps=10.0, threads=1)
        >>> result["eps"]["kind"], result["eps"]["accounting"], result["eps"]["value"] <= 10.0
        ('global (eps, delta)-DP', 'rigorous', True)

    Args:
        task: ``synthetic``, ``digits`` or ``folder:PATH`` (:mod:`qpriv.classification.data`).
        model: ``mlp`` (tanh), ``lipschitz`` (deel-torchlip GNP layers, Lipschitz constant C),
            ``quantum`` (variational classifier on the amplitude-encoded features), ``cnn``
            (GroupNorm CNN, images) or ``quantum-image`` (hierarchically learned amplitude
            loaders, frozen, then the variational classifier; images).
        clip: the clipping threshold C > 0; ``"structural"`` for C = 2 G / tau (quantum
            models, Theorem 3.2); ``"analytic"`` for clipless DP-SGD (``lipschitz``: the
            projected 1-Lipschitz MLP, noise sigma Delta for its analytic per-example gradient
            bound Delta, nothing clipped); None for no clipping (only without ``eps``).
        batch: batch size |B| (the expected size under Poisson sampling), at most the
            training set's size (with ``validation``, clamped to the smaller split's).
        epochs, seed, lr: the protocol (``lr`` default :data:`DEFAULT_LR`); ``optimizer``
            ``adam`` or ``sgd`` (post-processing of the privatised gradient either way).
            ``seed`` None draws a secret seed from the operating system and records none
            (:mod:`qpriv.privacy.randomness`): a recorded seed lets whoever reads it replay
            the noise and the batches, and the claim then says so.
        eps, delta: the target of a private run, (eps, delta)-DP by Opacus's RDP accountant;
            ``eps=None`` adds no noise and claims no privacy.
        preclip_noise: standard deviation of Gaussian noise added to every per-example
            gradient before clipping (the symmetrisation the paper cites); 0 disables it.
        tau, n_layers, depolarizing, shots: quantum models: logit temperature (default
            :data:`DEFAULT_TAU`; the paper gives no value; 0.5 keeps per-example norms near
            1-5 on the synthetic task; also the temperature of ``clip="analytic"``'s logits
            f(x) / tau, default :data:`ANALYTIC_TAU`),
            circuit depth (default 8, and 28 for ``quantum-image``), global depolarizing
            lambda, read-out shots S (None: exact expectations).
        hidden: hidden widths of ``mlp`` and ``lipschitz``.
        input_bound, bias_bound: ``clip="analytic"`` only: inputs are clipped to L2 norm X
            and biases projected onto the ball of radius B (defaults
            :data:`ANALYTIC_DEFAULTS`); both are public constants of the bound.
        image_size: side of folder images after resizing (a power of two for
            ``quantum-image``).
        loader_layers, loader_steps: ``quantum-image``'s loader: layers added per level and
            Adam steps per level.
        unclipped_reference: also train the same initial model without clipping or noise on
            the same batches, and report each epoch's distance from its training loss.
        diagnostics: compute the per-epoch gradient diagnostics
            (:mod:`qpriv.classification.diagnostics`).
        validation: hold out this share of the training split (stratified, fixed seed) and
            evaluate on it instead of the test split: the run a learning rate is tuned by
            (:mod:`qpriv.classification.tuning`). ``accuracy`` is then the validation
            accuracy and ``evaluated_on`` says so.
        out_dir: write ``config.json``, a checkpoint per epoch (``checkpoint.pt``, and
            ``reference.pt`` for the unclipped twin) and ``result.json`` there; None writes
            nothing.
        resume: continue the run in ``out_dir`` from its checkpoints (same settings
            required; a killed run resumes to the same result); a finished run's
            ``result.json`` is returned as it is.
        lr_tuning: how ``lr`` was chosen (:func:`qpriv.classification.tuning.
            tune_learning_rate`'s record), stored with the result.
        threads: torch CPU threads for the run (restored afterwards).
        progress: one line per epoch on stderr.

    Returns:
        ``accuracy`` (test, or validation with ``validation``; final epoch), ``evaluated_on``,
        ``diverged_epoch`` (the epoch whose training loss was not finite, where training
        stopped, or None; a model with non-finite outputs predicts no class, so its accuracy
        counts every such example wrong; ``eps`` is then accounted for the steps taken, with
        ``planned_steps`` beside them),
        ``train_accuracy``, ``final_diagnostics``,
        ``history`` (one record per epoch), ``parameters`` (trainable count), ``clip``,
        ``unclipped_reference`` (with ``unclipped_reference``),
        ``gradient_bound`` (quantum models, and ``clip="analytic"``: Delta, its per-layer
        parts and the largest per-example norm measured against it), ``privacy``, ``eps``
        and ``noise_multiplier`` (labelled with kind, accounting and accountant), ``task``,
        ``dpsgd``, ``environment``.

    Raises:
        InvalidInputError: any bad argument or task, before any training.
    """
    started = time.perf_counter()
    request = _validate(
        task=task, model=model, clip=clip, batch=batch, epochs=epochs, seed=seed, lr=lr,
        eps=eps, delta=delta, optimizer=optimizer, preclip_noise=preclip_noise, tau=tau,
        n_layers=n_layers, depolarizing=depolarizing, shots=shots, hidden=tuple(hidden),
        image_size=image_size, loader_layers=loader_layers, loader_steps=loader_steps,
        unclipped_reference=unclipped_reference, validation=validation, threads=threads,
        input_bound=input_bound, bias_bound=bias_bound,
    )
    out = check_out_dir(out_dir, resume=resume)

    with torch_threads(threads) as used_threads:
        data = load_task(task, image_size=image_size)
        if validation is None:
            _check_batch(batch, task=task, n_train=len(data.y_train))
        else:
            # a trial on the smaller validation split takes the batch of the run it tunes,
            # clamped below to that split's size
            data = data.validation_split(validation)
        _check_model_for_task(model, data)
        written_request = {**request, "task_data": data.summary()}
        inputs, extra = _model_inputs(model, data, request)
        if model == "lipschitz" and clip != "analytic":
            request = {**request, "lipschitz": float(clip)}
        secret = seed is None
        seed = run_seed(seed)  # a secret one is used and written nowhere
        seed_everything(derive_seed(seed, "model-init"))
        net = _build_model(model, data, request, generator=torch.Generator().manual_seed(
            derive_seed(seed, "model-init")))
        clip_value, clip_info = _resolve_clip(clip, net, tau=request["tau"])
        if progress:
            print(f"{model}: {count_parameters(net)} trainable parameters", file=sys.stderr)
        n_train = inputs["x_train"].shape[0]
        config = DPSGDConfig(batch_size=min(batch, n_train), epochs=epochs, lr=lr,
                             clip=clip_value, optimizer=optimizer, preclip_noise=preclip_noise,
                             sampling="poisson" if eps is not None else "shuffle")
        constants = None if clip != "analytic" else analytic_constants_note(
            task=task, input_bound=request["input_bound"], bias_bound=request["bias_bound"],
            tau=request["tau"], default_input_bound=input_bound is None)
        privacy = _privacy(config, n_train=n_train, eps=eps, delta=delta,
                           analytic=constants, secret=secret)
        config = replace(config, noise_multiplier=privacy["sigma"])
        # only once every setting, the accountant's included, is accepted
        finished = open_run(out, written_request, resume=resume, ignore=_UNCHECKED)
        if finished is not None:
            return finished
        initial = {k: v.detach().clone() for k, v in net.state_dict().items()}

        reference, reference_info = None, {}
        if unclipped_reference:
            twin = _build_model(model, data, request, generator=None)
            twin.load_state_dict(initial)
            ref_config = replace(config, clip=None, noise_multiplier=0.0, preclip_noise=0.0)
            ref_history = train_dpsgd(
                twin, **inputs, config=ref_config, diagnostics=False,
                **_generators(seed), on_epoch=_printer("unclipped", epochs, progress),
                checkpoint=None if out is None else out / REFERENCE_FILE,
            )
            # a reference that diverged has no loss to measure the later epochs against
            reference = [h["train_loss"] for h in ref_history]
            reference += [math.nan] * (epochs - len(reference))
            reference_info = {"unclipped_reference": {
                "accuracy": ref_history[-1]["test_accuracy"],
                "train_loss": ref_history[-1]["train_loss"],
                "diverged_epoch": diverged_epoch(ref_history),
                "what": "the same initial model and batches, no clipping, no noise"}}

        history = train_dpsgd(
            net, **inputs, config=config, diagnostics=diagnostics,
            reference_losses=reference, **_generators(seed),
            on_epoch=_printer(model, epochs, progress),
            checkpoint=None if out is None else out / CHECKPOINT_FILE,
        )

    last = history[-1]
    diag_keys = [k for k in last if k not in ("epoch", "seconds")]
    result = {
        "task": data.summary(),
        "model": model,
        "parameters": count_parameters(net),
        "accuracy": last["test_accuracy"],
        "evaluated_on": "validation" if validation is not None else "test",
        "diverged_epoch": diverged_epoch(history),
        "train_accuracy": last["train_accuracy"],
        "final_diagnostics": {k: last[k] for k in diag_keys},
        "clip": clip_info,
        **_bound_info(net, clip_value, tau=request["tau"], preclip_noise=preclip_noise,
                      history=history),
        **({"diagnostics_scope": PRECLIP_NOTE} if preclip_noise > 0 else {}),
        **{k: v for k, v in privacy.items() if k != "sigma"},
        "dpsgd": config.as_dict(),
        "request": request,
        **extra,
        **reference_info,
        **({"lr_tuning": lr_tuning} if lr_tuning is not None else {}),
        "history": history,
        "seconds": time.perf_counter() - started,
        "environment": {"torch": torch.__version__, "python": platform.python_version(),
                        "threads": used_threads},
    }
    _spent_steps(result, history=history, config=config, n_train=n_train, delta=delta)
    _name_the_guard(result)
    if out is not None:
        atomic_write_json(out / RESULT_FILE, result)
    return result


# -- validation and set-up ------------------------------------------------------------------------


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


def check_batch(task: str, batch: int, *, image_size: int = DEFAULT_IMAGE_SIZE) -> None:
    """Refuse an expected ``batch`` above ``task``'s training set (what
    :func:`train_classifier` refuses once it has loaded the task), for a caller that must know
    before it trains anything else, such as the learning-rate tuning's trials."""
    _check_batch(batch, task=task, n_train=len(load_task(task, image_size=image_size).y_train))


def _check_batch(batch: int, *, task: str, n_train: int) -> None:
    """Refuse an expected batch above the training set's size: every step would take the whole
    set, not the batch asked for (and the accountant's sampling rate would exceed 1)."""
    if batch > n_train:
        raise ArgumentError(f"{{batch}} = {batch} is outside the valid range [1, {n_train}]: "
                            f"task {ArgumentError.literal(repr(task))} has {n_train} training "
                            f"examples; give {{batch}} {n_train} or less")


_UNCHECKED = ("threads",)
"""Request keys a resumed run may change: they do not change what is computed."""


def _validate(**args) -> dict:
    """Check every argument; return the JSON-able request."""
    task, model, clip = args["task"], args["model"], args["clip"]
    if not isinstance(task, str) or not (task in ("synthetic", "digits")
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
    if clip is None and args["eps"] is not None:
        raise ArgumentError("a private run ({eps} given) needs a clipping threshold: give "
                            "{clip} a number C > 0, or 'analytic' / 'structural' where the "
                            "model has a gradient bound")
    if clip is None and model == "lipschitz":
        raise ArgumentError("model 'lipschitz' takes its Lipschitz constant from {clip}: give "
                            "a number C > 0, or 'analytic' for clipless DP-SGD")
    require_positive_int("batch", args["batch"])
    require_positive_int("epochs", args["epochs"])
    if args["seed"] is not None and (isinstance(args["seed"], bool)
                                     or not isinstance(args["seed"], int)):
        raise InvalidInputError(f"seed = {args['seed']!r} is not an integer (or None for a "
                                "secret one)")
    require_in_range("lr", args["lr"], low=0.0, high=MAX_LR, hint=LR_HINT)
    if args["eps"] is not None:
        require_in_range("eps", args["eps"], low=0.0, hint="a privacy budget must be > 0")
    require_in_range("delta", args["delta"], low=0.0, high=1.0, high_inclusive=False,
                     hint="delta is a probability in (0, 1), typically 1e-5")
    require_in_range("preclip_noise", args["preclip_noise"], low=0.0, low_inclusive=True)
    if args["tau"] is None:
        args["tau"] = ANALYTIC_TAU if clip == "analytic" else DEFAULT_TAU
    require_in_range("tau", args["tau"], low=1.0 / MAX_BOUND, low_inclusive=True,
                     hint="the logits are <Z_k> / tau: give tau such as 0.1-10")
    if args["n_layers"] is not None:
        require_positive_int("n_layers", args["n_layers"])
    require_in_range("depolarizing", args["depolarizing"], low=0.0, high=1.0,
                     low_inclusive=True)
    if args["shots"] is not None:
        require_positive_int("shots", args["shots"])
    for width in args["hidden"]:
        require_positive_int("hidden width", width)
    require_positive_int("image_size", args["image_size"])
    require_positive_int("loader_layers", args["loader_layers"])
    require_positive_int("loader_steps", args["loader_steps"])
    check_threads(args["threads"])
    if args["validation"] is not None:
        require_in_range("validation", args["validation"], low=0.0, high=1.0,
                         high_inclusive=False,
                         hint="the share of the training split held out, e.g. 0.2")
    if args["optimizer"] not in ("adam", "sgd"):
        raise ArgumentError(f"{{optimizer}} = {ArgumentError.literal(repr(args['optimizer']))} "
                            "is not one of ('adam', 'sgd')")
    analytic = {k: args.pop(k) for k in ANALYTIC_DEFAULTS}
    if clip == "analytic":
        for key, default in ANALYTIC_DEFAULTS.items():
            value = default if analytic[key] is None else analytic[key]
            analytic[key] = require_in_range(
                key, value, low=0.0, low_inclusive=key == "bias_bound", high=MAX_BOUND,
                hint="a public norm bound of clip 'analytic', at most 1e6")
    elif any(v is not None for v in analytic.values()):
        raise ArgumentError("{input_bound} and {bias_bound} set the bound of {clip}; a "
                            f"clip of {clip!r} takes neither: leave them out",
                            values={"clip": "analytic"})
    if clip == "analytic" and args["preclip_noise"]:
        raise ArgumentError(
            f"{{preclip_noise}} = {args['preclip_noise']!r} would break the bound of "
            "{clip} (noised gradients are unbounded): leave it at 0",
            values={"clip": "analytic"})
    request = dict(args)
    if clip == "analytic":
        request.update(analytic)
    request["hidden"] = list(args["hidden"])
    if request["n_layers"] is None and model in QUANTUM:
        request["n_layers"] = DEFAULT_LAYERS[model]
    return json.loads(json.dumps(request))


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


def _model_inputs(model: str, data: ClassificationData, request: dict) -> tuple[dict, dict]:
    """Training and test inputs of the model (loaded states for ``quantum-image``), and what
    the result should say about them (loader fidelities, zero-norm inputs)."""
    inputs = {"x_train": data.x_train, "y_train": data.y_train,
              "x_test": data.x_test, "y_test": data.y_test}
    extra: dict = {}
    if model == "quantum-image":
        kwargs = {"layers_per_level": request["loader_layers"],
                  "steps_per_level": request["loader_steps"]}
        train = fit_loaders(data.x_train, **kwargs)
        test = fit_loaders(data.x_test, **kwargs)
        inputs.update(x_train=train.states, x_test=test.states)
        extra["loader"] = {"train": train.summary(), "test": test.summary()}
    elif model == "quantum":
        _, zero_train = amplitude_encode(data.x_train.flatten(1))
        _, zero_test = amplitude_encode(data.x_test.flatten(1))
        extra["zero_norm_inputs"] = {"train": zero_train, "test": zero_test,
                                     "encoded_as": "uniform superposition"}
    return inputs, extra


def _build_model(model: str, data: ClassificationData, request: dict, *,
                 generator: torch.Generator | None) -> nn.Module:
    n_features, n_classes = data.n_features, data.n_classes
    if model == "mlp":
        return TanhMLP(n_features=n_features, n_classes=n_classes, hidden=request["hidden"])
    if model == "lipschitz" and request["clip"] == "analytic":
        return ProjectedLipschitzMLP(
            n_features=n_features, n_classes=n_classes, hidden=request["hidden"],
            tau=request["tau"], input_bound=request["input_bound"],
            bias_bound=request["bias_bound"])
    if model == "lipschitz":  # the Lipschitz constant is matched to C
        return LipschitzMLP(n_features=n_features, n_classes=n_classes,
                            hidden=request["hidden"], lipschitz=request["lipschitz"])
    if model == "cnn":
        return GroupNormCNN(n_classes=n_classes)
    return QuantumClassifier(
        n_features=n_features, n_classes=n_classes, n_layers=request["n_layers"],
        tau=request["tau"], depolarizing=request["depolarizing"], shots=request["shots"],
        generator=generator,
    )


def _resolve_clip(clip: float | str | None, net: nn.Module, *, tau: float
                  ) -> tuple[float | None, dict]:
    if clip is None:
        return None, {"value": None, "mode": "none (unclipped)"}
    if clip == "structural":
        value = structural_clip(constant=net.gradient_constant(), tau=tau)
        return value, {"value": value, "mode": "structural (C = 2 G / tau, Theorem 3.2)"}
    if clip == "analytic":
        value = net.gradient_bound()
        return value, {"value": value, "mode": "analytic (clipless: C = Delta, the analytic "
                                                 "bound on every per-example gradient)"}
    return float(clip), {"value": float(clip), "mode": "fixed"}


def _bound_info(net: nn.Module, clip: float | None, *, tau: float,
                preclip_noise: float, history: list[dict]) -> dict:
    if isinstance(net, ProjectedLipschitzMLP):
        return {"gradient_bound": _analytic_bound_info(net, history)}
    if not isinstance(net, QuantumClassifier):
        return {}
    constant = net.gradient_constant()
    bound = net.gradient_bound()
    # Theorem 3.2 bounds g_i, not the g_i + s z that pre-clipping noise hands to the clipping
    unbounded = clip is None or preclip_noise > 0
    return {"gradient_bound": {
        "G": constant, "per_example_norm_bound": bound, "theorem": "3.2",
        "clipping_bias_bound": (None if unbounded else
                                clipping_bias_bound(constant=constant, tau=tau, clip=clip)),
    }}


def _analytic_bound_info(net: ProjectedLipschitzMLP, history: list[dict]) -> dict:
    """Delta, its parts, and the per-example norms measured against it (every epoch)."""
    bound = net.gradient_bound()
    measured = [h["max_example_norm"] for h in history if "max_example_norm" in h]
    largest = max(measured) if measured else None
    # the guard's work at every step (each epoch's mean fraction clipped at Delta), where the
    # norms above are only the epoch-end snapshots: any clipping means the bound failed
    clipped = max((h.get("batch_clip_fraction", 0.0) for h in history), default=0.0)
    return {
        "per_example_norm_bound": bound,
        "derivation": ANALYTIC_DERIVATION,
        "loss_lipschitz": cross_entropy_lipschitz(tau=net.tau),
        "input_bound": net.input_bound, "bias_bound": net.bias_bound, "tau": net.tau,
        "weight_norm_bound": net.WEIGHT_NORM_BOUND,
        "final_weight_norms": net.weight_norms(),
        "layers": [{"input_norm": b.input_norm, "output_gradient": b.output_gradient,
                    "weight": b.weight, "bias": b.bias, "total": b.total}
                   for b in net.layer_gradient_bounds()],
        "max_example_norm": largest,
        "max_example_norm_over_bound": None if largest is None else largest / bound,
        "max_epoch_clip_fraction": clipped,
        "clipping_bias_bound": 0.0,
    }


ANALYTIC_DERIVATION = (
    "inputs clipped to ||x|| <= X, weights projected onto ||W_k||_2 <= 1 and biases onto "
    "||b_k|| <= B after every step, norm-preserving pair sorting, cross-entropy on f(x) / tau "
    "(sqrt(2) / tau-Lipschitz in f): ||h_{k-1}|| <= X + (k - 1) B, ||dL/dz_k|| <= sqrt(2) / "
    "tau, so ||dL/dW_k||_F <= sqrt(2) / tau (X + (k - 1) B) and ||dL/db_k|| <= sqrt(2) / tau; "
    "Delta = sqrt(sum_k of both squared)")


PRECLIP_NOTE = (
    "with pre-clipping noise s > 0 the update clips g_i + s z_i, but the diagnostics "
    "(clipping probability, clipping bias, alignment, the update MSE and its parts) are those "
    "of the noise-free per-example gradients g_i; Theorem 3.2's clipping-bias bound does not "
    "apply to the noised gradients either, so it is not reported")


DIAGNOSTICS_NOTE = (
    "the guarantee covers the trained weights: the per-epoch diagnostics (gradient norms, "
    "clipping probability, alignment, bias, update MSE), the training loss and accuracy and the "
    "unclipped reference read every training example without noise; they are research "
    "diagnostics, not private releases")
TRAINING_STATISTICS_NOTE = (
    "the result also states statistics of the training split outside the guarantee: its size "
    "N (declared public: the sample rate q = |B| / N reveals it too), the count of all-zero "
    "inputs of a quantum model and the image loaders' fidelities on the training images")


def _spent_steps(result: dict, *, history: list[dict], config: DPSGDConfig, n_train: int,
                 delta: float) -> None:
    """A private run that stopped early (diverged) spent only its steps: account those."""
    eps = result.get("eps")
    if not eps or len(history) == config.epochs:
        return
    steps = len(history) * config.steps_per_epoch(n_train)
    eps.update(value=dpsgd_epsilon(noise_multiplier=config.noise_multiplier,
                                   sample_rate=config.sample_rate(n_train), steps=steps,
                                   delta=delta),
               steps=steps, planned_steps=eps["steps"])


def _privacy(config: DPSGDConfig, *, n_train: int, eps: float | None, delta: float,
             analytic: str | None = None, secret: bool = False) -> dict:
    """sigma and the labelled privacy numbers of the run (``analytic``: clipless DP-SGD, C is
    the analytic bound Delta, and this is the note on its constants,
    :func:`analytic_constants_note`; ``secret``: the run's seed is secret, else recorded)."""
    if eps is None:
        mode = "clipping only" if config.clip is not None else "unclipped"
        return {"sigma": 0.0, "privacy": f"none ({mode}: no noise, no privacy guarantee)",
                "eps": None, "noise_multiplier": None}
    rate = config.sample_rate(n_train)
    steps = config.epochs * config.steps_per_epoch(n_train)
    sigma = noise_multiplier_for(eps=eps, delta=delta, sample_rate=rate, steps=steps)
    spent = dpsgd_epsilon(noise_multiplier=sigma, sample_rate=rate, steps=steps, delta=delta)
    notes = [
        "hyper-parameter choices (lr, C, epochs, model) are not accounted",
        "preprocessing is per example with fixed constants",
        DIAGNOSTICS_NOTE,
        TRAINING_STATISTICS_NOTE,
        "shot and depolarizing noise of quantum models are not counted as privacy "
        "(the private-training paper, section 3.2)",
        DIVERGENCE_NOTE,
        randomness_note(secret=secret),
    ]
    if analytic:
        notes += [ANALYTIC_NOTE, analytic]
    claim = PrivacyClaim(
        value=spent, delta=delta, kind=Kind.GLOBAL_DP, accounting=Accounting.RIGOROUS,
        unit=Unit.EXAMPLE, covers=COVERS_WEIGHTS, notes=tuple(notes),
        details={"target": eps, "accountant": ACCOUNTANT,
                 "neighbourhood": "add or remove one training example",
                 "sampling": f"Poisson, rate q = {rate:.6g}", "steps": steps,
                 "how": ACCOUNTING_NOTE})
    return {
        "sigma": sigma,
        "privacy": Kind.GLOBAL_DP,
        "eps": claim.to_json(),
        "noise_multiplier": {"value": sigma, "kind": "DP-SGD noise multiplier",
                             "accounting": "rigorous", "accountant": ACCOUNTANT,
                             "meaning": ("Gaussian noise std sigma * Delta on the sum of the "
                                         f"per-example gradients, Delta their analytic bound "
                                         f"{ANALYTIC_NOTHING_CLIPPED}" if analytic else
                                         "Gaussian noise std sigma * C on the sum of clipped "
                                         "per-example gradients")},
        "privacy_notes": notes,
    }


ANALYTIC_NOTE = (
    "clipless DP-SGD: the sensitivity of each step's gradient sum is the analytic bound Delta "
    "on every per-example gradient (inputs clipped to a public norm, weights and biases "
    "projected after every step); the noise is sigma * Delta, and clipping at Delta stays as a "
    "guard, which clipped no example in this run (p_clip = 0 at every step)")
ANALYTIC_NOTHING_CLIPPED = "(nothing clipped)"
ANALYTIC_GUARD_NOTE = (
    "clipless DP-SGD: the sensitivity of each step's gradient sum is Delta, the noise sigma * "
    "Delta; the guard clipped at Delta in this run (up to {fraction:.3g} of an epoch's "
    "examples): a per-example gradient passed the analytic bound (float32 rounding at the "
    "bound's edge, or a bound that failed), so the sensitivity still holds but the run is not "
    "free of clipping bias")


def _name_the_guard(result: dict) -> None:
    """A clipless run whose guard clipped says so: the notes written before training (that no
    example was clipped) give way to :data:`ANALYTIC_GUARD_NOTE`, and the clipping-bias bound
    0 to None (``gradient_bound.max_epoch_clip_fraction`` counts every step's clipping)."""
    bound = result.get("gradient_bound")
    if not isinstance(bound, dict) or not bound.get("max_epoch_clip_fraction"):
        return
    bound["clipping_bias_bound"] = None
    note = ANALYTIC_GUARD_NOTE.format(fraction=bound["max_epoch_clip_fraction"])
    if result.get("eps"):
        result["eps"]["notes"] = [note if n == ANALYTIC_NOTE else n
                                  for n in result["eps"]["notes"]]
        result["privacy_notes"] = [note if n == ANALYTIC_NOTE else n
                                   for n in result["privacy_notes"]]
        meaning = result["noise_multiplier"]["meaning"]
        result["noise_multiplier"]["meaning"] = meaning.replace(
            ANALYTIC_NOTHING_CLIPPED, "(the guard clipped at Delta: see the notes)")


def _generators(seed: int) -> dict:
    return {
        "batch_generator": torch.Generator().manual_seed(derive_seed(seed, "batches")),
        "noise_generator": torch.Generator().manual_seed(derive_seed(seed, "dp-noise")),
        "eval_generator_seed": derive_seed(seed, "evaluation"),
    }


def _printer(name: str, epochs: int, enabled: bool):
    if not enabled:
        return None

    def show(record: dict) -> None:
        clip, align = record.get("clip_probability"), record.get("alignment")
        extra = "" if clip is None else f", p_clip {clip:.2f}"
        extra += "" if align is None else f", A_C {align:.3f}"
        extra += ", DIVERGED: training stops" if record.get("diverged") else ""
        print(f"{name} epoch {record['epoch']}/{epochs}: train loss "
              f"{record['train_loss']:.4f}, test acc {record['test_accuracy']:.3f}{extra}, "
              f"{record['seconds']:.1f} s", file=sys.stderr)

    return show
