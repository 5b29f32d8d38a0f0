"""Theorem 3.2 against real per-example gradients; Theorem 3.1 against Monte-Carlo."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch.func import jacrev

from qpriv.classification.bounds import (
    circuit_constant,
    clipping_bias_bound,
    gradient_norm_bound,
    gradient_perturbation,
    operator_norm,
    structural_clip,
    theorem_3_2_constant,
)
from qpriv.classification.diagnostics import gradient_diagnostics
from qpriv.classification.dpsgd import per_example_gradients
from qpriv.classification.models import QuantumClassifier
from qpriv.errors import InvalidInputError
from qpriv.quantum.circuits import VariationalCircuit
from qpriv.quantum.states import amplitude_encode

PAULI_X = np.array([[0, 1], [1, 0]], dtype=complex)
PAULI_Z = np.diag([1.0, -1.0]).astype(complex)


def test_constant_closed_forms() -> None:
    # Our ansatz: p = 3 n L generators of norm 1/2 and Z read-outs: G = 2 sqrt(p / 4) = sqrt(p).
    circuit = VariationalCircuit(n_qubits=4, n_layers=3, n_readout=4)
    g = circuit_constant(generators=circuit.generators(), observables=circuit.observables())
    assert g == pytest.approx(math.sqrt(36), rel=1e-12)
    # Any circuit: two-qubit generators XX/2 (norm 1/2) and ZZ read-out (norm 1), and a
    # scaled observable 3 Z (norm 3): G = 2 * 3 * sqrt(5 / 4).
    xx = np.kron(PAULI_X, PAULI_X) / 2
    assert operator_norm(xx) == pytest.approx(0.5)
    g = circuit_constant(generators=[xx] * 5, observables=[np.kron(PAULI_Z, PAULI_Z), 3 * PAULI_Z])
    assert g == pytest.approx(6 * math.sqrt(1.25))
    assert theorem_3_2_constant(generator_norms=[0.5] * 4, observable_norms=[1.0]) == 2.0
    assert gradient_norm_bound(constant=2.0, tau=0.5) == 8.0
    assert structural_clip(constant=2.0, tau=0.5) == 8.0
    assert clipping_bias_bound(constant=2.0, tau=0.5, clip=3.0) == 5.0
    assert clipping_bias_bound(constant=2.0, tau=0.5, clip=10.0) == 0.0
    with pytest.raises(InvalidInputError, match="tau = 0 is outside"):
        gradient_norm_bound(constant=1.0, tau=0.0)
    with pytest.raises(InvalidInputError, match="square"):
        operator_norm(np.ones((2, 3)))


@pytest.mark.parametrize(("n_layers", "tau", "depolarizing", "seed"),
                         [(1, 0.05, 0.0, 0), (3, 0.2, 0.0, 1), (6, 1.0, 0.3, 2)])
def test_no_real_per_example_gradient_exceeds_the_bound(n_layers, tau, depolarizing, seed):
    g = torch.Generator().manual_seed(seed)
    model = QuantumClassifier(n_features=16, n_classes=4, n_layers=n_layers, tau=tau,
                              depolarizing=depolarizing, generator=g)
    x = torch.randn(256, 16, generator=g)
    y = torch.randint(0, 4, (256,), generator=g)
    bound = model.gradient_bound()
    assert bound == pytest.approx(2 * math.sqrt(12 * n_layers) / tau)
    norms = per_example_gradients(model, x, y).norm(dim=1)
    assert float(norms.max()) <= bound
    # the per-coordinate step of the proof: |d_j <Z_k>| <= 2 ||H_j|| ||Z|| = 1
    jac = jacrev(lambda w: model.circuit.expectations(model.encode(x[:8]), w))(
        model.weights.detach())
    assert float(jac.abs().max()) <= 1.0 + 1e-6
    # structural clipping never clips, so the clipping bias is exactly zero
    diag = gradient_diagnostics(per_example_gradients(model, x, y), clip=bound, batch_size=64,
                                noise_multiplier=0.0, sampling="iid")
    assert diag["clip_probability"] == 0.0 and diag["clipping_bias_norm"] == 0.0


# -- Theorem 3.1 ----------------------------------------------------------------------------------


def circuit_quantities(seed: int):
    """Exact e, Jacobian and the expectations at theta_j +- pi/2 of a random circuit/input."""
    circuit = VariationalCircuit(n_qubits=4, n_layers=2, n_readout=4)
    weights = circuit.init_weights(generator=torch.Generator().manual_seed(seed),
                                   dtype=torch.float64)
    x = torch.randn(1, 16, generator=torch.Generator().manual_seed(seed + 1), dtype=torch.float64)
    psi, _ = amplitude_encode(x)

    def e_of(w):
        return circuit.expectations(psi, w)[0]

    e = e_of(weights)
    jac = jacrev(e_of)(weights).reshape(4, -1)
    n_params = jac.shape[1]
    plus, minus = torch.empty_like(jac), torch.empty_like(jac)
    for j in range(n_params):
        shift = torch.zeros(n_params, dtype=torch.float64)
        shift[j] = math.pi / 2
        plus[:, j] = e_of(weights + shift.view_as(weights))
        minus[:, j] = e_of(weights - shift.view_as(weights))
    return e, jac, plus, minus


def sampled_gradients(e, jac, plus, minus, *, label, tau, lam, shots, n, shift, generator):
    """Monte-Carlo noisy gradients: exact binomial read-outs (and parameter-shift estimates)."""

    def estimate(mean, shape):
        prob = ((1 + mean) / 2).expand(shape)
        counts = torch.binomial(torch.full(shape, float(shots), dtype=torch.float64), prob,
                                generator=generator)
        return 2 * counts / shots - 1

    y = torch.nn.functional.one_hot(torch.tensor(label), 4).double()
    e_hat = estimate((1 - lam) * e, (n, 4))
    residual = torch.softmax(e_hat / tau, dim=1) - y
    if shift:
        jac_hat = (estimate((1 - lam) * plus, (n, *plus.shape))
                   - estimate((1 - lam) * minus, (n, *minus.shape))) / 2
        return torch.einsum("mkp,mk->mp", jac_hat, residual) / tau
    return residual @ ((1 - lam) * jac) / tau


def test_parameter_shift_rule_gives_the_exact_jacobian() -> None:
    _, jac, plus, minus = circuit_quantities(seed=4)
    torch.testing.assert_close((plus - minus) / 2, jac, atol=1e-13, rtol=0)


@pytest.mark.parametrize("shots", [100, 1000])
@pytest.mark.parametrize("lam", [0.0, 0.1])
@pytest.mark.parametrize("shift", [False, True])
def test_theorem_3_1_matches_monte_carlo(shots: int, lam: float, shift: bool) -> None:
    e, jac, plus, minus = circuit_quantities(seed=0)
    tau, label, n = 0.5, 2, 20_000
    model = gradient_perturbation(
        expectations=e, jacobian=jac, label=label, tau=tau, depolarizing=lam, shots=shots,
        shifted_plus=plus if shift else None, shifted_minus=minus if shift else None,
    )
    draws = sampled_gradients(e, jac, plus, minus, label=label, tau=tau, lam=lam, shots=shots,
                              n=n, shift=shift, generator=torch.Generator().manual_seed(shots))
    g0 = jac.T @ (torch.softmax(e / tau, 0) - torch.nn.functional.one_hot(
        torch.tensor(label), 4).double()) / tau
    # variance: every coordinate within 10 %
    rel = (draws.var(0) - model.variance).abs() / model.variance
    assert float(rel.max()) < 0.10
    # mean: within 10 % of |m| plus the Monte-Carlo standard error (m is tiny without lambda)
    standard_error = float((model.variance / n).sum().sqrt())
    error = float((draws.mean(0) - g0 - model.mean).norm())
    assert error < 0.10 * float(model.mean.norm()) + 4 * standard_error
    if lam == 0.0:  # to first order, shot noise alone is unbiased (the paper's m = 0)
        assert float(model.mean_first_order.abs().max()) < 1e-12
    else:  # depolarizing shrinks the gradient: the bias is resolved well above the MC noise
        assert float(model.mean.norm()) > 10 * standard_error


def test_theorem_3_1_shift_variance_keeps_the_readout_bias() -> None:
    # With A = 0 only the parameter-shift term is left: v_jj = sum_k t_kj^2 E(pi^_k - y_k)^2
    # / tau^2. Exact binomial read-outs give E(pi^ - y)^2; dropping the 2 (pi - y) beta term
    # of the expansion was 1.5 % off here, against a Monte-Carlo error of 0.02 %.
    n_classes, shots, tau, label = 4, 200, 0.3, 2
    e = np.array([0.3, -0.2, 0.5, 0.1])
    plus, minus = np.full((n_classes, 3), 0.2), np.full((n_classes, 3), -0.1)
    result = gradient_perturbation(
        expectations=torch.tensor(e), jacobian=torch.zeros(n_classes, 3), label=label, tau=tau,
        depolarizing=0.0, shots=shots, shifted_plus=torch.tensor(plus),
        shifted_minus=torch.tensor(minus))
    counts = np.random.default_rng(3).binomial(shots, (1 + e) / 2, size=(1_000_000, n_classes))
    logits = (2 * counts / shots - 1) / tau
    pi_hat = np.exp(logits - logits.max(1, keepdims=True))
    pi_hat /= pi_hat.sum(1, keepdims=True)
    second_moment = ((pi_hat - np.eye(n_classes)[label]) ** 2).mean(0)
    t2 = (2 - plus**2 - minus**2) / (4 * shots)
    expected = (t2 * second_moment[:, None]).sum(0) / tau**2
    assert torch.diagonal(result.covariance).numpy() == pytest.approx(expected, rel=5e-3)


def test_theorem_3_1_second_order_mean_against_exact_enumeration() -> None:
    # lambda = 0: the mean comes from the softmax's curvature alone (beta); the Monte-Carlo
    # tolerance cannot resolve it, the exact sum over all 201^3 read-outs can
    from scipy import stats

    e = torch.tensor([0.3, -0.2, 0.1], dtype=torch.float64)
    a = torch.tensor([[1.0, -0.5], [0.2, 0.7], [-0.4, 0.3]], dtype=torch.float64)
    tau, shots, label = 0.3, 200, 0
    r = gradient_perturbation(expectations=e, jacobian=a, label=label, tau=tau,
                              depolarizing=0.0, shots=shots)
    k = np.arange(shots + 1)
    values = (2 * k / shots - 1) / tau
    pmf = [stats.binom.pmf(k, shots, (1 + float(m)) / 2) for m in e]
    logits = np.stack(np.meshgrid(values, values, values, indexing="ij"), -1)
    weight = pmf[0][:, None, None] * pmf[1][None, :, None] * pmf[2][None, None, :]
    softmax = np.exp(logits - logits.max(-1, keepdims=True))
    softmax /= softmax.sum(-1, keepdims=True)
    expected_pi = (softmax * weight[..., None]).sum((0, 1, 2))
    exact = a.numpy().T @ (expected_pi - torch.softmax(e / tau, 0).numpy()) / tau
    assert np.linalg.norm(r.mean_first_order.numpy()) < 1e-12  # no first-order mean
    assert np.linalg.norm(r.mean.numpy() - exact) < 0.05 * np.linalg.norm(exact)


def test_gradient_perturbation_validates_inputs() -> None:
    e = torch.zeros(4, dtype=torch.float64)
    jac = torch.zeros(4, 6, dtype=torch.float64)
    common = {"expectations": e, "jacobian": jac, "tau": 0.5, "depolarizing": 0.0}
    with pytest.raises(InvalidInputError, match=r"label = 4 is outside the valid range \[0, 4\)"):
        gradient_perturbation(label=4, shots=10, **common)
    with pytest.raises(InvalidInputError, match="shots"):
        gradient_perturbation(label=0, shots=0, **common)
    with pytest.raises(InvalidInputError, match="both"):
        gradient_perturbation(label=0, shots=10, shifted_plus=jac, **common)
    with pytest.raises(InvalidInputError, match=r"\(K,\) and jacobian \(K, P\)"):
        gradient_perturbation(label=0, shots=10, expectations=e, jacobian=jac[:3], tau=0.5,
                              depolarizing=0.0)
