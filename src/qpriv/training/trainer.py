"""The one training loop of qpriv: the forecasters and the classifiers train in :class:`Trainer`.

What every run shares is the loop itself (:meth:`Trainer.fit`): batches drawn at the start of
each epoch, one update per batch, an evaluation after every epoch that writes one history row,
a stop at the first epoch whose loss is not finite (no step from NaN weights can recover: the
row is marked ``diverged`` and :attr:`TrainResult.diverged_epoch` says so), and a checkpoint
after every epoch holding everything a resumed run needs to continue to the same result:
model, optimizer, schedule, AMP scaler, strategy, every random state and the history. One
checkpoint format is written (:data:`CHECKPOINT_FORMAT`); :func:`upgrade_checkpoint` reads the
two formats of qpriv 0.1.0 into it, so runs killed under that version resume.

What differs between runs is injected:

- a :class:`StepStrategy`: how batches are drawn and how a batch becomes an update. The default
  is plain back-propagation on shuffled batches; the forecasters' DP-SGD
  (:class:`qpriv.training.dpsgd.DPSGDStrategy`) and the classifiers' DP-SGD
  (:class:`qpriv.classification.dpsgd.DPSGDStep`) clip per example, add noise and sample
  Poisson batches (Abadi et al. 2016, "Deep Learning with Differential Privacy", Algorithm 1).
- a :class:`Recipe`, which every run names: the optimizer and its schedule, the loss, what
  an epoch records, how a model is evaluated, which weights the run keeps and what it prints.
  The forecasters' (:class:`qpriv.forecasting.recipe.ForecasterRecipe`) is the LDPT paper's
  protocol (section 7.2); the classifiers' (:class:`qpriv.classification.dpsgd.ClassifierRecipe`)
  uses SGD or Adam without a schedule, records accuracies and gradient diagnostics, and keeps
  the last epoch's weights. The loop knows neither: no loss, model shape or metric is written
  here.

Example::

    trainer = Trainer(model, train=data.train, val=data.val,
                      config=ForecasterTrainConfig(epochs=20), recipe=ForecasterRecipe(),
                      checkpoint_dir="runs/ldpt")
    result = trainer.fit()               # the model now holds the weights the recipe keeps
    metrics = trainer.evaluate(data.test)  # the recipe's metrics: {"mse": ..., "mae": ...}
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from qpriv.allocator import reusing_freed_memory
from qpriv.errors import InvalidInputError, require_in_range
from qpriv.progress import epoch_bar
from qpriv.runs.files import (
    atomic_torch_save,
    load_checkpoint,
    remove_stale_temporaries,
)
from qpriv.runs.layout import BEST_FILE, CHECKPOINT_FILE
from qpriv.training.ahead import draw_ahead
from qpriv.training.evaluation import WindowSource, autocast
from qpriv.training.seeding import (
    derive_seed,
    global_rng_state,
    seed_everything,
    set_global_rng_state,
)

CHECKPOINT_FORMAT = 2
"""Version of the checkpoint :class:`Trainer` writes. 1 was qpriv 0.1.0's forecaster checkpoint
(the classifiers then wrote their own, also numbered 1); 2 is the one format of every run, with
an optional schedule and random states. :func:`upgrade_checkpoint` reads both old ones."""
DIVERGENCE_NOTE = (
    "training stops after the first epoch whose loss is not finite; that stopping rule reads "
    "the noise-free training loss, so whether and when a run stops is not covered (the "
    "epsilon counts the steps taken)")
"""What a private run's claim says of the trainer's stop on divergence."""
HISTORY_NOTE = ("the training history (loss per epoch, clipped fraction) is computed without "
                "noise and is not covered")
"""What a private run's claim says of the per-epoch history its result holds."""


