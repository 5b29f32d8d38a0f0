"""The classifiers of the private-training paper (section 4).

* :class:`TanhMLP`: fully connected layers with tanh (tempered sigmoids train best under DP-SGD,
  the paper's ref. [13]).
* :class:`LipschitzMLP`: the same shape built from deel-torchlip's gradient-norm-preserving
  layers (``SpectralLinear`` with orthogonalised weights, ``GroupSort2``), Lipschitz constant
  matched to the clipping threshold C.
* :class:`QuantumClassifier`: the variational quantum classifier (Definition 1): amplitude
  encoding, L layers of RZ RY RZ and a CNOT ring, logits <Z_k> / tau, cross-entropy. It also
  serves the quantum image pipeline, fed with the states of the hierarchically learned
  amplitude loader (:mod:`qpriv.classification.loader`).
* :class:`GroupNormCNN`: the classical image model (convolutions, max-pooling, GroupNorm),
  near 500 trainable parameters like the quantum image classifier.

Every model maps a batch ``x (B, ...)`` to logits ``(B, K)`` and has no train/eval difference
apart from deel-torchlip's cached weights (see :class:`LipschitzMLP`), so per-example
gradients with ``torch.func`` need nothing model-specific. A model whose read-out is sampled
(the quantum classifier with ``shots``) also has ``draw_readout_noise``; its forward takes the
drawn noise as ``readout_noise``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from qpriv.classification.bounds import circuit_constant, gradient_norm_bound
from qpriv.errors import InvalidInputError, require_in_range, require_positive_int
from qpriv.quantum.circuits import VariationalCircuit, sample_expectations
from qpriv.quantum.states import amplitude_encode_with_mask


def count_parameters(model: nn.Module) -> int:
    """Number of trainable scalars (``requires_grad``) of ``model``."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def _widths(hidden: Sequence[int]) -> tuple[int, ...]:
    widths = tuple(require_positive_int("hidden width", h) for h in hidden)
    if not widths:
        raise InvalidInputError("hidden must list at least one layer width, got ()")
    return widths


class TanhMLP(nn.Module):
    """Linear -> tanh -> ... -> Linear: the paper's classical tabular model."""

    def __init__(self, *, n_features: int, n_classes: int, hidden: Sequence[int] = (32, 32)):
        super().__init__()
        widths = (require_positive_int("n_features", n_features), *_widths(hidden))
        layers: list[nn.Module] = []
        for fan_in, fan_out in itertools.pairwise(widths):
            layers += [nn.Linear(fan_in, fan_out), nn.Tanh()]
        layers.append(nn.Linear(widths[-1], require_positive_int("n_classes", n_classes)))
        self.net = nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x.flatten(1))


class LipschitzMLP(nn.Module):
    """A C-Lipschitz classifier from gradient-norm-preserving (GNP) layers (deel-torchlip).

    Layers: ``SpectralLinear`` (weights orthogonalised by spectral normalisation and Bjorck
    iterations, so every singular value is 1, then scaled) and ``GroupSort2`` (sorts pairs: a
    1-Lipschitz, gradient-norm-preserving activation). With m linear layers each scaled by
    ``C ** (1/m)`` (``k_coef_lip`` of each layer), the map x -> logits is C-Lipschitz in the
    input, ||f(x) - f(x')||_2 <= C ||x - x'||_2: that is how "Lipschitz constant matching the
    clipping threshold C" (paper, section 4) is read here.

    Why each layer gets its own factor: ``deel.torchlip.Sequential(k_coef_lip=C)`` does not do
    this in deel-torchlip 1.0.5. It writes ``C ** (1/n)`` into every child's coefficient after
    the children were built, but a ``SpectralLinear`` built with the default coefficient 1
    registered no scaling, so only the ``GroupSort`` layers pick the factor up: the network ends
    up ``C ** (n_groupsort / n)``-Lipschitz, not C.

    The bound is on the input Lipschitz constant; it does not bound the per-example gradient
    with respect to the parameters by C, so DP-SGD still clips (the diagnostics measure how
    often), and the paper's "Lipschitz networks avoid clipping bias altogether" does not hold
    for this model. The trainable parameters are deel-torchlip's raw weights, which the
    constrained weights do not depend on in scale (V and 10 V give the same network), so the
    per-example gradient norms, and how much is clipped, scale as 1 / ||V|| (the biases'
    part aside): at C = 1.5 and initialisation nearly every example is clipped, and ten-fold
    raw weights cut the mean norm several-fold without changing a logit.

    deel-torchlip recomputes the constrained weights only in training mode and uses a
    cache in eval mode, through which no gradient flows; keep this model in training mode
    (it has no dropout or batch statistics, so that changes nothing else).
    """

    def __init__(
        self, *, n_features: int, n_classes: int, lipschitz: float,
        hidden: Sequence[int] = (32, 32),
    ):
        super().__init__()
        from deel import torchlip  # imported here: a heavy import only this model needs

        self.lipschitz = require_in_range("lipschitz", lipschitz, low=0.0,
                                          hint="the Lipschitz constant is matched to C > 0")
        widths = (require_positive_int("n_features", n_features), *_widths(hidden))
        if any(w % 2 for w in widths[1:]):
            raise InvalidInputError(
                f"hidden widths {widths[1:]} must be even: GroupSort2 sorts pairs of units"
            )
        n_classes = require_positive_int("n_classes", n_classes)
        n_linear = len(widths)
        factor = self.lipschitz ** (1.0 / n_linear)
        layers: list[nn.Module] = []
        for fan_in, fan_out in itertools.pairwise(widths):
            layers += [torchlip.SpectralLinear(fan_in, fan_out, k_coef_lip=factor),
                       torchlip.GroupSort2()]
        layers.append(torchlip.SpectralLinear(widths[-1], n_classes, k_coef_lip=factor))
        self.net = nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x.flatten(1))


