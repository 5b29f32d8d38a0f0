"""``qpriv audit privacy``'s front door: an empirical lower bound beside each guarantee.

Each guarantee-bearing method has one audit, played as an attacker would (the games of
Jagielski, Ullman & Oprea 2020 and Nasr et al. 2021; Steinke, Nasr & Jagielski 2023):

* ``dp-linear`` (record and window units): the many-run game of
  :mod:`qpriv.audits.privacy_linear`;
* ``fed-dp-linear`` (federated dp-linear, record and window units): the same game on the
  SecAgg+ sum the server sees, :mod:`qpriv.audits.privacy_federated`;
* ``classifier`` (DP-SGD, example unit) and ``clipless`` (the projected Lipschitz MLP of
  clipless DP-SGD, example unit, at its analytic bound): the one-run game of
  :mod:`qpriv.audits.privacy_dpsgd`;
* ``dpsgd-linear`` (window unit): the one-run game with Dirac canary windows of
  :mod:`qpriv.audits.privacy_dpsgd_linear`;
* ``dpsgd`` (the transformer, window unit): the one-run game with horizon-spike canary windows
  of :mod:`qpriv.audits.privacy_dpsgd_forecast`.

The result is the method's own claim beside a :class:`~qpriv.privacy.claims.PrivacyClaim`
whose ``details["bound"]`` is :data:`~qpriv.privacy.claims.LOWER_BOUND`; the audit fails when
the bound exceeds the claim (the claim is then refuted, at the stated confidence).

A new method joins by one entry of :data:`AUDITS` (its units and the function that plays its
game); :data:`NOT_YET_AUDITED` says why a method has none.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qpriv.audits.privacy_dpsgd import OneRunAudit, audit_dpsgd_one_run
from qpriv.audits.privacy_dpsgd_forecast import audit_dpsgd_forecast_one_run
from qpriv.audits.privacy_dpsgd_linear import audit_dpsgd_linear_one_run
from qpriv.audits.privacy_federated import SITES, audit_federated_dp_linear
from qpriv.audits.privacy_linear import audit_dp_linear
from qpriv.errors import InvalidInputError
from qpriv.forecasting.methods import TUNED_BATCH, TUNED_EPOCHS
from qpriv.privacy.budget import GLOBAL_DELTA
from qpriv.privacy.claims import PrivacyClaim
from qpriv.runs.files import read_json_object
from qpriv.runs.layout import CONFIG_FILE

CLASSIFIER_CANARIES = 200
"""The classifier game's canaries."""
DPSGD_CANARIES = 100
"""The transformer game's canaries."""
CLIPLESS_GAME: dict[str, Any] = {"canaries": 60, "lr": 1.0, "train_examples": 50, "epochs": 10}
"""The clipless game's settings besides the model's own defaults: few real examples and many
steps, so that each canary's small, 1-Lipschitz effect on its own loss shows (with 400 examples
and 4 epochs even a run without noise gets only 26-30 of 40 guesses right)."""


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
               observe: str, canaries: int | None) -> PrivacyAudit:
    audit = audit_dp_linear(unit=unit, eps=eps, delta=delta, canary=canary, trials=trials,
                            seed=seed, observe=observe)
    details = audit.as_dict()
    del details["claim"], details["lower_bound"]
    return PrivacyAudit(method="dp-linear", claim=audit.claim, lower_bound=audit.lower_bound,
                        details={"game": "many-run", **details})


def _fed_dp_linear(*, unit: str, eps: float, delta: float, canary: str, trials: int,
                   seed: int, observe: str, canaries: int | None,
                   sites: int = SITES) -> PrivacyAudit:
    if observe != "statistics":
        raise InvalidInputError(f"observe = {observe!r}: the federated game reads the SecAgg+ "
                                "sum the server sees; leave --observe out")
    audit = audit_federated_dp_linear(unit=unit, eps=eps, delta=delta, canary=canary,
                                      trials=trials, seed=seed, sites=sites)
    details = audit.as_dict()
    del details["claim"], details["lower_bound"]
    return PrivacyAudit(method="fed-dp-linear", claim=audit.claim,
                        lower_bound=audit.lower_bound, details={"game": "many-run", **details})


def _one_run(method: str, audit: OneRunAudit) -> PrivacyAudit:
    details = audit.as_dict()
    del details["claim"], details["lower_bound"]
    return PrivacyAudit(method=method, claim=audit.claim, lower_bound=audit.lower_bound,
                        details={"game": "one-run", **details})


def _classifier(*, unit: str, eps: float, delta: float, canary: str, trials: int, seed: int,
                observe: str, canaries: int | None) -> PrivacyAudit:
    return _one_run("classifier", audit_dpsgd_one_run(
        eps=eps, delta=delta, canaries=canaries or CLASSIFIER_CANARIES, seed=seed))


