"""The paper's formulas (``paper`` accounting) against its published numbers and closed forms."""

import math

import pytest

from qpriv.errors import InvalidInputError
from qpriv.privacy.calibration import (
    calibrate,
    depolarized_fidelity,
    depolarizing_p,
    injection_sigma,
    lindblad_gamma,
    measurement_budget,
)
from qpriv.privacy.composition import advanced_composition, basic_composition
from qpriv.privacy.gaussian import gaussian_sigma
from qpriv.privacy.theorems import (
    channel_epsilon,
    effective_epsilon,
    hybrid_composition,
    measurement_epsilon_bound,
)

# Table 7 of the LDPT paper: eps_s -> (eps_ch, eps_me, p, gamma, sigma); eps_me None = "†".
TABLE7 = {
    0.1: (0.080, 0.022, 0.951, 3.006, 0.084),
    0.5: (0.400, 0.167, 0.765, 1.448, 0.068),
    1.0: (0.800, 1.000, 0.566, 0.835, 0.050),
    5.0: (4.000, None, 0.029, 0.029, 0.003),
}


@pytest.mark.parametrize("eps_s", sorted(TABLE7))
def test_calibration_chain_reproduces_table7(eps_s):
    eps_ch, eps_me, p, gamma, sigma = TABLE7[eps_s]
    cal = calibrate(eps_s)
    assert cal.eps_ch == pytest.approx(eps_ch, abs=5e-4)
    assert cal.p == pytest.approx(p, abs=5e-4)
    assert cal.gamma == pytest.approx(gamma, abs=5e-4)
    assert cal.sigma == pytest.approx(sigma, abs=5e-4)
    if eps_me is None:
        assert cal.eps_me is None
        assert any("undefined" in note for note in cal.notes)
    else:
        assert cal.eps_me == pytest.approx(eps_me, abs=5e-4)


def test_issue_numbers_at_eps_0_1():
    cal = calibrate(0.1)
    assert round(cal.p, 4) == 0.9505
    assert round(cal.gamma, 3) == 3.006
    assert round(cal.sigma, 4) == 0.0840
    assert round(cal.eps_me, 4) == 0.0217
    assert round(cal.fidelity, 3) == 0.109
    assert cal.fidelity_paper == 0.617
    assert cal.as_dict()["accounting"] == "paper"
    assert cal.as_dict()["kind"] == "local eps-QDP per pass"


def test_true_fidelity_differs_from_table7_except_at_eps_5():
    # 1 - p + p/D = 0.109 / 0.283 / 0.469 / 0.973, not Table 7's
    expected = {0.1: 0.109, 0.5: 0.283, 1.0: 0.469, 5.0: 0.973}
    for eps_s, fid in expected.items():
        cal = calibrate(eps_s)
        assert cal.fidelity == pytest.approx(fid, abs=5e-4)
    assert abs(calibrate(5.0).fidelity - calibrate(5.0).fidelity_paper) < 2e-3
    assert abs(calibrate(0.1).fidelity - calibrate(0.1).fidelity_paper) > 0.5


def test_table7_composition_check_matches_section_7_6():
    # "1 - (1 - 0.080)(1 - 0.022) = 0.100" and "1 - (1 - 0.400)(1 - 0.167) = 0.500".
    for eps_s in (0.1, 0.5):
        cal = calibrate(eps_s)
        assert hybrid_composition(cal.eps_ch, cal.eps_me) == pytest.approx(eps_s, abs=1e-12)


def test_theorem1_inverts_eq6():
    for eps_ch in (0.01, 0.08, 0.4, 0.8, 4.0):
        for dim in (2, 4, 8, 16):
            p = depolarizing_p(eps_ch=eps_ch, d=0.1, dim=dim)
            assert channel_epsilon(p=p, d=0.1, dim=dim) == pytest.approx(eps_ch, rel=1e-12)


def test_theorem1_limits():
    assert channel_epsilon(p=0.0, d=0.1, dim=16) == math.inf
    assert channel_epsilon(p=1.0, d=0.1, dim=16) == 0.0
    # effective epsilon: Theorem 1 evaluated at a pair's own trace distance (section 6.2)
    p = calibrate(0.1).p
    assert effective_epsilon(p=p, trace_distance=0.1, dim=16) == pytest.approx(0.08)
    assert effective_epsilon(p=p, trace_distance=0.132, dim=16) > 0.08


def test_theorem2_as_printed():
    # "For N_s = 1024, d = 0.1: eps_me ~ 0.003"
    assert measurement_epsilon_bound(d=0.1, n_shots=1024) == pytest.approx(0.003, abs=2e-4)
    # ... and it shrinks with shots, which no composition over shots can do
    assert measurement_epsilon_bound(d=0.1, n_shots=4096) < measurement_epsilon_bound(
        d=0.1, n_shots=256
    )


