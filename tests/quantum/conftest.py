"""Shared helpers for the quantum tests: random states and an exact multinomial goodness-of-fit."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np
import pytest
import torch
from scipy import stats


def random_density_matrices(n: int, dim: int, *, generator: torch.Generator) -> torch.Tensor:
    """Full-rank random density matrices G G^+ / tr(G G^+) (Ginibre), complex128 (n, D, D)."""
    shape = (n, dim, dim)
    g = torch.complex(
        torch.randn(shape, generator=generator, dtype=torch.float64),
        torch.randn(shape, generator=generator, dtype=torch.float64),
    )
    rho = g @ g.conj().transpose(-2, -1)
    return rho / torch.diagonal(rho, dim1=-2, dim2=-1).sum(-1)[:, None, None]


def multinomial_chi_square(
    counts: torch.Tensor, probs: np.ndarray, *, n_shots: int
) -> tuple[float, float]:
    """Pearson chi-square of observed count vectors against the exact Multinomial(n, probs) law.

    ``counts`` has shape (M, K): M independent draws. Every composition of ``n_shots`` into K
    parts is a cell; cells with expected count below 5 are pooled into one. Returns
    (statistic, p-value).
    """
    n_outcomes = len(probs)
    compositions = [
        c for c in itertools.product(range(n_shots + 1), repeat=n_outcomes) if sum(c) == n_shots
    ]
    index = {c: i for i, c in enumerate(compositions)}
    observed = np.zeros(len(compositions))
    for row in counts.tolist():
        observed[index[tuple(row)]] += 1
    expected = stats.multinomial.pmf(np.array(compositions), n_shots, probs) * counts.shape[0]
    small = expected < 5
    obs = np.append(observed[~small], observed[small].sum())
    exp = np.append(expected[~small], expected[small].sum())
    if exp[-1] == 0:
        obs, exp = obs[:-1], exp[:-1]
    statistic = float(((obs - exp) ** 2 / exp).sum())
    return statistic, float(stats.chi2.sf(statistic, len(exp) - 1))


@pytest.fixture
def chi_square() -> Callable[..., tuple[float, float]]:
    return multinomial_chi_square


@pytest.fixture
def density_matrices() -> Callable[..., torch.Tensor]:
    return random_density_matrices

