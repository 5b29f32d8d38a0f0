"""The hierarchical amplitude loader: targets, the coarse-to-fine warm start, per-image fits."""

from __future__ import annotations

import pytest
import torch

from qpriv.classification.loader import fit_loaders, level_targets, loader_states
from qpriv.errors import InvalidInputError


def images(n: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    smooth = torch.nn.functional.interpolate(torch.rand(n, 1, 2, 2, generator=g), size=(8, 8),
                                             mode="bilinear", align_corners=True)[:, 0]
    return smooth + 0.1 * torch.rand(n, 8, 8, generator=g)


def test_level_targets_are_normalised_pooled_images() -> None:
    x = images(3, 0)
    full = level_targets(x, level=3)
    flat = x.reshape(3, -1).double()
    torch.testing.assert_close(full, flat / flat.norm(dim=1, keepdim=True))
    coarse = level_targets(x, level=1).reshape(3, 8, 8)
    # level 1: four constant 4x4 blocks holding the block means, normalised
    means = x.double().reshape(3, 2, 4, 2, 4).mean(dim=(2, 4))  # (3, 2, 2)
    blocks = means.repeat_interleave(4, dim=1).repeat_interleave(4, dim=2).reshape(3, -1)
    torch.testing.assert_close(coarse.reshape(3, -1), blocks / blocks.norm(dim=1, keepdim=True))


def test_zero_angles_give_the_upsampled_initial_state() -> None:
    # level-1 wires in |0>, the fine wires in |+>: pixel (0, 0) block of a 2x2 image, upsampled
    zero = [torch.zeros(2, 1, 3, dtype=torch.float64)]
    state = loader_states(zero, m=3)
    expected = torch.zeros(8, 8, dtype=torch.float64)
    expected[:4, :4] = 1.0 / 4.0
    torch.testing.assert_close(state, expected.reshape(1, -1).expand(2, -1))
    # adding a level at zero angles changes nothing
    state2 = loader_states([*zero, torch.zeros(2, 1, 8, dtype=torch.float64)], m=3)
    torch.testing.assert_close(state2, state)
    assert torch.allclose(state.norm(dim=1), torch.ones(2, dtype=torch.float64))


def test_fitted_loaders_reach_high_fidelity_coarse_to_fine() -> None:
    x = images(6, 1)
    loaded = fit_loaders(x, layers_per_level=2, steps_per_level=60, lr=0.1)
    assert loaded.states.shape == (6, 64)
    torch.testing.assert_close(loaded.states.norm(dim=1), torch.ones(6))
    assert loaded.level_fidelities[0] > 0.999  # a 2x2 image is 2 qubits: learned exactly
    assert float(loaded.fidelities.mean()) > 0.9
    assert loaded.angles_per_image == 2 * (2 + 1) + 2 * (4 + 4) + 2 * (6 + 6)
    target = level_targets(x, level=3).float()
    fid = (loaded.states * target).sum(1).square()
    torch.testing.assert_close(fid, loaded.fidelities)


def test_each_image_loader_depends_on_its_image_only() -> None:
    x = images(4, 2)
    together = fit_loaders(x, layers_per_level=1, steps_per_level=20)
    alone = fit_loaders(x[2:3], layers_per_level=1, steps_per_level=20)
    torch.testing.assert_close(together.states[2:3], alone.states, atol=1e-6, rtol=0)


def test_loader_rejects_bad_images() -> None:
    with pytest.raises(InvalidInputError, match="power-of-two side"):
        fit_loaders(torch.rand(2, 6, 6))
    with pytest.raises(InvalidInputError, match=r"\(N, S, S\)"):
        fit_loaders(torch.rand(2, 4, 8))


def test_each_level_trains_all_its_angles_and_the_states_are_frozen(monkeypatch) -> None:
    from qpriv.classification import loader

    sizes, real = [], torch.optim.Adam

    def adam(params, **kwargs):
        params = list(params)
        sizes.append(len(params))
        return real(params, **kwargs)

    monkeypatch.setattr(loader.torch.optim, "Adam", adam)
    loaded = fit_loaders(torch.rand(2, 8, 8, generator=torch.Generator().manual_seed(0)),
                         layers_per_level=1, steps_per_level=2)
    assert sizes == [1, 2, 3]  # coarse to fine: each level refines every earlier angle too
    assert not loaded.states.requires_grad
