"""What the private-training paper's classifier grid runs: the protocol each budget spends, the
choices the paper leaves open, and one run's configuration and the key it is kept under.

Source: the private-training paper, section 4. Its Figures 2-10 are grids of these runs
(:mod:`qpriv.experiments.qml_rows`), trained and kept by :mod:`qpriv.experiments.qml_runs`.

Choices the paper leaves open (each a constant below; the ``full`` budget is the paper's
protocol where it states one: 10 seeds, 100 epochs, |B| = 64 for the deep dives):

* C grid :data:`CLIPS`: the text names C = 10 ("unclipped or minimally clipped"), C <= 1.5 and
  C = 1.5; we use 0.5, 1, 1.5, 3, 10. Batch sizes :data:`BATCHES`: only |B| = 64 is named; we
  sweep 32, 64, 128. Budgets :data:`EPS` (Figure 7): only eps = 10 is named; we use 1, 3, 10
  with delta = 1e-5 (not stated), Poisson sampling and Opacus's RDP accountant.
  Figure 7's batch size: 64 (not stated; the deep dives' value).
* Optimiser: "tuned for each configuration separately", with no values. We use plain SGD (the
  paper's DP-SGD; no momentum). Each model has a base rate (:data:`LEARNING_RATES`, from a
  short sweep: 15 epochs, seed 2024, C = 1.5 and 10, the best-converging rate at C = 10).
  The ``full`` budget tunes the rate of every configuration (model, C, |B|, eps) over
  :data:`~qpriv.classification.tuning.LR_FACTORS` times the base rate: one run per rate at
  seed :data:`TUNING_SEED` with the protocol's epochs, trained on the training split less a
  20 % validation share and scored on that share (:mod:`qpriv.classification.tuning`); every
  seed then trains with the chosen rate. The trials are stored like any run (``val`` in their
  names) and each row names its ``lr``. ``quick`` uses the base rates; ``tiny`` tunes over two
  factors, so that the test suite runs the path. The choice is not accounted in
  eps (as in the paper). Under Adam, which rescales every coordinate, the clipped MLP did not
  fall behind in the sweep; under SGD clipping shrinks and rotates its steps.
* The clipless row of Figures 2 and 7 (not in the paper): ``lipschitz`` with
  ``clip="analytic"`` (:class:`~qpriv.classification.models.ProjectedLipschitzMLP`, the public
  bounds :data:`~qpriv.classification.request.ANALYTIC_DEFAULTS` and
  :data:`~qpriv.classification.request.ANALYTIC_TAU`), one configuration per |B| (Figure 2) or
  eps (Figure 7). It has no C: its noise is sigma times its analytic bound Delta, and its rows
  carry ``clip="analytic"`` and ``sensitivity`` = Delta. Its SGD base rate
  :data:`CLIPLESS_LR` was chosen as the grid's tuning chooses, on the validation share of the
  training split, never the test split, together with the temperature
  :data:`~qpriv.classification.request.ANALYTIC_TAU` (``scripts/choose_clipless.py``): 15 epochs,
  |B| = 64, seed 2024, no noise and eps 1 and 10. At tau = 2, validation accuracy at rates
  0.003 / 0.01 / 0.03 / 0.1: 0.838 / 0.881 / 0.896 / 0.902 without noise, 0.829 / 0.838 /
  0.488 / 0.183 at eps 1, 0.835 / 0.863 / 0.863 / 0.823 at eps 10 (0.3: 0.887 without noise,
  0.619 at eps 10). 0.01 has the best mean over the three (0.861, also the best of every tau
  and rate: tau 0.5 and 1 reach 0.854 and 0.848, both at 0.003) and the best accuracy under
  noise (ties to the smaller rate); the other models' base rates
  are the best without noise, which here (0.1) diverges at eps 1, since the noise is scaled by
  the worst-case Delta = 20.9, not by a C near the typical norm. The ``full`` budget tunes it
  like every configuration.
* Models: "several fully connected layers" -> tanh MLP 16-32-32-4 (1732 parameters); the
  Lipschitz MLP has the same widths with GNP layers and Lipschitz constant C. Quantum: L = 8
  layers of RZ RY RZ + CNOT ring on 4 qubits (96 angles; L is not stated) with temperature
  tau = 1 (not stated): the logits are the raw <Z_k>, and the per-example norms then sit
  near C = 1.5 (mean ~1.0-1.2, max ~2 in the sweeps), as the text says of Figure 5; at
  tau = 0.5 they are about 1.5 times that, with no better accuracy (0.866 against 0.861 at
  C = 10, 30 epochs).
* Synthetic task: :data:`qpriv.classification.data.SYNTHETIC_RECIPE` (class_sep 2, 10 % of
  labels re-drawn), chosen so that the models start level unclipped, as the paper's section
  4.1 says they do; a stored cell's name carries the recipe's digest.
* Seeds: "10 experiments ... with distinct random seeds on parameter initialization": seeds
  2024-2033; a seed also draws the batches (and the noise), the data split is fixed.
  ``quick`` and ``tiny`` take the first 2 and 1 of the seeds passed in.
* Accuracy is the test accuracy after the last epoch (no early stopping is mentioned).
* "Distance from the unclipped loss": |L_clipped(e) - L_unclipped(e)| of the training loss
  after epoch e, the unclipped run starting from the same initialisation, seeing the same
  batches and using the same rate (where rates are tuned, the clipped configuration's). For
  Figures 3-6 that run is the seed's unclipped model itself (shuffled fixed-size batches
  depend only on the seed), which is why the unclipped models take the clipped ones' rate;
  for Figure 10 (Poisson batches) it is ``train_classifier``'s ``unclipped_reference`` twin.
* Figures 4 and 6 for the unclipped models: nothing is clipped, so their A_C is 1 and p_clip
  0 (the paper's "pre-clipping distribution" refers to the clipped models); what clipping at
  C = 1.5 does to them is the clipped twin's curve, and Figure 5 shows their norms against C.
* Figure 8's models: the text names only C = 1.5 and eps = 10; we show the MLP and the
  quantum classifier, as in Figures 3-6, at |B| = 64. The MSE uses the Poisson-sampling form
  (:mod:`qpriv.classification.diagnostics`), the sampling the accountant assumes.
* Figure 10: the Honda Scenes set is not redistributable: scikit-learn's digits
  (8x8, classes 0-3, 576 training images). The CNN has 492 parameters, the quantum image
  classifier 504 (28 layers on 6 qubits, after the frozen hierarchical loaders). C, eps and
  |B| are not stated: C = 1.5, eps = 10, |B| = 64, as in Figure 8.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from qpriv.classification.data import VALIDATION_FRACTION, synthetic_recipe_digest
from qpriv.classification.request import ANALYTIC_DEFAULTS, ANALYTIC_TAU
from qpriv.classification.tuning import LR_FACTORS
from qpriv.errors import InvalidInputError
from qpriv.experiments.grid import QML_SEEDS, Budget
from qpriv.privacy.budget import CLASSIFIER_DELTA

CLIPS = (0.5, 1.0, 1.5, 3.0, 10.0)
BATCHES = (32, 64, 128)
EPS = (1.0, 3.0, 10.0)
DEEP_CLIP, DEEP_BATCH, DEEP_EPS = 1.5, 64, 10.0
"""The deep-dive configuration of Figures 3-6, 8 (and our choice for Figure 10)."""
SYNTHETIC_MODELS = ("mlp", "lipschitz", "quantum")
DEEP_MODELS = ("mlp", "quantum")
IMAGE_MODELS = ("cnn", "quantum-image")
OPTIMIZER = "sgd"
LEARNING_RATES = {"mlp": 0.3, "lipschitz": 0.3, "quantum": 1.0, "cnn": 1.0,
                  "quantum-image": 1.0}
CLIPLESS = ("lipschitz", "analytic")
"""The clipless configuration of Figures 2 and 7: (model, clip) of clipless DP-SGD."""
CLIPLESS_LR = 0.01
"""The clipless configuration's SGD base rate, chosen with its temperature on the validation
share (see above and ``scripts/choose_clipless.py``)."""
TAU = 1.0
TUNING_SEED = QML_SEEDS[0]
"""The seed of every tuning trial: one choice of rate per configuration, shared by its
seeds."""


@dataclass(frozen=True)
class Protocol:
    """How much of the paper's protocol one budget spends (``None``: every seed given)."""

    epochs: int
    image_epochs: int
    n_seeds: int | None
    clips: tuple[float, ...]
    batches: tuple[int, ...]
    private_clips: tuple[float, ...]
    eps: tuple[float, ...]
    n_layers: int
    image_layers: int
    loader_steps: int
    hidden: tuple[int, ...]
    lr_factors: tuple[float, ...] | None = None
    """Tune each configuration's rate over these multiples of its base rate (None: use the
    base rate)."""


