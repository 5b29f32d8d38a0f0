"""The private-training paper's Figures 2-10 as declared grids of classifier runs.

Source: the private-training paper, section 4. Every figure is a
grid of :func:`qpriv.classification.run.train_classifier` configurations (model x C x batch x
eps x seed); each finished configuration is kept as one JSON file in
``<out>/cells/<budget>/qml/<key>.json`` and read back, never recomputed, so the runs of one
figure serve the others (Figure 2's clipped runs at C = 1.5, |B| = 64 are Figures 3-6's clipped
models; Figure 7's runs at C = 1.5, eps = 10 are Figure 8's). Rows aggregate seeds (mean and
``_std``, the sample standard deviation, None with one seed).

==========  ===========================================================  ====================
figure      what it plots (paper section 4)                                id
==========  ===========================================================  ====================
Figure 1    a diagram of where privacy enters the pipeline (no data)       not registered
Figure 2    test accuracy against C, per |B|: tanh MLP, Lipschitz MLP,    ``qml-figure2``
            quantum; clipping only (no noise); with the clipless
            Lipschitz MLP (ours, not the paper's; no C)
Figure 3    per epoch, C = 1.5, |B| = 64: population gradient norm ||g||  ``qml-figure3``
            (with test accuracy and the distance from the unclipped
            loss, which the text computes "in addition"); classical,
            quantum, clipped classical, clipped quantum
Figure 4    per epoch: directional alignment A_C (eq. 14), and the        ``qml-figure4``
            clipping-bias norm (eq. 13)
Figure 5    per epoch: mean and max per-example norm, against C and the   ``qml-figure5``
            Theorem 3.2 bound 2 G / tau of the quantum model
Figure 6    per epoch: clipping probability Pr[||g_i|| > C]               ``qml-figure6``
Figure 7    test accuracy against C, per eps (DP-SGD, fixed budget), with  ``qml-figure7``
            the clipless Lipschitz MLP (ours; no C)
Figure 8    per epoch, C = 1.5, eps = 10: update MSE (eq. 12) and its      ``qml-figure8``
            parts (sampling variance, noise variance, squared bias),
            with test accuracy
Figure 9    a schematic of the quantum image pipeline (no data)           not registered
Figure 10   per epoch, images, private: test accuracy and distance from   ``qml-figure10``
            the unclipped loss, CNN vs. quantum image classifier
==========  ===========================================================  ====================

The paper prints no number for any figure and the text carries no captions, so no figure has a
``paper_*`` column (``paper=""``). Theorem 3.1 (quantum noise as gradient perturbation) is in no
figure; :func:`qpriv.classification.bounds.gradient_perturbation` and its tests cover it.

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

import functools
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from qpriv.classification.data import VALIDATION_FRACTION, synthetic_recipe_digest
from qpriv.classification.records import ClassifierResult
from qpriv.classification.request import ANALYTIC_DEFAULTS, ANALYTIC_TAU
from qpriv.classification.run import train_classifier
from qpriv.classification.tuning import LR_FACTORS, lr_grid, tuning_record
from qpriv.errors import InvalidInputError, QprivError
from qpriv.experiments.executors import (
    FAILED,
    CellJob,
    CellOutcome,
    Executor,
    Fingerprint,
    LocalExecutor,
)
from qpriv.experiments.grid import QML_SEEDS, Budget, mean_std
from qpriv.privacy.budget import CLASSIFIER_DELTA
from qpriv.runs.cache import cached_json
from qpriv.runs.files import read_json_object

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
VARIANT = {("mlp", False): "classical", ("mlp", True): "clipped classical",
           ("quantum", False): "quantum", ("quantum", True): "clipped quantum"}
RUN_DIR = "qml"
Announce = Callable[[str], None]
"""What receives a line per run as the executor starts, ends or fails it."""


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


# -- runs ---------------------------------------------------------------------------------------


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
        """The keyword arguments of :func:`train_classifier` for this run under ``plan``."""
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


def tunes(run: Run, plan: Protocol) -> bool:
    """Whether ``run``'s rate is tuned first: ``plan`` tunes and ``run`` gives no rate (a
    tuning trial gives its own)."""
    return bool(plan.lr_factors) and run.lr is None and not run.validation


def tuning_trials(run: Run, plan: Protocol) -> list[Run]:
    """The tuning trials of ``run``'s configuration: one per rate of the grid, at
    :data:`TUNING_SEED`, scored on the validation share."""
    return [replace(run, seed=TUNING_SEED, reference=False, lr=lr, validation=True)
            for lr in lr_grid(run.base_rate, plan.lr_factors)]


def tuned_rate(run: Run, *, plan: Protocol, out_dir: Path, progress: bool) -> dict:
    """The tuning record of ``run``'s configuration (:func:`~qpriv.classification.tuning.
    tuning_record`): one stored trial per rate of the grid at :data:`TUNING_SEED`."""
    return tuning_record([(trial.lr, finished_run(trial, plan=plan, out_dir=out_dir,
                                                  progress=progress))
                          for trial in tuning_trials(run, plan)],
                         validation=VALIDATION_FRACTION)


def run_path(run: Run, *, plan: Protocol, out_dir: Path) -> Path:
    """Where ``run``'s result is kept: ``out_dir/qml/<key>.json``."""
    return Path(out_dir) / RUN_DIR / f"{run.key(plan)}.json"


def finished_run(run: Run, *, plan: Protocol, out_dir: Path, progress: bool) -> dict:
    """The result of ``run``: read from ``out_dir/qml/<key>.json`` or trained and written.
    Where ``plan`` tunes and ``run`` has no rate, the rate is tuned first (trials stored the
    same way) and the result carries ``lr_tuning``."""
    tuning = None
    if tunes(run, plan):
        tuning = tuned_rate(run, plan=plan, out_dir=out_dir, progress=progress)
        run = replace(run, lr=tuning["lr"])
    return stored_run(run, plan=plan, out_dir=out_dir, progress=progress, tuning=tuning)


def stored_run(run: Run, *, plan: Protocol, out_dir: Path, progress: bool,
               tuning: dict | None = None) -> dict:
    """The result of ``run`` at its own rate: read back, or trained and written, with
    ``tuning`` (the record its rate was chosen by, if any) stored beside it as ``lr_tuning``.
    A module-level function of the package, so that an executor can hand it to a Ray task."""

    def train() -> dict:
        # one thread whatever the grid's --threads: the run key does not name a thread count,
        # and a matrix product's last bits depend on it, so a stored run is one thread's
        result = train_classifier(**run.arguments(plan), threads=1, progress=False).to_json()
        if tuning:
            result["lr_tuning"] = tuning
        if progress:
            print(f"  {run.key(plan)}: {result['evaluated_on']} accuracy "
                  f"{result['accuracy']:.3f}, {result['seconds']:.1f} s", file=sys.stderr)
        return result

    # a cache of a seeded run: a damaged one is trained again
    result = cached_json(run_path(run, plan=plan, out_dir=out_dir), train,
                         damaged="recompute", fix="it is trained again")
    return {**result, "lr_tuning": tuning} if tuning else result


def run_all(runs: Sequence[Run], *, plan: Protocol, out_dir: Path, progress: bool,
            executor: Executor | None = None, announce: Announce | None = None) -> list[dict]:
    """Every run's result, in order (finished ones read back), the others trained by
    ``executor`` (None: here, one after the other; ``ray``: one Ray task per run): first the
    tuning trials of every configuration whose rate is tuned, then every run at its rate.
    ``announce`` receives the executor's line per run (None: printed on stderr where
    ``progress``).

    Each run is seeded, so the order changes no number. A run trained on another node comes
    back as its JSON, which the executor writes here as it arrives.

    Raises:
        QprivError: some runs failed. Every other run of ``runs`` has been trained and kept
            by then, except those whose rate waits on a failed trial; the message names the
            first failure and how many runs failed or waited.
    """
    executor = LocalExecutor() if executor is None else executor
    out_dir = Path(out_dir).absolute()
    announce = announce or (_say if progress else None)
    trials = [trial for run in runs if tunes(run, plan) for trial in tuning_trials(run, plan)]
    _, failed = _train_all([(trial, None) for trial in trials], plan=plan, out_dir=out_dir,
                           progress=progress, executor=executor, announce=announce)
    lost = {outcome.key for outcome in failed}
    resolved: list[tuple[Run, dict | None] | None] = []
    for run in runs:  # the trials are kept now: each tuned rate is read, not trained
        if not tunes(run, plan):
            resolved.append((run, None))
        elif lost & {trial.key(plan) for trial in tuning_trials(run, plan)}:
            resolved.append(None)  # its rate cannot be chosen
        else:
            tuning = tuned_rate(run, plan=plan, out_dir=out_dir, progress=False)
            resolved.append((replace(run, lr=tuning["lr"]), tuning))
    values, failed_runs = _train_all([pair for pair in resolved if pair is not None],
                                     plan=plan, out_dir=out_dir, progress=progress,
                                     executor=executor, announce=announce)
    failed += failed_runs
    if failed:
        waiting = resolved.count(None)
        raise QprivError(
            f"{len(failed)} classifier runs failed, the first {failed[0].key}: "
            f"{failed[0].error}"
            + (f"; {waiting} runs wait on a failed rate trial" if waiting else "")
            + "; the others are kept: run the command again to retry the rest")
    return [values[pair[0].key(plan)] for pair in resolved if pair is not None]


def _train_all(runs: Sequence[tuple[Run, dict | None]], *, plan: Protocol, out_dir: Path,
               progress: bool, executor: Executor, announce: Announce | None
               ) -> tuple[dict[str, dict], list[CellOutcome]]:
    """The results of runs at their own rates (each with its tuning record) by key, and the
    outcomes of those that failed; each distinct run trained once, by ``executor``."""
    distinct: dict[str, tuple[Run, dict | None]] = {}
    for run, tuning in runs:
        distinct.setdefault(run.key(plan), (run, tuning))
    jobs = [run_job(run, plan=plan, out_dir=out_dir, tuning=tuning)
            for run, tuning in distinct.values()]
    if not jobs:
        return {}, []
    outcomes = executor.run(jobs, fingerprint=Fingerprint.here(), progress=progress,
                            announce=announce)
    return ({outcome.key: outcome.value for outcome in outcomes if outcome.state != FAILED},
            [outcome for outcome in outcomes if outcome.state == FAILED])


def run_job(run: Run, *, plan: Protocol, out_dir: Path, tuning: dict | None = None) -> CellJob:
    """``run`` at its own rate as a job for an executor: its one JSON file is the cell
    (finished where it is readable), :func:`stored_run` the work."""
    path = run_path(run, plan=plan, out_dir=out_dir)
    return CellJob(key=run.key(plan), run_dir=path.parent, cell_files=(path.name,),
                   finished=_kept(path),
                   work=functools.partial(stored_run, run, plan=plan, out_dir=out_dir,
                                          tuning=tuning))


def _kept(path: Path) -> bool:
    """Whether ``path`` holds a run's readable JSON (a damaged one is a run to train again,
    handed out like any other)."""
    try:
        read_json_object(path, fix="")
    except InvalidInputError:
        return False
    return True


def _say(line: str) -> None:
    print(line, file=sys.stderr)


def seeds_for(seeds: Sequence[int], plan: Protocol) -> tuple[int, ...]:
    """The seeds a budget uses: all of them (full) or the first ``n_seeds``."""
    seeds = tuple(int(s) for s in seeds)
    if not seeds:
        raise InvalidInputError("no seeds given: pass at least one (the paper's: 2024-2033)")
    return seeds if plan.n_seeds is None else seeds[:plan.n_seeds]


# -- aggregation --------------------------------------------------------------------------------


def _add(row: dict, name: str, values: Iterable[Any]) -> None:
    row[name], row[f"{name}_std"] = mean_std(values)


def _privacy_columns(result: ClassifierResult) -> dict:
    """The run's privacy as labelled flat columns (a private run's accountant and kind)."""
    if result.claim is None:
        return {"privacy": result.privacy}
    return {"eps_kind": result.claim.kind, "eps_accounting": result.claim.accounting,
            "delta": result.claim.delta, "noise_multiplier": result.noise_multiplier}


def final_rows(grouped: dict[tuple, list[dict]], *, keys: Sequence[str],
               metrics: Sequence[str]) -> list[dict]:
    """One row per group: its keys, the seed count and the final-epoch metrics over seeds."""
    rows = []
    for group, stored in grouped.items():
        results = [ClassifierResult.from_json(r) for r in stored]
        row: dict[str, Any] = dict(zip(keys, group, strict=True))
        row["seeds"] = len(results)
        row["epochs"] = len(results[0].history)
        row["lr"] = results[0].lr
        row["sensitivity"] = results[0].sensitivity
        _add(row, "accuracy", (r.accuracy for r in results))
        row["diverged_seeds"] = sum(r.diverged_epoch is not None for r in results)
        for metric in metrics:
            _add(row, metric, (r.final_diagnostics.get(metric) for r in results))
        if results[0].claim is not None:
            _add(row, "eps_spent", (r.claim.value for r in results))
        row.update(_privacy_columns(results[0]))
        rows.append(row)
    return rows


def epoch_rows(results: Sequence[dict], *, fixed: dict, metrics: Sequence[str],
               extra: Sequence[dict] | None = None) -> list[dict]:
    """One row per epoch: ``fixed`` columns, and each metric's mean and std over the seeds'
    histories (``extra[i][epoch]`` adds per-seed values computed elsewhere)."""
    rows = []
    for e in range(min(len(r["history"]) for r in results)):
        row: dict[str, Any] = {**fixed, "epoch": e + 1, "seeds": len(results)}
        for metric in metrics:
            values = [extra[i][metric][e] if extra and metric in extra[i]
                      else r["history"][e].get(metric) for i, r in enumerate(results)]
            _add(row, metric, values)
        rows.append(row)
    return rows


def _group(runs: Sequence[Run], results: Sequence[dict], key) -> dict[tuple, list[dict]]:
    grouped: dict[tuple, list[dict]] = {}
    for run, result in zip(runs, results, strict=True):
        grouped.setdefault(key(run), []).append(result)
    return grouped


# -- Figure 2 and 7: accuracy against C ----------------------------------------------------------

SWEEP_METRICS = ("clip_probability", "alignment", "clipping_bias_norm", "mean_example_norm",
                 "max_example_norm", "population_grad_norm")


def has_c(row: Mapping[str, Any]) -> bool:
    """Whether a Figure 2 or 7 row sits at a number C (the clipless row has none)."""
    return isinstance(row["clip"], int | float) and not isinstance(row["clip"], bool)


def add_clipping_loss(rows: list[dict], *, by: Sequence[str]) -> list[dict]:
    """``accuracy_loss_vs_largest_c``: accuracy at the largest C of the same model (and
    ``by`` keys) minus this row's: what clipping costs each model. The clipless row has no C
    and gets None."""
    best: dict[tuple, tuple[float, float | None]] = {}
    for row in filter(has_c, rows):
        group = (row["model"], *(row[k] for k in by))
        if group not in best or row["clip"] > best[group][0]:
            best[group] = (row["clip"], row.get("accuracy"))
    out = []
    for row in rows:
        top = best[(row["model"], *(row[k] for k in by))][1] if has_c(row) else None
        loss = top - row["accuracy"] if top is not None and row.get("accuracy") is not None \
            else None
        out.append({**row, "accuracy_loss_vs_largest_c": loss})
    return out


def sweep_configurations(clips: Sequence[float]) -> list[tuple[str, float | str]]:
    """The (model, clip) pairs of Figures 2 and 7: every synthetic model at every C, then the
    clipless configuration :data:`CLIPLESS` once."""
    return [(m, c) for m in SYNTHETIC_MODELS for c in clips] + [CLIPLESS]


def figure2_runs(plan: Protocol, seeds: Sequence[int]) -> list[Run]:
    """Figure 2's runs: every |B| x (model, C) pair and the clipless row x seed, no noise."""
    return [Run(model=m, clip=c, batch=b, seed=s) for b in plan.batches
            for m, c in sweep_configurations(plan.clips) for s in seeds_for(seeds, plan)]


def figure7_runs(plan: Protocol, seeds: Sequence[int]) -> list[Run]:
    """Figure 7's runs: every eps x (model, C) pair and the clipless row x seed, |B| = 64."""
    return [Run(model=m, clip=c, batch=DEEP_BATCH, seed=s, eps=e) for e in plan.eps
            for m, c in sweep_configurations(plan.private_clips) for s in seeds_for(seeds, plan)]


def figure2(*, budget: Budget, seeds: Sequence[int], out_dir: Path, progress: bool = False,
            executor: Executor | None = None, announce: Announce | None = None,
            **_: object) -> list[dict]:
    """Figure 2: test accuracy against C for every |B|, clipping only (no noise), with the
    final clipping statistics that explain it (p_clip, A_C, bias, norms); the clipless row
    (no noise either) for every |B|."""
    plan = protocol(budget)
    runs = figure2_runs(plan, seeds)
    results = run_all(runs, plan=plan, out_dir=out_dir, progress=progress, executor=executor,
                      announce=announce)
    grouped = _group(runs, results, lambda r: (r.model, r.clip, r.batch))
    rows = final_rows(grouped, keys=("model", "clip", "batch"), metrics=SWEEP_METRICS)
    return add_clipping_loss(rows, by=("batch",))


def figure7(*, budget: Budget, seeds: Sequence[int], out_dir: Path, progress: bool = False,
            executor: Executor | None = None, announce: Announce | None = None,
            **_: object) -> list[dict]:
    """Figure 7: test accuracy against C for every eps (DP-SGD at a fixed budget, |B| = 64),
    with the final clipping statistics and the labelled privacy of each row; the clipless row
    for every eps."""
    plan = protocol(budget)
    runs = figure7_runs(plan, seeds)
    results = run_all(runs, plan=plan, out_dir=out_dir, progress=progress, executor=executor,
                      announce=announce)
    grouped = _group(runs, results, lambda r: (r.model, r.clip, r.eps))
    rows = final_rows(grouped, keys=("model", "clip", "eps"), metrics=SWEEP_METRICS)
    return add_clipping_loss(rows, by=("eps",))


# -- Figures 3-6: the deep dive at C = 1.5, |B| = 64, no noise -----------------------------------


def deep_dive(*, budget: Budget, seeds: Sequence[int], out_dir: Path, progress: bool,
              metrics: Sequence[str], executor: Executor | None = None,
              announce: Announce | None = None) -> list[dict]:
    """Per-epoch ``metrics`` of the four models of Figures 3-6 (classical, quantum, each
    unclipped and clipped at C = 1.5), |B| = 64, no noise; ``distance_from_unclipped_loss``
    is |L_clipped - L_unclipped| of the same seed (0 for the unclipped models)."""
    plan = protocol(budget)
    chosen = seeds_for(seeds, plan)
    rows = []
    for model in DEEP_MODELS:
        clipped = [Run(model=model, clip=DEEP_CLIP, batch=DEEP_BATCH, seed=s) for s in chosen]
        clipped_results = run_all(clipped, plan=plan, out_dir=out_dir, progress=progress,
                                  executor=executor, announce=announce)
        # the unclipped models are the clipped ones' twins: same rate (the one tuned for the
        # clipped configuration), initialisation and batches, so the distance is clipping's
        lr = clipped_results[0]["request"]["lr"]
        plain = [Run(model=model, clip=None, batch=DEEP_BATCH, seed=s, lr=lr) for s in chosen]
        plain_results = run_all(plain, plan=plan, out_dir=out_dir, progress=progress,
                                executor=executor, announce=announce)
        for is_clipped, results in ((False, plain_results), (True, clipped_results)):
            distance = [{"distance_from_unclipped_loss": [
                abs(h["train_loss"] - p["train_loss"]) if is_clipped else 0.0
                for h, p in zip(r["history"], ref["history"], strict=True)]}
                for r, ref in zip(results, plain_results, strict=True)]
            fixed: dict[str, Any] = {"variant": VARIANT[(model, is_clipped)], "model": model,
                                     "clip": DEEP_CLIP if is_clipped else None,
                                     "batch": DEEP_BATCH, "lr": results[0]["request"]["lr"]}
            if "max_example_norm" in metrics and model == "quantum":
                bound = results[0]["gradient_bound"]["per_example_norm_bound"]
                worst = max(h["max_example_norm"] for r in results for h in r["history"])
                fixed.update(theorem_3_2_bound=bound, within_bound=worst <= bound)
            rows += epoch_rows(results, fixed=fixed, metrics=metrics, extra=distance)
    return rows


def figure3(**kwargs: Any) -> list[dict]:
    """Figure 3: the population gradient norm ||g|| per epoch (with test accuracy and the
    distance from the unclipped loss)."""
    return deep_dive(metrics=("population_grad_norm", "test_accuracy",
                              "distance_from_unclipped_loss"), **_runner_args(kwargs))


def figure4(**kwargs: Any) -> list[dict]:
    """Figure 4: the directional alignment A_C (eq. 14) per epoch, and the clipping-bias
    norm ||b_C|| (eq. 13)."""
    return deep_dive(metrics=("alignment", "clipping_bias_norm"), **_runner_args(kwargs))


def figure5(**kwargs: Any) -> list[dict]:
    """Figure 5: the mean and max per-example gradient norms per epoch, beside C and, for the
    quantum model, Theorem 3.2's bound 2 G / tau (``within_bound``: every seed's every
    epoch's max below it)."""
    return deep_dive(metrics=("mean_example_norm", "max_example_norm"), **_runner_args(kwargs))


def figure6(**kwargs: Any) -> list[dict]:
    """Figure 6: the clipping probability Pr[||g_i|| > C] per epoch."""
    return deep_dive(metrics=("clip_probability",), **_runner_args(kwargs))


def _runner_args(kwargs: dict) -> dict:
    return {"budget": kwargs["budget"], "seeds": kwargs["seeds"], "out_dir": kwargs["out_dir"],
            "progress": kwargs.get("progress", False), "executor": kwargs.get("executor"),
            "announce": kwargs.get("announce")}


# -- Figure 8: update MSE under DP-SGD -----------------------------------------------------------

MSE_METRICS = ("test_accuracy", "mse_total", "mse_sampling_variance", "mse_noise_variance",
               "mse_bias_squared")


def figure8(*, budget: Budget, seeds: Sequence[int], out_dir: Path, progress: bool = False,
            executor: Executor | None = None, announce: Announce | None = None,
            **_: object) -> list[dict]:
    """Figure 8: the update MSE (eq. 12) and its three parts per epoch, with test accuracy,
    for the MLP and the quantum classifier under DP-SGD at C = 1.5, eps = 10, |B| = 64."""
    plan = protocol(budget)
    rows = []
    for model in DEEP_MODELS:
        runs = [Run(model=model, clip=DEEP_CLIP, batch=DEEP_BATCH, seed=s, eps=DEEP_EPS)
                for s in seeds_for(seeds, plan)]
        results = run_all(runs, plan=plan, out_dir=out_dir, progress=progress,
                          executor=executor, announce=announce)
        first = ClassifierResult.from_json(results[0])
        fixed = {"variant": f"{VARIANT[(model, True)]} + noise", "model": model,
                 "clip": DEEP_CLIP, "batch": DEEP_BATCH, "eps": DEEP_EPS,
                 "lr": first.lr, **_privacy_columns(first)}
        rows += epoch_rows(results, fixed=fixed, metrics=MSE_METRICS)
    return rows


# -- Figure 10: images -----------------------------------------------------------------------------


def figure10(*, budget: Budget, seeds: Sequence[int], out_dir: Path, progress: bool = False,
             executor: Executor | None = None, announce: Announce | None = None,
             **_: object) -> list[dict]:
    """Figure 10: per epoch, the CNN and the quantum image classifier (digits, C = 1.5,
    eps = 10, |B| = 64): test accuracy and distance from the unclipped loss, with the
    unclipped twin's final accuracy (``unclipped_accuracy``) and the parameter counts."""
    plan = protocol(budget)
    rows = []
    for model in IMAGE_MODELS:
        runs = [Run(model=model, clip=DEEP_CLIP, batch=DEEP_BATCH, seed=s, eps=DEEP_EPS,
                    task="digits", reference=True) for s in seeds_for(seeds, plan)]
        results = run_all(runs, plan=plan, out_dir=out_dir, progress=progress,
                          executor=executor, announce=announce)
        first = ClassifierResult.from_json(results[0])
        fixed: dict[str, Any] = {"variant": model, "model": model, "clip": DEEP_CLIP,
                                 "batch": DEEP_BATCH, "eps": DEEP_EPS, "lr": first.lr,
                                 "parameters": first.parameters}
        fixed["unclipped_accuracy"], fixed["unclipped_accuracy_std"] = mean_std(
            r["unclipped_reference"]["accuracy"] for r in results)
        fixed.update(_privacy_columns(first))
        rows += epoch_rows(results, fixed=fixed,
                           metrics=("test_accuracy", "distance_from_unclipped_loss",
                                    "clip_probability", "alignment"))
    return rows


COMPUTE = {"qml-figure2": figure2, "qml-figure3": figure3, "qml-figure4": figure4,
           "qml-figure5": figure5, "qml-figure6": figure6, "qml-figure7": figure7,
           "qml-figure8": figure8, "qml-figure10": figure10}
"""Each registered id and the function computing its rows."""


def grid_size(experiment_id: str, *, budget: Budget, seeds: Sequence[int] = QML_SEEDS) -> int:
    """How many distinct classifier runs ``experiment_id`` needs at ``budget``: one per seed
    of each configuration, plus one tuning trial per rate where the budget tunes (Figures 2
    and 7 count the clipless configuration once per |B| or eps)."""
    plan = protocol(budget)
    per_configuration = len(seeds_for(seeds, plan)) + len(plan.lr_factors or ())
    synthetic = len(SYNTHETIC_MODELS)
    configurations = {
        "qml-figure2": (synthetic * len(plan.clips) + 1) * len(plan.batches),
        "qml-figure7": (synthetic * len(plan.private_clips) + 1) * len(plan.eps),
        "qml-figure8": len(DEEP_MODELS),
        "qml-figure10": len(IMAGE_MODELS),
    }
    for i in (3, 4, 5, 6):
        configurations[f"qml-figure{i}"] = 2 * len(DEEP_MODELS)
    if experiment_id not in configurations:
        raise InvalidInputError(f"{experiment_id!r} is not one of {tuple(configurations)}")
    return configurations[experiment_id] * per_configuration
