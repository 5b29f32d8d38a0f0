"""The private-training paper's theorems, made executable (section 3).

* Theorem 3.2 (deterministic clipping-bias bound): for U(theta) = prod_j exp(-i theta_j H_j),
  observables O_k and cross-entropy on the logits <O_k> / tau, every per-example gradient obeys
  ||g_i|| <= 2 G / tau with G = 2 max_k ||O_k|| sqrt(sum_j ||H_j||^2) (operator norms), so the
  clipping bias of threshold C is at most (2 G / tau - C)_+ and vanishes for the "structural"
  threshold C = 2 G / tau. Pure functions of numbers: :func:`theorem_3_2_constant`,
  :func:`gradient_norm_bound`, :func:`structural_clip`, :func:`clipping_bias_bound`; from
  matrices: :func:`circuit_constant`.
* Theorem 3.1 (quantum noise propagated to the loss gradient): the mean and covariance of the
  gradient perturbation caused by global depolarizing lambda and S-shot read-out, by the delta
  method (:func:`gradient_perturbation`; the derivation is in its docstring).
* The analytic per-example gradient bound of a projected 1-Lipschitz MLP (the clipless DP-SGD
  of Bethune et al., "DP-SGD without clipping: the Lipschitz neural network way"):
  :func:`cross_entropy_lipschitz`, :func:`lipschitz_mlp_gradient_bounds` and
  :func:`global_gradient_bound`, pure functions of the input bound, the weights' spectral
  norms, the bias bounds and the loss's Lipschitz constant (the derivation is in
  :func:`lipschitz_mlp_gradient_bounds`).

Why Theorem 3.2 holds (the steps the tests check numerically): |d<O_k>/d theta_j| =
|<[H_j, O_k(theta)]>| <= 2 ||H_j|| ||O_k|| for the Heisenberg-evolved O_k; the cross-entropy
gradient is g_j = sum_k (p_k - y_k) d_j<O_k> / tau and sum_k |p_k - y_k| = 2 (1 - p_y) <= 2, so
|g_j| <= (2/tau) max_k |d_j<O_k>| <= (2/tau) 2 ||H_j|| max_k ||O_k||; summing squares over j
gives ||g|| <= 2 G / tau. Depolarizing multiplies every d_j<O_k> by (1 - lambda) <= 1 and
shot noise on the forward value changes p, not the bound, so both keep it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from qpriv.errors import InvalidInputError, require_in_range, require_positive_int


def operator_norm(matrix: np.ndarray | Tensor) -> float:
    """Operator (spectral) norm: the largest singular value of a square matrix."""
    array = np.asarray(matrix.detach().cpu() if isinstance(matrix, Tensor) else matrix)
    if array.ndim != 2 or array.shape[0] != array.shape[1]:
        raise InvalidInputError(f"an operator must be a square matrix, got shape {array.shape}")
    return float(np.linalg.norm(array.astype(np.complex128), ord=2))


def theorem_3_2_constant(
    *, generator_norms: Sequence[float], observable_norms: Sequence[float]
) -> float:
    """Theorem 3.2, eq. (22): G = 2 max_k ||O_k|| sqrt(sum_j ||H_j||^2)."""
    h = np.asarray(generator_norms, dtype=np.float64)
    o = np.asarray(observable_norms, dtype=np.float64)
    if h.ndim != 1 or h.size == 0 or o.ndim != 1 or o.size == 0:
        raise InvalidInputError("need at least one generator norm and one observable norm")
    if not (np.isfinite(h).all() and np.isfinite(o).all()) or (h < 0).any() or (o < 0).any():
        raise InvalidInputError("operator norms must be finite and >= 0")
    return float(2.0 * o.max() * math.sqrt(float(np.square(h).sum())))


def circuit_constant(
    *, generators: Sequence[np.ndarray | Tensor], observables: Sequence[np.ndarray | Tensor]
) -> float:
    """G of Theorem 3.2 from the generator H_j of every parameter and every observable O_k.

    Any circuit U = prod_j exp(-i theta_j H_j) whose parameters each appear once; a local
    operator may be given by its non-trivial factor (a tensor product with identities has the
    same operator norm).
    """
    return theorem_3_2_constant(
        generator_norms=[operator_norm(h) for h in generators],
        observable_norms=[operator_norm(o) for o in observables],
    )


def gradient_norm_bound(*, constant: float, tau: float) -> float:
    """Theorem 3.2, eq. (23): every per-example gradient norm ||g_i|| is at most 2 G / tau."""
    constant = require_in_range("G", constant, low=0.0, low_inclusive=True)
    tau = require_in_range("tau", tau, low=0.0, hint="the logits are <O_k> / tau")
    return 2.0 * constant / tau


def structural_clip(*, constant: float, tau: float) -> float:
    """"Structural clipping": C = 2 G / tau, the smallest threshold Theorem 3.2 proves never
    clips, so the clipping bias is exactly zero."""
    return gradient_norm_bound(constant=constant, tau=tau)


def clipping_bias_bound(*, constant: float, tau: float, clip: float) -> float:
    """Theorem 3.2, eq. (24): ||b_C|| = ||E[g - clip_C(g)]|| <= (2 G / tau - C)_+."""
    clip = require_in_range("clip", clip, low=0.0, hint="the clipping threshold C is > 0")
    return max(0.0, gradient_norm_bound(constant=constant, tau=tau) - clip)


# -- the analytic bound of a projected Lipschitz MLP ----------------------------------------------


def cross_entropy_lipschitz(*, tau: float) -> float:
    """Lipschitz constant sqrt(2) / tau of z -> CE(z / tau, y) in the logits z (L2 norm).

    The gradient is (softmax(z / tau) - e_y) / tau, and for any probability vector p,
    ||p - e_y||_2^2 = (1 - p_y)^2 + sum_{k != y} p_k^2 <= (1 - p_y)^2 + (sum_{k != y} p_k)^2
    = 2 (1 - p_y)^2 <= 2; the supremum sqrt(2) is approached when p puts all its mass on one
    wrong class.
    """
    tau = require_in_range("tau", tau, low=0.0, hint="the logits are f(x) / tau")
    return math.sqrt(2.0) / tau


@dataclass(frozen=True)
class LayerGradientBound:
    """The bounds of one linear layer k of :func:`lipschitz_mlp_gradient_bounds`.

    ``input_norm``: ||h_{k-1}||; ``output_gradient``: ||dL/dz_k||; ``weight``:
    ||dL/dW_k||_F; ``bias``: ||dL/db_k||; ``total``: sqrt(weight^2 + bias^2).
    """

    input_norm: float
    output_gradient: float
    weight: float
    bias: float

    @property
    def total(self) -> float:
        return math.hypot(self.weight, self.bias)


def lipschitz_mlp_gradient_bounds(
    *, input_bound: float, weight_norms: Sequence[float], bias_bounds: Sequence[float],
    loss_lipschitz: float,
) -> tuple[LayerGradientBound, ...]:
    """Per-layer bounds on every per-example gradient of a Lipschitz MLP, layer by layer.

    The network: h_0 = x with ||x|| <= X (``input_bound``; the model clips its inputs to it),
    z_k = W_k h_{k-1} + b_k for k = 1..m, h_k = sigma(z_k) for k < m, the loss L(z_m), L-Lipschitz
    in z_m (``loss_lipschitz``), with ||W_k||_2 <= r_k (``weight_norms``, spectral norms) and
    ||b_k|| <= B_k (``bias_bounds``). sigma is a norm-preserving activation whose Jacobian has
    spectral norm <= 1 everywhere (pair sorting: ||sigma(z)|| = ||z||).

    Forward (triangle inequality, norm preservation):
        ||h_0|| <= X,   ||h_k|| = ||z_k|| <= r_k ||h_{k-1}|| + B_k.
    Backward (chain rule, ||J_sigma|| <= 1, ||W^T|| = ||W||_2):
        ||delta_m|| = ||dL/dz_m|| <= L,   ||delta_k|| <= r_{k+1} ||delta_{k+1}||.
    The layer's gradients are an outer product and a copy:
        dL/dW_k = delta_k h_{k-1}^T, so ||dL/dW_k||_F = ||delta_k|| ||h_{k-1}||;
        dL/db_k = delta_k.
    Hence ||dL/dW_k||_F <= L prod_{j>k} r_j (prod_{j<k} r_j X + sum_{i<k} B_i prod_{i<j<k} r_j)
    and ||dL/db_k|| <= L prod_{j>k} r_j. The global bound on the whole per-example gradient is
    the root of the sum of the squares (:func:`global_gradient_bound`).
    """
    x = require_in_range("input_bound", input_bound, low=0.0, hint="inputs are clipped to it")
    lip = require_in_range("loss_lipschitz", loss_lipschitz, low=0.0, low_inclusive=True)
    radii = [require_in_range("weight norm", r, low=0.0, low_inclusive=True)
             for r in weight_norms]
    biases = [require_in_range("bias bound", b, low=0.0, low_inclusive=True)
              for b in bias_bounds]
    if not radii or len(radii) != len(biases):
        raise InvalidInputError(
            f"give one weight norm and one bias bound per layer; got {len(radii)} and "
            f"{len(biases)}"
        )
    inputs = [x]
    for r, b in zip(radii[:-1], biases[:-1], strict=True):
        inputs.append(r * inputs[-1] + b)
    deltas = [lip]
    for r in reversed(radii[1:]):
        deltas.insert(0, r * deltas[0])
    return tuple(LayerGradientBound(input_norm=h, output_gradient=d, weight=d * h, bias=d)
                 for h, d in zip(inputs, deltas, strict=True))


def global_gradient_bound(layers: Sequence[LayerGradientBound]) -> float:
    """The bound on the whole per-example gradient: sqrt(sum_k ||g_k||^2) over the layers."""
    return math.sqrt(sum(layer.total ** 2 for layer in layers))


# -- Theorem 3.1 ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class GradientPerturbation:
    """The Gaussian model of Theorem 3.1: noisy gradient ~ g + N(mean, covariance).

    ``mean`` has the second-order (softmax curvature) term of the delta method;
    ``mean_first_order`` has only the depolarizing shrinkage (zero without depolarizing, as the
    paper states); ``covariance`` is (P, P); ``variance`` its diagonal.
    """

    mean: Tensor
    mean_first_order: Tensor
    covariance: Tensor

    @property
    def variance(self) -> Tensor:
        return torch.diagonal(self.covariance)


def gradient_perturbation(
    *,
    expectations: Tensor,
    jacobian: Tensor,
    label: int,
    tau: float,
    depolarizing: float,
    shots: int,
    shifted_plus: Tensor | None = None,
    shifted_minus: Tensor | None = None,
) -> GradientPerturbation:
    r"""Theorem 3.1: mean m and covariance v of the loss-gradient perturbation (delta method).

    Inputs for one example: ``expectations`` e (K,), the exact noiseless <Z_k>; ``jacobian``
    A (K, P), A_kj = d e_k / d theta_j; ``label`` y; ``tau``; ``depolarizing`` lambda;
    ``shots`` S. With ``shifted_plus`` / ``shifted_minus`` (K, P), the exact noiseless
    expectations at theta_j +- pi/2, the derivatives are also estimated from shots
    (parameter-shift rule); without them the derivatives are exact (the straight-through
    read-out of :class:`qpriv.classification.models.QuantumClassifier`).

    Model. mu = (1 - lambda) e (global depolarizing on traceless O_k). Each read-out is an
    S-shot estimate e^_k = mu_k + xi_k with independent xi_k, E xi_k = 0,
    Var xi_k = s_k^2 = (1 - mu_k^2) / S (binomial). Derivatives: exact, A^ = (1 - lambda) A,
    or by parameter shift A^_kj = (e^+_kj - e^-_kj) / 2 with fresh S shots for each shifted
    circuit, so A^ = (1 - lambda) A + zeta with independent zeta_kj, E zeta = 0,
    Var zeta_kj = t_kj^2 = (2 - (mu^+_kj)^2 - (mu^-_kj)^2) / (4 S), mu^+- = (1 - lambda) e^+-
    (exact for gates exp(-i theta P / 2), P a Pauli, as in this ansatz).

    The noisy gradient is g^ = A^T (pi^ - y) / tau with pi^ = softmax(e^ / tau); the noiseless
    one g = A^T (pi0 - y) / tau with pi0 = softmax(e / tau).

    Delta method. Expand pi^ around the noise-free logits mu / tau: with pi = softmax(mu / tau),
    W = diag(pi) - pi pi^T (the softmax Jacobian) and, for independent xi,
    d^2 pi_k / d z_l^2 = pi_k [(delta_kl - pi_l)^2 - pi_l (1 - pi_l)],

        pi^ ~ pi + W xi / tau + (1/2) sum_l (xi_l / tau)^2 d^2 pi / d z_l^2,
        E pi^ ~ pi + beta,  beta_k = (1 / 2 tau^2) sum_l s_l^2 pi_k [(delta_kl - pi_l)^2
                                                                  - pi_l (1 - pi_l)].

    zeta is independent of xi and centred, so E g^ = (1 - lambda) A^T (pi + beta - y) / tau and

        m   = [(1 - lambda) A^T (pi + beta - y) - A^T (pi0 - y)] / tau,
        m_1 = [(1 - lambda) A^T (pi - y) - A^T (pi0 - y)] / tau   (first order; 0 if lambda = 0).

    To first order in the noise, g^ - E g^ = (1 - lambda) A^T W xi / tau^2 + zeta^T (pi^ - y) / tau,
    two uncorrelated terms, so

        v = (1 - lambda)^2 A^T W diag(s^2) W A / tau^4
            + diag_j( sum_k t_kj^2 [(pi_k - y_k)^2 + 2 (pi_k - y_k) beta_k
                                     + (W diag(s^2) W)_kk / tau^2] ) / tau^2,

    where the last bracket is E (pi^_k - y_k)^2 to first order in s^2, the bias beta and the
    spread both included (zeta multiplies pi^, not pi).
    The Gaussian picture is good while ||xi|| / tau is small (large S and tau, small lambda).
    Checked against exact binomial Monte-Carlo: at tau = 0.5 every coordinate's variance is
    within 10 % for S >= 100; at tau = 0.2 and S = 100 (xi / tau ~ 0.5) it is off by up to
    ~15 %, and by ~2 % at S = 1000.
    """
    e = torch.as_tensor(expectations, dtype=torch.float64)
    a = torch.as_tensor(jacobian, dtype=torch.float64)
    if e.ndim != 1 or a.ndim != 2 or a.shape[0] != e.shape[0]:
        raise InvalidInputError(
            f"expectations must be (K,) and jacobian (K, P); got {tuple(e.shape)} and "
            f"{tuple(a.shape)}"
        )
    n_classes = e.shape[0]
    if isinstance(label, bool) or not 0 <= int(label) < n_classes:
        raise InvalidInputError(f"label = {label!r} is outside the valid range [0, {n_classes})")
    tau = require_in_range("tau", tau, low=0.0)
    lam = require_in_range("depolarizing", depolarizing, low=0.0, high=1.0, low_inclusive=True)
    shots = require_positive_int("shots", shots)
    if (shifted_plus is None) != (shifted_minus is None):
        raise InvalidInputError("give both shifted_plus and shifted_minus, or neither")

    y = torch.zeros(n_classes, dtype=torch.float64)
    y[int(label)] = 1.0
    mu = (1.0 - lam) * e
    s2 = (1.0 - mu.square()).clamp(min=0.0) / shots
    pi = torch.softmax(mu / tau, dim=0)
    pi0 = torch.softmax(e / tau, dim=0)
    w = torch.diag(pi) - torch.outer(pi, pi)
    eye = torch.eye(n_classes, dtype=torch.float64)
    curvature = pi[:, None] * ((eye - pi[None, :]).square() - (pi * (1 - pi))[None, :])
    beta = (curvature * s2[None, :]).sum(dim=1) / (2 * tau**2)

    g0 = a.T @ (pi0 - y) / tau
    mean_first = (1.0 - lam) * (a.T @ (pi - y)) / tau - g0
    mean = (1.0 - lam) * (a.T @ (pi + beta - y)) / tau - g0

    readout_cov = w @ torch.diag(s2) @ w  # Cov(W xi), K x K
    covariance = (1.0 - lam) ** 2 * (a.T @ readout_cov @ a) / tau**4
    if shifted_plus is not None:
        plus = (1.0 - lam) * torch.as_tensor(shifted_plus, dtype=torch.float64)
        minus = (1.0 - lam) * torch.as_tensor(shifted_minus, dtype=torch.float64)
        if plus.shape != a.shape or minus.shape != a.shape:
            raise InvalidInputError(
                f"shifted expectations must have the jacobian's shape {tuple(a.shape)}"
            )
        t2 = (2.0 - plus.square() - minus.square()).clamp(min=0.0) / (4 * shots)
        second_moment = ((pi - y).square() + 2 * (pi - y) * beta
                         + torch.diagonal(readout_cov) / tau**2)
        covariance = covariance + torch.diag((t2 * second_moment[:, None]).sum(0)) / tau**2
    return GradientPerturbation(mean=mean, mean_first_order=mean_first, covariance=covariance)
