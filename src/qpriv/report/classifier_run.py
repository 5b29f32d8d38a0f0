"""The report's section of one classifier run (``qpriv train-classifier --out``): its
settings, its scores, its privacy claim and its learning curves (loss and accuracy per
epoch)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from qpriv.privacy.claims import PrivacyClaim
from qpriv.report.document import Section, Text, claim_value, claims_blocks, key_values, png_figure
from qpriv.report.plots import learning_curves_png
from qpriv.report.result_files import REWRITE_FIX
from qpriv.runs.files import read_json_object
from qpriv.runs.layout import RESULT_FILE


def classifier_run_section(run_dir: Path, *, title: str) -> Section:
    """Settings, scores, the claim and the learning curves of one classifier run."""
    raw = read_json_object(run_dir / RESULT_FILE, fix=REWRITE_FIX)
    task = raw.get("task") or {}
    dpsgd = raw.get("dpsgd") or {}
    request = raw.get("request") or {}
    clip = raw.get("clip")
    settings = [
        ("task", task.get("task")), ("model", raw.get("model")),
        ("training examples", task.get("n_train")), ("test examples", task.get("n_test")),
        ("classes", task.get("n_classes")), ("parameters", raw.get("parameters")),
        ("clip C", clip.get("value") if isinstance(clip, Mapping) else clip),
        ("batch", dpsgd.get("batch_size")), ("epochs", dpsgd.get("epochs")),
        ("learning rate", dpsgd.get("lr")), ("optimizer", dpsgd.get("optimizer")),
        ("seed", request.get("seed")), ("target eps", request.get("eps")),
        ("noise multiplier", claim_value(raw.get("noise_multiplier"))),
        ("privacy", str(raw.get("privacy"))),
    ]
    scores = [(f"accuracy ({raw.get('evaluated_on', 'test')})", raw.get("accuracy")),
              ("training accuracy", raw.get("train_accuracy")),
              ("diverged at epoch", raw.get("diverged_epoch")), ("seconds", raw.get("seconds")),
              *((f"final {key.replace('_', ' ')}", value)
                for key, value in (raw.get("final_diagnostics") or {}).items()
                if key not in ("train_accuracy", "test_accuracy"))]
    section = Section(title=title, blocks=[
        key_values("Settings", settings), key_values("Scores", scores, headers=("score", "value"))])
    named = ([("eps", PrivacyClaim.from_json(raw["eps"]))]
             if isinstance(raw.get("eps"), Mapping) else [])
    section.children.append(Section("Privacy claims", blocks=claims_blocks(
        named, run_notes=[str(note) for note in raw.get("privacy_notes") or ()])))
    history = raw.get("history") or []
    curves = Section("Learning curves")
    if history:
        curves.blocks.append(png_figure(
            "Loss and accuracy per epoch (training and test)",
            learning_curves_png(history, panels=[
                ("loss", [("train_loss", "train loss"), ("test_loss", "test loss")]),
                ("accuracy", [("train_accuracy", "train accuracy"),
                              ("test_accuracy", "test accuracy")])])))
    else:
        curves.blocks.append(Text("No epochs recorded."))
    section.children.append(curves)
    return section
