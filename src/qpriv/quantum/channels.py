"""The Lindblad depolarizing channel: Liouvillian from QuTiP, propagated by the matrix exponential.

Lindblad equation, LDPT eq. (3):

    d rho / dt = -i [H, rho] + sum_k ( L_k rho L_k^+ - 1/2 {L_k^+ L_k, rho} ).

With the D^2 jump operators L_ij = sqrt(gamma / D) |i><j| (i, j = 0 .. D-1):

    sum_ij L_ij rho L_ij^+   = (gamma / D) sum_ij |i><j| rho |j><i| = gamma tr(rho) I / D,
    sum_ij L_ij^+ L_ij       = (gamma / D) sum_ij |j><j| = gamma I,

so the dissipator is exactly L(rho) = gamma (tr(rho) I / D - rho). Its solution, LDPT eq. (10),
vec(rho(t)) = e^{L t} vec(rho(0)), is

    rho(t) = e^{-gamma t} rho + (1 - e^{-gamma t}) tr(rho) I / D,

the depolarizing channel E_p of Theorem 1 with p = 1 - e^{-gamma t}
(:func:`depolarizing_p_from_rate`).
An optional data-independent Hamiltonian H adds -i[H, rho]; because the dissipator commutes with
every unitary conjugation, e^{L t} is then rho -> E_p(U rho U^+) with U = e^{-i H t}: the same
depolarizing strength after a fixed unitary.

Vectorisation convention: QuTiP stacks columns, vec(rho)[i + D j] = rho[i, j];
:func:`apply_superoperator` follows it.
"""

from __future__ import annotations

import functools
import math
import operator

import numpy as np
import qutip
import torch
from torch import Tensor

from qpriv.errors import InvalidInputError, require_in_range
from qpriv.quantum.states import require_state_dimension

MAX_PROPAGATOR_QUBITS = 5
"""The superoperator is D^2 x D^2 (a 1024 x 1024 matrix exponential at n = 5); beyond that the
dense propagator is impractical and the closed form :func:`depolarize` should be used."""


def _require_n_qubits(n_qubits: int) -> int:
    if isinstance(n_qubits, bool):
        raise InvalidInputError(f"n_qubits must be an integer, got {n_qubits!r}")
    try:
        n = operator.index(n_qubits)
    except TypeError:
        raise InvalidInputError(f"n_qubits must be an integer, got {n_qubits!r}") from None
    if not 1 <= n <= MAX_PROPAGATOR_QUBITS:
        raise InvalidInputError(
            f"n_qubits = {n} is outside the valid range [1, {MAX_PROPAGATOR_QUBITS}] "
            "for a dense Lindblad propagator"
        )
    return n


def depolarizing_p_from_rate(gamma: float, t: float = 1.0) -> float:
    """Depolarizing probability p = 1 - e^{-gamma t} reached by the Lindblad channel at time t.

    The inverse of LDPT eq. (7); gamma >= 0 and t >= 0.
    """
    gamma = require_in_range("gamma", gamma, low=0.0, low_inclusive=True, high=None)
    t = require_in_range("t", t, low=0.0, low_inclusive=True, high=None)
    return -math.expm1(-gamma * t)


def depolarizing_rate(p: float, *, t: float = 1.0) -> float:
    """Lindblad rate gamma = -ln(1 - p) / t that depolarizes with probability p at time t (eq. 7).

    p must lie in [0, 1): full depolarization (p = 1) needs an infinite rate.
    """
    p = require_in_range(
        "p", p, low=0.0, low_inclusive=True, high=1.0, high_inclusive=False,
        hint="p = 1 (full depolarization) needs an infinite Lindblad rate",
    )
    t = require_in_range("t", t, low=0.0, high=None)
    return -math.log1p(-p) / t


def depolarizing_collapse_operators(n_qubits: int, *, gamma: float) -> list[qutip.Qobj]:
    """The D^2 collapse operators sqrt(gamma / D) |i><j| whose Lindbladian is the depolarizer."""
    n = _require_n_qubits(n_qubits)
    gamma = require_in_range("gamma", gamma, low=0.0, low_inclusive=True, high=None)
    dim = 2**n
    scale = math.sqrt(gamma / dim)
    return [
        scale * qutip.basis(dim, i) * qutip.basis(dim, j).dag()
        for i in range(dim)
        for j in range(dim)
    ]


def _hamiltonian_array(hamiltonian: object, dim: int) -> np.ndarray:
    if isinstance(hamiltonian, qutip.Qobj):
        array = hamiltonian.full()
    elif isinstance(hamiltonian, Tensor):
        array = hamiltonian.detach().cpu().numpy()
    else:
        array = np.asarray(hamiltonian)
    array = np.asarray(array, dtype=np.complex128)
    if array.shape != (dim, dim):
        raise InvalidInputError(
            f"hamiltonian has shape {array.shape}; {int(math.log2(dim))} qubits need ({dim}, {dim})"
        )
    if not np.all(np.isfinite(array)):
        raise InvalidInputError("hamiltonian contains NaN or inf")
    asymmetry = float(np.abs(array - array.conj().T).max())
    if asymmetry > 1e-10 * max(1.0, float(np.abs(array).max())):
        raise InvalidInputError(
            f"hamiltonian must be Hermitian; max |H - H^+| = {asymmetry:.3g}"
        )
    return array


