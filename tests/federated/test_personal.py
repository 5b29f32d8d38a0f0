"""The personal round: one slot per site, one kernel per site shrunk toward the pooled one."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from qpriv.errors import InvalidInputError
from qpriv.federated.personal import SHRINK, decode_personal, decode_slots, personal_weights
from qpriv.federated.protocol import decode_and_solve, part_sigma
from qpriv.federated.site import site_update
from qpriv.privacy.ssp import noise_scaled_ridge, psd_floor, ridge_solve

from .test_protocol import load, noiseless_plan


def neighbours(data, *, row, channel=0):
    """Two copies of a site that differ in one record: the value at (row, channel) of the
    training rows set to +100 in one and -100 in the other (both clipped to the range R in
    the declared scaler's units: the worst change, 2 R)."""
    def at(value):
        values = np.array(data.values)
        values[data.split.train[0] + row, channel] = \
            data.scaler.mean[channel] + value * data.scaler.std[channel]
        return dataclasses.replace(data, values=values)
    return at(100.0), at(-100.0)


def test_a_record_changes_only_its_sites_slot_by_what_it_changes_a_fixed_round(sites):
    """The worst-case pair: the personal vectors differ only in the changed site's slot, and
    there by exactly the fixed round's difference, within the L2 bounds its claim uses."""
    datas = load(sites)
    default_clips = {"clip": 1.5, "feature_clip": 1.0, "target_clip": 1.0}
    personal = noiseless_plan(datas, personal=True, **default_clips)
    fixed = noiseless_plan(datas, **default_clips)
    assert (personal.l2_a, personal.l2_b) == (fixed.l2_a, fixed.l2_b)
    up, down = neighbours(datas[1], row=200)
    rng = np.random.default_rng(0)
    diff = (site_update(up, personal, rng=rng, slot=1)
            - site_update(down, personal, rng=rng, slot=1))
    fixed_diff = site_update(up, fixed, rng=rng) - site_update(down, fixed, rng=rng)
    d = personal.maps()[0].shape[0]
    dim_a = d * (d + 1) // 2
    dim_b = fixed_diff.size - dim_a
    a_slots, b_slots = diff[:3 * dim_a].reshape(3, dim_a), diff[3 * dim_a:].reshape(3, dim_b)
    assert np.abs(a_slots[[0, 2]]).max() == 0 and np.abs(b_slots[[0, 2]]).max() == 0
    assert np.array_equal(a_slots[1], fixed_diff[:dim_a])
    assert np.array_equal(b_slots[1], fixed_diff[dim_a:])
    assert 0 < np.linalg.norm(a_slots[1]) <= personal.l2_a
    assert 0 < np.linalg.norm(b_slots[1]) <= personal.l2_b


def test_unquantised_slots_are_each_sites_statistics_and_the_weights_their_closed_form(sites):
    """Noise and quantisation off: each decoded slot is its site's (A, B) to 1e-9; the site's
    weights minimise ||R - Phi W||^2 + lam ||W||^2 + rho lam ||W - W_bar||^2 (checked by least
    squares on the stacked system, Phi and R from A's Cholesky factor); shrink 0 is the
    site's own ridge and an infinite shrink the pooled ridge."""
    datas = load(sites)
    plan = noiseless_plan(datas, personal=True, quantised=False)
    vectors = [site_update(d, plan, rng=np.random.default_rng(0), slot=i)
               for i, d in enumerate(datas)]
    stats = decode_slots(np.sum(vectors, axis=0), plan, survivors=3, slots=[0, 1, 2])
    fixed = noiseless_plan(datas, quantised=False)
    for i, d in enumerate(datas):
        own = site_update(d, fixed, rng=np.random.default_rng(0))
        a, b = stats[i]
        assert np.abs(a[np.triu_indices(a.shape[0])] - own[:a.shape[0] * (a.shape[0] + 1) // 2]
                      ).max() < 1e-9
    sigma = part_sigma(plan, survivors=3)
    pooled, weights = personal_weights(stats, sigma=sigma, ridge_scale=plan.ridge_scale,
                                       shrink=SHRINK)
    d = pooled.shape[0]
    lam = noise_scaled_ridge(sigma, d, scale=plan.ridge_scale)
    assert np.abs(pooled - ridge_solve(sum(a for a, _ in stats.values()),
                                       sum(b for _, b in stats.values()),
                                       ridge=noise_scaled_ridge(sigma * math.sqrt(3), d,
                                                                scale=plan.ridge_scale))
                  ).max() < 1e-9
    for i, (a, b) in stats.items():
        # Phi = A^(1/2), R = A^(+1/2) B give ||R - Phi W||^2 the objective's data term (B lies
        # in A's range: both are sums over the same rows)
        values, vectors = np.linalg.eigh(psd_floor(a))
        keep = values > 1e-12 * values.max()
        root = (vectors[:, keep] * np.sqrt(values[keep])) @ vectors[:, keep].T
        inverse_root = (vectors[:, keep] / np.sqrt(values[keep])) @ vectors[:, keep].T
        rows = np.vstack([root, math.sqrt(lam) * np.eye(d), math.sqrt(SHRINK * lam) * np.eye(d)])
        targets = np.vstack([inverse_root @ b, np.zeros_like(b),
                             math.sqrt(SHRINK * lam) * pooled])
        twin = np.linalg.lstsq(rows, targets, rcond=None)[0]
        assert np.abs(weights[i] - twin).max() < 1e-8
    _, alone = personal_weights(stats, sigma=sigma, ridge_scale=plan.ridge_scale, shrink=0.0)
    _, bound = personal_weights(stats, sigma=sigma, ridge_scale=plan.ridge_scale,
                                shrink=math.inf)
    for i, (a, b) in stats.items():
        assert np.abs(alone[i] - ridge_solve(psd_floor(a), b, ridge=lam)).max() < 1e-9
        assert np.array_equal(bound[i], pooled)


def test_the_personal_claim_is_the_fixed_rounds_and_names_its_design(sites):
    datas = load(sites)
    claims = {}
    for personal in (False, True):
        plan = noiseless_plan(datas, noise=True, scaler="private", personal=personal)
        total = np.sum([site_update(d, plan, rng=np.random.default_rng(i), slot=i)
                        for i, d in enumerate(datas)], axis=0)
        claims[personal] = (decode_personal(total, plan, survivors=3).claim if personal
                            else decode_and_solve(total, plan, survivors=3)[1])
    assert claims[True].value == pytest.approx(claims[False].value, rel=1e-9)
    assert claims[True].value == pytest.approx(1.0, rel=1e-6)
    assert claims[True].details["design"].startswith("personal")
    assert claims[True].details["personal"] == {"shrink": SHRINK, "slots": [0, 1, 2]}
    assert claims[True].details["dims"][0] == 3 * claims[False].details["dims"][0]


def test_slots_are_refused_when_missing_repeated_or_out_of_range(sites):
    datas = load(sites)
    plan = noiseless_plan(datas, personal=True)
    with pytest.raises(InvalidInputError, match="slot None"):
        site_update(datas[0], plan, rng=np.random.default_rng(0))
    with pytest.raises(InvalidInputError, match="slot 3"):
        site_update(datas[0], plan, rng=np.random.default_rng(0), slot=3)
    total = np.sum([site_update(d, plan, rng=np.random.default_rng(0), slot=i)
                    for i, d in enumerate(datas)], axis=0)
    with pytest.raises(InvalidInputError, match="distinct sites"):
        decode_personal(total, plan, survivors=3, slots=[0, 0, 1])
    with pytest.raises(InvalidInputError, match="one kernel per site"):
        decode_and_solve(total, plan, survivors=3)
