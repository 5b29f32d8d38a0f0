"""The privacy claim: one typed statement for every epsilon qpriv prints or stores.

A number called epsilon means nothing without what it protects and how it was derived. A
:class:`PrivacyClaim` says:

* ``value`` and ``delta``: the (eps, delta) pair (``delta`` None for a pure-eps claim);
* ``kind``: what sort of guarantee it is (:class:`Kind`), e.g. the LDPT paper's local eps-QDP
  of one pass through the channel, or DP-SGD's global (eps, delta)-DP of the trained weights;
* ``accounting``: ``paper`` (exactly the papers' formulas, including those known to be wrong,
  kept for comparison) or ``rigorous`` (what is provably true of what the model releases);
* ``unit``: who is protected (:class:`Unit`): one token state on one pass, one training window,
  one record (one value of one channel at one time step), one example of a classifier, or
  one whole site of a federation;
* ``covers``: what released object the guarantee holds for (the quantum features of a pass,
  the trained weights, ...), and ``notes``: what it leaves out (a scaler fitted in the clear,
  hyper-parameters chosen on validation data, ...);
* ``details``: the derivation's own numbers and words (``epochs``, ``delta_prime``,
  ``composition``, ``accountant``, ``sampling``, ``target`` ...), kept in the JSON form.

The JSON form (:meth:`PrivacyClaim.to_json`) is a flat object with ``value``, ``kind``,
``accounting``, ``unit``, ``covers``, ``delta`` (when set), ``notes`` (when any) and the
details; :meth:`PrivacyClaim.from_json` reads it back, including the entries of runs written
before claims had a unit (their unit follows from their kind).

Example:

>>> from qpriv.privacy.claims import Accounting, Kind, PrivacyClaim, Unit
>>> claim = PrivacyClaim(value=0.1, kind=Kind.LOCAL_QDP, accounting=Accounting.PAPER,
...                      unit=Unit.TOKEN, covers="the quantum features of one pass")
>>> claim.label()
'0.1 (local eps-QDP per pass, accounting=paper)'
>>> PrivacyClaim.from_json(claim.to_json()) == claim
True
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from qpriv.errors import InvalidInputError


class _Word(str, Enum):
    """An enum whose members print, format and serialise as their value (the word itself)."""

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


class Kind(_Word):
    """What sort of guarantee a claim is. The values are the words every output uses."""

    LOCAL_QDP = "local eps-QDP per pass"
    """The LDPT paper's guarantee (its Definition 1 and Algorithm 1): one token state through
    the calibrated channel and measurement once, for states within trace distance d."""
    CHANNEL_QDP = "local eps-QDP of the channel alone, per pass"
    """Theorem 1's eps_ch: the depolarizing channel without the measurement."""
    LOCAL_DP = "local (eps, delta)-DP per pass"
    """A Gaussian mechanism on each pass's input (the DP-Input baseline, eq. 1)."""
    GLOBAL_DP = "global (eps, delta)-DP"
    """Neighbours differ in one unit of the training data (a window added or removed; a
    record replaced); holds for everything computed from the released object (DP-SGD's
    weights, a sufficient-statistics fit)."""
    COMPOSED = "composed"
    """A per-pass or per-use guarantee composed over passes, shots, tokens or epochs."""


class Accounting(_Word):
    """How the number was derived."""

    PAPER = "paper"
    """Exactly the papers' formulas (eqs. 6-8, 16, 17 and Theorem 2 of the LDPT paper)."""
    RIGOROUS = "rigorous"
    """An established accountant (Opacus RDP, dp-accounting PLD) on what is really released."""


class Unit(_Word):
    """Who is protected: what two neighbouring inputs differ in."""

    TOKEN = "token"
    """One token state on one pass through the channel (the LDPT paper's unit; local)."""
    WINDOW = "window"
    """One training window (all its channels), added or removed."""
    RECORD = "record"
    """One value of one channel at one time step of the training series, replaced within a
    stated range. A record lies in up to L + H windows, so a window guarantee does not give a
    useful record guarantee: a record claim comes from the mechanism's own record sensitivity."""
    EXAMPLE = "example"
    """One training example of a classifier, added or removed."""
    SITE = "site"
    """The whole data of one site of a federation, replaced by anything (DP-FedAvg at the site
    unit, :mod:`qpriv.privacy.site_dpfedavg`)."""


#: What a claim covers, in the words every output uses.
LOWER_BOUND = "empirical lower bound"
"""A claim's ``details["bound"]`` when its value is an empirical lower bound (an audit's
distinguishing game): not a guarantee, and :meth:`PrivacyClaim.label` prints it so."""
COVERS_WEIGHTS = "the trained weights, and every forecast or prediction computed from them"
COVERS_FEATURES_PER_PASS = ("the quantum features of one token on one pass (not the forecast "
                            "targets, not the trained weights)")
COVERS_FEATURES_WINDOW_PASS = ("the quantum features of one window's tokens on one pass (not "
                               "the forecast targets, not the trained weights)")
COVERS_FEATURES_OVER_TRAINING = ("the quantum features released over all training passes (not "
                                 "the forecast targets, not the trained weights)")
