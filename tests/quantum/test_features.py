"""The fast feature path against its slow twin (density matrix -> Lindblad propagator -> POVM ->
multinomial), ``quantum_features_reference``, and against the exact multinomial law."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from qpriv.errors import InvalidInputError
from qpriv.quantum import (
    FeatureStats,
    amplitude_encode,
    depolarized_pure_purity,
    outcome_probabilities,
    quantum_features,
    quantum_features_reference,
    sic_vectors,
)

DIMS = (2, 4, 8, 16, 32)


def windows(n: int, dim: int, *, seed: int) -> torch.Tensor:
    """Random real windows plus one all-zero window (encoded as the uniform superposition)."""
    x = torch.randn(n, dim, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    x[0] = 0.0
    return x


@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("p", [0.0, 0.3, 0.9505])
def test_closed_form_probabilities_match_the_lindblad_propagator(dim: int, p: float) -> None:
    x = windows(12, dim, seed=dim)
    reference, reference_purity = quantum_features_reference(x, p=p, n_shots=None)
    psi, _ = amplitude_encode(x)
    exact = outcome_probabilities(psi, p=p)
    assert exact.dtype == torch.float64 and exact.shape == (12, dim * dim)
    assert float((exact - reference).abs().max()) < 1e-10
    # Purity tr(rho(t)^2) of the propagated matrix against the closed form.
    expected_purity = depolarized_pure_purity(p, dim=dim)
    assert float((reference_purity - expected_purity).abs().max()) < 1e-10
    fast, fast_purity = quantum_features(x, p=p, n_shots=None)
    assert fast.dtype == torch.float32 and fast_purity.dtype == torch.float32
    torch.testing.assert_close(fast.double(), exact, atol=2e-7, rtol=1e-5)
    torch.testing.assert_close(fast_purity.double(), reference_purity, atol=1e-6, rtol=0)
    torch.testing.assert_close(fast.sum(-1), torch.ones(12), atol=1e-5, rtol=0)


def test_probabilities_at_the_limits() -> None:
    x = windows(5, 16, seed=1)
    psi, _ = amplitude_encode(x)
    full, purity_full = quantum_features(x, p=1.0, n_shots=None)
    torch.testing.assert_close(full, torch.full((5, 256), 1 / 256))
    torch.testing.assert_close(purity_full, torch.full((5,), 1 / 16))
    clean = outcome_probabilities(psi, p=0.0)
    phi = sic_vectors(16)
    expected = (psi.to(torch.complex128) @ phi.conj().T).abs().square() / 16
    torch.testing.assert_close(clean, expected)
    torch.testing.assert_close(outcome_probabilities(psi.to(torch.complex128), p=0.4),
                               outcome_probabilities(psi, p=0.4))
    # The zero window is the uniform superposition.
    uniform = torch.full((1, 16), 0.25, dtype=torch.float64)
    torch.testing.assert_close(clean[0], outcome_probabilities(uniform, p=0.0)[0])


@pytest.mark.parametrize("features", [quantum_features, quantum_features_reference])
def test_sampled_counts_follow_the_exact_multinomial(features, chi_square) -> None:
    """Both twins: 20000 repeats of one window at D = 2 (4 outcomes) with 3 shots each."""
    x = torch.tensor([[0.8, -0.35]]).expand(20000, 2)
    p, n_shots = 0.3, 3
    probs = outcome_probabilities(amplitude_encode(x[:1].double())[0], p=p)[0].numpy()
    freqs, _ = features(x, p=p, n_shots=n_shots, generator=torch.Generator().manual_seed(5))
    counts = torch.round(freqs.double() * n_shots).to(torch.int64)
    _, p_value = chi_square(counts, probs, n_shots=n_shots)
    assert p_value > 1e-4


def test_fast_and_slow_frequencies_agree_in_distribution_at_d16() -> None:
    x = windows(4, 16, seed=2)[1:2].expand(1500, 16)
    p, n_shots = 0.9505, 1024
    q = outcome_probabilities(amplitude_encode(x[:1])[0], p=p)[0]
    variance = q * (1 - q) / n_shots
    for features in (quantum_features, quantum_features_reference):
        freqs, _ = features(x, p=p, n_shots=n_shots, generator=torch.Generator().manual_seed(6))
        freqs = freqs.double()
        torch.testing.assert_close(freqs.sum(-1), torch.ones(1500, dtype=torch.float64))
        z = (freqs.mean(0) - q) / (variance / 1500).sqrt()
        assert float(z.abs().max()) < 5
        assert float((freqs.var(0) / variance).mean()) == pytest.approx(1.0, abs=0.04)


def test_fresh_shot_noise_per_call_and_reproducible_seeds() -> None:
    x = windows(3, 16, seed=3)
    g = torch.Generator().manual_seed(7)
    first, _ = quantum_features(x, p=0.5, n_shots=1024, generator=g)
    second, _ = quantum_features(x, p=0.5, n_shots=1024, generator=g)
    assert not torch.equal(first, second)
    again, _ = quantum_features(x, p=0.5, n_shots=1024, generator=torch.Generator().manual_seed(7))
    assert torch.equal(first, again)
    # Frequencies are multiples of 1 / n_shots.
    torch.testing.assert_close(first * 1024, torch.round(first * 1024))


def test_batch_shape_device_dtype_and_no_gradient() -> None:
    x = torch.randn(2, 3, 16, requires_grad=True)
    freqs, purity = quantum_features(x, p=0.2, n_shots=64)
    assert freqs.shape == (2, 3, 256) and purity.shape == (2, 3)
    assert freqs.dtype == purity.dtype == torch.float32
    assert freqs.device == x.device and not freqs.requires_grad
    empty, empty_purity = quantum_features(torch.zeros(0, 4), p=0.2, n_shots=8)
    assert empty.shape == (0, 16) and empty_purity.shape == (0,)


def test_stats_count_zero_norm_windows() -> None:
    stats = FeatureStats()
    x = torch.randn(10, 8)
    x[[2, 7]] = 0.0
    quantum_features(x, p=0.1, n_shots=16, stats=stats)
    quantum_features(x[:5], p=0.1, n_shots=None, stats=stats)
    assert (stats.n_states, stats.n_zero_norm) == (15, 3)
    assert stats.zero_norm_fraction == pytest.approx(0.2)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"windows": torch.ones(2, 3), "p": 0.1, "n_shots": 8}, r"D in \{2, 4, 8, 16, 32\}"),
        ({"windows": torch.ones(2, 64), "p": 0.1, "n_shots": 8}, r"D in \{2, 4, 8, 16, 32\}"),
        ({"windows": torch.tensor([[1.0, float("nan")]]), "p": 0.1, "n_shots": 8}, "non-finite"),
        ({"windows": torch.ones(2, 4), "p": 1.5, "n_shots": 8}, r"p = 1.5 .* \[0, 1\]"),
        ({"windows": torch.ones(2, 4), "p": -0.1, "n_shots": 8}, r"p = -0.1 .* \[0, 1\]"),
        ({"windows": torch.ones(2, 4), "p": 0.1, "n_shots": 0}, "n_shots = 0"),
        ({"windows": torch.ones(2, 4, dtype=torch.complex64), "p": 0.1, "n_shots": 8}, "real"),
    ],
)
def test_invalid_inputs_raise(kwargs: dict, message: str) -> None:
    windows_ = kwargs.pop("windows")
    with pytest.raises(InvalidInputError, match=message):
        quantum_features(windows_, **kwargs)


def test_reference_needs_a_finite_rate_and_states_need_unit_norm() -> None:
    with pytest.raises(InvalidInputError, match="infinite Lindblad rate"):
        quantum_features_reference(torch.ones(1, 4), p=1.0, n_shots=None)
    with pytest.raises(InvalidInputError, match="unit vectors"):
        outcome_probabilities(torch.ones(1, 4, dtype=torch.float64), p=0.1)
    np.testing.assert_allclose(
        outcome_probabilities(torch.full((1, 4), 0.5, dtype=torch.float64), p=0.1).sum(), 1.0
    )


def test_frequencies_written_into_a_view_of_a_larger_buffer() -> None:
    x = windows(6, 16, seed=8).float().reshape(2, 3, 16)
    alone, _ = quantum_features(x, p=0.95, n_shots=1024, generator=torch.Generator().manual_seed(9))
    buffer = torch.full((2, 3, 257), 7.0)
    into, _ = quantum_features(x, p=0.95, n_shots=1024, generator=torch.Generator().manual_seed(9),
                               out=buffer[..., :256])
    assert into.data_ptr() == buffer.data_ptr() and torch.equal(into, alone)
    assert torch.equal(buffer[..., :256], alone) and bool((buffer[..., 256] == 7.0).all())
    with pytest.raises(InvalidInputError, match="out has shape"):
        quantum_features(x, p=0.95, n_shots=8, out=torch.empty(2, 3, 255))
