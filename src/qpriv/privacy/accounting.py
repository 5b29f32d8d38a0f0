"""``rigorous`` accounting of the LDPT feature path, beside the ``paper`` accounting and never
mixed with it.

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

Worst case. For one shot the largest log-likelihood ratio over all pairs is the closed-form D_max
of :func:`qpriv.audits.channel.worst_case_dmax` (data processing: a measured ratio cannot exceed
the quantum D_max), and :func:`sic_aligned_pair` attains it. For many shots no closed form is
known: the SIC is a 2-design, so the chi^2 distance of every pair at distance d is nearly the
same, and pairs differ by a few per cent in the composed eps. :func:`search_worst_pairs` maximises
the RDP bound of the unit's composition over pure pairs at distance exactly d (random restarts and
L-BFGS, plus the SIC-aligned pair); the tests check that random pairs, at distance d or below,
never exceed what it finds.

Composition. The pair's exact single-shot distributions are turned into a privacy-loss
distribution with dp-accounting's pessimistic connect-the-dots discretisation (a dominating pair:
merging its grid outcomes gives back the exact pair, so every eps it reports is an upper bound;
dp-accounting's own ``from_two_probability_mass_functions`` rounds every loss up to the grid,
which adds one grid step per composed shot, too much for 27 million shots). The unit's count is
composed in stages (shots, then tokens, then epochs) with dp-accounting's FFT self-composition.
The cross-check is the exact Renyi divergence of the discrete pair, composed additively and
converted with dp-accounting's RDP conversion (always at or above the PLD value).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import scipy.linalg
import scipy.optimize
import torch
from dp_accounting.pld.privacy_loss_distribution import PrivacyLossDistribution
from dp_accounting.rdp.rdp_privacy_accountant import compute_epsilon
from scipy.special import logsumexp

from qpriv.errors import (
    ArgumentError,
    InvalidInputError,
    require_in_range,
    require_positive_int,
    require_seed,
)
from qpriv.privacy.budget import FEATURE_PATH_DELTA
from qpriv.privacy.calibration import (
    DEFAULT_ALPHA,
    DEFAULT_D,
    DEFAULT_D_MODEL,
    DEFAULT_DIM,
    DEFAULT_T,
    calibrate,
    injection_sigma,
    lindblad_gamma,
)
from qpriv.privacy.claims import (
    COVERS_FEATURES_OVER_TRAINING,
    COVERS_FEATURES_PER_PASS,
    COVERS_FEATURES_WINDOW_PASS,
    Accounting,
    Kind,
    PrivacyClaim,
    Unit,
)
from qpriv.privacy.composition import advanced_composition, basic_composition
from qpriv.privacy.theorems import channel_epsilon, check_dim, check_trace_distance
from qpriv.progress import work_bar
from qpriv.quantum.features import outcome_probabilities
from qpriv.quantum.povm import sic_vectors
from qpriv.quantum.tokens import n_tokens
from qpriv.threads import torch_threads

DEFAULT_SHOTS = 1024
DEFAULT_STRIDE = 4
DEFAULT_SEQ_LEN = 336
DEFAULT_EPOCHS = 20
DEFAULT_RESTARTS = 4

UNITS = ("token", "token-training", "window", "record")
CLAIM_UNITS = {"token": Unit.TOKEN, "token-training": Unit.TOKEN, "window": Unit.WINDOW,
               "record": Unit.RECORD}
"""The privacy unit of each composition scope (one token state is the unit of both ``token``
and ``token-training``: they differ in how many of its releases are composed)."""
"""Units of privacy, from the paper's (one token state, one pass) to one record over training."""

UNIT_DESCRIPTIONS = {
    "token": "one token state, one pass (the paper's unit)",
    "token-training": "one token state, every epoch of training",
    "window": "one window, one pass (its tokens that hold a changed time step)",
    "record": "one time step of one channel, whole training (every window and token holding "
              "it, every epoch)",
}

WORST_PAIR_NOTE = (
    "the worst neighbouring pair is found by numerical search (random restarts, L-BFGS and the "
    "SIC-aligned pair) and composed for every measurement; it is not certified: a pair it does "
    "not dominate would make the true eps larger (a certified bound, from the sandwiched Renyi "
    "divergence, is about an order of magnitude looser)")
WINDOW_SCOPE_NOTE = (
    "window here is one changed time step composed over the tokens of one window that hold it, "
    "on one pass: not the add-or-remove-a-window unit of DP-SGD")


def rigorous_notes(unit: str, *, d: float) -> tuple[str, ...]:
    """What every rigorous feature-path claim of ``unit`` rests on: the neighbouring trace
    distance d, the numerically found worst pair, and (window) what the unit composes."""
    notes = (f"neighbours: token states within full trace distance d = {d:.6g}; whether one "
             "changed record stays within d depends on the encoding (see the claim's other "
             "notes and the assumptions)", WORST_PAIR_NOTE)
    return (*notes, WINDOW_SCOPE_NOTE) if unit == "window" else notes


