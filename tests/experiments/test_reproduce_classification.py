"""The private-training paper's Figures 2-10 in the registry: every figure runs at the tiny
budget and plots what it should, a second run trains nothing, and the derived columns agree
with independent computations (the unclipped twin, Theorem 3.2's closed form, eq. 12's sum)."""

from __future__ import annotations

import io
import json
import math
from dataclasses import replace
from types import SimpleNamespace

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from qpriv.classification import run as classifier_run
from qpriv.classification.data import synthetic_recipe_digest
from qpriv.classification.tuning import lr_grid
from qpriv.errors import InvalidInputError, QprivError
from qpriv.experiments import qml_protocol, qml_rows, qml_runs
from qpriv.experiments.executors import CellOutcome
from qpriv.experiments.figures import qml_accuracy_vs_clip, qml_accuracy_vs_clip_panel
from qpriv.experiments.grid import FULL, TINY, Budget, mean_std
from qpriv.experiments.qml_protocol import PROTOCOLS, Run
from qpriv.experiments.qml_rows import grid_size
from qpriv.experiments.registry import EXPERIMENTS
from qpriv.experiments.runner import run_experiment

QML_IDS = [f"qml-figure{i}" for i in (2, 3, 4, 5, 6, 7, 8, 10)]
PLOTTED = {  # the columns each figure draws, which every row must carry
    "qml-figure2": ("model", "clip", "batch", "accuracy", "clip_probability", "alignment"),
    "qml-figure3": ("variant", "epoch", "population_grad_norm", "test_accuracy",
                    "distance_from_unclipped_loss"),
    "qml-figure4": ("variant", "epoch", "alignment", "clipping_bias_norm"),
    "qml-figure5": ("variant", "epoch", "mean_example_norm", "max_example_norm"),
    "qml-figure6": ("variant", "epoch", "clip_probability"),
    "qml-figure7": ("model", "clip", "eps", "accuracy", "eps_spent", "eps_kind",
                    "eps_accounting"),
    "qml-figure8": ("variant", "epoch", "test_accuracy", "mse_total", "mse_sampling_variance",
                    "mse_noise_variance", "mse_bias_squared"),
    "qml-figure10": ("variant", "epoch", "test_accuracy", "distance_from_unclipped_loss",
                     "unclipped_accuracy"),
}


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """Every qml figure at the tiny budget in one output folder (shared runs train once)."""
    out = tmp_path_factory.mktemp("qml")
    made = {i: run_experiment(i, budget=TINY, out_dir=out, progress=False) for i in QML_IDS}
    return out, made


def test_the_figures_are_registered_with_the_papers_ten_seeds():
    assert [i for i in EXPERIMENTS if i.startswith("qml-")] == QML_IDS  # no Figure 9
    for experiment_id in QML_IDS:
        exp = EXPERIMENTS[experiment_id]
        assert exp.seeds == tuple(range(2024, 2034)) and exp.paper == "" and exp.figure
    full = Budget("full")
    # 10 seeds and 4 tuning trials per configuration; the clipless row once per |B| or eps
    assert grid_size("qml-figure2", budget=full) == (3 * 5 + 1) * 3 * (10 + 4)
    assert grid_size("qml-figure7", budget=full) == (3 * 5 + 1) * 3 * (10 + 4)
    assert PROTOCOLS["full"].epochs == PROTOCOLS["full"].image_epochs == 100


@pytest.mark.parametrize("experiment_id", QML_IDS)
def test_every_figure_runs_and_writes_its_outputs(reports, experiment_id):
    out, made = reports
    report = made[experiment_id]
    assert report.failures == [] and report.rows
    for row in report.rows:
        missing = [c for c in PLOTTED[experiment_id] if row.get(c) is None]
        assert not missing, (row, missing)
    where = out / experiment_id / "tiny"
    assert (where / "figure.png").read_bytes()[:4] == b"\x89PNG"
    assert (where / "table.md").read_text().startswith(f"# {experiment_id}")
    assert len((where / "results.csv").read_text().splitlines()) == len(report.rows) + 1


