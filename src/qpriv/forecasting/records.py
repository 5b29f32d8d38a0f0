"""A forecasting run's request (config.json) and result (result.json), typed.

:func:`qpriv.forecasting.run.run_forecast` returns a :class:`ForecastResult` and writes both
files as JSON objects; the loader, the experiment runner, the audits and the membership attack
read them back through these two views rather than by string keys, so that a field renamed or
missing is caught in one place. The JSON stays the stored form (``raw``, :meth:`ForecastResult.
to_json`): older runs, whose files lack later keys, read back with the defaults their version
ran with.

Example:

>>> result = ForecastResult.from_json({"method": "classical", "mse": 0.41, "mae": 0.43,
...                                    "best_epoch": 3, "privacy": "none",
...                                    "eps_per_pass": None})
>>> result.mse, result.released_claim is None
(0.41, True)
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from qpriv.errors import InvalidInputError
from qpriv.privacy.claims import Kind, PrivacyClaim

CLAIM_KEYS = ("eps_per_pass", "eps_basic", "eps_advanced", "eps", "eps_total")
"""The result keys that hold privacy claims: the paper's per-pass and composed LDPT numbers,
DP-SGD's global (eps, delta) and the rigorous record-level budget."""
RIGOROUS_UNITS = ("token", "window", "record")
"""The units of the rigorous feature-path claims an LDPT result holds beside the paper's
(``rigorous["eps_<unit>"]``)."""


def _number(value: Any) -> float | None:
    """A stored number, or the ``value`` of a labelled entry (None stays None)."""
    if isinstance(value, Mapping):
        value = value.get("value")
    return None if value is None else float(value)


DAMAGED = "the file is damaged or was edited by hand; re-run the training into a fresh directory"


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _require(key: str, value: Any, ok: bool, what: str) -> None:
    if not ok:
        raise InvalidInputError(f"config.json: {key} = {value!r} is not {what}; {DAMAGED}")


@dataclass(frozen=True)
class ForecastRequest:
    """What a run was asked to do: config.json. ``raw`` is the whole object."""

    method: str
    dataset: str
    source: str
    channels: tuple[str, ...]
    seq_len: int
    horizon: int
    model: Mapping[str, Any]
    eps_per_pass: float | None = None
    source_sha256: str | None = None
    max_train_windows: int | None = None
    max_eval_windows: int | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ForecastRequest:
        """Read config.json's object (its keys and their types checked once, here: a damaged
        or hand-edited file is refused, never read as another run).

        Raises:
            InvalidInputError: a key is missing or holds a value of the wrong type.
        """
        missing = [key for key in ("method", "dataset", "source", "channels", "seq_len",
                                   "horizon", "model") if key not in data]
        if missing:
            raise InvalidInputError(f"config.json lacks {missing}: not a qpriv forecasting "
                                    "run's settings")
        for key in ("method", "dataset", "source"):
            _require(key, data[key], isinstance(data[key], str), "a string")
        channels = data["channels"]
        _require("channels", channels, isinstance(channels, list) and bool(channels)
                 and all(isinstance(c, str) for c in channels), "a list of channel names")
        for key in ("seq_len", "horizon"):
            _require(key, data[key], _is_count(data[key]), "a whole number >= 1")
        for key in ("max_train_windows", "max_eval_windows"):
            value = data.get(key)
            _require(key, value, value is None or _is_count(value), "null or a whole number")
        _require("model", data["model"], isinstance(data["model"], Mapping), "an object")
        sha = data.get("source_sha256")
        _require("source_sha256", sha, sha is None or isinstance(sha, str), "null or a string")
        try:
            eps_per_pass = _number(data.get("eps_per_pass"))
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(f"config.json: eps_per_pass is not a number ({exc}); "
                                    f"{DAMAGED}") from exc
        return cls(method=data["method"], dataset=data["dataset"], source=data["source"],
                   channels=tuple(channels), seq_len=data["seq_len"], horizon=data["horizon"],
                   model=dict(data["model"]), eps_per_pass=eps_per_pass, source_sha256=sha,
                   max_train_windows=data.get("max_train_windows"),
                   max_eval_windows=data.get("max_eval_windows"), raw=dict(data))


