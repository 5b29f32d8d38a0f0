"""The variational-circuit simulator: gates vs dense matrices, vmap vs loop, vs PennyLane."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
import torch
from scipy import stats
from torch.func import grad, vmap

from qpriv.errors import InvalidInputError
from qpriv.quantum.circuits import (
    VariationalCircuit,
    apply_controlled,
    apply_one_qubit,
    cnot_ring_permutation,
    depolarized,
    pennylane_reference,
    ring_links,
    rot_matrices,
    ry_matrices,
    sample_expectations,
    z_signs,
)
from qpriv.quantum.states import amplitude_encode

I2 = np.eye(2)
Z = np.diag([1.0, -1.0])


def rz(t: float) -> np.ndarray:
    return np.diag([np.exp(-0.5j * t), np.exp(0.5j * t)])


def ry(t: float) -> np.ndarray:
    c, s = math.cos(t / 2), math.sin(t / 2)
    return np.array([[c, -s], [s, c]])


def on_wire(gate: np.ndarray, wire: int, n: int) -> np.ndarray:
    """The dense 2^n x 2^n operator of ``gate`` on ``wire`` (wire 0 most significant)."""
    return functools.reduce(np.kron, [gate if q == wire else I2 for q in range(n)])


def cnot_dense(control: int, target: int, n: int) -> np.ndarray:
    dim = 1 << n
    out = np.zeros((dim, dim))
    for j in range(dim):
        cbit = (j >> (n - 1 - control)) & 1
        out[j ^ (cbit << (n - 1 - target)), j] = 1
    return out


def dense_circuit(weights: np.ndarray, n: int) -> np.ndarray:
    """The ansatz as one dense unitary, built gate by gate (the obviously-correct twin)."""
    u = np.eye(1 << n, dtype=complex)
    for layer in weights:
        for wire, (a, b, c) in enumerate(layer):
            u = on_wire(rz(c) @ ry(b) @ rz(a), wire, n) @ u
        for control, target in ring_links(n):
            u = cnot_dense(control, target, n) @ u
    return u


def random_inputs(n_examples: int, dim: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n_examples, dim, generator=g, dtype=torch.float64)


def test_rot_matrix_is_rz_ry_rz_and_unitary() -> None:
    angles = torch.tensor([[0.3, -1.2, 2.5], [4.0, 0.7, -0.1]], dtype=torch.float64)
    mats = rot_matrices(angles)
    for (a, b, c), m in zip(angles.tolist(), mats, strict=True):
        np.testing.assert_allclose(m.numpy(), rz(c) @ ry(b) @ rz(a), atol=1e-14)
        np.testing.assert_allclose(m.numpy() @ m.numpy().conj().T, np.eye(2), atol=1e-14)
    np.testing.assert_allclose(ry_matrices(torch.tensor(0.9, dtype=torch.float64)).numpy(),
                               ry(0.9), atol=1e-15)


def test_ring_links() -> None:
    assert ring_links(1) == []
    assert ring_links(2) == [(0, 1)]
    assert ring_links(4) == [(0, 1), (1, 2), (2, 3), (3, 0)]


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_cnot_ring_permutation_equals_the_product_of_cnots(n: int) -> None:
    psi = random_inputs(3, 1 << n, seed=n).to(torch.complex128)
    dense = np.eye(1 << n)
    for control, target in ring_links(n):
        dense = cnot_dense(control, target, n) @ dense
    expected = psi.numpy() @ dense.T
    np.testing.assert_allclose(psi[:, cnot_ring_permutation(n)].numpy(), expected, atol=0)


def test_one_qubit_and_controlled_gates_match_dense_operators() -> None:
    n = 3
    psi = random_inputs(2, 8, seed=1).to(torch.complex128)
    gate = rot_matrices(torch.tensor([0.4, 1.1, -0.7], dtype=torch.float64))
    for wire in range(n):
        out = apply_one_qubit(psi, gate, wire=wire, n_qubits=n)
        np.testing.assert_allclose(out.numpy(), psi.numpy() @ on_wire(gate.numpy(), wire, n).T,
                                   atol=1e-14)
    proj0, proj1 = np.diag([1.0, 0.0]), np.diag([0.0, 1.0])
    for control, target in [(0, 2), (2, 0), (1, 2), (2, 1)]:
        dense = on_wire(proj0, control, n) + on_wire(proj1, control, n) @ on_wire(
            gate.numpy(), target, n)
        out = apply_controlled(psi, gate, control=control, target=target, n_qubits=n)
        np.testing.assert_allclose(out.numpy(), psi.numpy() @ dense.T, atol=1e-14)
    # per-example gates (B, 2, 2)
    gates = rot_matrices(torch.randn(2, 3, dtype=torch.float64))
    out = apply_one_qubit(psi, gates, wire=1, n_qubits=n)
    for b in range(2):
        np.testing.assert_allclose(out[b].numpy(), on_wire(gates[b].numpy(), 1, n) @ psi[b].numpy(),
                                   atol=1e-14)


@pytest.mark.parametrize(("n", "layers", "k"), [(1, 2, 1), (2, 1, 2), (3, 3, 2), (4, 2, 4)])
def test_expectations_match_the_dense_circuit(n: int, layers: int, k: int) -> None:
    circuit = VariationalCircuit(n_qubits=n, n_layers=layers, n_readout=k)
    weights = circuit.init_weights(generator=torch.Generator().manual_seed(n),
                                   dtype=torch.float64)
    psi, _ = amplitude_encode(random_inputs(5, 1 << n, seed=10 + n))
    got = circuit.expectations(psi, weights)
    u = dense_circuit(weights.numpy(), n)
    out = psi.numpy() @ u.T
    for wire in range(k):
        zk = on_wire(Z, wire, n)
        expected = np.einsum("bi,ij,bj->b", out.conj(), zk, out).real
        np.testing.assert_allclose(got[:, wire].numpy(), expected, atol=1e-13)
    # z_signs is the diagonal of Z_k
    for wire in range(k):
        np.testing.assert_array_equal(z_signs(n, k)[:, wire].numpy(), np.diag(on_wire(Z, wire, n)))


def test_depolarizing_scales_expectations_and_is_validated() -> None:
    circuit = VariationalCircuit(n_qubits=3, n_layers=2, n_readout=3)
    weights = circuit.init_weights(generator=torch.Generator().manual_seed(0))
    psi, _ = amplitude_encode(torch.randn(4, 8))
    clean = circuit.expectations(psi, weights)
    torch.testing.assert_close(circuit.expectations(psi, weights, depolarizing=0.3), 0.7 * clean)
    torch.testing.assert_close(depolarized(clean, depolarizing=1.0), torch.zeros_like(clean))
    with pytest.raises(InvalidInputError, match=r"depolarizing = 1.5 .* \[0, 1\]"):
        depolarized(clean, depolarizing=1.5)


def test_vmap_gradients_equal_a_loop_of_autograd_calls() -> None:
    circuit = VariationalCircuit(n_qubits=4, n_layers=3, n_readout=4)
    weights = circuit.init_weights(generator=torch.Generator().manual_seed(3),
                                   dtype=torch.float64)
    psi, _ = amplitude_encode(random_inputs(6, 16, seed=3))
    labels = torch.tensor([0, 1, 2, 3, 1, 0])

    def loss(w, p, y):
        logits = circuit.expectations(p[None], w)[0] / 0.3
        return torch.nn.functional.cross_entropy(logits[None], y[None])

    fast = vmap(grad(loss), in_dims=(None, 0, 0))(weights, psi, labels)
    for i in range(6):
        w = weights.clone().requires_grad_()
        (slow,) = torch.autograd.grad(loss(w, psi[i], labels[i]), w)
        torch.testing.assert_close(fast[i], slow, atol=1e-12, rtol=0)


def test_per_example_weights_run_each_state_through_its_own_circuit() -> None:
    circuit = VariationalCircuit(n_qubits=3, n_layers=2, n_readout=2)
    weights = torch.stack([circuit.init_weights(generator=torch.Generator().manual_seed(s),
                                                dtype=torch.float64) for s in range(4)])
    psi, _ = amplitude_encode(random_inputs(4, 8, seed=7))
    got = circuit.state(psi, weights).numpy()
    for i in range(4):
        np.testing.assert_allclose(got[i], dense_circuit(weights[i].numpy(), 3) @ psi[i].numpy(),
                                   atol=1e-13)
    with pytest.raises(InvalidInputError, match="one such set per input state"):
        circuit.state(psi[:3], weights)


def test_float32_weights_simulate_in_complex64() -> None:
    circuit = VariationalCircuit(n_qubits=2, n_layers=1, n_readout=1)
    weights = circuit.init_weights(generator=torch.Generator().manual_seed(0))
    assert circuit.state(torch.ones(1, 4) / 2, weights).dtype == torch.complex64
    assert circuit.state(torch.ones(1, 4) / 2, weights.double()).dtype == torch.complex128


def test_circuit_validates_its_inputs() -> None:
    with pytest.raises(InvalidInputError, match="n_readout = 3 is outside"):
        VariationalCircuit(n_qubits=2, n_layers=1, n_readout=3)
    with pytest.raises(InvalidInputError, match="n_layers"):
        VariationalCircuit(n_qubits=2, n_layers=0, n_readout=1)
    with pytest.raises(InvalidInputError, match=r"\[1, 20\]"):
        VariationalCircuit(n_qubits=21, n_layers=1, n_readout=1)
    circuit = VariationalCircuit(n_qubits=2, n_layers=1, n_readout=1)
    with pytest.raises(InvalidInputError, match=r"needs \(1, 2, 3\)"):
        circuit.expectations(torch.ones(1, 4), torch.zeros(2, 2, 3))
    with pytest.raises(InvalidInputError, match=r"needs \(batch, 4\)"):
        circuit.expectations(torch.ones(1, 8), torch.zeros(1, 2, 3))


def test_shot_estimates_are_exactly_binomial() -> None:
    m = torch.tensor([-0.6, 0.0, 0.9, 1.0], dtype=torch.float64)
    shots = 8
    draws = sample_expectations(m.expand(20_000, 4), shots=shots,
                                generator=torch.Generator().manual_seed(5))
    counts = ((draws + 1) * shots / 2).round().long()
    for k in range(3):
        q = (1 + float(m[k])) / 2
        observed = torch.bincount(counts[:, k], minlength=shots + 1).numpy()
        expected = stats.binom.pmf(np.arange(shots + 1), shots, q) * len(counts)
        keep = expected >= 5
        obs = np.append(observed[keep], observed[~keep].sum())
        exp = np.append(expected[keep], expected[~keep].sum())
        if exp[-1] == 0:
            obs, exp = obs[:-1], exp[:-1]
        assert stats.chisquare(obs, exp).pvalue > 1e-4
    assert bool((draws[:, 3] == 1.0).all())  # a certain outcome never fluctuates
    many = sample_expectations(m.expand(20_000, 4), shots=100,
                               generator=torch.Generator().manual_seed(6))
    torch.testing.assert_close(many.mean(0), m, atol=0.01, rtol=0)
    torch.testing.assert_close(many.var(0), (1 - m.square()) / 100, atol=4e-4, rtol=0.05)
    with pytest.raises(InvalidInputError, match="shots"):
        sample_expectations(m, shots=0)


# -- PennyLane cross-check (test dependency only) -------------------------------------------------


def pennylane_circuit(n: int, k: int):
    pytest.importorskip("pennylane")
    return pennylane_reference(n, k)


@pytest.mark.parametrize(("n", "layers", "k", "seed"),
                         [(2, 2, 2, 0), (3, 1, 2, 1), (4, 3, 4, 2), (5, 2, 3, 3)])
def test_simulator_matches_pennylane(n: int, layers: int, k: int, seed: int) -> None:
    reference = pennylane_circuit(n, k)
    circuit = VariationalCircuit(n_qubits=n, n_layers=layers, n_readout=k)
    weights = circuit.init_weights(generator=torch.Generator().manual_seed(seed),
                                   dtype=torch.float64)
    psi, _ = amplitude_encode(random_inputs(3, 1 << n, seed=100 + seed))
    ours = circuit.expectations(psi, weights)
    coeffs = torch.linspace(-1.0, 1.0, k, dtype=torch.float64)  # a generic scalar of the e_k
    ours_grad = vmap(grad(lambda w, p: circuit.expectations(p[None], w)[0] @ coeffs),
                     in_dims=(None, 0))(weights, psi)
    for i in range(3):
        w = weights.clone().requires_grad_()
        theirs = torch.stack(list(reference(psi[i], w)))
        torch.testing.assert_close(ours[i], theirs.detach(), atol=1e-5, rtol=0)
        (theirs_grad,) = torch.autograd.grad(theirs @ coeffs, w)
        torch.testing.assert_close(ours_grad[i], theirs_grad, atol=1e-5, rtol=0)
