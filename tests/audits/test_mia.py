"""Loss-threshold membership inference: closed forms on synthetic losses, a hand-computed ROC,
and the attack on a tiny real run."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from qpriv.audits.mia import membership_inference, mia_on_run, tpr_at_fpr
from qpriv.errors import InvalidInputError
from qpriv.forecasting.artifacts import load_run
from qpriv.forecasting.run import run_forecast
from qpriv.training.evaluation import evaluate, per_window_losses
from qpriv.training.seeding import derive_seed


def test_identical_distributions_give_chance():
    rng = np.random.default_rng(1)
    n = 600
    result = membership_inference(rng.exponential(0.5, n), rng.exponential(0.5, n), seed=3)
    # a useless attack: AUC ~ 0.5 within 4 null standard deviations (Mann-Whitney), accuracy
    # ~ 0.5 within 4 binomial standard errors
    null_std = math.sqrt((2 * n + 1) / (12 * n * n))
    assert result.auc_null_std == pytest.approx(null_std)
    assert abs(result.auc - 0.5) < 4 * null_std
    assert abs(result.auc_loss_threshold - 0.5) < 4 * null_std
    assert abs(result.accuracy - 0.5) < 4 * math.sqrt(0.25 / (2 * n))
    assert (result.n_members, result.n_nonmembers, result.folds) == (n, n, 5)


def test_separated_exponentials_match_the_closed_form_auc():
    # members' losses ~ Exp(mean 0.1), non-members' ~ Exp(mean 1): a member's loss is below a
    # non-member's with probability rate_m / (rate_m + rate_n) = 10 / 11 (the AUC of the loss)
    rng = np.random.default_rng(2)
    n = 1000
    members, nonmembers = rng.exponential(0.1, n), rng.exponential(1.0, n)
    result = membership_inference(members, nonmembers, seed=0)
    assert result.auc_loss_threshold == pytest.approx(10 / 11, abs=0.03)
    # one feature: the logistic regression is a threshold on the loss, same ranking
    assert result.auc == pytest.approx(result.auc_loss_threshold, abs=0.01)
    # the best threshold t maximises P(correct) = (1 - e^{-10 t} + e^{-t}) / 2: t = ln(10) / 9
    t = math.log(10) / 9
    best = (1 - math.exp(-10 * t) + math.exp(-t)) / 2
    assert best - 0.04 < result.accuracy <= best + 0.03
    assert result.loss_gap == pytest.approx(members.mean() - nonmembers.mean())
    assert result.loss_gap < 0


def test_perfect_separation():
    n = 200
    result = membership_inference(np.linspace(0.01, 0.1, n), np.linspace(1.0, 2.0, n), seed=0)
    assert result.accuracy == 1.0 and result.auc == 1.0
    at_1, at_01 = result.tpr_at_fpr
    assert (at_1.target_fpr, at_1.tpr, at_1.resolved) == (0.01, 1.0, True)
    # 0.1 % < 1/200: below resolution, reported at FPR = 0, and said so
    assert (at_01.tpr, at_01.achieved_fpr, at_01.resolved) == (1.0, 0.0, False)
    assert any("below the resolution 1/200" in note for note in result.notes)


def test_tpr_at_fpr_against_a_hand_computed_roc():
    # members score 0.9, 0.8, 0.4; non-members 0.7, 0.3, 0.2, 0.1. Thresholds from the top:
    # (FPR, TPR) = (0, 1/3), (0, 2/3), (1/4, 2/3), (1/4, 1), (2/4, 1), ...
    labels = np.array([1, 1, 1, 0, 0, 0, 0])
    scores = np.array([0.9, 0.8, 0.4, 0.7, 0.3, 0.2, 0.1])
    at_quarter = tpr_at_fpr(labels, scores, 0.25)
    assert (at_quarter.tpr, at_quarter.achieved_fpr, at_quarter.resolved) == (1.0, 0.25, True)
    below = tpr_at_fpr(labels, scores, 0.2)
    assert below.tpr == pytest.approx(2 / 3) and below.achieved_fpr == 0.0
    assert not below.resolved  # 0.2 < 1/4
    assert tpr_at_fpr(labels, scores, 1.0).tpr == 1.0


def test_same_seed_same_result():
    rng = np.random.default_rng(4)
    members, nonmembers = rng.exponential(0.8, 300), rng.exponential(1.0, 300)
    first = membership_inference(members, nonmembers, seed=7)
    assert membership_inference(members, nonmembers, seed=7) == first
    assert membership_inference(torch.tensor(members), torch.tensor(nonmembers), seed=7) == first


@pytest.mark.parametrize(
    ("members", "nonmembers", "kwargs", "match"),
    [([0.1, 0.2], [0.1], {}, "balanced"),
     ([0.1, -0.2], [0.1, 0.3], {}, "negative, NaN or infinite"),
     ([0.1, float("nan")], [0.1, 0.3], {}, "negative, NaN or infinite"),
     ([], [], {}, "non-empty"),
     ([0.1, 0.2, 0.3], [0.4, 0.5, 0.6], {"folds": 4}, r"folds = 4 is outside \[2, 3\]"),
     ([0.1, 0.2, 0.3], [0.4, 0.5, 0.6], {"folds": 1}, "folds = 1")],
)
def test_bad_losses_are_refused(members, nonmembers, kwargs, match):
    with pytest.raises(InvalidInputError, match=match):
        membership_inference(np.array(members), np.array(nonmembers), **kwargs)


def test_per_window_losses_average_to_the_evaluated_mse(ldpt_run_dir):
    # two computations of the same pass: evaluate's pooled MSE and the mean of per-window MSEs
    run = load_run(ldpt_run_dir)
    test = run.data().test
    seed = derive_seed(run.result.raw["seed"], "evaluation")
    losses = per_window_losses(run.model, test, seed=seed)
    assert losses.shape == (len(test),) and losses.dtype == torch.float64
    assert float(losses.mean()) == pytest.approx(evaluate(run.model, test, seed=seed)["mse"],
                                                 rel=1e-6)
    # and that pass is the one the run reported: load_run rebuilt model and data exactly
    assert float(losses.mean()) == pytest.approx(run.result.mse, rel=1e-6)


def test_mia_on_a_tiny_run(ldpt_run_dir):
    report = mia_on_run(ldpt_run_dir, n=1000, seed=5)
    attack = report["attack"]
    # the run trained on 64 windows: the attack is cut to 64 per class, and says so
    assert attack["n_members"] == attack["n_nonmembers"] == 64
    assert any("64 windows per class, not the 1000 asked" in note for note in report["notes"])
    assert report["eps_per_pass"]["kind"] == "local eps-QDP per pass"
    assert any("not for the trained weights this attack reads" in n for n in report["notes"])
    assert 0.0 <= attack["accuracy"] <= 1.0 and 0.0 <= attack["auc"] <= 1.0
    assert attack["loss_gap"] == pytest.approx(
        attack["member_loss_mean"] - attack["nonmember_loss_mean"])
    # members are the run's 64 training windows, non-members 64 test windows of the whole
    # test split, each scored by the model the run saved (recomputed here independently)
    run = load_run(ldpt_run_dir)
    data = run.data(limit_eval=False)
    members = per_window_losses(run.model, data.train, index=np.arange(64),
                                seed=derive_seed(5, "mia-members"))
    rng = np.random.default_rng(derive_seed(5, "mia-sample"))
    rng.choice(len(data.train), size=64, replace=False)
    outside = np.sort(rng.choice(len(data.test), size=64, replace=False))
    nonmembers = per_window_losses(run.model, data.test, index=outside,
                                   seed=derive_seed(5, "mia-nonmembers"))
    assert attack["member_loss_mean"] == pytest.approx(float(members.mean()), rel=1e-9)
    assert attack["nonmember_loss_mean"] == pytest.approx(float(nonmembers.mean()), rel=1e-9)
    assert [t["resolved"] for t in attack["tpr_at_fpr"]] == [False, False]  # 1/64 > 1 %
    assert mia_on_run(ldpt_run_dir, n=1000, seed=5) == report  # seeded: reproducible
    smaller = mia_on_run(ldpt_run_dir, n=20, seed=5)
    assert smaller["attack"]["n_members"] == 20 and smaller["n_requested"] == 20


def test_non_members_share_no_row_with_the_training_split(tmp_path):
    """A short user CSV (the 0.7 / 0.1 / 0.2 split): the first test windows' look-backs reach
    into the training rows, so only the test windows that start at or after the training
    split's end are non-members."""
    rows = 200
    t = np.arange(rows)[:, None]
    values = np.sin(2 * np.pi * t / 12 + np.arange(2)) + 0.1 * np.random.default_rng(0).normal(
        size=(rows, 2))
    frame = pd.DataFrame(values, columns=["a", "b"])
    frame.insert(0, "date", pd.date_range("2020-01-01", periods=rows, freq="h"))
    frame.to_csv(tmp_path / "short.csv", index=False)
    run_forecast(method="ldpt", csv=tmp_path / "short.csv", seq_len=48, horizon=4, epochs=1,
                 eps=0.1, out_dir=tmp_path / "run", progress=False, threads=1,
                 overrides={"d_model": 8, "n_heads": 2, "d_ff": 16, "dim": 4, "n_shots": 32})
    data = load_run(tmp_path / "run").data(limit_eval=False)
    train_end = data.split.train[1]
    assert data.test.row_offset < train_end  # the overlap this test is about
    unseen = int((np.arange(len(data.test)) + data.test.row_offset >= train_end).sum())
    assert 5 <= unseen < len(data.test)
    report = mia_on_run(tmp_path / "run", n=1000, seed=5)
    assert report["attack"]["n_nonmembers"] == unseen
