"""Finite-shot measurement: exact multinomial counts from outcome probabilities.

N_s shots of a measurement with outcome probabilities q (K outcomes) give counts distributed
exactly as Multinomial(N_s, q) (LDPT section 5.7): independent shots, drawn one by one or counted
by conditional binomials, never a Gaussian approximation. Frequencies are counts / N_s.

Uniform split. Every row is a mixture q = w u + (1 - w) r of the uniform law u = 1/K and a
residual law r = (q - m) / (1 - w), with m = min_k q_k and w = K m. A shot of the mixture is a
uniform shot with probability w and a residual shot otherwise, so the number of uniform shots is
Binomial(N_s, w) (one draw per row) and, given it, the uniform and residual counts are
independent multinomials whose sum is exactly Multinomial(N_s, q). When K is a power of two up
to 256 a uniform shot is one random byte (its low log2 K bits), against 30 bits for a shot
drawn by inversion, and its outcome needs no search: the row's offset plus the byte. After the
depolarizing channel every SIC outcome has probability at least p / D^2, so w >= p: at the
LDPT paper's eps = 0.1 (p = 0.95) 95 % of the shots are bytes. For other K, or a block of rows
whose weights average below :data:`_MIN_UNIFORM_WEIGHT`, the split is not used (every shot is
a residual shot of r = q).

Residual shots invert the cumulative distribution with a guide table (Chen and Asau's indexed
search). Per row, the thresholds T_k = round(2^30 (r_0 + ... + r_k)) split [0, 2^30) into K
intervals; a shot is a uniform 30-bit integer u and its outcome is the number of thresholds
<= u. The interval [0, 2^30) is cut into G = 2^ceil(log2(2K)) equal cells; a table holds, per
cell, the outcome of the cell's first integer, and one comparison finishes the search for every
shot whose cell contains at most one threshold (all of them when every r_k >= 1/G). Shots in
cells with more thresholds step on one outcome at a time, and after a few steps by binary
search. Two shots come from each 64-bit random word and all per-shot work is int32. Residual
probabilities are resolved to 2^-30, about 1e-9 (a float32 uniform would resolve 2^-24); the
uniform weight w is exact to float64 (the Binomial draw is torch's, in float64).

Conditional binomials. Counts need not be drawn shot by shot: outcome 0 takes
c_0 ~ Binomial(N_s, q_0) shots, outcome k takes c_k ~ Binomial(N_s - c_0 - ... - c_{k-1},
q_k / (q_k + ... + q_{K-1})) and the last outcome the rest, which is exactly Multinomial(N_s, q)
(the chain rule of the multinomial law; numpy's ``Generator.multinomial`` draws it so). That
costs K - 1 binomial draws a row whatever N_s, against a few operations a shot for the methods
above: it is used when N_s is large against K (:func:`_draws_binomials`). The binomials are
torch's (``torch.binomial``: BTRS rejection for large n p, inversion by geometric waiting times
below, float64 uniforms), one call per outcome over all the rows of a block, from the same
torch generator as the shots, so that its saved state (a run's checkpoint) resumes either.
Measured on one thread (microseconds a row, conditional binomials against the shots, on laws
of uniform weight 0.95 (split), then 0.03 to 0.3 (inversion)): K = 256, N_s = 1024: 37
against 8.5 (split) and 29 against 13 (inversion); N_s = 16384: 18 against 45 and 19 against
141; N_s = 100000: 20 against 262 and 22 against 740; K = 16, N_s = 1024: 1.0 against 5.9 and
8.3. So at the LDPT paper's D = 16 (K = 256) and N_s = 1024, four shots an outcome, the shots
are the cheaper draw, and the binomials serve the audits' games of many shots and smaller D.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

import torch
from torch import Tensor

from qpriv.errors import InvalidInputError, require_positive_int

PROBABILITY_RESOLUTION_BITS = 30
"""Shots are uniform integers in [0, 2^30); probabilities are rounded to multiples of 2^-30."""

_ONE = 1 << PROBABILITY_RESOLUTION_BITS
_SHOTS_PER_CHUNK = 1 << 19
"""Shots drawn per vectorised step: bounds the working memory (a few MiB) whatever the batch."""
_CELLS_PER_CHUNK = 1 << 22
"""Guide-table cells per block of rows: keeps row * cell indices well within int32."""
_MAX_OUTCOMES = 1 << 24
"""Largest K: the guide table of one row (2K cells) must fit the int32 indices."""
_LINEAR_STEPS = 4
"""Steps taken one outcome at a time in crowded cells before the binary-search finish."""
_MAX_BYTE_OUTCOMES = 256
"""Largest K whose uniform shots are drawn as bytes (the uniform split needs K = 2^b <= 2^8)."""
_MIN_UNIFORM_WEIGHT = 0.75
"""Mean uniform weight w of a block of rows below which the split costs more than it saves:
every row draws all N_s bytes, so the residual shots come on top (both ways are exact). Measured
on the features of random windows (thread CPU time, split against inversion alone): 0.74x at
w = 0.95, 0.88x at 0.85, even at 0.77, 1.18x at 0.57."""


_BINOMIAL_SHOTS_PER_OUTCOME = 32
"""N_s / (K - 1) from which conditional binomials cost less than the uniform split (about 80 ns
a binomial against 2.5 ns a shot, measured as in the module docstring)."""
_BINOMIAL_SHOTS_PER_OUTCOME_INVERSION = 10
"""N_s / (K - 1) from which conditional binomials cost less than inversion (8 ns a shot)."""
_BINOMIAL_ENTRIES = 1 << 20
"""Probabilities (rows x outcomes) per block of conditional binomials: 8 MiB in float64, and
each of the K - 1 calls of ``torch.binomial`` spans many rows."""


def require_n_shots(n_shots: int) -> int:
    """Return ``n_shots`` if it is an integer >= 1, else raise InvalidInputError."""
    return require_positive_int("n_shots", n_shots)


def _require_probabilities(probs: Tensor) -> None:
    if not isinstance(probs, Tensor) or not probs.is_floating_point():
        raise InvalidInputError("probs must be a real floating-point torch.Tensor")
    if probs.ndim == 0 or probs.shape[-1] == 0:
        raise InvalidInputError(
            f"probs must have shape (..., K) with K >= 1 outcomes, got {tuple(probs.shape)}"
        )
    if probs.shape[-1] > _MAX_OUTCOMES:
        raise InvalidInputError(
            f"probs has {probs.shape[-1]} outcomes; the sampler supports at most {_MAX_OUTCOMES}"
        )
    if probs.numel() == 0:
        return
    if not bool(torch.isfinite(probs).all()):
        raise InvalidInputError("probs contain NaN or inf")
    smallest = float(probs.min())
    if smallest < 0:
        raise InvalidInputError(f"probs must be >= 0, found {smallest:.3g}")
    n_outcomes = probs.shape[-1]
    tolerance = 1e-6 + 4 * n_outcomes * torch.finfo(probs.dtype).eps
    error = float((probs.double().sum(-1) - 1.0).abs().max())
    if error > tolerance:
        raise InvalidInputError(
            f"every row of probs must sum to 1 (within {tolerance:.2g}); "
            f"the worst row is off by {error:.3g}"
        )


def _n_cells(n_outcomes: int) -> int:
    """Guide-table cells per row: the smallest power of two >= 2K (at least 2)."""
    return 1 << max(1, (2 * n_outcomes - 1).bit_length())


@functools.lru_cache(maxsize=64)
def _offsets(n_rows: int, stride: int, device: torch.device) -> Tensor:
    """0, stride, 2 stride, ... as an int32 column (n_rows, 1)."""
    return torch.arange(0, n_rows * stride, stride, dtype=torch.int32, device=device)[:, None]


def _thresholds(cdf: Tensor, total: Tensor) -> Tensor:
    """T_k = round(2^30 cdf_k / total) as int32 (R, K), T_{K-1} = 2^30, from a float64
    cumulative sum (R, K) of non-negative weights and its rows' totals (R, 1); a row of total 0
    gets all its mass on the last outcome."""
    scale = torch.where(total > 0, _ONE / total, 0.0)
    thresholds = cdf.mul_(scale).round_().to(torch.int32)
    thresholds[:, -1] = _ONE
    return thresholds


class _GuideTable:
    """Inverse-CDF lookup structures for a block of S rows with K outcomes each.

    Thresholds T_k = round(2^30 cdf_k) (T_{K-1} = 2^30, :func:`_thresholds`); cell c covers
    [c W, (c + 1) W) with W = 2^30 / G, G a power of two. ``guide[c]`` is the outcome of
    u = c W, i.e. #{k : T_k <= c W}, stored as the global index row * K + k. A cell is crowded
    when it holds two or more thresholds. All integers fit in int32.
    """

    def __init__(self, thresholds: Tensor, *, n_cells: int) -> None:
        n_rows, n_outcomes = thresholds.shape
        device = thresholds.device
        self.n_cells = n_cells
        self.shift = PROBABILITY_RESOLUTION_BITS - (self.n_cells.bit_length() - 1)
        self.thresholds = thresholds
        # ceil(T_k / W), in [0, G]: the first cell whose start is >= T_k. The outcome of a
        # cell's first integer is the number of thresholds whose first cell is at or before
        # it: a histogram of first cells, summed up.
        first = (thresholds + ((1 << self.shift) - 1)).bitwise_right_shift_(self.shift)
        # A cell needs more than one comparison only if two thresholds fall in it, that is if
        # two (consecutive) share a first cell.
        self.any_crowded = bool((first[:, 1:] == first[:, :-1]).any())
        per_cell = torch.bincount(first.add_(_offsets(n_rows, self.n_cells + 1, device))
                                  .view(-1), minlength=n_rows * (self.n_cells + 1))
        guide = per_cell.view(n_rows, self.n_cells + 1)[:, : self.n_cells].cumsum(
            dim=1, dtype=torch.int32)
        self.guide = guide.add_(_offsets(n_rows, n_outcomes, device)).view(-1)
        self.thresholds_minus_one = (thresholds - 1).reshape(-1)
        self.cell_offsets = _offsets(n_rows, self.n_cells, device)

    def outcomes(self, u: Tensor, *, cell_offsets: Tensor | None = None) -> Tensor:
        """Global outcome index row * K + k for uniform integers u in [0, 2^30).

        ``u`` has shape (S, n), one row of shots per table row, or is flat with
        ``cell_offsets`` (row * G for every shot, int32, the same shape as ``u``).
        """
        flat_u = u.reshape(-1)
        offsets = self.cell_offsets if cell_offsets is None else cell_offsets
        cell = (u >> self.shift).add_(offsets).reshape(-1)
        outcome = self.guide.index_select(0, cell)
        # -1 where u >= T_k (so the outcome moves one up), else 0; no int32 overflow is possible.
        step = self.thresholds_minus_one.index_select(0, outcome).sub_(flat_u)
        outcome.sub_(step.bitwise_right_shift_(31))
        if self.any_crowded:
            self._finish_crowded(outcome, flat_u)
        return outcome

    def _finish_crowded(self, outcome: Tensor, flat_u: Tensor) -> None:
        """Step on, in place, the shots whose cell holds more thresholds than the one passed.

        A shot still has u >= T_outcome only if its cell is crowded; it moves up one outcome at
        a time until T_outcome > u (T_{K-1} = 2^30 stops every shot inside its own row). After
        a few steps the rare shots left (cells with many tiny probabilities) are finished by
        binary search, so the number of vectorised steps stays bounded.
        """
        thresholds_minus_one = self.thresholds_minus_one
        pending = (thresholds_minus_one.index_select(0, outcome) < flat_u).nonzero().squeeze(1)
        pending_u = flat_u.index_select(0, pending)
        pending_outcome = outcome.index_select(0, pending)
        for _ in range(_LINEAR_STEPS):
            if not pending.numel():
                return
            pending_outcome += 1
            outcome.index_copy_(0, pending, pending_outcome)
            more = thresholds_minus_one.index_select(0, pending_outcome) < pending_u
            pending, pending_u = pending[more], pending_u[more]
            pending_outcome = pending_outcome[more]
        if pending.numel():
            n_rows, n_outcomes = self.thresholds.shape
            rows = torch.arange(n_rows, device=flat_u.device, dtype=torch.int64)[:, None]
            sorted_all = (self.thresholds.to(torch.int64) + rows * _ONE).reshape(-1)
            pending_rows = torch.div(pending_outcome, n_outcomes, rounding_mode="floor")
            queries = pending_rows.to(torch.int64) * _ONE + pending_u.to(torch.int64)
            exact = torch.searchsorted(sorted_all, queries, right=True).to(torch.int32)
            outcome.index_copy_(0, pending, exact)


def _random_words(n_bytes: int, *, generator: torch.Generator | None,
                  device: torch.device) -> Tensor:
    """At least ``n_bytes`` uniform random bytes, as a flat int64 tensor of whole words."""
    words = torch.empty((n_bytes + 7) // 8, dtype=torch.int64, device=device)
    return words.random_(-(2**63), None, generator=generator)


def _uniform_integers(shape: tuple[int, ...], *, generator: torch.Generator | None,
                      device: torch.device) -> Tensor:
    """Independent uniform integers in [0, 2^30) as int32, two from each 64-bit random word."""
    total = 1
    for size in shape:
        total *= size
    words = _random_words(4 * total, generator=generator, device=device)
    return words.view(torch.int32)[:total].bitwise_and_(_ONE - 1).view(shape)


def _splits_uniform(n_outcomes: int) -> bool:
    """True when a uniform shot over K outcomes is one random byte: K = 2^b with b <= 8."""
    return n_outcomes <= _MAX_BYTE_OUTCOMES and n_outcomes & (n_outcomes - 1) == 0


def _first_columns(n_first: Tensor, start: int, stop: int) -> Tensor:
    """Mask (R, stop - start): column j of row r is among the row's first ``n_first[r]``."""
    columns = torch.arange(start, stop, dtype=n_first.dtype, device=n_first.device)
    return columns < n_first[:, None]


