"""Private quantiles by the exponential mechanism on a data-independent grid, and a private
location-and-scale estimate built from them.

For a grid g_1 < ... < g_m fixed before seeing the data and a (weighted) count
``c(g) = sum_i w_i [x_i < g]`` out of a total ``n = sum_i w_i``, the exponential mechanism
(McSherry & Talwar 2007) releases g_j with probability proportional to
``exp(eps u(g_j) / (2 Delta_u))``, ``u(g) = -|c(g) - q n|``; it is eps-DP when one unit
changes u by at most Delta_u at every grid point:

* record unit (one value replaced, n fixed, weights 1): c(g) changes by at most 1, so
  Delta_u = 1;
* a unit that adds or removes values of total weight at most m (e.g. one window of L + H rows
  of a channel, counted once per window that contains each row): c(g) changes by a in [0, m]
  and q n by q m, so |du| <= max(q, 1 - q) m <= m; Delta_u = m.

The grid points have equal base weight (independent of the data), and the count is of values
strictly below each point, so ties, values outside the grid and infinities change it by at
most the unit's weight too. The guarantee is that of the exact mechanism: the probabilities
are computed and sampled in double precision (grid points whose score lies more than about
700 / eps below the best get probability 0, and ``Generator.choice`` resolves about 2^-53),
as in the DP libraries this project builds on, on the seeded path; a release (a secret seed)
draws by OpenDP's exact report-noisy-max of exponential noise on the same utilities instead
(:class:`qpriv.privacy.samplers.VettedSampler`): another selection rule with the same eps
(permute-and-flip's), and no floating-point probabilities at all.
"""

from __future__ import annotations

import math

import numpy as np

from qpriv.errors import InvalidInputError, require_in_range, require_positive_int
from qpriv.privacy.samplers import NoiseSampler, as_sampler

__all__ = ["log_grid", "private_location_scale", "private_quantile"]

#: The MAD's Gaussian consistency factor: 1 / Phi^-1(3/4), so that 1.4826 MAD = sigma.
_MAD_TO_STD = 1.482602218505602


def log_grid(*, magnitude: float = 1e6, smallest: float = 1e-4,
             per_decade: int = 200) -> np.ndarray:
    """A symmetric, data-independent grid: 0 and +-10^(k / per_decade) from ``smallest`` to
    ``magnitude`` (relative spacing 10^(1/per_decade) - 1, 1.2 % at 200 per decade)."""
    hi = require_in_range("magnitude", magnitude, low=0.0)
    lo = require_in_range("smallest", smallest, low=0.0, high=hi,
                          hint="smallest must lie in (0, magnitude]")
    n = require_positive_int("per_decade", per_decade)
    k = np.arange(math.floor(n * math.log10(lo)), math.ceil(n * math.log10(hi)) + 1)
    positive = 10.0 ** (k / n)
    return np.concatenate([-positive[::-1], [0.0], positive])


def private_quantile(values: np.ndarray, *, q: float, eps: float, grid: np.ndarray,
                     rng: np.random.Generator | NoiseSampler,
                     weights: np.ndarray | None = None, unit_weight: float = 1.0) -> float:
    """The q-quantile of ``values`` (optionally weighted), eps-DP by the exponential mechanism
    on ``grid`` (module docstring); ``unit_weight`` is Delta_u, the most weight one unit
    changes (1 at the record unit). ``rng``: a seeded NumPy generator, or a
    :class:`qpriv.privacy.samplers.NoiseSampler` (the vetted one draws by OpenDP's exact
    report-noisy-max instead)."""
    q = require_in_range("q", q, low=0.0, high=1.0, high_inclusive=False)
    eps = require_in_range("eps", eps, low=0.0, hint="a privacy budget must be > 0")
    du = require_in_range("unit_weight", unit_weight, low=0.0)
    x = np.asarray(values, dtype=np.float64).ravel()
    w = np.ones_like(x) if weights is None else np.asarray(weights, dtype=np.float64).ravel()
    g = np.asarray(grid, dtype=np.float64)
    if w.shape != x.shape or g.ndim != 1 or len(g) < 2 or np.any(np.diff(g) <= 0):
        raise InvalidInputError("weights must match values, and grid be increasing (>= 2 points)")
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise InvalidInputError("weights must be finite and >= 0 (a count of how often each "
                                "value is used)")
    order = np.argsort(x)
    cum = np.concatenate([[0.0], np.cumsum(w[order])])
    counts = cum[np.searchsorted(x[order], g, side="left")]
    utility = -np.abs(counts - q * cum[-1])
    return float(as_sampler(rng).select(g, utility, eps=eps, sensitivity=du))


def private_location_scale(values: np.ndarray, *, eps: float,
                           rng: np.random.Generator | NoiseSampler,
                           grid: np.ndarray | None = None, weights: np.ndarray | None = None,
                           unit_weight: float = 1.0) -> tuple[float, float]:
    """(location, scale) of one channel, eps-DP: the private median m, then the private median
    of the absolute deviations ``|x - m|`` times 1.4826 (the MAD's Gaussian consistency
    factor), each at eps / 2 (basic composition; m is released, so the second count is of
    fixed values). A grid with fewer than two positive points gives the scale its smallest
    positive step, which spends nothing.

    A channel with more than half of its values equal has a median absolute deviation of 0:
    the private one then lands on a small grid point, and clipping at a few such scales keeps
    little but which values differ from the median (a fit stays private, and loses what the
    sizes of those values say; a constant channel is refused by the loader before any fit).

    Both are medians on purpose. Every grid point beyond the data scores ``-q n`` or
    ``-(1 - q) n``, so a tail quantile's (q = 0.1) thousands of far points each score only
    0.1 n below the best: at eps 0.01 on a channel of 8,640 rows, a 10-90 % spread picked a
    point decades away from the data in most draws. A median's far points score n / 2 below.
    One unit moves one deviation as it moves one value, so each count keeps the first
    stage's Delta_u (module docstring).
    """
    g = log_grid() if grid is None else np.asarray(grid, dtype=np.float64)
    share = require_in_range("eps", eps, low=0.0, hint="a privacy budget must be > 0") / 2.0
    kwargs = {"eps": share, "rng": rng, "weights": weights, "unit_weight": unit_weight}
    median = private_quantile(values, q=0.5, grid=g, **kwargs)
    deviations = np.abs(np.asarray(values, dtype=np.float64) - median)
    positive = g[g > 0]
    scale = _MAD_TO_STD * private_quantile(deviations, q=0.5, grid=positive, **kwargs) \
        if len(positive) >= 2 else 0.0
    if not scale > 0:
        scale = float(np.min(np.abs(g[g != 0])))
    return median, scale