def test_every_run_is_on_disk_once_and_a_second_run_trains_nothing(reports, monkeypatch):
    out, made = reports
    stored = list((out / "cells" / "tiny" / "qml").glob("*.json"))
    # Figures 3-6 share four runs, two of them Figure 2's (with their tuning trials), the other
    # two their unclipped twins at the tuned rate; Figure 8's are Figure 7's
    assert len(stored) == (grid_size("qml-figure2", budget=TINY, seeds=[2024])
                           + grid_size("qml-figure7", budget=TINY, seeds=[2024])
                           + 2 + grid_size("qml-figure10", budget=TINY, seeds=[2024]))

    def refuse(**kwargs):
        raise AssertionError(f"retrained {kwargs['model']}")

    monkeypatch.setattr(qml_runs, "train_classifier", refuse)
    for experiment_id in QML_IDS:
        again = run_experiment(experiment_id, budget=TINY, out_dir=out, progress=False)
        assert json.dumps(again.rows) == json.dumps(made[experiment_id].rows)


def test_figure2_rows_hold_the_finding_columns(reports):
    rows = reports[1]["qml-figure2"].rows
    assert {(r["model"], r["clip"]) for r in rows} == {
        (m, c) for m in ("mlp", "lipschitz", "quantum") for c in (1.5, 10.0)} | {
        ("lipschitz", "analytic")}
    by = {(r["model"], r["clip"]): r for r in rows}
    for model in ("mlp", "lipschitz", "quantum"):
        assert by[(model, 10.0)]["accuracy_loss_vs_largest_c"] == 0.0
        assert by[(model, 1.5)]["accuracy_loss_vs_largest_c"] == pytest.approx(
            by[(model, 10.0)]["accuracy"] - by[(model, 1.5)]["accuracy"])
        assert 0.0 <= by[(model, 1.5)]["clip_probability"] <= 1.0
        assert -1.0 <= by[(model, 1.5)]["alignment"] <= 1.0
    # Theorem 3.2: the tiny plan's circuit (4 qubits, L = 1, tau = 1) bounds every
    # per-example norm by 2G/tau = 4 sqrt(3) < 10, so C = 10 never clips it and costs no bias
    quantum = by[("quantum", 10.0)]
    assert quantum["max_example_norm"] <= 4 * 3**0.5 + 1e-9
    assert quantum["clip_probability"] == 0.0 and quantum["clipping_bias_norm"] == 0.0
    assert quantum["alignment"] == pytest.approx(1.0)


def test_distance_from_unclipped_loss_matches_the_unclipped_twin(reports):
    """Figures 3-6 derive the distance from the seed's unclipped run; train_classifier's own
    unclipped_reference twin (same initialisation, same batches) must give the same numbers."""
    rows = reports[1]["qml-figure3"].rows
    plan = PROTOCOLS["tiny"]
    clipped = [r for r in rows if r["variant"] == "clipped classical"]
    # tiny tunes the rate: the twin takes the one the clipped configuration was given
    assert {r["lr"] for r in rows if r["model"] == "mlp"} == {clipped[0]["lr"]}
    twin = classifier_run.train_classifier(
        **Run(model="mlp", clip=1.5, batch=64, seed=2024, reference=True,
              lr=clipped[0]["lr"]).arguments(plan), diagnostics=False)
    ours = [r["distance_from_unclipped_loss"] for r in clipped]
    assert ours == pytest.approx([h["distance_from_unclipped_loss"] for h in twin.history],
                                 rel=1e-5, abs=1e-7)
    assert all(r["distance_from_unclipped_loss"] == 0.0 for r in rows
               if r["variant"] == "classical")


def test_figure5_carries_theorem_3_2_and_figure8_adds_up(reports):
    rows = reports[1]["qml-figure5"].rows
    quantum = [r for r in rows if r["model"] == "quantum"]
    # one layer of RZ RY RZ on 4 qubits: 12 generators P/2 of norm 1/2, Z read-outs of norm 1:
    # G = 2 * 1 * sqrt(12 / 4), bound 2 G / tau with tau = 1
    assert all(r["theorem_3_2_bound"] == pytest.approx(4 * math.sqrt(3)) for r in quantum)
    assert all(r["within_bound"] and r["max_example_norm"] <= r["theorem_3_2_bound"]
               for r in quantum)
    for row in reports[1]["qml-figure8"].rows:
        parts = (row["mse_sampling_variance"] + row["mse_noise_variance"]
                 + row["mse_bias_squared"])
        assert row["mse_total"] == pytest.approx(parts)
        assert row["mse_noise_variance"] > 0  # a private run adds noise


