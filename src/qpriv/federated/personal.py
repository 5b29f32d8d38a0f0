"""Personal federated dp-linear: one kernel per site, shrunk toward the pooled kernel by as much
as each site's own held-out windows ask, all from one securely aggregated release.

One kernel for every site (:func:`qpriv.federated.protocol.decode_and_solve`) is biased where
the sites' dynamics differ: on ETTh1 and ETTh2 as two stations the pooled kernel is worse on
ETTh1's validation split than ETTh1's own ridge, noiseless. A personal round releases instead,
from the same kind of release and at the same privacy cost:

1. **What a site sends.** Site s cuts its training windows in time into a fitting part F (the
   first ``1 - held_out``) and a held-out part S (the rest, :func:`qpriv.federated.site.
   held_out_parts`), computes the clipped statistics of each (the fixed round's maps, clips and
   scaler) and places them, quantised, in a slot of its own (zeros in the other sites'
   slots), plus its Skellam share on every entry (:func:`qpriv.federated.site.site_update`).
   SecAgg+ reveals the sum: each slot holds its site's statistics plus the honest shares.
2. **Sensitivity.** A unit (record or window) of site s changes only slot s. Both bounds
   (:func:`qpriv.privacy.ssp.window_sensitivities`, :func:`qpriv.privacy.ssp.
   record_sensitivities_projected`) are sums over the windows the unit touches of per-window
   terms, and every window lies in exactly one of F and S, so ``||(dA_F, dA_S)|| <= ||dA_F|| +
   ||dA_S||`` is at most the fixed round's Delta_A (and so for B): the argument of
   :mod:`qpriv.forecasting.linear_select`. Rounding adds at most 1 to each of the slot's
   ``2 dim`` entries (``sqrt(2 dim)`` in L2, :func:`qpriv.privacy.skellam.quantised_sensitivity`).
   The claim is the fixed round's Skellam accounting with these sensitivities
   (:func:`qpriv.federated.plan.release_dims`); the clamping bound counts every slot's entries.
3. **What the server solves** (post-processing of the sum, no further budget). With each
   site's whole statistics ``A_s = A_F + A_S`` (noise variance doubled), the pooled weights
   ``W_bar = (A_+ + lambda_+ I)^-1 B_+`` over the present sites, and for site s and a shrink
   rho the minimiser of ``||R_s - Phi_s W||^2 + lambda_s ||W||^2 + rho lambda_s ||W - W_bar||^2``:
   ``W_s(rho) = (A_s + (1 + rho) lambda_s I)^-1 (B_s + rho lambda_s W_bar)`` (rho 0: the site
   alone; infinity: the pooled weights). Every lambda is the AdaSSP ridge of the noise on its
   A (:func:`qpriv.privacy.ssp.noise_scaled_ridge`).
4. **Which rho, per site.** Each candidate in :data:`SHRINKS` is fitted on the F parts alone
   (the pooled weights too) and scored by site s's squared error on its S part, computed from
   the noisy S statistics: ``sum_i sum_j n_j (r_ij - w_j^T phi_i)^2 = const - 2 tr(D W^T B_S)
   + tr(D W^T A_S W)`` (D: the output blocks' lengths n_j, so the score is the held-out MSE up
   to a constant; A_S repaired to PSD first, as the central selection does). The argmin is
   site s's rho; the released kernels are refitted on the whole statistics.

A dropped site's slot holds only the survivors' noise: the server decodes the present slots
alone (``slots``), and the claim is the fixed round's for the survivors.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from qpriv.errors import InvalidInputError
from qpriv.federated.plan import FederatedPlan, release_dims, statistic_dims
from qpriv.federated.protocol import checked_total, federated_claim, part_sigma, unpack
from qpriv.forecasting.linear import LinearForecaster
from qpriv.forecasting.linear_design import base_spec, block_edges, kernel_from_weights
from qpriv.privacy.claims import PrivacyClaim
from qpriv.privacy.ssp import noise_scaled_ridge, psd_floor, ridge_solve

__all__ = ["SHRINKS", "PersonalRelease", "SiteParts", "decode_personal", "personal_weights"]

SHRINKS = (0.0, 1.0, 4.0, math.inf)
"""The shrinks toward the pooled weights a site may choose, in units of its own ridge: 0 is the
site's statistics alone, infinity the pooled weights. Declared without the data."""


@dataclass(frozen=True, eq=False)
class SiteParts:
    """One site's decoded noisy statistics: the fitting part's (A, B) and the held-out part's."""

    a_fit: np.ndarray
    b_fit: np.ndarray
    a_held: np.ndarray
    b_held: np.ndarray


@dataclass(frozen=True, eq=False)
class PersonalRelease:
    """What a personal round releases: the pooled kernel, one kernel per present site (by
    slot), each site's chosen shrink and its candidates' held-out scores, and the claim."""

    pooled: LinearForecaster
    sites: dict[int, LinearForecaster]
    shrinks: dict[int, float]
    scores: dict[int, list[float]]
    claim: PrivacyClaim


