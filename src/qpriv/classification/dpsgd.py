"""DP-SGD for the classifiers: per-example gradients, clipping, noise, accounting, diagnostics.

The update of the private-training paper (section 3.1, steps 1-5; Abadi et al. 2016):

1. draw a batch B; compute every per-example gradient g_i (``torch.func``: vmap of grad);
2. optionally add pre-clipping noise g_i + N(0, s^2 I) (the symmetrisation the paper cites);
3. clip, c_i = g_i min(1, C / ||g_i||);
4. sum, add N(0, sigma^2 C^2 I), divide by the batch size (by the expected size qN under
   Poisson sampling, as Opacus does);
5. hand the result to the optimizer as the gradient (post-processing).

The noise multiplier sigma comes from Opacus's RDP accountant for the real sample rate
q = |B| / N, number of steps and delta (:func:`noise_multiplier_for`); the epsilon actually
spent is read back from the same accountant (:func:`rdp_epsilon`). Privacy needs Poisson
sampling (the accountant's assumption), so a private run samples that way; a run without noise
(clipping only, the paper's Figure 2 setting, or no clipping at all) shuffles fixed-size batches.

After every epoch :func:`train_dpsgd` records the diagnostics of
:mod:`qpriv.classification.diagnostics` over every training example's gradient, plus the
training loss, accuracies and, when given, the distance from an unclipped run's loss.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F  # noqa: N812 (the PyTorch idiom)
from torch import Tensor, nn
from torch.func import functional_call, grad, vmap

from qpriv.classification.diagnostics import clip_factors, gradient_diagnostics
from qpriv.errors import InvalidInputError, require_in_range, require_positive_int

ACCOUNTANT = "opacus.accountants.RDPAccountant"
OPTIMIZERS = ("sgd", "adam")
RDP_ORDERS = [1 + x / 10.0 for x in range(1, 100)] + list(range(12, 64)) + [
    64, 80, 96, 128, 160, 192, 256, 384, 512, 768, 1024]
"""RDP orders: Opacus's default grid (1.1 .. 63) extended to 1024, so that large budgets
(eps ~ 10 over few steps), whose optimal order lies above 63, are not converted loosely."""


# -- per-example gradients ------------------------------------------------------------------------


def trainable_parameters(model: nn.Module) -> dict[str, Tensor]:
    """The parameters that DP-SGD updates (``requires_grad``), detached, by name."""
    return {name: p.detach() for name, p in model.named_parameters() if p.requires_grad}


def _example_loss(model: nn.Module, params: dict[str, Tensor], x: Tensor, y: Tensor,
                  noise: Tensor | None) -> Tensor:
    kwargs = {} if noise is None else {"readout_noise": noise[None]}
    logits = functional_call(model, params, (x[None],), kwargs)
    return F.cross_entropy(logits, y[None])


def per_example_gradients(
    model: nn.Module, x: Tensor, y: Tensor, *, readout_noise: Tensor | None = None,
    chunk_size: int | None = None,
) -> Tensor:
    """Gradients of the per-example cross-entropy, flattened: (B, P) float32.

    ``torch.func.vmap(torch.func.grad(loss))`` over the examples, the parameters shared. The
    column order is that of ``model.named_parameters()`` (trainable ones), each flattened.
    ``readout_noise`` (B, K) is passed to models with sampled read-out.
    """
    params = trainable_parameters(model)
    if not params:
        raise InvalidInputError("the model has no trainable parameters")

    def loss(p: dict[str, Tensor], xi: Tensor, yi: Tensor, ni: Tensor | None) -> Tensor:
        return _example_loss(model, p, xi, yi, ni)

    noise_dim = None if readout_noise is None else 0
    grads = vmap(grad(loss), in_dims=(None, 0, 0, noise_dim), chunk_size=chunk_size)(
        params, x, y, readout_noise
    )
    return torch.cat([g.reshape(x.shape[0], -1) for g in grads.values()], dim=1)


def per_example_gradients_loop(model: nn.Module, x: Tensor, y: Tensor) -> Tensor:
    """The slow twin of :func:`per_example_gradients`: one autograd call per example."""
    params = [p for p in model.parameters() if p.requires_grad]
    rows = []
    for xi, yi in zip(x, y, strict=True):
        loss = F.cross_entropy(model(xi[None]), yi[None])
        rows.append(torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss, params)]))
    return torch.stack(rows)


def _assign_gradient(model: nn.Module, flat: Tensor) -> None:
    offset = 0
    for p in model.parameters():
        if not p.requires_grad:
            continue
        size = p.numel()
        p.grad = flat[offset:offset + size].view_as(p).to(p.dtype)
        offset += size


# -- accounting -----------------------------------------------------------------------------------


def noise_multiplier_for(*, eps: float, delta: float, sample_rate: float, steps: int) -> float:
    """sigma for (eps, delta)-DP after ``steps`` Poisson-subsampled Gaussian steps at rate q.

    Opacus's ``get_noise_multiplier`` with the RDP accountant (``accountant="rdp"``) over the
    orders :data:`RDP_ORDERS`.
    """
    from opacus.accountants.utils import get_noise_multiplier

    eps = require_in_range("eps", eps, low=0.0, hint="a privacy budget must be > 0")
    delta = require_in_range("delta", delta, low=0.0, high=1.0, high_inclusive=False,
                             hint="delta is a probability in (0, 1), typically 1e-5")
    q = require_in_range("sample_rate", sample_rate, low=0.0, high=1.0)
    steps = require_positive_int("steps", steps)
    with warnings.catch_warnings():  # the search visits tiny sigmas whose best order is the
        # largest; the sigma it returns is checked by rdp_epsilon, which does warn
        warnings.filterwarnings("ignore", message="Optimal order is the largest alpha")
        return float(get_noise_multiplier(target_epsilon=eps, target_delta=delta,
                                          sample_rate=q, steps=steps, accountant="rdp",
                                          alphas=RDP_ORDERS))


def rdp_epsilon(*, noise_multiplier: float, sample_rate: float, steps: int, delta: float
                ) -> float:
    """The epsilon that Opacus's RDP accountant gives for ``steps`` steps (sigma, q), at delta."""
    from opacus.accountants import RDPAccountant

    accountant = RDPAccountant()
    accountant.history = [(float(noise_multiplier), float(sample_rate), int(steps))]
    return float(accountant.get_epsilon(delta=delta, alphas=RDP_ORDERS))