class QuantumClassifier(nn.Module):
    """Variational quantum classifier (paper Definition 1 and section 4): logits <Z_k> / tau.

    ``x (B, F)`` (images are flattened) is zero-padded to D = 2^n and amplitude-encoded
    (psi = x / ||x||_2; a zero vector becomes the uniform superposition), then
    the ansatz of :class:`qpriv.quantum.circuits.VariationalCircuit` with ``n_layers`` layers
    is applied and Z is read out on the first K = ``n_classes`` qubits. n is the smallest
    number of qubits with 2^n >= F and n >= K, unless given.

    Noise: ``depolarizing`` lambda scales every expectation by (1 - lambda); ``shots`` S makes
    the read-out an S-shot estimate (exact binomial sampling, drawn by
    :meth:`draw_readout_noise` and passed to the forward as ``readout_noise``: value with shot
    noise, gradient of the exact expectation). ``tau`` is the temperature of the logits.

    Trainable parameters: the 3 n L angles, nothing classical.
    """

    def __init__(
        self, *, n_features: int, n_classes: int, n_layers: int, tau: float = 0.5,
        n_qubits: int | None = None, depolarizing: float = 0.0, shots: int | None = None,
        generator: torch.Generator | None = None,
    ):
        super().__init__()
        self.n_features = require_positive_int("n_features", n_features)
        n_classes = require_positive_int("n_classes", n_classes)
        needed = max(math.ceil(math.log2(self.n_features)), n_classes, 1)
        if n_qubits is None:
            n_qubits = needed
        elif require_positive_int("n_qubits", n_qubits) < needed:
            raise InvalidInputError(
                f"n_qubits = {n_qubits} is too small: {self.n_features} features and "
                f"{n_classes} read-outs need at least {needed} qubits"
            )
        self.circuit = VariationalCircuit(n_qubits=n_qubits, n_layers=n_layers,
                                          n_readout=n_classes)
        self.tau = require_in_range("tau", tau, low=0.0, hint="the logits are <Z_k> / tau")
        self.depolarizing = require_in_range("depolarizing", depolarizing, low=0.0, high=1.0,
                                             low_inclusive=True)
        self.shots = None if shots is None else require_positive_int("shots", shots)
        self.weights = nn.Parameter(self.circuit.init_weights(generator=generator))

    def encode(self, x: Tensor) -> Tensor:
        """Zero-pad the flattened input to D and amplitude-encode it: (B, D)."""
        x = x.flatten(1)
        if x.shape[1] != self.n_features:
            raise InvalidInputError(
                f"inputs have {x.shape[1]} features; this classifier was built for "
                f"{self.n_features}"
            )
        pad = self.circuit.dim - self.n_features
        if pad:
            x = torch.cat([x, x.new_zeros(x.shape[0], pad)], dim=1)
        psi, _ = amplitude_encode_with_mask(x)
        return psi

    def expectations(self, x: Tensor) -> Tensor:
        """Exact (1 - lambda) <Z_k> for a batch: (B, K)."""
        return self.circuit.expectations(self.encode(x), self.weights,
                                         depolarizing=self.depolarizing)

    def forward(self, x: Tensor, readout_noise: Tensor | None = None) -> Tensor:
        e = self.expectations(x)
        if readout_noise is not None:
            e = e + readout_noise
        return e / self.tau

    @torch.no_grad()
    def draw_readout_noise(
        self, x: Tensor, *, generator: torch.Generator | None = None
    ) -> Tensor | None:
        """S-shot estimate minus exact expectation for the batch (None without ``shots``)."""
        if self.shots is None:
            return None
        e = self.expectations(x)
        return sample_expectations(e, shots=self.shots, generator=generator) - e

    def gradient_constant(self) -> float:
        """Theorem 3.2's G = 2 max_k ||O_k|| sqrt(sum_j ||H_j||^2) of this circuit."""
        return circuit_constant(generators=self.circuit.generators(),
                                observables=self.circuit.observables())

    def gradient_bound(self) -> float:
        """Theorem 3.2: every per-example gradient norm is at most 2 G / tau."""
        return gradient_norm_bound(constant=self.gradient_constant(), tau=self.tau)


class GroupNormCNN(nn.Module):
    """Small image CNN with GroupNorm (paper section 4.3), 492 parameters for 4 classes.

    conv 3x3 (1 -> 4) -> GroupNorm(2) -> tanh -> max-pool 2 -> conv 3x3 (4 -> 8) ->
    GroupNorm(2) -> tanh -> adaptive average pool to 2x2 -> linear (32 -> K). The adaptive
    pool keeps the parameter count independent of the image size.
    """

    def __init__(self, *, n_classes: int, channels: tuple[int, int] = (4, 8)):
        super().__init__()
        c1, c2 = (require_positive_int("channels", c) for c in channels)
        if c1 % 2 or c2 % 2:
            raise InvalidInputError(f"channels {channels} must be even (GroupNorm with 2 groups)")
        self.features = nn.Sequential(
            nn.Conv2d(1, c1, 3, padding=1), nn.GroupNorm(2, c1), nn.Tanh(), nn.MaxPool2d(2),
            nn.Conv2d(c1, c2, 3, padding=1), nn.GroupNorm(2, c2), nn.Tanh(),
            nn.AdaptiveAvgPool2d(2),
        )
        self.head = nn.Linear(4 * c2, require_positive_int("n_classes", n_classes))

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim == 3:
            x = x.unsqueeze(1)
        return self.head(self.features(x).flatten(1))
