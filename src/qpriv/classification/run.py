"""A private classifier run: task -> model -> DP-SGD -> diagnostics -> a typed result.

Example::

    from qpriv.classification.run import train_classifier

    result = train_classifier(task="synthetic", model="quantum", clip=1.5, batch=64, eps=10.0,
                              epochs=20, seed=2024, lr=0.03)
    result.accuracy, result.claim.value, result.final_diagnostics["alignment"]

:func:`run_request` is the run itself, on a validated request, and also gives the trained
model: :class:`qpriv.classification.estimators.DPSGDClassifier` (the front door, which the
command line calls) fits with it; :func:`train_classifier` is the keyword-argument form kept
for one release.

``eps=None`` trains without noise: clipping only (the paper's Figure 2 setting) or, with
``clip=None``, plain unclipped training. ``clip="structural"`` (quantum models) uses Theorem
3.2's C = 2 G / tau, which never clips. ``clip="analytic"`` (``lipschitz``) is clipless DP-SGD:
the projected 1-Lipschitz MLP (:class:`qpriv.classification.models.ProjectedLipschitzMLP`)
whose every per-example gradient is bounded by Delta, the noise calibrated to Delta.

Every input is validated before anything is computed (:mod:`qpriv.classification.request`);
the run's claim and gradient bound are written by :mod:`qpriv.classification.privacy`. With
``out_dir`` the run writes ``config.json`` (what was asked) first, ``classifier.pt`` (the
trained weights alone) and ``result.json`` at the end, atomically.
"""

from __future__ import annotations

import math
import platform
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import torch
from torch import nn

from qpriv.classification.bounds import structural_clip
from qpriv.classification.data import DEFAULT_IMAGE_SIZE, ClassificationData
from qpriv.classification.dpsgd import DPSGDConfig, train_dpsgd
from qpriv.classification.loader import LoadedImages, fit_loaders
from qpriv.classification.models import (
    GroupNormCNN,
    LipschitzMLP,
    ProjectedLipschitzMLP,
    QuantumClassifier,
    TanhMLP,
    count_parameters,
)
from qpriv.classification.privacy import (
    PRECLIP_NOTE,
    account_spent_steps,
    analytic_constants_note,
    gradient_bound_record,
    name_the_guard,
    privacy_record,
)
from qpriv.classification.records import ClassifierResult
from qpriv.classification.request import (
    DEFAULT_LR,
    ClassifierRequest,
    check_out_dir,
    load_checked_task,
    validate_request,
)
from qpriv.privacy.budget import CLASSIFIER_DELTA
from qpriv.privacy.randomness import run_seed
from qpriv.privacy.samplers import SecureModeGaussian
from qpriv.quantum.states import amplitude_encode
from qpriv.runs.directory import open_run
from qpriv.runs.files import atomic_torch_save, atomic_write_json, load_checkpoint
from qpriv.runs.layout import (
    CHECKPOINT_FILE,
    CLASSIFIER_MODEL_FILE,
    REFERENCE_FILE,
    RESULT_FILE,
)
from qpriv.threads import torch_threads
from qpriv.training.seeding import derive_seed, seed_everything
from qpriv.training.trainer import diverged_epoch

_UNCHECKED = ("threads",)
"""Request keys a resumed run may change: they do not change what is computed."""


@dataclass(frozen=True)
class TrainedClassifier:
    """A finished run: its result, the trained model the claim covers (None: a finished run
    read back that kept no weights, as qpriv 0.1.0's with their checkpoints removed), its
    request."""

    result: ClassifierResult
    model: nn.Module | None
    request: ClassifierRequest


