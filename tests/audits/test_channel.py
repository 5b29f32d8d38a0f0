"""The exact channel audit: D_max through the simulated channel against Theorem 1."""

import numpy as np
import pytest
import scipy.linalg

from qpriv.audits.channel import (
    audit_channel,
    max_relative_entropy,
    neighbouring_pure_pairs,
    worst_case_dmax,
)
from qpriv.errors import InvalidInputError
from qpriv.privacy.calibration import calibrate


def test_max_relative_entropy_matches_generalised_eigenproblem():
    rng = np.random.default_rng(3)
    for _ in range(5):
        a = rng.standard_normal((4, 4)) + 1j * rng.standard_normal((4, 4))
        b = rng.standard_normal((4, 4)) + 1j * rng.standard_normal((4, 4))
        rho = a @ a.conj().T
        sigma = b @ b.conj().T + 0.1 * np.eye(4)
        rho, sigma = rho / np.trace(rho).real, sigma / np.trace(sigma).real
        expected = np.log(scipy.linalg.eigh(rho, sigma, eigvals_only=True)[-1])
        assert max_relative_entropy(rho, sigma) == pytest.approx(expected, abs=1e-10)
    assert max_relative_entropy(np.eye(2) / 2, np.eye(2) / 2) == pytest.approx(0.0, abs=1e-12)


def test_pairs_sit_at_the_requested_trace_distance():
    rng = np.random.default_rng(4)
    psi, phi = neighbouring_pure_pairs(dim=16, d=0.1, pairs=50, rng=rng, exact_distance=True)
    for a, b in zip(psi, phi, strict=True):
        diff = np.outer(a, a.conj()) - np.outer(b, b.conj())
        assert np.abs(np.linalg.eigvalsh(diff)).sum() == pytest.approx(0.1, abs=1e-10)


@pytest.mark.parametrize("eps_s", [0.1, 1.0, 5.0])
def test_audit_finds_the_worst_case_and_stays_below_theorem1(eps_s):
    audit = audit_channel(eps_s, pairs=300, seed=1)
    assert 0 < audit.dmax_max <= audit.eps_ch_bound
    assert audit.passed
    # the pairs at exactly distance d attain the closed-form worst case
    assert audit.dmax_max == pytest.approx(audit.dmax_closed_form, rel=1e-8)
    assert audit.eps_ch_bound == pytest.approx(0.8 * eps_s, rel=1e-10)


def test_each_epsilon_of_the_audit_is_a_typed_claim_at_the_token_unit():
    audit = audit_channel(1.0, pairs=100, seed=4)
    bound, exact = audit.claims()
    assert (bound.value, bound.accounting, bound.unit) == (audit.eps_ch_bound, "paper", "token")
    assert (exact.accounting, exact.unit) == ("rigorous", "token")
    # the closed form, never below what a sampled pair reached (they agree to rounding)
    assert exact.value == max(audit.dmax_closed_form, audit.dmax_max)
    assert exact.value == pytest.approx(audit.dmax_closed_form, rel=1e-12)
    assert bound.kind == exact.kind == "local eps-QDP of the channel alone, per pass"
    # the exact worst case is below the paper's bound, and what the sampled pairs reached
    assert audit.dmax_max <= exact.value * (1 + 1e-8) and exact.value < bound.value
    assert all("before the measurement" in c.covers and f"p = {audit.p:.6g}" in c.covers
               for c in (bound, exact))
    assert all("within full trace distance d = 0.1" in c.notes[0] for c in (bound, exact))
    assert f"{audit.pairs} sampled pairs" in exact.notes[1]


def test_slack_at_eps_0_1_is_about_2_6():
    # Theorem 1's bound is valid but loose: about 2.6x at eps_s = 0.1
    audit = audit_channel(0.1, pairs=200, seed=2)
    assert audit.slack == pytest.approx(2.6, abs=0.1)


def test_worst_case_grows_with_distance_and_falls_with_noise():
    p = calibrate(0.1).p
    assert worst_case_dmax(p=p, d=0.05, dim=16) < worst_case_dmax(p=p, d=0.1, dim=16)
    assert worst_case_dmax(p=0.9, d=0.1, dim=16) < worst_case_dmax(p=0.5, d=0.1, dim=16)


def test_a_budget_beyond_float64_resolution_is_refused_with_the_largest_usable():
    assert audit_channel(25.0, pairs=50).passed
    with pytest.raises(InvalidInputError, match=r"the exact audit takes eps_s <= 25\.9"):
        audit_channel(45.0, pairs=50)


def test_a_budget_too_small_for_the_channel_or_a_register_too_large_is_refused():
    """p rounded to 1 surfaced as 'p = 1 is outside [0, 1)' and D = 65536 as n_qubits = 16,
    neither of which the caller gave."""
    with pytest.raises(InvalidInputError, match=r"eps_s = 1e-300 is too small: .* use eps_s "
                                                r">= 2e-15"):
        audit_channel(1e-300, pairs=50)
    with pytest.raises(InvalidInputError, match=r"^dim = 65536 is above 32: the exact audit "):
        audit_channel(0.1, dim=65536, pairs=50)
    assert audit_channel(0.1, dim=32, pairs=20).passed  # the largest it takes
