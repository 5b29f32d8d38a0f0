"""DP-SGD accounting through Opacus: both directions, both accountants, the paper's multipliers."""

from __future__ import annotations

import pytest

from qpriv.errors import InvalidInputError
from qpriv.privacy.dpsgd_accounting import (
    RDP_ORDERS,
    check_rdp_eps,
    dpsgd_epsilon,
    dpsgd_schedule,
    noise_multiplier_for,
    paper_noise_multiplier_table,
)

pytestmark = pytest.mark.filterwarnings("ignore:Optimal order is the largest alpha")


def test_noise_multiplier_is_opacus_rdp_and_meets_the_target() -> None:
    from dp_accounting import dp_event
    from dp_accounting.rdp import rdp_privacy_accountant

    q, steps, delta = 64 / 1638, 26 * 20, 1e-5
    for eps, pinned in ((1.0, 3.7695), (10.0, 0.8185)):
        sigma = noise_multiplier_for(eps=eps, delta=delta, sample_rate=q, steps=steps)
        assert sigma == pytest.approx(pinned, abs=5e-5)
        spent = dpsgd_epsilon(noise_multiplier=sigma, sample_rate=q, steps=steps, delta=delta)
        assert 0.95 * eps <= spent <= eps
        # an independent implementation: dp-accounting's RDP accountant on the same orders
        # (its conversion to (eps, delta) differs slightly from Opacus's)
        other = rdp_privacy_accountant.RdpAccountant(RDP_ORDERS)
        other.compose(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma)), steps)
        assert spent == pytest.approx(other.get_epsilon(delta), rel=0.005)
        # the second accountant: PRV is tighter than RDP, never looser
        prv = dpsgd_epsilon(noise_multiplier=sigma, sample_rate=q, steps=steps, delta=delta,
                            accountant="prv")
        assert prv <= spent + 1e-6
    assert noise_multiplier_for(eps=1.0, delta=delta, sample_rate=q, steps=steps) > \
        noise_multiplier_for(eps=10.0, delta=delta, sample_rate=q, steps=steps)


@pytest.mark.filterwarnings("error::UserWarning")
def test_a_very_large_budget_is_calibrated_quietly_and_stays_a_valid_bound() -> None:
    """At eps = 1000 the conversion's best order is the grid's smallest: Opacus warns (the CLI
    printed it twice on stderr); the multiplier is loose, never too small."""
    from dp_accounting import dp_event
    from dp_accounting.rdp import rdp_privacy_accountant

    q, steps = dpsgd_schedule(n_train=8281, batch_size=64, epochs=20)
    sigma = noise_multiplier_for(eps=1000.0, delta=1e-6, sample_rate=q, steps=steps)
    assert dpsgd_epsilon(noise_multiplier=sigma, sample_rate=q, steps=steps,
                         delta=1e-6) <= 1000.0
    # finer orders below 1.1 (dp-accounting, independently) certify less than 1000 for it:
    # the silenced warning costs tightness, not validity
    finer = rdp_privacy_accountant.RdpAccountant([1 + k / 100 for k in range(1, 10)]
                                                 + RDP_ORDERS)
    finer.compose(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma)), steps)
    assert finer.get_epsilon(1e-6) < 900.0


def test_the_papers_multipliers_against_opacus() -> None:
    """Issue 4: N = 8281, batch 64, 20 epochs, delta = 1e-6. The paper's 15.50 / 3.41 / 1.78
    meet eps 0.1 / 0.5 / 1 only roughly; its 0.41 at eps = 5 spends about eight times that."""
    q, steps = dpsgd_schedule(n_train=8281, batch_size=64, epochs=20)
    assert steps == 2580
    assert q == pytest.approx(64 / 8281)
    rows = {row["eps"]: row for row in paper_noise_multiplier_table()}
    assert rows[0.1]["sigma_rdp"] == pytest.approx(16.25, abs=0.01)
    assert rows[1.0]["sigma_rdp"] == pytest.approx(1.953, abs=0.005)
    assert rows[5.0]["sigma_rdp"] == pytest.approx(0.788, abs=0.005)
    for eps, row in rows.items():
        # a sigma meeting the target spends at most eps, by each accountant
        assert dpsgd_epsilon(noise_multiplier=row["sigma_rdp"], sample_rate=q, steps=steps,
                             delta=1e-6) <= eps * (1 + 1e-6)
        assert row["sigma_prv"] == pytest.approx(row["sigma_rdp"], rel=0.1)
    assert rows[5.0]["eps_of_paper_sigma_rdp"] == pytest.approx(40.6, abs=0.1)
    assert rows[5.0]["eps_of_paper_sigma_prv"] > 30.0
    assert rows[1.0]["eps_of_paper_sigma_rdp"] > 1.0  # 1.78 is a little short of eps = 1


def test_bad_input_is_named() -> None:
    with pytest.raises(InvalidInputError, match="delta = 1 is outside"):
        noise_multiplier_for(eps=1.0, delta=1.0, sample_rate=0.01, steps=100)
    with pytest.raises(InvalidInputError, match="accountant = 'gdp' is not one of"):
        noise_multiplier_for(eps=1.0, delta=1e-5, sample_rate=0.01, steps=100,
                             accountant="gdp")
    with pytest.raises(InvalidInputError, match=r"even infinite noise converts to eps = 0\.00575"):
        noise_multiplier_for(eps=0.005, delta=1e-6, sample_rate=0.01, steps=100)
    with pytest.raises(InvalidInputError, match=r"eps = 1e\+20 is outside .* train without"):
        noise_multiplier_for(eps=1e20, delta=1e-6, sample_rate=0.01, steps=100)  # no hang
    with pytest.raises(InvalidInputError, match="batch_size = 100 exceeds"):
        dpsgd_schedule(n_train=50, batch_size=100, epochs=1)
    with pytest.raises(InvalidInputError, match="noise_multiplier = 0"):
        dpsgd_epsilon(noise_multiplier=0.0, sample_rate=0.01, steps=10, delta=1e-5)


def test_the_rdp_floor_check_is_where_the_search_fails() -> None:
    # the up-front check (a frontier's, before any cell) and the calibration agree: just above
    # the floor a multiplier exists and meets the budget; at the floor neither takes the eps
    delta = 1e-6
    floor = 0.0057522  # the RDP conversion at zero RDP over RDP_ORDERS
    above = floor * 1.01
    assert check_rdp_eps(above, delta) == above
    sigma = noise_multiplier_for(eps=above, delta=delta, sample_rate=0.01, steps=100)
    assert dpsgd_epsilon(noise_multiplier=sigma, sample_rate=0.01, steps=100,
                         delta=delta) <= above
    for eps in (floor * 0.9999, 0.005):
        with pytest.raises(InvalidInputError, match="method 'dpsgd' finds no DP-SGD noise"):
            check_rdp_eps(eps, delta, who="method 'dpsgd'")
        with pytest.raises(InvalidInputError, match="RDP accountant finds no DP-SGD noise"):
            noise_multiplier_for(eps=eps, delta=delta, sample_rate=0.01, steps=100)
