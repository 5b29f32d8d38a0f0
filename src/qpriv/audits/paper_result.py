"""What the LDPT paper's six audits of a run (its section 7.9; :mod:`qpriv.audits.paper`) each
return: :class:`AuditResult`, with its status (``pass``, ``fail`` or ``not applicable`` with the
reason: a run that claims no privacy is never reported as passing a privacy audit), the measured
value, the threshold it is held to and the numbers behind it; the six audits' names; the
defaults they share and the checks they share on a run and its data.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from qpriv.errors import InvalidInputError
from qpriv.forecasting.artifacts import LoadedRun
from qpriv.forecasting.windows import ForecastData

PASS = "pass"
FAIL = "fail"
NOT_APPLICABLE = "not applicable"

#: Windows re-evaluated per eps in audit 5, and drawn for the token states of audits 2 and 6.
DEFAULT_WINDOWS = 512
DEFAULT_SEED = 0


@dataclass(frozen=True)
class AuditResult:
    """One audit of a run.

    ``status`` is ``"pass"``, ``"fail"`` or ``"not applicable"``; ``measured`` the value the
    audit is decided on (None when not applicable), ``threshold`` what it is held to, ``detail``
    one sentence on what was found, ``values`` the numbers behind it.
    """

    number: int
    name: str
    status: str
    measured: float | int | None
    threshold: str
    detail: str
    values: dict = field(default_factory=dict)

    @property
    def passed(self) -> bool | None:
        """True / False for pass / fail; None when the audit does not apply."""
        return None if self.status == NOT_APPLICABLE else self.status == PASS

    def as_dict(self) -> dict:
        """A JSON-ready dict."""
        return {**asdict(self), "passed": self.passed}


AUDIT_NAMES = {
    1: "calibration chain (eqs. 6-8)",
    2: "trace distance within bounds (Table 2)",
    3: "composition (eqs. 5, 16, 17)",
    4: "budget not exceeded (section 7.8)",
    5: "MSE tracks eps (Table 3)",
    6: "fidelity tracks eps (Table 7)",
}


def not_applicable(number: int, reason: str) -> AuditResult:
    """Audit ``number``, not applicable for ``reason``."""
    return AuditResult(number=number, name=AUDIT_NAMES[number], status=NOT_APPLICABLE,
                       measured=None, threshold="—", detail=reason)


def no_claim_reason(run: LoadedRun) -> str:
    """Why an audit of the calibration does not apply to ``run``: it claims no local eps-QDP."""
    return (f"method {run.method!r} claims no local eps-QDP (privacy: "
            f"{run.result.privacy!r}): there is no calibration to audit")


def require_data(data: ForecastData | None) -> ForecastData:
    """``data``, which an audit that reads the run's data needs (None is refused)."""
    if data is None:
        raise InvalidInputError("this audit applies to the run and needs its data (data=None)")
    return data
