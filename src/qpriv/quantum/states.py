"""Pure states from real windows, density matrices, and the distances between them.

Amplitude encoding follows the LDPT paper, eq. (2): a real window x in R^D (D = 2^n) becomes the
n-qubit state |psi(x)> = x / ||x||_2 and rho(x) = |psi><psi|.

Trace-distance convention: the papers' d is the full trace norm ||rho - sigma||_1, which lies in
[0, 2]. ``trace_distance_full`` returns exactly that; ``trace_distance_half`` returns half of it
(the textbook "trace distance" in [0, 1]). Every function here says which one it uses.

The exact functions work in complex128 and accept any number of leading batch dimensions.
"""

from __future__ import annotations

import math
import operator

import torch
from torch import Tensor

from qpriv.errors import InvalidInputError

ZERO_NORM_THRESHOLD = 1e-12
"""A window whose Euclidean norm is below this has no direction; it is encoded as the uniform
superposition and counted, never divided by its norm."""


def require_state_dimension(dim: int, *, name: str = "dim") -> int:
    """Return ``dim`` if it is a power of two >= 2 (the dimension of n >= 1 qubits), else raise."""
    message = (
        f"{name} = {dim!r} is not a power of two >= 2; n qubits need D = 2^n "
        "(2, 4, 8, 16, ...)"
    )
    if isinstance(dim, bool):
        raise InvalidInputError(message)
    try:
        value = operator.index(dim)
    except TypeError:
        raise InvalidInputError(message) from None
    if value < 2 or value & (value - 1):
        raise InvalidInputError(message)
    return value


def _require_finite_tensor(x: Tensor, *, name: str) -> None:
    finite = torch.isfinite(x)
    if not bool(finite.all()):
        bad = int((~finite).sum())
        raise InvalidInputError(
            f"{name} contain {bad} non-finite value(s) (NaN or inf) out of {x.numel()}; "
            "amplitude encoding needs finite numbers"
        )


def amplitude_encode_with_mask(x: Tensor) -> tuple[Tensor, Tensor]:
    """Amplitude-encode ``x`` (eq. 2) and return ``(psi, zero_norm_mask)`` without a host sync.

    This is the shared kernel of :func:`amplitude_encode`; the mask marks the windows whose norm
    is below :data:`ZERO_NORM_THRESHOLD` (encoded as the uniform superposition). ``x`` must be a
    floating or complex tensor whose last axis is a power of two; values must be finite (checked by
    the public callers). The norm is computed after dividing by the largest magnitude, so
    windows with huge or tiny entries neither overflow nor underflow.
    """
    dim = x.shape[-1]
    scale = x.abs().amax(dim=-1, keepdim=True)
    safe_scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    y = x / safe_scale
    norm_y = torch.linalg.vector_norm(y, dim=-1, keepdim=True)
    zero = (scale * norm_y) < ZERO_NORM_THRESHOLD
    psi = y / torch.where(zero, torch.ones_like(norm_y), norm_y)
    psi = torch.where(zero, torch.full_like(psi, 1.0 / math.sqrt(dim)), psi)
    return psi, zero.squeeze(-1)


def amplitude_encode(x: Tensor) -> tuple[Tensor, int]:
    """Amplitude-encode windows, eq. (2) of the LDPT paper: psi = x / ||x||_2 over the last axis.

    Args:
        x: windows of shape (..., D), D a power of two >= 2. Real or complex; integer tensors are
            converted to float64.

    Returns:
        ``(psi, n_zero_norm)``: unit vectors of the same shape and dtype, and the number of windows
        whose norm was below 1e-12. Those windows have no direction and are encoded as the uniform
        superposition (1, ..., 1) / sqrt(D); nothing is ever divided by zero.

    Raises:
        InvalidInputError: the last axis is not a power of two >= 2, or ``x`` holds NaN or inf.
    """
    if not isinstance(x, Tensor):
        raise InvalidInputError(f"windows must be a torch.Tensor, got {type(x).__name__}")
    if x.ndim == 0:
        raise InvalidInputError("windows must have at least one axis (the window of length D)")
    require_state_dimension(x.shape[-1], name="windows' last axis")
    if not (x.is_floating_point() or x.is_complex()):
        x = x.to(torch.float64)
    _require_finite_tensor(x, name="windows")
    psi, zero = amplitude_encode_with_mask(x)
    return psi, int(zero.sum())


def density_matrix(psi: Tensor) -> Tensor:
    """rho = |psi><psi| in complex128, shape (..., D, D), for state vectors of shape (..., D)."""
    psi = psi.to(torch.complex128)
    return psi.unsqueeze(-1) * psi.conj().unsqueeze(-2)


