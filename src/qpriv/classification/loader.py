"""Hierarchically learned amplitude loaders for the quantum image pipeline (paper section 4.3).

The paper's quantum image classifier has no classical feature extraction: each image is
loaded into a quantum state by a learned circuit, trained coarse-to-fine ("hierarchical
learning", ref. [37]), then the loader is frozen and merged with the variational classifier.

Register. A 2^m x 2^m grey image lives on 2m qubits, row bits r_1..r_m (MSB first) on wires
0..m-1 and column bits c_1..c_m on wires m..2m-1, so the amplitude of pixel (r, c) is entry
r 2^m + c of the state: the row-major flattened image, as amplitude encoding would place it.

Levels. Level l = 1..m fits the image average-pooled to 2^l x 2^l. Its active wires are
r_1..r_l and c_1..c_l; the others sit in |+>. A product with |+> on the fine wires is exactly
the coarse image upsampled by pixel repetition, so the target of level l is
normalise(upsample(pool_l(image))) on the full register, and the fidelity on the full register
equals the fidelity at the coarse resolution. Level l adds ``layers_per_level`` layers of
[RY on every active wire, then a ring of controlled-RY on the active wires]; at angle zero all
of them are the identity, so a new level starts exactly from the previous level's state with
the newly active wires in |+> (the upsampled fit), and then all angles of levels 1..l are
trained. RY and controlled-RY are real, so the loaded state is real, as a grey image is.
Initial state: |0> on the wires of level 1, |+> on all others.

Privacy: every image has its own loader angles and its own loss term, and Adam updates each
coordinate from its own gradient, so an image's loader depends on that image only: fitting
loaders is a per-record transformation and does not touch the privacy of DP-SGD on the
loaded states (the classifier's training is what DP-SGD protects).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from qpriv.errors import InvalidInputError, require_in_range, require_positive_int
from qpriv.quantum.circuits import apply_controlled, apply_one_qubit, ring_links, ry_matrices


@dataclass(frozen=True)
class LoadedImages:
    """The states the frozen loaders prepare, with how well they match the images."""

    states: Tensor  # (N, 4^m) real unit vectors
    fidelities: Tensor  # (N,) |<target|state>|^2 at full resolution
    level_fidelities: tuple[float, ...]  # mean fidelity reached at each level
    angles_per_image: int

    def summary(self) -> dict:
        return {"mean_fidelity": float(self.fidelities.mean()),
                "min_fidelity": float(self.fidelities.min()),
                "level_mean_fidelities": list(self.level_fidelities),
                "loader_angles_per_image": self.angles_per_image,
                "note": "per-image loader angles, learned coarse to fine and frozen; not "
                        "trainable parameters of the classifier"}


def _levels(side: int) -> int:
    m = round(math.log2(side)) if side >= 2 else 0
    if side < 2 or (1 << m) != side:
        raise InvalidInputError(
            f"images must be square with a power-of-two side >= 2 for the amplitude loader; "
            f"got side {side}"
        )
    return m


def level_targets(images: Tensor, *, level: int) -> Tensor:
    """Normalised targets of ``level``: pool to 2^l x 2^l, repeat back to full size, flatten."""
    n, side, _ = images.shape
    m = _levels(side)
    factor = 1 << (m - level)
    pooled = torch.nn.functional.avg_pool2d(images[:, None], factor) if factor > 1 else \
        images[:, None]
    full = pooled.repeat_interleave(factor, dim=2).repeat_interleave(factor, dim=3)
    flat = full.reshape(n, -1).to(torch.float64)
    norm = flat.norm(dim=1, keepdim=True)
    uniform = torch.full_like(flat, 1.0 / math.sqrt(flat.shape[1]))
    return torch.where(norm > 1e-12, flat / norm.clamp(min=1e-300), uniform)


def active_wires(level: int, m: int) -> list[int]:
    """Wires of r_1..r_l and c_1..c_l."""
    return [*range(level), *range(m, m + level)]


def _initial_state(n_images: int, m: int, *, dtype: torch.dtype) -> Tensor:
    n_qubits = 2 * m
    state = torch.ones(n_images, 1, dtype=dtype)
    level_one = set(active_wires(1, m))
    plus = torch.tensor([1.0, 1.0], dtype=dtype) / math.sqrt(2)
    zero = torch.tensor([1.0, 0.0], dtype=dtype)
    for wire in range(n_qubits):
        single = zero if wire in level_one else plus
        state = (state[:, :, None] * single[None, None, :]).reshape(n_images, -1)
    return state


def loader_states(angles: list[Tensor], *, m: int) -> Tensor:
    """States prepared by the loader angles of levels 1..len(angles), batched over images.

    ``angles[l-1]`` has shape (N, layers, 2 * active) for level l: the RY angles of the active
    wires then the controlled-RY angles of the ring links.
    """
    n_images = angles[0].shape[0]
    n_qubits = 2 * m
    state = _initial_state(n_images, m, dtype=angles[0].dtype)
    for level, level_angles in enumerate(angles, start=1):
        wires = active_wires(level, m)
        links = [(wires[a], wires[b]) for a, b in ring_links(len(wires))]
        for layer in range(level_angles.shape[1]):
            ry = ry_matrices(level_angles[:, layer, :len(wires)])
            cry = ry_matrices(level_angles[:, layer, len(wires):])
            for i, wire in enumerate(wires):
                state = apply_one_qubit(state, ry[:, i], wire=wire, n_qubits=n_qubits)
            for i, (control, target) in enumerate(links):
                state = apply_controlled(state, cry[:, i], control=control, target=target,
                                         n_qubits=n_qubits)
    return state


def fit_loaders(
    images: Tensor, *, layers_per_level: int = 3, steps_per_level: int = 200, lr: float = 0.05,
) -> LoadedImages:
    """Learn one loader per image, coarse to fine, then freeze it; return the loaded states.

    Minimises sum_i (1 - <target_i|psi_i>^2) with Adam at every level (all angles of levels
    1..l are trained at level l, the new ones starting at zero). ``images`` (N, S, S), S a
    power of two, non-negative grey levels.
    """
    if not isinstance(images, Tensor) or images.ndim != 3 or images.shape[1] != images.shape[2]:
        raise InvalidInputError(
            "images must be a tensor (N, S, S) of square grey images, got "
            f"{tuple(images.shape) if isinstance(images, Tensor) else type(images).__name__}"
        )
    m = _levels(images.shape[1])
    layers = require_positive_int("layers_per_level", layers_per_level)
    steps = require_positive_int("steps_per_level", steps_per_level)
    lr = require_in_range("lr", lr, low=0.0)
    n_images = images.shape[0]
    angles: list[Tensor] = []
    level_means = []
    with torch.enable_grad():
        for level in range(1, m + 1):
            n_active = 2 * level
            n_links = len(ring_links(n_active))
            angles.append(torch.zeros(n_images, layers, n_active + n_links,
                                      dtype=torch.float64, requires_grad=True))
            target = level_targets(images, level=level)
            optimizer = torch.optim.Adam(angles, lr=lr)
            for _ in range(steps):
                optimizer.zero_grad(set_to_none=True)
                overlap = (loader_states(angles, m=m) * target).sum(dim=1)
                loss = (1.0 - overlap.square()).sum()
                loss.backward()
                optimizer.step()
            with torch.no_grad():
                overlap = (loader_states(angles, m=m) * target).sum(dim=1)
            level_means.append(float(overlap.square().mean()))
    with torch.no_grad():
        states = loader_states(angles, m=m)
        fidelity = (states * level_targets(images, level=m)).sum(dim=1).square()
    return LoadedImages(
        states=states.to(torch.float32), fidelities=fidelity.to(torch.float32),
        level_fidelities=tuple(level_means),
        angles_per_image=sum(a.shape[1] * a.shape[2] for a in angles),
    )