@dataclass(frozen=True)
class TrainConfig:
    """The training protocol every recipe reads (defaults: the LDPT paper's section 7.2; a
    recipe may extend it, as :class:`qpriv.forecasting.recipe.ForecasterTrainConfig` adds the
    quantum attention's own rate).

    ``lr`` is the learning rate; ``warmup_epochs`` > 0 ramps every rate linearly from its first
    step to the full rate (the tuned DP-SGD of the LDPT paper's section 8.3); ReduceLROnPlateau
    starts after it. ``amp`` is used only on CUDA. ``device`` None picks CUDA when present.
    ``eval_passes`` > 1 adds the mean and std over that many evaluation seeds. ``draw_ahead``:
    on the CPU, draw each batch's pass noise (a model's ``draw_noise``) one batch ahead in a
    background thread (:mod:`qpriv.training.ahead`); the run is the same either way.
    ``seed`` None:
    the caller has seeded every random source the run draws from (the classifiers hand their
    strategy seeded generators), so the trainer seeds none.
    """

    epochs: int = 20
    batch_size: int = 64
    eval_batch_size: int = 256
    lr: float = 3e-4
    weight_decay: float = 1.2e-3
    plateau_patience: int = 5
    plateau_factor: float = 0.5
    warmup_epochs: int = 0
    seed: int | None = 2024
    eval_passes: int = 1
    amp: bool = True
    device: str | None = None
    progress: bool = True
    draw_ahead: bool = True

    def __post_init__(self) -> None:
        for name in ("epochs", "batch_size", "eval_batch_size", "eval_passes"):
            value = getattr(self, name)
            if isinstance(value, bool) or int(value) != value or value < 1:
                raise InvalidInputError(f"{name} = {value!r} is not an integer >= 1")
        for name in ("plateau_patience", "warmup_epochs"):
            value = getattr(self, name)
            if isinstance(value, bool) or int(value) != value or value < 0:
                raise InvalidInputError(f"{name} = {value!r} is not an integer >= 0")
        if self.warmup_epochs >= self.epochs:
            raise InvalidInputError(
                f"warmup_epochs = {self.warmup_epochs} leaves no epoch at the full learning "
                f"rate out of epochs = {self.epochs}; use fewer warm-up epochs"
            )
        if self.seed is not None and (isinstance(self.seed, bool)
                                      or int(self.seed) != self.seed):
            raise InvalidInputError(f"seed = {self.seed!r} is not an integer (or None)")
        require_in_range("lr", self.lr, low=0.0)
        require_in_range("weight_decay", self.weight_decay, low=0.0, low_inclusive=True)
        require_in_range("plateau_factor", self.plateau_factor, low=0.0, high=1.0,
                         high_inclusive=False)

    @property
    def eval_seed(self) -> int:
        """The fixed seed of evaluation noise (validation every epoch, and test)."""
        if self.seed is None:
            raise InvalidInputError("seed = None leaves evaluation noise unseeded; give the "
                                    "run's seed to evaluate with the trainer")
        return derive_seed(self.seed, "evaluation")

    def as_dict(self) -> dict:
        return asdict(self)


class StepStrategy:
    """How batches are drawn and how a batch loss becomes a parameter update.

    The default draws a fresh random permutation each epoch, cut into batches of
    ``batch_size`` (the last one smaller), and takes one optimizer step per batch. Hooks for a
    private strategy: :meth:`prepare` (wrap model and optimizer, e.g. for per-example
    gradients), :meth:`batches` (e.g. Poisson sampling), :meth:`step` (clip, noise, step),
    :meth:`state_dict` / :meth:`load_state_dict` (e.g. an accountant's history or the
    strategy's own generators, for resume; raise :class:`InvalidInputError` for a state of
    other settings) and :meth:`report` (what goes into the result, e.g. the epsilon spent).
    ``draws_ahead``: whether :meth:`step` takes the batch's pass noise drawn ahead
    (``noise``, passed on as ``model(x, noise=noise)``); a subclass that overrides
    :meth:`step` is taken not to, unless it sets ``draws_ahead`` itself.
    """

    name = "standard"
    draws_ahead = True

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "step" in cls.__dict__ and "draws_ahead" not in cls.__dict__:
            cls.draws_ahead = False

    def prepare(
        self, model: nn.Module, optimizer: torch.optim.Optimizer, *, n_train: int,
        batch_size: int,
    ) -> tuple[nn.Module, torch.optim.Optimizer]:
        return model, optimizer

    def batches(
        self, n_train: int, *, batch_size: int, generator: torch.Generator
    ) -> list[Tensor]:
        return list(torch.randperm(n_train, generator=generator).split(batch_size))

    def step(
        self, model: nn.Module, x: Tensor, y: Tensor, *, optimizer: torch.optim.Optimizer,
        scaler: torch.amp.GradScaler, amp: bool, loss: Callable[[Tensor, Tensor], Tensor],
        noise: object | None = None,
    ) -> Tensor:
        """One update on the batch ``(x, y)`` of the recipe's ``loss``; returns the batch's mean
        loss (detached). ``noise``: the pass noise of ``x`` drawn ahead (None: the model draws
        it)."""
        with autocast(x.device, enabled=amp):
            pred = model(x) if noise is None else model(x, noise=noise)
        loss = loss(pred, y)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        return loss.detach()

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        return None

    def report(self) -> dict:
        return {"strategy": self.name}


