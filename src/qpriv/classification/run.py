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

Every input is validated before anything is computed (:mod:`qpriv.classification.request`);
the run's claim and gradient bound are written by :mod:`qpriv.classification.privacy`. With
``out_dir`` the run writes ``config.json`` (what was asked) first and ``result.json`` at the
end, atomically.
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
from qpriv.classification.loader import fit_loaders
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
from qpriv.classification.request import (
    DEFAULT_LR,
    ClassifierRequest,
    check_out_dir,
    load_checked_task,
    validate_request,
)
from qpriv.privacy.randomness import run_seed
from qpriv.privacy.samplers import SecureModeGaussian
from qpriv.quantum.states import amplitude_encode
from qpriv.runs.directory import open_run
from qpriv.runs.files import atomic_write_json
from qpriv.runs.layout import CHECKPOINT_FILE, REFERENCE_FILE, RESULT_FILE
from qpriv.threads import torch_threads
from qpriv.training.seeding import derive_seed, seed_everything
from qpriv.training.trainer import diverged_epoch

_UNCHECKED = ("threads",)
"""Request keys a resumed run may change: they do not change what is computed."""


def train_classifier(
    *, task: str, model: str, clip: float | str | None, batch: int, epochs: int,
    seed: int | None, lr: float = DEFAULT_LR, eps: float | None = None, delta: float = 1e-5,
    optimizer: str = "adam", preclip_noise: float = 0.0, tau: float | None = None,
    n_layers: int | None = None, depolarizing: float = 0.0, shots: int | None = None,
    hidden: Sequence[int] = (32, 32), input_bound: float | None = None,
    bias_bound: float | None = None, image_size: int = DEFAULT_IMAGE_SIZE,
    loader_layers: int = 3, loader_steps: int = 200, unclipped_reference: bool = False,
    diagnostics: bool = True, validation: float | None = None,
    out_dir: str | Path | None = None, resume: bool = False, lr_tuning: dict | None = None,
    threads: int | None = None, progress: bool = False,
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
    request = validate_request(
        task=task, model=model, clip=clip, batch=batch, epochs=epochs, seed=seed, lr=lr,
        eps=eps, delta=delta, optimizer=optimizer, preclip_noise=preclip_noise, tau=tau,
        n_layers=n_layers, depolarizing=depolarizing, shots=shots, hidden=hidden,
        image_size=image_size, loader_layers=loader_layers, loader_steps=loader_steps,
        unclipped_reference=unclipped_reference, validation=validation, threads=threads,
        input_bound=input_bound, bias_bound=bias_bound)
    out = check_out_dir(out_dir, resume=resume)
    with torch_threads(threads) as used_threads:
        prepared = _prepare(request, progress=progress)
        # only once every setting, the accountant's included, is accepted
        finished = open_run(out, prepared.written, resume=resume, ignore=_UNCHECKED)
        if finished is not None:
            return finished
        history, reference_info = _train(prepared, out=out, diagnostics=diagnostics,
                                         progress=progress)
    result = _result(prepared, history, reference_info, lr_tuning=lr_tuning,
                     started=started, threads=used_threads)
    if out is not None:
        atomic_write_json(out / RESULT_FILE, result)
    return result


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


def _prepare(request: ClassifierRequest, *, progress: bool) -> _Prepared:
    """Load and check the data, build the model from the run's seed, resolve C and calibrate
    sigma: everything a run does before it trains or writes anything."""
    data = load_checked_task(request)
    written = {**request.to_json(), "task_data": data.summary()}
    inputs, extra = _model_inputs(request, data)
    seed = run_seed(request.seed)  # a secret one is used and written nowhere
    seed_everything(derive_seed(seed, "model-init"))
    net = _build_model(request, data, generator=torch.Generator().manual_seed(
        derive_seed(seed, "model-init")))
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
                             analytic=constants, secret=request.seed is None)
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
    twin = _build_model(run.request, run.data, generator=None)
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
        kwargs = {"layers_per_level": request.loader_layers,
                  "steps_per_level": request.loader_steps}
        train = fit_loaders(data.x_train, **kwargs)
        test = fit_loaders(data.x_test, **kwargs)
        inputs.update(x_train=train.states, x_test=test.states)
        extra["loader"] = {"train": train.summary(), "test": test.summary()}
    elif request.model == "quantum":
        _, zero_train = amplitude_encode(data.x_train.flatten(1))
        _, zero_test = amplitude_encode(data.x_test.flatten(1))
        extra["zero_norm_inputs"] = {"train": zero_train, "test": zero_test,
                                     "encoded_as": "uniform superposition"}
    return inputs, extra


def _build_model(request: ClassifierRequest, data: ClassificationData, *,
                 generator: torch.Generator | None) -> nn.Module:
    n_features, n_classes, model = data.n_features, data.n_classes, request.model
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
