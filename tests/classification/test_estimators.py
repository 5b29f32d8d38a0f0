"""The classifier estimator: the same run as the function and the command, predictions that
reproduce the run's own accuracy, arrays of any labels, and a saved model that loads back."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from sklearn.base import clone, is_classifier

import qpriv
from qpriv.classification.data import load_task
from qpriv.classification.estimators import DPSGDClassifier
from qpriv.classification.privacy import ARRAYS_NOTE
from qpriv.classification.run import train_classifier
from qpriv.cli import main
from qpriv.errors import InvalidInputError
from qpriv.privacy.claims import PrivacyClaim

FAST = {"batch": 128, "epochs": 1, "seed": 3, "lr": 0.05, "threads": 1}


def _arrays(n: int = 300, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A separable three-class problem with string labels."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 5))
    y = np.array(["a", "b", "c"])[(x[:, 0] > 0).astype(int) + (x[:, 1] > 1).astype(int)]
    return x, y


def _timeless(history) -> list[dict]:
    return [{k: v for k, v in epoch.items() if k != "seconds"} for epoch in history]


def test_fit_is_train_classifier_and_score_is_its_test_accuracy() -> None:
    clf = DPSGDClassifier(model="mlp", clip=1.5, eps=5.0, diagnostics=False, **FAST)
    assert clf.fit("synthetic") is clf
    twin = train_classifier(task="synthetic", model="mlp", clip=1.5, eps=5.0,
                            diagnostics=False, **FAST)
    assert clf.result_.accuracy == twin.accuracy
    assert clf.claims_ == twin.claims == (twin.claim,) and clf.claims_[0].value <= 5.0
    test = load_task("synthetic")
    # the run's test accuracy, measured again from the fitted model: the same examples right
    assert clf.score(test.x_test.numpy(), test.y_test.numpy()) == clf.result_.accuracy
    predicted = clf.predict(test.x_test.numpy())
    assert np.mean(predicted == test.y_test.numpy()) == clf.result_.accuracy
    proba = clf.predict_proba(test.x_test[:5].numpy())
    assert proba.shape == (5, 4) and np.allclose(proba.sum(axis=1), 1.0)
    assert (proba.argmax(axis=1) == predicted[:5]).all()
    assert clf.classes_.tolist() == [0, 1, 2, 3]


def test_arrays_of_any_labels_fit_predict_and_score_in_those_labels() -> None:
    x, y = _arrays()
    clf = DPSGDClassifier(model="mlp", clip=1.0, eps=None, diagnostics=False,
                          **{**FAST, "batch": 64, "epochs": 5}).fit(x, y)
    assert clf.classes_.tolist() == ["a", "b", "c"] and clf.claims_ == ()
    assert clf.result_.task == "arrays" and clf.result_.raw["task"]["n_train"] == 240
    predicted = clf.predict(x)
    assert set(predicted.tolist()) <= {"a", "b", "c"}
    assert clf.score(x, y) == pytest.approx(np.mean(predicted == y))
    assert clf.score(x, y) > 0.7  # a separable problem, five epochs
    # the digest of the arrays is kept in config.json only, never in a result
    assert "sha256" not in json.dumps(clf.result_.to_json())


def test_a_claim_on_arrays_says_what_it_leaves_out() -> None:
    x, y = _arrays()
    clf = DPSGDClassifier(model="mlp", eps=2.0, diagnostics=False, **FAST).fit(x, y)
    assert ARRAYS_NOTE in clf.claims_[0].notes and ARRAYS_NOTE in clf.result_.privacy_notes
    named = DPSGDClassifier(model="mlp", eps=2.0, diagnostics=False, **FAST).fit("synthetic")
    assert ARRAYS_NOTE not in named.claims_[0].notes


def test_arrays_written_to_a_folder_resume_only_with_the_same_arrays(tmp_path) -> None:
    x, y = _arrays()
    out = tmp_path / "run"
    first = DPSGDClassifier(model="mlp", **FAST, eps=None, diagnostics=False).fit(
        x, y, out_dir=out)
    config = json.loads((out / "config.json").read_text())
    assert len(config["arrays_sha256"]) == 64
    again = DPSGDClassifier(model="mlp", **FAST, eps=None, diagnostics=False).fit(
        x, y, out_dir=out, resume=True)
    assert again.result_ == first.result_
    assert (again.predict_proba(x) == first.predict_proba(x)).all()  # its weights read back
    with pytest.raises(InvalidInputError, match=r"settings differ in \['arrays_sha256'\]"):
        DPSGDClassifier(model="mlp", **FAST, eps=None, diagnostics=False).fit(
            x[::-1], y[::-1], out_dir=out, resume=True)


def test_save_releases_weights_and_result_only_and_load_predicts_the_same(tmp_path) -> None:
    x, y = _arrays()
    clf = DPSGDClassifier(model="lipschitz", clip=1.0, eps=3.0, diagnostics=False,
                          **FAST).fit(x, y)
    folder = clf.save(tmp_path / "release")
    assert sorted(p.name for p in folder.iterdir()) == ["classifier.pt", "result.json"]
    back = qpriv.load(folder)  # the top-level dispatcher sends it to the classifiers
    assert isinstance(back, DPSGDClassifier)
    assert back.result_ == clf.result_ and back.claims_ == clf.claims_
    assert (back.predict_proba(x) == clf.predict_proba(x)).all()
    assert back.predict(x).tolist() == clf.predict(x).tolist()
    assert back.get_params()["eps"] == 3.0 and back.get_params()["model"] == "lipschitz"
    with pytest.raises(InvalidInputError, match="exists; save into a new folder"):
        clf.save(folder)


def test_a_command_line_run_loads_and_legacy_runs_read_their_checkpoint(tmp_path) -> None:
    out = tmp_path / "run"
    clf = DPSGDClassifier(model="mlp", diagnostics=False, **FAST).fit("synthetic",
                                                                      out_dir=out)
    assert (out / "classifier.pt").is_file() and (out / "checkpoint.pt").is_file()
    test = load_task("synthetic").x_test.numpy()
    assert (qpriv.load(out).predict_proba(test) == clf.predict_proba(test)).all()
    (out / "classifier.pt").unlink()  # a run of an earlier version: its last checkpoint
    assert (qpriv.load(out).predict_proba(test) == clf.predict_proba(test)).all()
    (out / "checkpoint.pt").unlink()
    with pytest.raises(InvalidInputError, match="holds no classifier weights"):
        qpriv.load(out)
    # resumed, a finished run without weights states its result, as the command prints it
    again = DPSGDClassifier(model="mlp", diagnostics=False, **FAST).fit("synthetic",
                                                                        out_dir=out,
                                                                        resume=True)
    assert again.result_ == clf.result_ and again.claims_ == clf.claims_
    with pytest.raises(InvalidInputError, match=r"kept no weights.*cannot predict"):
        again.predict(test)


def test_the_command_line_is_the_estimator(capsys, tmp_path) -> None:
    """``qpriv train-classifier`` and ``DPSGDClassifier`` at one seed: the same accuracy, the
    same claim, the same model."""
    out = tmp_path / "cli"
    argv = ["train-classifier", "--task", "synthetic", "--model", "quantum", "--clip", "1.5",
            "--batch", "128", "--eps", "4", "--epochs", "1", "--seed", "3", "--lr", "0.05",
            "--layers", "2", "--threads", "1", "--json", "--out", str(out)]
    assert main(argv) == 0
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    clf = DPSGDClassifier(model="quantum", clip=1.5, eps=4.0, n_layers=2, **FAST).fit(
        "synthetic")
    assert printed["accuracy"] == clf.result_.accuracy
    assert PrivacyClaim.from_json(printed["eps"]) == clf.claims_[0]
    assert _timeless(printed["history"]) == _timeless(clf.result_.history)
    test = load_task("synthetic").x_test.numpy()
    assert (qpriv.load(out).predict_proba(test) == clf.predict_proba(test)).all()


def test_quantum_image_predictions_load_new_images_as_training_loaded_its_own() -> None:
    clf = DPSGDClassifier(model="quantum-image", clip=1.0, eps=None, n_layers=1,
                          loader_layers=1, loader_steps=2, diagnostics=False, **FAST)
    clf.fit("digits")
    test = load_task("digits")
    assert clf.feature_shape_ == (8, 8)
    assert clf.score(test.x_test.numpy(), test.y_test.numpy()) == clf.result_.accuracy


def test_settings_follow_scikit_learns_contract() -> None:
    clf = DPSGDClassifier(model="mlp", eps=2.0)
    assert clf.get_params()["eps"] == 2.0 and clf.set_params(eps=3.0) is clf
    assert DPSGDClassifier(**clf.get_params()).get_params() == clf.get_params()
    assert repr(clf) == "DPSGDClassifier(eps=3.0)"  # scikit-learn's: the changed settings
    assert clone(clf).get_params() == clf.get_params() and is_classifier(clf)
    with pytest.raises(InvalidInputError, match=r"has no setting \['epsilon'\]"):
        clf.set_params(epsilon=1.0)
    assert not hasattr(clf, "result_")


@pytest.mark.parametrize(("call", "needle"), [
    (lambda c: c.predict(np.zeros((1, 16))), "not fitted yet"),
    (lambda c: c.fit("synthetic", np.zeros(3)), "brings its own labels"),
    (lambda c: c.fit(np.zeros((10, 2))), "needs the labels"),
    (lambda c: c.fit(np.zeros((10, 2)), np.zeros(10)), "y holds 1 class"),
    (lambda c: c.fit(np.full((10, 2), np.nan), np.arange(10) % 2), "not finite"),
    (lambda c: c.fit(np.zeros((10, 2)), np.arange(9) % 2), "one label per row"),
    (lambda c: c.fit("arrays"), "names arrays given to"),
    (lambda c: c.set_params(model="svm").fit("synthetic"), "model = 'svm' is not one of"),
])
def test_bad_input_is_one_clear_error_before_training(call, needle) -> None:
    with pytest.raises(InvalidInputError, match=needle):
        call(DPSGDClassifier(**FAST))


def test_a_fitted_model_refuses_rows_of_another_shape() -> None:
    x, y = _arrays()
    clf = DPSGDClassifier(model="mlp", diagnostics=False, **FAST).fit(x, y)
    with pytest.raises(InvalidInputError, match=r"fitted on rows of shape \(5,\)"):
        clf.predict(np.zeros((2, 4)))
    with pytest.raises(InvalidInputError, match="each one of"):
        clf.score(x[:2], ["a", "z"])


@pytest.mark.usefixtures("nan_classifier_weights")
def test_a_diverged_model_predicts_no_class() -> None:
    x, y = _arrays()
    clf = DPSGDClassifier(model="mlp", diagnostics=False, **FAST).fit(x, y)
    assert clf.result_.diverged_epoch == 1
    assert np.isnan(clf.predict_proba(x[:2])).all()
    assert clf.score(x, y) == 0.0
    with pytest.raises(InvalidInputError, match="predicts no class"):
        clf.predict(x[:2])
    assert torch.is_tensor(next(clf.model_.parameters()))
