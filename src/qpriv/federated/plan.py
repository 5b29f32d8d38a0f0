"""The public plan of one federated dp-linear round, what the server sends every site.

:class:`FederatedPlan` holds the design, clips, quantisation scale and Skellam shares that
:func:`qpriv.federated.protocol.plan_federation` fixes before the round (its docstring derives
them); none of it reads data. Sites read it from Flower's config records
(:meth:`FederatedPlan.from_config`), so this module needs NumPy alone.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np

from qpriv.errors import InvalidInputError
from qpriv.forecasting.linear_design import base_spec, linear_maps

__all__ = ["CLAMP_SHARE", "MODULUS", "FederatedPlan", "release_dims", "statistic_dims"]

MODULUS = 2 ** 32
"""Flower SecAgg+'s modulus (its ``modulus_range``; the largest it takes)."""
CLAMP_SHARE = 0.01
"""The share of delta spent on the chance that a site's noise share is clamped by SecAgg+."""


@dataclass(frozen=True)
class FederatedPlan:
    """Everything the server fixes before the round, sent to every site in the clear (public:
    none of it reads data). Its JSON form is flat, for Flower's config records.

    ``personal`` (:mod:`qpriv.federated.personal`): each site sends its statistics in a slot
    of its own, and the server releases a pooled kernel and one kernel per site. ``quantised`` False
    (tests only, never reachable from the command line, and only without noise) sends the
    float statistics unscaled and unrounded, summed in the clear."""

    seq_len: int
    horizon: int
    period: int
    unit: str
    eps: float
    delta: float
    sites: int
    threshold: int
    colluders: int
    channels: str  # comma-separated, in order
    freq: str
    scaler: str  # "private": each site's private scaler; "data": declared public
    clip: float
    feature_clip: float
    target_clip: float
    share_a: float
    ridge_scale: float
    scaler_share: float
    max_rows: int
    half_range: int
    scale: float
    mu_a_site: float
    mu_b_site: float
    l2_a: float
    l2_b: float
    noise: bool
    personal: bool = False
    quantised: bool = True

    def to_config(self) -> dict[str, Any]:
        """Flat JSON-able form (ints, floats, strings, bools)."""
        return asdict(self)

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> FederatedPlan:
        """Read :meth:`to_config`'s form back (extra keys ignored)."""
        try:
            return cls(**{f.name: config[f.name] for f in fields(cls)})
        except KeyError as exc:
            raise InvalidInputError(f"the federated plan lacks {exc}: server and sites run "
                                    "different qpriv versions") from exc

    @property
    def eps_scaler(self) -> float:
        return self.scaler_share * self.eps if self.uses_private_scaler else 0.0

    @property
    def decode_scale(self) -> float:
        """What the server divides the decoded sum by: the quantisation scale (1 for the
        tests' unquantised statistics)."""
        return self.scale if self.quantised else 1.0

    @property
    def uses_private_scaler(self) -> bool:
        return self.unit == "record" and self.scaler == "private"

    def maps(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(M, P_pub, V) of the fixed design for (L, H, period)."""
        spec = base_spec(seq_len=self.seq_len, period=self.period)
        return linear_maps(spec, seq_len=self.seq_len, horizon=self.horizon)

    def row_bound(self) -> float:
        """The largest entry of one clipped row's contribution to A or B."""
        c_y = self.target_clip * math.sqrt(self.maps()[2].shape[1])
        return max(self.feature_clip ** 2, self.feature_clip * c_y)


def statistic_dims(maps: tuple[np.ndarray, np.ndarray, np.ndarray]) -> tuple[int, int]:
    """Entries a site sends of A (its upper triangle) and of B, for the design's maps."""
    d, k = maps[0].shape[0], maps[2].shape[1]
    return d * (d + 1) // 2, d * k


def release_dims(plan: FederatedPlan) -> tuple[tuple[int, int], tuple[int, int]]:
    """((entries of A, of B) one unit can change, (entries of A, of B) a site sends).

    A fixed round sends A's upper triangle and B once. A personal round sends A's upper
    triangle in every site's slot, then B in every site's slot: a unit of site s changes only
    slot s."""
    dim_a, dim_b = statistic_dims(plan.maps())
    if not plan.personal:
        return (dim_a, dim_b), (dim_a, dim_b)
    return (dim_a, dim_b), (plan.sites * dim_a, plan.sites * dim_b)
