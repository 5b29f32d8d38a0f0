"""Per-configuration learning-rate tuning: the validation split, the choice, and the CLI."""

from __future__ import annotations

import json

import pytest
import torch

from qpriv.classification import run as classifier_run
from qpriv.classification.data import load_task
from qpriv.classification.tuning import (
    lr_grid,
    select_learning_rate,
    tune_learning_rate,
    tuning_record,
)
from qpriv.cli import main
from qpriv.errors import InvalidInputError

TINY = {"task": "synthetic", "model": "mlp", "clip": 1.5, "batch": 64, "epochs": 2,
        "seed": 2024, "optimizer": "sgd", "hidden": (8, 8)}


def test_the_validation_split_is_a_stratified_part_of_the_training_split() -> None:
    data = load_task("synthetic")
    tuning = data.validation_split(0.2)
    n_train = len(data.y_train)
    assert len(tuning.y_test) == round(0.2 * n_train)
    assert len(tuning.y_train) + len(tuning.y_test) == n_train
    # every example comes from the training split, none from the test split, none twice
    train_rows = {tuple(row) for row in data.x_train.tolist()}
    test_rows = {tuple(row) for row in data.x_test.tolist()}
    held = [tuple(row) for row in tuning.x_test.tolist()]
    kept = [tuple(row) for row in tuning.x_train.tolist()]
    assert set(held) <= train_rows and not set(held) & test_rows
    assert len(set(held) | set(kept)) == n_train
    # stratified: each class's share moves by less than one example's worth
    share = torch.bincount(data.y_train, minlength=4) / n_train
    held_share = torch.bincount(tuning.y_test, minlength=4) / len(tuning.y_test)
    assert torch.allclose(share, held_share, atol=1.0 / len(tuning.y_test))
    assert tuning.summary()["evaluated_on"] == "validation"
    assert torch.equal(data.validation_split(0.2).y_test, tuning.y_test)  # seeded
    with pytest.raises(InvalidInputError, match="validation fraction"):
        data.validation_split(1.0)


def test_the_grid_and_the_choice() -> None:
    assert lr_grid(0.3) == (0.03, 0.09, 0.3, 0.9)
    assert lr_grid(1.0, (1.0, 0.5, 0.5)) == (0.5, 1.0)
    assert select_learning_rate({0.1: 0.80, 0.3: 0.91, 1.0: 0.85}) == 0.3
    assert select_learning_rate({1.0: 0.9, 0.3: 0.9, 0.1: 0.5}) == 0.3  # tie: the smaller
    with pytest.raises(InvalidInputError, match="no tuning trials"):
        select_learning_rate({})
    with pytest.raises(InvalidInputError, match="empty"):
        lr_grid(0.3, ())
    with pytest.raises(InvalidInputError, match="test split"):
        tuning_record([(0.1, {"accuracy": 0.9, "evaluated_on": "test"})], validation=0.2)


def test_tuning_trains_on_the_validation_split_and_keeps_the_best_rate(monkeypatch) -> None:
    seen = []
    train = classifier_run.train_classifier

    def spy(**kwargs):
        result = train(**kwargs)
        seen.append((kwargs["lr"], kwargs["validation"], result.raw["task"]["n_test"],
                     result.accuracy))
        return result

    monkeypatch.setattr("qpriv.classification.tuning.train_classifier", spy)
    record = tune_learning_rate(grid=[0.3, 0.03], **TINY)
    n_validation = len(load_task("synthetic").validation_split(0.2).y_test)
    assert [(lr, v, n) for lr, v, n, _ in seen] == [(0.03, 0.2, n_validation),
                                                    (0.3, 0.2, n_validation)]
    accuracy = {lr: a for lr, _, _, a in seen}
    assert record["lr"] == max(accuracy, key=lambda lr: (accuracy[lr], -lr))
    assert record["trials"] == [{"lr": lr, "validation_accuracy": accuracy[lr]}
                                for lr in (0.03, 0.3)]
    assert "not accounted" in record["privacy"]
    with pytest.raises(InvalidInputError, match="not both"):
        tune_learning_rate(grid=[0.1], lr=0.1, **TINY)


def test_cli_tunes_with_lr_grid(capsys, tmp_path, monkeypatch) -> None:
    argv = ["train-classifier", "--model", "mlp", "--clip", "1.5", "--epochs", "1",
            "--optimizer", "sgd", "--lr-grid", "0.03", "0.3", "--json"]
    assert main([*argv, "--out", str(tmp_path / "run")]) == 0
    result = json.loads(capsys.readouterr().out)
    assert json.loads((tmp_path / "run" / "result.json").read_text()) == result
    assert result["evaluated_on"] == "test"
    assert result["request"]["lr"] == result["lr_tuning"]["lr"] in (0.03, 0.3)
    assert [t["lr"] for t in result["lr_tuning"]["trials"]] == [0.03, 0.3]
    assert main([*argv[:-1], "--lr", "0.1"]) == 2
    assert "not both" in capsys.readouterr().err
    # a used out_dir is refused before any trial trains
    calls = []
    monkeypatch.setattr("qpriv.classification.tuning.train_classifier",
                        lambda **kw: calls.append(kw))
    assert main([*argv, "--out", str(tmp_path / "run")]) == 2
    assert "already holds a finished run" in capsys.readouterr().err and calls == []


def test_a_batch_above_the_training_set_is_refused_by_the_library_before_any_trial(
        monkeypatch, tmp_path) -> None:
    n_train = len(load_task("synthetic").y_train)
    out = tmp_path / "run"
    with pytest.raises(InvalidInputError, match=rf"^batch = {n_train + 1} is outside the valid "
                                                rf"range \[1, {n_train}\]: task 'synthetic'"):
        classifier_run.train_classifier(**{**TINY, "batch": n_train + 1}, out_dir=out)
    assert not out.exists()
    calls = []
    monkeypatch.setattr("qpriv.classification.tuning.train_classifier",
                        lambda **kw: calls.append(kw))
    with pytest.raises(InvalidInputError, match=rf"give batch {n_train} or less$"):
        tune_learning_rate(grid=[0.1], **{**TINY, "batch": n_train + 1})
    assert calls == []  # refused before the trials, not by the run after them
    # the whole set is a valid batch; its trials clamp it to their smaller split
    monkeypatch.undo()
    record = tune_learning_rate(grid=[0.1], **{**TINY, "batch": n_train, "epochs": 1})
    assert [trial["lr"] for trial in record["trials"]] == [0.1]
