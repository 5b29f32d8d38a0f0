"""Quantum features of windows: SIC-POVM shot frequencies and purity after the depolarizing channel.

This is the feature path of LDPT section 5.3: amplitude encoding (eq. 2), the Lindblad channel
(eqs. 3 and 10, which is the depolarizing channel of Theorem 1 with p = 1 - e^{-gamma t}), a
SIC-POVM measured with N_s shots, and the purity of the channel output.

Closed form used by the fast path. For a pure state rho = |psi><psi|, the depolarizing channel
gives E_p(rho) = (1 - p) |psi><psi| + p I / D. The SIC elements M_k = |phi_k><phi_k| / D have
tr(M_k) = 1 / D, so the outcome probabilities are

    q_k = tr(M_k E_p(rho)) = (1 - p) |<phi_k|psi>|^2 / D + p tr(M_k) / D
        = (1 - p) |<phi_k|psi>|^2 / D + p / D^2,

which sum to one because sum_k |phi_k><phi_k| = D I. The purity is

    tr(E_p(rho)^2) = (1 - p)^2 tr(rho^2) + 2 p (1 - p) tr(rho) / D + p^2 tr(I) / D^2
                   = (1 - p)^2 + (1 - (1 - p)^2) / D,

the same for every encoded window (all are pure), so it carries no information about the data.
Windows are real and the phi_k complex: |<phi_k|psi>|^2 = (Re(phi_k) . psi)^2 + (Im(phi_k) . psi)^2,
two real matrix products (computed as one against [Re(Phi)^T | Im(Phi)^T]).

:func:`quantum_features_reference` is the slow, obviously correct twin (density matrix ->
cached Lindblad propagator -> tr(M_k rho) -> torch.multinomial); tests and the benchmark use it
to check and to time the fast path.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch
from torch import Tensor

from qpriv.errors import InvalidInputError, require_in_range
from qpriv.quantum.channels import (
    apply_superoperator,
    depolarized_pure_purity,
    depolarizing_propagator,
    depolarizing_rate,
)
from qpriv.quantum.povm import available_sic_dims, sic_povm, sic_vectors
from qpriv.quantum.shots import multinomial_count_blocks, require_n_shots
from qpriv.quantum.states import (
    amplitude_encode,
    amplitude_encode_with_mask,
    density_matrix,
    purity,
)

_ROWS_PER_CHUNK = 4096
"""Windows encoded and measured per step of the fast path (about 8 MiB of float32 overlaps)."""


@dataclass
class FeatureStats:
    """Running totals a caller can pass to :func:`quantum_features` to learn how many windows
    had no direction (norm below 1e-12) and were encoded as the uniform superposition."""

    n_states: int = 0
    n_zero_norm: int = 0

    @property
    def zero_norm_fraction(self) -> float:
        """n_zero_norm / n_states (0 before any state is seen)."""
        return self.n_zero_norm / self.n_states if self.n_states else 0.0


def _require_p(p: float) -> float:
    return require_in_range("p", p, low=0.0, low_inclusive=True, high=1.0)


def _require_windows(windows: Tensor) -> int:
    if not isinstance(windows, Tensor):
        raise InvalidInputError(f"windows must be a torch.Tensor, got {type(windows).__name__}")
    if windows.is_complex():
        raise InvalidInputError("windows must be real; amplitude encoding takes real data")
    if windows.ndim == 0:
        raise InvalidInputError("windows must have shape (..., D)")
    dim = windows.shape[-1]
    if dim not in available_sic_dims():
        valid = ", ".join(str(d) for d in available_sic_dims())
        raise InvalidInputError(
            f"windows' last axis has length {dim}; quantum features need D in {{{valid}}} "
            "(a SIC-POVM is shipped for these)"
        )
    if windows.numel() and not bool(torch.isfinite(windows).all()):
        bad = int((~torch.isfinite(windows)).sum())
        raise InvalidInputError(
            f"windows contain {bad} non-finite value(s) (NaN or inf); "
            "amplitude encoding needs finite numbers"
        )
    return dim


@functools.lru_cache(maxsize=16)
def _overlap_matrix(dim: int, dtype: torch.dtype, device: torch.device) -> Tensor:
    """[Re(Phi)^T | Im(Phi)^T] of shape (D, 2 D^2): psi @ it gives Re and Im of <phi_k|psi>."""
    phi = sic_vectors(dim)
    # <phi_k|psi> = sum_j conj(phi_kj) psi_j: real part Re(phi) . psi, imaginary -Im(phi) . psi.
    return torch.cat([phi.real.T, phi.imag.T], dim=1).to(device=device, dtype=dtype).contiguous()


def _outcome_probabilities_real(psi: Tensor, p: float) -> Tensor:
    """q_k = (1 - p) |<phi_k|psi>|^2 / D + p / D^2 for real unit vectors psi (R, D)."""
    dim = psi.shape[-1]
    n_outcomes = dim * dim
    # Scaling the (D, 2 D^2) matrix by sqrt((1 - p) / D) saves a pass over the (R, D^2) result.
    weights = _overlap_matrix(dim, psi.dtype, psi.device) * math.sqrt((1.0 - p) / dim)
    parts = (psi @ weights).square_()
    return (parts[:, :n_outcomes] + parts[:, n_outcomes:]).add_(p / n_outcomes)


def outcome_probabilities(states: Tensor, *, p: float) -> Tensor:
    """Exact SIC outcome probabilities after the depolarizing channel, in float64.

    q_k = (1 - p) |<phi_k|psi>|^2 / D + p / D^2 (derived in the module docstring), the same
    formula and code as the fast path of :func:`quantum_features`, evaluated in float64.

    Args:
        states: unit state vectors of shape (..., D), real or complex, D in {2, 4, 8, 16}.
        p: depolarizing probability in [0, 1] (Theorem 1).

    Returns:
        float64 probabilities of shape (..., D^2).
    """
    p = _require_p(p)
    if not isinstance(states, Tensor) or states.ndim == 0:
        raise InvalidInputError("states must be a torch.Tensor of shape (..., D)")
    dim = states.shape[-1]
    phi = sic_vectors(dim)
    norms = torch.linalg.vector_norm(states.to(torch.complex128), dim=-1)
    if states.numel() and float((norms.square() - 1.0).abs().max()) > 1e-6:
        raise InvalidInputError("states must be unit vectors (amplitude_encode the windows first)")
    if states.is_complex():
        overlap_sq = (states.to(torch.complex128) @ phi.conj().T.to(states.device)).abs().square()
        return (1.0 - p) * overlap_sq / dim + p / dim**2
    flat = states.to(torch.float64).reshape(-1, dim)
    return _outcome_probabilities_real(flat, p).reshape(*states.shape[:-1], dim * dim)


@torch.no_grad()
def quantum_features(
    windows: Tensor,
    *,
    p: float,
    n_shots: int | None,
    generator: torch.Generator | None = None,
    stats: FeatureStats | None = None,
    out: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """SIC-POVM shot frequencies and purity of windows sent through the depolarizing channel.

    The fast path of LDPT section 5.3: amplitude encoding (eq. 2), the Lindblad depolarizing
    channel (eqs. 3 and 10; Theorem 1 with p = 1 - e^{-gamma t}), a SIC-POVM with ``n_shots``
    shots, and the purity tr(rho(t)^2). It evaluates the closed forms derived in the module
    docstring, exact for this channel and this rank-one POVM:

        q_k = (1 - p) |<phi_k|psi>|^2 / D + p / D^2,
        tr(rho(t)^2) = (1 - p)^2 + (1 - (1 - p)^2) / D,

    then draws exact multinomial counts (:mod:`qpriv.quantum.shots`).
    :func:`quantum_features_reference` is the slow twin built from the propagator.

    Args:
        windows: real windows of shape (..., D), D in {2, 4, 8, 16}. A window with norm below
            1e-12 is encoded as the uniform superposition (counted in ``stats``).
        p: depolarizing probability in [0, 1].
        n_shots: shots per window (>= 1), or None for the exact probabilities.
        generator: torch generator on the windows' device (default: torch's global one). It
            advances, so every call draws fresh shot noise.
        stats: optional running totals; when given, the number of windows and of zero-norm
            windows is added to it (one host sync per call).
        out: optional float32 tensor of shape (..., D^2) on the windows' device to write the
            frequencies into (a view of a larger buffer will do if its leading axes flatten
            without a copy); it is the returned frequency tensor.

    Returns:
        ``(frequencies, purity)``: float32 tensors on the windows' device of shapes (..., D^2)
        (rows sum to 1) and (...). No gradient flows (nothing learned precedes the channel).
    """
    dim = _require_windows(windows)
    p = _require_p(p)
    if n_shots is not None:
        n_shots = require_n_shots(n_shots)
    batch_shape = windows.shape[:-1]
    n_outcomes = dim * dim
    flat = windows.reshape(-1, dim)
    if out is None:
        out = torch.empty(*batch_shape, n_outcomes, dtype=torch.float32, device=windows.device)
    elif out.shape != (*batch_shape, n_outcomes) or out.dtype != torch.float32:
        raise InvalidInputError(
            f"out has shape {tuple(out.shape)} and dtype {out.dtype}; the frequencies need "
            f"float32 of shape {(*batch_shape, n_outcomes)}"
        )
    frequencies = out
    out = out.view(-1, n_outcomes)
    zero_total = torch.zeros((), dtype=torch.int64, device=windows.device)
    for start in range(0, flat.shape[0], _ROWS_PER_CHUNK):
        stop = min(start + _ROWS_PER_CHUNK, flat.shape[0])
        psi, zero = amplitude_encode_with_mask(flat[start:stop].to(torch.float32))
        zero_total += zero.sum()
        probs = _outcome_probabilities_real(psi, p)
        if n_shots is None:
            out[start:stop] = probs
        else:
            chunk = out[start:stop]
            for rows, counts in multinomial_count_blocks(probs, n_shots, generator=generator):
                torch.div(counts, n_shots, out=chunk[rows])
    if stats is not None:
        stats.n_states += flat.shape[0]
        stats.n_zero_norm += int(zero_total)
    purity_value = depolarized_pure_purity(p, dim=dim)
    purities = torch.full(batch_shape, purity_value, dtype=torch.float32, device=windows.device)
    return frequencies, purities


@torch.no_grad()
def quantum_features_reference(
    windows: Tensor,
    *,
    p: float,
    n_shots: int | None,
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor]:
    """Slow reference for :func:`quantum_features`, built literally from the paper's pipeline.

    rho = |psi><psi| (eq. 2) -> vec(rho(t)) = e^{L t} vec(rho) with the cached QuTiP Lindblad
    propagator at gamma = -ln(1 - p), t = 1 (eqs. 3, 7, 10) -> p_k = tr(M_k rho(t)) with the SIC
    elements -> ``torch.multinomial`` shots (with replacement) -> frequencies; purity
    tr(rho(t)^2) computed from the matrix. Everything in complex128 / float64.

    Same arguments as :func:`quantum_features`, except that p must be below 1 (the Lindblad rate
    is infinite at p = 1). Returns float64 ``(frequencies or probabilities, purity)``.
    """
    dim = _require_windows(windows)
    gamma = depolarizing_rate(p, t=1.0)
    if n_shots is not None:
        n_shots = require_n_shots(n_shots)
    batch_shape = windows.shape[:-1]
    psi, _ = amplitude_encode(windows.reshape(-1, dim).to(torch.float64))
    propagator = depolarizing_propagator(int(math.log2(dim)), gamma=gamma, t=1.0)
    rho_t = apply_superoperator(propagator.to(psi.device), density_matrix(psi))
    povm = sic_povm(dim).to(psi.device)
    probs = torch.einsum("kij,rji->rk", povm, rho_t).real
    purities = purity(rho_t).reshape(batch_shape)
    if n_shots is None:
        return probs.reshape(*batch_shape, dim * dim), purities
    weights = probs.clamp(min=0.0)
    counts = torch.zeros_like(weights, dtype=torch.int64)
    rows_per_chunk = max(1, (1 << 20) // n_shots)
    for start in range(0, weights.shape[0], rows_per_chunk):
        block = weights[start:start + rows_per_chunk]
        shots = torch.multinomial(block, n_shots, replacement=True, generator=generator)
        counts[start:start + rows_per_chunk].scatter_add_(1, shots, torch.ones_like(shots))
    freqs = counts.to(torch.float64) / n_shots
    return freqs.reshape(*batch_shape, dim * dim), purities