# -- the training loop ----------------------------------------------------------------------------


@dataclass(frozen=True)
class DPSGDConfig:
    """One DP-SGD run. ``clip`` None: no clipping; ``noise_multiplier`` 0: no noise.

    ``sampling`` is ``poisson`` (rate batch_size / N, needed for the accountant) or
    ``shuffle`` (fixed-size batches of a permutation); ``preclip_noise`` is the standard
    deviation s of the optional noise added to each g_i before clipping.
    """

    batch_size: int
    epochs: int
    lr: float
    clip: float | None = 1.0
    noise_multiplier: float = 0.0
    preclip_noise: float = 0.0
    sampling: str = "shuffle"
    optimizer: str = "adam"
    momentum: float = 0.0

    def __post_init__(self) -> None:
        require_positive_int("batch_size", self.batch_size)
        require_positive_int("epochs", self.epochs)
        require_in_range("lr", self.lr, low=0.0)
        if self.clip is not None:
            require_in_range("clip", self.clip, low=0.0, hint="the clipping threshold C is > 0")
        require_in_range("noise_multiplier", self.noise_multiplier, low=0.0, low_inclusive=True)
        require_in_range("preclip_noise", self.preclip_noise, low=0.0, low_inclusive=True)
        require_in_range("momentum", self.momentum, low=0.0, high=1.0, low_inclusive=True,
                         high_inclusive=False)
        if self.sampling not in ("poisson", "shuffle"):
            raise InvalidInputError(
                f"sampling = {self.sampling!r} is not one of ('poisson', 'shuffle')"
            )
        if self.optimizer not in OPTIMIZERS:
            raise InvalidInputError(f"optimizer = {self.optimizer!r} is not one of {OPTIMIZERS}")
        if self.noise_multiplier > 0 and self.clip is None:
            raise InvalidInputError(
                "noise needs a clipping threshold: the noise scale is sigma * C"
            )
        if self.noise_multiplier > 0 and self.sampling != "poisson":
            raise InvalidInputError(
                "a private run (noise_multiplier > 0) must use Poisson sampling, which the RDP "
                "accountant assumes"
            )

    def steps_per_epoch(self, n_train: int) -> int:
        """Batches per epoch: round(N / batch_size), at least 1."""
        return max(1, round(n_train / self.batch_size))

    def as_dict(self) -> dict:
        return asdict(self)