PROTOCOLS = {
    "full": Protocol(epochs=100, image_epochs=100, n_seeds=None, clips=CLIPS, batches=BATCHES,
                     private_clips=CLIPS, eps=EPS, n_layers=8, image_layers=28,
                     loader_steps=200, hidden=(32, 32), lr_factors=LR_FACTORS),
    # quick: the paper's models and the C values the finding needs, 2 seeds, 15 epochs;
    # one batch size and three C values under noise. Measured on 2 busy CPU cores (load ~4),
    # 1 thread, nothing cached: Figure 7 (36 runs) 415 s, Figure 2 (30 runs) 277 s,
    # Figure 10 (4 runs with twins) 148 s; Figures 3-6 and 8 reuse those runs. With the
    # clipless rows, on cores shared with other jobs (load ~5.5): Figure 7 (40 runs) 21 min,
    # 8 CPU-minutes; Figure 2 (32 runs) 22 min, 6 CPU-minutes
    "quick": Protocol(epochs=15, image_epochs=10, n_seeds=2, clips=CLIPS, batches=(64,),
                      private_clips=(0.5, 1.5, 10.0), eps=(1.0, 10.0), n_layers=8,
                      image_layers=28, loader_steps=200, hidden=(32, 32)),
    # tiny: the test suite's, seconds per figure
    "tiny": Protocol(epochs=2, image_epochs=1, n_seeds=1, clips=(1.5, 10.0), batches=(64,),
                     private_clips=(1.5,), eps=(10.0,), n_layers=1, image_layers=1,
                     loader_steps=2, hidden=(8, 8), lr_factors=(0.3, 1.0)),
}


