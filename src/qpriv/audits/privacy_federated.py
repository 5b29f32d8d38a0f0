"""A many-run black-box audit of federated dp-linear: a lower bound on eps from the server's view.

The game of :mod:`qpriv.audits.privacy_linear` played on one round of
:mod:`qpriv.federated.protocol`: ``sites`` sites agree on the public plan
(:func:`~qpriv.federated.protocol.plan_federation`, shares sized for ``threshold`` survivors),
the last ``sites - threshold`` sites drop out, and the ``threshold`` survivors send their
vectors. Site 0 holds the canary: its data is D in half the releases and D' (D with one
record replaced, or one window added) in the other half; the other survivors' data is fixed.
The claim audited is :func:`~qpriv.federated.protocol.decode_and_solve`'s for those survivors.

**What the attacker observes.** The round's SecAgg+ sum, the integer vector the server
decodes. The game runs in this process, without Flower: SecAgg+ (Bell et al. 2020, "Secure
single-server aggregation with (poly)logarithmic overhead") reveals to the server exactly the
modular sum of the survivors' vectors, and the plan's range makes wrap-around impossible, so
the sum it delivers is the exact integer sum; the federated tests prove that through real
SuperLink and SuperNode processes (noise off, the decoded statistics equal the sites' sums to
the quantisation error). So each release here is ``sum_i site_update(D_i)`` over the survivors,
with fresh Skellam shares from every survivor. Colluding sites do not change the game: a
coalition of K sites knows its own data and shares and subtracts them, which leaves the honest
shares, ``Sk((s - K) mu / (T - K))``, and the plan sizes the shares so that this is
``Sk(mu)`` at ``s = T`` whatever K; with K = 0 (``qpriv federate``'s default) the server's
view carries the same ``Sk(mu)``. The game is therefore the server's view at the claim's
worst case (the fewest survivors it covers), with the other sites' data known to the attacker.

**What runs.** Every draw of a release is a Skellam share: the statistics are a fixed function
of each site's data (at the record unit the scaler is declared public, D's own z-score for D
and D', as the central game does; a site's private scaler would be a further release, not in
the game; the window unit has no scaler). So each site's quantised statistics are computed once
(:func:`~qpriv.federated.site.quantise` of the central game's statistics, the same function
of the data as the site's) and only the shares are redrawn, with the protocol's own
:func:`~qpriv.federated.site.noise_share`: one trial's canary-site vector is
``site_update`` bit for bit at the same generator (a test checks it).

**The test.** The quantisation scale is a large power of two, so every entry's total mu is
large: above 7e7 at every setting the command takes (eps up to dp-linear's maximum, up to
:data:`MAX_SITES` sites; 1e10 to 1e15 at 3 sites), where one entry's exact Skellam
log-likelihood ratio for a shift of 0.3 standard deviations differs from the Gaussian
``N(0, 2 mu)``'s by under 3e-9 (2e-7 at mu = 1e6). So the Gaussian approximation of the exact
likelihood-ratio test is used: the release minus the known sum on D, projected on the
canary's integer change weighted by ``1 / (2 mu_j)`` (a test checks it against
``scipy.stats.skellam``'s exact log-likelihood ratio). Canaries are the central game's
(:func:`~qpriv.audits.privacy_linear.canary_pair`): the worst record found by search or the
window sensitivity's equality case, or a random one. ``reach`` is the canary's whitened integer
change over the whitened quantised sensitivities the claim accounts.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from qpriv.audits.privacy_linear import (
    AUDIT_SHAPE,
    LinearAudit,
    audit_dataset,
    canary_pair,
    ceiling_at_shift,
    check_game,
    play_many_runs,
)
from qpriv.errors import InvalidInputError
from qpriv.federated.protocol import CLAMP_SHARE, FederatedPlan, decode_and_solve, plan_federation
from qpriv.federated.site import noise_share, quantise, site_update, training_rows
from qpriv.forecasting.csv_input import series_frequency
from qpriv.forecasting.seasonality import resolve_period
from qpriv.forecasting.windows import ForecastData, load_forecasting_data
from qpriv.privacy.claims import LOWER_BOUND, Accounting, Kind, PrivacyClaim, Unit
from qpriv.privacy.skellam import calibrate_skellam

PLANTED_BUGS = ("half-noise", "all-sites-shares", "no-rounding-term")
"""Bugs a test plants in the sites' shares (never a user's option) while the claim stays the
correct plan's: the shares' std halved (mu / 4); each share sized for all ``sites`` instead of
the ``threshold`` survivors (too little noise when sites drop); the shares calibrated to the
scaled sensitivity without the rounding term ``sqrt(dim)``."""
SITES = 3
"""The audit's federation: sites, of which one drops (threshold ``sites - 1``, at least 2)."""
MAX_SITES = 64
"""The most sites a game takes: it loads one dataset and draws one share per survivor."""


