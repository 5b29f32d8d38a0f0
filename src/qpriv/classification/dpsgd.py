"""DP-SGD for the classifiers: per-example gradients, clipping, noise, accounting, diagnostics.

The update of the private-training paper (section 3.1, steps 1-5; Abadi et al. 2016, "Deep
Learning with Differential Privacy", Algorithm 1):

1. draw a batch B; compute every per-example gradient g_i (``torch.func``: vmap of grad, or
   the quantum classifier's per-example copies of its angles);
2. optionally add pre-clipping noise g_i + N(0, s^2 I) (the symmetrisation the paper cites);
3. clip, c_i = g_i min(1, C / ||g_i||);
4. sum, add N(0, sigma^2 C^2 I), divide by the batch size (by the expected size qN under
   Poisson sampling, as Opacus does);
5. hand the result to the optimizer as the gradient (post-processing); a model with a
   constraint set (``project``, :class:`qpriv.classification.models.ProjectedLipschitzMLP`)
   is projected back onto it after every step.

Clipless DP-SGD (``clip="analytic"`` at the front door) is the same update with C set to the
model's analytic bound Delta on every per-example gradient norm: the noise is sigma Delta, and
the clipping in step 3 is not meant to act (the figures' runs measure p_clip = 0 at every
step); it stays as a guard, so that the sum's sensitivity is Delta even where float32 rounding
nudges a norm past the bound (by up to about 2e-7 relative in a construction where every
inequality of the bound is tight), and a run whose guard acted says so in its claim.

The noise multiplier sigma comes from Opacus's RDP accountant for the real sample rate
q = |B| / N, number of steps and delta
(:func:`qpriv.privacy.dpsgd_accounting.noise_multiplier_for`); the epsilon actually spent is read
back from the same accountant (:func:`qpriv.privacy.dpsgd_accounting.dpsgd_epsilon`). Privacy
needs Poisson sampling (the accountant's assumption), so a private run samples that way; a run
without noise (clipping only, the paper's Figure 2 setting, or no clipping at all) shuffles
fixed-size batches.

The classifiers train in the one loop of qpriv, :class:`qpriv.training.trainer.Trainer`, with
two injected pieces: :class:`DPSGDStep`, the step above on batches drawn from the run's batch
generator (it owns that generator and the noise generator, so both go into the trainer's
checkpoint and a killed run resumes to the same result), and :class:`ClassifierRecipe`, which
builds the optimizer (SGD or Adam, no schedule), keeps the last epoch's weights, and after every
epoch records the training loss, the accuracies, the diagnostics of
:mod:`qpriv.classification.diagnostics` over every training example's gradient and, when
given, the distance from an unclipped run's loss. :func:`train_dpsgd` assembles the two.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F  # noqa: N812 (the PyTorch idiom)
from torch import Tensor, nn

from qpriv.classification.diagnostics import gradient_diagnostics
from qpriv.errors import InvalidInputError, require_in_range, require_positive_int
from qpriv.privacy.samplers import SecureModeGaussian
from qpriv.runs.files import changed_settings
from qpriv.runs.layout import CHECKPOINT_FILE
from qpriv.training import dpsgd as training_dpsgd
from qpriv.training.dpsgd import assign_flat_gradient, clip_and_noise, poisson_batches
from qpriv.training.trainer import Recipe, StepStrategy, TrainConfig, Trainer

__all__ = ["ClassifierRecipe", "DPSGDConfig", "DPSGDStep", "Examples", "dp_step",
           "epoch_diagnostics", "evaluate", "per_example_gradients",
           "per_example_gradients_loop", "train_dpsgd"]

OPTIMIZERS = ("sgd", "adam")


# -- per-example gradients ------------------------------------------------------------------------


def per_example_gradients(
    model: nn.Module, x: Tensor, y: Tensor, *, readout_noise: Tensor | None = None,
    chunk_size: int | None = None,
) -> Tensor:
    """Gradients of the per-example cross-entropy, flattened: (B, P) float32.

    The classifiers' instance of :func:`qpriv.training.dpsgd.per_example_gradients` (which
    takes any loss and also returns the losses): the cross-entropy, the gradients alone;
    ``readout_noise`` (B, K) is passed to models with sampled read-out.
    """
    extra = None if readout_noise is None else {"readout_noise": readout_noise}
    grads, _ = training_dpsgd.per_example_gradients(
        model, x, y, loss_fn=F.cross_entropy, example_kwargs=extra, chunk_size=chunk_size)
    return grads


def per_example_gradients_loop(model: nn.Module, x: Tensor, y: Tensor) -> Tensor:
    """The slow twin of :func:`per_example_gradients`: one autograd call per example."""
    return training_dpsgd.per_example_gradients_loop(model, x, y, loss_fn=F.cross_entropy)


# -- the training loop ----------------------------------------------------------------------------


MAX_LR = 1e6
LR_HINT = ("a larger rate only overflows the float32 weights (Adam's step fails outright near "
           "1e37); give a rate such as 0.01-1")


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
        require_in_range("lr", self.lr, low=0.0, high=MAX_LR, hint=LR_HINT)
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

    def sample_rate(self, n_train: int) -> float:
        """Poisson sampling rate q = batch_size / N, the one the accountant is given."""
        return self.batch_size / n_train

    def as_dict(self) -> dict:
        return asdict(self)


def _make_optimizer(model: nn.Module, config: DPSGDConfig) -> torch.optim.Optimizer:
    params = [p for p in model.parameters() if p.requires_grad]
    if config.optimizer == "sgd":
        return torch.optim.SGD(params, lr=config.lr, momentum=config.momentum)
    return torch.optim.Adam(params, lr=config.lr)


def _batches(n: int, config: DPSGDConfig, generator: torch.Generator) -> list[Tensor]:
    if config.sampling == "poisson":
        return poisson_batches(n, sample_rate=config.sample_rate(n),
                               steps=config.steps_per_epoch(n), generator=generator)
    perm = torch.randperm(n, generator=generator)
    return list(perm.split(config.batch_size))


def dp_step(
    model: nn.Module, optimizer: torch.optim.Optimizer, x: Tensor, y: Tensor, *,
    config: DPSGDConfig, generator: torch.Generator,
    loss_fn: Callable[[Tensor, Tensor], Tensor] = F.cross_entropy,
    secure_noise: SecureModeGaussian | None = None,
) -> dict[str, float]:
    """One DP-SGD update on the batch (x, y) of ``loss_fn`` per example (the classifiers':
    cross-entropy of the logits); returns the batch's clipping statistics and its mean loss
    before the update (``loss``; 0 for an empty batch).

    ``generator`` draws the shots of a sampled read-out, the pre-clipping noise and the
    Gaussian noise of the mechanism; ``secure_noise`` (a release) draws the mechanism's noise
    instead, from a cryptographic generator.
    """
    n_params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    grads, loss = None, 0.0
    if x.shape[0] > 0:  # an empty Poisson batch still releases the noise
        noise = (model.draw_readout_noise(x, generator=generator)
                 if hasattr(model, "draw_readout_noise") else None)
        grads, losses = training_dpsgd.per_example_gradients(
            model, x, y, loss_fn=loss_fn,
            example_kwargs=None if noise is None else {"readout_noise": noise})
        loss = float(losses.mean())
        if config.preclip_noise > 0:
            grads = grads + config.preclip_noise * torch.randn(
                grads.shape, generator=generator, dtype=grads.dtype)
    denom = config.batch_size if config.sampling == "poisson" else max(x.shape[0], 1)
    update, clipped_fraction = clip_and_noise(
        None if grads is None else {"all": grads}, shapes={"all": torch.Size([n_params])},
        clip=config.clip, noise_multiplier=config.noise_multiplier, denominator=denom,
        generator=generator if secure_noise is None else secure_noise)
    optimizer.zero_grad(set_to_none=True)
    assign_flat_gradient(model, update["all"])
    optimizer.step()
    if hasattr(model, "project"):  # back onto the constraint set the gradient bound assumes
        model.project()
    return {"batch_clip_fraction": clipped_fraction, "loss": loss}


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
        # a row of logits that is not finite predicts no class (argmax would call it class 0)
        predicted = (logits.argmax(dim=1) == yb) & torch.isfinite(logits).all(dim=1)
        correct += int(predicted.sum())
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


class Examples:
    """Classification examples as the trainer fetches them: ``index`` -> ``(x[index],
    y[index])``."""

    def __init__(self, x: Tensor, y: Tensor) -> None:
        self.x, self.y = x, y

    def __len__(self) -> int:
        return self.x.shape[0]

    def windows(self, index: Tensor) -> tuple[Tensor, Tensor]:
        return self.x[index], self.y[index]


class DPSGDStep(StepStrategy):
    """The classifiers' DP-SGD as the trainer's step: :func:`dp_step` on the batches of the
    run's ``batch_generator`` (Poisson or shuffled, by ``config.sampling``), with the shots and
    noise drawn from ``noise_generator`` (the mechanism's noise from ``secure_noise`` where a
    release gives one: :class:`qpriv.privacy.samplers.SecureModeGaussian`).

    Its state (settings and both generators) goes into the trainer's checkpoint; a checkpoint
    of other settings is refused. ``clip_fractions`` holds each batch's clipped fraction of
    the current epoch.
    """

    name = "dpsgd-classifier"

    def __init__(self, config: DPSGDConfig, *, batch_generator: torch.Generator,
                 noise_generator: torch.Generator,
                 secure_noise: SecureModeGaussian | None = None) -> None:
        self.config = config
        self.batch_generator = batch_generator
        self.noise_generator = noise_generator
        self.secure_noise = secure_noise
        self.clip_fractions: list[float] = []

    def batches(self, n_train: int, *, batch_size: int, generator: torch.Generator
                ) -> list[Tensor]:
        """The epoch's batches from the run's own batch generator (not the trainer's)."""
        self.clip_fractions = []
        return _batches(n_train, self.config, self.batch_generator)

    def step(self, model: nn.Module, x: Tensor, y: Tensor, *, optimizer: torch.optim.Optimizer,
             scaler: torch.amp.GradScaler, amp: bool,
             loss: Callable[[Tensor, Tensor], Tensor]) -> Tensor:
        stats = dp_step(model, optimizer, x, y, config=self.config,
                        generator=self.noise_generator, loss_fn=loss,
                        secure_noise=self.secure_noise)
        self.clip_fractions.append(stats["batch_clip_fraction"])
        return torch.tensor(stats["loss"], dtype=torch.float64)

    def state_dict(self) -> dict:
        secure = {} if self.secure_noise is None else {
            "secure_noise": self.secure_noise.get_state()}
        return {"config": self.config.as_dict(),
                "batch_generator": self.batch_generator.get_state(),
                "noise_generator": self.noise_generator.get_state(), **secure}

    def load_state_dict(self, state: dict) -> None:
        changed = changed_settings(state.get("config") or {}, self.config.as_dict())
        if changed:
            raise InvalidInputError(f"it was written by a run with other DP-SGD settings "
                                    f"({changed})")
        if (self.secure_noise is None) != ("secure_noise" not in state):
            raise InvalidInputError("its DP-SGD noise came from another sampler (a secret-seed "
                                    "run before the cryptographic one, or a seeded run); "
                                    "start the run again")
        self.batch_generator.set_state(state["batch_generator"])
        self.noise_generator.set_state(state["noise_generator"])
        if self.secure_noise is not None:
            self.secure_noise.set_state(state["secure_noise"])


class ClassifierRecipe(Recipe):
    """The classifiers' optimizer, epoch record and choice of weights for the trainer.

    SGD (with ``config.momentum``) or Adam at ``config.lr``, no schedule; the last epoch's
    weights are kept. Each epoch's record: ``epoch``, ``seconds``, ``batch_clip_fraction``
    (mean over the epoch's batches of :class:`DPSGDStep`), ``train_loss``, ``train_accuracy``
    (exact read-out), ``test_loss``, ``test_accuracy`` (on the trainer's ``val`` examples, with
    shots drawn from ``eval_generator_seed`` afresh each epoch), the distance from
    ``reference_losses`` when given, every statistic of :func:`epoch_diagnostics` with
    ``diagnostics``, ``non_finite`` when any number is not finite, and ``diverged`` when the
    training loss is not finite (training stops there). ``on_epoch`` gets each record after
    the checkpoint is written.
    """

    name = "classifier"

    def __init__(self, config: DPSGDConfig, *, eval_generator_seed: int | None = None,
                 reference_losses: list[float] | None = None, diagnostics: bool = True,
                 on_epoch: Callable[[dict], None] | None = None) -> None:
        if reference_losses is not None and len(reference_losses) < config.epochs:
            raise InvalidInputError(
                f"reference_losses has {len(reference_losses)} epochs; the run has "
                f"{config.epochs}"
            )
        self.config = config
        self.eval_generator_seed = eval_generator_seed
        self.reference_losses = reference_losses
        self.diagnostics = diagnostics
        self.on_epoch = on_epoch

    def optimizer(self, model: nn.Module, config: TrainConfig) -> torch.optim.Optimizer:
        return _make_optimizer(model, self.config)

    def loss(self, prediction: Tensor, target: Tensor) -> Tensor:
        """Cross-entropy of the logits, what :class:`DPSGDStep` clips per example."""
        return F.cross_entropy(prediction, target)

    def end_epoch(self, trainer: Trainer, *, epoch: int, train_loss: float,
                  train_seconds: float) -> dict:
        model, train, test = trainer.model, trainer.train_data, trainer.val_data
        fractions = trainer.strategy.clip_fractions
        record: dict = {"epoch": epoch, "seconds": train_seconds,
                        "batch_clip_fraction": sum(fractions) / max(len(fractions), 1)}
        eval_gen = (None if self.eval_generator_seed is None
                    else torch.Generator().manual_seed(self.eval_generator_seed))
        train_eval = evaluate(model, train.x, train.y)
        test_eval = evaluate(model, test.x, test.y, generator=eval_gen)
        record.update(train_loss=train_eval["loss"], train_accuracy=train_eval["accuracy"],
                      test_loss=test_eval["loss"], test_accuracy=test_eval["accuracy"])
        if self.reference_losses is not None:
            ref = self.reference_losses[epoch - 1]
            record.update(unclipped_train_loss=ref,
                          distance_from_unclipped_loss=abs(train_eval["loss"] - ref))
        if self.diagnostics:
            record.update(epoch_diagnostics(model, train.x, train.y, config=self.config))
        if not all(math.isfinite(v) for v in record.values() if isinstance(v, float)):
            record["non_finite"] = True
        if not math.isfinite(record["train_loss"]):
            # no step from non-finite weights recovers: stop here, as the forecaster does
            record["diverged"] = True
        return record

    def score(self, record: dict) -> None:
        return None

    def show(self, trainer: Trainer, record: dict) -> None:
        if self.on_epoch is not None:
            self.on_epoch(record)


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
    secure_noise: SecureModeGaussian | None = None,
    eval_generator_seed: int | None = None,
    reference_losses: list[float] | None = None,
    diagnostics: bool = True,
    on_epoch: Callable[[dict], None] | None = None,
    checkpoint: Path | None = None,
) -> list[dict]:
    """Train ``model`` with DP-SGD for ``config.epochs`` epochs in the one trainer; return one
    record per epoch (:class:`ClassifierRecipe` lists what each holds).

    ``batch_generator`` draws the batches and ``noise_generator`` the shots and noise, so a
    run without noise sees the same batches as a noised one; ``secure_noise`` (a release)
    draws the mechanism's noise instead (:class:`DPSGDStep`). ``eval_generator_seed`` seeds
    the shots of every test evaluation (the same draws each epoch) for models with sampled
    read-out; the training loss and accuracy use the exact read-out.
    ``reference_losses[e]`` is the training loss of an unclipped, noiseless run after epoch e+1
    (same initialisation and batches); the record then holds the distance from it. Training
    stops after the first epoch whose training loss is not finite; that record has
    ``diverged`` and is the last.

    ``checkpoint``: a file that gets the trainer's checkpoint after every epoch (atomically);
    if it exists, training continues from it (a killed run resumes to the same result), also
    when qpriv 0.1.0 wrote it. It must come from a run with the same ``config``.
    """
    if x_train.shape[0] < 1:
        raise InvalidInputError("the training set is empty")
    recipe = ClassifierRecipe(config, eval_generator_seed=eval_generator_seed,
                              reference_losses=reference_losses, diagnostics=diagnostics,
                              on_epoch=on_epoch)
    # the caller seeded every source (seed None): the trainer reseeds nothing, so the
    # batches, the noise and the global generator draw as they always did
    trainer_config = TrainConfig(epochs=config.epochs, batch_size=config.batch_size,
                                 lr=config.lr, seed=None, amp=False, progress=False,
                                 device=str(x_train.device))
    trainer = Trainer(
        model, train=Examples(x_train, y_train), val=Examples(x_test, y_test),
        config=trainer_config,
        checkpoint_dir=None if checkpoint is None else Path(checkpoint).parent,
        checkpoint_name=CHECKPOINT_FILE if checkpoint is None else Path(checkpoint).name,
        strategy=DPSGDStep(config, batch_generator=batch_generator,
                           noise_generator=noise_generator, secure_noise=secure_noise),
        recipe=recipe,
    )
    return trainer.fit(resume=True).history