@dataclass(frozen=True)
class ForecastResult:
    """What a run gave: result.json. Metrics are on the z-scored test split; ``mse`` is None
    when training diverged before any finite validation loss. ``original_units`` holds the
    test MSE and MAE per channel in the data's own units (``{"mse": {channel: value}, "mae":
    {...}}``; None for a run from before they were recorded, or without a test number).
    ``claims`` are the run's privacy claims by result key (:data:`CLAIM_KEYS`),
    ``rigorous_claims`` the rigorous token, window and record claims of an LDPT run by unit
    (the rest of that accounting, what it covers and assumes, in ``rigorous``). ``seq_len``,
    ``seed`` (None: a secret one), ``unit`` (a linear method's), ``seconds`` (a closed-form
    fit's wall time), ``params`` (parameter counts: ``total``, per group, the paper's) and
    ``model`` (the model's settings) are as the run recorded them. ``raw`` is the whole
    object, the form :meth:`to_json` gives and result.json holds."""

    method: str
    best_epoch: int
    privacy: str
    dataset: str = ""
    horizon: int | None = None
    epochs: int | None = None
    mse: float | None = None
    mae: float | None = None
    original_units: Mapping[str, Any] | None = None
    val_loss: float | None = None
    diverged_epoch: int | None = None
    seconds_per_epoch: float | None = None
    windows: Mapping[str, int] = field(default_factory=dict)
    seq_len: int | None = None
    seed: int | None = None
    unit: str | None = None
    seconds: float | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    model: Mapping[str, Any] = field(default_factory=dict)
    p: float | None = None
    gamma: float | None = None
    sigma: float | None = None
    noise_multiplier: float | None = None
    calibration: Mapping[str, Any] | None = None
    rigorous_calibration: Mapping[str, Any] | None = None
    history: tuple[Mapping[str, Any], ...] = ()
    claims: Mapping[str, PrivacyClaim] = field(default_factory=dict)
    rigorous_claims: Mapping[str, PrivacyClaim] = field(default_factory=dict)
    rigorous: Mapping[str, Any] = field(default_factory=dict)
    privacy_notes: tuple[str, ...] = ()
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ForecastResult:
        """Read result.json's object (its keys checked once, here)."""
        try:
            claims = {key: PrivacyClaim.from_json(data[key]) for key in CLAIM_KEYS
                      if isinstance(data.get(key), Mapping)}
            rigorous = dict(data.get("rigorous") or {})
            rigorous_claims = {unit: PrivacyClaim.from_json(rigorous[f"eps_{unit}"])
                               for unit in RIGOROUS_UNITS
                               if isinstance(rigorous.get(f"eps_{unit}"), Mapping)}
            return cls(
                method=str(data["method"]), best_epoch=int(data.get("best_epoch") or 0),
                privacy=str(data.get("privacy", "none")), dataset=str(data.get("dataset", "")),
                horizon=data.get("horizon"), epochs=data.get("epochs"),
                mse=_number(data.get("mse")),
                mae=_number(data.get("mae")), original_units=data.get("original_units"),
                val_loss=_number(data.get("val_loss")),
                diverged_epoch=data.get("diverged_epoch"),
                seconds_per_epoch=_number(data.get("seconds_per_epoch")),
                windows=dict(data.get("windows") or {}), seq_len=data.get("seq_len"),
                seed=data.get("seed"), unit=data.get("unit"),
                seconds=_number(data.get("seconds")), params=dict(data.get("params") or {}),
                model=dict(data.get("model") or {}),
                p=_number(data.get("p")), gamma=_number(data.get("gamma")),
                sigma=_number(data.get("sigma")),
                noise_multiplier=_number(data.get("noise_multiplier")),
                calibration=data.get("calibration"),
                rigorous_calibration=data.get("rigorous_calibration"),
                history=tuple(data.get("history") or ()), claims=claims,
                rigorous_claims=rigorous_claims, rigorous=rigorous,
                privacy_notes=tuple(data.get("privacy_notes") or ()), raw=dict(data))
        except KeyError as exc:
            raise InvalidInputError(f"result.json lacks {exc}: not a qpriv forecasting run's "
                                    "result") from exc
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(f"result.json holds a value of the wrong type ({exc}): "
                                    "not a qpriv forecasting run's result as written, or "
                                    "edited by hand") from exc

    def to_json(self) -> dict[str, Any]:
        """The result as result.json holds it (a copy): what a run folder, a grid's cell or
        ``--json`` writes."""
        return copy.deepcopy(dict(self.raw))

    @property
    def params_total(self) -> int | None:
        """The model's parameter count (None for a run that recorded none)."""
        return self.params.get("total")

    @property
    def eps_per_pass(self) -> float | None:
        """The per-pass budget the run claims (the LDPT paper's local eps-QDP), or None."""
        claim = self.claims.get("eps_per_pass")
        return None if claim is None else claim.value

    @property
    def noise_scales(self) -> dict[str, float]:
        """The noise settings the run recorded: the channel's p and gamma, the injections'
        sigma, DP-SGD's noise multiplier (those the method has)."""
        return {name: value for name, value in (
            ("p", self.p), ("gamma", self.gamma), ("sigma", self.sigma),
            ("noise_multiplier", self.noise_multiplier)) if value is not None}

    @property
    def released_claim(self) -> PrivacyClaim | None:
        """The run's headline claim: the per-pass budget, DP-SGD's (eps, delta) on the
        weights, or the rigorous record-level budget (None: the method claims nothing)."""
        return next((self.claims[k] for k in ("eps_per_pass", "eps", "eps_total")
                     if k in self.claims), None)

    @property
    def covers_weights(self) -> bool:
        """Whether the headline claim holds for the trained weights (only DP-SGD's does)."""
        return self.privacy == Kind.GLOBAL_DP