class Recipe:
    """What a kind of run does around the loop: its optimizer and schedule, its loss, what an
    epoch records, how the model is evaluated, which weights the run keeps, what it prints.

    Every recipe names itself (``name``); a subclass provides :meth:`optimizer`,
    :meth:`end_epoch` and, where the step or :meth:`Trainer.evaluate` asks for them,
    :meth:`loss` and :meth:`evaluate`.
    """

    name: str

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if not isinstance(getattr(cls, "name", None), str):
            raise TypeError(f"recipe {cls.__name__} must name itself (a class attribute name)")

    def optimizer(self, model: nn.Module, config: TrainConfig) -> torch.optim.Optimizer:
        """The optimizer over the model's parameters."""
        raise NotImplementedError(f"recipe {self.name!r} has no optimizer")

    def scheduler(self, optimizer: torch.optim.Optimizer, config: TrainConfig) -> Any:
        """The learning-rate schedule (None, the default: the rates stay as they are)."""
        return None

    def loss(self, prediction: Tensor, target: Tensor) -> Tensor:
        """The batch-mean training loss (per example: of a batch of one)."""
        raise NotImplementedError(f"recipe {self.name!r} has no loss")

    def evaluate(self, trainer: Trainer, data: WindowSource, *, passes: int | None = None,
                 by_channel: bool = False) -> dict:
        """The model's metrics on ``data`` (:meth:`Trainer.evaluate`)."""
        raise NotImplementedError(f"recipe {self.name!r} evaluates nothing")

    def end_epoch(
        self, trainer: Trainer, *, epoch: int, train_loss: float, train_seconds: float
    ) -> dict:
        """Evaluate after the epoch's steps, step any schedule, return the history row (with
        ``diverged`` when training must stop)."""
        raise NotImplementedError(f"recipe {self.name!r} records no epoch")

    def score(self, record: dict) -> float | None:
        """The loss by which the run keeps its best epoch's weights (lower is better); None
        (the default) keeps the last epoch's."""
        return None

    def show(self, trainer: Trainer, record: dict) -> None:
        """Progress output after the epoch's checkpoint (the default prints nothing)."""
        return None


@dataclass
class TrainResult:
    """What :meth:`Trainer.fit` returns; ``history`` has one dict per epoch (1-based).

    ``diverged_epoch``: the epoch whose training or validation loss was not finite, after which
    training stopped (None: it did not diverge). ``best_epoch`` 0 then means that no epoch
    finished with a finite validation loss, so the model holds no usable weights (and always,
    under a recipe that keeps the last epoch's weights).
    """

    best_epoch: int
    best_val_loss: float
    history: list[dict] = field(default_factory=list)
    diverged_epoch: int | None = None

    @property
    def seconds_per_epoch(self) -> float:
        """Mean wall-clock seconds of the training part of an epoch (no validation)."""
        return sum(h["train_seconds"] for h in self.history) / max(len(self.history), 1)


def diverged_epoch(history: list[dict]) -> int | None:
    """The epoch a training history marks ``diverged`` (a non-finite loss ended training), or
    None; every recipe marks it alike."""
    return next((row["epoch"] for row in history if row.get("diverged")), None)


