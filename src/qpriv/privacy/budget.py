"""The deltas qpriv's guarantees are stated at when a caller gives none, each defined once.

An (eps, delta) guarantee may fail outright with probability delta, so delta must sit far below
1/n of the protected units (:func:`qpriv.privacy.claims.require_meaningful_delta` refuses
anything else). Two values serve two kinds of claim, and each name says which. Below them,
the typed budget a run is built to meet: :class:`PrivacyTarget`, whose :class:`Spend` says
which of the three things an epsilon may mean it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

GLOBAL_DELTA = 1e-6
"""delta of a global (eps, delta)-DP guarantee on released weights or inputs when none is
given: the LDPT paper's DP-SGD and DP-Input baselines (section 7.2: "delta = 1e-6"), and
qpriv's own dp-linear and dpsgd-linear."""

FEATURE_PATH_DELTA = 1e-5
"""delta of the rigorous accounting of the LDPT feature path (``qpriv account``, ``qpriv train
--accounting rigorous``) when none is given."""

CLASSIFIER_DELTA = 1e-5
"""delta of the private-training paper's DP-SGD classifiers in its reproduced experiments (the
paper does not state one; 1e-5 is the common choice for data sets of 10^4-10^5 records)."""


class Spend(str, Enum):
    """What one epsilon a caller asks for is spent on: the three meanings a bare ``eps`` had.

    A per-pass budget and an over-training budget of the same method differ by a composition
    over every pass, and a release budget is a third notion (the weights at a unit), so one
    number never stands for another: each is a :class:`PrivacyTarget` of its own spend.
    """

    PER_PASS = "per pass"
    """eps_s of Algorithm 1 of the LDPT paper: one use of the channel (or the input
    mechanism) per token and training pass, under the paper's accounting."""
    OVER_TRAINING = "over training"
    """The record-level eps over the whole training of the rigorous accounting of the LDPT
    feature path (``qpriv train --accounting rigorous --eps-total``)."""
    RELEASE = "release"
    """The (eps, delta)-DP of the released model at a unit (dp-linear at the record or window
    unit, DP-SGD at the window): what every forecast of the model inherits."""


@dataclass(frozen=True)
class PrivacyTarget:
    """The budget a run is built to meet: ``eps`` spent on ``spend``, at ``delta`` where the
    spend has one (None: the method's own, e.g. the paper's 1e-6 for DP-SGD), at ``unit``
    where the method offers a choice (None: its default or none).

    Examples:
        >>> target = PrivacyTarget(eps=0.1, spend=Spend.PER_PASS)
        >>> target.eps_per_pass, target.eps_total, target.eps_release
        (0.1, None, None)
        >>> PrivacyTarget(eps=1.0, spend=Spend.RELEASE, unit="record").eps_release
        1.0
    """

    eps: float
    spend: Spend
    delta: float | None = None
    unit: str | None = None

    @property
    def eps_per_pass(self) -> float | None:
        """``eps`` if it is a per-pass budget, else None."""
        return self.eps if self.spend is Spend.PER_PASS else None

    @property
    def eps_total(self) -> float | None:
        """``eps`` if it is a record-level budget over the whole training, else None."""
        return self.eps if self.spend is Spend.OVER_TRAINING else None

    @property
    def eps_release(self) -> float | None:
        """``eps`` if it is the budget of the released model, else None."""
        return self.eps if self.spend is Spend.RELEASE else None
