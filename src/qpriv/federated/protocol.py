"""Federated dp-linear in one round: what each site sends, and how the server solves.

Each site holds its own series. It computes the clipped sufficient statistics (A, B) of
central dp-linear (:func:`qpriv.forecasting.linear_design.sufficient_statistics`, on the fixed
design :func:`qpriv.forecasting.linear_select.base_spec`, with the clips and record or window
sensitivities of :func:`qpriv.forecasting.linear.statistic_sensitivities`), quantises them to
integers ``round(gamma s)`` (A's upper triangle, then B), adds its share ``Sk(mu_i)`` of
Skellam noise (:mod:`qpriv.privacy.skellam`: the sum of shares is Skellam) and hands the vector
to SecAgg+, which reveals only the sum. The server decodes ``sum / gamma``, repairs A and
solves the ridge exactly as central dp-linear does (:func:`decode_and_solve`). A site's part
runs in :mod:`qpriv.federated.site`; the plan is :class:`qpriv.federated.plan.FederatedPlan`.

Why Skellam: the sum of the survivors' shares is exactly ``Sk(sum mu_i)``, so the server's view
is the central Skellam mechanism and its RDP bound applies as is; the distributed discrete
Gaussian's sum is only close to a discrete Gaussian and pays an extra term.

Who is protected and against whom. Neighbours differ in one record (or one window) of one
site. The adversary is the server (honest-but-curious, sees only the SecAgg+ sum) together
with any coalition of at most ``colluders`` other sites, which know their own noise shares and
can subtract them. With ``sites`` sites and a SecAgg+ threshold ``threshold`` (at most
``t = sites - threshold`` dropped), each site's share is sized so that ``threshold -
colluders`` shares alone meet the target: ``mu_i = mu / (threshold - colluders)``. The claim
is recomputed for the actual survivors s (``s - colluders`` honest shares; more survivors,
smaller eps). Fewer than ``threshold`` survivors: nothing is released.

Quantisation and wrap-around, derived. (1) Rounding: the decoded sum of s sites is off the real
sum by at most ``s / (2 gamma)`` per entry, and the rounded statistic's L2 sensitivity is
``gamma Delta + sqrt(dim)`` (:func:`qpriv.privacy.skellam.quantised_sensitivity`), which the
accounting uses. (2) Range: Flower's SecAgg+ maps each site's value v to ``v + c`` in
``[0, 2 c]`` and sums modulo ``M = 2^32``; with ``c = floor((M - 1) / (2 sites))`` (at most
``2^30``, so ``2 c`` fits an int32) the sum of ``sites`` values lies in ``[0, sites 2 c] <
M``: wrap-around is impossible. (3) Clamping: SecAgg+ clips v to ``[-c, c]``. Each clipped
row has ``|phi_i phi_j| <= c_x^2`` and ``|phi_i r_j| <= c_x c_y``, so a site's rounded
statistic is at most ``gamma n_max max(c_x^2, c_x c_y) + 1/2`` in size for a declared bound
``n_max`` on a site's rows (windows x channels; a site with more refuses before sending).
``gamma`` is the largest power of two that leaves room ``h`` for the noise such that
``dim x sites x P(|Sk(mu_i)| >= h) <= delta / 100`` (Bernstein's bound,
:func:`qpriv.privacy.skellam.skellam_tail`). That clamping probability is added to delta:
the Skellam accounting gets ``0.99 delta``.
"""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any

import numpy as np

from qpriv.errors import InvalidInputError, require_in_range
from qpriv.federated.plan import CLAMP_SHARE, MODULUS, FederatedPlan, release_dims
from qpriv.forecasting.linear import (
    COVERS_LINEAR,
    LinearForecaster,
    check_dp_linear_eps,
    statistic_sensitivities,
)
from qpriv.forecasting.linear_design import DEFAULTS, base_spec, kernel_from_weights
from qpriv.privacy.claims import Accounting, Kind, PrivacyClaim, Unit
from qpriv.privacy.randomness import randomness_note
from qpriv.privacy.samplers import CHACHA, CHACHA_NOTE
from qpriv.privacy.skellam import (
    calibrate_skellam,
    quantised_sensitivity,
    skellam_epsilon,
    skellam_tail,
)
from qpriv.privacy.ssp import noise_scaled_ridge, psd_floor, ridge_solve

__all__ = [
    "CLAMP_SHARE",
    "FIXED_DESIGN",
    "MODULUS",
    "PERSONAL_DESIGN",
    "FederatedPlan",
    "checked_total",
    "decode_and_solve",
    "federated_claim",
    "part_sigma",
    "plan_federation",
    "unpack",
]