def test_lindblad_rate_and_sigma_closed_forms():
    p = 0.5
    assert lindblad_gamma(p, 1.0) == pytest.approx(math.log(2))
    assert lindblad_gamma(p, 2.0) == pytest.approx(math.log(2) / 2)
    assert 1 - math.exp(-lindblad_gamma(0.9505, 1.0)) == pytest.approx(0.9505)
    assert injection_sigma(0.64, 64) == pytest.approx(0.08)
    assert depolarized_fidelity(1.0, 16) == pytest.approx(1 / 16)
    assert depolarized_fidelity(0.0, 16) == 1.0


def test_measurement_budget_undefined_cases():
    assert measurement_budget(eps_s=5.0, eps_ch=4.0) is None
    assert measurement_budget(eps_s=0.1, eps_ch=0.2) is None
    assert measurement_budget(eps_s=0.1, eps_ch=0.08) == pytest.approx(0.02 / 0.92)


@pytest.mark.parametrize(
    ("eps_s", "basic", "advanced", "printed_precision"),
    # Table 1 as printed; the last row is "≈14,900", i.e. to the nearest hundred
    [(0.1, 2.0, 2.56, 0.005), (0.5, 10.0, 18.2, 0.05), (1.0, 20.0, 57.9, 0.05),
     (5.0, 100.0, 14_900, 50)],
)
def test_table1_composition(eps_s, basic, advanced, printed_precision):
    assert basic_composition(eps_s, epochs=20) == pytest.approx(basic)
    got = advanced_composition(eps_s, epochs=20, delta_prime=1e-6)
    assert abs(got - advanced) <= printed_precision


def test_advanced_composition_closed_form_one_epoch():
    eps, delta = 0.3, 1e-5
    expected = eps * math.sqrt(2 * math.log(1 / delta)) + eps * (math.exp(eps) - 1)
    assert advanced_composition(eps, epochs=1, delta_prime=delta) == pytest.approx(expected)


@pytest.mark.parametrize(("eps", "sigma"), [(0.1, 52.99), (0.5, 10.60), (1.0, 5.30), (5.0, 1.06)])
def test_gaussian_mechanism_table15(eps, sigma):
    assert gaussian_sigma(eps=eps, delta=1e-6, sensitivity=1.0) == pytest.approx(sigma, abs=5e-3)


def test_the_edges_of_the_budget_range():
    # the largest budget still calibrates a channel that adds noise, and its composition is
    # finite; past e^eps's float range advanced composition promises nothing
    top = calibrate(700.0)
    assert 0.0 < top.p < 1e-240
    assert math.isfinite(advanced_composition(700.0, epochs=20))
    assert advanced_composition(800.0, epochs=20) == math.inf
    assert 0.0 < calibrate(2e-15).p < 1.0


def test_gaussian_mechanism_scales_and_labels_its_range():
    assert gaussian_sigma(eps=0.1, delta=1e-6, sensitivity=2.0) == pytest.approx(2 * 52.988, 1e-4)


@pytest.mark.parametrize(
    ("call", "needle"),
    [
        (lambda: calibrate(0.0), "eps_s = 0"),
        (lambda: calibrate(-1.0), "eps_s = -1"),
        (lambda: calibrate(float("nan")), "finite"),
        (lambda: calibrate(0.1, d=2.5), "(0, 2]"),
        (lambda: calibrate(0.1, dim=12), "power of two"),
        (lambda: calibrate(0.1, alpha=1.5), "alpha"),
        (lambda: lindblad_gamma(1.0), "infinite Lindblad rate"),
        (lambda: calibrate(1000.0), "eps_s = 1000 is outside the valid range (0, 700]"),
        (lambda: calibrate(1e-20), "eps_s = 1e-20 is too small"),
        (lambda: gaussian_sigma(eps=0.1, delta=1.0), "delta = 1"),
        (lambda: advanced_composition(0.1, epochs=0), "epochs = 0"),
        (lambda: measurement_epsilon_bound(d=0.1, n_shots=0), "n_shots = 0"),
        (lambda: hybrid_composition(4.0, 0.1), "only meaningful below 1"),
    ],
)
def test_bad_input_names_the_value(call, needle):
    with pytest.raises(InvalidInputError) as err:
        call()
    assert needle in str(err.value)


@pytest.mark.parametrize("eps_s", sorted(TABLE7))
def test_calibrated_rate_gives_the_calibrated_channel(eps_s):
    """Cross-check: Algorithm 1's gamma through the QuTiP propagator is E_p with Table 7's p,
    and its fidelity with a pure state is the closed form 1 - p + p/D."""
    import torch

    from qpriv.quantum.channels import apply_superoperator, depolarize, depolarizing_propagator
    from qpriv.quantum.states import density_matrix, fidelity

    cal = calibrate(eps_s)
    propagator = depolarizing_propagator(4, gamma=cal.gamma, t=cal.t)
    psi = torch.randn(3, 16, dtype=torch.complex128, generator=torch.Generator().manual_seed(5))
    psi = psi / torch.linalg.vector_norm(psi, dim=-1, keepdim=True)
    rho_t = apply_superoperator(propagator, density_matrix(psi))
    assert torch.allclose(rho_t, depolarize(density_matrix(psi), cal.p), atol=1e-10)
    assert fidelity(psi, rho_t).real.numpy() == pytest.approx([cal.fidelity] * 3, abs=1e-10)
