"""The front door: results, privacy labels, structural clipping, files, and early errors."""

from __future__ import annotations

import json
import math

import pytest

from qpriv.classification.records import ClassifierResult
from qpriv.classification.run import train_classifier
from qpriv.errors import InvalidInputError
from qpriv.privacy.claims import PrivacyClaim, Unit
from qpriv.privacy.dpsgd_accounting import dpsgd_epsilon

FAST = {"batch": 128, "epochs": 1, "seed": 3, "lr": 0.05, "threads": 1}


def test_clipping_only_quantum_run() -> None:
    r = train_classifier(task="synthetic", model="quantum", clip=1.0, n_layers=2,
                         unclipped_reference=True, **FAST)
    assert isinstance(r, ClassifierResult)  # typed; JSON only where a file is written
    assert r.parameters == 3 * 4 * 2
    assert r.privacy.startswith("none (clipping only")
    assert r.claim is None and r.claims == () and r.noise_multiplier is None
    assert r.gradient_bound["G"] == pytest.approx(math.sqrt(24))
    assert r.gradient_bound["per_example_norm_bound"] == pytest.approx(2 * math.sqrt(24) / 0.5)
    d = r.final_diagnostics
    assert 0.0 <= r.accuracy <= 1.0 and r.accuracy == d["test_accuracy"]
    assert d["max_example_norm"] <= r.gradient_bound["per_example_norm_bound"]
    assert d["mse_noise_variance"] == 0.0
    assert d["distance_from_unclipped_loss"] == pytest.approx(
        abs(d["train_loss"] - r.unclipped_reference["train_loss"]))
    stored = r.to_json()
    assert stored["dpsgd"]["sampling"] == "shuffle" and stored["eps"] is None
    assert ClassifierResult.from_json(stored) == r
    json.dumps(stored, allow_nan=False)


@pytest.mark.usefixtures("nan_classifier_weights")
def test_a_diverging_run_stops_and_says_so() -> None:
    r = train_classifier(task="synthetic", model="mlp", clip=1.0, unclipped_reference=True,
                         **{**FAST, "epochs": 3}).to_json()
    assert r["diverged_epoch"] == 1 and len(r["history"]) == 1
    assert math.isnan(r["history"][0]["train_loss"]) and r["history"][0]["diverged"]
    assert r["accuracy"] == 0.0  # NaN logits predict no class
    assert r["unclipped_reference"]["diverged_epoch"] == 1


@pytest.mark.usefixtures("nan_classifier_weights")
def test_a_private_run_that_diverges_accounts_the_steps_it_took() -> None:
    from qpriv.privacy.dpsgd_accounting import dpsgd_epsilon

    r = train_classifier(task="synthetic", model="mlp", clip=1.0, eps=10.0,
                         **{**FAST, "epochs": 3}).to_json()
    assert r["diverged_epoch"] == 1
    eps, sigma = r["eps"], r["noise_multiplier"]["value"]
    steps_per_epoch = round(1638 / 128)  # the 80 % training split of 2048, |B| = 128
    assert (eps["steps"], eps["planned_steps"]) == (steps_per_epoch, 3 * steps_per_epoch)
    assert eps["value"] == pytest.approx(dpsgd_epsilon(
        noise_multiplier=sigma, sample_rate=128 / 1638, steps=steps_per_epoch, delta=1e-5))
    assert eps["value"] < 10.0 * 0.8  # one epoch of three spends well under the target
    assert any("not private releases" in note for note in r["privacy_notes"])


def test_a_finite_run_has_no_diverged_epoch() -> None:
    r = train_classifier(task="synthetic", model="mlp", clip=1.0, **FAST).to_json()
    assert r["diverged_epoch"] is None and len(r["history"]) == 1
    assert not r["history"][0].get("diverged")