FIXED_DESIGN = ("fixed: the base design for L and the period, default clips and ridge scale, "
                "one kernel for every site (not selected on the sites' data)")
"""A fixed round's design, as its claim states it."""
PERSONAL_DESIGN = (
    "personal: the base design for L and the period, default clips and ridge scale, a pooled "
    "kernel and one kernel per site shrunk toward it by a fixed amount (post-processing of "
    "the sites' slots; nothing selected on the sites' data)")
"""A personal round's design (:mod:`qpriv.federated.personal`), as its claim states it."""


def plan_federation(*, seq_len: int, horizon: int, period: int, unit: str, eps: float,
                    delta: float, sites: int, threshold: int, colluders: int = 0,
                    channels: tuple[str, ...], freq: str, max_rows: int,
                    scaler: str = "private", noise: bool = True, clip: float | None = None,
                    feature_clip: float | None = None,
                    target_clip: float | None = None, personal: bool = False,
                    quantised: bool = True) -> FederatedPlan:
    """The round's public plan: clips, the quantisation scale and each site's Skellam share,
    calibrated so that ``threshold - colluders`` honest shares are (eps, delta)-DP at ``unit``
    (module docstring). ``personal``: the round of :mod:`qpriv.federated.personal` (each site
    its own slot, two time parts). ``quantised`` False (tests only, with ``noise`` False):
    the sites send their float statistics, unscaled and unrounded.

    Raises:
        InvalidInputError: fewer than 2 sites, a threshold outside [2, sites], colluders not
            below the threshold, a bad eps, delta or unit, or unquantised statistics with noise.
    """
    eps = check_dp_linear_eps(eps)
    delta = require_in_range("delta", delta, low=0.0, high=1.0, high_inclusive=False,
                             hint="delta is a probability in (0, 1), typically 1e-6")
    if sites < 2:
        raise InvalidInputError(f"{sites} site(s): a federation needs at least 2; pass --site "
                                "once per site")
    if not 2 <= threshold <= sites:
        raise InvalidInputError(f"threshold = {threshold} must lie in [2, {sites}] (the sites "
                                "that must survive the round)")
    if not 0 <= colluders < threshold:
        raise InvalidInputError(f"colluders = {colluders} must lie in [0, {threshold - 1}]")
    if unit not in DEFAULTS:
        raise InvalidInputError(f"unit = {unit!r} is not a privacy unit; use 'record' or "
                                "'window'")
    if scaler not in ("private", "data"):
        raise InvalidInputError(f"scaler = {scaler!r}: use 'private' or 'data'")
    if not quantised and noise:
        raise InvalidInputError("unquantised statistics are for noiseless tests only: "
                                "Skellam noise needs integers")
    defaults = DEFAULTS[unit]
    half_range = min((MODULUS - 1) // (2 * sites), 2 ** 30)
    plan = FederatedPlan(
        seq_len=seq_len, horizon=horizon, period=period, unit=unit, eps=eps, delta=delta,
        sites=sites, threshold=threshold, colluders=colluders, channels=",".join(channels),
        freq=freq, scaler=scaler,
        clip=float(defaults.get("clip", 0.0) if clip is None else clip),
        feature_clip=float(defaults["feature_clip"] if feature_clip is None else feature_clip),
        target_clip=float(defaults["target_clip"] if target_clip is None else target_clip),
        share_a=float(defaults["share_a"]), ridge_scale=float(defaults["ridge_scale"]),
        scaler_share=float(defaults.get("scaler_share", 0.0)), max_rows=int(max_rows),
        half_range=half_range, scale=1.0, mu_a_site=0.0, mu_b_site=0.0, l2_a=0.0, l2_b=0.0,
        noise=noise, personal=personal, quantised=quantised)
    return _calibrated(plan)


def _calibrated(plan: FederatedPlan) -> FederatedPlan:
    """``plan`` with its scale and Skellam shares: the largest power-of-two scale whose
    statistics and noise fit SecAgg+'s range except with probability delta / 100."""
    maps = plan.maps()
    d_a, d_b, _ = statistic_sensitivities(Unit(plan.unit), maps,
                                          n_channels=len(plan.channels.split(",")),
                                          clip=plan.clip if plan.unit == "record" else None,
                                          feature_clip=plan.feature_clip,
                                          target_clip=plan.target_clip)
    (dim_a, dim_b), (sent_a, sent_b) = release_dims(plan)
    signal = plan.max_rows * plan.row_bound()
    honest = plan.threshold - plan.colluders
    eps_noise = plan.eps - plan.eps_scaler
    scale = 2.0 ** math.floor(math.log2(plan.half_range / signal))
    for _ in range(64):
        sens_a = quantised_sensitivity(scale=scale, sensitivity=d_a, dim=dim_a)
        sens_b = quantised_sensitivity(scale=scale, sensitivity=d_b, dim=dim_b)
        mu_a, mu_b = calibrate_skellam(eps=eps_noise, delta=(1 - CLAMP_SHARE) * plan.delta,
                                       sensitivities=(sens_a, sens_b),
                                       shares=(plan.share_a, 1 - plan.share_a))
        room = plan.half_range - scale * signal - 0.5
        clamp = plan.sites * (sent_a * skellam_tail(mu=mu_a / honest, bound=room)
                              + sent_b * skellam_tail(mu=mu_b / honest, bound=room))
        if room > 0 and clamp <= CLAMP_SHARE * plan.delta:
            return _replace(plan, scale=scale, mu_a_site=mu_a / honest,
                            mu_b_site=mu_b / honest, l2_a=sens_a[0], l2_b=sens_b[0])
        scale /= 2
    raise InvalidInputError(f"no quantisation scale fits {plan.max_rows} rows per site in "
                            "SecAgg+'s 32-bit range; split the sites' data further")


def _replace(plan: FederatedPlan, **changes: Any) -> FederatedPlan:
    return FederatedPlan(**{**asdict(plan), **changes})


def decode_and_solve(total: np.ndarray, plan: FederatedPlan, *,
                     survivors: int) -> tuple[LinearForecaster, PrivacyClaim]:
    """The model and claim from SecAgg+'s sum of ``survivors`` sites' vectors (integers).

    Raises:
        InvalidInputError: fewer survivors than the threshold, a vector of the wrong size
            or out of range (a malformed update), or a personal plan (decoded by
            :func:`qpriv.federated.personal.decode_personal`).
    """
    if plan.personal:
        raise InvalidInputError("a personal round releases one kernel per site: decode it "
                                "with qpriv.federated.personal.decode_personal")
    total = checked_total(total, plan, survivors=survivors)
    features, public, outputs = plan.maps()
    a, b = unpack(total / plan.decode_scale, features.shape[0], outputs.shape[1])
    ridge = noise_scaled_ridge(part_sigma(plan, survivors=survivors), features.shape[0],
                               scale=plan.ridge_scale)
    weights = ridge_solve(psd_floor(a), b, ridge=ridge)
    claim = federated_claim(plan, survivors=survivors, ridge=ridge)
    model = LinearForecaster(kernel=kernel_from_weights(features=features, public=public,
                                                        targets=outputs, weights=weights),
                             spec=base_spec(seq_len=plan.seq_len, period=plan.period),
                             name=f"federated dp-linear ({plan.unit}, eps={claim.value:.4g})",
                             details=dict(claim.details))
    return model, claim


def checked_total(total: np.ndarray, plan: FederatedPlan, *, survivors: int) -> np.ndarray:
    """SecAgg+'s sum as floats, refused (one line) when fewer than the threshold survived or
    when it has the wrong size, a non-finite entry or one beyond the survivors' range."""
    if survivors < plan.threshold:
        raise InvalidInputError(
            f"only {survivors} of {plan.sites} sites survived the round, below the threshold "
            f"{plan.threshold}: nothing is released; rerun when the sites are reachable")
    size = sum(release_dims(plan)[1])
    total = np.asarray(total, dtype=np.float64)
    if total.shape != (size,) or not np.isfinite(total).all() or \
            np.abs(total).max(initial=0) > survivors * plan.half_range:
        raise InvalidInputError(f"the aggregated update has shape {total.shape} or values out "
                                f"of range; expected {size} integers")
    return total


def unpack(values: np.ndarray, d: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(A, B) from one statistics vector: A's upper triangle (d (d + 1) / 2 entries, mirrored
    into the symmetric d x d matrix), then B (d x k, row-major)."""
    dim_a = d * (d + 1) // 2
    a = np.zeros((d, d))
    a[np.triu_indices(d)] = values[:dim_a]
    return a + np.triu(a, 1).T, np.asarray(values[dim_a:]).reshape(d, k)


def part_sigma(plan: FederatedPlan, *, survivors: int) -> float:
    """The noise's standard deviation on each decoded entry of A (one statistics vector; in a
    personal round, one part of one site's slot): the sum of the honest survivors' shares,
    ``Sk((survivors - colluders) mu_a_site)`` of variance ``2 mu``, over the scale."""
    return math.sqrt(2 * (survivors - plan.colluders) * plan.mu_a_site) / plan.scale


def federated_claim(plan: FederatedPlan, *, survivors: int, ridge: float,
                    personal: dict[str, Any] | None = None) -> PrivacyClaim:
    """The (eps, delta) claim of a round with ``survivors`` sites (module docstring);
    ``personal``: a personal round's shrink and present slots, for its details."""
    honest = survivors - plan.colluders
    dims = list(release_dims(plan)[1])
    mu_a, mu_b = honest * plan.mu_a_site, honest * plan.mu_b_site
    eps_skellam = skellam_epsilon([(plan.l2_a, plan.l2_a ** 2, mu_a),
                                   (plan.l2_b, plan.l2_b ** 2, mu_b)],
                                  delta=(1 - CLAMP_SHARE) * plan.delta)
    eps = plan.eps_scaler + eps_skellam
    details = {
        "mechanism": "federated sufficient-statistics perturbation: integer statistics with "
                     "Skellam noise shares summed by Flower SecAgg+ (Agarwal, Kairouz & Liu "
                     "2021), AdaSSP-style ridge",
        "sites": plan.sites, "survivors": survivors, "threshold": plan.threshold,
        "dropouts_tolerated": plan.sites - plan.threshold, "colluders": plan.colluders,
        "eps_target": plan.eps, "eps_scaler": plan.eps_scaler, "eps_skellam": eps_skellam,
        "scale": plan.scale, "half_range": plan.half_range, "max_rows": plan.max_rows,
        "mu_a_site": plan.mu_a_site, "mu_b_site": plan.mu_b_site, "mu_a": mu_a, "mu_b": mu_b,
        "l2_a": plan.l2_a, "l2_b": plan.l2_b, "dims": dims,
        "quantisation_error_per_entry": survivors / (2 * plan.scale),
        "clamp_delta": CLAMP_SHARE * plan.delta, "ridge": ridge,
        "clip": plan.clip, "feature_clip": plan.feature_clip,
        "target_clip_per_block": plan.target_clip, "period": plan.period,
        "noise": plan.noise, "noise_sampler": CHACHA, "scaler": _scaler_label(plan),
        "design": PERSONAL_DESIGN if plan.personal else FIXED_DESIGN,
        **({"personal": personal} if personal is not None else {}),
    }
    notes = (
        f"who sees what: the server sees only the SecAgg+ sum of the {survivors} surviving "
        f"sites' noisy integer statistics (threshold {plan.threshold} of {plan.sites}); each "
        "site sees its own data and the public plan; the guarantee holds against the server "
        f"together with any {plan.colluders} colluding other site(s), which know their own "
        f"noise shares: {honest} honest shares remain",
        f"noise sized for the survivors: each share is Sk(mu / {plan.threshold - plan.colluders}"
        f"), so the round tolerates {plan.sites - plan.threshold} dropped site(s); this claim "
        f"is computed for the {survivors} that survived",
        "the server is honest-but-curious and SecAgg+ (Bell et al. 2020) is secure at its "
        "threshold; a server that forges dropouts to unmask a site is outside the claim",
        f"the design: {PERSONAL_DESIGN if plan.personal else FIXED_DESIGN}",
        "each site's private scaler (record unit) composes in parallel across sites: its "
        "records are its own" if plan.uses_private_scaler else
        "record unit with scaler 'data': each site's scaler is fitted in the clear and NOT "
        "covered" if plan.unit == "record" else "window unit: each row is normalised by its "
        "own look-back; no scaler",
        "a site refuses (before sending) when its columns, frequency or row count do not fit "
        "the plan: that refusal reads its data and is not covered",
        randomness_note(secret=True),
        CHACHA_NOTE,
    )
    return PrivacyClaim(value=eps, delta=plan.delta, kind=Kind.GLOBAL_DP,
                        accounting=Accounting.RIGOROUS, unit=Unit(plan.unit),
                        covers=COVERS_LINEAR, notes=notes, details=details)


def _scaler_label(plan: FederatedPlan) -> str:
    """What the claim's details say of the sites' scalers."""
    if plan.unit == "window":
        return "none: the window unit normalises each row by its own look-back"
    if plan.uses_private_scaler:
        return "private at each site, inside the claim"
    return "declared public: each site's training-split scaler, in the clear, NOT covered"
