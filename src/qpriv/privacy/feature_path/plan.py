"""How many single-shot measurements one unit of privacy of the LDPT feature path composes.

A unit's release is a product of staged factors: the N_s shots of each token state (section
5.3), then the token states that hold a changed time step (those of one window, or those of
every window that holds it), then the epochs of training. :func:`composition_plan` names the
factors of each unit of :data:`UNITS`; the accountant composes them stage by stage
(:func:`qpriv.privacy.feature_path.divergences.compose_staged`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from qpriv.errors import InvalidInputError, require_positive_int
from qpriv.privacy.calibration import DEFAULT_DIM
from qpriv.privacy.theorems import check_dim
from qpriv.quantum.tokens import n_tokens

DEFAULT_SHOTS = 1024
DEFAULT_STRIDE = 4
DEFAULT_SEQ_LEN = 336
DEFAULT_EPOCHS = 20

UNITS = ("token", "token-training", "window", "record")
"""Units of privacy, from the paper's (one token state, one pass) to one record over training."""

UNIT_DESCRIPTIONS = {
    "token": "one token state, one pass (the paper's unit)",
    "token-training": "one token state, every epoch of training",
    "window": "one window, one pass (its tokens that hold a changed time step)",
    "record": "one time step of one channel, whole training (every window and token holding "
              "it, every epoch)",
}


def tokens_per_window(*, dim: int, stride: int, seq_len: int) -> int:
    """The most tokens of one window that hold the same time step (``ceil(D/s)`` inside)."""
    starts = np.arange(n_tokens(dim=dim, stride=stride, seq_len=seq_len)) * stride
    positions = np.arange(seq_len)[:, None]
    held = (positions >= starts[None, :]) & (positions < starts[None, :] + dim)
    return int(held.sum(axis=1).max())


MAX_COMPOSITIONS = 10**11
"""The most single-shot measurements one unit may compose (memory: about 5 GB at 2.6e10)."""


@dataclass(frozen=True)
class CompositionPlan:
    """How many single-shot measurements a unit's release is, as staged factors."""

    unit: str
    description: str
    factors: tuple[tuple[str, int], ...]

    @property
    def count(self) -> int:
        """The total number of composed single-shot measurements."""
        return math.prod(n for _, n in self.factors)


def composition_plan(
    unit: str, *, n_shots: int = DEFAULT_SHOTS, dim: int = DEFAULT_DIM,
    stride: int = DEFAULT_STRIDE, seq_len: int = DEFAULT_SEQ_LEN, epochs: int = DEFAULT_EPOCHS,
    token_length: int | None = None,
) -> CompositionPlan:
    """The composition count of a unit of privacy (see :data:`UNIT_DESCRIPTIONS`).

    token: N_s shots; token-training: N_s x epochs; window: N_s x (tokens of one window holding a
    changed time step, ``ceil(D/s)`` = 4 at D = 16, s = 4); record: N_s x (n_tokens x D token
    states holding the time step over the L windows that contain it: 81 x 16 = 1296, at most
    L ceil(D/s) = 1344) x epochs. The token length is ``token_length`` (default ``dim``: eq. 2
    encodes a token of D values in D amplitudes; the signed encoding puts a token of 16 values
    in 32 amplitudes, so there ``dim`` = 32 and ``token_length`` = 16).
    """
    if unit not in UNITS:
        raise InvalidInputError(f"unit = {unit!r} is not one of {', '.join(UNITS)}")
    n_shots = require_positive_int("n_shots", n_shots)
    dim = check_dim(dim)
    length = dim if token_length is None else require_positive_int("token_length", token_length)
    stride = require_positive_int("stride", stride)
    seq_len = require_positive_int("seq_len", seq_len)
    epochs = require_positive_int("epochs", epochs)
    shots = ("shots per token state", n_shots)
    factors: tuple[tuple[str, int], ...]
    if unit == "token":
        factors = (shots,)
    elif unit == "token-training":
        factors = (shots, ("epochs", epochs))
    elif unit == "window":
        factors = (shots, ("token states of the window holding the time step",
                           tokens_per_window(dim=length, stride=stride, seq_len=seq_len)))
    else:
        held = n_tokens(dim=length, stride=stride, seq_len=seq_len) * length
        factors = (shots, ("token states holding the time step, over its windows", held),
                   ("epochs", epochs))
    plan = CompositionPlan(unit, UNIT_DESCRIPTIONS[unit], factors)
    if plan.count > MAX_COMPOSITIONS:
        raise InvalidInputError(
            f"the {unit} unit composes {plan.count:.3g} single-shot measurements, more than the "
            f"accountant holds ({MAX_COMPOSITIONS:.0e}; its memory grows with the count: 2.6e10 "
            "takes about 5 GB and 3 minutes); use fewer shots or epochs"
        )
    return plan

