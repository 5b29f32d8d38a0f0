"""The private-training paper's Figures 2-10 as declared grids of classifier runs, and their
rows.

Source: the private-training paper, section 4. Every figure is a grid of
:func:`qpriv.classification.run.train_classifier` configurations (model x C x batch x eps x
seed, each a :class:`~qpriv.experiments.qml_protocol.Run`), trained and kept by
:mod:`qpriv.experiments.qml_runs`, where the runs of one figure serve the others. Rows
aggregate seeds (mean and ``_std``, the sample standard deviation, None with one seed).

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

The choices the paper leaves open (C grid, batch sizes, eps values, SGD and its learning
rates, tau, circuit depth, digits for Honda Scenes) are listed in
:mod:`qpriv.experiments.qml_protocol`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from qpriv.classification.records import ClassifierResult
from qpriv.errors import InvalidInputError
from qpriv.experiments.executors import Executor
from qpriv.experiments.grid import QML_SEEDS, Budget, mean_std
from qpriv.experiments.qml_protocol import (
    CLIPLESS,
    DEEP_BATCH,
    DEEP_CLIP,
    DEEP_EPS,
    DEEP_MODELS,
    IMAGE_MODELS,
    SYNTHETIC_MODELS,
    Protocol,
    Run,
    protocol,
    seeds_for,
)
from qpriv.experiments.qml_runs import Announce, run_all

VARIANT = {("mlp", False): "classical", ("mlp", True): "clipped classical",
           ("quantum", False): "quantum", ("quantum", True): "clipped quantum"}
"""How the deep dives' rows name a (model, clipped) pair."""


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
    clipless configuration :data:`~qpriv.experiments.qml_protocol.CLIPLESS` once."""
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
    return _sweep_rows(figure2_runs(plan, seeds), by="batch", plan=plan, out_dir=out_dir,
                       progress=progress, executor=executor, announce=announce)


def figure7(*, budget: Budget, seeds: Sequence[int], out_dir: Path, progress: bool = False,
            executor: Executor | None = None, announce: Announce | None = None,
            **_: object) -> list[dict]:
    """Figure 7: test accuracy against C for every eps (DP-SGD at a fixed budget, |B| = 64),
    with the final clipping statistics and the labelled privacy of each row; the clipless row
    for every eps."""
    plan = protocol(budget)
    return _sweep_rows(figure7_runs(plan, seeds), by="eps", plan=plan, out_dir=out_dir,
                       progress=progress, executor=executor, announce=announce)


def _sweep_rows(runs: Sequence[Run], *, by: str, plan: Protocol, out_dir: Path, progress: bool,
                executor: Executor | None, announce: Announce | None) -> list[dict]:
    """Figure 2's or 7's rows: one per (model, C, ``by``) over the seeds of ``runs``, with
    what clipping costs each model at that ``by`` (|B| or eps)."""
    results = run_all(runs, plan=plan, out_dir=out_dir, progress=progress, executor=executor,
                      announce=announce)
    grouped = _group(runs, results, lambda r: (r.model, r.clip, getattr(r, by)))
    rows = final_rows(grouped, keys=("model", "clip", by), metrics=SWEEP_METRICS)
    return add_clipping_loss(rows, by=(by,))


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