def test_private_run_labels_every_privacy_number() -> None:
    typed = train_classifier(task="synthetic", model="mlp", clip=1.5, eps=5.0, delta=1e-5,
                             **FAST)
    r = typed.to_json()
    assert typed.claim == PrivacyClaim.from_json(r["eps"]) and typed.claims == (typed.claim,)
    assert typed.claim.unit == Unit.EXAMPLE and typed.claim.value == r["eps"]["value"]
    eps = r["eps"]
    assert eps["kind"] == "global (eps, delta)-DP"
    assert eps["accounting"] == "rigorous"
    assert eps["accountant"].startswith("opacus.accountants.RDPAccountant")
    assert 0.9 * 5.0 <= eps["value"] <= 5.0 and eps["target"] == 5.0 and eps["delta"] == 1e-5
    assert eps["steps"] == round(1638 / 128)
    sigma = r["noise_multiplier"]
    assert sigma["accounting"] == "rigorous" and sigma["value"] > 0
    assert r["dpsgd"]["noise_multiplier"] == sigma["value"]
    assert r["dpsgd"]["sampling"] == "poisson"
    # the reported eps is the accountant's at the run's true rate q = 128 / 1638 and steps
    assert r["eps"]["value"] == pytest.approx(dpsgd_epsilon(
        noise_multiplier=sigma["value"], sample_rate=128 / 1638, steps=13, delta=1e-5),
        rel=1e-9)
    n_params = r["parameters"]
    assert r["final_diagnostics"]["mse_noise_variance"] == pytest.approx(
        n_params * (sigma["value"] * 1.5) ** 2 / 128**2)
    json.dumps(r, allow_nan=False)


def test_structural_clipping_never_clips() -> None:
    r = train_classifier(task="synthetic", model="quantum", clip="structural", n_layers=1,
                         tau=0.5, **FAST).to_json()
    bound = 2 * math.sqrt(12) / 0.5
    assert r["clip"]["value"] == pytest.approx(bound)
    assert r["gradient_bound"]["clipping_bias_bound"] == 0.0
    assert r["final_diagnostics"]["clip_probability"] == 0.0
    assert r["final_diagnostics"]["clipping_bias_norm"] == 0.0


def test_preclip_noise_withdraws_the_bias_bound_and_says_what_the_diagnostics_describe():
    r = train_classifier(task="synthetic", model="quantum", clip="structural", n_layers=1,
                         tau=0.5, preclip_noise=0.5, **FAST).to_json()
    assert r["gradient_bound"]["clipping_bias_bound"] is None  # g_i + s z can exceed 2 G / tau
    assert "noise-free per-example gradients" in r["diagnostics_scope"]
    plain = train_classifier(task="synthetic", model="quantum", clip="structural", n_layers=1,
                             tau=0.5, **FAST).to_json()
    assert "diagnostics_scope" not in plain


def test_out_dir_gets_config_and_result(tmp_path) -> None:
    out = tmp_path / "run"
    r = train_classifier(task="synthetic", model="lipschitz", clip=1.0, out_dir=out,
                         diagnostics=False, **FAST).to_json()
    saved = json.loads((out / "result.json").read_text())
    assert saved["accuracy"] == r["accuracy"]
    assert json.loads((out / "config.json").read_text())["model"] == "lipschitz"
    with pytest.raises(InvalidInputError, match="already holds a finished run"):
        train_classifier(task="synthetic", model="lipschitz", clip=1.0, out_dir=out, **FAST)
    # a budget the accountant refuses leaves nothing behind
    refused = tmp_path / "refused"
    with pytest.raises(InvalidInputError, match="no DP-SGD noise multiplier"):
        train_classifier(task="synthetic", model="mlp", clip=1.0, eps=1e-300, out_dir=refused,
                         **FAST)
    assert not refused.exists() or not any(refused.iterdir())


def _kill_at_evaluation(monkeypatch, call: int) -> None:
    """Raise KeyboardInterrupt at the ``call``-th evaluation (two per epoch: train, test)."""
    from qpriv.classification import dpsgd

    real, calls = dpsgd.evaluate, []

    def evaluate(*args, **kwargs):
        calls.append(1)
        if len(calls) == call:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(dpsgd, "evaluate", evaluate)


def _without_seconds(result: dict) -> list[dict]:
    return [{k: v for k, v in h.items() if k != "seconds"} for h in result["history"]]