def _clipless(*, unit: str, eps: float, delta: float, canary: str, trials: int, seed: int,
              observe: str, canaries: int | None) -> PrivacyAudit:
    return _one_run("clipless", audit_dpsgd_one_run(
        eps=eps, delta=delta, canaries=canaries or CLIPLESS_GAME["canaries"], seed=seed,
        model="clipless", **{k: v for k, v in CLIPLESS_GAME.items() if k != "canaries"}))


def _dpsgd_linear(*, unit: str, eps: float, delta: float, canary: str, trials: int, seed: int,
                  observe: str, canaries: int | None) -> PrivacyAudit:
    return _one_run("dpsgd-linear", audit_dpsgd_linear_one_run(
        eps=eps, delta=delta, canaries=canaries, seed=seed))


def _dpsgd(*, unit: str, eps: float, delta: float, canary: str, trials: int, seed: int,
           observe: str, canaries: int | None) -> PrivacyAudit:
    if delta != GLOBAL_DELTA:
        raise InvalidInputError(f"dpsgd runs at delta = {GLOBAL_DELTA:g}, not {delta:g}: leave "
                                "--delta out")
    return _one_run("dpsgd", audit_dpsgd_forecast_one_run(
        eps=eps, canaries=canaries or DPSGD_CANARIES, seed=seed))


@dataclass(frozen=True)
class MethodAudit:
    """How one method is audited: its units, its default delta and its game."""

    units: tuple[str, ...]
    delta: float
    play: Callable[..., PrivacyAudit]


AUDITS: dict[str, MethodAudit] = {
    "dp-linear": MethodAudit(units=("record", "window"), delta=1e-6, play=_dp_linear),
    "fed-dp-linear": MethodAudit(units=("record", "window"), delta=1e-6, play=_fed_dp_linear),
    "classifier": MethodAudit(units=("example",), delta=1e-5, play=_classifier),
    "clipless": MethodAudit(units=("example",), delta=1e-5, play=_clipless),
    "dpsgd-linear": MethodAudit(units=("window",), delta=1e-6, play=_dpsgd_linear),
    "dpsgd": MethodAudit(units=("window",), delta=GLOBAL_DELTA, play=_dpsgd),
}
"""Every audited method (the ``--method`` of ``qpriv audit privacy``)."""
NOT_YET_AUDITED = {
    "ldpt": "its per-pass claim covers the quantum features, not the weights: qpriv audit "
            "channel and qpriv account's distinguishing game audit it",
    "dpsgd-tuned": f"it takes dpsgd's DP-SGD step and accountant (batch {TUNED_BATCH}, "
                   f"{TUNED_EPOCHS} epochs, a warm-up), which the dpsgd game audits: audit dpsgd",
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
                  observe: str = "statistics", canaries: int | None = None,
                  sites: int | None = None) -> PrivacyAudit:
    """Audit ``method`` at ``unit`` (default: its first) and (``eps``, ``delta``) (default:
    the method's usual delta). ``canary``, ``trials`` and ``observe`` are the many-run game's;
    ``canaries`` the one-run game's (None: the method's own count); ``sites`` the federated
    game's (None: :data:`~qpriv.audits.privacy_federated.SITES`).

    Raises:
        InvalidInputError: a method or unit without an audit, or a bad setting of its game.
    """
    entry = _audited(method)
    unit = entry.units[0] if unit is None else unit
    if unit not in entry.units:
        raise InvalidInputError(f"unit {unit!r} is not one of {method}'s units {entry.units}")
    if sites is not None and method != "fed-dp-linear":
        raise InvalidInputError(f"sites = {sites}: only fed-dp-linear is played over sites")
    return entry.play(unit=unit, eps=eps, delta=entry.delta if delta is None else delta,
                      canary=canary, trials=trials, seed=seed, observe=observe,
                      canaries=canaries, **({} if sites is None else {"sites": sites}))


def run_settings(run_dir: str | Path) -> dict[str, Any]:
    """The method, unit, eps and delta a finished run was trained at (its config file): a
    forecasting run names its method; a classifier run its model (the Lipschitz model at
    ``clip="analytic"`` is ``clipless``)."""
    config = read_json_object(Path(run_dir) / CONFIG_FILE,
                              fix="give a run folder written by qpriv train or "
                                  "qpriv train-classifier")
    method = config.get("method") or (
        None if "model" not in config else
        "clipless" if (config["model"], config.get("clip")) == ("lipschitz", "analytic") else
        "classifier")
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
    # a dpsgd run's config holds the feature path's delta, which it has not: its DP-SGD runs
    # at GLOBAL_DELTA, the game's own
    if config.get("delta") is not None and method != "dpsgd":
        settings["delta"] = float(config["delta"])
    return settings
