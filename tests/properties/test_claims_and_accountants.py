"""Generated privacy claims survive their JSON form; the accountants (the analytic Gaussian,
eq. 1's Gaussian, DP-SGD's RDP accountant, the LDPT feature path's RDP accountant) move the
right way in eps, delta and steps (more budget never costs more noise; more steps never cost
less eps)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from qpriv.privacy.claims import Accounting, Kind, PrivacyClaim, Unit
from qpriv.privacy.dpsgd_accounting import dpsgd_epsilon, noise_multiplier_for
from qpriv.privacy.feature_path.divergences import rdp_epsilon, renyi_divergences
from qpriv.privacy.gaussian import gaussian_sigma
from qpriv.privacy.samplers import SEEDED, VETTED
from qpriv.privacy.ssp import gaussian_epsilon_pld, gaussian_noise_multiplier

JSON_LEAF = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6),
                      st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20))
JSON_VALUE = st.recursive(JSON_LEAF, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)),
    max_leaves=8)
RESERVED = {"value", "kind", "accounting", "unit", "covers", "delta", "notes"}
DETAILS = st.dictionaries(st.text(min_size=1, max_size=12).filter(lambda k: k not in RESERVED),
                          JSON_VALUE, max_size=4)
NUMBERED = st.fixed_dictionaries({}, optional={
    "delta_prime": st.floats(0.0, 0.5), "delta_total": st.floats(0.0, 0.5),
    "noise_sampler": st.sampled_from([SEEDED, VETTED]),
    "confidence": st.floats(0.5, 0.999)})
CLAIMS = st.builds(
    PrivacyClaim,
    value=st.one_of(st.none(), st.floats(min_value=0.0, allow_infinity=True, allow_nan=False)),
    kind=st.sampled_from(list(Kind)), accounting=st.sampled_from(list(Accounting)),
    unit=st.sampled_from(list(Unit)), covers=st.text(max_size=40),
    delta=st.one_of(st.none(), st.floats(0.0, 1.0, exclude_max=True)),
    notes=st.lists(st.text(max_size=30), max_size=3).map(tuple),
    details=st.tuples(DETAILS, NUMBERED).map(lambda pair: {**pair[0], **pair[1]}))


@settings(max_examples=200, deadline=None)
@given(CLAIMS)
def test_a_claim_survives_its_json_form(claim):
    text = json.dumps(claim.to_json())
    again = PrivacyClaim.from_json(json.loads(text))
    assert again == claim
    assert json.dumps(again.to_json()) == text
    assert isinstance(claim.label(), str)


@settings(max_examples=40, deadline=None)
@given(eps=st.floats(0.01, 20.0), more=st.floats(1.01, 3.0),
       delta=st.floats(1e-12, 1e-2), smaller=st.floats(1e-3, 0.99))
def test_the_analytic_gaussian_needs_less_noise_for_more_budget(eps, more, delta, smaller):
    z = gaussian_noise_multiplier(eps=eps, delta=delta)
    assert gaussian_noise_multiplier(eps=eps * more, delta=delta) < z
    assert gaussian_noise_multiplier(eps=eps, delta=delta * smaller) > z
    assert gaussian_sigma(eps=eps * more, delta=delta) < gaussian_sigma(eps=eps, delta=delta)
    assert gaussian_sigma(eps=eps, delta=delta * smaller) > gaussian_sigma(eps=eps, delta=delta)


@settings(max_examples=15, deadline=None)
@given(eps=st.floats(0.05, 10.0), delta=st.floats(1e-10, 1e-3))
def test_the_calibrated_gaussian_spends_at_most_its_eps_by_an_independent_accountant(eps,
                                                                                      delta):
    z = gaussian_noise_multiplier(eps=eps, delta=delta)
    assert gaussian_epsilon_pld(noise_multiplier=z, delta=delta) <= eps * (1 + 1e-3) + 1e-3


@settings(max_examples=40, deadline=None)
@given(sigma=st.floats(0.5, 10.0), q=st.floats(1e-3, 0.2), steps=st.integers(1, 5000),
       more=st.integers(1, 5000), delta=st.floats(1e-10, 1e-4), factor=st.floats(1.05, 3.0))
def test_dpsgd_eps_grows_with_steps_and_rate_and_falls_with_noise_and_delta(
        sigma, q, steps, more, delta, factor):
    def eps(**change):
        args = {"noise_multiplier": sigma, "sample_rate": q, "steps": steps, "delta": delta}
        return dpsgd_epsilon(**{**args, **change})

    base = eps()
    assert eps(steps=steps + more) >= base
    assert eps(noise_multiplier=sigma * factor) <= base
    assert eps(delta=delta * factor if delta * factor < 1 else delta) <= base
    assume(q * factor < 1)
    assert eps(sample_rate=q * factor) >= base


@pytest.mark.slow
@settings(max_examples=5, deadline=None)
@given(eps=st.floats(0.5, 8.0), q=st.floats(0.005, 0.05), steps=st.integers(10, 400),
       factor=st.floats(1.2, 2.0))
def test_dpsgd_noise_falls_with_budget_and_grows_with_steps(eps, q, steps, factor):
    sigma = noise_multiplier_for(eps=eps, delta=1e-6, sample_rate=q, steps=steps)
    assert noise_multiplier_for(eps=eps * factor, delta=1e-6, sample_rate=q,
                                steps=steps) <= sigma
    assert noise_multiplier_for(eps=eps, delta=1e-6, sample_rate=q,
                                steps=int(steps * factor)) >= sigma
    assert noise_multiplier_for(eps=eps, delta=1e-5, sample_rate=q, steps=steps) <= sigma
    # and the accountant gives back at most the budget it was calibrated to
    assert dpsgd_epsilon(noise_multiplier=sigma, sample_rate=q, steps=steps,
                         delta=1e-6) <= eps * (1 + 1e-2)
    assert math.isfinite(sigma)


PROBABILITIES = st.lists(st.floats(0.01, 1.0), min_size=2, max_size=6).map(
    lambda w: np.asarray(w) / np.sum(w))


@settings(max_examples=60, deadline=None)
@given(p=PROBABILITIES, shift=st.floats(-0.5, 0.5), count=st.integers(1, 10_000),
       more=st.integers(1, 10_000), delta=st.floats(1e-12, 1e-3), factor=st.floats(1.1, 10.0))
def test_the_feature_paths_rdp_eps_grows_with_passes_and_falls_with_delta(
        p, shift, count, more, delta, factor):
    """The LDPT feature path's RDP accountant on a random pair of outcome distributions (the
    second a tilt of the first): more compositions never cost less, more delta never more."""
    q = p * np.exp(shift * np.arange(len(p)))
    q = q / q.sum()
    curve = renyi_divergences(p, q)
    eps = rdp_epsilon(curve, count=count, delta=delta)
    assert rdp_epsilon(curve, count=count + more, delta=delta) >= eps - 1e-12
    assert rdp_epsilon(curve, count=count, delta=min(delta * factor, 0.5)) <= eps + 1e-12