def upgrade_checkpoint(state: dict, *, path: Path, fix: str) -> dict:
    """``state`` in :data:`CHECKPOINT_FORMAT`, from any format a qpriv version wrote.

    Format 1 came in two kinds in qpriv 0.1.0: the forecaster trainer's (the keys of format 2,
    the schedule and random states always present) and the classifiers' own loop's (``config``,
    ``model``, ``optimizer``, ``batch_generator``, ``noise_generator``, ``history``: no
    schedule, no scaler, no global random state saved). The classifiers' becomes the state of
    :class:`qpriv.classification.dpsgd.DPSGDStep` (its settings and its two generators).

    Raises:
        InvalidInputError: a format this version cannot read; ``fix`` says what to do.
    """
    version = state.get("format")
    if version == CHECKPOINT_FORMAT:
        return state
    if version == 1 and "train_config" in state:  # the forecasters' trainer
        return {**state, "format": CHECKPOINT_FORMAT}
    if version == 1 and "batch_generator" in state:  # the classifiers' loop
        history = list(state["history"])
        return {
            "format": CHECKPOINT_FORMAT, "epoch": len(history), "train_config": None,
            "model": state["model"], "optimizer": state["optimizer"], "scheduler": None,
            "scaler": None,
            "strategy": {key: state[key]
                         for key in ("config", "batch_generator", "noise_generator")},
            "rng": {"global": None, "shuffle": None, "model_noise": None},
            "history": history,
            "best": {"epoch": 0, "val_loss": math.inf, "model": None},
        }
    raise InvalidInputError(f"{path} has checkpoint format {version!r}, this version reads "
                            f"1 and {CHECKPOINT_FORMAT}; {fix}")