def site_data(index: int) -> ForecastData:
    """Site ``index``'s data: the central game's dataset at seed ``index`` (site 0 is D)."""
    return load_forecasting_data(csv=audit_dataset(seed=index), **AUDIT_SHAPE)


def audit_plan(datas: list[ForecastData], *, unit: str, eps: float, delta: float, sites: int,
               threshold: int) -> FederatedPlan:
    """The round's public plan as ``qpriv federate`` makes it (the row bound a power of two
    above every site's rows, one window more for the window canary), the scaler declared
    public."""
    dates = datas[0].dates
    biggest = max(training_rows(d) for d in datas) + datas[0].n_channels
    return plan_federation(seq_len=datas[0].seq_len, horizon=datas[0].horizon,
                           period=resolve_period(dates, None), unit=unit, eps=eps,
                           delta=delta, sites=sites, threshold=threshold,
                           channels=datas[0].channels,
                           freq=series_frequency(dates) or "uneven",
                           max_rows=1 << (biggest - 1).bit_length(), scaler="data")


def planted(plan: FederatedPlan, bug: str | None, *, dims: tuple[int, int]) -> FederatedPlan:
    """The plan the sites draw their shares from: ``plan`` itself, or with a planted bug."""
    if bug is None:
        return plan
    if bug == "half-noise":
        return replace(plan, mu_a_site=plan.mu_a_site / 4, mu_b_site=plan.mu_b_site / 4)
    if bug == "all-sites-shares":
        return replace(plan, mu_a_site=plan.mu_a_site * plan.threshold / plan.sites,
                       mu_b_site=plan.mu_b_site * plan.threshold / plan.sites)
    dim_a, dim_b = dims
    unrounded = [(plan.l2_a - math.sqrt(dim_a),) * 2, (plan.l2_b - math.sqrt(dim_b),) * 2]
    mu_a, mu_b = calibrate_skellam(
        eps=plan.eps - plan.eps_scaler, delta=(1 - CLAMP_SHARE) * plan.delta,
        sensitivities=[(l2, l2 * l2) for l2, _ in unrounded],
        shares=(plan.share_a, 1 - plan.share_a))
    honest = plan.threshold - plan.colluders
    return replace(plan, mu_a_site=mu_a / honest, mu_b_site=mu_b / honest)


@dataclass(frozen=True)
class FederatedRound:
    """One round of the game: the canary site's integer statistics on D and D', the other
    survivors' (fixed), and the plan the shares are drawn from."""

    plan: FederatedPlan
    dims: tuple[int, int]
    canary_first: np.ndarray
    canary_second: np.ndarray
    others: tuple[np.ndarray, ...]

    def release(self, rng: np.random.Generator, *, prime: bool) -> np.ndarray:
        """The SecAgg+ sum of one round: every survivor's statistics plus a fresh share, the
        canary's site first (its vector is ``site_update``'s at the same generator)."""
        total = (self.canary_second if prime else self.canary_first) + \
            noise_share(self.plan, dims=self.dims, rng=rng)
        for statistics in self.others:
            total = total + statistics + noise_share(self.plan, dims=self.dims, rng=rng)
        return total

    def mus(self) -> np.ndarray:
        """Each entry's total Skellam parameter in the sum (all survivors' shares)."""
        dim_a, dim_b = self.dims
        survivors = 1 + len(self.others)
        return survivors * np.concatenate([np.full(dim_a, self.plan.mu_a_site),
                                           np.full(dim_b, self.plan.mu_b_site)])