def test_figure7_privacy_is_labelled_and_spent_as_targeted(reports):
    for row in reports[1]["qml-figure7"].rows:
        assert row["eps_kind"] == "global (eps, delta)-DP" and row["eps_accounting"] == "rigorous"
        assert row["delta"] == 1e-5 and row["noise_multiplier"] > 0
        assert row["eps_spent"] == pytest.approx(row["eps"], rel=0.02)
        assert row["eps_spent"] <= row["eps"] * (1 + 1e-6)


def test_mean_std_and_bad_budgets():
    assert mean_std([1, 3, None, float("nan")]) == (2.0, pytest.approx(math.sqrt(2)))
    assert mean_std([5.0]) == (5.0, None)
    assert mean_std([]) == (None, None)
    with pytest.raises(InvalidInputError, match="budget 'huge' has no classifier protocol"):
        qml_rows.figure2(budget=Budget("huge"), seeds=[1], out_dir=".", progress=False)
    with pytest.raises(InvalidInputError, match="no seeds given"):
        qml_rows.figure2(budget=TINY, seeds=[], out_dir=".", progress=False)


def test_each_configuration_takes_the_rate_its_stored_trials_chose(reports):
    """tiny tunes over two factors: a figure's rate is the best validation accuracy among its
    configuration's trials, read back from the files they were stored in."""
    out, made = reports
    plan = PROTOCOLS["tiny"]
    for row in made["qml-figure2"].rows:
        base = (qml_protocol.CLIPLESS_LR if row["clip"] == "analytic"
                else qml_protocol.LEARNING_RATES[row["model"]])
        accuracy = {}
        for lr in (0.3 * base, base):
            trial = Run(model=row["model"], clip=row["clip"], batch=row["batch"],
                        seed=qml_protocol.TUNING_SEED, lr=lr, validation=True)
            stored = json.loads((out / "cells" / "tiny" / "qml" / f"{trial.key(plan)}.json")
                                .read_text())
            assert stored["evaluated_on"] == "validation"
            assert stored["task"]["n_test"] < 2048 * 0.2  # a share of the training split
            accuracy[lr] = stored["accuracy"]
        best = max(accuracy.values())
        assert row["lr"] == min(lr for lr, a in accuracy.items() if a == best)


def test_a_damaged_run_file_is_trained_again_with_a_notice(tmp_path, capsys):
    plan = PROTOCOLS["tiny"]
    run = Run(model="mlp", clip=1.5, batch=64, seed=2024, lr=0.1)
    path = tmp_path / "qml" / f"{run.key(plan)}.json"
    path.parent.mkdir()
    path.write_text('{"accuracy": 0.9, "hist')  # cut short by something outside qpriv
    result = qml_runs.finished_run(run, plan=plan, out_dir=tmp_path, progress=False)
    assert f"cannot read {path}: the file is damaged" in capsys.readouterr().err
    assert json.loads(path.read_text())["accuracy"] == result["accuracy"]
    assert len(result["history"]) == plan.epochs


class _Recording:
    """An executor that trains each job here, in order, and records what it was handed
    (``fail``: the keys that fail instead, as a lost task would)."""

    name = "recording"

    def __init__(self, fail: frozenset[str] = frozenset()) -> None:
        self.fail, self.trained = fail, []

    def run(self, jobs, *, fingerprint, progress, announce=None):
        outcomes = []
        for job in jobs:
            assert job.cell_files == (f"{job.key}.json",)  # the run's one file, not the folder
            if job.finished:
                outcomes.append(CellOutcome(job.key, "kept", value=job.work(progress=False)))
                continue
            self.trained.append(job.key)
            if job.key in self.fail:
                outcomes.append(CellOutcome(job.key, "failed", error="RuntimeError: lost"))
            else:
                outcomes.append(CellOutcome(job.key, "done", value=job.work(progress=False)))
        return outcomes