def decode_parts(total: np.ndarray, plan: FederatedPlan, *, survivors: int,
                 slots: Sequence[int]) -> dict[int, SiteParts]:
    """Each present slot's statistics from SecAgg+'s sum (:func:`qpriv.federated.plan.
    release_dims`'s layout), divided by the scale.

    Raises:
        InvalidInputError: the fixed round's refusals (:func:`qpriv.federated.protocol.
            checked_total`), or slots that are not distinct sites of the plan.
    """
    if not plan.personal:
        raise InvalidInputError("a fixed round releases one kernel: decode it with "
                                "qpriv.federated.protocol.decode_and_solve")
    if len(set(slots)) != survivors or not all(0 <= s < plan.sites for s in slots):
        raise InvalidInputError(f"slots {list(slots)} are not {survivors} distinct sites of "
                                f"0 to {plan.sites - 1}")
    values = checked_total(total, plan, survivors=survivors) / plan.decode_scale
    dim_a, dim_b = statistic_dims(plan.maps())
    sent_a = release_dims(plan)[1][0]
    a_all = values[:sent_a].reshape(plan.sites, 2, dim_a)
    b_all = values[sent_a:].reshape(plan.sites, 2, dim_b)
    d, k = plan.maps()[0].shape[0], plan.maps()[2].shape[1]
    parts = {}
    for slot in slots:
        (a_fit, b_fit), (a_held, b_held) = (
            unpack(np.concatenate([a_all[slot, part], b_all[slot, part]]), d, k)
            for part in (0, 1))
        parts[slot] = SiteParts(a_fit=a_fit, b_fit=b_fit, a_held=a_held, b_held=b_held)
    return parts


def personal_weights(parts: dict[int, SiteParts], *, sigma: float, ridge_scale: float,
                     lengths: np.ndarray, shrinks: Sequence[float] = SHRINKS) -> dict[str, Any]:
    """The pooled weights, each site's weights at its chosen shrink, the shrinks and the
    candidates' held-out scores (module docstring, steps 3 and 4). ``sigma`` is the noise's
    standard deviation on one part's entries of A, ``lengths`` the output blocks' lengths."""
    d = next(iter(parts.values())).a_fit.shape[0]

    def ridge(parts_summed: int) -> float:  # the noise on a sum of that many parts' A
        return noise_scaled_ridge(sigma * math.sqrt(parts_summed), d, scale=ridge_scale)

    def fits(a: np.ndarray, b: np.ndarray, lam: float, pooled: np.ndarray) -> list[np.ndarray]:
        repaired = psd_floor(a)
        return [pooled if math.isinf(rho) else
                np.linalg.solve(repaired + (1.0 + rho) * lam * np.eye(d), b + rho * lam * pooled)
                for rho in shrinks]

    m = len(parts)
    pooled_fit = ridge_solve(psd_floor(sum(p.a_fit for p in parts.values())),
                             sum(p.b_fit for p in parts.values()), ridge=ridge(m))
    whole = {s: (p.a_fit + p.a_held, p.b_fit + p.b_held) for s, p in parts.items()}
    pooled = ridge_solve(psd_floor(sum(a for a, _ in whole.values())),
                         sum(b for _, b in whole.values()), ridge=ridge(2 * m))
    weights, chosen, scores = {}, {}, {}
    for slot, p in parts.items():
        held = psd_floor(p.a_held)
        scores[slot] = [float(np.trace(lengths[:, None] * (w.T @ held @ w - 2.0 * w.T @ p.b_held)))
                        for w in fits(p.a_fit, p.b_fit, ridge(1), pooled_fit)]
        best = int(np.argmin(scores[slot]))
        chosen[slot] = float(shrinks[best])
        weights[slot] = fits(*whole[slot], ridge(2), pooled)[best]
    return {"pooled": pooled, "sites": weights, "shrinks": chosen, "scores": scores}


def decode_personal(total: np.ndarray, plan: FederatedPlan, *, survivors: int,
                    slots: Sequence[int] | None = None) -> PersonalRelease:
    """The pooled kernel, each present site's kernel and the claim from SecAgg+'s sum of a
    personal round's ``survivors`` vectors; ``slots`` names the survivors' slots (default:
    every site, 0 to sites - 1).

    Raises:
        InvalidInputError: as :func:`decode_parts`.
    """
    slots = list(range(plan.sites)) if slots is None else list(slots)
    parts = decode_parts(total, plan, survivors=survivors, slots=slots)
    features, public, outputs = plan.maps()
    fit = personal_weights(parts, sigma=part_sigma(plan, survivors=survivors),
                           ridge_scale=plan.ridge_scale,
                           lengths=np.diff(block_edges(plan.horizon, outputs.shape[1])))
    spec = base_spec(seq_len=plan.seq_len, period=plan.period)
    selection = {"shrinks": {str(s): v for s, v in fit["shrinks"].items()},
                 "candidates": [str(rho) for rho in SHRINKS],
                 "held_out": plan.held_out}
    claim = federated_claim(plan, survivors=survivors,
                            ridge=noise_scaled_ridge(part_sigma(plan, survivors=survivors)
                                                     * math.sqrt(2), features.shape[0],
                                                     scale=plan.ridge_scale),
                            selection=selection)

    def model(weights: np.ndarray, name: str) -> LinearForecaster:
        return LinearForecaster(kernel=kernel_from_weights(features=features, public=public,
                                                           targets=outputs, weights=weights),
                                spec=spec, name=f"{name} ({plan.unit}, eps={claim.value:.4g})",
                                details=dict(claim.details))

    return PersonalRelease(
        pooled=model(fit["pooled"], "federated dp-linear, pooled"),
        sites={s: model(w, f"federated dp-linear, site {s}") for s, w in fit["sites"].items()},
        shrinks=fit["shrinks"], scores=fit["scores"], claim=claim)
