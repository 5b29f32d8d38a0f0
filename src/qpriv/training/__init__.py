"""The one training loop of every model (trainer, checkpoints, seeding; each kind of run brings
its recipe: the forecasters' is :mod:`qpriv.forecasting.recipe`), the window evaluation, and the
DP-SGD pieces (per-example gradients, clipping and noise, Poisson batches)
that the forecasters' and the classifiers' (:mod:`qpriv.classification.dpsgd`) private steps
share."""

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
    "derive_seed",
    "evaluate",
    "seed_everything",
    "seeded_noise",
]