def _require_square(rho: Tensor, *, name: str) -> None:
    if rho.ndim < 2 or rho.shape[-1] != rho.shape[-2]:
        raise InvalidInputError(
            f"{name} must have shape (..., D, D), got {tuple(rho.shape)}"
        )


def purity(rho: Tensor) -> Tensor:
    """Purity tr(rho^2) of density matrices (..., D, D), as float64 in [1/D, 1]."""
    _require_square(rho, name="rho")
    rho = rho.to(torch.complex128)
    return torch.einsum("...ij,...ji->...", rho, rho).real


def fidelity(psi: Tensor, rho: Tensor) -> Tensor:
    """Fidelity <psi|rho|psi> of a pure state psi (..., D) with a state rho (..., D, D), float64.

    For the depolarizing channel of Theorem 1, <psi|E_p(|psi><psi|)|psi> = 1 - p + p / D.
    """
    _require_square(rho, name="rho")
    psi = psi.to(torch.complex128)
    rho = rho.to(torch.complex128)
    return torch.einsum("...i,...ij,...j->...", psi.conj(), rho, psi).real


def trace_distance_full(rho: Tensor, sigma: Tensor) -> Tensor:
    """Full trace norm ||rho - sigma||_1 in [0, 2] (the papers' d), float64.

    Computed as the sum of the absolute eigenvalues of the Hermitian difference. Batch dimensions
    broadcast. Half of this is :func:`trace_distance_half`.
    """
    _require_square(rho, name="rho")
    _require_square(sigma, name="sigma")
    diff = rho.to(torch.complex128) - sigma.to(torch.complex128)
    diff = 0.5 * (diff + diff.conj().transpose(-2, -1))
    return torch.linalg.eigvalsh(diff).abs().sum(dim=-1)


def trace_distance_half(rho: Tensor, sigma: Tensor) -> Tensor:
    """Half the trace norm, (1/2) ||rho - sigma||_1 in [0, 1] (the textbook trace distance)."""
    return 0.5 * trace_distance_full(rho, sigma)


def pure_trace_distance_full(psi: Tensor, phi: Tensor) -> Tensor:
    """Full trace norm of pure states, || |psi><psi| - |phi><phi| ||_1 = 2 sqrt(1 - |<psi|phi>|^2).

    Closed form of :func:`trace_distance_full` for unit vectors of shape (..., D), in [0, 2],
    float64. (The difference of two pure projectors has eigenvalues +-sqrt(1 - |<psi|phi>|^2).)
    """
    psi = psi.to(torch.complex128)
    phi = phi.to(torch.complex128)
    overlap = (psi.conj() * phi).sum(dim=-1).abs().square()
    return 2.0 * torch.sqrt(torch.clamp(1.0 - overlap, min=0.0))


def signed_amplitudes(x: Tensor, *, clip: float, reference: float) -> Tensor:
    """The unnormalised amplitudes of the signed encoding of tokens ``x`` (..., n), n = 2^k.

    ``(clamp(x, -c, c), r, 0, ..., 0)`` in R^{2n}: the token clipped to the public range [-c, c],
    then a fixed reference amplitude r > 0, then zeros, on one qubit more than eq. 2 uses
    (n = 16: five qubits, 32 amplitudes). :func:`amplitude_encode` of it is the state
    psi(x) = (x, r) / sqrt(||x||^2 + r^2), which, unlike eq. 2, tells x from -x and keeps the
    norm: the r-amplitude is r / sqrt(||x||^2 + r^2), and (x, r), (x', r) are parallel only when
    x = x'. It never has zero norm. Differentiable; keeps x's dtype and device.
    """
    if not isinstance(x, Tensor) or x.ndim == 0:
        raise InvalidInputError("tokens must be a torch.Tensor of shape (..., n)")
    require_state_dimension(x.shape[-1], name="tokens' last axis")
    if not (isinstance(clip, (int, float)) and math.isfinite(clip) and clip > 0):
        raise InvalidInputError(f"clip = {clip!r} is not a finite number > 0; give the public "
                                "range c of the token values, e.g. 2")
    if not (isinstance(reference, (int, float)) and math.isfinite(reference) and reference > 0):
        raise InvalidInputError(f"reference = {reference!r} is not a finite number > 0; give "
                                "the reference amplitude r, e.g. 80")
    n = x.shape[-1]
    tail = torch.zeros(*x.shape[:-1], n, dtype=x.dtype, device=x.device)
    tail[..., 0] = reference
    return torch.cat([x.clamp(-clip, clip), tail], dim=-1)
