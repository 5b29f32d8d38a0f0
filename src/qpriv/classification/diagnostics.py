"""Diagnostics of clipped and noised gradients from the full per-example distribution.

The paper (section 3.1, eq. 12-14, and Figures 3-6, 8) studies, at the end of every epoch and
over every training example i (the "population" is the training set, the empirical
distribution):

* the population gradient g = mean_i g_i and its norm ||g||;
* the mean and maximum per-example norm, E_i ||g_i|| and max_i ||g_i||;
* the clipping probability p_clip = Pr[||g_i|| > C];
* the clipping bias b_C = E[g_i - clip_C(g_i)] = g - gbar_C (eq. 13) and its norm, where
  clip_C(g) = g min(1, C / ||g||) and gbar_C = mean_i clip_C(g_i);
* the directional alignment A_C = <gbar_C, g> / (||gbar_C|| ||g||) (eq. 14);
* the mean-squared error of the privatised update g^_B against g (eq. 12), split into sampling
  variance + noise variance + squared bias. Which sampling variance depends on how batches are
  drawn (``sampling``), each formula exact for the training set:

  - ``iid`` (the paper's i.i.d. form): |B| draws with replacement, update = mean + Z / |B|:
    sampling = E_i ||c_i - gbar_C||^2 / |B|, noise = p sigma^2 C^2 / |B|^2;
  - ``shuffle`` (fixed-size batches of a random permutation, without replacement):
    sampling = (N - |B|) / (N - 1) E_i ||c_i - gbar_C||^2 / |B|, noise as ``iid``; this is
    a full batch's MSE (where |B| does not divide N, an epoch's last batch is smaller and
    noisier: 38 of 1638 examples at |B| = 64);
  - ``poisson`` (each example independently with rate q = |B| / N, the sum divided by the
    expected size qN, as Opacus and the RDP accountant assume):
    sampling = (1 - q) E_i ||c_i||^2 / (qN)  (a second moment, not a variance: the batch size
    itself is random), noise = p sigma^2 C^2 / (qN)^2;

  with c_i = clip_C(g_i), p the number of parameters and sigma the noise multiplier. The cross
  terms vanish because the noise is independent and centred and E[update] = gbar_C.
  :func:`simulate_update_mse` measures the same MSE directly by drawing batches, the slow twin
  the tests compare against.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from qpriv.errors import InvalidInputError, require_in_range, require_positive_int
from qpriv.training.dpsgd import clip_factors

__all__ = ["gradient_diagnostics", "simulate_update_mse",
           "update_mse_decomposition"]

SAMPLING = ("iid", "shuffle", "poisson")


def _check_grads(grads: Tensor) -> Tensor:
    if not isinstance(grads, Tensor) or grads.ndim != 2 or grads.shape[0] < 1:
        raise InvalidInputError(
            "per-example gradients must be a tensor (N, P) with N >= 1 examples, got "
            f"{tuple(grads.shape) if isinstance(grads, Tensor) else type(grads).__name__}"
        )
    return grads.to(torch.float64)


def _clip_value(clip: float | None) -> float:
    if clip is None:
        return math.inf
    return require_in_range("clip", clip, low=0.0, hint="the clipping threshold C is > 0")


def _sampling(sampling: str) -> str:
    if sampling not in SAMPLING:
        raise InvalidInputError(f"sampling = {sampling!r} is not one of {SAMPLING}")
    return sampling


def update_mse_decomposition(
    grads: Tensor, *, clip: float | None, batch_size: int, noise_multiplier: float,
    sampling: str = "iid",
) -> dict[str, float]:
    """Eq. (12): E||g^_B - g||^2 = sampling variance + noise variance + squared bias.

    ``grads`` (N, P) are all per-example gradients; ``clip`` C (None: no clipping, and the
    noise, if any, is then scaled by 1); ``noise_multiplier`` sigma (0: clipping only).
    Returns ``sampling_variance``, ``noise_variance``, ``bias_squared`` and their ``total``.
    """
    g = _check_grads(grads)
    n, p = g.shape
    batch = require_positive_int("batch_size", batch_size)
    if batch > n:
        raise InvalidInputError(f"batch_size = {batch} is outside the valid range [1, N = {n}]")
    sigma = require_in_range("noise_multiplier", noise_multiplier, low=0.0, low_inclusive=True)
    c = _clip_value(clip)
    clipped = g * clip_factors(g.norm(dim=1), clip)[:, None]
    mean_clipped = clipped.mean(dim=0)
    bias_squared = float((g.mean(dim=0) - mean_clipped).square().sum())
    centred = float((clipped - mean_clipped).square().sum(dim=1).mean())
    scale = 1.0 if math.isinf(c) else c
    mode = _sampling(sampling)
    if mode == "poisson":
        rate = batch / n
        expected = rate * n
        sampling_var = (1 - rate) * float(clipped.square().sum(dim=1).mean()) / expected
        noise_var = p * (sigma * scale) ** 2 / expected**2
    else:
        sampling_var = centred / batch
        if mode == "shuffle":
            sampling_var *= (n - batch) / (n - 1) if n > 1 else 0.0
        noise_var = p * (sigma * scale) ** 2 / batch**2
    return {"sampling_variance": sampling_var, "noise_variance": noise_var,
            "bias_squared": bias_squared, "total": sampling_var + noise_var + bias_squared}


def simulate_update_mse(
    grads: Tensor, *, clip: float | None, batch_size: int, noise_multiplier: float,
    sampling: str = "iid", n_batches: int = 10_000, generator: torch.Generator | None = None,
) -> float:
    """Monte-Carlo E||g^_B - g||^2: draw ``n_batches`` batches, clip, sum, add noise, average.

    The direct measurement that :func:`update_mse_decomposition` must match (the slow twin).
    """
    g = _check_grads(grads)
    n, p = g.shape
    batch = require_positive_int("batch_size", batch_size)
    n_batches = require_positive_int("n_batches", n_batches)
    c = _clip_value(clip)
    scale = 1.0 if math.isinf(c) else c
    clipped = g * clip_factors(g.norm(dim=1), clip)[:, None]
    target = g.mean(dim=0)
    mode = _sampling(sampling)
    errors = torch.empty(n_batches, dtype=torch.float64)
    chunk = max(1, min(n_batches, (1 << 22) // max(n, 1)))
    for start in range(0, n_batches, chunk):
        m = min(chunk, n_batches - start)
        if mode == "iid":
            index = torch.randint(n, (m, batch), generator=generator)
            sums = clipped[index].sum(dim=1)
            denom = batch
        elif mode == "shuffle":
            index = torch.rand(m, n, generator=generator, dtype=torch.float64).argsort(dim=1)
            sums = clipped[index[:, :batch]].sum(dim=1)
            denom = batch
        else:
            mask = torch.rand(m, n, generator=generator, dtype=torch.float64) < batch / n
            sums = mask.to(torch.float64) @ clipped
            denom = batch
        noise = _gaussian_noise(m, p, sigma=noise_multiplier * scale, generator=generator)
        update = (sums + noise) / denom
        errors[start:start + m] = (update - target).square().sum(dim=1)
    return float(errors.mean())


def _gaussian_noise(rows: int, dim: int, *, sigma: float, generator: torch.Generator | None
                ) -> Tensor:
    """Gaussian noise N(0, sigma^2 I) of shape (rows, dim), float64 (zeros when sigma = 0)."""
    if sigma == 0:
        return torch.zeros(rows, dim, dtype=torch.float64)
    return sigma * torch.randn(rows, dim, generator=generator, dtype=torch.float64)


def gradient_diagnostics(
    grads: Tensor, *, clip: float | None, batch_size: int, noise_multiplier: float,
    sampling: str,
) -> dict[str, float]:
    """Every statistic of the module docstring for one snapshot of per-example gradients.

    Returns a flat JSON-able dict: ``population_grad_norm``, ``mean_example_norm``,
    ``max_example_norm``, ``clip_probability``, ``clipping_bias_norm``, ``alignment`` (None
    where a mean is zero and the cosine is undefined), and ``mse_*`` from
    :func:`update_mse_decomposition`.
    """
    g = _check_grads(grads)
    norms = g.norm(dim=1)
    c = _clip_value(clip)
    clipped = g * clip_factors(norms, clip)[:, None]
    population = g.mean(dim=0)
    mean_clipped = clipped.mean(dim=0)
    pop_norm = float(population.norm())
    clipped_norm = float(mean_clipped.norm())
    alignment = (float(population @ mean_clipped) / (pop_norm * clipped_norm)
                 if pop_norm > 0 and clipped_norm > 0 else None)
    mse = update_mse_decomposition(g, clip=clip, batch_size=min(batch_size, g.shape[0]),
                                   noise_multiplier=noise_multiplier, sampling=sampling)
    return {
        "population_grad_norm": pop_norm,
        "mean_example_norm": float(norms.mean()),
        "max_example_norm": float(norms.max()),
        "clip_probability": float((norms > c).to(torch.float64).mean()),
        "clipping_bias_norm": float((population - mean_clipped).norm()),
        "alignment": alignment,
        **{f"mse_{k}": v for k, v in mse.items()},
    }
