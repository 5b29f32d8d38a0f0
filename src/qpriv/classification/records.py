"""A classifier run's result (what :func:`qpriv.classification.run.train_classifier` returns and
writes as result.json), typed.

The library returns this view, and the command line, the estimator and the experiment grids of
the private-training paper read a result through it rather than by string keys. The JSON stays
the stored form (``raw``; :meth:`ClassifierResult.to_json` gives a copy of it): it is written
only where a file is written or ``--json`` prints.

Example:

>>> result = ClassifierResult.from_json({
...     "model": "mlp", "task": {"task": "synthetic"}, "accuracy": 0.9, "parameters": 1380,
...     "privacy": "none (clipping only: no noise, no privacy guarantee)", "eps": None,
...     "request": {"lr": 0.01}, "history": [{"epoch": 1}]})
>>> result.accuracy, result.claim is None, result.lr, result.claims
(0.9, True, 0.01, ())
>>> result.to_json()["history"]
[{'epoch': 1}]
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from qpriv.errors import InvalidInputError
from qpriv.privacy.claims import PrivacyClaim


@dataclass(frozen=True)
class ClassifierResult:
    """What a classifier run gave. ``claim`` is DP-SGD's (eps, delta) on the trained weights at
    the example unit (None for clipping-only and unclipped runs); ``final_diagnostics`` the
    last epoch's gradient statistics."""

    model: str
    task: str
    accuracy: float
    parameters: int
    privacy: str
    lr: float
    claim: PrivacyClaim | None = None
    noise_multiplier: float | None = None
    diverged_epoch: int | None = None
    sensitivity: float | None = None
    """The per-example norm bound the update's noise is scaled by: the clipping threshold C,
    or the analytic bound Delta of clipless DP-SGD (None: unclipped)."""
    evaluated_on: str = "test"
    seconds: float | None = None
    final_diagnostics: Mapping[str, Any] = field(default_factory=dict)
    diagnostics_scope: str | None = None
    history: tuple[Mapping[str, Any], ...] = ()
    privacy_notes: tuple[str, ...] = ()
    train_accuracy: float | None = None
    gradient_bound: Mapping[str, Any] | None = None
    """The bound on every per-example gradient (quantum models: Theorem 3.2's; clipless
    DP-SGD: Delta and its parts); None for the other models."""
    unclipped_reference: Mapping[str, Any] | None = None
    """The unclipped twin's final accuracy and loss (``unclipped_reference`` runs)."""
    request: Mapping[str, Any] = field(default_factory=dict)
    """The run's validated settings, as config.json holds them."""
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @property
    def claims(self) -> tuple[PrivacyClaim, ...]:
        """Every privacy claim of the run: DP-SGD's (eps, delta) on the weights, or none."""
        return () if self.claim is None else (self.claim,)

    def to_json(self) -> dict[str, Any]:
        """The stored form (result.json's object), a copy the caller may change."""
        return copy.deepcopy(dict(self.raw))

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ClassifierResult:
        """Read a classifier result (its keys checked once, here)."""
        try:
            eps, sigma, clip = data.get("eps"), data.get("noise_multiplier"), data.get("clip")
            return cls(
                model=str(data["model"]), task=str(data["task"]["task"]),
                accuracy=float(data["accuracy"]), parameters=int(data["parameters"]),
                privacy=str(data["privacy"]), lr=float(data["request"]["lr"]),
                claim=PrivacyClaim.from_json(eps) if isinstance(eps, Mapping) else None,
                noise_multiplier=(float(sigma["value"]) if isinstance(sigma, Mapping)
                                  else None),
                diverged_epoch=data.get("diverged_epoch"),
                sensitivity=(float(clip["value"]) if isinstance(clip, Mapping)
                             and clip.get("value") is not None else None),
                evaluated_on=str(data.get("evaluated_on", "test")),
                seconds=data.get("seconds"),
                final_diagnostics=dict(data.get("final_diagnostics") or {}),
                diagnostics_scope=data.get("diagnostics_scope"),
                history=tuple(data.get("history") or ()),
                privacy_notes=tuple(data.get("privacy_notes") or ()),
                train_accuracy=data.get("train_accuracy"),
                gradient_bound=data.get("gradient_bound"),
                unclipped_reference=data.get("unclipped_reference"),
                request=dict(data["request"]), raw=dict(data))
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidInputError(f"a classifier result lacks or garbles {exc}: not what "
                                    "qpriv train-classifier writes") from exc
