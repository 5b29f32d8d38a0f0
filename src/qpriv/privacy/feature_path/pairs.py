"""The neighbouring pairs of the LDPT feature path, and what one shot of its channel releases.

What is released. Per token and per pass the feature path (LDPT section 5.3) releases the counts
of N_s shots of the SIC-POVM on the channel output E_p(rho), rho = |psi><psi| with psi the
amplitude-encoded token (eq. 2), plus the purity, which is the same for every pure input and so
carries nothing about the data. One shot is one use of the measured channel; its outcome k has
probability (:mod:`qpriv.quantum.features`)

    P_k = (1 - p) |<phi_k|psi>|^2 / D + p / D^2,

and the counts are a post-processing of N_s independent shots. The privacy loss of one token's
release is therefore the composition of N_s single-shot losses: not Theorem 1's eps_ch, and not
Theorem 2's bound, which shrinks as shots grow and so cannot hold.

Neighbourhood (the paper's, section 6.2): a changed record moves each token state it touches by
at most d in full trace norm, ``||rho - rho'||_1 = 2 sqrt(1 - |<psi|psi'>|^2) <= d``.

For one shot the largest log-likelihood ratio over all pairs is the closed-form D_max of
:func:`qpriv.audits.channel.worst_case_dmax` (data processing: a measured ratio cannot exceed
the quantum D_max), and :func:`sic_aligned_pair` attains it; the worst pair for many shots is
searched in :mod:`qpriv.privacy.feature_path.worst_pair`.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import scipy.linalg
import torch

from qpriv.errors import InvalidInputError, require_in_range
from qpriv.privacy.theorems import check_dim, check_trace_distance
from qpriv.quantum.features import outcome_probabilities
from qpriv.quantum.povm import sic_vectors


@functools.cache
def sic_matrix(dim: int) -> np.ndarray:
    """The SIC vectors as rows, complex128 (D^2, D), from the shipped fiducial."""
    return sic_vectors(dim).numpy()


def check_p(p: float) -> float:
    """``p`` if it is a depolarizing probability the rigorous accountant can take, in (0, 1).

    Raises:
        InvalidInputError: ``p`` outside (0, 1).
    """
    return require_in_range(
        "p (depolarizing probability)", p, low=0.0, high=1.0, high_inclusive=False,
        hint="rigorous accounting needs 0 < p < 1 (p = 0 gives outcomes of probability zero "
             "and infinite privacy loss; p = 1 releases nothing)",
    )


def single_shot_distribution(psi: np.ndarray, *, p: float) -> np.ndarray:
    """Outcome distribution of one SIC-POVM shot on E_p(|psi><psi|), float64 of shape (..., D^2).

    ``P_k = (1 - p) |<phi_k|psi>|^2 / D + p / D^2`` (LDPT eq. 3 with Theorem 1's depolarizing
    channel, section 5.3's SIC-POVM): the feature path's own
    :func:`qpriv.quantum.features.outcome_probabilities`, for numpy states held to unit norm
    within 1e-9.
    """
    psi = np.asarray(psi, dtype=np.complex128)
    check_dim(psi.shape[-1])
    norms = np.linalg.norm(psi, axis=-1)
    if psi.size and np.max(np.abs(norms - 1.0)) > 1e-9:
        raise InvalidInputError("psi must be a unit vector (amplitude-encode the window first)")
    return outcome_probabilities(torch.from_numpy(psi), p=p).numpy()


@dataclass(frozen=True, eq=False)
class NeighbourPair:
    """Two neighbouring pure states (unit vectors, complex128) and how they were found."""

    psi: np.ndarray
    psi_prime: np.ndarray
    source: str

    @property
    def trace_distance_full(self) -> float:
        """``||rho - rho'||_1 = 2 sqrt(1 - |<psi|psi'>|^2)``, in [0, 2]."""
        overlap = abs(np.vdot(self.psi, self.psi_prime)) ** 2
        return 2.0 * math.sqrt(max(0.0, 1.0 - overlap))

    def distributions(self, *, p: float) -> tuple[np.ndarray, np.ndarray]:
        """The single-shot outcome distributions (P, Q) of the two states under E_p and the SIC."""
        return (single_shot_distribution(self.psi, p=p),
                single_shot_distribution(self.psi_prime, p=p))


def sic_aligned_pair(*, p: float, d: float, dim: int) -> NeighbourPair:
    """The pair at distance d whose SIC outcome 0 attains the largest single-shot ratio.

    In the plane of a pair (psi = e1, psi' = c e1 + s e2, s = d/2) the channel outputs restrict to
    ``A = (1-p) e1 e1^T + (p/D) I`` and ``B = (1-p) psi' psi'^T + (p/D) I``; the top generalised
    eigenvector v of (A, B) is the measurement direction with the largest ratio
    ``<v|A|v> / <v|B|v> = exp(D_max)`` (:func:`qpriv.audits.channel.worst_case_dmax`). Rotating
    the plane so that v is the SIC vector phi_0 makes ``P_0 / Q_0`` equal to that maximum.
    """
    p, d, dim = check_p(p), check_trace_distance(d), check_dim(dim)
    s = d / 2.0
    c = math.sqrt(1.0 - s * s)
    q = p / dim
    a = np.array([[1.0 - p + q, 0.0], [0.0, q]])
    b = (1.0 - p) * np.outer([c, s], [c, s]) + q * np.eye(2)
    _, vectors = scipy.linalg.eigh(a, b)
    v = vectors[:, -1] / np.linalg.norm(vectors[:, -1])
    v_perp = np.array([-v[1], v[0]])
    phi = sic_matrix(dim)
    phi0 = phi[0]
    u = phi[1] - np.vdot(phi0, phi[1]) * phi0
    u /= np.linalg.norm(u)
    psi = v[0] * phi0 + v_perp[0] * u
    psi_prime = (c * v[0] + s * v[1]) * phi0 + (c * v_perp[0] + s * v_perp[1]) * u
    return NeighbourPair(psi, psi_prime, "SIC-aligned (closed-form single-shot maximum)")