def test_an_executor_gets_the_trials_first_then_each_run_once_at_its_tuned_rate(tmp_path):
    plan = PROTOCOLS["tiny"]
    runs = [Run(model="mlp", clip=1.5, batch=64, seed=s) for s in (2024, 2025)]
    local = qml_runs.run_all(runs, plan=plan, out_dir=tmp_path / "local", progress=False)
    trials = qml_runs.tuning_trials(runs[0], plan)

    handed = _Recording()
    results = qml_runs.run_all(runs, plan=plan, out_dir=tmp_path / "handed", progress=False,
                               executor=handed)
    # the trials first (their rate is read before the runs are handed out), each once,
    # though both seeds share them
    tuned = [replace(run, lr=local[0]["request"]["lr"]) for run in runs]
    assert handed.trained == [t.key(plan) for t in trials] + [r.key(plan) for r in tuned]
    for mine, theirs in zip(local, results, strict=True):
        assert theirs["accuracy"] == mine["accuracy"] and theirs["lr_tuning"] == mine["lr_tuning"]
    assert "lr_tuning" in json.loads(qml_runs.run_path(tuned[0], plan=plan,
                                                       out_dir=tmp_path / "handed").read_text())
    again = _Recording()  # everything is kept now: nothing is handed out
    assert qml_runs.run_all(runs, plan=plan, out_dir=tmp_path / "handed", progress=False,
                            executor=again) == results
    assert again.trained == []
    damaged = qml_runs.run_path(tuned[1], plan=plan, out_dir=tmp_path / "handed")
    damaged.write_text('{"accuracy": 0.9, "hist')  # a damaged run is handed out again
    qml_runs.run_all(runs, plan=plan, out_dir=tmp_path / "handed", progress=False, executor=again)
    assert again.trained == [tuned[1].key(plan)]


def test_a_failed_run_is_named_after_the_others_are_kept(tmp_path):
    plan = PROTOCOLS["tiny"]
    runs = [Run(model="mlp", clip=1.5, batch=64, seed=s) for s in (2024, 2025)]
    other = Run(model="mlp", clip=10.0, batch=64, seed=2024)  # another configuration
    rate = qml_runs.tuned_rate(runs[0], plan=plan, out_dir=tmp_path / "a", progress=False)["lr"]
    first = replace(runs[0], lr=rate).key(plan)
    with pytest.raises(QprivError, match=rf"^1 classifier runs failed, the first {first}: "
                                         "RuntimeError: lost; the others are kept"):
        qml_runs.run_all(runs, plan=plan, out_dir=tmp_path / "a", progress=False,
                         executor=_Recording(fail=frozenset({first})))
    kept = {p.stem for p in (tmp_path / "a" / "qml").iterdir()}
    assert replace(runs[1], lr=rate).key(plan) in kept and first not in kept

    # a failed rate trial: its configuration's runs wait, the other configuration trains
    trial = qml_runs.tuning_trials(runs[0], plan)[0].key(plan)
    failing = _Recording(fail=frozenset({trial}))
    with pytest.raises(QprivError, match=rf"^1 classifier runs failed, the first {trial}: "
                                         "RuntimeError: lost; 2 runs wait on a failed rate"):
        qml_runs.run_all([*runs, other], plan=plan, out_dir=tmp_path / "b", progress=False,
                         executor=failing)
    kept = {p.stem for p in (tmp_path / "b" / "qml").iterdir()}
    assert not any(key.endswith(("-s2024", "-s2025")) and "C1.5" in key and "val" not in key
                   for key in kept)
    assert sum("C10" in key and "val" not in key for key in kept) == 1


def _hand_result(accuracy: float, history: list[dict], **more) -> dict:
    return {"model": "mlp", "task": {"task": "synthetic"}, "parameters": 100,
            "privacy": "none (clipping only: no noise, no privacy guarantee)", "eps": None,
            "accuracy": accuracy, "history": history, "request": {"lr": 0.1},
            "final_diagnostics": history[-1], **more}


def test_rows_average_over_seeds_and_keep_each_seeds_values_with_it():
    # two seeds: the tiny budget has one, so no figure test sees the averaging
    first = _hand_result(0.6, [{"clip_probability": 0.2}, {"clip_probability": 0.4}])
    second = _hand_result(0.8, [{"clip_probability": 0.6}, {"clip_probability": 0.8}])
    (row,) = qml_rows.final_rows({("mlp",): [first, second]}, keys=("model",),
                                 metrics=("clip_probability",))
    assert row["seeds"] == 2 and row["accuracy"] == pytest.approx(0.7)
    assert row["accuracy_std"] == pytest.approx(math.sqrt(0.02))
    assert row["clip_probability"] == pytest.approx(0.6)  # the final epochs' 0.4 and 0.8
    rows = qml_rows.epoch_rows(
        [first, second], fixed={"variant": "x"}, metrics=("clip_probability", "distance"),
        extra=[{"distance": [1.0, 2.0]}, {"distance": [3.0, 6.0]}])
    assert [r["clip_probability"] for r in rows] == pytest.approx([0.4, 0.6])
    assert [r["distance"] for r in rows] == pytest.approx([2.0, 4.0])  # each seed its own


