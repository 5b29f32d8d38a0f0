"""SIC-POVMs for D = 2, 4, 8, 16, 32 as Weyl-Heisenberg orbits of shipped fiducial vectors.

A SIC-POVM has D^2 rank-one elements M_k = |phi_k><phi_k| / D with equal overlaps
|<phi_j|phi_k>|^2 = 1 / (D + 1) for j != k. Here the phi_k are the orbit of one fiducial psi
under the Weyl-Heisenberg group of Z_D x Z_D:

    X|j> = |j + 1 mod D>,   Z|j> = w^j |j>,   w = exp(2 pi i / D),
    phi_k = X^a Z^b psi  with  k = a D + b  (a, b = 0 .. D-1).

For any fiducial the orbit is a tight frame, sum_k |phi_k><phi_k| = D I, so the M_k always sum
to the identity; the equal overlaps are what the fiducial has to achieve. No installed library
ships fiducials for D = 16 or 32, so they are found numerically by
``scripts/generate_sic_fiducials.py`` and stored, with the overlap error each achieves, in
``qpriv/quantum/data/sic_fiducials.json``. Every fiducial is verified again when it is first loaded.
"""

from __future__ import annotations

import functools
import json
import math
from importlib import resources

import torch
from torch import Tensor

from qpriv.errors import InvalidInputError
from qpriv.quantum.states import require_state_dimension

FIDUCIAL_RESOURCE = "data/sic_fiducials.json"
"""Path of the fiducial file inside the ``qpriv.quantum`` package."""

SIC_TOLERANCE = 1e-8
"""Largest accepted deviation of |<phi_j|phi_k>|^2 from 1/(D+1) (and of ||phi_k||^2 from 1)."""


def weyl_heisenberg_orbit(fiducial: Tensor) -> Tensor:
    """The D^2 vectors X^a Z^b psi of a fiducial psi (shape (D,)), as rows k = a D + b.

    Differentiable (used by the generating script). The fiducial is normalised first; the result
    is complex128 of shape (D * D, D).
    """
    if fiducial.ndim != 1:
        raise InvalidInputError(
            f"fiducial must be a vector of shape (D,), got {tuple(fiducial.shape)}"
        )
    dim = require_state_dimension(fiducial.shape[0], name="fiducial length")
    psi = fiducial.to(torch.complex128)
    psi = psi / torch.linalg.vector_norm(psi)
    j = torch.arange(dim, device=psi.device)
    # Z^b psi: row b, w^{b j} psi_j; the phase index b j mod D keeps the phases exact.
    angles = (2.0 * math.pi / dim) * ((j[:, None] * j[None, :]) % dim).to(torch.float64)
    phases = torch.polar(torch.ones_like(angles), angles)
    z_orbit = phases * psi[None, :]
    # X^a v: (X^a v)_j = v_{j - a mod D}.
    shift = (j[None, :] - j[:, None]) % dim  # [a, j]
    orbit = z_orbit[:, shift]  # [b, a, j]
    return orbit.permute(1, 0, 2).reshape(dim * dim, dim)


def sic_overlap_deviation(vectors: Tensor) -> float:
    """Largest deviation of a candidate SIC from the SIC conditions.

    The maximum over k of | ||phi_k||^2 - 1 | and over j != k of | |<phi_j|phi_k>|^2 - 1/(D+1) |,
    for ``vectors`` of shape (D * D, D).
    """
    if vectors.ndim != 2 or vectors.shape[0] != vectors.shape[1] ** 2:
        raise InvalidInputError(
            f"SIC vectors must have shape (D * D, D), got {tuple(vectors.shape)}"
        )
    dim = vectors.shape[1]
    v = vectors.to(torch.complex128)
    gram = (v.conj() @ v.transpose(0, 1)).abs().square()
    eye = torch.eye(dim * dim, dtype=torch.bool, device=v.device)
    norm_error = (gram.diagonal() - 1.0).abs().max()
    overlap_error = (gram[~eye] - 1.0 / (dim + 1)).abs().max()
    return float(torch.maximum(norm_error, overlap_error))


def verify_sic(vectors: Tensor, *, atol: float = SIC_TOLERANCE) -> float:
    """Check the SIC property of ``vectors`` (D * D, D); return the deviation or raise.

    Raises:
        InvalidInputError: the deviation of :func:`sic_overlap_deviation` exceeds ``atol``.
    """
    deviation = sic_overlap_deviation(vectors)
    if not deviation <= atol:
        raise InvalidInputError(
            f"not a SIC: max deviation of the overlaps from 1/(D+1) is {deviation:.3g}, "
            f"above the tolerance {atol:g}"
        )
    return deviation


@functools.lru_cache(maxsize=1)
def _fiducial_file() -> dict:
    text = resources.files("qpriv.quantum").joinpath(FIDUCIAL_RESOURCE).read_text()
    return json.loads(text)


def available_sic_dims() -> tuple[int, ...]:
    """The dimensions D for which a verified SIC fiducial is shipped (2, 4, 8, 16, 32; 32 is
    the five-qubit register of the signed encoding)."""
    return tuple(sorted(int(key) for key in _fiducial_file()["fiducials"]))


def _require_sic_dim(dim: int) -> int:
    valid = ", ".join(str(d) for d in available_sic_dims())
    try:
        dim = require_state_dimension(dim, name="dim")
    except InvalidInputError:
        raise InvalidInputError(
            f"dim = {dim!r} is not a power of two; SIC-POVMs are shipped for D in {{{valid}}}"
        ) from None
    if dim not in available_sic_dims():
        raise InvalidInputError(
            f"no SIC fiducial is shipped for dim = {dim}; valid dims are {{{valid}}} "
            "(scripts/generate_sic_fiducials.py can add others)"
        )
    return dim


@functools.cache
def _verified_vectors(dim: int) -> Tensor:
    entry = _fiducial_file()["fiducials"][str(dim)]
    fiducial = torch.complex(
        torch.tensor(entry["real"], dtype=torch.float64),
        torch.tensor(entry["imag"], dtype=torch.float64),
    )
    vectors = weyl_heisenberg_orbit(fiducial)
    verify_sic(vectors)
    return vectors


def sic_fiducial(dim: int) -> Tensor:
    """The shipped, normalised fiducial vector for dimension ``dim`` (complex128, shape (D,))."""
    return _verified_vectors(_require_sic_dim(dim))[0].clone()


def sic_vectors(dim: int) -> Tensor:
    """Normalised SIC vectors |phi_k>, k = a D + b, complex128 of shape (D * D, D).

    Raises:
        InvalidInputError: ``dim`` is not a power of two or has no shipped fiducial.
    """
    return _verified_vectors(_require_sic_dim(dim)).clone()


def sic_povm(dim: int) -> Tensor:
    """SIC-POVM elements M_k = |phi_k><phi_k| / D, complex128 of shape (D * D, D, D).

    They sum to the identity; outcome probabilities are p_k = tr(M_k rho) (LDPT section 5.3).
    """
    vectors = sic_vectors(dim)
    dim = vectors.shape[1]
    return vectors.unsqueeze(-1) * vectors.conj().unsqueeze(-2) / dim