RDP_ORDERS = 1.0 + np.geomspace(1e-2, 1e4, 161)
"""Renyi orders of the RDP cross-check (dp-accounting's conversion needs orders above 1.01)."""

TAIL_MASS_TRUNCATION = 1e-15
"""Mass cut from the PLD's tails at each composition stage (added to the infinite loss)."""

GRID_POINTS = 1 << 21
"""Target size of the composed PLD grid; the discretisation interval is chosen from it."""

COARSE_GRID_POINTS = 1 << 19
"""Grid size used inside the inverse calibration's bisection (pessimistic, so still an upper
bound; the final answer is evaluated on :data:`GRID_POINTS`)."""

ASSUMPTIONS = (
    "neighbourhood: the paper's bounded trace distance; a changed record moves every token "
    "state it touches by at most d (full trace norm) and no other token state. Real changes can "
    "exceed d (Table 2), and RevIN's per-window statistics move every token of the window",
    "worst case: the pure-state pair at distance exactly d found by numerical search (random "
    "restarts and L-BFGS on the unit's RDP bound, plus the SIC-aligned pair that attains the "
    "closed-form single-shot maximum); the same pair is assumed for every composed measurement "
    "(the RDP column takes the per-order maximum over all candidate pairs, which also covers "
    "mixtures of them). Tests check that random pairs never exceed it; it is not a certificate",
    "shots: each of the N_s shots is an independent SIC-POVM measurement of a fresh copy of "
    "E_p(rho), drawn afresh on every pass; the released counts are a post-processing of them",
    "no subsampling amplification: every training window is used in every epoch (shuffled "
    "batches, not Poisson sampling)",
    "purity: computed exactly and the same for every pure input, so data independent (free)",
    "injection noise (sigma, three points): no credit is taken; it is post-processing of the "
    "features and could only help, but it is not accounted as a privacy mechanism",
    "not covered: RevIN's per-window mean and std (a side channel), the forecast "
    "targets (they reach the loss without the channel), the classical path when gate < 1; so "
    "the trained weights are not covered, only the released quantum features",
    "counting: a window holds a changed time step in up to ceil(D/s) tokens; over the L windows "
    "that contain an interior time step it sits at every relative position once, so it is in "
    "n_tokens * D token states per epoch (fewer near the ends of the series). Validation "
    "windows read the last L training rows again, but such a row lies in fewer training "
    "windows: its training and validation windows number at most L - H + 1 together, so the "
    "interior record's count bounds it too",
    "accountant: dp-accounting PLD of the exact single-shot outcome distributions, pessimistic "
    "connect-the-dots discretisation, staged FFT self-composition; delta is per unit, not per "
    "dataset, and eps is the privacy loss in natural-log units",
)


@contextlib.contextmanager
def one_torch_thread() -> Iterator[None]:
    """Run torch on one thread inside the block, then restore the caller's setting.

    The search and the game work on tensors of a few hundred numbers; on a shared CPU, torch's
    thread hand-offs make such work tens of times slower than one thread.
    """
    with torch_threads(1):
        yield


# --- what one shot releases -----------------------------------------------------------------

@functools.cache
def _sic_matrix(dim: int) -> np.ndarray:
    """The SIC vectors as rows, complex128 (D^2, D), from the shipped fiducial."""
    return sic_vectors(dim).numpy()


def _require_p(p: float) -> float:
    return require_in_range(
        "p (depolarizing probability)", p, low=0.0, high=1.0, high_inclusive=False,
        hint="rigorous accounting needs 0 < p < 1 (p = 0 gives outcomes of probability zero "
             "and infinite privacy loss; p = 1 releases nothing)",
    )