def train_classifier(
    *, task: str | ClassificationData, model: str, clip: float | str | None, batch: int,
    epochs: int, seed: int | None, lr: float = DEFAULT_LR, eps: float | None = None,
    delta: float = CLASSIFIER_DELTA,
    optimizer: str = "adam", preclip_noise: float = 0.0, tau: float | None = None,
    n_layers: int | None = None, depolarizing: float = 0.0, shots: int | None = None,
    hidden: Sequence[int] = (32, 32), input_bound: float | None = None,
    bias_bound: float | None = None, image_size: int = DEFAULT_IMAGE_SIZE,
    loader_layers: int = 3, loader_steps: int = 200, unclipped_reference: bool = False,
    diagnostics: bool = True, validation: float | None = None,
    out_dir: str | Path | None = None, resume: bool = False, lr_tuning: dict | None = None,
    threads: int | None = None, progress: bool = False,
) -> ClassifierResult:
    """Train one classifier with DP-SGD (or clipping only) and return its typed result (kept
    for one release beside :class:`qpriv.DPSGDClassifier`, the estimator, which runs the same
    code and keeps the model).

    Examples:
        Seconds: one epoch of a small MLP on the synthetic task at eps = 10:

        >>> result = train_classifier(task="synthetic", model="mlp", clip=1.0, batch=64,
        ...                           epochs=1, seed=2024, eps=10.0, threads=1)
        >>> str(result.claim.kind), str(result.claim.accounting), result.claim.value <= 10.0
        ('global (eps, delta)-DP', 'rigorous', True)

    Args:
        task: ``synthetic``, ``digits`` or ``folder:PATH`` (:mod:`qpriv.classification.data`),
            or the data itself (:func:`~qpriv.classification.data.array_task`'s arrays).
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
            :data:`~qpriv.classification.request.DEFAULT_TAU`; the paper gives no value; 0.5
            keeps per-example norms near 1-5 on the synthetic task; also the temperature of
            ``clip="analytic"``'s logits f(x) / tau, default
            :data:`~qpriv.classification.request.ANALYTIC_TAU`),
            circuit depth (default 8, and 28 for ``quantum-image``), global depolarizing
            lambda, read-out shots S (None: exact expectations).
        hidden: hidden widths of ``mlp`` and ``lipschitz``.
        input_bound, bias_bound: ``clip="analytic"`` only: inputs are clipped to L2 norm X
            and biases projected onto the ball of radius B (defaults
            :data:`~qpriv.classification.request.ANALYTIC_DEFAULTS`); both are public
            constants of the bound.
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
        The :class:`~qpriv.classification.records.ClassifierResult`, whose JSON form
        (``to_json()``, what ``result.json`` holds) has
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
    given = task if isinstance(task, ClassificationData) else None
    request = validate_request(
        task=task if given is None else given.name, model=model, clip=clip, batch=batch,
        epochs=epochs, seed=seed, lr=lr, eps=eps, delta=delta, optimizer=optimizer,
        preclip_noise=preclip_noise, tau=tau, n_layers=n_layers, depolarizing=depolarizing,
        shots=shots, hidden=hidden, image_size=image_size, loader_layers=loader_layers,
        loader_steps=loader_steps, unclipped_reference=unclipped_reference,
        validation=validation, threads=threads, input_bound=input_bound,
        bias_bound=bias_bound)
    return run_request(request, given=given, diagnostics=diagnostics, out_dir=out_dir,
                       resume=resume, lr_tuning=lr_tuning, progress=progress).result


def run_request(request: ClassifierRequest, *, given: ClassificationData | None = None,
                diagnostics: bool = True, out_dir: str | Path | None = None,
                resume: bool = False, lr_tuning: dict | None = None,
                progress: bool = False) -> TrainedClassifier:
    """Run a validated request (:func:`train_classifier` says what each argument does;
    ``given``: the data of task ``arrays``) and return the result with the trained model (a
    finished run in ``out_dir``, with ``resume``: its result and its weights read back).

    Raises:
        InvalidInputError: the task, the data or ``out_dir`` is refused, before any training.
    """
    started = time.perf_counter()
    out = check_out_dir(out_dir, resume=resume)
    with torch_threads(request.threads) as used_threads:
        prepared = _prepare(request, given=given, progress=progress)
        # only once every setting, the accountant's included, is accepted
        finished = open_run(out, prepared.written, resume=resume, ignore=_UNCHECKED)
        if finished is not None:
            weights = read_weights(out)
            if weights is not None:
                prepared.net.load_state_dict(weights)
            return TrainedClassifier(ClassifierResult.from_json(finished),
                                     None if weights is None else prepared.net, request)
        history, reference_info = _train(prepared, out=out, diagnostics=diagnostics,
                                         progress=progress)
    result = _result(prepared, history, reference_info, lr_tuning=lr_tuning,
                     started=started, threads=used_threads)
    if out is not None:
        atomic_torch_save(out / CLASSIFIER_MODEL_FILE, prepared.net.state_dict())
        atomic_write_json(out / RESULT_FILE, result)
    return TrainedClassifier(ClassifierResult.from_json(result), prepared.net, request)


def read_weights(folder: Path) -> dict | None:
    """The trained weights a run kept in ``folder``: ``classifier.pt``, or for a run written
    before it was kept, the final checkpoint's model (the weights the result was measured on);
    None where neither file is there.

    Raises:
        InvalidInputError: the file is damaged.
    """
    fix = "train the run again into a fresh folder"
    if (folder / CLASSIFIER_MODEL_FILE).is_file():
        return load_checkpoint(folder / CLASSIFIER_MODEL_FILE, fix=fix)
    if (folder / CHECKPOINT_FILE).is_file():
        return load_checkpoint(folder / CHECKPOINT_FILE, fix=fix)["model"]
    return None


# -- the steps of a run ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Prepared:
    """A run ready to train: its request and data, what ``config.json`` holds (``written``),
    the model's inputs and what the result says of them (``extra``), the seed (drawn when the
    request has none), the initialised model, its clipping and DP-SGD settings (sigma
    included) and the labelled privacy numbers."""

    request: ClassifierRequest
    data: ClassificationData
    written: dict
    inputs: dict
    extra: dict
    seed: int
    net: nn.Module
    clip_info: dict
    config: DPSGDConfig
    privacy: dict

    @property
    def n_train(self) -> int:
        return self.inputs["x_train"].shape[0]


def _prepare(request: ClassifierRequest, *, given: ClassificationData | None,
             progress: bool) -> _Prepared:
    """Load and check the data, build the model from the run's seed, resolve C and calibrate
    sigma: everything a run does before it trains or writes anything."""
    data = load_checked_task(request, given)
    written = {**request.to_json(), "task_data": data.summary(),
               **({"arrays_sha256": data.sha256} if data.sha256 else {})}
    inputs, extra = _model_inputs(request, data)
    seed = run_seed(request.seed)  # a secret one is used and written nowhere
    seed_everything(derive_seed(seed, "model-init"))
    net = build_model(request, n_features=data.n_features, n_classes=data.n_classes,
                      generator=torch.Generator().manual_seed(derive_seed(seed, "model-init")))
    clip_value, clip_info = _resolve_clip(request.clip, net, tau=request.tau)
    if progress:
        print(f"{request.model}: {count_parameters(net)} trainable parameters",
              file=sys.stderr)
    n_train = inputs["x_train"].shape[0]
    config = DPSGDConfig(batch_size=min(request.batch, n_train), epochs=request.epochs,
                         lr=request.lr, clip=clip_value, optimizer=request.optimizer,
                         preclip_noise=request.preclip_noise,
                         sampling="poisson" if request.eps is not None else "shuffle")
    constants = None if request.clip != "analytic" else analytic_constants_note(
        task=request.task, input_bound=request.input_bound, bias_bound=request.bias_bound,
        tau=request.tau, default_input_bound=request.default_input_bound)
    privacy = privacy_record(config, n_train=n_train, eps=request.eps, delta=request.delta,
                             analytic=constants, secret=request.seed is None,
                             arrays=given is not None)
    return _Prepared(request=request, data=data, written=written, inputs=inputs, extra=extra,
                     seed=seed, net=net, clip_info=clip_info,
                     config=replace(config, noise_multiplier=privacy["sigma"]),
                     privacy=privacy)


def _train(run: _Prepared, *, out: Path | None, diagnostics: bool,
           progress: bool) -> tuple[list[dict], dict]:
    """Train the unclipped reference (when asked) and then the model; return the model's
    history and what the result says of the reference."""
    reference, reference_info = None, {}
    if run.request.unclipped_reference:
        reference, reference_info = _train_reference(run, out=out, progress=progress)
    history = train_dpsgd(
        run.net, **run.inputs, config=run.config, diagnostics=diagnostics,
        reference_losses=reference, **_generators(run.seed),
        secure_noise=SecureModeGaussian() if run.request.seed is None else None,
        on_epoch=_printer(run.request.model, run.request.epochs, progress),
        checkpoint=None if out is None else out / CHECKPOINT_FILE,
    )
    return history, reference_info


def _train_reference(run: _Prepared, *, out: Path | None,
                     progress: bool) -> tuple[list[float], dict]:
    """The same initial model on the same batches without clipping or noise: its training
    loss per epoch (NaN after an epoch where it diverged) and the result's record of it."""
    initial = {k: v.detach().clone() for k, v in run.net.state_dict().items()}
    twin = build_model(run.request, n_features=run.data.n_features,
                       n_classes=run.data.n_classes, generator=None)
    twin.load_state_dict(initial)
    ref_config = replace(run.config, clip=None, noise_multiplier=0.0, preclip_noise=0.0)
    ref_history = train_dpsgd(
        twin, **run.inputs, config=ref_config, diagnostics=False,
        **_generators(run.seed), on_epoch=_printer("unclipped", run.request.epochs, progress),
        checkpoint=None if out is None else out / REFERENCE_FILE,
    )
    # a reference that diverged has no loss to measure the later epochs against
    reference = [h["train_loss"] for h in ref_history]
    reference += [math.nan] * (run.request.epochs - len(reference))
    return reference, {"unclipped_reference": {
        "accuracy": ref_history[-1]["test_accuracy"],
        "train_loss": ref_history[-1]["train_loss"],
        "diverged_epoch": diverged_epoch(ref_history),
        "what": "the same initial model and batches, no clipping, no noise"}}