def protocol(budget: Budget) -> Protocol:
    """The :class:`Protocol` of a budget named ``full``, ``quick`` or ``tiny``."""
    if budget.name not in PROTOCOLS:
        raise InvalidInputError(
            f"budget {budget.name!r} has no classifier protocol; use one of {tuple(PROTOCOLS)}"
        )
    return PROTOCOLS[budget.name]


def budget_stamp(budget: Budget) -> str:
    """What a classifier figure of ``budget`` spends, in one line for its corner:
    ``budget quick: 15 epochs (10 on images), 2 seeds, rates untuned``."""
    plan = protocol(budget)
    seeds = "every seed" if plan.n_seeds is None else (
        f"{plan.n_seeds} seed{'s' if plan.n_seeds != 1 else ''}")
    tuning = ("rates tuned over " + ", ".join(f"{f:g}" for f in plan.lr_factors) + " x base"
              if plan.lr_factors else "rates untuned")
    return (f"budget {budget.name}: {plan.epochs} epochs ({plan.image_epochs} on images), "
            f"{seeds}, {tuning}")


@dataclass(frozen=True)
class Run:
    """One classifier configuration of a grid; ``reference`` adds the unclipped twin. ``lr``
    None is the model's base rate (or, where the budget tunes, the tuned one); ``validation``
    marks a tuning trial, scored on the validation share of the training split."""

    model: str
    clip: float | str | None
    batch: int
    seed: int
    eps: float | None = None
    task: str = "synthetic"
    reference: bool = False
    lr: float | None = None
    validation: bool = False

    @property
    def clipless(self) -> bool:
        """Whether this is the clipless configuration (:data:`CLIPLESS`), which has no C."""
        return (self.model, self.clip) == CLIPLESS

    @property
    def base_rate(self) -> float:
        """The SGD rate used where none is given and none is tuned, and the centre of the
        tuning grid."""
        return CLIPLESS_LR if self.clipless else LEARNING_RATES[self.model]

    def arguments(self, plan: Protocol) -> dict[str, Any]:
        """The keyword arguments of :func:`~qpriv.classification.run.train_classifier` for this run
        under ``plan``."""
        args: dict[str, Any] = {
            "task": self.task, "model": self.model, "clip": self.clip, "batch": self.batch,
            "seed": self.seed, "eps": self.eps, "delta": CLASSIFIER_DELTA, "optimizer": OPTIMIZER,
            "lr": self.base_rate if self.lr is None else self.lr,
            "unclipped_reference": self.reference,
            "epochs": plan.image_epochs if self.task != "synthetic" else plan.epochs,
        }
        if self.model in ("mlp", "lipschitz"):
            args["hidden"] = plan.hidden
        if self.clipless:  # the public constants of its bound, named so that keys carry them
            args.update(tau=ANALYTIC_TAU, **ANALYTIC_DEFAULTS)
        if self.model in ("quantum", "quantum-image"):
            args["tau"] = TAU
            args["n_layers"] = plan.image_layers if self.model == "quantum-image" else \
                plan.n_layers
        if self.model == "quantum-image":
            args["loader_steps"] = plan.loader_steps
        if self.validation:  # a tuning trial: only its accuracy is read
            args.update(validation=VALIDATION_FRACTION, diagnostics=False)
        return args

    def key(self, plan: Protocol) -> str:
        """A file-name-safe identity holding every argument that changes the result."""

        args = self.arguments(plan)
        task = (f"synthetic{synthetic_recipe_digest()}" if self.task == "synthetic"
                else self.task)
        clip = ("none" if self.clip is None else self.clip if isinstance(self.clip, str)
                else f"{self.clip:g}")
        parts = [task, self.model, f"C{clip}",
                 f"B{self.batch}", "noeps" if self.eps is None else f"eps{self.eps:g}",
                 f"E{args['epochs']}", f"{OPTIMIZER}{args['lr']:g}"]
        if "hidden" in args:
            parts.append("h" + "x".join(str(h) for h in args["hidden"]))
        if "n_layers" in args:
            parts.append(f"L{args['n_layers']}-tau{TAU:g}")
        if "loader_steps" in args:
            parts.append(f"loader{args['loader_steps']}")
        if self.clipless:
            parts.append(f"tau{args['tau']:g}-X{args['input_bound']:g}-B{args['bias_bound']:g}")
        if self.reference:
            parts.append("ref")
        if self.validation:
            parts.append(f"val{VALIDATION_FRACTION:g}")
        parts.append(f"s{self.seed}")
        return "-".join(parts)


def seeds_for(seeds: Sequence[int], plan: Protocol) -> tuple[int, ...]:
    """The seeds a budget uses: all of them (full) or the first ``n_seeds``."""
    seeds = tuple(int(s) for s in seeds)
    if not seeds:
        raise InvalidInputError("no seeds given: pass at least one (the paper's: 2024-2033)")
    return seeds if plan.n_seeds is None else seeds[:plan.n_seeds]