def test_the_deep_dive_checks_every_seeds_every_epoch_against_the_bound(tmp_path, monkeypatch):
    bound = 10.0

    def fake_run_all(runs, **kwargs):
        results = []
        for i, run in enumerate(runs):
            worst = bound * 2 if (run.model == "quantum" and i == 1) else 1.0
            history = [{"train_loss": 1.0, "mean_example_norm": 0.5, "max_example_norm": m}
                       for m in (worst, 1.0)]  # seed 2's first epoch only exceeds it
            results.append({"history": history, "request": {"lr": 0.1},
                            "gradient_bound": {"per_example_norm_bound": bound}})
        return results

    monkeypatch.setattr(qml_rows, "run_all", fake_run_all)
    rows = qml_rows.deep_dive(budget=FULL, seeds=[2024, 2025], out_dir=tmp_path,
                              progress=False, metrics=("max_example_norm",))  # 2 seeds
    quantum = {r["within_bound"] for r in rows if r["model"] == "quantum"}
    assert quantum == {False}


def test_tuning_trials_run_at_the_tuning_seed_whatever_the_runs_seed(tmp_path, monkeypatch):
    calls = []

    def record(**kwargs):
        calls.append(kwargs)
        stored = {"accuracy": 0.5, "evaluated_on": "validation" if kwargs.get("validation")
                  else "test", "seconds": 0.0, "history": [{}]}
        return SimpleNamespace(to_json=lambda: stored)  # a result as the grid writes it

    monkeypatch.setattr(qml_runs, "train_classifier", record)
    plan = PROTOCOLS["tiny"]
    qml_runs.finished_run(Run(model="mlp", clip=1.5, batch=64, seed=2031), plan=plan,
                          out_dir=tmp_path, progress=False)
    trials = [c for c in calls if c.get("validation")]
    assert len(trials) == len(plan.lr_factors)
    assert {c["seed"] for c in trials} == {qml_protocol.TUNING_SEED}
    assert [c["seed"] for c in calls if not c.get("validation")] == [2031]


def test_the_unclipped_twins_train_at_the_rate_tuned_for_the_clipped_runs(tmp_path, monkeypatch):
    asked = []

    def fake_run_all(runs, **kwargs):
        asked.extend(runs)
        tuned = 0.123 if runs[0].model == "mlp" else 0.456
        return [{"history": [{"train_loss": 1.0, "alignment": 1.0}],
                 "request": {"lr": run.lr if run.lr is not None else tuned}} for run in runs]

    monkeypatch.setattr(qml_rows, "run_all", fake_run_all)
    rows = qml_rows.deep_dive(budget=FULL, seeds=[2024], out_dir=tmp_path,
                              progress=False, metrics=("alignment",))
    twins = {run.model: run.lr for run in asked if run.clip is None}
    assert twins == {"mlp": 0.123, "quantum": 0.456}
    assert all(run.lr is None for run in asked if run.clip is not None)  # tuned per config
    assert {(r["model"], r["lr"]) for r in rows} == {("mlp", 0.123), ("quantum", 0.456)}


# -- the clipless row of Figures 2 and 7 -------------------------------------------------------

# Delta of the projected MLP with three layers, X = 16, B = 1, tau = 2: every layer k adds
# (sqrt(2) / tau)^2 ((X + (k - 1) B)^2 + 1)
CLIPLESS_DELTA = math.sqrt(2) / 2 * math.sqrt(sum((16 + k) ** 2 + 1 for k in range(3)))


@pytest.mark.parametrize(("experiment_id", "by"), [("qml-figure2", "batch"),
                                                   ("qml-figure7", "eps")])
def test_the_clipless_row_is_in_both_grids_once_per_panel_without_a_c(reports, experiment_id,
                                                                       by):
    assert round(CLIPLESS_DELTA, 4) == 20.8806  # the README's Delta = 20.9
    rows = reports[1][experiment_id].rows
    clipless = [r for r in rows if r["clip"] == "analytic"]
    assert {r[by] for r in clipless} == {r[by] for r in rows} and len(clipless) == len(
        {r[by] for r in rows})
    for row in clipless:
        assert row["model"] == "lipschitz" and row["lr"] == qml_protocol.CLIPLESS_LR
        # nothing is clipped: the noise (Figure 7) is scaled by the analytic bound instead
        assert row["sensitivity"] == pytest.approx(CLIPLESS_DELTA)
        assert row["clip_probability"] == 0.0 and row["clipping_bias_norm"] == 0.0
        assert row["max_example_norm"] <= row["sensitivity"]
        assert row["accuracy_loss_vs_largest_c"] is None  # no C to compare with
        assert 0.25 < row["accuracy"] <= 1.0
    for row in rows:
        if row["clip"] != "analytic":
            assert row["sensitivity"] == row["clip"]