def _make_optimizer(model: nn.Module, config: DPSGDConfig) -> torch.optim.Optimizer:
    params = [p for p in model.parameters() if p.requires_grad]
    if config.optimizer == "sgd":
        return torch.optim.SGD(params, lr=config.lr, momentum=config.momentum)
    return torch.optim.Adam(params, lr=config.lr)


def _batches(n: int, config: DPSGDConfig, generator: torch.Generator) -> list[Tensor]:
    if config.sampling == "poisson":
        rate = config.batch_size / n
        return [torch.nonzero(torch.rand(n, generator=generator) < rate).flatten()
                for _ in range(config.steps_per_epoch(n))]
    perm = torch.randperm(n, generator=generator)
    return list(perm.split(config.batch_size))


def dp_step(
    model: nn.Module, optimizer: torch.optim.Optimizer, x: Tensor, y: Tensor, *,
    config: DPSGDConfig, generator: torch.Generator,
) -> dict[str, float]:
    """One DP-SGD update on the batch (x, y); returns the batch's clipping statistics.

    ``generator`` draws the shots of a sampled read-out, the pre-clipping noise and the
    Gaussian noise of the mechanism.
    """
    n_params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    if x.shape[0] == 0:  # an empty Poisson batch still releases the noise
        total = torch.zeros(n_params)
        clipped_fraction = 0.0
    else:
        noise = (model.draw_readout_noise(x, generator=generator)
                 if hasattr(model, "draw_readout_noise") else None)
        grads = per_example_gradients(model, x, y, readout_noise=noise)
        if config.preclip_noise > 0:
            grads = grads + config.preclip_noise * torch.randn(
                grads.shape, generator=generator, dtype=grads.dtype)
        factors = clip_factors(grads.norm(dim=1), config.clip)
        total = (grads * factors[:, None]).sum(dim=0)
        clipped_fraction = float((factors < 1).float().mean())
    if config.noise_multiplier > 0:
        total = total + config.noise_multiplier * config.clip * torch.randn(
            n_params, generator=generator, dtype=total.dtype)
    denom = config.batch_size if config.sampling == "poisson" else max(x.shape[0], 1)
    optimizer.zero_grad(set_to_none=True)
    _assign_gradient(model, total / denom)
    optimizer.step()
    return {"batch_clip_fraction": clipped_fraction}


@torch.no_grad()
def evaluate(model: nn.Module, x: Tensor, y: Tensor, *, batch_size: int = 1024,
             generator: torch.Generator | None = None) -> dict[str, float]:
    """Mean cross-entropy and accuracy on (x, y).

    Models with sampled read-out draw their shots from ``generator`` (exact read-out when it is
    None). The model stays in training mode (see :class:`qpriv.classification.models.
    LipschitzMLP`: no model here behaves differently otherwise).
    """
    loss, correct = 0.0, 0
    for start in range(0, x.shape[0], batch_size):
        xb, yb = x[start:start + batch_size], y[start:start + batch_size]
        noise = (model.draw_readout_noise(xb, generator=generator)
                 if generator is not None and hasattr(model, "draw_readout_noise") else None)
        logits = model(xb) if noise is None else model(xb, readout_noise=noise)
        loss += float(F.cross_entropy(logits, yb, reduction="sum"))
        correct += int((logits.argmax(dim=1) == yb).sum())
    n = max(x.shape[0], 1)
    return {"loss": loss / n, "accuracy": correct / n}


