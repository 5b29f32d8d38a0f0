"""The Lindblad depolarizing channel: QuTiP Liouvillian, propagator, closed form, conventions."""

from __future__ import annotations

import math

import numpy as np
import pytest
import qutip
import scipy.linalg
import torch

from qpriv.errors import InvalidInputError
from qpriv.quantum import (
    apply_superoperator,
    density_matrix,
    depolarize,
    depolarized_pure_fidelity,
    depolarized_pure_purity,
    depolarizing_collapse_operators,
    depolarizing_liouvillian,
    depolarizing_p_from_rate,
    depolarizing_propagator,
    depolarizing_rate,
    fidelity,
    purity,
)


def test_liouvillian_is_gamma_times_trace_identity_minus_rho() -> None:
    """The D^2 jumps sqrt(gamma/D)|i><j| give L(rho) = gamma (tr(rho) I / D - rho) on any matrix."""
    dim, gamma = 4, 0.7
    liouvillian = depolarizing_liouvillian(2, gamma=gamma)
    assert len(depolarizing_collapse_operators(2, gamma=gamma)) == dim * dim
    g = torch.Generator().manual_seed(0)
    m = torch.randn(dim, dim, dtype=torch.complex128, generator=g).numpy()
    generated = qutip.vector_to_operator(liouvillian * qutip.operator_to_vector(qutip.Qobj(m)))
    expected = gamma * (np.trace(m) * np.eye(dim) / dim - m)
    np.testing.assert_allclose(generated.full(), expected, atol=1e-13)


@pytest.mark.parametrize("n_qubits", [1, 2, 3, 4])
@pytest.mark.parametrize("p", [0.3, 0.9505])
def test_propagator_equals_the_closed_form(
    n_qubits: int, p: float, density_matrices
) -> None:
    dim = 2**n_qubits
    rho = density_matrices(6, dim, generator=torch.Generator().manual_seed(n_qubits))
    propagator = depolarizing_propagator(n_qubits, gamma=depolarizing_rate(p), t=1.0)
    assert propagator.shape == (dim * dim, dim * dim)
    evolved = apply_superoperator(propagator, rho)
    assert float((evolved - depolarize(rho, p)).abs().max()) < 1e-10


def test_apply_superoperator_follows_qutips_column_stacking() -> None:
    dim = 4
    g = torch.Generator().manual_seed(1)
    superop = torch.randn(dim * dim, dim * dim, dtype=torch.complex128, generator=g)
    m = torch.randn(dim, dim, dtype=torch.complex128, generator=g)
    reference = qutip.vector_to_operator(
        qutip.Qobj(superop.numpy(), dims=[[[dim], [dim]], [[dim], [dim]]])
        * qutip.operator_to_vector(qutip.Qobj(m.numpy()))
    ).full()
    np.testing.assert_allclose(apply_superoperator(superop, m).numpy(), reference, atol=1e-12)


def test_hamiltonian_adds_a_fixed_unitary_after_the_same_depolarization(density_matrices) -> None:
    dim, gamma, t = 4, 1.3, 0.8
    g = torch.Generator().manual_seed(2)
    a = torch.randn(dim, dim, dtype=torch.complex128, generator=g)
    hamiltonian = (a + a.conj().T) / 2
    rho = density_matrices(3, dim, generator=g)
    evolved = apply_superoperator(
        depolarizing_propagator(2, gamma=gamma, t=t, hamiltonian=hamiltonian), rho
    )
    unitary = torch.from_numpy(scipy.linalg.expm(-1j * t * hamiltonian.numpy()))
    expected = depolarize(unitary @ rho @ unitary.conj().T, depolarizing_p_from_rate(gamma, t))
    assert float((evolved - expected).abs().max()) < 1e-10


def test_propagator_is_cached_and_returned_as_a_copy() -> None:
    first = depolarizing_propagator(2, gamma=0.4)
    first.zero_()
    second = depolarizing_propagator(2, gamma=0.4)
    assert float(second.abs().max()) > 0.5  # the cache was not modified through `first`
    torch.testing.assert_close(second, depolarizing_propagator(2, gamma=0.4))


def test_rate_and_probability_are_inverse() -> None:
    for p in (0.0, 0.029, 0.566, 0.765, 0.9505):
        assert depolarizing_p_from_rate(depolarizing_rate(p)) == pytest.approx(p, abs=1e-14)
    # LDPT Table 7 at eps_s = 0.1: gamma = 3.006 for p = 0.951.
    assert depolarizing_rate(0.9505) == pytest.approx(3.006, abs=5e-4)
    assert depolarizing_p_from_rate(2.0, 0.5) == pytest.approx(1 - math.exp(-1.0), abs=1e-15)


def test_depolarize_limits_and_trace(density_matrices) -> None:
    rho = density_matrices(4, 8, generator=torch.Generator().manual_seed(3))
    torch.testing.assert_close(depolarize(rho, 0.0), rho)
    mixed = torch.eye(8, dtype=torch.complex128).expand(4, 8, 8) / 8
    torch.testing.assert_close(depolarize(rho, 1.0), mixed)
    traces = torch.diagonal(depolarize(rho, 0.37), dim1=-2, dim2=-1).sum(-1)
    torch.testing.assert_close(traces, torch.ones(4, dtype=torch.complex128))


def test_pure_state_closed_forms_and_the_true_table7_fidelity() -> None:
    g = torch.Generator().manual_seed(4)
    psi = torch.randn(16, dtype=torch.float64, generator=g)
    psi = psi / psi.norm()
    for p in (0.0, 0.3, 0.9505, 1.0):
        out = depolarize(density_matrix(psi), p)
        assert float(purity(out)) == pytest.approx(depolarized_pure_purity(p, dim=16), abs=1e-13)
        assert float(fidelity(psi, out)) == pytest.approx(
            depolarized_pure_fidelity(p, dim=16), abs=1e-13
        )
    # at eps_s = 0.1 (p = 0.9505, D = 16) the fidelity 1 - p + p/D is 0.109, not Table 7's 0.617
    assert depolarized_pure_fidelity(0.9505, dim=16) == pytest.approx(0.109, abs=5e-4)


@pytest.mark.parametrize("n_qubits", [0, 6, 2.5, True])
def test_invalid_qubit_counts_raise(n_qubits: object) -> None:
    with pytest.raises(InvalidInputError, match="n_qubits"):
        depolarizing_propagator(n_qubits, gamma=1.0)


def test_invalid_parameters_raise() -> None:
    with pytest.raises(InvalidInputError, match=r"gamma = -1 is outside the valid range \[0, inf"):
        depolarizing_propagator(1, gamma=-1.0)
    with pytest.raises(InvalidInputError, match="infinite Lindblad rate"):
        depolarizing_rate(1.0)
    with pytest.raises(InvalidInputError, match=r"p = 1.5 is outside the valid range \[0, 1\]"):
        depolarize(torch.eye(2, dtype=torch.complex128) / 2, 1.5)
    with pytest.raises(InvalidInputError, match="Hermitian"):
        depolarizing_propagator(1, gamma=1.0, hamiltonian=[[0, 1], [0, 0]])
    with pytest.raises(InvalidInputError, match=r"\(4, 4\)"):
        depolarizing_propagator(2, gamma=1.0, hamiltonian=np.eye(2))
