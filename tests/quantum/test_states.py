"""Amplitude encoding, density matrices, purity, fidelity and trace distances (full convention)."""

from __future__ import annotations

import math

import pytest
import torch

from qpriv.errors import InvalidInputError
from qpriv.quantum import (
    amplitude_encode,
    density_matrix,
    fidelity,
    pure_trace_distance_full,
    purity,
    trace_distance_full,
    trace_distance_half,
)


def test_amplitude_encode_normalises_and_keeps_direction() -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 5, 8, generator=g, dtype=torch.float64)
    psi, n_zero = amplitude_encode(x)
    assert psi.shape == x.shape and psi.dtype == torch.float64
    assert n_zero == 0
    torch.testing.assert_close(psi.norm(dim=-1), torch.ones(3, 5, dtype=torch.float64))
    torch.testing.assert_close(psi * x.norm(dim=-1, keepdim=True), x)


def test_zero_norm_windows_become_uniform_and_are_counted() -> None:
    x = torch.tensor([[0.0, 0.0, 0.0, 0.0], [1e-13, 0.0, 0.0, 0.0], [3.0, 0.0, 4.0, 0.0],
                      [1e-11, 0.0, 0.0, 0.0]], dtype=torch.float64)
    psi, n_zero = amplitude_encode(x)
    assert n_zero == 2
    torch.testing.assert_close(psi[0], torch.full((4,), 0.5, dtype=torch.float64))
    torch.testing.assert_close(psi[1], torch.full((4,), 0.5, dtype=torch.float64))
    torch.testing.assert_close(psi[2], torch.tensor([0.6, 0.0, 0.8, 0.0], dtype=torch.float64))
    # Just above the threshold a window keeps its direction.
    torch.testing.assert_close(psi[3], torch.tensor([1.0, 0.0, 0.0, 0.0], dtype=torch.float64))


def test_extreme_magnitudes_neither_overflow_nor_underflow() -> None:
    x = torch.tensor([[1e200, -1e200], [3e-300, 4e-300]], dtype=torch.float64)
    psi, n_zero = amplitude_encode(x)
    assert n_zero == 1  # 5e-300 is below 1e-12
    s = 1 / math.sqrt(2)
    torch.testing.assert_close(psi[0], torch.tensor([s, -s], dtype=torch.float64))
    big32 = torch.tensor([[3e30, 4e30]], dtype=torch.float32)
    psi32, _ = amplitude_encode(big32)
    torch.testing.assert_close(psi32, torch.tensor([[0.6, 0.8]]))


def test_integer_windows_are_encoded_in_float64() -> None:
    psi, _ = amplitude_encode(torch.tensor([3, 4]))
    assert psi.dtype == torch.float64
    torch.testing.assert_close(psi, torch.tensor([0.6, 0.8], dtype=torch.float64))


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_windows_raise(bad: float) -> None:
    x = torch.ones(2, 4)
    x[1, 2] = bad
    with pytest.raises(InvalidInputError, match="non-finite"):
        amplitude_encode(x)


@pytest.mark.parametrize("length", [1, 3, 6, 12])
def test_window_length_must_be_power_of_two(length: int) -> None:
    with pytest.raises(InvalidInputError, match="power of two"):
        amplitude_encode(torch.ones(2, length))


def test_density_matrix_is_a_rank_one_projector() -> None:
    g = torch.Generator().manual_seed(1)
    psi, _ = amplitude_encode(torch.randn(6, 16, generator=g))
    rho = density_matrix(psi)
    assert rho.dtype == torch.complex128 and rho.shape == (6, 16, 16)
    torch.testing.assert_close(rho, rho.conj().transpose(-2, -1))
    torch.testing.assert_close(rho @ rho, rho)
    torch.testing.assert_close(purity(rho), torch.ones(6, dtype=torch.float64))


def test_purity_of_the_maximally_mixed_state_is_one_over_d() -> None:
    for dim in (2, 4, 8, 16):
        mixed = torch.eye(dim, dtype=torch.complex128) / dim
        assert float(purity(mixed)) == pytest.approx(1 / dim, abs=1e-15)


def unit_vectors(n: int, dim: int, *, generator: torch.Generator) -> torch.Tensor:
    v = torch.randn(n, dim, dtype=torch.complex128, generator=generator)
    return v / v.norm(dim=-1, keepdim=True)


def test_fidelity_of_pure_states_is_the_squared_overlap() -> None:
    g = torch.Generator().manual_seed(2)
    psi, phi = unit_vectors(5, 8, generator=g), unit_vectors(5, 8, generator=g)
    expected = (psi.conj() * phi).sum(-1).abs().square()
    torch.testing.assert_close(fidelity(psi, density_matrix(phi)), expected)
    ones = torch.ones(5, dtype=torch.float64)
    torch.testing.assert_close(fidelity(psi, density_matrix(psi)), ones)


def test_trace_distances_full_and_half_conventions() -> None:
    zero = density_matrix(torch.tensor([1.0, 0.0]))
    one = density_matrix(torch.tensor([0.0, 1.0]))
    assert float(trace_distance_full(zero, one)) == pytest.approx(2.0, abs=1e-14)
    assert float(trace_distance_half(zero, one)) == pytest.approx(1.0, abs=1e-14)
    assert float(trace_distance_full(zero, zero)) == pytest.approx(0.0, abs=1e-14)
    # Pure state against the maximally mixed state: eigenvalues 1 - 1/D and (D - 1) times -1/D.
    dim = 16
    pure = density_matrix(torch.nn.functional.one_hot(torch.tensor(3), dim).double())
    mixed = torch.eye(dim, dtype=torch.complex128) / dim
    assert float(trace_distance_full(pure, mixed)) == pytest.approx(2 * (1 - 1 / dim), abs=1e-13)


def test_pure_closed_form_matches_the_eigenvalue_trace_norm() -> None:
    g = torch.Generator().manual_seed(3)
    psi = unit_vectors(20, 16, generator=g)
    phi = psi + 0.1 * unit_vectors(20, 16, generator=g)
    phi = phi / phi.norm(dim=-1, keepdim=True)
    closed = pure_trace_distance_full(psi, phi)
    full = trace_distance_full(density_matrix(psi), density_matrix(phi))
    torch.testing.assert_close(closed, full, atol=1e-12, rtol=0)
    assert bool(((closed > 0) & (closed < 2)).all())


def test_square_shape_is_required() -> None:
    with pytest.raises(InvalidInputError, match=r"\(\.\.\., D, D\)"):
        purity(torch.ones(3, 4, dtype=torch.complex128))
