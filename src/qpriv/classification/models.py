"""The classifiers of the private-training paper (section 4).

* :class:`TanhMLP`: fully connected layers with tanh (tempered sigmoids train best under DP-SGD,
  the paper's ref. [13]).
* :class:`LipschitzMLP`: the same shape built from deel-torchlip's gradient-norm-preserving
  layers (``SpectralLinear`` with orthogonalised weights, ``GroupSort2``), Lipschitz constant
  matched to the clipping threshold C.
* :class:`ProjectedLipschitzMLP`: a 1-Lipschitz MLP for clipless DP-SGD: weights and biases
  projected onto norm balls after every step, inputs clipped to a public norm, so every
  per-example gradient has an analytic bound (:mod:`qpriv.classification.bounds`) and DP-SGD
  calibrates its noise to it instead of clipping.
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

from qpriv.classification.bounds import (
    LayerGradientBound,
    circuit_constant,
    cross_entropy_lipschitz,
    global_gradient_bound,
    gradient_norm_bound,
    lipschitz_mlp_gradient_bounds,
)
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
    for this model (it does for :class:`ProjectedLipschitzMLP`). The trainable parameters are
    deel-torchlip's raw weights, which the constrained weights do not depend on in scale (V
    and 10 V give the same network), so the per-example gradient norms, and how much is
    clipped, scale as 1 / ||V|| (the biases' part aside): at C = 1.5 and initialisation
    nearly every example is clipped, and ten-fold raw weights cut the mean norm several-fold
    without changing a logit.

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


class PairSort(nn.Module):
    """GroupSort with groups of two: each pair (a, b) of units becomes (min, max).

    1-Lipschitz and norm-preserving (it permutes values), like deel-torchlip's ``GroupSort2``,
    which computes the same values. The difference is at ties: deel-torchlip 1.0.5 takes
    ``min`` and ``max`` along the pair axis, and where a = b both return the same index, so the
    backward pass routes both output gradients to one unit and its Jacobian there has spectral
    norm sqrt(2), not 1. ``torch.minimum`` and ``torch.maximum`` split a tie's gradient
    evenly, a Jacobian ((1/2, 1/2), (1/2, 1/2)) of norm 1, so the backward pass never grows a
    gradient: what :func:`qpriv.classification.bounds.lipschitz_mlp_gradient_bounds` needs
    everywhere, not just almost everywhere (a zero input with zero biases ties every pair).
    """

    def forward(self, z: Tensor) -> Tensor:
        if z.shape[-1] % 2:
            raise InvalidInputError(f"PairSort needs an even width, got {z.shape[-1]}")
        pairs = z.unflatten(-1, (-1, 2))
        a, b = pairs[..., 0], pairs[..., 1]
        return torch.stack([torch.minimum(a, b), torch.maximum(a, b)], dim=-1).flatten(-2)


class ProjectedLipschitzMLP(nn.Module):
    """A 1-Lipschitz MLP whose per-example parameter gradients are bounded by construction.

    Forward: x is clipped to norm X (``input_bound``, a public constant: x min(1, X / ||x||)),
    then ``Linear -> PairSort -> ... -> Linear``, and the logits are the output divided by
    ``tau``. The trainable parameters are the effective weights W_k and biases b_k themselves
    (plain ``nn.Linear``, orthogonal initialisation, zero biases), and :meth:`project`, called
    after every optimizer step, puts them back in the constraint set: W_k onto the spectral-norm
    ball ||W_k||_2 <= 1 (singular values clipped at 1: the Euclidean projection) and b_k onto
    the ball ||b_k|| <= B (``bias_bound``). The network is then (1 / tau)-Lipschitz in its
    input, and with the cross-entropy (sqrt(2)-Lipschitz in the logits before the temperature)
    every per-example gradient is bounded by :meth:`gradient_bound`, whatever the example and
    wherever training has taken the weights: DP-SGD calibrates its noise to that bound and
    never clips (the clipless DP-SGD of Bethune et al., "DP-SGD without clipping: the Lipschitz
    neural network way").

    Why not deel-torchlip's ``SpectralLinear`` (:class:`LipschitzMLP`): its trainable tensor is
    a raw weight V that the layer normalises in the forward pass, and the gradient with respect
    to V scales as 1 / ||V||, which nothing bounds. Differentiating with respect to the
    effective weight and projecting after the step bounds it.
    """

    WEIGHT_NORM_BOUND = 1.0
    """The radius of every weight's spectral-norm ball."""

    def __init__(
        self, *, n_features: int, n_classes: int, hidden: Sequence[int] = (32, 32),
        tau: float = 1.0, input_bound: float = 16.0, bias_bound: float = 1.0,
    ):
        super().__init__()
        widths = (require_positive_int("n_features", n_features), *_widths(hidden),
                  require_positive_int("n_classes", n_classes))
        if any(w % 2 for w in widths[1:-1]):
            raise InvalidInputError(
                f"hidden widths {widths[1:-1]} must be even: PairSort sorts pairs of units"
            )
        self.tau = require_in_range("tau", tau, low=0.0, hint="the logits are f(x) / tau")
        self.input_bound = require_in_range("input_bound", input_bound, low=0.0,
                                            hint="inputs are clipped to this L2 norm")
        self.bias_bound = require_in_range("bias_bound", bias_bound, low=0.0,
                                           low_inclusive=True,
                                           hint="biases are projected onto this L2 ball")
        self.layers = nn.ModuleList(nn.Linear(fan_in, fan_out)
                                    for fan_in, fan_out in itertools.pairwise(widths))
        self.activation = PairSort()
        with torch.no_grad():
            for layer in self.layers:
                nn.init.orthogonal_(layer.weight)
                layer.bias.zero_()
        self.project()

    def clip_input(self, x: Tensor) -> Tensor:
        """x min(1, X / ||x||) per example: every input norm is at most X."""
        x = x.flatten(1)
        norms = torch.linalg.vector_norm(x, dim=1, keepdim=True)
        return x * torch.clamp(self.input_bound / norms.clamp(min=torch.finfo(x.dtype).tiny),
                               max=1.0)

    def forward(self, x: Tensor) -> Tensor:
        h = self.clip_input(x)
        for layer in self.layers[:-1]:
            h = self.activation(layer(h))
        return self.layers[-1](h) / self.tau

    @torch.no_grad()
    def project(self) -> None:
        """Weights onto ||W||_2 <= 1 (singular values clipped at 1), biases onto ||b|| <= B."""
        for layer in self.layers:
            u, s, vh = torch.linalg.svd(layer.weight, full_matrices=False)
            if float(s.max()) > self.WEIGHT_NORM_BOUND:
                layer.weight.copy_(u @ torch.diag(s.clamp(max=self.WEIGHT_NORM_BOUND)) @ vh)
            norm = float(torch.linalg.vector_norm(layer.bias))
            if norm > self.bias_bound:
                layer.bias.mul_(self.bias_bound / norm)

    @torch.no_grad()
    def weight_norms(self) -> list[float]:
        """The spectral norms ||W_k||_2 of the current weights (<= 1 after :meth:`project`)."""
        return [float(torch.linalg.matrix_norm(layer.weight, ord=2)) for layer in self.layers]

    def layer_gradient_bounds(self, weight_norms: Sequence[float] | None = None
                              ) -> tuple[LayerGradientBound, ...]:
        """Per-layer bounds with ``weight_norms`` (default: the constraint, 1 for every layer;
        :meth:`weight_norms` gives the current weights' own, a tighter bound of the moment)."""
        radii = ([self.WEIGHT_NORM_BOUND] * len(self.layers) if weight_norms is None
                 else list(weight_norms))
        return lipschitz_mlp_gradient_bounds(
            input_bound=self.input_bound, weight_norms=radii,
            bias_bounds=[self.bias_bound] * len(self.layers),
            loss_lipschitz=cross_entropy_lipschitz(tau=self.tau))

    def gradient_bound(self) -> float:
        """The bound Delta on every per-example gradient norm under the constraint: the
        sensitivity of DP-SGD's sum, to which the noise is calibrated."""
        return global_gradient_bound(self.layer_gradient_bounds())


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
        return self._logits(x, self.weights, readout_noise)

    def forward_per_example(self, x: Tensor, parameters: dict[str, Tensor],
                            readout_noise: Tensor | None = None) -> Tensor:
        """The logits of example i under its own copy of the angles, ``parameters["weights"]``
        (B, L, n, 3): example i's outputs depend on row i alone, so the gradient of the summed
        losses with respect to row i is example i's gradient
        (:func:`qpriv.training.dpsgd.per_example_gradient_dict` uses this instead of vmap)."""
        return self._logits(x, parameters["weights"], readout_noise)

    def _logits(self, x: Tensor, weights: Tensor, readout_noise: Tensor | None) -> Tensor:
        """The forward of both: (1 - lambda) <Z_k> (+ shot noise) / tau."""
        e = self.circuit.expectations(self.encode(x), weights, depolarizing=self.depolarizing)
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
