"""``qpriv audit privacy``'s front door: an empirical lower bound beside each guarantee.

Each guarantee-bearing method has one audit, played as an attacker would (the games of
Jagielski, Ullman & Oprea 2020 and Nasr et al. 2021; Steinke, Nasr & Jagielski 2023):

* ``dp-linear`` (record and window units): the many-run game of
  :mod:`qpriv.audits.privacy_linear`;
* ``classifier`` (DP-SGD, example unit): the one-run game of :mod:`qpriv.audits.privacy_dpsgd`.

The result is the method's own claim beside a :class:`~qpriv.privacy.claims.PrivacyClaim`
whose ``details["bound"]`` is :data:`~qpriv.privacy.claims.LOWER_BOUND`; the audit fails when
the bound exceeds the claim (the claim is then refuted, at the stated confidence).

A new method joins by one entry of :data:`AUDITS` (its units and the function that plays its
game); federated dp-linear is to be audited by the many-run game on the sum the server sees,
once it exists (:data:`NOT_YET_AUDITED` says so meanwhile).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qpriv.audits.privacy_dpsgd import audit_dpsgd_one_run
from qpriv.audits.privacy_linear import audit_dp_linear
from qpriv.errors import InvalidInputError
from qpriv.privacy.claims import PrivacyClaim
from qpriv.runs.files import read_json_object
from qpriv.runs.layout import CONFIG_FILE


@dataclass(frozen=True)
class PrivacyAudit:
    """A method's claim, the audit's lower bound beside it, and the game's own numbers."""

    method: str
    claim: PrivacyClaim
    lower_bound: PrivacyClaim
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """Whether the bound stays at or below the claim."""
        return (self.lower_bound.value or 0.0) <= (self.claim.value or 0.0)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"method": self.method, "claim": self.claim.to_json(),
                "lower_bound": self.lower_bound.to_json(), "passed": self.passed,
                **self.details}


def _dp_linear(*, unit: str, eps: float, delta: float, canary: str, trials: int, seed: int,
               observe: str, canaries: int) -> PrivacyAudit:
    audit = audit_dp_linear(unit=unit, eps=eps, delta=delta, canary=canary, trials=trials,
                            seed=seed, observe=observe)
    details = audit.as_dict()
    del details["claim"], details["lower_bound"]
    return PrivacyAudit(method="dp-linear", claim=audit.claim, lower_bound=audit.lower_bound,
                        details={"game": "many-run", **details})


def _classifier(*, unit: str, eps: float, delta: float, canary: str, trials: int, seed: int,
                observe: str, canaries: int) -> PrivacyAudit:
    audit = audit_dpsgd_one_run(eps=eps, delta=delta, canaries=canaries, seed=seed)
    details = audit.as_dict()
    del details["claim"], details["lower_bound"]
    return PrivacyAudit(method="classifier", claim=audit.claim, lower_bound=audit.lower_bound,
                        details={"game": "one-run", **details})


@dataclass(frozen=True)
class MethodAudit:
    """How one method is audited: its units, its default delta and its game."""

    units: tuple[str, ...]
    delta: float
    play: Callable[..., PrivacyAudit]


AUDITS: dict[str, MethodAudit] = {
    "dp-linear": MethodAudit(units=("record", "window"), delta=1e-6, play=_dp_linear),
    "classifier": MethodAudit(units=("example",), delta=1e-5, play=_classifier),
}
"""Every audited method (the ``--method`` of ``qpriv audit privacy``)."""
NOT_YET_AUDITED = {
    "ldpt": "its per-pass claim covers the quantum features, not the weights: qpriv audit "
            "channel and qpriv account's distinguishing game audit it",
    "dpsgd": "its DP-SGD shares the classifiers' clipping and noise "
             "(qpriv.training.dpsgd.clip_and_noise), which the classifier audit covers; a "
             "one-run game on the transformer's windows is not written yet",
    "dpsgd-linear": "its DP-SGD shares the classifiers' clipping and noise "
                    "(qpriv.training.dpsgd.clip_and_noise), which the classifier audit covers; "
                    "a one-run game on its windows is not written yet",
    "fed-dp-linear": "federated dp-linear is audited by the many-run game on the sum the "
                     "server sees once the method exists: add its entry to AUDITS",
}


def _audited(method: str) -> MethodAudit:
    """``method``'s entry of :data:`AUDITS`, or an error that says why it has none."""
    if method in NOT_YET_AUDITED:
        raise InvalidInputError(f"method {method!r} has no privacy audit yet: "
                                f"{NOT_YET_AUDITED[method]}; audit one of {sorted(AUDITS)}")
    if method not in AUDITS:
        raise InvalidInputError(f"method {method!r} has no privacy audit; audit one of "
                                f"{sorted(AUDITS)}")
    return AUDITS[method]


def audit_privacy(*, method: str, unit: str | None = None, eps: float, delta: float | None = None,
                  canary: str = "worst", trials: int = 2000, seed: int = 0,
                  observe: str = "statistics", canaries: int = 200) -> PrivacyAudit:
    """Audit ``method`` at ``unit`` (default: its first) and (``eps``, ``delta``) (default:
    the method's usual delta). ``canary``, ``trials`` and ``observe`` are the many-run game's;
    ``canaries`` the one-run game's.

    Raises:
        InvalidInputError: a method or unit without an audit, or a bad setting of its game.
    """
    entry = _audited(method)
    unit = entry.units[0] if unit is None else unit
    if unit not in entry.units:
        raise InvalidInputError(f"unit {unit!r} is not one of {method}'s units {entry.units}")
    return entry.play(unit=unit, eps=eps, delta=entry.delta if delta is None else delta,
                      canary=canary, trials=trials, seed=seed, observe=observe,
                      canaries=canaries)


def run_settings(run_dir: str | Path) -> dict[str, Any]:
    """The method, unit, eps and delta a finished run was trained at (its config file): a
    forecasting run names its method; a classifier run its model."""
    config = read_json_object(Path(run_dir) / CONFIG_FILE,
                              fix="give a run folder written by qpriv train or "
                                  "qpriv train-classifier")
    method = config.get("method") or ("classifier" if "model" in config else None)
    if method is None:
        raise InvalidInputError(f"{run_dir}'s config names no method; give --method, --unit "
                                "and --eps instead")
    _audited(method)
    if config.get("eps") is None:
        raise InvalidInputError(f"{run_dir} is a run of {method} without a budget (not "
                                "private): there is no claim to audit")
    settings = {"method": method, "eps": float(config["eps"])}
    if config.get("unit") is not None:
        settings["unit"] = config["unit"]
    if config.get("delta") is not None:
        settings["delta"] = float(config["delta"])
    return settings