def test_every_key_of_figures_2_and_7_is_unique_and_names_the_clipless_mode():
    plan = PROTOCOLS["full"]
    seeds = range(2024, 2034)
    runs = qml_rows.figure2_runs(plan, seeds) + qml_rows.figure7_runs(plan, seeds)
    trials = [replace(r, seed=qml_protocol.TUNING_SEED, lr=lr, validation=True) for r in runs
              for lr in lr_grid(r.base_rate, plan.lr_factors)]
    keys = [r.key(plan) for r in runs]
    assert len(set(keys)) == len(keys) == 2 * (3 * 5 + 1) * 3 * 10
    assert len({t.key(plan) for t in trials} | set(keys)) == len(keys) + len(
        {t.key(plan) for t in trials})
    clipless = [r for r in runs if r.clipless]
    assert len(clipless) == 2 * 3 * 10
    assert clipless[0].key(plan) == (
        f"synthetic{synthetic_recipe_digest()}-lipschitz-Canalytic-B32-noeps-E100-sgd0.01-"
        "h32x32-tau2-X16-B1-s2024")
    assert {r.clip for r in runs if not r.clipless} == set(qml_protocol.CLIPS)
    # the clipless row tunes around its own base rate, the numbered Lipschitz rows around theirs
    assert Run(model="lipschitz", clip="analytic", batch=64, seed=1).base_rate == 0.01
    assert Run(model="lipschitz", clip=1.5, batch=64, seed=1).base_rate == 0.3


def test_the_tiny_figure_draws_the_clipless_row_as_a_labelled_horizontal_line(reports):
    rows = [r for r in reports[1]["qml-figure7"].rows if r["eps"] == 10.0]
    ax = Figure().add_subplot()
    qml_accuracy_vs_clip_panel(ax, rows)
    assert {t.get_text() for t in ax.get_legend().get_texts()} == {
        "mlp", "lipschitz", "quantum",
        "lipschitz, clipless (no C): noise sigma Delta, nothing clipped, Delta = 20.9"}
    (clipless,) = [line for line in ax.get_lines() if line.get_linestyle() == "--"]
    accuracy = next(r["accuracy"] for r in rows if r["clip"] == "analytic")
    # an axhline spans the axes (x in axes coordinates 0 to 1), at no C
    assert list(clipless.get_ydata()) == [accuracy, accuracy]
    assert list(clipless.get_xdata()) == [0, 1]
    drawn_c = {x for line in ax.get_lines() if line is not clipless for x in line.get_xdata()}
    assert drawn_c == {1.5}  # the tiny plan's one private C: the numbered rows only


def test_the_figure_shares_one_legend_below_its_panels(reports):
    """Each panel's own legend covered the lowest points; the shared one sits under the axes."""
    rows = reports[1]["qml-figure7"].rows
    fig = qml_accuracy_vs_clip(rows, title="t", stamp="s", out=io.BytesIO())
    assert all(ax.get_legend() is None for ax in fig.axes)
    (legend,) = fig.legends
    assert {t.get_text() for t in legend.get_texts()} >= {"mlp", "lipschitz", "quantum"}
    renderer = FigureCanvasAgg(fig).get_renderer()
    top = legend.get_window_extent(renderer).y1
    assert top < min(ax.get_tightbbox(renderer).y0 for ax in fig.axes) + 1


def test_a_clipless_row_without_a_c_takes_no_clipping_loss():
    rows = [{"model": "mlp", "clip": 1.0, "eps": 1.0, "accuracy": 0.7},
            {"model": "mlp", "clip": 10.0, "eps": 1.0, "accuracy": 0.8},
            {"model": "lipschitz", "clip": 1.0, "eps": 1.0, "accuracy": 0.6},
            {"model": "lipschitz", "clip": "analytic", "eps": 1.0, "accuracy": 0.9}]
    losses = [r["accuracy_loss_vs_largest_c"]
              for r in qml_rows.add_clipping_loss(rows, by=("eps",))]
    # the numbered Lipschitz row is its own largest C; the clipless row is never compared
    assert losses == [pytest.approx(0.1), 0.0, 0.0, None]