@pytest.mark.parametrize("settings", [
    {"model": "mlp", "clip": 1.0, "eps": 5.0, "unclipped_reference": True},  # Poisson + noise
    {"model": "lipschitz", "clip": 1.0},
    {"model": "quantum", "clip": 1.0, "n_layers": 1, "shots": 64, "eps": 5.0},  # sampled
])
def test_a_killed_run_resumes_to_the_same_result(tmp_path, monkeypatch, settings) -> None:
    args = {"task": "synthetic", **FAST, "epochs": 3, **settings}
    straight = train_classifier(**args).to_json()
    out = tmp_path / "run"
    # killed in the main run's epoch 2 (after the reference's 3 epochs where there is one)
    _kill_at_evaluation(monkeypatch, call=3 + (6 if settings.get("unclipped_reference") else 0))
    with pytest.raises(KeyboardInterrupt):
        train_classifier(**args, out_dir=out)
    monkeypatch.undo()
    assert not (out / "result.json").exists() and (out / "checkpoint.pt").is_file()
    with pytest.raises(InvalidInputError, match="holds an unfinished run; add resume to continue"):
        train_classifier(**args, out_dir=out)
    with pytest.raises(InvalidInputError, match=r"settings differ in \['seed'\]"):
        train_classifier(**{**args, "seed": 4}, out_dir=out, resume=True)
    resumed = train_classifier(**{**args, "threads": 2}, out_dir=out, resume=True).to_json()
    assert _without_seconds(resumed) == _without_seconds(straight)
    assert resumed["accuracy"] == straight["accuracy"]
    assert (resumed.get("eps") or {}).get("value") == (straight.get("eps") or {}).get("value")
    again = train_classifier(**args, out_dir=out, resume=True).to_json()  # finished: read back
    assert again == json.loads((out / "result.json").read_text())


def test_a_damaged_classifier_checkpoint_is_named(tmp_path, monkeypatch) -> None:
    args = {"task": "synthetic", "model": "mlp", "clip": 1.0, **FAST, "epochs": 3}
    out = tmp_path / "run"
    _kill_at_evaluation(monkeypatch, call=5)
    with pytest.raises(KeyboardInterrupt):
        train_classifier(**args, out_dir=out)
    monkeypatch.undo()
    (out / "checkpoint.pt").write_bytes(b"PK\x03\x04 cut")
    with pytest.raises(InvalidInputError, match=r"cannot read .*checkpoint.pt: the file is "
                                                r"damaged .*delete it to train the run"):
        train_classifier(**args, out_dir=out, resume=True)
    with pytest.raises(InvalidInputError, match="resume needs out_dir: the folder of the run"):
        train_classifier(**args, resume=True)


def test_image_models_on_digits() -> None:
    cnn = train_classifier(task="digits", model="cnn", clip=1.0, diagnostics=False,
                           **FAST).to_json()
    assert cnn["parameters"] == 492
    vqc = train_classifier(task="digits", model="quantum-image", clip=1.0, n_layers=2,
                           loader_layers=1, loader_steps=2, diagnostics=False,
                           **FAST).to_json()
    assert vqc["parameters"] == 3 * 6 * 2
    assert vqc["loader"]["train"]["loader_angles_per_image"] == 3 + 8 + 12
    assert 0.0 < vqc["loader"]["test"]["mean_fidelity"] <= 1.0


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"model": "svm"}, "model = 'svm' is not one of"),
    ({"task": "mnist"}, "task = 'mnist' is not one of"),
    ({"model": "mlp", "clip": "structural"}, "needs a quantum model"),
    ({"clip": "auto"}, "clip = 'auto' is not valid"),
    ({"clip": None, "eps": 1.0}, "needs a clipping threshold"),
    ({"model": "lipschitz", "clip": None}, "Lipschitz constant from clip"),
    ({"model": "cnn"}, "needs an image task"),
    ({"clip": -1.0}, "clip = -1 is outside"),
    ({"eps": 0.0}, "eps = 0 is outside"),
    ({"tau": 0.0}, "tau = 0 is outside"),
    ({"batch": 0}, "batch = 0 is outside"),
    ({"lr": 1e38}, r"lr = 1e\+38 is outside the valid range \(0, 1e\+06\]"),
    # each overflowed float64 in the diagnostics or the analytic bound (a traceback, and a
    # config.json left behind), far above any useful value
    ({"clip": 1e200, "eps": 1.0}, r"clip = 1e\+200 is outside the valid range \(0, 1e\+06\]"),
    ({"tau": 1e-300}, r"tau = 1e-300 is outside the valid range \[1e-06, inf\)"),
    ({"model": "lipschitz", "clip": "analytic", "input_bound": 1e308},
     r"input_bound = 1e\+308 is outside the valid range \(0, 1e\+06\]"),
    ({"model": "lipschitz", "clip": "analytic", "bias_bound": 1e7}, r"bias_bound = 1e\+07"),
])
def test_bad_arguments_fail_before_training(kwargs, message) -> None:
    args = {"task": "synthetic", "model": "quantum", "clip": 1.0, **FAST, **kwargs}
    with pytest.raises(InvalidInputError, match=message):
        train_classifier(**args)
