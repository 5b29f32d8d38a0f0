"""The search for the worst neighbouring pair of the LDPT feature path's composed release.

For one shot the worst pair has a closed form
(:func:`qpriv.privacy.feature_path.pairs.sic_aligned_pair`). For many shots no closed form is
known: the SIC is a 2-design, so the chi^2 distance of every pair at distance d is nearly the
same, and pairs differ by a few per cent in the composed eps. :func:`search_worst_pairs`
maximises the RDP bound of the unit's composition over pure pairs at distance exactly d (random
restarts and L-BFGS, plus the SIC-aligned pair); the tests check that random pairs, at distance
d or below, never exceed what it finds. It is a search, not a certificate.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.optimize
import torch

from qpriv.errors import require_positive_int, require_seed
from qpriv.privacy.budget import FEATURE_PATH_DELTA
from qpriv.privacy.calibration import DEFAULT_D, DEFAULT_DIM
from qpriv.privacy.feature_path.divergences import (
    RDP_ORDERS,
    check_delta,
    rdp_epsilon,
    renyi_divergences,
)
from qpriv.privacy.feature_path.pairs import NeighbourPair, check_p, sic_aligned_pair, sic_matrix
from qpriv.privacy.theorems import check_dim, check_trace_distance
from qpriv.threads import one_torch_thread

DEFAULT_RESTARTS = 4


def _torch_pair(x: torch.Tensor, dim: int, d: float) -> tuple[torch.Tensor, torch.Tensor]:
    psi = torch.complex(x[:dim], x[dim:2 * dim])
    psi = psi / torch.linalg.vector_norm(psi)
    chi = torch.complex(x[2 * dim:3 * dim], x[3 * dim:])
    chi = chi - (psi.conj() @ chi) * psi
    chi = chi / torch.linalg.vector_norm(chi)
    s = d / 2.0
    return psi, math.sqrt(1.0 - s * s) * psi + s * chi


def _torch_rdp_epsilon(P: torch.Tensor, Q: torch.Tensor, *, count: int, delta: float,
                       orders: torch.Tensor) -> torch.Tensor:
    """Differentiable twin of :func:`~qpriv.privacy.feature_path.divergences.renyi_divergences`
    + :func:`~qpriv.privacy.feature_path.divergences.rdp_epsilon` (the same conversion as
    dp-accounting's ``compute_epsilon``), the objective of the search."""
    losses = P.log() - Q.log()
    a = orders[:, None]
    sums = []
    for base, signed in ((Q, losses), (P, -losses)):
        scaled = a * signed[None, :]
        safe = scaled.abs().amax(dim=1) < 700.0
        small = torch.log1p((base * torch.expm1(scaled.clamp(max=700.0))).sum(dim=1))
        large = torch.logsumexp(scaled + base.log()[None, :], dim=1)
        sums.append(torch.where(safe, small, large))
    rdp = count * torch.maximum(sums[0], sums[1]) / (orders - 1.0)
    eps = rdp + torch.log1p(-1.0 / orders) - torch.log(delta * orders) / (orders - 1.0)
    return eps.min()


def _pair_parameters(pair: NeighbourPair) -> np.ndarray:
    chi = pair.psi_prime - np.vdot(pair.psi, pair.psi_prime) * pair.psi
    return np.concatenate([pair.psi.real, pair.psi.imag, chi.real, chi.imag])


def search_worst_pairs(
    *, p: float, d: float = DEFAULT_D, dim: int = DEFAULT_DIM, count: int,
    delta: float = FEATURE_PATH_DELTA, restarts: int = DEFAULT_RESTARTS, seed: int = 0,
) -> list[NeighbourPair]:
    """Candidate worst-case pairs at distance exactly d for ``count`` composed shots.

    The SIC-aligned pair, then L-BFGS maximisations of the RDP bound of ``count`` compositions
    at ``delta`` (autograd through the pair's outcome distributions): one started from the
    aligned pair and ``restarts`` from random pairs. Sorted by that bound, the largest first.
    """
    p, d, dim = check_p(p), check_trace_distance(d), check_dim(dim)
    count = require_positive_int("count", count)
    restarts = require_positive_int("restarts", restarts)
    delta = check_delta(delta)
    phi = torch.from_numpy(sic_matrix(dim))
    orders = torch.from_numpy(RDP_ORDERS)
    aligned = sic_aligned_pair(p=p, d=d, dim=dim)

    def objective(x: torch.Tensor) -> torch.Tensor:
        states = torch.stack(_torch_pair(x, dim, d))
        probs = (1.0 - p) * (states @ phi.conj().T).abs().square() / dim + p / dim**2
        return _torch_rdp_epsilon(probs[0], probs[1], count=count, delta=delta, orders=orders)

    def value_and_grad(x: np.ndarray, scale: float) -> tuple[float, np.ndarray]:
        xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
        value = objective(xt)
        value.backward()
        return -float(value.detach()) / scale, -xt.grad.numpy() / scale

    rng = np.random.default_rng(require_seed("seed", seed))
    starts = [("local search from the SIC-aligned pair", _pair_parameters(aligned))]
    starts += [(f"local search from random pair {i}", rng.standard_normal(4 * dim))
               for i in range(restarts)]
    candidates = [aligned]
    with one_torch_thread():
        with torch.no_grad():
            scale = max(abs(float(objective(torch.from_numpy(starts[0][1])))), 1e-12)
        for source, x0 in starts:
            result = scipy.optimize.minimize(
                value_and_grad, x0, args=(scale,), jac=True, method="L-BFGS-B",
                options={"maxiter": 400},
            )
            with torch.no_grad():
                psi, psi_prime = _torch_pair(torch.from_numpy(result.x), dim, d)
            candidates.append(NeighbourPair(psi.numpy(), psi_prime.numpy(), source))
    scores = [rdp_epsilon(renyi_divergences(*pair.distributions(p=p)), count=count, delta=delta)
              for pair in candidates]
    return [candidates[i] for i in np.argsort(scores)[::-1]]