def depolarizing_liouvillian(
    n_qubits: int, *, gamma: float, hamiltonian: object = None
) -> qutip.Qobj:
    """Liouvillian superoperator (QuTiP, column stacking) of the depolarizing Lindblad equation.

    ``qutip.liouvillian(H, c_ops)`` with the collapse operators of
    :func:`depolarizing_collapse_operators` and an optional Hermitian, data-independent
    Hamiltonian (a D x D array, tensor or Qobj; default none).
    """
    n = _require_n_qubits(n_qubits)
    dim = 2**n
    c_ops = depolarizing_collapse_operators(n, gamma=gamma)
    h = None if hamiltonian is None else qutip.Qobj(_hamiltonian_array(hamiltonian, dim))
    return qutip.liouvillian(h, c_ops)


@functools.lru_cache(maxsize=32)
def _cached_propagator(
    n_qubits: int, gamma: float, t: float, hamiltonian_key: tuple[complex, ...] | None
) -> Tensor:
    dim = 2**n_qubits
    hamiltonian = (
        None
        if hamiltonian_key is None
        else np.array(hamiltonian_key, dtype=np.complex128).reshape(dim, dim)
    )
    liouvillian = depolarizing_liouvillian(n_qubits, gamma=gamma, hamiltonian=hamiltonian)
    generator = torch.from_numpy(np.ascontiguousarray(liouvillian.full())) * t
    return torch.linalg.matrix_exp(generator)


def depolarizing_propagator(
    n_qubits: int, *, gamma: float, t: float = 1.0, hamiltonian: object = None
) -> Tensor:
    """Superoperator E = e^{L t} of the depolarizing Lindblad channel, eqs. (3) and (10).

    The Liouvillian comes from :func:`depolarizing_liouvillian` (QuTiP) and is exponentiated with
    ``torch.linalg.matrix_exp``. The result is cached per (n_qubits, gamma, t, H), so repeated
    calls cost one copy of the D^2 x D^2 matrix.

    Args:
        n_qubits: number of qubits n, D = 2^n, in [1, 5].
        gamma: Lindblad rate >= 0; gamma = -ln(1 - p) / t gives depolarizing probability p.
        t: evolution time >= 0 (the paper uses t = 1).
        hamiltonian: optional data-independent Hermitian D x D Hamiltonian (default none).

    Returns:
        complex128 tensor of shape (D^2, D^2) acting on column-stacked vec(rho); apply it with
        :func:`apply_superoperator`.
    """
    n = _require_n_qubits(n_qubits)
    gamma = require_in_range("gamma", gamma, low=0.0, low_inclusive=True, high=None)
    t = require_in_range("t", t, low=0.0, low_inclusive=True, high=None)
    key = None
    if hamiltonian is not None:
        key = tuple(_hamiltonian_array(hamiltonian, 2**n).ravel().tolist())
    return _cached_propagator(n, gamma, t, key).clone()


def apply_superoperator(superop: Tensor, rho: Tensor) -> Tensor:
    """Apply a D^2 x D^2 superoperator (QuTiP's column-stacking convention) to rho (..., D, D).

    vec(rho)[i + D j] = rho[i, j]; the result is reshaped back the same way. complex128.
    """
    if rho.ndim < 2 or rho.shape[-1] != rho.shape[-2]:
        raise InvalidInputError(f"rho must have shape (..., D, D), got {tuple(rho.shape)}")
    dim = rho.shape[-1]
    if tuple(superop.shape) != (dim * dim, dim * dim):
        raise InvalidInputError(
            f"superoperator has shape {tuple(superop.shape)}; rho of size {dim} x {dim} needs "
            f"({dim * dim}, {dim * dim})"
        )
    rho = rho.to(torch.complex128)
    vec = rho.transpose(-2, -1).reshape(*rho.shape[:-2], dim * dim)
    out = vec @ superop.to(device=rho.device, dtype=torch.complex128).transpose(0, 1)
    return out.reshape(*rho.shape[:-2], dim, dim).transpose(-2, -1)


def depolarize(rho: Tensor, p: float) -> Tensor:
    """Closed form of the depolarizing channel, Theorem 1: E_p(rho) = (1 - p) rho + p tr(rho) I / D.

    For density matrices tr(rho) = 1 and this is the paper's (1 - p) rho + p I / D; keeping
    tr(rho) makes it the same linear map as :func:`depolarizing_propagator` on any matrix.
    p in [0, 1]; rho of shape (..., D, D); complex128.
    """
    p = require_in_range("p", p, low=0.0, low_inclusive=True, high=1.0)
    if rho.ndim < 2 or rho.shape[-1] != rho.shape[-2]:
        raise InvalidInputError(f"rho must have shape (..., D, D), got {tuple(rho.shape)}")
    rho = rho.to(torch.complex128)
    dim = rho.shape[-1]
    trace = torch.diagonal(rho, dim1=-2, dim2=-1).sum(-1)
    identity = torch.eye(dim, dtype=rho.dtype, device=rho.device)
    return (1.0 - p) * rho + (p / dim) * trace[..., None, None] * identity


def depolarized_pure_purity(p: float, *, dim: int) -> float:
    """tr(E_p(|psi><psi|)^2) = (1 - p)^2 + (1 - (1 - p)^2) / D, the same for every pure psi."""
    p = require_in_range("p", p, low=0.0, low_inclusive=True, high=1.0)
    require_state_dimension(dim, name="dim")
    keep = (1.0 - p) ** 2
    return keep + (1.0 - keep) / dim


def depolarized_pure_fidelity(p: float, *, dim: int) -> float:
    """<psi|E_p(|psi><psi|)|psi> = 1 - p + p / D, the same for every pure psi (the true value;
    the fidelities printed in the LDPT paper's Table 7 are not this channel's)."""
    p = require_in_range("p", p, low=0.0, low_inclusive=True, high=1.0)
    require_state_dimension(dim, name="dim")
    return 1.0 - p + p / dim
