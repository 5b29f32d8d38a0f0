"""The one training loop of every model (trainer, checkpoints, seeding), the forecasters'
evaluation, and the DP-SGD pieces (per-example gradients, clipping and noise, Poisson batches)
that the forecasters' and the classifiers' (:mod:`qpriv.classification.dpsgd`) private steps
share."""

from qpriv.runs.files import atomic_torch_save, atomic_write_json, load_checkpoint
from qpriv.training.evaluation import WindowSource, evaluate, seeded_noise
from qpriv.training.seeding import derive_seed, seed_everything
from qpriv.training.trainer import Recipe, StepStrategy, TrainConfig, Trainer, TrainResult

__all__ = [
    "Recipe",
    "StepStrategy",
    "TrainConfig",
    "TrainResult",
    "Trainer",
    "WindowSource",
    "atomic_torch_save",
    "atomic_write_json",
    "derive_seed",
    "evaluate",
    "load_checkpoint",
    "seed_everything",
    "seeded_noise",
]
