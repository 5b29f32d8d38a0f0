"""The experiment registry: every table and figure of the LDPT paper as a declared grid.

An experiment is data, not a script (declared once, never a copied loop): the cells
it trains (method x eps x dataset x horizon x seed, with model overrides), the metrics it
tabulates, or, for the tables that need no training, the function that computes its rows. One
runner (:mod:`qpriv.experiments.runner`) runs any of them, skipping finished cells; cells are
stored by their own key, so the runs of Table 3 serve Tables 4, 8, 9 and Figure 3 too.

    qpriv reproduce --list
    qpriv reproduce table3 --quick
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from qpriv.errors import InvalidInputError
from qpriv.experiments import computed, qml_protocol, qml_rows
from qpriv.experiments.grid import (
    PAPER_EPS,
    PAPER_HORIZONS,
    PAPER_SEEDS,
    QML_SEEDS,
    Experiment,
    budget_stamp,
    grid,
)

EXPERIMENTS: dict[str, Experiment] = {}


def register(experiment: Experiment) -> Experiment:
    if experiment.id in EXPERIMENTS:
        raise ValueError(f"experiment {experiment.id!r} is registered twice")
    EXPERIMENTS[experiment.id] = experiment
    return experiment


def experiment(experiment_id: str) -> Experiment:
    """The registered experiment ``experiment_id``, or an error listing the known ones."""
    if experiment_id not in EXPERIMENTS:
        raise InvalidInputError(
            f"unknown experiment {experiment_id!r}; known: {', '.join(EXPERIMENTS)} "
            "(qpriv reproduce --list)"
        )
    return EXPERIMENTS[experiment_id]


CLASSICAL = ("classical", (None,))
MIA_METRICS = ("mia_accuracy", "mia_auc", "loss_gap", "train_mse", "test_mse", "mia_tpr_1pct",
               "mia_tpr_0.1pct")


def _paper_methods(*names: str, eps: Sequence[float] = PAPER_EPS
                   ) -> list[tuple[str, tuple[float | None, ...]]]:
    return [CLASSICAL, *((name, tuple(eps)) for name in names)]


# -- the tables -----------------------------------------------------------------------------

register(Experiment("table1", "Training-time privacy composition (T = 20, delta' = 1e-6)",
                    paper="table1", compute=computed.composition_table, seeds=()))
register(Experiment("table2", "Trace distance vs. perturbation size on ETTh1 (C = 7)",
                    paper="table2", compute=computed.trace_distance_table, seeds=()))
register(Experiment("table3", "DP-SGD vs. LDPT on ETTh1, H = 24", paper="table3",
                    cells=grid(_paper_methods("ldpt", "dpsgd")),
                    metrics=("mse", "mae", "eps_train", "delta_mse_pct"),
                    derive=computed.add_delta_vs_classical, full_hours=12.0))
register(Experiment("table4", "Training convergence on ETTh1, H = 24", paper="table4",
                    cells=grid(_paper_methods("ldpt", "dpsgd")),
                    metrics=("train_loss", "val_loss", "best_epoch", "mse"), full_hours=12.0))
register(Experiment("table5", "Multi-horizon MSE on ETTh1 (LDPT vs. classical)",
                    paper="table5",
                    cells=grid([CLASSICAL, ("ldpt", (0.1, 1.0, 5.0)), ("ldpt-clean", (None,))],
                               horizons=PAPER_HORIZONS),
                    metrics=("mse",), full_hours=45.0))
register(Experiment("table6", "DP-Input vs. DP-SGD vs. LDPT on ETTh1, H = 24", paper="table6",
                    cells=grid([CLASSICAL, ("ldpt", (0.1, 5.0)), ("dpsgd", (0.1, 5.0)),
                                ("dp-input", (0.1, 1.0, 5.0))]),
                    metrics=("mse", "mae", "eps_train", "sigma", "noise_multiplier",
                             "delta_mse_pct"),
                    derive=computed.add_delta_vs_classical, full_hours=12.0))
register(Experiment("table7", "Calibration chain (Algorithm 1) and fidelity", paper="table7",
                    compute=computed.calibration_table, seeds=()))
register(Experiment("table8", "DP-SGD noise multipliers (Opacus RDP) and their effect",
                    paper="table8", cells=grid(_paper_methods("dpsgd")),
                    metrics=("noise_multiplier", "eps_spent", "val_loss", "best_epoch", "mse"),
                    derive=computed.add_accountant_check,
                    full_hours=5.0))
register(Experiment("table9", "Membership inference on ETTh1, H = 24", paper="table9",
                    cells=grid([CLASSICAL, ("ldpt", (0.1, 0.5)), ("dpsgd", (0.1,)),
                                ("bottleneck-dp", PAPER_EPS)]),
                    metrics=MIA_METRICS, full_hours=10.0))
register(Experiment("table10", "Ablations on ETTh1, H = 24, eps = 0.1 (and 5.0 for the "
                    "eps-separation)", paper="table10",
                    cells=grid([(m, (0.1, 5.0)) for m in (
                        "ldpt", "ldpt-no-injection", "ldpt-no-channel", "ldpt-shots256",
                        "ldpt-shots4096", "ldpt-k1", "ldpt-k3", "ldpt-layernorm")]),
                    metrics=("mse",), derive=computed.add_eps_separation, full_hours=55.0))
MULTI_SEED = [CLASSICAL, ("ldpt", (0.1, 0.5)), ("dpsgd", (0.1, 0.5))]
register(Experiment("table11", "Multi-seed results on ETTh1 (seeds 2024-2026)",
                    paper="table11", seeds=PAPER_SEEDS,
                    cells=grid(MULTI_SEED, horizons=(24, 336)), metrics=("mse",),
                    full_hours=40.0))
register(Experiment("table12", "Multi-seed results on ETTh2 (seeds 2024-2026)",
                    paper="table12", seeds=PAPER_SEEDS,
                    cells=grid(MULTI_SEED, datasets=("ETTh2",), horizons=(24, 336)),
                    metrics=("mse",), full_hours=40.0))
register(Experiment("table13", "Tuned DP-SGD (batch 512, 50 epochs, warm-up) on ETTh1, H = 24",
                    paper="table13",
                    cells=grid(_paper_methods("dpsgd", "dpsgd-tuned", "ldpt")),
                    metrics=("mse",), full_hours=20.0,
                    stamp=functools.partial(budget_stamp, tuned=True)))
register(Experiment("table14", "Classical bottleneck vs. LDPT on ETTh1", paper="table14",
                    cells=grid([*_paper_methods("bottleneck", "ldpt"), ("dpsgd", (0.1,))],
                               horizons=(24, 48, 96)),
                    metrics=("mse",), full_hours=40.0))
register(Experiment("table15", "Bottleneck with Gaussian-mechanism noise on ETTh1",
                    paper="table15",
                    cells=grid(_paper_methods("bottleneck-dp", "ldpt"), horizons=(24, 48, 96)),
                    metrics=("mse", "sigma"), full_hours=36.0))
register(Experiment("table16", "Computational cost, H = 24 (seconds per epoch, ratio)",
                    paper="table16",
                    cells=grid([CLASSICAL, ("ldpt", (0.1,)), ("dpsgd", (0.1,)),
                                ("dp-input", (0.1,))]),
                    metrics=("seconds_per_epoch", "params", "ratio"),
                    derive=computed.add_cost_ratio, full_hours=5.0))
register(Experiment("tableA1", "Multi-horizon MSE on ETTh2 (LDPT and DP-SGD vs. classical)",
                    paper="tableA1",
                    cells=grid([CLASSICAL, ("ldpt", (0.1, 1.0, 5.0)), ("dpsgd", (0.1, 5.0))],
                               datasets=("ETTh2",), horizons=PAPER_HORIZONS),
                    metrics=("mse",), full_hours=50.0))
register(Experiment("tableA2", "LDPT, DP-SGD and DP-Input on ETTh2, H = 24, eps = 0.1 "
                    "(section 7.10's numbers)", paper="tableA2",
                    cells=grid([CLASSICAL, ("ldpt", (0.1,)), ("dpsgd", (0.1,)),
                                ("dp-input", (0.1,))], datasets=("ETTh2",)),
                    metrics=("mse", "mae", "delta_mse_pct"),
                    derive=computed.add_delta_vs_classical, full_hours=6.0))
register(Experiment("tableA3", "Bottleneck with Gaussian-mechanism noise on ETTh2",
                    paper="tableA3",
                    cells=grid(_paper_methods("bottleneck-dp", "ldpt"), datasets=("ETTh2",),
                               horizons=(24, 48, 96)),
                    metrics=("mse", "sigma"), full_hours=36.0))
register(Experiment("tableA4", "Bottleneck-DP vs. LDPT at eps = 0.1 over horizons",
                    paper="tableA4",
                    cells=grid([("bottleneck-dp", (0.1,)), ("ldpt", (0.1,))],
                               datasets=("ETTh1", "ETTh2"), horizons=PAPER_HORIZONS),
                    metrics=("mse",), full_hours=40.0))
register(Experiment("tableA5", "Classical bottleneck vs. LDPT on ETTh2", paper="tableA5",
                    cells=grid(_paper_methods("bottleneck", "ldpt"), datasets=("ETTh2",),
                               horizons=(24, 48, 96)),
                    metrics=("mse",), full_hours=36.0))
register(Experiment("tableA6", "Membership inference on ETTh2, H = 24", paper="tableA6",
                    cells=grid([CLASSICAL, ("ldpt", (0.1, 0.5)), ("dpsgd", (0.1,)),
                                ("bottleneck-dp", PAPER_EPS)], datasets=("ETTh2",)),
                    metrics=MIA_METRICS, full_hours=10.0))
register(Experiment("figure3", "MSE against eps: LDPT vs. DP-SGD (ETTh1, H = 24)",
                    paper="figure3", cells=grid(_paper_methods("ldpt", "dpsgd")),
                    metrics=("mse",), figure="mse_vs_eps", full_hours=12.0))
register(Experiment("figure4", "MSE across horizons at eps = 0.1, both datasets",
                    paper="figure4",
                    cells=grid([CLASSICAL, ("ldpt", (0.1,)), ("dpsgd", (0.1,))],
                               datasets=("ETTh1", "ETTh2"), horizons=PAPER_HORIZONS),
                    metrics=("mse",), figure="mse_vs_horizon", full_hours=60.0))


# -- the private-training paper: Figures 2-10 -------------------------------------------------
# Grids of classifier runs computed in qpriv.experiments.qml_rows;
# Figure 9 is a schematic with no data, so nothing is registered for it. The paper prints no
# numbers for its figures: paper="" (no paper_* columns). full_hours: measured on 2 busy CPU
# cores at 1 thread (seconds per epoch of the quick runs, times the full grid), plus the full
# budget's 4 learning-rate trials per configuration at about 0.8 of a run each (80 % of the
# training split, no diagnostics).

def _register_qml(number: int, title: str, figure: str, full_hours: float,
                  quick_minutes: float = 5.0) -> None:
    experiment_id = f"qml-figure{number}"
    register(Experiment(experiment_id, f"Private training, Figure {number}: {title}", paper="",
                        compute=qml_rows.COMPUTE[experiment_id], figure=figure, seeds=QML_SEEDS,
                        full_hours=full_hours, quick_minutes=quick_minutes,
                        stamp=qml_protocol.budget_stamp, distributes=True))


_register_qml(2, "test accuracy vs. C and |B|, clipping only (MLP, Lipschitz, quantum; "
              "clipless Lipschitz, no C)", "qml_accuracy_vs_clip", full_hours=12.0)
_register_qml(3, "population gradient norm per epoch (C = 1.5, |B| = 64)",
              "qml_population_gradient", full_hours=0.9)
_register_qml(4, "directional alignment per epoch (C = 1.5, |B| = 64)", "qml_alignment",
              full_hours=0.9)
_register_qml(5, "mean and max per-example gradient norm per epoch (C = 1.5, |B| = 64)",
              "qml_example_norms", full_hours=0.9)
_register_qml(6, "clipping probability per epoch (C = 1.5, |B| = 64)", "qml_clip_probability",
              full_hours=0.9)
_register_qml(7, "test accuracy vs. C and eps under DP-SGD (|B| = 64; clipless Lipschitz, "
              "no C)", "qml_accuracy_vs_clip", full_hours=12.5, quick_minutes=7.0)
_register_qml(8, "update MSE and its parts per epoch under DP-SGD (C = 1.5, eps = 10)",
              "qml_update_mse", full_hours=0.5)
_register_qml(10, "private image classification per epoch: CNN vs. quantum (digits, C = 1.5, "
              "eps = 10)", "qml_images", full_hours=2.5, quick_minutes=2.5)
