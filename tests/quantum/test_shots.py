"""Exact multinomial shot sampling: the guide-table sampler against the exact law."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats

from qpriv.errors import InvalidInputError
from qpriv.quantum import frequencies, sample_counts
from qpriv.quantum.shots import _ONE, _GuideTable, _thresholds


def test_counts_have_the_right_shape_dtype_and_total() -> None:
    g = torch.Generator().manual_seed(0)
    q = torch.softmax(torch.randn(2, 3, 16, generator=g), dim=-1)
    counts = sample_counts(q, 100, generator=g)
    assert counts.shape == (2, 3, 16) and counts.dtype == torch.int64
    assert bool((counts.sum(-1) == 100).all()) and bool((counts >= 0).all())


def _distributions(n_outcomes: int, g: torch.Generator) -> list[torch.Tensor]:
    rows = 32
    uniform = torch.full((rows, n_outcomes), 1.0 / n_outcomes, dtype=torch.float64)
    peaked = torch.rand(rows, n_outcomes, generator=g, dtype=torch.float64) ** 12
    sparse = torch.rand(rows, n_outcomes, generator=g, dtype=torch.float64)
    sparse[sparse < 0.7] = 0
    sparse[:, 0] += 1e-3
    tiny_head = torch.rand(rows, n_outcomes, generator=g, dtype=torch.float64) * 1e-9
    tiny_head[:, -1] = 1
    return [d / d.sum(1, keepdim=True) for d in (uniform, peaked, sparse, tiny_head)]


@pytest.mark.parametrize("cells_per_outcome", [2, 0.25])
@pytest.mark.parametrize("n_outcomes", [1, 2, 3, 16, 256])
def test_guide_table_inverts_the_cdf_exactly(n_outcomes: int, cells_per_outcome: float) -> None:
    """Every integer u maps to #{k : T_k <= u}, including thresholds, their neighbours and the
    edges of every cell, and in crowded cells (several thresholds) too: with G = 2K cells (as
    inversion builds it) and G = K / 4 (the uniform split's residual)."""
    g = torch.Generator().manual_seed(n_outcomes)
    crowded_seen = False
    n_cells = max(2, 1 << (int(n_outcomes * cells_per_outcome) - 1).bit_length())
    for probs in _distributions(n_outcomes, g):
        cdf = probs.cumsum(dim=1)
        table = _GuideTable(_thresholds(cdf, cdf[:, -1:]), n_cells=n_cells)
        crowded_seen |= table.any_crowded
        rows = probs.shape[0]
        cells = (torch.arange(table.n_cells, dtype=torch.int64) << table.shift).expand(rows, -1)
        thresholds = table.thresholds.to(torch.int64)
        u = torch.cat([
            torch.randint(0, _ONE, (rows, 2000), generator=g),
            thresholds, thresholds - 1, thresholds + 1, cells, cells - 1,
            torch.full((rows, 1), _ONE - 1), torch.zeros(rows, 1, dtype=torch.int64),
        ], dim=1).clamp(0, _ONE - 1)
        got = table.outcomes(u.to(torch.int32).contiguous()).view(rows, -1).to(torch.int64)
        got -= torch.arange(rows)[:, None] * n_outcomes
        torch.testing.assert_close(got, torch.searchsorted(thresholds, u, right=True))
    assert crowded_seen or n_outcomes == 1


@pytest.mark.parametrize(
    "probs", [[0.1, 0.2, 0.3, 0.4], [0.97, 0.01, 0.01, 0.01], [0.0, 0.5, 0.0, 0.5],
              [0.24, 0.25, 0.25, 0.26], [0.25, 0.25, 0.25, 0.25]]
)
def test_small_counts_follow_the_exact_multinomial_law(probs: list[float], chi_square) -> None:
    """Chi-square of 20000 draws of 3 shots against every composition's multinomial probability
    (the uniform split, with weights w = 0.4, 0.96 and 1, and inversion alone)."""
    g = torch.Generator().manual_seed(11)
    q = torch.tensor(probs, dtype=torch.float64).expand(20000, 4)
    counts = sample_counts(q, 3, generator=g)
    _, p_value = chi_square(counts, np.array(probs), n_shots=3)
    assert p_value > 1e-4


def test_the_chi_square_check_rejects_a_gaussian_approximation(chi_square) -> None:
    """The law test has power: rounding a Gaussian with the multinomial moments fails it."""
    g = torch.Generator().manual_seed(12)
    probs = np.array([0.1, 0.2, 0.3, 0.4])
    n_shots, draws = 3, 20000
    q = torch.tensor(probs)
    mean, std = n_shots * q, (n_shots * q * (1 - q)).sqrt()
    counts = torch.round(mean + std * torch.randn(draws, 4, generator=g, dtype=torch.float64))
    counts = counts.clamp(min=0).to(torch.int64)
    counts[:, -1] = (n_shots - counts[:, :-1].sum(1)).clamp(min=0)
    counts = counts[counts.sum(1) == n_shots]
    _, p_value = chi_square(counts, probs, n_shots=n_shots)
    assert p_value < 1e-6


def _sic_like(n_outcomes: int, g: torch.Generator, *, p: float) -> torch.Tensor:
    """A depolarized law p / K + (1 - p) a, a with exponential-like weights (as SIC overlaps)."""
    a = torch.empty(n_outcomes, dtype=torch.float64).exponential_(generator=g)
    return p / n_outcomes + (1 - p) * a / a.sum()


@pytest.mark.parametrize("uniform_weight", [0.0, 0.95])
def test_many_shot_counts_have_multinomial_moments(uniform_weight: float) -> None:
    """256 outcomes, 1024 shots: inversion alone (a softmax law, w near 0) and the uniform
    split (w = 0.95, the channel at the paper's eps = 0.1)."""
    g = torch.Generator().manual_seed(13)
    n_outcomes, n_shots, draws = 256, 1024, 3000
    q = (_sic_like(n_outcomes, g, p=uniform_weight) if uniform_weight
         else torch.softmax(2 * torch.randn(n_outcomes, generator=g, dtype=torch.float64), 0))
    counts = sample_counts(q.expand(draws, n_outcomes), n_shots, generator=g).double()
    variance = n_shots * q * (1 - q)
    z = (counts.mean(0) - n_shots * q) / (variance / draws).sqrt()
    assert float(z.abs().max()) < 5
    ratio = counts.var(0) / variance
    assert float(ratio.mean()) == pytest.approx(1.0, abs=0.03)
    # Covariances: a block of outcomes is Binomial(n, q_block).
    q_block = float(q[:128].sum())
    block = counts[:, :128].sum(1)
    assert float(block.var()) / (n_shots * q_block * (1 - q_block)) == pytest.approx(1, abs=0.1)


@pytest.mark.parametrize("outcomes", [slice(0, 1), slice(0, 128), slice(40, 47)])
def test_split_counts_of_outcome_blocks_follow_the_exact_binomial(outcomes: slice) -> None:
    """Under the uniform split (w = 0.95, 256 outcomes, 1024 shots) the count of a block of
    outcomes is exactly Binomial(1024, q_block): Pearson chi-square over 6000 draws."""
    g = torch.Generator().manual_seed(17)
    n_shots, draws = 1024, 6000
    q = _sic_like(256, g, p=0.95)
    counts = sample_counts(q.expand(draws, 256), n_shots, generator=g)[:, outcomes].sum(1)
    law = stats.binom(n_shots, float(q[outcomes].sum()))
    observed = np.bincount(counts.numpy(), minlength=n_shots + 1).astype(float)
    expected = law.pmf(np.arange(n_shots + 1)) * draws
    cells, obs, exp = [], 0.0, 0.0  # pool neighbouring values until each cell expects >= 5
    for o, e in zip(observed, expected, strict=True):
        obs, exp = obs + o, exp + e
        if exp >= 5:
            cells.append((obs, exp))
            obs = exp = 0.0
    cells[-1] = (cells[-1][0] + obs, cells[-1][1] + exp)
    o_cells, e_cells = np.array(cells).T
    statistic = float(((o_cells - e_cells) ** 2 / e_cells).sum())
    assert stats.chi2.sf(statistic, len(cells) - 1) > 1e-4


def test_zero_probability_outcomes_never_occur() -> None:
    q = torch.tensor([0.0, 0.25, 0.0, 0.0, 0.75, 0.0], dtype=torch.float32).expand(500, 6)
    counts = sample_counts(q, 64, generator=torch.Generator().manual_seed(14))
    assert int(counts[:, [0, 2, 3, 5]].sum()) == 0


def test_generator_advances_and_seeds_reproduce() -> None:
    q = torch.full((4, 16), 1 / 16)
    g = torch.Generator().manual_seed(15)
    first, second = sample_counts(q, 256, generator=g), sample_counts(q, 256, generator=g)
    assert not torch.equal(first, second)
    again = sample_counts(q, 256, generator=torch.Generator().manual_seed(15))
    assert torch.equal(first, again)
    torch.manual_seed(3)
    global_first = sample_counts(q, 256)
    torch.manual_seed(3)
    assert torch.equal(global_first, sample_counts(q, 256))


def test_shots_and_rows_beyond_one_block_are_handled() -> None:
    g = torch.Generator().manual_seed(16)
    q = torch.tensor([0.2, 0.3, 0.5], dtype=torch.float64)
    many_shots = sample_counts(q[None], 600_001, generator=g)[0]
    assert int(many_shots.sum()) == 600_001
    z = (many_shots.double() - 600_001 * q) / (600_001 * q * (1 - q)).sqrt()
    assert float(z.abs().max()) < 5
    many_rows = sample_counts(q.expand(3000, 3), 200, generator=g)
    assert bool((many_rows.sum(1) == 200).all())
    z = (many_rows.double().mean(0) - 200 * q) / (200 * q * (1 - q) / 3000).sqrt()
    assert float(z.abs().max()) < 5


def test_frequencies() -> None:
    counts = torch.tensor([[1, 3], [2, 2]])
    torch.testing.assert_close(frequencies(counts), torch.tensor([[0.25, 0.75], [0.5, 0.5]]))
    with pytest.raises(InvalidInputError, match="at least one shot"):
        frequencies(torch.tensor([[0, 0]]))


@pytest.mark.parametrize("n_shots", [0, -3, 2.5, True, None])
def test_invalid_shot_numbers_raise(n_shots: object) -> None:
    with pytest.raises(InvalidInputError, match=r"n_shots = .* integer >= 1"):
        sample_counts(torch.tensor([0.5, 0.5]), n_shots)


@pytest.mark.parametrize(
    ("probs", "message"),
    [
        (torch.tensor([0.5, 0.6]), "sum to 1"),
        (torch.tensor([1.5, -0.5]), ">= 0"),
        (torch.tensor([float("nan"), 1.0]), "NaN"),
        (torch.tensor([1, 0]), "floating-point"),
    ],
)
def test_invalid_probabilities_raise(probs: torch.Tensor, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        sample_counts(probs, 10)
