"""Exact multinomial shot sampling against the exact law: the shots (the uniform split, the guide
table) and the conditional binomials, each through :func:`sample_counts` (the ``method`` fixture
picks which one draws)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats

from qpriv.errors import InvalidInputError
from qpriv.quantum import frequencies, sample_counts, shots
from qpriv.quantum.shots import _ONE, _draws_binomials, _GuideTable, _thresholds


@pytest.fixture(params=["shots", "binomials"])
def method(request, monkeypatch) -> str:
    """Which way :func:`sample_counts` draws in the test, whatever the rule would pick."""
    monkeypatch.setattr(shots, "_draws_binomials", lambda probs, n_shots:
                        request.param == "binomials")
    return request.param


def test_counts_have_the_right_shape_dtype_and_total(method: str) -> None:
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
def test_small_counts_follow_the_exact_multinomial_law(probs: list[float], chi_square,
                                                       method: str) -> None:
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
def test_many_shot_counts_have_multinomial_moments(uniform_weight: float, method: str) -> None:
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


def _binomial_p_value(counts: torch.Tensor, n_shots: int, q: float) -> float:
    """Pearson chi-square p-value of draws ``counts`` (M,) against Binomial(n_shots, q), with
    neighbouring values pooled until each cell expects at least 5."""
    observed = np.bincount(counts.numpy(), minlength=n_shots + 1).astype(float)
    expected = stats.binom(n_shots, q).pmf(np.arange(n_shots + 1)) * counts.shape[0]
    cells, obs, exp = [], 0.0, 0.0
    for o, e in zip(observed, expected, strict=True):
        obs, exp = obs + o, exp + e
        if exp >= 5:
            cells.append((obs, exp))
            obs = exp = 0.0
    cells[-1] = (cells[-1][0] + obs, cells[-1][1] + exp)
    o_cells, e_cells = np.array(cells).T
    statistic = float(((o_cells - e_cells) ** 2 / e_cells).sum())
    return float(stats.chi2.sf(statistic, len(cells) - 1))


@pytest.mark.parametrize("outcomes", [slice(0, 1), slice(0, 128), slice(40, 47)])
def test_counts_of_outcome_blocks_follow_the_exact_binomial(outcomes: slice,
                                                            method: str) -> None:
    """With the uniform split's weights (w = 0.95, 256 outcomes, 1024 shots) the count of a
    block of outcomes is exactly Binomial(1024, q_block): Pearson chi-square over 6000 draws."""
    g = torch.Generator().manual_seed(17)
    n_shots, draws = 1024, 6000
    q = _sic_like(256, g, p=0.95)
    counts = sample_counts(q.expand(draws, 256), n_shots, generator=g)[:, outcomes].sum(1)
    assert _binomial_p_value(counts, n_shots, float(q[outcomes].sum())) > 1e-4


def test_every_count_and_every_tail_follow_their_exact_binomials(method: str) -> None:
    """Each count c_k is Binomial(N_s, q_k) and each tail c_k + ... + c_{K-1} is
    Binomial(N_s, q_k + ... + q_{K-1}), by the means (z below 5) and the whole laws (Pearson
    chi-square) of 20000 draws of 1024 shots from q = w u + (1 - w) r, w = 0.8 (the shots take
    the uniform split). It catches a binomial drawn with a wrong probability. Tried, each
    failing the z bound: a conditional binomial's q_k / (q_k + ... + q_{K-1}) off by 1 % of
    itself at one outcome (k = 1, 3 or 6: z = 14 to 17), the split's residual weight 1 - w
    off by 1 % (z = 9 and 12, on c_0, which holds most of r), the unconditional q_k, the tail
    taken one outcome short, and the remainder given to the first outcome (z > 1000)."""
    g = torch.Generator().manual_seed(19)
    residual = torch.tensor([0.6, 0, 0.25, 0.05, 0, 0.1, 0, 0], dtype=torch.float64)
    q = 0.8 / 8 + 0.2 * residual
    n_shots, draws = 1024, 20000
    counts = sample_counts(q.expand(draws, 8), n_shots, generator=g)
    tails = counts.flip(1).cumsum(1).flip(1)
    for observed, law, first in ((counts, q, 0), (tails, q.flip(0).cumsum(0).flip(0), 1)):
        variance = n_shots * law * (1 - law) / draws
        z = (observed[:, first:].double().mean(0) - n_shots * law[first:]) / variance[first:].sqrt()
        assert float(z.abs().max()) < 5
        for k in range(first, 8):  # the first tail is all the shots
            assert _binomial_p_value(observed[:, k], n_shots, float(law[k])) > 1e-4, k


def test_the_input_probabilities_are_left_as_they_were(method: str) -> None:
    for probs in (torch.tensor([[0.2, 0.3, 0.5]], dtype=torch.float64),
                  torch.full((3, 16), 1 / 16), torch.full((4, 2), 0.25).T):
        kept = probs.clone()
        sample_counts(probs, 2000, generator=torch.Generator().manual_seed(20))
        assert torch.equal(probs, kept)


def test_conditional_binomials_are_drawn_where_they_cost_less() -> None:
    """Four shots an outcome (the paper's D = 16, 1024 shots) are drawn shot by shot; many
    shots an outcome, or fewer outcomes, by conditional binomials; in between, binomials only
    where the uniform split would not be used."""
    uniform, sic = torch.full((3, 256), 1 / 256), _sic_like(256, torch.Generator(), p=0.95)
    peaked = torch.softmax(torch.randn(3, 256, generator=torch.Generator().manual_seed(0)), 1)
    assert not _draws_binomials(uniform, 1024)
    assert _draws_binomials(uniform, 100_000)
    assert _draws_binomials(torch.full((3, 16), 1 / 16), 1024)
    assert not _draws_binomials(sic[None], 4096) and _draws_binomials(peaked, 4096)
    assert _draws_binomials(torch.ones(2, 1), 1)


def test_zero_probability_outcomes_never_occur(method: str) -> None:
    q = torch.tensor([0.0, 0.25, 0.0, 0.0, 0.75, 0.0], dtype=torch.float32).expand(500, 6)
    counts = sample_counts(q, 64, generator=torch.Generator().manual_seed(14))
    assert int(counts[:, [0, 2, 3, 5]].sum()) == 0


def test_generator_advances_and_seeds_reproduce(method: str) -> None:
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


def test_shots_and_rows_beyond_one_block_are_handled(method: str) -> None:
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