COVERS_INPUT_PER_PASS = ("the noised input of one pass (not the forecast targets, not the "
                         "trained weights)")

#: The unit a kind has when an entry of an older run does not name one.
_LEGACY_UNITS = {Kind.LOCAL_QDP: Unit.TOKEN, Kind.CHANNEL_QDP: Unit.TOKEN,
                 Kind.LOCAL_DP: Unit.TOKEN, Kind.COMPOSED: Unit.TOKEN,
                 Kind.GLOBAL_DP: Unit.WINDOW}
_FIELDS = ("value", "kind", "accounting", "unit", "covers", "delta", "notes")


@dataclass(frozen=True)
class PrivacyClaim:
    """One epsilon with everything needed to read it (see the module docstring).

    >>> entry = {"value": 2.5605, "kind": "composed", "accounting": "paper",
    ...          "delta_prime": 1e-6}
    >>> PrivacyClaim.from_json(entry).label()
    "2.561 (composed, delta'=1e-06, accounting=paper)"
    """

    value: float | None
    kind: Kind
    accounting: Accounting
    unit: Unit
    covers: str
    delta: float | None = None
    notes: tuple[str, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", Kind(self.kind))
        object.__setattr__(self, "accounting", Accounting(self.accounting))
        object.__setattr__(self, "unit", Unit(self.unit))
        object.__setattr__(self, "notes", tuple(self.notes))
        object.__setattr__(self, "details", dict(self.details))
        if self.value is not None and not (math.isnan(self.value) or self.value >= 0):
            raise InvalidInputError(f"a privacy claim's eps = {self.value!r} is negative")
        if self.delta is not None and not 0.0 <= self.delta < 1.0:
            raise InvalidInputError(f"a privacy claim's delta = {self.delta!r} is not in [0, 1)")
        clash = set(self.details) & set(_FIELDS)
        if clash:
            raise InvalidInputError(f"details repeat the claim's own fields: {sorted(clash)}")

    def to_json(self) -> dict[str, Any]:
        """The one JSON form: a flat object (see the module docstring)."""
        out: dict[str, Any] = {"value": self.value, "kind": self.kind.value,
                               "accounting": self.accounting.value, "unit": self.unit.value,
                               "covers": self.covers}
        if self.delta is not None:
            out["delta"] = self.delta
        if self.notes:
            out["notes"] = list(self.notes)
        out.update(self.details)
        return out

    @classmethod
    def from_json(cls, entry: Mapping[str, Any]) -> PrivacyClaim:
        """Read :meth:`to_json`'s form back; an entry written before claims named their unit
        and coverage gets the unit of its kind and ``covers`` ``"not recorded"``."""
        if not isinstance(entry, Mapping) or "value" not in entry or "kind" not in entry:
            raise InvalidInputError(f"{entry!r} is not a privacy claim (no value and kind)")
        kind = Kind(entry["kind"])
        return cls(value=entry["value"], kind=kind,
                   accounting=Accounting(entry.get("accounting", "paper")),
                   unit=Unit(entry.get("unit") or _LEGACY_UNITS[kind]),
                   covers=entry.get("covers", "not recorded"), delta=entry.get("delta"),
                   notes=tuple(entry.get("notes", ())),
                   details={k: v for k, v in entry.items() if k not in _FIELDS})

    def label(self) -> str:
        """``0.1 (local eps-QDP per pass, accounting=paper)``: the value with its kind, its
        delta (or delta', or the composed total delta, where the details hold one) and its
        accounting, as every table and line of output prints it."""
        deltas = [f"{name}={value:g}" for name, value in (
            ("delta", self.delta), ("delta'", self.details.get("delta_prime")),
            ("total delta", self.details.get("delta_total"))) if value is not None]
        value = "—" if self.value is None else f"{self.value:.4g}"
        if self.details.get("bound") == LOWER_BOUND:  # what a valid eps must exceed
            confidence = self.details.get("confidence")
            level = "" if confidence is None else f" at {confidence:.0%} confidence"
            return f">= {value} ({LOWER_BOUND}{level}, {', '.join([self.kind.value, *deltas])})"
        return f"{value} ({', '.join([self.kind.value, *deltas])}, " \
               f"accounting={self.accounting.value})"


def require_meaningful_delta(delta: float, *, units: int, unit: str) -> float:
    """``delta`` if it is below ``1 / units``, else refuse it. An (eps, delta) guarantee over
    n protected units with delta >= 1/n is met by a mechanism that publishes one unit, picked
    at random, in the clear (each unit's output changes with probability 1/n <= delta): such a
    delta promises nothing, however small eps is. ``unit`` names the units in the message."""
    units = int(units)
    if units >= 1 and delta * units >= 1.0:
        raise InvalidInputError(
            f"delta = {delta:g} is at least 1/n for the n = {units:,} {unit}s the guarantee "
            f"protects: a mechanism that publishes one of them at random in the clear meets "
            f"it, so it promises nothing; give a delta below {1.0 / units:.3g}, typically "
            "1e-6")
    return delta
