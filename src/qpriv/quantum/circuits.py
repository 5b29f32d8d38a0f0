"""Batched statevector simulation of variational circuits, differentiable and torch.func-ready.

The classifier ansatz of the private-training paper (section 4, "The quantum classifier ansatz
is built using amplitude encoding and L layers of R_Z R_Y R_Z followed by a CNOT ring, with
Pauli-Z expectation read-outs on the first K qubits"):

    |psi(x)> = x / ||x||_2                                   (amplitude encoding)
    U(theta) = prod_{l=1..L} [ CNOT ring ] [ (x)_q RZ(c_lq) RY(b_lq) RZ(a_lq) ]
    e_k      = <psi(x)| U^+ Z_k U |psi(x)>,   k = 0..K-1     (first K qubits)

with weights of shape (L, n, 3) holding (a, b, c) per layer and qubit; a acts first, so the
single-qubit block is PennyLane's ``Rot(a, b, c) = RZ(c) RY(b) RZ(a)``.

Conventions (the same as PennyLane's ``default.qubit``): qubit (wire) 0 is the most significant
bit of a basis index, so amplitude j of a state of n qubits sits on |j_0 j_1 ... j_{n-1}> with
j = sum_q j_q 2^{n-1-q}. The CNOT ring is CNOT(q, q+1) for q = 0..n-2 followed by the closing
CNOT(n-1, 0) when n >= 3 (two qubits have one link, one qubit none).

How gates are applied: never as 2^n x 2^n matrices. A single-qubit gate on wire q views the
state (B, D) as (B, 2^q, 2, 2^{n-q-1}) and contracts the middle axis with the 2x2 matrix. A
CNOT permutes basis states, so the whole ring is one precomputed permutation of the D indices,
applied with one gather. Every operation is a plain differentiable torch op without in-place
writes or data-dependent control flow, so ``torch.func.vmap(torch.func.grad(...))`` gives
per-example gradients.

Noise (section 3.2 of the paper, Theorem 3.1):

* global depolarizing lambda, rho -> (1 - lambda) rho + lambda I / D. Every Pauli-Z string is
  traceless, so e_k -> (1 - lambda) e_k exactly (:func:`depolarized`);
* S-shot read-out: each Z_k is estimated from S shots of its own. A shot of Z_k is +1 with
  probability (1 + m_k) / 2, m_k the (depolarized) expectation, so the number of +1 outcomes is
  exactly Binomial(S, (1 + m_k) / 2) and the estimate is 2 count / S - 1, with mean m_k and
  variance (1 - m_k^2) / S; the K estimates are independent (:func:`sample_expectations`). (One
  joint computational-basis measurement of S shots has the same binomial marginals, correlated
  across k.) Sampling is not differentiable: a model that trains on sampled read-outs passes
  the exact value forward plus the detached sampling error (a straight-through estimate, whose
  gradient is the exact gradient of the depolarized expectation).

Precision follows the weights: float32 weights simulate in complex64, float64 in complex128.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import torch
from torch import Tensor

from qpriv.errors import InvalidInputError, require_in_range, require_positive_int

MAX_QUBITS = 20
"""Largest register simulated (2^20 amplitudes per example)."""


# -- gate matrices ------------------------------------------------------------------------------


def _complex_dtype(real: torch.dtype) -> torch.dtype:
    return torch.complex128 if real == torch.float64 else torch.complex64


def rot_matrices(angles: Tensor) -> Tensor:
    """RZ(c) RY(b) RZ(a) for angles (..., 3) = (a, b, c): complex matrices (..., 2, 2).

    Closed form (PennyLane's ``Rot(a, b, c)``)::

        [[e^{-i(a+c)/2} cos(b/2), -e^{i(a-c)/2} sin(b/2)],
         [e^{-i(a-c)/2} sin(b/2),  e^{i(a+c)/2} cos(b/2)]]
    """
    a, b, c = angles.unbind(-1)
    cos, sin = torch.cos(b / 2), torch.sin(b / 2)
    plus, minus = (a + c) / 2, (a - c) / 2
    row0 = torch.stack([_scaled_phase(cos, -plus), -_scaled_phase(sin, minus)], dim=-1)
    row1 = torch.stack([_scaled_phase(sin, -minus), _scaled_phase(cos, plus)], dim=-1)
    return torch.stack([row0, row1], dim=-2)


def _scaled_phase(r: Tensor, phi: Tensor) -> Tensor:
    """r e^{i phi} for real r of any sign (torch.polar wants r >= 0)."""
    return torch.complex(r * torch.cos(phi), r * torch.sin(phi))


def ry_matrices(angles: Tensor) -> Tensor:
    """RY(t) = [[cos t/2, -sin t/2], [sin t/2, cos t/2]] for angles (...,): real (..., 2, 2)."""
    cos, sin = torch.cos(angles / 2), torch.sin(angles / 2)
    return torch.stack([torch.stack([cos, -sin], -1), torch.stack([sin, cos], -1)], -2)


# -- applying gates -----------------------------------------------------------------------------


def apply_one_qubit(state: Tensor, gate: Tensor, *, wire: int, n_qubits: int) -> Tensor:
    """Apply a 2x2 ``gate`` to ``wire`` of ``state`` (B, 2^n); ``gate`` is (2, 2) or (B, 2, 2).

    The state is viewed as (B, 2^wire, 2, 2^(n-wire-1)) and the middle axis contracted.
    """
    batch = state.shape[0]
    view = state.reshape(batch, 1 << wire, 2, 1 << (n_qubits - wire - 1))
    gate = gate.to(state.dtype)
    if gate.ndim == 2:
        out = torch.einsum("ij,zajb->zaib", gate, view)
    else:
        out = torch.einsum("zij,zajb->zaib", gate, view)
    return out.reshape(batch, -1)


def apply_controlled(
    state: Tensor, gate: Tensor, *, control: int, target: int, n_qubits: int
) -> Tensor:
    """Apply ``gate`` (2, 2) or (B, 2, 2) to ``target`` where ``control`` is |1>.

    The state is split on the control axis; the |1> half gets the gate, and the halves are
    stacked back (no in-place write, so it is vmap- and autograd-safe).
    """
    batch = state.shape[0]
    view = state.reshape(batch, 1 << control, 2, 1 << (n_qubits - control - 1))
    off, on = view[:, :, 0], view[:, :, 1]  # (B, 2^c, 2^(n-c-1)) each
    # In the |1> half (n - 1 qubits), the target wire's index shifts down if it lay below.
    inner_wire = target - 1 if target > control else target
    inner_qubits = n_qubits - 1
    on_flat = on.reshape(batch, -1)
    on_flat = apply_one_qubit(on_flat, gate, wire=inner_wire, n_qubits=inner_qubits)
    on = on_flat.reshape(on.shape)
    return torch.stack([off, on], dim=2).reshape(batch, -1)


def ring_links(n_qubits: int) -> list[tuple[int, int]]:
    """(control, target) pairs of the ring: (q, q+1) for q < n-1, then (n-1, 0) when n >= 3."""
    links = [(q, q + 1) for q in range(n_qubits - 1)]
    if n_qubits >= 3:
        links.append((n_qubits - 1, 0))
    return links


@functools.lru_cache(maxsize=64)
def _cnot_ring_gather(n_qubits: int) -> tuple[int, ...]:
    """Gather indices g with (ring |psi>)[j] = psi[g[j]], as a tuple (cached per n)."""
    dim = 1 << n_qubits
    gather = list(range(dim))
    for control, target in ring_links(n_qubits):
        cbit, tbit = n_qubits - 1 - control, n_qubits - 1 - target
        # CNOT is its own inverse: new[j] = old[j ^ (bit_c(j) << t)]; compose the gathers.
        gather = [gather[j ^ (((j >> cbit) & 1) << tbit)] for j in range(dim)]
    return tuple(gather)


def cnot_ring_permutation(n_qubits: int, *, device: torch.device | None = None) -> Tensor:
    """The CNOT ring as gather indices (D,): ``state[:, perm]`` applies the ring."""
    return torch.tensor(_cnot_ring_gather(n_qubits), dtype=torch.long, device=device)


def z_signs(n_qubits: int, n_readout: int, *, dtype: torch.dtype = torch.float64,
            device: torch.device | None = None) -> Tensor:
    """(D, K) matrix of eigenvalues of Z_k on basis states: +1 where bit k is 0, -1 where 1.

    ``probabilities @ z_signs`` gives <Z_k> for k = 0..K-1 (wire k is bit n-1-k of the index).
    """
    index = torch.arange(1 << n_qubits, device=device)
    wires = torch.arange(n_readout, device=device)
    bits = (index[:, None] >> (n_qubits - 1 - wires)[None, :]) & 1
    return (1 - 2 * bits).to(dtype)


# -- the classifier circuit ---------------------------------------------------------------------


def require_n_qubits(n_qubits: int) -> int:
    """Return ``n_qubits`` if it is an integer in [1, MAX_QUBITS], else raise."""
    n_qubits = require_positive_int("n_qubits", n_qubits)
    if n_qubits > MAX_QUBITS:
        raise InvalidInputError(
            f"n_qubits = {n_qubits} is outside the valid range [1, {MAX_QUBITS}] of this "
            "statevector simulator"
        )
    return n_qubits


class VariationalCircuit:
    """The classifier ansatz: L layers of RZ RY RZ on every qubit, then a CNOT ring; <Z_k>.

    The object holds only the fixed structure (sizes, the ring permutation, the Z signs); the
    weights are passed to :meth:`expectations`, so the same circuit serves a model, a
    ``torch.func`` transform and a test.

    Example::

        circuit = VariationalCircuit(n_qubits=4, n_layers=2, n_readout=4)
        weights = circuit.init_weights(generator=torch.Generator().manual_seed(0))
        psi, _ = amplitude_encode(torch.randn(64, 16))
        e = circuit.expectations(psi, weights)               # (64, 4), each in [-1, 1]
    """

    def __init__(self, *, n_qubits: int, n_layers: int, n_readout: int) -> None:
        self.n_qubits = require_n_qubits(n_qubits)
        self.n_layers = require_positive_int("n_layers", n_layers)
        self.n_readout = require_positive_int("n_readout", n_readout)
        if self.n_readout > self.n_qubits:
            raise InvalidInputError(
                f"n_readout = {n_readout} is outside the valid range [1, n_qubits = {n_qubits}]:"
                " each read-out is Z on one of the first K qubits"
            )
        self.dim = 1 << self.n_qubits
        self._perm = cnot_ring_permutation(self.n_qubits)
        self._signs = z_signs(self.n_qubits, self.n_readout)

    @property
    def weight_shape(self) -> tuple[int, int, int]:
        """(L, n, 3): the angles (a, b, c) of RZ(c) RY(b) RZ(a) per layer and qubit."""
        return (self.n_layers, self.n_qubits, 3)

    @property
    def n_parameters(self) -> int:
        """p = 3 n L trainable angles."""
        return 3 * self.n_qubits * self.n_layers

    def init_weights(
        self, *, generator: torch.Generator | None = None, dtype: torch.dtype = torch.float32
    ) -> Tensor:
        """Angles drawn uniformly from [0, 2 pi), shape (L, n, 3)."""
        return 2 * math.pi * torch.rand(self.weight_shape, generator=generator, dtype=dtype)

    def state(self, psi: Tensor, weights: Tensor) -> Tensor:
        """U(theta) |psi> for input states ``psi`` (B, D) (real or complex): complex (B, D).

        ``weights`` is (L, n, 3), one circuit for every state, or (B, L, n, 3), state i run
        through the circuit of ``weights[i]`` (the per-example weights whose gradients are the
        per-example gradients, :meth:`qpriv.classification.models.QuantumClassifier.
        forward_per_example`).
        """
        self._check(psi, weights)
        state = psi.to(_complex_dtype(weights.dtype))
        perm = self._perm.to(psi.device)
        gates = rot_matrices(weights)  # (L, n, 2, 2) or (B, L, n, 2, 2)
        per_example = weights.ndim == 4
        for layer in range(self.n_layers):
            for wire in range(self.n_qubits):
                gate = gates[:, layer, wire] if per_example else gates[layer, wire]
                state = apply_one_qubit(state, gate, wire=wire, n_qubits=self.n_qubits)
            if self.n_qubits > 1:
                state = state[:, perm]
        return state

    def expectations(self, psi: Tensor, weights: Tensor, *, depolarizing: float = 0.0) -> Tensor:
        """Exact <Z_k> (k < K) after the circuit, times (1 - lambda): real (B, K).

        ``depolarizing`` is the global depolarizing lambda in [0, 1] (see :func:`depolarized`).
        """
        state = self.state(psi, weights)
        probs = state.real.square() + state.imag.square()
        e = probs @ self._signs.to(device=probs.device, dtype=probs.dtype)
        return depolarized(e, depolarizing=depolarizing)

    def generator_norms(self) -> Tensor:
        """||H_j|| for every parameter, in the order of ``weights.flatten()``: all 1/2.

        Each angle enters as exp(-i theta H) with H = Z/2 or Y/2 on one qubit (identity on the
        others), whose operator norm is 1/2 (Theorem 3.2).
        """
        return torch.full((self.n_parameters,), 0.5, dtype=torch.float64)

    def generators(self) -> list[Tensor]:
        """The single-qubit part of every generator H_j (Z/2, Y/2, Z/2 per qubit and layer)."""
        z = torch.tensor([[0.5, 0.0], [0.0, -0.5]], dtype=torch.complex128)
        y = torch.tensor([[0.0, -0.5j], [0.5j, 0.0]], dtype=torch.complex128)
        return [z, y, z] * (self.n_qubits * self.n_layers)

    def observables(self) -> list[Tensor]:
        """The read-out observables O_k = Z on qubit k (single-qubit part), k < K."""
        z = torch.tensor([[1.0, 0.0], [0.0, -1.0]], dtype=torch.complex128)
        return [z] * self.n_readout

    def _check(self, psi: Tensor, weights: Tensor) -> None:
        if tuple(weights.shape[-3:]) != self.weight_shape or weights.ndim not in (3, 4) or (
                weights.ndim == 4 and weights.shape[0] != psi.shape[0]):
            raise InvalidInputError(
                f"weights have shape {tuple(weights.shape)}; this circuit needs "
                f"{self.weight_shape} (layers, qubits, 3), or one such set per input state"
            )
        if psi.ndim != 2 or psi.shape[-1] != self.dim:
            raise InvalidInputError(
                f"input states have shape {tuple(psi.shape)}; this circuit needs "
                f"(batch, {self.dim})"
            )


def depolarized(expectations: Tensor, *, depolarizing: float) -> Tensor:
    """Global depolarizing, rho -> (1 - lambda) rho + lambda I / D: a traceless observable's
    expectation becomes (1 - lambda) times itself. ``depolarizing`` is lambda in [0, 1]."""
    lam = require_in_range("depolarizing", depolarizing, low=0.0, high=1.0, low_inclusive=True,
                           hint="lambda is the weight of the maximally mixed state")
    return expectations if lam == 0.0 else (1.0 - lam) * expectations


def sample_expectations(
    expectations: Tensor, *, shots: int, generator: torch.Generator | None = None
) -> Tensor:
    """S-shot estimates of Pauli expectations: 2 Binomial(S, (1 + m) / 2) / S - 1, elementwise.

    ``expectations`` holds the exact (already depolarized) m in [-1, 1]; every entry is measured
    with its own S shots, independently. Exact binomial sampling, not a Gaussian approximation;
    the estimate has mean m and variance (1 - m^2) / S. Not differentiable (detached).
    """
    shots = require_positive_int("shots", shots)
    m = expectations.detach()
    prob_plus = ((1.0 + m) / 2).clamp(0.0, 1.0)
    counts = torch.binomial(torch.full_like(prob_plus, float(shots)), prob_plus,
                            generator=generator)
    return 2.0 * counts / shots - 1.0


def pennylane_reference(n_qubits: int, n_readout: int) -> Callable[[Tensor, Tensor], list]:
    """The same ansatz in PennyLane (``default.qubit``, torch interface, backprop), the
    independent twin of :class:`VariationalCircuit` for tests and benchmarks.

    Returns a QNode ``circuit(psi, weights) -> [<Z_0>, ..., <Z_{K-1}>]`` for one state ``psi``
    (D,) and ``weights`` (L, n, 3) of RZ RY RZ angles. PennyLane is a test dependency only:
    it is imported here, when the reference is asked for.
    """
    import pennylane as qml

    device = qml.device("default.qubit", wires=n_qubits)

    @qml.qnode(device, interface="torch", diff_method="backprop")
    def circuit(psi: Tensor, weights: Tensor) -> list:
        qml.StatePrep(psi, wires=range(n_qubits))
        for layer in weights:
            for wire in range(n_qubits):
                qml.RZ(layer[wire, 0], wires=wire)
                qml.RY(layer[wire, 1], wires=wire)
                qml.RZ(layer[wire, 2], wires=wire)
            for control, target in ring_links(n_qubits):
                qml.CNOT(wires=[control, target])
        return [qml.expval(qml.PauliZ(k)) for k in range(n_readout)]

    return circuit
