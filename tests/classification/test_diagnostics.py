"""Gradient diagnostics: closed forms on hand-made gradients, the MSE split vs Monte-Carlo."""

from __future__ import annotations

import pytest
import torch

from qpriv.classification.diagnostics import (
    clip_factors,
    gradient_diagnostics,
    simulate_update_mse,
    update_mse_decomposition,
)
from qpriv.errors import InvalidInputError


def test_statistics_of_a_hand_made_gradient_set() -> None:
    # g_1 = (3, 4) (norm 5, clipped to (0.6, 0.8) at C = 1), g_2 = (0, 0.5) (not clipped)
    grads = torch.tensor([[3.0, 4.0], [0.0, 0.5]])
    d = gradient_diagnostics(grads, clip=1.0, batch_size=1, noise_multiplier=0.0,
                             sampling="iid")
    population = torch.tensor([1.5, 2.25])
    clipped_mean = torch.tensor([0.3, 0.65])
    assert d["population_grad_norm"] == pytest.approx(float(population.norm()))
    assert d["mean_example_norm"] == pytest.approx(2.75)
    assert d["max_example_norm"] == pytest.approx(5.0)
    assert d["clip_probability"] == 0.5
    assert d["clipping_bias_norm"] == pytest.approx(float((population - clipped_mean).norm()))
    cosine = float(population @ clipped_mean / (population.norm() * clipped_mean.norm()))
    assert d["alignment"] == pytest.approx(cosine)
    # with |B| = 1: sampling variance = E||c_i - cbar||^2 = ||(0.3, 0.15)||^2
    assert d["mse_sampling_variance"] == pytest.approx(0.3**2 + 0.15**2)
    assert d["mse_bias_squared"] == pytest.approx(d["clipping_bias_norm"] ** 2)
    assert d["mse_noise_variance"] == 0.0


def test_no_clipping_means_no_bias_and_full_alignment() -> None:
    grads = torch.randn(50, 7, generator=torch.Generator().manual_seed(0))
    d = gradient_diagnostics(grads, clip=None, batch_size=10, noise_multiplier=0.0,
                             sampling="shuffle")
    assert d["clip_probability"] == 0.0
    assert d["clipping_bias_norm"] == 0.0
    assert d["alignment"] == pytest.approx(1.0)
    # a rescaling (every gradient clipped by the same factor) keeps the direction
    same_norm = torch.nn.functional.normalize(grads, dim=1) * 3.0
    d = gradient_diagnostics(same_norm, clip=1.0, batch_size=10, noise_multiplier=0.0,
                             sampling="iid")
    assert d["clip_probability"] == 1.0
    assert d["alignment"] == pytest.approx(1.0)
    assert d["clipping_bias_norm"] == pytest.approx(float(same_norm.mean(0).norm()) * 2 / 3)


def test_clip_factors() -> None:
    norms = torch.tensor([0.0, 0.5, 2.0, 4.0])
    torch.testing.assert_close(clip_factors(norms, 2.0), torch.tensor([1.0, 1.0, 1.0, 0.5]))
    torch.testing.assert_close(clip_factors(norms, None), torch.ones(4))


def heavy_tailed_gradients(n: int, p: int, seed: int) -> torch.Tensor:
    """A skewed set: most gradients small, a few large ones pointing elsewhere (biased clipping)."""
    g = torch.Generator().manual_seed(seed)
    base = torch.randn(n, p, generator=g, dtype=torch.float64) * 0.3 + 0.2
    scale = torch.rand(n, 1, generator=g, dtype=torch.float64) ** (-1 / 1.5)  # Pareto(1, 1.5)
    spikes = torch.zeros(n, p, dtype=torch.float64)
    spikes[: n // 10, 0] = 5.0
    return base * scale + spikes


@pytest.mark.parametrize("sampling", ["iid", "shuffle", "poisson"])
@pytest.mark.parametrize("sigma", [0.0, 0.8])
def test_mse_decomposition_adds_up_to_the_directly_measured_mse(sampling: str, sigma: float):
    grads = heavy_tailed_gradients(200, 12, seed=1)
    parts = update_mse_decomposition(grads, clip=1.0, batch_size=16, noise_multiplier=sigma,
                                     sampling=sampling)
    assert parts["total"] == pytest.approx(
        parts["sampling_variance"] + parts["noise_variance"] + parts["bias_squared"])
    assert parts["bias_squared"] > 0.05 * parts["total"]  # every term matters in this setting
    if sigma:
        assert parts["noise_variance"] == pytest.approx(12 * (sigma * 1.0) ** 2 / 16**2)
    measured = simulate_update_mse(grads, clip=1.0, batch_size=16, noise_multiplier=sigma,
                                   sampling=sampling, n_batches=40_000,
                                   generator=torch.Generator().manual_seed(2))
    assert measured == pytest.approx(parts["total"], rel=0.03)


def test_iid_shuffle_and_poisson_sampling_variances_differ_as_derived() -> None:
    grads = heavy_tailed_gradients(100, 5, seed=3)
    kwargs = {"clip": 2.0, "batch_size": 25, "noise_multiplier": 0.0}
    iid = update_mse_decomposition(grads, sampling="iid", **kwargs)["sampling_variance"]
    shuffle = update_mse_decomposition(grads, sampling="shuffle", **kwargs)["sampling_variance"]
    poisson = update_mse_decomposition(grads, sampling="poisson", **kwargs)["sampling_variance"]
    assert shuffle == pytest.approx(iid * (100 - 25) / 99)
    clipped = grads * clip_factors(grads.norm(dim=1), 2.0)[:, None]
    assert poisson == pytest.approx(0.75 * float(clipped.square().sum(1).mean()) / 25)
    # the full batch without replacement has no sampling error at all
    full = update_mse_decomposition(grads, clip=2.0, batch_size=100, noise_multiplier=0.0,
                                    sampling="shuffle")
    assert full["sampling_variance"] == 0.0


def test_diagnostics_validate_inputs() -> None:
    grads = torch.ones(4, 3)
    with pytest.raises(InvalidInputError, match=r"batch_size = 5 is outside the valid range"):
        update_mse_decomposition(grads, clip=1.0, batch_size=5, noise_multiplier=0.0)
    with pytest.raises(InvalidInputError, match="sampling"):
        update_mse_decomposition(grads, clip=1.0, batch_size=2, noise_multiplier=0.0,
                                 sampling="bootstrap")
    with pytest.raises(InvalidInputError, match="clip = -1 is outside"):
        gradient_diagnostics(grads, clip=-1.0, batch_size=2, noise_multiplier=0.0,
                             sampling="iid")
    with pytest.raises(InvalidInputError, match=r"\(N, P\)"):
        gradient_diagnostics(torch.ones(3), clip=1.0, batch_size=2, noise_multiplier=0.0,
                             sampling="iid")
    # the cosine is undefined for a zero mean: None (JSON null), not NaN
    zero = gradient_diagnostics(torch.zeros(3, 2), clip=1.0, batch_size=2,
                                noise_multiplier=0.0, sampling="iid")
    assert zero["alignment"] is None