def _require_delta(delta: float) -> float:
    return require_in_range(
        "delta", delta, low=0.0, high=1.0, high_inclusive=False,
        hint="delta is a probability in (0, 1), typically 1e-5",
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
    p, d, dim = _require_p(p), check_trace_distance(d), check_dim(dim)
    s = d / 2.0
    c = math.sqrt(1.0 - s * s)
    q = p / dim
    a = np.array([[1.0 - p + q, 0.0], [0.0, q]])
    b = (1.0 - p) * np.outer([c, s], [c, s]) + q * np.eye(2)
    _, vectors = scipy.linalg.eigh(a, b)
    v = vectors[:, -1] / np.linalg.norm(vectors[:, -1])
    v_perp = np.array([-v[1], v[0]])
    phi = _sic_matrix(dim)
    phi0 = phi[0]
    u = phi[1] - np.vdot(phi0, phi[1]) * phi0
    u /= np.linalg.norm(u)
    psi = v[0] * phi0 + v_perp[0] * u
    psi_prime = (c * v[0] + s * v[1]) * phi0 + (c * v_perp[0] + s * v_perp[1]) * u
    return NeighbourPair(psi, psi_prime, "SIC-aligned (closed-form single-shot maximum)")


# --- composition plans ------------------------------------------------------------------------

def tokens_per_window(*, dim: int, stride: int, seq_len: int) -> int:
    """The most tokens of one window that hold the same time step (``ceil(D/s)`` inside)."""
    starts = np.arange(n_tokens(dim=dim, stride=stride, seq_len=seq_len)) * stride
    positions = np.arange(seq_len)[:, None]
    held = (positions >= starts[None, :]) & (positions < starts[None, :] + dim)
    return int(held.sum(axis=1).max())


MAX_COMPOSITIONS = 10**11
"""The most single-shot measurements one unit may compose (memory: about 5 GB at 2.6e10)."""


@dataclass(frozen=True)
class CompositionPlan:
    """How many single-shot measurements a unit's release is, as staged factors."""

    unit: str
    description: str
    factors: tuple[tuple[str, int], ...]

    @property
    def count(self) -> int:
        """The total number of composed single-shot measurements."""
        return math.prod(n for _, n in self.factors)


def composition_plan(
    unit: str, *, n_shots: int = DEFAULT_SHOTS, dim: int = DEFAULT_DIM,
    stride: int = DEFAULT_STRIDE, seq_len: int = DEFAULT_SEQ_LEN, epochs: int = DEFAULT_EPOCHS,
    token_length: int | None = None,
) -> CompositionPlan:
    """The composition count of a unit of privacy (see :data:`UNIT_DESCRIPTIONS`).

    token: N_s shots; token-training: N_s x epochs; window: N_s x (tokens of one window holding a
    changed time step, ``ceil(D/s)`` = 4 at D = 16, s = 4); record: N_s x (n_tokens x D token
    states holding the time step over the L windows that contain it: 81 x 16 = 1296, at most
    L ceil(D/s) = 1344) x epochs. The token length is ``token_length`` (default ``dim``: eq. 2
    encodes a token of D values in D amplitudes; the signed encoding puts a token of 16 values
    in 32 amplitudes, so there ``dim`` = 32 and ``token_length`` = 16).
    """
    if unit not in UNITS:
        raise InvalidInputError(f"unit = {unit!r} is not one of {', '.join(UNITS)}")
    n_shots = require_positive_int("n_shots", n_shots)
    dim = check_dim(dim)
    length = dim if token_length is None else require_positive_int("token_length", token_length)
    stride = require_positive_int("stride", stride)
    seq_len = require_positive_int("seq_len", seq_len)
    epochs = require_positive_int("epochs", epochs)
    shots = ("shots per token state", n_shots)
    factors: tuple[tuple[str, int], ...]
    if unit == "token":
        factors = (shots,)
    elif unit == "token-training":
        factors = (shots, ("epochs", epochs))
    elif unit == "window":
        factors = (shots, ("token states of the window holding the time step",
                           tokens_per_window(dim=length, stride=stride, seq_len=seq_len)))
    else:
        held = n_tokens(dim=length, stride=stride, seq_len=seq_len) * length
        factors = (shots, ("token states holding the time step, over its windows", held),
                   ("epochs", epochs))
    plan = CompositionPlan(unit, UNIT_DESCRIPTIONS[unit], factors)
    if plan.count > MAX_COMPOSITIONS:
        raise InvalidInputError(
            f"the {unit} unit composes {plan.count:.3g} single-shot measurements, more than the "
            f"accountant holds ({MAX_COMPOSITIONS:.0e}; its memory grows with the count: 2.6e10 "
            "takes about 5 GB and 3 minutes); use fewer shots or epochs"
        )
    return plan


# --- exact quantities of a discrete pair --------------------------------------------------------

def privacy_losses(P: np.ndarray, Q: np.ndarray) -> np.ndarray:
    """The single-shot privacy losses ``ln(P_k / Q_k)``."""
    return np.log(P) - np.log(Q)


def renyi_divergences(P: np.ndarray, Q: np.ndarray,
                      orders: np.ndarray = RDP_ORDERS) -> np.ndarray:
    """Exact Renyi divergences ``ln(sum_k P_k^a Q_k^(1-a)) / (a - 1)``, max of both directions.

    Written here because no library computes the RDP of an arbitrary discrete pair
    (dp-accounting and Opacus ship it for their own mechanisms only). With L = ln(P/Q) the sum
    is ``sum_k Q_k e^(a L_k) = 1 + sum_k Q_k expm1(a L_k)``, evaluated with log1p (accurate when
    the pair is nearly equal, as at high noise) unless a L is large enough to overflow.
    """
    losses = privacy_losses(P, Q)
    a = np.asarray(orders, dtype=float)[:, None]
    out = []
    for base, signed in ((Q, losses), (P, -losses)):
        scaled = a * signed[None, :]
        safe = np.abs(scaled).max(axis=1) < 700.0
        small = np.log1p(np.sum(base * np.expm1(np.minimum(scaled, 700.0)), axis=1))
        large = logsumexp(scaled + np.log(base)[None, :], axis=1)
        out.append(np.where(safe, small, large))
    return np.maximum(np.maximum(out[0], out[1]) / (a[:, 0] - 1.0), 0.0)


def rdp_epsilon(rdp: np.ndarray, *, count: int, delta: float,
                orders: np.ndarray = RDP_ORDERS) -> float:
    """eps at delta of ``count`` compositions of a mechanism with Renyi curve ``rdp``, converted
    with dp-accounting's RDP-to-(eps, delta) conversion."""
    eps, _ = compute_epsilon(list(orders), list(count * np.asarray(rdp)), delta)
    return float(eps)


# --- privacy-loss distributions ---------------------------------------------------------------

def choose_discretization(P: np.ndarray, Q: np.ndarray, count: int, *,
                          grid_points: int = GRID_POINTS) -> float:
    """The PLD grid step for ``count`` compositions of the pair.

    Splitting a loss between two grid points adds at most step^2 / 4 to its variance, so the
    composed loss's variance grows by the factor ``1 + step^2 / (4 Var)`` whatever the count:
    the step aims at 1/32 of the single-shot loss's standard deviation (0.02 % more variance),
    but is never finer than the composed loss's spread (``count KL + 12 sqrt(count Var)``) over
    ``grid_points``, nor than 1/8192 of the single-shot loss range. Any step gives an upper bound
    (connect-the-dots is pessimistic); a coarser one only gives a larger eps.
    """
    losses = privacy_losses(P, Q)
    span = float(losses.max() - losses.min())
    if span == 0.0:
        return 1e-4
    mean = max(float(np.sum(P * losses)), float(np.sum(-Q * losses)))
    var = max(float(np.sum(P * losses**2)) - float(np.sum(P * losses)) ** 2,
              float(np.sum(Q * losses**2)) - float(np.sum(Q * losses)) ** 2, 0.0)
    width = count * mean + 12.0 * math.sqrt(count * var) + span
    return max(min(math.sqrt(var) / 32.0, span / 64.0), width / grid_points, span / 8192.0)


def connect_dots_masses(P: np.ndarray, Q: np.ndarray, step: float) -> dict[int, float]:
    """Pessimistic connect-the-dots PMF of the loss ln(P/Q) under P on the grid ``step * i``.

    Each outcome's mass w = P_k at loss l in [a, b] (adjacent grid points) is split into
    ``w expm1(b - l) / expm1(b - a)`` at a and the rest at b. This keeps the mass under Q
    (``w e^-l``) and the hockey-stick divergence at every grid point exactly, and merging the two
    grid outcomes gives back the original one, so the grid pair dominates the exact pair
    (Doroshenko et al. 2022, Algorithm 1). dp-accounting implements the same PMF
    (``pld_pmf.create_pmf_pessimistic_connect_dots``) from differences of hockey-stick values;
    at the fine grids that 27 million compositions need those differences lose all precision
    (the composed eps then drifts upwards), so the split is written here per outcome.
    """
    losses = privacy_losses(P, Q)
    lower = np.floor(losses / step)
    fraction = np.expm1((lower + 1) * step - losses) / math.expm1(step)
    at_lower = P * np.clip(fraction, 0.0, 1.0)
    first = int(lower.min())
    index = (lower - first).astype(np.int64)
    masses = (np.bincount(index, weights=at_lower, minlength=index.max() + 2)
              + np.bincount(index + 1, weights=P - at_lower, minlength=index.max() + 2))
    return {first + i: float(m) for i, m in enumerate(masses) if m > 0.0}


def pld_from_pair(P: np.ndarray, Q: np.ndarray, *, step: float) -> PrivacyLossDistribution:
    """The single-shot PLD of the pair, both directions (remove: P over Q; add: Q over P),
    discretised by :func:`connect_dots_masses` (no outcome has zero probability for p > 0, so
    there is no infinite loss)."""
    return PrivacyLossDistribution.create_from_rounded_probability(
        connect_dots_masses(P, Q, step), 0.0, step, pessimistic_estimate=True,
        rounded_probability_mass_function_add=connect_dots_masses(Q, P, step),
        infinity_mass_add=0.0, symmetric=False,
    )


def compose_staged(pld: PrivacyLossDistribution,
                   factors: Sequence[tuple[str, int]]) -> PrivacyLossDistribution:
    """Self-compose stage by stage (shots, tokens, epochs): each FFT stage's Chernoff truncation
    bounds then fit the stage, so 27 million compositions take seconds."""
    for _, times in factors:
        if times > 1:
            pld = pld.self_compose(times, tail_mass_truncation=TAIL_MASS_TRUNCATION)
    return pld


def pld_epsilon(P: np.ndarray, Q: np.ndarray, *, factors: Sequence[tuple[str, int]],
                delta: float, grid_points: int = GRID_POINTS) -> tuple[float, float]:
    """eps at delta of the pair composed ``prod(factors)`` times; returns (eps, grid step)."""
    count = math.prod(n for _, n in factors)
    step = choose_discretization(P, Q, count, grid_points=grid_points)
    composed = compose_staged(pld_from_pair(P, Q, step=step), factors)
    return float(composed.get_epsilon_for_delta(delta)), step


# --- worst-case search ------------------------------------------------------------------------

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
    """Differentiable twin of :func:`renyi_divergences` + :func:`rdp_epsilon` (the same
    conversion as dp-accounting's ``compute_epsilon``), the objective of the search."""
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
    p, d, dim = _require_p(p), check_trace_distance(d), check_dim(dim)
    count = require_positive_int("count", count)
    restarts = require_positive_int("restarts", restarts)
    delta = _require_delta(delta)
    phi = torch.from_numpy(_sic_matrix(dim))
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


# --- results --------------------------------------------------------------------------------

@dataclass(frozen=True)
class RigorousEpsilon:
    """The rigorous (eps, delta) of one unit at depolarizing probability p.

    ``eps`` is the PLD value (dp-accounting, pessimistic) of the worst candidate pair, ``eps_rdp``
    the RDP cross-check (per-order maximum over all candidates; an independent upper bound,
    usually looser, lower at very large eps where the pessimistic PLD grid costs more), ``pair`` the
    worst pair, ``step`` the PLD grid step, ``seconds`` the wall time of search and composition.
    """

    unit: str
    description: str
    eps: float
    delta: float
    eps_rdp: float
    factors: tuple[tuple[str, int], ...]
    count: int
    p: float
    d: float
    dim: int
    pair: NeighbourPair
    n_candidates: int
    step: float
    seconds: float

    kind = Kind.COMPOSED
    accounting = Accounting.RIGOROUS

    def claim(self, **details: object) -> PrivacyClaim:
        """The (eps, delta) of this unit as a :class:`PrivacyClaim` (extra ``details`` kept)."""
        return PrivacyClaim(
            value=self.eps, delta=self.delta, kind=self.kind, accounting=self.accounting,
            unit=CLAIM_UNITS[self.unit],
            covers=(COVERS_FEATURES_PER_PASS if self.unit == "token"
                    else COVERS_FEATURES_WINDOW_PASS if self.unit == "window"
                    else COVERS_FEATURES_OVER_TRAINING),
            notes=rigorous_notes(self.unit, d=self.d),
            details={"composed_over": self.unit, **details})

    def labelled(self) -> dict:
        """The claim's JSON form, for reports."""
        return self.claim().to_json()

    def as_dict(self) -> dict:
        """A JSON-ready dict (the pair as its source and trace distance)."""
        return {
            "unit": self.unit, "description": self.description, "eps": self.labelled(),
            "eps_rdp": replace(self.claim(accountant="exact discrete RDP, dp-accounting "
                                                     "conversion"),
                               value=self.eps_rdp).to_json(),
            "count": self.count, "factors": [list(f) for f in self.factors], "p": self.p,
            "d": self.d, "dim": self.dim, "worst_pair": self.pair.source,
            "worst_pair_trace_distance_full": self.pair.trace_distance_full,
            "candidates": self.n_candidates, "pld_step": self.step, "seconds": self.seconds,
        }


def evaluate_pairs(
    plan: CompositionPlan, pairs: Sequence[NeighbourPair], *, p: float, delta: float,
    d: float = DEFAULT_D, top: int = 3, grid_points: int = GRID_POINTS,
) -> RigorousEpsilon:
    """The rigorous eps of ``plan`` over candidate ``pairs``: PLD eps of the ``top`` pairs with
    the largest RDP bound (the largest of them is reported), and the RDP cross-check."""
    if not pairs:
        raise InvalidInputError("evaluate_pairs needs at least one candidate pair")
    start = time.perf_counter()
    p, delta = _require_p(p), _require_delta(delta)
    dists = [pair.distributions(p=p) for pair in pairs]
    curves = np.array([renyi_divergences(P, Q) for P, Q in dists])
    rdp_each = [rdp_epsilon(curve, count=plan.count, delta=delta) for curve in curves]
    best = None
    for index in np.argsort(rdp_each)[::-1][:top]:
        eps, step = pld_epsilon(*dists[index], factors=plan.factors, delta=delta,
                                grid_points=grid_points)
        if best is None or eps > best[0]:
            best = (eps, step, pairs[index])
    eps, step, pair = best
    return RigorousEpsilon(
        unit=plan.unit, description=plan.description, eps=eps, delta=delta,
        eps_rdp=rdp_epsilon(curves.max(axis=0), count=plan.count, delta=delta),
        factors=plan.factors, count=plan.count, p=p, d=d, dim=pairs[0].psi.shape[0],
        pair=pair, n_candidates=len(pairs), step=step, seconds=time.perf_counter() - start,
    )


def rigorous_epsilon(
    *, p: float, unit: str = "record", delta: float = FEATURE_PATH_DELTA, d: float = DEFAULT_D,
    dim: int = DEFAULT_DIM, n_shots: int = DEFAULT_SHOTS, stride: int = DEFAULT_STRIDE,
    seq_len: int = DEFAULT_SEQ_LEN, epochs: int = DEFAULT_EPOCHS,
    restarts: int = DEFAULT_RESTARTS, seed: int = 0,
    extra_pairs: Sequence[NeighbourPair] = (), token_length: int | None = None,
) -> RigorousEpsilon:
    """Rigorous (eps, delta) of one unit of privacy of the LDPT feature path at noise p.

    Searches the worst pair for the unit's composition count (:func:`search_worst_pairs`),
    composes its exact single-shot PLD with dp-accounting and cross-checks with RDP.

    >>> r = rigorous_epsilon(p=0.9505, unit="token", restarts=1)   # doctest: +SKIP
    >>> round(r.eps, 2), r.delta, r.kind, r.accounting              # doctest: +SKIP
    (0.39, 1e-05, 'composed', 'rigorous')
    """
    start = time.perf_counter()
    plan = composition_plan(unit, n_shots=n_shots, dim=dim, stride=stride, seq_len=seq_len,
                            epochs=epochs, token_length=token_length)
    pairs = [*extra_pairs, *search_worst_pairs(p=p, d=d, dim=dim, count=plan.count,
                                               delta=delta, restarts=restarts, seed=seed)]
    result = evaluate_pairs(plan, pairs, p=p, delta=delta, d=d)
    return _with_seconds(result, time.perf_counter() - start)


def _with_seconds(result: RigorousEpsilon, seconds: float) -> RigorousEpsilon:
    return dataclasses.replace(result, seconds=seconds)


# --- the report beside the paper's numbers -------------------------------------------------------

def paper_equivalent_eps_s(*, p: float, d: float = DEFAULT_D, dim: int = DEFAULT_DIM,
                           alpha: float = DEFAULT_ALPHA) -> float:
    """The per-pass eps_s whose Algorithm 1 calibration gives this p: Theorem 1's
    ``eps_ch = ln(1 + (1-p) d D / p)`` (eq. 4) divided by the channel share alpha."""
    return channel_epsilon(p=p, d=d, dim=dim) / alpha


@dataclass(frozen=True)
class AccountingReport:
    """Rigorous (eps, delta) for every unit beside the paper's numbers, with the assumptions."""

    p: float
    eps_s: float
    eps_s_given: bool
    paper: dict
    rows: tuple[RigorousEpsilon, ...]
    settings: dict
    assumptions: tuple[str, ...] = field(default=ASSUMPTIONS)
    seconds: float = 0.0

    def row(self, unit: str) -> RigorousEpsilon:
        """The row of one unit."""
        return next(r for r in self.rows if r.unit == unit)

    def as_dict(self) -> dict:
        """A JSON-ready dict."""
        return {
            "p": self.p, "eps_s": self.eps_s, "eps_s_given": self.eps_s_given,
            "paper": self.paper, "rows": [r.as_dict() for r in self.rows],
            "settings": self.settings, "assumptions": list(self.assumptions),
            "seconds": self.seconds,
        }


def account(
    *, eps_s: float | None = None, p: float | None = None, delta: float = FEATURE_PATH_DELTA,
    d: float = DEFAULT_D, dim: int = DEFAULT_DIM, n_shots: int = DEFAULT_SHOTS,
    stride: int = DEFAULT_STRIDE, seq_len: int = DEFAULT_SEQ_LEN, epochs: int = DEFAULT_EPOCHS,
    alpha: float = DEFAULT_ALPHA, delta_prime: float = 1e-6,
    units: Sequence[str] = UNITS, restarts: int = DEFAULT_RESTARTS, seed: int = 0,
    progress: bool = False, token_length: int | None = None,
) -> AccountingReport:
    """Account the LDPT feature path rigorously at the paper's calibration of ``eps_s`` (or at a
    given ``p``) for every unit, beside the paper's per-pass eps_s and its composition over the
    epochs (eq. 16 basic, eq. 17 advanced with ``delta_prime``).

    ``token_length``: the values per token where the register holds more amplitudes than a
    token has values (the signed encoding: 16 values in ``dim`` = 32 amplitudes; default
    ``dim``); ``d`` is then that encoding's proved neighbouring distance.

    Every unit's worst-pair search runs at its own count; each unit is then evaluated over the
    union of all candidates, so a pair found for one unit also serves the others. ``progress``:
    a bar over those searches and evaluations on stderr (seconds at the paper's settings,
    minutes for a million shots).

    Examples:
        Seconds: one token's 64 shots at the paper's calibration of eps_s = 0.1, which counts one:

        >>> report = account(eps_s=0.1, units=("token",), n_shots=64, restarts=1)
        >>> report.row("token").eps > report.eps_s
        True
    """
    start = time.perf_counter()
    if (eps_s is None) == (p is None):
        raise InvalidInputError("give exactly one of eps_s (paper calibration) or p")
    eps_s_given = eps_s is not None
    if eps_s is not None:
        p = calibrate(eps_s, d=d, dim=dim, alpha=alpha).p
    else:
        p = _require_p(p)
        eps_s = paper_equivalent_eps_s(p=p, d=d, dim=dim, alpha=alpha)
    delta = _require_delta(delta)
    plans = [composition_plan(u, n_shots=n_shots, dim=dim, stride=stride, seq_len=seq_len,
                              epochs=epochs, token_length=token_length) for u in units]
    pairs: list[NeighbourPair] = []
    search_seconds = []
    rows = []
    with work_bar(total=2 * len(plans), desc="rigorous accounting", unit="step",
                  enabled=progress) as bar:
        for plan in plans:
            bar.set_postfix_str(f"worst-pair search, {plan.unit}")
            began = time.perf_counter()
            pairs += search_worst_pairs(p=p, d=d, dim=dim, count=plan.count, delta=delta,
                                        restarts=restarts, seed=seed)
            search_seconds.append(time.perf_counter() - began)
            bar.update()
        for plan, searched in zip(plans, search_seconds, strict=True):
            bar.set_postfix_str(f"PLD of {plan.count:,} measurements, {plan.unit}")
            row = evaluate_pairs(plan, pairs, p=p, delta=delta, d=d)
            rows.append(_with_seconds(row, row.seconds + searched))
            bar.update()
    per_pass = _paper_per_pass(eps_s)
    composed = replace(per_pass, kind=Kind.COMPOSED, covers=COVERS_FEATURES_OVER_TRAINING)
    paper = {
        "eps_per_pass": per_pass.to_json(),
        "eps_basic": replace(composed, value=basic_composition(eps_s, epochs=epochs),
                             details={"epochs": epochs}).to_json(),
        "eps_advanced": replace(
            composed, value=advanced_composition(eps_s, epochs=epochs, delta_prime=delta_prime),
            details={"epochs": epochs, "delta_prime": delta_prime}).to_json(),
        "note": "the paper's unit is one pass of one token state through the channel, once "
                "per record per epoch; it counts neither the N_s shots nor the tokens and "
                "windows that hold a record",
    }
    settings = {"delta": delta, "d": d, "dim": dim, "n_shots": n_shots, "stride": stride,
                "seq_len": seq_len, "epochs": epochs, "alpha": alpha, "restarts": restarts,
                "seed": seed,
                "n_tokens": n_tokens(dim=token_length or dim, stride=stride, seq_len=seq_len),
                **({"token_length": token_length} if token_length is not None else {})}
    return AccountingReport(p=p, eps_s=eps_s, eps_s_given=eps_s_given, paper=paper,
                            rows=tuple(rows),
                            settings=settings, seconds=time.perf_counter() - start)


def _paper_per_pass(eps_s: float) -> PrivacyClaim:
    """The LDPT paper's per-pass claim (Algorithm 1's eps_s) at ``eps_s``."""
    return PrivacyClaim(value=eps_s, kind=Kind.LOCAL_QDP, accounting=Accounting.PAPER,
                        unit=Unit.TOKEN, covers=COVERS_FEATURES_PER_PASS)


# --- inverse calibration ----------------------------------------------------------------------

@dataclass(frozen=True)
class RigorousCalibration:
    """The noise a target rigorous (eps, delta) needs for one unit, with the paper's chain.

    ``p`` (depolarizing probability), ``gamma = -ln(1-p)/t`` (eq. 7), ``sigma = p/sqrt(d_model)``
    (eq. 8) as in Algorithm 1; ``achieved`` is the rigorous eps at that p (<= the target);
    ``eps_s_paper`` the per-pass eps_s the paper's chain would assign to the same p.
    """

    eps_target: float
    delta: float
    unit: str
    p: float
    gamma: float
    sigma: float
    t: float
    d_model: int
    achieved: RigorousEpsilon
    eps_s_paper: float
    notes: tuple[str, ...] = ()

    def as_dict(self) -> dict:
        """A JSON-ready dict with the epsilons as claims."""
        return {
            "eps_target": replace(self.achieved.claim(), value=self.eps_target).to_json(),
            "unit": self.unit, "p": self.p, "gamma": self.gamma, "sigma": self.sigma,
            "t": self.t, "d_model": self.d_model, "achieved": self.achieved.as_dict(),
            "eps_s_paper": _paper_per_pass(self.eps_s_paper).to_json(),
            "notes": list(self.notes),
        }


def _worst_eps(gamma: float, plan: CompositionPlan, pairs: Sequence[NeighbourPair], *,
               delta: float, d: float, grid_points: int) -> RigorousEpsilon:
    return evaluate_pairs(plan, pairs, p=-math.expm1(-gamma), delta=delta, d=d, top=2,
                          grid_points=grid_points)


def _bisect_gamma(eps_of: Callable[[float], float], target: float, low: float, high: float,
                  rel_tol: float) -> float:
    """Smallest gamma (to ``rel_tol``) in [low, high] with eps_of(gamma) <= target; eps_of is
    decreasing and eps_of(high) <= target; returns ``low`` if eps_of(low) <= target already."""
    if eps_of(low) <= target:
        return low
    while high / low > 1.0 + rel_tol:
        mid = math.sqrt(low * high)
        if eps_of(mid) <= target:
            high = mid
        else:
            low = mid
    return high


def rigorous_calibration(
    *, eps_total: float, delta: float = FEATURE_PATH_DELTA, unit: str = "record",
    d: float = DEFAULT_D, dim: int = DEFAULT_DIM, d_model: int = DEFAULT_D_MODEL,
    n_shots: int = DEFAULT_SHOTS, stride: int = DEFAULT_STRIDE, seq_len: int = DEFAULT_SEQ_LEN,
    epochs: int = DEFAULT_EPOCHS, t: float = DEFAULT_T, alpha: float = DEFAULT_ALPHA,
    restarts: int = DEFAULT_RESTARTS, seed: int = 0, rel_tol: float = 1e-4,
    token_length: int | None = None,
) -> RigorousCalibration:
    """Inverse of :func:`rigorous_epsilon`: the depolarizing p whose rigorous eps for ``unit``
    is ``eps_total`` at ``delta``, then gamma and sigma by Algorithm 1's eqs. 7-8.

    eps is decreasing in p for every pair (E_p2 = E_q o E_p1 when (1-p2) = (1-q)(1-p1): more
    noise is a post-processing), so a bisection on the Lindblad rate ``gamma t = -ln(1-p)``
    finds it: first on the RDP bound (an upper bound, so its answer is enough noise), then on
    the PLD of the worst pairs just below that rate, and finally a fresh worst-pair
    search at the answer checks it (repeated with the new candidates if it moved eps above the
    target). The result errs on the side of more noise, within ``rel_tol`` of the rate.
    """
    eps_total = require_in_range("eps_total", eps_total, low=0.0,
                                 hint="a privacy budget must be > 0")
    delta = _require_delta(delta)
    t = require_in_range("t (evolution time)", t, low=0.0)
    d_model = require_positive_int("d_model", d_model)
    rel_tol = require_in_range("rel_tol", rel_tol, low=0.0, high=0.1)
    if unit == "token-training":
        raise InvalidInputError("unit = 'token-training' is not offered for calibration; "
                                "use token, window or record")
    plan = composition_plan(unit, n_shots=n_shots, dim=dim, stride=stride, seq_len=seq_len,
                            epochs=epochs, token_length=token_length)
    start = time.perf_counter()
    rate_low, rate_high = 1e-4, 40.0

    def rdp_of(pairs: Sequence[NeighbourPair]) -> Callable[[float], float]:
        def eps(rate: float) -> float:
            p = -math.expm1(-rate)
            curves = np.array([renyi_divergences(*pair.distributions(p=p)) for pair in pairs])
            return rdp_epsilon(curves.max(axis=0), count=plan.count, delta=delta)
        return eps

    seed_pairs = [sic_aligned_pair(p=0.5, d=d, dim=dim)]
    if rdp_of(seed_pairs)(rate_high) > eps_total:
        raise ArgumentError(
            f"{{eps_total}} = {eps_total:g} at {{delta}} = {delta:g} is below what p = "
            f"1 - e^-40 gives for the {unit} unit; choose a larger {{eps_total}} or {{delta}}"
        )
    rate = _bisect_gamma(rdp_of(seed_pairs), eps_total, rate_low, rate_high, 1e-3)
    pairs = search_worst_pairs(p=-math.expm1(-rate), d=d, dim=dim, count=plan.count,
                               delta=delta, restarts=restarts, seed=seed)

    def pld_of(rate: float) -> float:
        return _worst_eps(rate, plan, pairs, delta=delta, d=d,
                          grid_points=COARSE_GRID_POINTS).eps

    high = _bisect_gamma(rdp_of(pairs), eps_total, rate_low, rate_high, 1e-3)
    low = 0.9 * high
    while low > rate_low and pld_of(low) <= eps_total:
        low *= 0.5
    notes: list[str] = []
    if low <= rate_low:
        notes.append(f"eps_total is met at the smallest rate tried (gamma t = {rate_low:g})")
        rate = rate_low
    else:
        rate = _bisect_gamma(pld_of, eps_total, low, high, rel_tol)
    for attempt in range(4):
        p = -math.expm1(-rate)
        pairs += search_worst_pairs(p=p, d=d, dim=dim, count=plan.count, delta=delta,
                                    restarts=restarts, seed=seed + attempt + 1)
        achieved = evaluate_pairs(plan, pairs, p=p, delta=delta, d=d)
        if achieved.eps <= eps_total:
            break
        notes.append(f"check {attempt + 1}: eps {achieved.eps:.6g} > target at p = {p:.6g} "
                     "(new worst pair or finer grid); more noise")
        upper = 2.0 * rate
        while pld_of(upper) > eps_total:
            upper *= 2.0
        rate = max(_bisect_gamma(pld_of, eps_total, rate, upper, rel_tol),
                   rate * (1.0 + 10.0 * rel_tol))
    else:
        raise InvalidInputError(
            f"could not calibrate p for eps_total = {eps_total:g}: the worst-pair search kept "
            "finding worse pairs; increase restarts"
        )
    achieved = _with_seconds(achieved, time.perf_counter() - start)
    return RigorousCalibration(
        eps_target=eps_total, delta=delta, unit=unit, p=p, gamma=lindblad_gamma(p, t),
        sigma=injection_sigma(p, d_model), t=t, d_model=d_model, achieved=achieved,
        eps_s_paper=paper_equivalent_eps_s(p=p, d=d, dim=dim, alpha=alpha), notes=tuple(notes),
    )
