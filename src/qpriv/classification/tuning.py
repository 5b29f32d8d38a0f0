"""Per-configuration learning-rate tuning on a validation split.

The private-training paper tunes "the optimizer ... for each configuration separately"
(section 4.1, Figure 2) and gives no values. Here a configuration's rate is chosen from a grid
by training once per rate, same seed and settings, on the training split less a held-out
validation share (:meth:`~qpriv.classification.data.ClassificationData.validation_split`), and
keeping the rate with the highest validation accuracy after the last epoch (ties: the smaller
rate). The test split is never read while choosing.

Privacy: under DP-SGD every trial is itself a private run at the configuration's (eps, delta),
but the *selection* among them reads the training data once per trial and is not accounted.
The result says so; a guarantee that covers tuning needs e.g. Papernot and Steinke's
hyper-parameter accounting (ICLR 2022), which qpriv does not implement.

Example::

    from qpriv.classification.tuning import lr_grid, tune_learning_rate

    chosen = tune_learning_rate(grid=lr_grid(0.3), task="synthetic", model="mlp", clip=1.5,
                                batch=64, epochs=20, seed=2024, optimizer="sgd")
    chosen["lr"], chosen["trials"]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from qpriv.classification.data import DEFAULT_IMAGE_SIZE, VALIDATION_FRACTION
from qpriv.classification.request import check_batch, check_out_dir
from qpriv.classification.run import train_classifier
from qpriv.errors import ArgumentError, InvalidInputError, require_in_range
from qpriv.runs.cache import cached_json
from qpriv.runs.layout import TUNING_FILE

LR_FACTORS = (0.1, 0.3, 1.0, 3.0)
"""The default grid around a model's base rate: a decade below it and a factor 3 above."""
SELECTION = ("the highest validation accuracy after the last epoch; ties go to the smaller "
             "rate")
PRIVACY_NOTE = ("the choice of rate reads the training data once per trial and is not "
                "accounted in any eps")


def lr_grid(base: float, factors: Sequence[float] = LR_FACTORS) -> tuple[float, ...]:
    """``base`` times each factor, ascending (rounded to 6 significant digits, so that the
    rates name files stably)."""
    base = require_in_range("lr", base, low=0.0)
    if not factors:
        raise InvalidInputError("the learning-rate grid is empty: give at least one factor")
    return tuple(sorted({float(f"{base * require_in_range('lr factor', f, low=0.0):.6g}")
                         for f in factors}))


def select_learning_rate(validation_accuracy: Mapping[float, float]) -> float:
    """The rate with the highest validation accuracy; ties go to the smaller rate.

    Raises:
        InvalidInputError: no trials, or a trial without a finite accuracy.
    """
    if not validation_accuracy:
        raise InvalidInputError("no tuning trials to choose a learning rate from")
    for lr, accuracy in validation_accuracy.items():
        if accuracy is None or accuracy != accuracy:
            raise InvalidInputError(f"the tuning trial at lr = {lr:g} has no accuracy")
    return min(validation_accuracy, key=lambda lr: (-validation_accuracy[lr], lr))


def tuning_record(trials: Sequence[tuple[float, dict]], *, validation: float) -> dict:
    """The JSON-able account of a tuning: each trial's rate and validation accuracy, the chosen
    rate, how it was chosen and what it costs in privacy."""
    accuracy = {float(lr): float(result["accuracy"]) for lr, result in trials}
    for lr, result in trials:
        if result.get("evaluated_on") != "validation":
            raise InvalidInputError(f"the trial at lr = {lr:g} was not evaluated on a "
                                    "validation split; tuning must never read the test split")
    return {"lr": select_learning_rate(accuracy),
            "trials": [{"lr": lr, "validation_accuracy": a} for lr, a in sorted(accuracy.items())],
            "validation": {"fraction": validation, "of": "the training split, stratified"},
            "selection": SELECTION, "privacy": PRIVACY_NOTE}


def tune_learning_rate(*, grid: Sequence[float], validation: float = VALIDATION_FRACTION,
                       out_dir: str | Path | None = None, resume: bool = False,
                       **arguments: Any) -> dict:
    """Train ``arguments`` (those of :func:`~qpriv.classification.run.train_classifier`, less
    ``lr``) once per rate of ``grid`` on the validation split and return
    :func:`tuning_record` of the trials.

    >>> record = tune_learning_rate(grid=[0.1, 0.01], task="synthetic", model="mlp", clip=1.0,
    ...                             batch=64, epochs=1, seed=2024, threads=1)
    >>> record["lr"] in (0.01, 0.1), [trial["lr"] for trial in record["trials"]]
    (True, [0.01, 0.1])

    With ``out_dir`` (the directory the run trained at the chosen rate will use) the choice is
    kept there in :data:`~qpriv.runs.layout.TUNING_FILE`, so that a resumed run trains
    at the same rate; the directory is checked before any trial trains. With ``resume`` a kept
    choice is read back instead of tuning again, and must come from the same grid.

    Raises:
        InvalidInputError: an empty grid, a bad rate, ``lr`` beside the grid, an ``out_dir``
            that already holds a run without ``resume`` (or, with it, does not exist or is
            empty), a kept choice from another grid, a batch above the training set (before
            any trial), or any bad training argument.
    """

    if "lr" in arguments:
        if arguments["lr"] is None:
            del arguments["lr"]
        else:
            raise ArgumentError("give {lr} or {grid}, not both: the grid chooses the rate")
    rates = sorted({require_in_range("grid", lr, low=0.0) for lr in grid})
    if not rates:
        raise InvalidInputError("the learning-rate grid is empty: give at least one rate")
    out = check_out_dir(out_dir, resume=resume)
    kept = None if out is None else out / TUNING_FILE

    def same_grid(record: dict) -> bool:
        tried = sorted(t.get("lr") for t in record.get("trials", []) if isinstance(t, dict))
        if tried != rates or "lr" not in record:
            raise ArgumentError(f"{ArgumentError.literal(kept)} tuned over another {{grid}}; "
                                "resume with the same grid, or start afresh in another "
                                "{out_dir}")
        return True

    def tune() -> dict:
        if "task" in arguments and "batch" in arguments:
            # the trials clamp the batch to their smaller split; the run they tune for would
            # refuse it only after them
            check_batch(arguments["task"], arguments["batch"],
                        image_size=arguments.get("image_size", DEFAULT_IMAGE_SIZE))
        trials = [(lr, train_classifier(**{**arguments, "diagnostics": False,
                                           "unclipped_reference": False, "out_dir": None},
                                        lr=lr, validation=validation).to_json())
                  for lr in rates]
        return tuning_record(trials, validation=validation)

    return cached_json(kept, tune, damaged="refuse", fix="delete it to tune again",
                       valid=same_grid, reuse=resume)
