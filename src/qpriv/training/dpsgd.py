"""DP-SGD (Abadi et al. 2016) as pieces shared by every private trainer in qpriv.

- :func:`per_example_gradients`: the gradient of each example's loss, ``torch.func`` vmap of
  grad over the batch (or one backward pass through per-example copies of the weights, for a
  model that can run them: the quantum classifier), flattened to ``(B, P)``. For the forecaster
  an example is a window (all channels of it): the model keeps the window as the leading axis of
  every tensor, so nothing is ever clipped per (window, channel) pair, which would divide the
  effective noise by the channel count (the trap of Opacus's hooks on a channel-independent
  reshape).
- :func:`clip_and_noise`: clip each row to norm C, sum, add N(0, sigma^2 C^2 I), divide by the
  expected batch size.
- :func:`poisson_batches`: each example joins each batch independently with probability q, the
  sampling that the accountants of :mod:`qpriv.privacy.dpsgd_accounting` assume.
- :class:`DPSGDStrategy`: the :class:`~qpriv.training.trainer.StepStrategy` that makes the one
  trainer loop private, with its accountant state in the checkpoint.

Per-example gradients (Opacus calls them per-sample gradients) are written with ``torch.func``
rather than Opacus's ``GradSampleModule``: the hooks need one registered rule per layer kind and
a parameter used once per forward, while RevIN's affine is applied twice (normalise and
denormalise); vmap of grad is exact for any module. Opacus still supplies the accountants.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping

import torch
from torch import Tensor, nn
from torch.func import functional_call, grad_and_value, vmap

from qpriv.errors import InvalidInputError, require_in_range, require_positive_int
from qpriv.privacy.claims import COVERS_WEIGHTS, Accounting, Kind, PrivacyClaim, Unit
from qpriv.privacy.dpsgd_accounting import ACCOUNTANTS, dpsgd_epsilon
from qpriv.privacy.record_dpsgd import ACCOUNTANT as RECORD_ACCOUNTANT
from qpriv.privacy.record_dpsgd import record_dpsgd_epsilon
from qpriv.privacy.samplers import TORCH_SEEDED, SecureModeGaussian, sampler_note
from qpriv.runs.files import changed_settings
from qpriv.training.trainer import StepStrategy


def trainable_parameters(model: nn.Module) -> dict[str, Tensor]:
    """The parameters that DP-SGD updates (``requires_grad``), detached, by name."""
    return {name: p.detach() for name, p in model.named_parameters() if p.requires_grad}


def per_example_gradient_dict(
    model: nn.Module,
    x: Tensor,
    y: Tensor,
    *,
    loss_fn: Callable[[Tensor, Tensor], Tensor],
    example_kwargs: Mapping[str, Tensor] | None = None,
    chunk_size: int | None = None,
) -> tuple[dict[str, Tensor], Tensor]:
    """Per-example gradients by parameter name (each ``(B, *shape)``) and the losses ``(B,)`` of
    ``loss_fn(model(x_i[None]), y_i[None])``.

    ``example_kwargs`` are per-example keyword tensors (leading axis B) passed to the model
    (e.g. a classifier's sampled read-out noise), each as a batch of one.

    A model with ``forward_per_example(x, parameters, **example_kwargs)`` (outputs of example i
    under its own copy ``parameters[name][i]`` of every trainable tensor, and of nothing else)
    gets its per-example gradients from one ordinary backward pass through those copies instead
    of vmap: the same numbers, without vmap's per-operation cost, which dominates a small
    statevector circuit (benchmarks/per_example_grads.py). torch's own expanded-weights
    (``torch.nn.utils._per_sample_grad``) covers only its built-in layer kinds, not a circuit.
    """
    params = trainable_parameters(model)
    if not params:
        raise InvalidInputError("the model has no trainable parameters")
    if runs_per_example_weights(model):
        return _expanded_weights_gradients(model, params, x, y, loss_fn=loss_fn,
                                           example_kwargs=example_kwargs or {},
                                           chunk_size=chunk_size)
    names = list(example_kwargs or {})

    def loss(p: dict[str, Tensor], xi: Tensor, yi: Tensor, *extra: Tensor) -> Tensor:
        kwargs = {name: value[None] for name, value in zip(names, extra, strict=True)}
        return loss_fn(functional_call(model, p, (xi[None],), kwargs), yi[None])

    extras = [example_kwargs[name] for name in names]
    in_dims = (None, 0, 0, *([0] * len(extras)))
    with warnings.catch_warnings():  # ops without a batching rule (the CPU attention kernel,
        # unfold's backward) run per example: correct, and measured in benchmarks/dpsgd_cost.py
        warnings.filterwarnings("ignore", message="There is a performance drop")
        return vmap(grad_and_value(loss), in_dims=in_dims, chunk_size=chunk_size)(
            params, x, y, *extras
        )


def runs_per_example_weights(model: nn.Module) -> bool:
    """Whether ``model`` has a ``forward_per_example`` that computes what its ``forward`` does:
    both defined by the same class, so that a subclass overriding ``forward`` alone falls back
    to vmap instead of clipping the gradients of another function."""
    if not hasattr(model, "forward_per_example"):
        return False
    owner = {name: next(c for c in type(model).__mro__ if name in vars(c))
             for name in ("forward", "forward_per_example")}
    return owner["forward"] is owner["forward_per_example"]


def _expanded_weights_gradients(
    model: nn.Module, params: dict[str, Tensor], x: Tensor, y: Tensor, *,
    loss_fn: Callable[[Tensor, Tensor], Tensor], example_kwargs: Mapping[str, Tensor],
    chunk_size: int | None,
) -> tuple[dict[str, Tensor], Tensor]:
    """:func:`per_example_gradient_dict` for a model with ``forward_per_example``: each example
    gets its own leaf copy of the parameters, and d(sum_i loss_i) / d(copy_i) is example i's
    gradient because loss_i reads copy i alone."""
    step = x.shape[0] if chunk_size is None else require_positive_int("chunk_size", chunk_size)
    grads: dict[str, list[Tensor]] = {name: [] for name in params}
    losses = []

    def one(output: Tensor, target: Tensor) -> Tensor:
        return loss_fn(output[None], target[None])

    for start in range(0, x.shape[0], max(step, 1)):  # (no pass at all for an empty batch)
        xb, yb = x[start:start + step], y[start:start + step]
        copies = {name: p.expand(xb.shape[0], *p.shape).clone().requires_grad_(True)
                  for name, p in params.items()}
        kwargs = {name: value[start:start + step] for name, value in example_kwargs.items()}
        with torch.enable_grad():
            chunk_losses = vmap(one)(model.forward_per_example(xb, copies, **kwargs), yb)
            chunk_grads = torch.autograd.grad(chunk_losses.sum(), list(copies.values()))
        for name, g in zip(copies, chunk_grads, strict=True):
            grads[name].append(g)
        losses.append(chunk_losses.detach())
    if not losses:  # an empty batch: no rows (vmap refuses one; the callers skip it)
        first = next(iter(params.values()))
        return ({name: p.new_zeros((0, *p.shape)) for name, p in params.items()},
                first.new_zeros(0))
    return {name: torch.cat(parts) for name, parts in grads.items()}, torch.cat(losses)


def per_example_gradients(
    model: nn.Module,
    x: Tensor,
    y: Tensor,
    *,
    loss_fn: Callable[[Tensor, Tensor], Tensor],
    example_kwargs: Mapping[str, Tensor] | None = None,
    chunk_size: int | None = None,
) -> tuple[Tensor, Tensor]:
    """:func:`per_example_gradient_dict` flattened: gradients ``(B, P)`` with the columns in
    ``model.named_parameters()`` order (trainable ones), and the losses ``(B,)``."""
    grads, losses = per_example_gradient_dict(model, x, y, loss_fn=loss_fn,
                                              example_kwargs=example_kwargs,
                                              chunk_size=chunk_size)
    return torch.cat([g.reshape(x.shape[0], -1) for g in grads.values()], dim=1), losses


def per_example_gradients_loop(
    model: nn.Module, x: Tensor, y: Tensor, *, loss_fn: Callable[[Tensor, Tensor], Tensor]
) -> Tensor:
    """The slow twin of :func:`per_example_gradients`: one autograd call per example."""
    params = [p for p in model.parameters() if p.requires_grad]
    rows = []
    for xi, yi in zip(x, y, strict=True):
        loss = loss_fn(model(xi[None]), yi[None])
        rows.append(torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss, params)]))
    return torch.stack(rows)


def clip_factors(norms: Tensor, clip: float | None) -> Tensor:
    """min(1, C / ||g_i||) per example (1 without clipping; 1 for a zero gradient)."""
    if clip is None:
        return torch.ones_like(norms)
    clip = require_in_range("clip", clip, low=0.0, hint="the clipping threshold C is > 0")
    return torch.clamp(clip / norms.clamp(min=torch.finfo(norms.dtype).tiny), max=1.0)


def clip_and_noise(
    grads: Mapping[str, Tensor] | None,
    *,
    shapes: Mapping[str, torch.Size],
    clip: float | None,
    noise_multiplier: float,
    denominator: float,
    generator: torch.Generator | SecureModeGaussian,
) -> tuple[dict[str, Tensor], float]:
    """The privatised mean gradient of one batch, by name, and the fraction of examples clipped.

    ``(sum_i clip_C(g_i) + N(0, sigma^2 C^2 I)) / denominator``, where ``g_i`` is example i's
    gradient over every entry of ``grads`` (name -> ``(B, *shape)``) together, so the norm
    that is clipped is the whole per-example gradient's. ``grads`` None (an empty Poisson
    batch) still releases the noise, shaped by ``shapes``. ``denominator`` is the expected batch
    size q N under Poisson sampling (as Opacus divides), the real size otherwise. Works on the
    per-parameter tensors as they come, without a (B, P) copy. With a threshold, an example whose
    gradient is not finite (an overflow) is dropped, counted as clipped, so that the sum still
    moves by at most C per example. ``generator``: torch's (seeded) or, for a release, a
    :class:`qpriv.privacy.samplers.SecureModeGaussian` (cryptographic).
    """
    if grads is None or next(iter(grads.values())).shape[0] == 0:
        total = {name: torch.zeros(shape) for name, shape in shapes.items()}
        clipped = 0.0
    else:
        # per-parameter row norms, then the norm of those: no squared (B, P) temporary
        norms = torch.linalg.vector_norm(torch.stack(
            [torch.linalg.vector_norm(g.reshape(g.shape[0], -1), dim=1) for g in grads.values()],
            dim=1), dim=1)
        factors = clip_factors(norms, clip)
        finite = torch.isfinite(norms)
        if clip is not None and not bool(finite.all()):
            # an example whose gradient overflowed: C / inf is 0 but 0 * inf is nan, so clipping
            # alone would let that one example turn the released sum into nan (a change no
            # noise covers); its gradient is dropped instead, which moves the sum by 0 <= C
            factors = torch.where(finite, factors, torch.zeros_like(factors))
            grads = {name: torch.where(finite.view(-1, *([1] * (g.dim() - 1))), g,
                                       torch.zeros((), dtype=g.dtype, device=g.device))
                     for name, g in grads.items()}
        total = {name: torch.tensordot(factors, g, dims=1) for name, g in grads.items()}
        clipped = float((factors < 1).float().mean())
    if noise_multiplier > 0:
        if clip is None:
            raise InvalidInputError("noise needs a clipping threshold: its scale is sigma * C")
        scale = noise_multiplier * clip
        total = {name: t + scale * _standard_normal(t, generator) for name, t in total.items()}
    return {name: t / denominator for name, t in total.items()}, clipped


def _standard_normal(like: Tensor, generator: torch.Generator | SecureModeGaussian) -> Tensor:
    """N(0, 1) noise shaped, typed and placed like ``like``."""
    if isinstance(generator, SecureModeGaussian):  # float64 draws, rounded once to the dtype
        return torch.from_numpy(generator.standard_normal(tuple(like.shape))).to(
            dtype=like.dtype, device=like.device)
    # drawn where the generator lives (a CPU generator cannot fill a CUDA tensor), then moved:
    # on the CPU the same numbers as before
    return torch.randn(like.shape, generator=generator, dtype=like.dtype,
                       device=generator.device).to(like.device)


def assign_flat_gradient(model: nn.Module, flat: Tensor) -> None:
    """Write ``flat`` (in ``named_parameters`` order) into the ``.grad`` of the trainable
    parameters."""
    offset = 0
    for p in model.parameters():
        if not p.requires_grad:
            continue
        size = p.numel()
        p.grad = flat[offset:offset + size].view_as(p).to(p.dtype)
        offset += size


def poisson_batches(
    n: int, *, sample_rate: float, steps: int, generator: torch.Generator
) -> list[Tensor]:
    """``steps`` batches, each holding every index independently with probability q."""
    return [torch.nonzero(torch.rand(n, generator=generator) < sample_rate).flatten()
            for _ in range(steps)]


PER_EXAMPLE_CHUNK = 64
"""Windows per vmap call in a DP-SGD step (:class:`DPSGDStrategy`'s ``chunk_size``): bounds
the memory a batch's per-example activations take at once, never the batch. Measured on the
transformer at L = 336 (ETTh1, 7 channels), six Poisson batches of about 512 windows (the batch
of ``dpsgd-tuned``), one thread, the trainer's allocator setting (:mod:`qpriv.allocator`): peak
RSS 9.0 GB in one call against 3.7 GB in chunks of 64, 21 % faster, the same per-example
gradients (bit for bit where measured: that model at 512 windows, and the test's). Two
such runs in one go no longer exceed a 24 GB machine."""


class DPSGDStrategy(StepStrategy):
    """DP-SGD for the trainer: Poisson batches at rate q, per-window clipping at C, Gaussian
    noise sigma C on the sum, division by the expected batch size qN.

    ``noise_multiplier`` comes from :func:`qpriv.privacy.dpsgd_accounting.noise_multiplier_for`
    for the run's (eps, delta, q, steps); the steps taken are counted and the epsilon spent is
    read back from the accountant in :meth:`report`. The batches are drawn from the trainer's
    seeded shuffle generator; ``seed`` seeds the Gaussian noise, or ``secure`` (a release: the
    run's seed is secret) draws it from a cryptographic generator instead
    (:class:`qpriv.privacy.samplers.SecureModeGaussian`); the claim names which. Both states
    go into the checkpoint. ``windows_per_record`` (k) states the guarantee at the record unit
    instead of the window unit: the eps is then
    :func:`qpriv.privacy.record_dpsgd.record_dpsgd_epsilon` for a record held by k windows (and
    ``noise_multiplier`` must have been calibrated so). ``chunk_size``: windows per vmap call
    (:data:`PER_EXAMPLE_CHUNK`; None: the whole batch in one), memory only.
    """

    name = "dpsgd"
    draws_ahead = False  # the model is called per window, inside vmap

    def __init__(
        self, *, clip: float, noise_multiplier: float, sample_rate: float,
        steps_per_epoch: int, delta: float, seed: int, accountant: str = "rdp",
        target_eps: float | None = None, chunk_size: int | None = PER_EXAMPLE_CHUNK,
        secure: bool = False,
        windows_per_record: int | None = None,
    ) -> None:
        self.clip = require_in_range("clip", clip, low=0.0, hint="the clipping norm C is > 0")
        self.noise_multiplier = require_in_range("noise_multiplier", noise_multiplier, low=0.0,
                                                 low_inclusive=True)
        self.sample_rate = require_in_range("sample_rate", sample_rate, low=0.0, high=1.0)
        self.steps_per_epoch = require_positive_int("steps_per_epoch", steps_per_epoch)
        self.delta = delta
        self.accountant = accountant
        self.target_eps = target_eps
        self.chunk_size = chunk_size
        self.windows_per_record = (None if windows_per_record is None else
                                   require_positive_int("windows_per_record",
                                                        windows_per_record))
        self.steps = 0
        self.clipped: list[float] = []
        self.noise: torch.Generator | SecureModeGaussian = (
            SecureModeGaussian() if secure else torch.Generator().manual_seed(int(seed)))
        self.noise_sampler = SecureModeGaussian.name if secure else TORCH_SEEDED

    def batches(self, n_train: int, *, batch_size: int, generator: torch.Generator
                ) -> list[Tensor]:
        return poisson_batches(n_train, sample_rate=self.sample_rate,
                               steps=self.steps_per_epoch, generator=generator)

    def step(self, model: nn.Module, x: Tensor, y: Tensor, *, optimizer: torch.optim.Optimizer,
             scaler: torch.amp.GradScaler, amp: bool,
             loss: Callable[[Tensor, Tensor], Tensor], noise: object | None = None) -> Tensor:
        params = dict(model.named_parameters())
        shapes = {name: p.shape for name, p in params.items() if p.requires_grad}
        grads, losses = (None, None) if x.shape[0] == 0 else per_example_gradient_dict(
            model, x, y, loss_fn=loss, chunk_size=self.chunk_size)
        update, clipped = clip_and_noise(
            grads, shapes=shapes, clip=self.clip, noise_multiplier=self.noise_multiplier,
            denominator=self.sample_rate * self._n_train, generator=self.noise)
        optimizer.zero_grad(set_to_none=True)
        for name, value in update.items():
            params[name].grad = value.to(params[name].device, params[name].dtype)
        optimizer.step()
        self.steps += 1
        self.clipped.append(clipped)
        return losses.mean().detach() if losses is not None else torch.zeros(())

    def prepare(self, model: nn.Module, optimizer: torch.optim.Optimizer, *, n_train: int,
                batch_size: int) -> tuple[nn.Module, torch.optim.Optimizer]:
        self._n_train = n_train
        return model, optimizer

    def settings(self) -> dict:
        """What the accountant reads besides the steps: a checkpoint of other settings would
        count its steps at the wrong sigma or q."""
        record = ({} if self.windows_per_record is None
                  else {"windows_per_record": self.windows_per_record})
        return {"clip": self.clip, "noise_multiplier": self.noise_multiplier,
                "sample_rate": self.sample_rate, "steps_per_epoch": self.steps_per_epoch,
                "delta": self.delta, "accountant": self.accountant, **record}

    def state_dict(self) -> dict:
        return {"steps": self.steps, "noise": self.noise.get_state(), "clipped": self.clipped,
                "settings": self.settings()}

    def load_state_dict(self, state: dict) -> None:
        # a checkpoint written before the settings were stored cannot be checked here (the
        # run's config.json still is, by open_run)
        changed = ("settings" in state
                   and changed_settings(state["settings"], self.settings()))
        if changed:
            raise InvalidInputError(f"it was written by a run with other DP-SGD settings "
                                    f"({changed})")
        if isinstance(self.noise, SecureModeGaussian) != isinstance(state["noise"], dict):
            raise InvalidInputError("its DP-SGD noise came from another sampler (a secret-seed "
                                    "run before the cryptographic one, or a seeded run); "
                                    "start the run again")
        self.steps = int(state["steps"])
        self.noise.set_state(state["noise"])
        self.clipped = list(state["clipped"])

    def report(self) -> dict:
        """The strategy's settings and the privacy spent so far, labelled."""
        spent = (self._spent() if self.steps and self.noise_multiplier > 0 else None)
        if self.windows_per_record is None:
            unit, accountant = Unit.WINDOW, ACCOUNTANTS[self.accountant]
            neighbourhood = "add or remove one training window (all its channels)"
        else:
            unit, accountant = Unit.RECORD, RECORD_ACCOUNTANT
            neighbourhood = (f"replace one value of one channel at one time step, held by up "
                             f"to k = {self.windows_per_record} training windows")
        return {
            "strategy": self.name,
            "clip": self.clip,
            "sample_rate": self.sample_rate,
            "steps": self.steps,
            "clipped_fraction": sum(self.clipped) / max(len(self.clipped), 1),
            "noise_multiplier": {"value": self.noise_multiplier, "kind": "DP-SGD noise "
                                 "multiplier", "accounting": "rigorous",
                                 "accountant": accountant},
            "eps": PrivacyClaim(
                value=spent, delta=self.delta, kind=Kind.GLOBAL_DP,
                accounting=Accounting.RIGOROUS, unit=unit, covers=COVERS_WEIGHTS,
                notes=(sampler_note(self.noise_sampler),),
                details={"target": self.target_eps, "accountant": accountant,
                         "noise_sampler": self.noise_sampler,
                         "neighbourhood": neighbourhood,
                         "sampling": f"Poisson, rate q = {self.sample_rate:.6g}"},
            ).to_json(),
        }

    def _spent(self) -> float:
        if self.windows_per_record is None:
            return dpsgd_epsilon(noise_multiplier=self.noise_multiplier,
                                 sample_rate=self.sample_rate, steps=self.steps,
                                 delta=self.delta, accountant=self.accountant)
        return record_dpsgd_epsilon(noise_multiplier=self.noise_multiplier,
                                    sample_rate=self.sample_rate, steps=self.steps,
                                    windows_per_record=self.windows_per_record,
                                    delta=self.delta)
