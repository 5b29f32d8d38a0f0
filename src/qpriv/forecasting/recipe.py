"""The forecasters' training protocol, the LDPT paper's section 7.2, as a recipe of the one
trainer (:class:`qpriv.training.trainer.Trainer`).

RAdam with decoupled weight decay over the backbone's parameter groups (the quantum attention at
its own rate), ReduceLROnPlateau on the validation MSE after any warm-up, the batch-mean MSE as
the loss, the test and validation MSE and MAE at the fixed evaluation seed
(:func:`qpriv.training.evaluation.evaluate`), one history row per epoch and the best-validation
weights kept.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F  # noqa: N812 (the PyTorch idiom)
from torch import Tensor, nn

from qpriv.errors import require_in_range
from qpriv.progress import epoch_summary
from qpriv.training.evaluation import WindowSource, evaluate
from qpriv.training.trainer import Recipe, TrainConfig, Trainer


@dataclass(frozen=True)
class ForecasterTrainConfig(TrainConfig):
    """:class:`~qpriv.training.trainer.TrainConfig` with the rate of the LDPT backbone's
    quantum attention, ``lr_quantum_attention`` (every other parameter group gets ``lr``)."""

    lr_quantum_attention: float = 1.5e-4

    def __post_init__(self) -> None:
        super().__post_init__()
        require_in_range("lr_quantum_attention", self.lr_quantum_attention, low=0.0)


def mse(prediction: Tensor, target: Tensor) -> Tensor:
    """The forecasters' training loss: the mean squared error over a batch's windows, horizon
    steps and channels (in float32 under mixed precision)."""
    return F.mse_loss(prediction.float(), target)


class ForecasterRecipe(Recipe):
    """The LDPT paper's protocol (see the module docstring) for any forecaster that maps
    ``x (B, L, C)`` to ``(B, H, C)``; a model with ``parameter_groups()`` gets one rate per
    group, ``quantum_attention`` at ``lr_quantum_attention``. Rows: ``epoch``, ``train_loss``,
    ``val_loss``, ``lr``, ``train_seconds``, ``val_seconds``, and ``diverged`` when a loss is
    not finite."""

    name = "forecaster"

    def optimizer(self, model: nn.Module, config: TrainConfig) -> torch.optim.Optimizer:
        """RAdam over the parameter groups; ``quantum_attention`` gets its own rate (so the
        config is a :class:`ForecasterTrainConfig`)."""
        if not isinstance(config, ForecasterTrainConfig):
            raise TypeError("the forecasters' recipe reads a ForecasterTrainConfig (it holds "
                            "the quantum attention's rate)")
        return torch.optim.RAdam(_param_groups(model, config), weight_decay=config.weight_decay,
                                 decoupled_weight_decay=True)

    def scheduler(self, optimizer: torch.optim.Optimizer, config: TrainConfig
                  ) -> torch.optim.lr_scheduler.ReduceLROnPlateau:
        """ReduceLROnPlateau on the validation loss."""
        return torch.optim.lr_scheduler.ReduceLROnPlateau(
            optimizer, mode="min", factor=config.plateau_factor,
            patience=config.plateau_patience,
        )

    def loss(self, prediction: Tensor, target: Tensor) -> Tensor:
        return mse(prediction, target)

    def evaluate(self, trainer: Trainer, data: WindowSource, *, passes: int | None = None,
                 by_channel: bool = False) -> dict:
        """MSE and MAE on ``data`` with the fixed evaluation seed (see
        :func:`~qpriv.training.evaluation.evaluate`; ``by_channel`` adds the first pass's
        per-channel values)."""
        cfg = trainer.config
        return evaluate(
            trainer.model, data, seed=cfg.eval_seed, passes=passes or cfg.eval_passes,
            batch_size=cfg.eval_batch_size, amp=trainer.amp, by_channel=by_channel,
            draw_ahead=cfg.draw_ahead,
        )

    def end_epoch(
        self, trainer: Trainer, *, epoch: int, train_loss: float, train_seconds: float
    ) -> dict:
        """Evaluate after the epoch's steps, step the schedule, return the history row."""
        tic = time.perf_counter()
        val_loss = trainer.evaluate(trainer.val_data, passes=1)["mse"]
        val_seconds = time.perf_counter() - tic
        diverged = not (math.isfinite(train_loss) and math.isfinite(val_loss))
        past_warm_up = epoch > trainer.config.warmup_epochs  # the plateau counts from there
        if trainer.scheduler is not None and past_warm_up and not diverged:
            trainer.scheduler.step(val_loss)
        return {
            "epoch": epoch, "train_loss": train_loss, "val_loss": val_loss,
            "lr": [group["lr"] for group in trainer.optimizer.param_groups],
            "train_seconds": train_seconds, "val_seconds": val_seconds,
            **({"diverged": True} if diverged else {}),
        }

    def score(self, record: dict) -> float | None:
        """The validation loss: the run keeps its best epoch's weights."""
        return record["val_loss"]

    def show(self, trainer: Trainer, record: dict) -> None:
        if trainer.config.progress:
            epoch_summary(record, epochs=trainer.config.epochs, best_epoch=trainer.best["epoch"])


def _param_groups(model: nn.Module, config: ForecasterTrainConfig) -> list[dict]:
    if not hasattr(model, "parameter_groups"):
        return [{"name": "all", "lr": config.lr, "base_lr": config.lr,
                 "params": [p for p in model.parameters() if p.requires_grad]}]
    groups = []
    for name, params in model.parameter_groups().items():
        lr = config.lr_quantum_attention if name == "quantum_attention" else config.lr
        if params:
            groups.append({"name": name, "params": params, "lr": lr, "base_lr": lr})
    return groups