def epoch_diagnostics(
    model: nn.Module, x: Tensor, y: Tensor, *, config: DPSGDConfig, chunk_size: int = 256,
) -> dict[str, float]:
    """The gradient diagnostics over every example of (x, y) at the current parameters.

    Exact read-out (no shot noise) and no pre-clipping noise: the statistics describe the
    deterministic per-example gradient field that clipping acts on.
    """
    grads = torch.cat([
        per_example_gradients(model, x[s:s + chunk_size], y[s:s + chunk_size])
        for s in range(0, x.shape[0], chunk_size)
    ])
    return gradient_diagnostics(grads, clip=config.clip, batch_size=config.batch_size,
                                noise_multiplier=config.noise_multiplier,
                                sampling=config.sampling)


def train_dpsgd(
    model: nn.Module,
    *,
    x_train: Tensor,
    y_train: Tensor,
    x_test: Tensor,
    y_test: Tensor,
    config: DPSGDConfig,
    batch_generator: torch.Generator,
    noise_generator: torch.Generator,
    eval_generator_seed: int | None = None,
    reference_losses: list[float] | None = None,
    diagnostics: bool = True,
    on_epoch: Callable[[dict], None] | None = None,
) -> list[dict]:
    """Train ``model`` with DP-SGD for ``config.epochs`` epochs; return one record per epoch.

    ``batch_generator`` draws the batches and ``noise_generator`` the shots and noise, so a
    run without noise sees the same batches as a noised one. ``eval_generator_seed`` seeds
    the shots of every test evaluation (the same draws each epoch) for models with sampled
    read-out; the training loss and accuracy use the exact read-out.
    ``reference_losses[e]`` is the training loss of an unclipped, noiseless run after epoch e+1
    (same initialisation and batches); the record then holds the distance from it.
    Each record: ``epoch``, ``train_loss``, ``train_accuracy``, ``test_accuracy``,
    ``seconds``, ``batch_clip_fraction`` (mean over the epoch's batches) and, with
    ``diagnostics``, every statistic of :func:`epoch_diagnostics`.
    """
    n_train = x_train.shape[0]
    if n_train < 1:
        raise InvalidInputError("the training set is empty")
    if reference_losses is not None and len(reference_losses) < config.epochs:
        raise InvalidInputError(
            f"reference_losses has {len(reference_losses)} epochs; the run has {config.epochs}"
        )
    model.train()
    optimizer = _make_optimizer(model, config)
    history = []
    for epoch in range(1, config.epochs + 1):
        tic = time.perf_counter()
        fractions = []
        for index in _batches(n_train, config, batch_generator):
            stats = dp_step(model, optimizer, x_train[index], y_train[index], config=config,
                            generator=noise_generator)
            fractions.append(stats["batch_clip_fraction"])
        seconds = time.perf_counter() - tic
        record: dict = {"epoch": epoch, "seconds": seconds,
                        "batch_clip_fraction": sum(fractions) / max(len(fractions), 1)}
        eval_gen = (None if eval_generator_seed is None
                    else torch.Generator().manual_seed(eval_generator_seed))
        train_eval = evaluate(model, x_train, y_train)
        test_eval = evaluate(model, x_test, y_test, generator=eval_gen)
        record.update(train_loss=train_eval["loss"], train_accuracy=train_eval["accuracy"],
                      test_loss=test_eval["loss"], test_accuracy=test_eval["accuracy"])
        if reference_losses is not None:
            ref = reference_losses[epoch - 1]
            record.update(unclipped_train_loss=ref,
                          distance_from_unclipped_loss=abs(train_eval["loss"] - ref))
        if diagnostics:
            record.update(epoch_diagnostics(model, x_train, y_train, config=config))
        if not all(math.isfinite(v) for v in record.values() if isinstance(v, float)):
            record["non_finite"] = True
        history.append(record)
        if on_epoch is not None:
            on_epoch(record)
    return history
