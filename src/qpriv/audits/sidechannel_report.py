"""What the side-channel audit reports (:mod:`qpriv.audits.sidechannel`): the probes it runs
(changes of the raw window that leave every encoded token state unchanged), each probe's
outcome, the leaks found (the paths named below), the report of one audit, the answer for a
model it cannot check (a linear forecaster: :class:`NotApplicable`) and the error raised when
the model's forward pass and its ``encoded_tokens`` disagree.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from torch import Tensor

from qpriv.errors import QprivError
from qpriv.forecasting.methods import method as method_entry

REVIN = "RevIN statistics"
CLASSICAL_PATH = "classical path"
OTHER = "other (unidentified path)"


class AuditConsistencyError(QprivError):
    """The model's forward pass encodes tokens that ``encoded_tokens`` does not reproduce."""


@dataclass(frozen=True)
class Probe:
    """A change of the raw input window, ``transform: (B, L, C) float64 -> (B, L, C)``."""

    name: str
    description: str
    transform: Callable[[Tensor], Tensor]


@dataclass(frozen=True)
class ProbeResult:
    """One probe's outcome.

    ``state_change`` is the largest entry of ``|rho' - rho|`` over every token (None: the model
    encodes no state). For a valid probe, ``output_change`` is the largest absolute change of the
    forecast over windows, horizon and channels, ``relative_change`` that divided by the RMS of
    the original forecast, and ``paths`` the largest absolute change attributed to each path.
    """

    name: str
    description: str
    valid: bool
    state_change: float | None
    output_change: float | None = None
    relative_change: float | None = None
    paths: dict[str, float] = field(default_factory=dict)
    leaked: bool = False
    reason: str = ""


@dataclass(frozen=True)
class Leak:
    """A path that carries the window to the forecast outside the channel, with its size: the
    largest absolute (and relative) forecast change it caused over the probes that revealed it."""

    path: str
    size: float
    relative: float
    probes: tuple[str, ...]
    explanation: str


@dataclass(frozen=True)
class SideChannelReport:
    """The result of :func:`~qpriv.audits.sidechannel.sidechannel_audit`.

    ``passed``: at least one valid probe and no leak above ``tolerance`` (relative to
    ``forecast_rms``, the RMS of the forecast of the original windows). ``fix`` (rigorous
    accounting, when a leak was found and the LDPT model class has a fix): the configuration
    changes, the audit of the fixed configuration and what it costs. ``accounting`` holds the
    labelled privacy numbers of what leaves outside the channel.
    """

    passed: bool
    probes: tuple[ProbeResult, ...]
    leaks: tuple[Leak, ...]
    forecast_rms: float
    model: dict
    subject: str
    windows: int
    windows_source: str
    seed: int
    tolerance: float
    state_tolerance: float
    accounting_mode: str
    accounting: dict
    fix: dict | None
    notes: tuple[str, ...]

    def as_dict(self) -> dict:
        """A JSON-ready dict (the fix's audit nested as a dict)."""
        return asdict(self)


@dataclass(frozen=True)
class NotApplicable:
    """What :func:`~qpriv.audits.sidechannel_subjects.audit_sidechannel` returns for a model
    the audit cannot meaningfully check: ``subject`` what was asked about, ``reason`` why
    there is nothing to probe."""

    subject: str
    reason: str
    applicable: bool = False

    def as_dict(self) -> dict:
        """A JSON-ready dict."""
        return asdict(self)


def linear_not_applicable(method: str, subject: str) -> NotApplicable:
    """The side-channel audit of a linear forecaster: not applicable. It has no per-window
    normalisation and no quantum channel; its forecast is the kernel applied to the window."""
    entry = method_entry(method)
    covered = ("its (eps, delta) guarantee covers that kernel, and so every forecast"
               if entry.needs_eps else f"{method} claims no guarantee ({entry.privacy}), so "
               "there is nothing for a side channel to bypass")
    return NotApplicable(subject=subject, reason=(
        "no per-window normalisation and no quantum channel: a linear forecaster's forecast is "
        f"its released kernel applied to the window, with no other path from it; {covered} "
        "(what the weights leak: qpriv attack mia RUN_DIR)"))