class Trainer:
    """Train ``model`` on ``train``, evaluate on ``val``, checkpoint into ``checkpoint_dir``.

    ``recipe`` says what the run is (:class:`Recipe`); the loop reaches the model only
    through the strategy's step and the recipe. If the model has ``seed_noise`` its noise
    streams are seeded from the run seed and checkpointed. ``checkpoint_name``: the
    checkpoint's file in ``checkpoint_dir`` (a directory may hold the checkpoints of several
    runs, as a classifier's and its unclipped twin's); ``best.pt`` beside it holds the best
    weights of a recipe that keeps them.
    """

    def __init__(
        self,
        model: nn.Module,
        *,
        train: WindowSource,
        val: WindowSource,
        config: TrainConfig,
        checkpoint_dir: str | Path | None = None,
        checkpoint_name: str = CHECKPOINT_FILE,
        recipe: Recipe,
        strategy: StepStrategy | None = None,
    ) -> None:
        self.config = config
        self.device = torch.device(
            config.device or ("cuda" if torch.cuda.is_available() else "cpu")
        )
        self.amp = config.amp and self.device.type == "cuda"
        self.train_data = train.to(self.device) if hasattr(train, "to") else train
        self.val_data = val.to(self.device) if hasattr(val, "to") else val
        if len(self.train_data) < 1 or len(self.val_data) < 1:
            raise InvalidInputError(
                f"the training set has {len(self.train_data)} and the validation set "
                f"{len(self.val_data)} examples (windows); each needs at least one"
            )
        self.checkpoint_dir = Path(checkpoint_dir) if checkpoint_dir is not None else None
        self.checkpoint_name = checkpoint_name
        self.strategy = strategy or StepStrategy()
        self.recipe = recipe
        model = model.to(self.device)
        if hasattr(model, "seed_noise") and config.seed is not None:  # noise generators on the
            # device, seeded from the run
            model.seed_noise(derive_seed(config.seed, "model-noise"), device=self.device)
        self.model, self.optimizer = self.strategy.prepare(
            model, self.recipe.optimizer(model, config), n_train=len(self.train_data),
            batch_size=config.batch_size,
        )
        self.scheduler = self.recipe.scheduler(self.optimizer, config)
        self.scaler = torch.amp.GradScaler(
            "cuda", enabled=self.amp and not torch.cuda.is_bf16_supported()
        )
        self.shuffle = torch.Generator()
        self.history: list[dict] = []
        self.best: dict = {"epoch": 0, "val_loss": float("inf"), "model": None}

    # -- the loop --------------------------------------------------------------------------

    def fit(self, *, resume: bool = False) -> TrainResult:
        """Train for ``config.epochs`` epochs (continuing from the checkpoint if ``resume`` and
        one exists), then load the weights the recipe keeps (the best-validation ones for the
        forecasters, the last epoch's for the classifiers) into the model."""
        cfg = self.config
        if self.checkpoint_dir is not None:
            remove_stale_temporaries(self.checkpoint_dir)
        start = self._restore() if resume else None
        if start is None:
            self._seed()
            start = 0
            if self.checkpoint_dir is not None:  # a killed first epoch's, not this run's
                (self.checkpoint_dir / BEST_FILE).unlink(missing_ok=True)
        for epoch in range(start + 1, cfg.epochs + 1):
            if self.diverged_epoch is not None:  # a resumed run that had already diverged
                break
            train_loss, train_seconds = self._train_epoch(epoch)
            record = self.recipe.end_epoch(self, epoch=epoch, train_loss=train_loss,
                                           train_seconds=train_seconds)
            score = self.recipe.score(record)
            if score is not None and not record.get("diverged") and score < self.best["val_loss"]:
                self.best = {"epoch": epoch, "val_loss": score, "model": self._weights()}
                if self.checkpoint_dir is not None:
                    atomic_torch_save(self.checkpoint_dir / BEST_FILE, self.best)
            self.history.append(record)
            if self.checkpoint_dir is not None:
                atomic_torch_save(self.checkpoint_dir / self.checkpoint_name,
                                  self._checkpoint(epoch))
            self.recipe.show(self, record)
        if self.best["model"] is not None:
            self._module().load_state_dict(self.best["model"])
        return TrainResult(best_epoch=self.best["epoch"], best_val_loss=self.best["val_loss"],
                           history=list(self.history), diverged_epoch=self.diverged_epoch)

    @property
    def diverged_epoch(self) -> int | None:
        """The epoch whose loss was not finite (it ended training), or None."""
        return diverged_epoch(self.history)

    def _train_epoch(self, epoch: int) -> tuple[float, float]:
        cfg = self.config
        self.model.train()
        tic = time.perf_counter()
        batches = self.strategy.batches(
            len(self.train_data), batch_size=cfg.batch_size, generator=self.shuffle
        )
        total = torch.zeros((), dtype=torch.float64, device=self.device)
        seen = 0
        draw = self._draw_ahead()
        stream = (draw_ahead(draw, self._fetch(batches)) if draw is not None
                  else ((x, y, None) for x, y in self._fetch(batches)))
        # each step's buffers are reused by the next, not faulted in again (qpriv.allocator)
        with reusing_freed_memory(), epoch_bar(total=len(batches), epoch=epoch,
                                               epochs=cfg.epochs, enabled=cfg.progress) as bar:
            for i, (x, y, noise) in enumerate(stream):
                self._warm_up(epoch, i, len(batches))
                ahead = {} if noise is None else {"noise": noise}
                loss = self.strategy.step(self.model, x, y, optimizer=self.optimizer,
                                          scaler=self.scaler, amp=self.amp,
                                          loss=self.recipe.loss, **ahead)
                total += loss.to(self.device) * x.shape[0]
                seen += x.shape[0]
                bar.update()
                if cfg.progress and (i % 10 == 0 or i == len(batches) - 1):
                    bar.set_postfix(loss=f"{float(total) / seen:.4f}")
        return float(total) / max(seen, 1), time.perf_counter() - tic

    def _fetch(self, batches: list[Tensor]) -> Iterator[tuple[Tensor, Tensor]]:
        """The windows of each batch, on the device."""
        for index in batches:
            x, y = self.train_data.windows(index)
            yield x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)

    def _draw_ahead(self) -> Callable[[Tensor], object] | None:
        """The model's ``draw_noise`` when the epoch draws pass noise ahead: on the CPU, when
        the config asks, the strategy takes it and the model has such work (None otherwise)."""
        module = self._module()
        if (self.config.draw_ahead and self.device.type == "cpu" and self.strategy.draws_ahead
                and getattr(module, "draws_ahead", False)):
            return module.draw_noise
        return None

    def _warm_up(self, epoch: int, batch: int, n_batches: int) -> None:
        """Linear learning-rate warm-up over the first ``warmup_epochs`` epochs, step by step,
        from 1/n of each group's rate to the full rate."""
        warmup = self.config.warmup_epochs
        if epoch > warmup:
            return
        progress = ((epoch - 1) * n_batches + batch + 1) / (warmup * n_batches)
        for group in self.optimizer.param_groups:
            group["lr"] = group["base_lr"] * progress

    def evaluate(self, data: WindowSource, *, passes: int | None = None,
                 by_channel: bool = False) -> dict:
        """The recipe's metrics of the model on ``data`` (:meth:`Recipe.evaluate`: the
        forecasters' MSE and MAE at the fixed evaluation seed)."""
        if hasattr(data, "to"):
            data = data.to(self.device)
        return self.recipe.evaluate(self, data, passes=passes, by_channel=by_channel)

    # -- seeding and checkpoints -----------------------------------------------------------

    def _module(self) -> nn.Module:
        """The model itself, under any wrapper a strategy put around it."""
        return getattr(self.model, "_module", self.model)

    def _seed(self) -> None:
        seed = self.config.seed
        if seed is None:  # the caller seeded the run's sources
            return
        seed_everything(seed)
        self.shuffle.manual_seed(derive_seed(seed, "shuffle"))
        if hasattr(self._module(), "seed_noise"):
            self._module().seed_noise(derive_seed(seed, "model-noise"), device=self.device)

    def _weights(self) -> dict[str, Tensor]:
        return {k: v.detach().clone() for k, v in self._module().state_dict().items()}

    def _checkpoint(self, epoch: int) -> dict:
        module = self._module()
        return {
            "format": CHECKPOINT_FORMAT,
            "epoch": epoch,
            "train_config": self.config.as_dict(),
            "model": module.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": None if self.scheduler is None else self.scheduler.state_dict(),
            "scaler": self.scaler.state_dict(),
            "strategy": self.strategy.state_dict(),
            "rng": {
                "global": global_rng_state(),
                "shuffle": self.shuffle.get_state(),
                "model_noise": module.noise_state() if hasattr(module, "noise_state") else None,
            },
            "history": self.history,
            "best": self.best,
        }

    def _restore(self) -> int | None:
        """Load the checkpoint if there is one; return its epoch (None: nothing to resume)."""
        if self.checkpoint_dir is None:
            return None
        path = self.checkpoint_dir / self.checkpoint_name
        if not path.is_file():
            return None
        fresh = (f"delete it to train the run in {path.parent} again from epoch 1, or start "
                 "afresh in another out_dir")
        state = upgrade_checkpoint(load_checkpoint(path, fix=fresh), path=path, fix=fresh)
        try:  # first: a checkpoint of other settings changes nothing
            self.strategy.load_state_dict(state["strategy"])
        except InvalidInputError as err:
            raise InvalidInputError(f"{path}: {err}; {fresh}") from None
        module = self._module()
        module.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        if self.scheduler is not None:
            self.scheduler.load_state_dict(state["scheduler"])
        if state["scaler"] is not None:
            self.scaler.load_state_dict(state["scaler"])
        rng = state["rng"]
        if hasattr(module, "seed_noise"):
            module.seed_noise(0, device=self.device)
            module.load_noise_state(rng["model_noise"])
        if rng["global"] is not None:  # qpriv 0.1.0's classifiers drew nothing from it
            set_global_rng_state(rng["global"])
        if rng["shuffle"] is not None:
            self.shuffle.set_state(rng["shuffle"])
        self.history = list(state["history"])
        self.best = dict(state["best"])
        self._put_back_best()
        return int(state["epoch"])

    def _put_back_best(self) -> None:
        """best.pt is written before the checkpoint: a kill between the two leaves it one epoch
        ahead of the checkpoint, so it is put back to the checkpoint's best."""
        if self.best["model"] is not None:
            atomic_torch_save(self.checkpoint_dir / BEST_FILE, self.best)
        else:
            (self.checkpoint_dir / BEST_FILE).unlink(missing_ok=True)