def federated_round(*, unit: str, eps: float, delta: float, canary: str, sites: int,
                    threshold: int, seed: int,
                    bug: str | None = None) -> tuple[FederatedRound, FederatedPlan, dict]:
    """The game's round (with ``bug`` planted in its shares), the correct plan and the canary."""
    datas = [site_data(i) for i in range(threshold)]
    plan = audit_plan(datas, unit=unit, eps=eps, delta=delta, sites=sites,
                      threshold=threshold)
    pair = canary_pair(datas[0], unit=Unit(unit), eps=eps, delta=delta, canary=canary,
                       rng=np.random.default_rng([seed, 9]))
    noiseless = replace(plan, noise=False)  # the other sites' statistics, by their own code
    others = tuple(site_update(d, noiseless, rng=np.random.default_rng(0)) for d in datas[1:])
    d = pair.first.a.shape[0]
    dims = (d * (d + 1) // 2, pair.first.b.size)
    game = FederatedRound(plan=planted(plan, bug, dims=dims), dims=dims,
                          canary_first=quantise(pair.first.a, pair.first.b, plan),
                          canary_second=quantise(pair.second.a, pair.second.b, plan),
                          others=others)
    return game, plan, pair.canary


def _reach_and_shift(game: FederatedRound, plan: FederatedPlan) -> tuple[float, float]:
    """(reach, shift): the canary's whitened change over the claim's whitened quantised
    sensitivity, and that sensitivity (the claim's Gaussian-equivalent shift)."""
    dim_a, _ = game.dims
    change = (game.canary_second - game.canary_first).astype(np.float64)
    moved = math.sqrt(float(np.sum(change ** 2 / (2 * game.mus()))))
    correct = replace(game, plan=plan).mus()
    shift = math.hypot(plan.l2_a / math.sqrt(2 * correct[0]),
                       plan.l2_b / math.sqrt(2 * correct[dim_a]))
    return moved / shift, shift


@dataclass(frozen=True)
class FederatedAudit(LinearAudit):
    """:class:`~qpriv.audits.privacy_linear.LinearAudit` with the round's federation."""

    federation: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {**super().as_dict(), "federation": self.federation}


def audit_federated_dp_linear(*, unit: str = "record", eps: float = 1.0, delta: float = 1e-6,
                              canary: str = "worst", trials: int = 2000, seed: int = 0,
                              sites: int = SITES, threshold: int | None = None,
                              confidence: float = 0.95,
                              bug: str | None = None) -> FederatedAudit:
    """The game above for federated dp-linear at ``unit`` and (``eps``, ``delta``) over
    ``sites`` sites with ``threshold`` survivors (default ``sites - 1``, at least 2),
    ``trials`` releases per side. ``bug``: one of :data:`PLANTED_BUGS` (tests only).

    Raises:
        InvalidInputError: an unknown unit, canary or bug, too few trials or sites, a
            threshold outside [2, sites], or a bad budget.
    """
    start = time.perf_counter()
    trials, confidence = check_game(unit=unit, canary=canary, trials=trials,
                                    confidence=confidence, bug=bug, bugs=PLANTED_BUGS)
    if not 2 <= sites <= MAX_SITES:
        raise InvalidInputError(f"sites = {sites}: the game takes 2 to {MAX_SITES} sites (a "
                                "federation needs at least 2; each survivor costs a dataset)")
    threshold = max(2, sites - 1) if threshold is None else threshold
    game, plan, canary_info = federated_round(unit=unit, eps=eps, delta=delta, canary=canary,
                                              sites=sites, threshold=threshold, seed=seed,
                                              bug=bug)
    known = game.canary_first + sum(game.others)
    weights = (game.canary_second - game.canary_first) / (2 * game.mus())
    _, claim = decode_and_solve(game.release(np.random.default_rng(seed), prime=False), plan,
                                survivors=threshold)

    def score(rng: np.random.Generator, prime: bool) -> float:
        return float(np.dot((game.release(rng, prime=prime) - known).astype(np.float64),
                            weights))

    rates = play_many_runs(score, seed=seed, trials=trials, delta=delta,
                           confidence=confidence)
    reach, shift = _reach_and_shift(game, plan)
    bound = PrivacyClaim(
        value=rates.value, delta=delta, kind=Kind.GLOBAL_DP, accounting=Accounting.RIGOROUS,
        unit=Unit(unit), covers=claim.covers,
        notes=(f"a many-run audit: {trials} SecAgg+ sums of {threshold} of {sites} sites with "
               f"the canary's site on D and on D' ({canary} canary), the likelihood-ratio test "
               "of the sum along the canary's effect (Gaussian approximation of the Skellam "
               "noise), Clopper-Pearson rates",
               "the game runs the protocol's statistics and Skellam shares in one process (the "
               "sum SecAgg+ delivers exactly), the design fixed and, at the record unit, the "
               "sites' scalers declared public: a private scaler is a further release, not in "
               "the game"),
        details={"bound": LOWER_BOUND, "confidence": confidence, "audit": "many-run",
                 "observed": "secure-aggregation sum", "canary": canary})
    return FederatedAudit(
        claim=claim, lower_bound=bound, trials=trials, confidence=confidence,
        tpr=rates.hits / trials, fpr=rates.false_hits / trials, tpr_lower=rates.tpr_lower,
        fpr_upper=rates.fpr_upper, threshold=rates.threshold, reach=reach,
        ceiling=ceiling_at_shift(shift, delta=delta, trials=trials, confidence=confidence),
        canary=canary_info, seconds=time.perf_counter() - start,
        federation={"sites": sites, "threshold": threshold, "survivors": threshold,
                    "canary_site": 0, "scale": plan.scale, "mu_a": float(game.mus()[0]),
                    "mu_b": float(game.mus()[-1])})