def _result(run: _Prepared, history: list[dict], reference_info: dict, *,
            lr_tuning: dict | None, started: float, threads: int | None) -> dict:
    """The JSON-able result of a trained run (:func:`train_classifier` lists its keys), its
    claim accounted for the steps taken and naming the guard's clipping."""
    request, last = run.request, history[-1]
    lipschitz = {} if request.lipschitz is None else {"lipschitz": request.lipschitz}
    diag_keys = [k for k in last if k not in ("epoch", "seconds")]
    result = {
        "task": run.data.summary(),
        "model": request.model,
        "parameters": count_parameters(run.net),
        "accuracy": last["test_accuracy"],
        "evaluated_on": "validation" if request.validation is not None else "test",
        "diverged_epoch": diverged_epoch(history),
        "train_accuracy": last["train_accuracy"],
        "final_diagnostics": {k: last[k] for k in diag_keys},
        "clip": run.clip_info,
        **gradient_bound_record(run.net, run.config.clip, tau=request.tau,
                                preclip_noise=request.preclip_noise, history=history),
        **({"diagnostics_scope": PRECLIP_NOTE} if request.preclip_noise > 0 else {}),
        **{k: v for k, v in run.privacy.items() if k != "sigma"},
        "dpsgd": run.config.as_dict(),
        "request": {**request.to_json(), **lipschitz},
        **run.extra,
        **reference_info,
        **({"lr_tuning": lr_tuning} if lr_tuning is not None else {}),
        "history": history,
        "seconds": time.perf_counter() - started,
        "environment": {"torch": torch.__version__, "python": platform.python_version(),
                        "threads": threads},
    }
    account_spent_steps(result, history=history, config=run.config, n_train=run.n_train,
                        delta=request.delta)
    name_the_guard(result)
    return result