def _split_counts(residual_cdf: Tensor, n_shots: int, *, weight: Tensor,
                  generator: torch.Generator | None) -> Tensor:
    """Flat counts (R * K,) by the uniform split (module docstring).

    Row r takes M_r ~ Binomial(N_s, 1 - w_r) residual shots. Every row draws ``n_shots`` random
    bytes (the low log2 K bits of each a uniform outcome) and ``max(M)`` residual shots by the
    guide table; its first M_r bytes are replaced by its first M_r residual shots, so that all
    rows do the same per-shot work and one histogram counts both kinds. ``residual_cdf`` is
    the float64 cumulative sum of q - m per row (R, K).
    """
    n_rows, n_outcomes = residual_cdf.shape
    device = residual_cdf.device
    n_residual = torch.binomial(torch.full_like(weight, n_shots), 1.0 - weight,
                                generator=generator).to(torch.int32)
    n_most = int(n_residual.max())
    table = None
    if n_most:
        table = _GuideTable(_thresholds(residual_cdf, residual_cdf[:, -1:]),
                            n_cells=_n_cells(n_outcomes))
    offsets = _offsets(n_rows, n_outcomes, device)
    piece = max(1, min(n_shots, _SHOTS_PER_CHUNK // n_rows))
    counts = None
    for start in range(0, n_shots, piece):
        stop = min(start + piece, n_shots)
        shots = _random_words(n_rows * (stop - start), generator=generator, device=device)
        shots = shots.view(torch.uint8)[: n_rows * (stop - start)].view(n_rows, stop - start)
        if n_outcomes < _MAX_BYTE_OUTCOMES:
            shots.bitwise_and_(n_outcomes - 1)
        outcome = torch.add(shots, offsets)  # (R, piece) int32: row * K + byte
        if start < n_most:
            last = min(stop, n_most)
            u = _uniform_integers((n_rows, last - start), generator=generator, device=device)
            drawn = table.outcomes(u).view(n_rows, last - start)
            head = outcome[:, : last - start]
            torch.where(_first_columns(n_residual, start, last), drawn, head, out=head)
        piece_counts = torch.bincount(outcome.view(-1), minlength=n_rows * n_outcomes)
        counts = piece_counts if counts is None else counts.add_(piece_counts)
    return counts


def _inversion_counts(probs: Tensor, n_shots: int, *,
                      generator: torch.Generator | None) -> Tensor:
    """Flat counts (R * K,) with every shot drawn by the guide table (G = 2K)."""
    n_rows, n_outcomes = probs.shape
    cdf = probs.cumsum(dim=1, dtype=torch.float64)
    table = _GuideTable(_thresholds(cdf, cdf[:, -1:]), n_cells=_n_cells(n_outcomes))
    piece = max(1, min(n_shots, _SHOTS_PER_CHUNK // n_rows))
    counts = None
    for start in range(0, n_shots, piece):
        u = _uniform_integers((n_rows, min(piece, n_shots - start)), generator=generator,
                              device=probs.device)
        piece_counts = torch.bincount(table.outcomes(u), minlength=n_rows * n_outcomes)
        counts = piece_counts if counts is None else counts.add_(piece_counts)
    return counts


def binomial_counts(probs: Tensor, n_shots: int, *,
                    generator: torch.Generator | None) -> Tensor:
    """Counts (R, K) by conditional binomials (module docstring), one ``torch.binomial`` call
    per outcome over all R rows; rows need not be normalised (q_k / (q_k + ... + q_{K-1}))."""
    n_rows, n_outcomes = probs.shape
    by_outcome = probs.T.to(torch.float64).contiguous()  # (K, R)
    # tail_k = q_k + ... + q_{K-1}; it equals q_k exactly when every later q is 0, so such an
    # outcome takes all the shots left (0 / 0, nothing left to draw, gives 0)
    tail = by_outcome.flip(0).cumsum_(0).flip(0)
    conditional = torch.div(by_outcome, tail).nan_to_num_(0.0).clamp_(0.0, 1.0)
    counts = torch.empty_like(conditional)
    left = torch.full((n_rows,), float(n_shots), dtype=torch.float64, device=probs.device)
    for k in range(n_outcomes - 1):
        counts[k] = torch.binomial(left, conditional[k], generator=generator)
        left -= counts[k]
    counts[-1] = left
    return counts.T.to(torch.int64)


def _draws_binomials(probs: Tensor, n_shots: int) -> bool:
    """Whether conditional binomials (K - 1 draws a row) cost less than the shots for these
    rows: from :data:`_BINOMIAL_SHOTS_PER_OUTCOME` shots an outcome, or from
    :data:`_BINOMIAL_SHOTS_PER_OUTCOME_INVERSION` when the uniform split would not be used."""
    n_outcomes = probs.shape[1]
    if n_outcomes == 1 or n_shots >= _BINOMIAL_SHOTS_PER_OUTCOME * (n_outcomes - 1):
        return True
    if n_shots < _BINOMIAL_SHOTS_PER_OUTCOME_INVERSION * (n_outcomes - 1):
        return False
    if not _splits_uniform(n_outcomes):
        return True
    mean_weight = float(probs.amin(dim=1).to(torch.float64).mean()) * n_outcomes  # K m
    return mean_weight < _MIN_UNIFORM_WEIGHT


def _block_counts(probs: Tensor, n_shots: int, *,
                  generator: torch.Generator | None) -> Tensor:
    """Counts (R, K) of one block of rows: the uniform split (module docstring) when K allows
    it and the block's uniform weights are large enough to pay for it, else inversion only."""
    n_rows, n_outcomes = probs.shape
    if _splits_uniform(n_outcomes):
        floor = probs.amin(dim=1, keepdim=True).to(torch.float64)  # m, (R, 1)
        # q - m >= 0 exactly (in float64), and its running sum never decreases
        residual_cdf = torch.sub(probs, floor).cumsum_(dim=1)
        mass = floor.mul(n_outcomes)  # K m, (R, 1)
        weight = mass.div_(residual_cdf[:, -1:] + mass).squeeze(1)  # w = K m / sum(q)
        if float(weight.mean()) >= _MIN_UNIFORM_WEIGHT:
            counts = _split_counts(residual_cdf, n_shots, weight=weight, generator=generator)
            return counts.view(n_rows, n_outcomes)
    return _inversion_counts(probs, n_shots, generator=generator).view(n_rows, n_outcomes)


def multinomial_count_blocks(
    probs: Tensor, n_shots: int, *, generator: torch.Generator | None
) -> Iterator[tuple[slice, Tensor]]:
    """Counts of valid probability rows (R, K), block of rows by block, with no input checks:
    ``(rows, counts)`` with ``counts`` int64 of shape (len(rows), K).

    The kernel behind :func:`sample_counts`; callers guarantee that rows are non-negative, finite
    and sum to one, and that ``n_shots >= 1``. Conditional binomials or shots, whichever costs
    less for these rows (:func:`_draws_binomials`). Rows are processed in blocks and shots in
    pieces, so the working memory stays bounded whatever R and ``n_shots``; a caller that turns
    counts into something else (frequencies) does so block by block, without an (R, K) int64
    copy.
    """
    n_rows, n_outcomes = probs.shape
    if _draws_binomials(probs, n_shots):
        counts_of, rows_per_block = binomial_counts, _BINOMIAL_ENTRIES // n_outcomes
    else:
        counts_of, rows_per_block = _block_counts, min(
            _SHOTS_PER_CHUNK // n_shots, _CELLS_PER_CHUNK // _n_cells(n_outcomes))
    rows_per_block = max(1, rows_per_block)
    for start in range(0, n_rows, rows_per_block):
        rows = slice(start, min(start + rows_per_block, n_rows))
        yield rows, counts_of(probs[rows], n_shots, generator=generator)


def multinomial_counts_unchecked(
    probs: Tensor, n_shots: int, *, generator: torch.Generator | None
) -> Tensor:
    """Counts of shape (R, K), int64, for valid probability rows (R, K); no input checks (see
    :func:`multinomial_count_blocks`)."""
    counts = torch.empty(probs.shape, dtype=torch.int64, device=probs.device)
    for rows, block in multinomial_count_blocks(probs, n_shots, generator=generator):
        counts[rows] = block
    return counts


def sample_counts(
    probs: Tensor, n_shots: int, *, generator: torch.Generator | None = None
) -> Tensor:
    """Exact multinomial shot counts: Multinomial(n_shots, probs) independently per row.

    Args:
        probs: outcome probabilities of shape (..., K), non-negative rows summing to 1.
        n_shots: shots per row, an integer >= 1.
        generator: torch generator on the device of ``probs`` (default: torch's global one).
            It advances, so every call draws fresh shots.

    Returns:
        int64 counts of shape (..., K), each row summing to ``n_shots``.
    """
    _require_probabilities(probs)
    n_shots = require_n_shots(n_shots)
    flat = probs.reshape(-1, probs.shape[-1])
    return multinomial_counts_unchecked(flat, n_shots, generator=generator).view(probs.shape)


def frequencies(counts: Tensor, *, dtype: torch.dtype = torch.float32) -> Tensor:
    """Relative frequencies counts / (total shots of the row), shape (..., K), in ``dtype``."""
    totals = counts.sum(dim=-1, keepdim=True)
    if counts.numel() and not bool((totals > 0).all()):
        raise InvalidInputError("every row of counts needs at least one shot to give frequencies")
    return counts.to(dtype) / totals.to(dtype)