# -- the model and its inputs ---------------------------------------------------------------------


def _model_inputs(request: ClassifierRequest, data: ClassificationData) -> tuple[dict, dict]:
    """Training and test inputs of the model (loaded states for ``quantum-image``), and what
    the result should say about them (loader fidelities, zero-norm inputs)."""
    inputs = {"x_train": data.x_train, "y_train": data.y_train,
              "x_test": data.x_test, "y_test": data.y_test}
    extra: dict = {}
    if request.model == "quantum-image":
        train = loaded_images(request, data.x_train)
        test = loaded_images(request, data.x_test)
        inputs.update(x_train=train.states, x_test=test.states)
        extra["loader"] = {"train": train.summary(), "test": test.summary()}
    elif request.model == "quantum":
        _, zero_train = amplitude_encode(data.x_train.flatten(1))
        _, zero_test = amplitude_encode(data.x_test.flatten(1))
        extra["zero_norm_inputs"] = {"train": zero_train, "test": zero_test,
                                     "encoded_as": "uniform superposition"}
    return inputs, extra


def loaded_images(request: ClassifierRequest, images: torch.Tensor) -> LoadedImages:
    """``quantum-image``'s inputs: each image's own learned loader, frozen (per image, so
    a prediction loads new images exactly as training loaded its own)."""
    return fit_loaders(images, layers_per_level=request.loader_layers,
                       steps_per_level=request.loader_steps)


def build_model(request: ClassifierRequest, *, n_features: int, n_classes: int,
                generator: torch.Generator | None) -> nn.Module:
    """The request's classifier for ``n_features`` inputs and ``n_classes`` classes, its
    weights drawn from ``generator`` (the run's ``model-init`` stream)."""
    model = request.model
    if model == "mlp":
        return TanhMLP(n_features=n_features, n_classes=n_classes, hidden=request.hidden)
    if model == "lipschitz" and request.clip == "analytic":
        return ProjectedLipschitzMLP(
            n_features=n_features, n_classes=n_classes, hidden=request.hidden,
            tau=request.tau, input_bound=request.input_bound, bias_bound=request.bias_bound)
    if model == "lipschitz":  # the Lipschitz constant is matched to C
        return LipschitzMLP(n_features=n_features, n_classes=n_classes,
                            hidden=request.hidden, lipschitz=request.lipschitz)
    if model == "cnn":
        return GroupNormCNN(n_classes=n_classes)
    return QuantumClassifier(
        n_features=n_features, n_classes=n_classes, n_layers=request.n_layers,
        tau=request.tau, depolarizing=request.depolarizing, shots=request.shots,
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
