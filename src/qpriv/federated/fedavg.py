"""FedAvg over sites that keep their data: the public plan, and what each method claims.

Two methods train a model by rounds of local training and averaging (FedAvg,
"Communication-Efficient Learning of Deep Networks from Decentralized Data", McMahan et al.
2017), through Flower's Message-API strategy ``flwr.serverapp.strategy.FedAvg``
(:mod:`qpriv.federated.fedavg_app`); each site trains in its own process
(:mod:`qpriv.federated.train_site`):

* ``ldpt-fedavg``, the LDPT paper's section 8.5: each site trains the LDPT backbone on its own
  windows with its feature-path noise (the channel calibrated as central ``ldpt`` at the same
  per-pass eps_s) and returns its weights and its number of training windows; the server
  averages the weights weighted by windows. The claims are central LDPT's, per site
  (:func:`ldpt_fedavg_claims`): local eps-QDP per pass on each site's own tokens; the targets
  and the weights are not covered, and the server sees every site's weights in the clear
  (SecAgg+ is not used: the weights are no statistic the claim protects).
* ``dp-fedavg``, DP-FedAvg at the site unit: each site trains dp-linear's linear model
  (:class:`~qpriv.forecasting.linear_dpsgd.TrainableLinear`, which starts at the public
  forecast) locally without noise; the server clips each site's update to norm C and adds
  Gaussian noise to the uniform average (Flower's
  ``DifferentialPrivacyServerSideFixedClipping``); qpriv's accountant
  (:mod:`qpriv.privacy.site_dpfedavg`) calibrates the noise multiplier to (eps, delta) at the
  site unit over the rounds, and :func:`dp_fedavg_claim` states it.

:class:`FedAvgPlan` is everything the server fixes before the first round, sent to every site
in the clear; none of it reads data.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from qpriv.errors import InvalidInputError, require_in_range, require_positive_int
from qpriv.forecasting.config import ModelConfig
from qpriv.forecasting.linear import COVERS_LINEAR, linear_maps
from qpriv.forecasting.linear_dpsgd import DPSGD_LINEAR_DESIGN
from qpriv.forecasting.methods import MethodSetup, setup_method
from qpriv.forecasting.run_claims import run_claims
from qpriv.privacy.budget import FEATURE_PATH_DELTA, GLOBAL_DELTA
from qpriv.privacy.claims import Accounting, Kind, PrivacyClaim, Unit
from qpriv.privacy.randomness import randomness_note
from qpriv.privacy.site_dpfedavg import (
    ADJACENCY,
    site_epsilon,
    site_epsilon_pld,
    site_mu,
    site_noise_multiplier,
)

__all__ = ["DP_FEDAVG", "LDPT_FEDAVG", "METHODS", "FedAvgPlan", "dp_fedavg_claim",
           "ldpt_fedavg_claims", "plan_fedavg"]

LDPT_FEDAVG = "ldpt-fedavg"
DP_FEDAVG = "dp-fedavg"
METHODS = (LDPT_FEDAVG, DP_FEDAVG)
DEFAULT_CLIP = 0.01
"""dp-fedavg's clipping norm C of a site's update (the L2 norm of the change of the linear
model's 7 x 2 weights over one round of local training): the order of one local epoch's update
norm (0.004 to 0.012) at ETTh1's 8 time-split sites, so on ETTh1 that choice read the
training data; on other data it is a fixed constant."""
LINEAR_SETTINGS: dict[str, Any] = {"lr": 0.03, "batch_size": 512}
"""dp-fedavg's local training: dpsgd-linear's learning rate and batch
(:data:`qpriv.forecasting.linear_dpsgd.DEFAULTS`), without its noise."""
DELTA_PRIME = 1e-6
"""delta' of the LDPT claims' advanced composition (eq. 17), as central runs use."""


@dataclass(frozen=True)
class FedAvgPlan:
    """The public plan of a FedAvg federation (flat, for Flower's config records; a missing
    window limit is 0)."""

    method: str
    seq_len: int
    horizon: int
    period: int
    channels: str  # comma-separated, in order
    freq: str
    sites: int
    rounds: int
    local_epochs: int
    eps: float
    delta: float
    batch_size: int
    max_train_windows: int
    max_eval_windows: int
    overrides: str  # JSON of the LDPT model's settings
    clip: float
    noise_multiplier: float
    noise: bool

    def to_config(self) -> dict[str, Any]:
        """Flat JSON-able form (ints, floats, strings, bools)."""
        return asdict(self)

    @classmethod
    def from_config(cls, config: Any) -> FedAvgPlan:
        """Read :meth:`to_config`'s form back (extra keys ignored, e.g. Flower's round)."""
        names = [f.name for f in fields(cls)]
        missing = [name for name in names if name not in config]
        if missing:
            raise InvalidInputError(f"the FedAvg plan lacks {', '.join(missing)}: server and "
                                    "sites run different qpriv versions")
        return cls(**{name: config[name] for name in names})

    @property
    def n_channels(self) -> int:
        return len(self.channels.split(","))

    def window_limits(self) -> dict[str, int | None]:
        """The loader's window limits (None: every window)."""
        return {"max_train_windows": self.max_train_windows or None,
                "max_eval_windows": self.max_eval_windows or None}

    def ldpt_setup(self) -> MethodSetup:
        """Central ``ldpt``'s method at this plan's per-pass eps_s, shapes and overrides."""
        base = ModelConfig(seq_len=self.seq_len, horizon=self.horizon,
                           n_channels=self.n_channels)
        setup = setup_method("ldpt", base=base, eps=self.eps,
                             overrides=json.loads(self.overrides))
        return replace(setup, config=replace(setup.config, n_channels=self.n_channels))


def plan_fedavg(*, method: str, seq_len: int, horizon: int, period: int,
                channels: tuple[str, ...], freq: str, sites: int, rounds: int,
                local_epochs: int, eps: float, delta: float | None = None,
                batch_size: int | None = None, max_train_windows: int | None = None,
                max_eval_windows: int | None = None, overrides: dict | None = None,
                clip: float | None = None, noise: bool = True) -> FedAvgPlan:
    """The federation's public plan; for ``dp-fedavg`` the noise multiplier calibrated to
    (eps, delta) at the site unit over ``rounds`` (:func:`site_noise_multiplier`). ``noise``
    False (tests only) adds no server noise. The server's seed is not part of the plan: the
    plan goes to every site.

    Raises:
        InvalidInputError: an unknown method, rounds or epochs below 1, a bad eps or delta,
            model settings for dp-fedavg or a clip for ldpt-fedavg.
    """
    if method not in METHODS:
        raise InvalidInputError(f"method {method!r} is not a FedAvg method; use "
                                f"{' or '.join(METHODS)}")
    rounds = require_positive_int("rounds", rounds)
    local_epochs = require_positive_int("local_epochs", local_epochs)
    sites = require_positive_int("sites", sites)
    ldpt = method == LDPT_FEDAVG
    if ldpt and clip is not None:
        raise InvalidInputError("clip is dp-fedavg's clipping norm; ldpt-fedavg clips no "
                                "update: leave it out")
    if not ldpt and overrides:
        raise InvalidInputError("model settings (overrides) shape the LDPT backbone; "
                                "dp-fedavg trains the linear model: leave them out")
    delta = FEATURE_PATH_DELTA if ldpt and delta is None else \
        GLOBAL_DELTA if delta is None else delta
    delta = require_in_range("delta", delta, low=0.0, high=1.0, high_inclusive=False,
                             hint="delta is a probability in (0, 1), typically 1e-6")
    clip = require_in_range("clip", DEFAULT_CLIP if clip is None else clip, low=0.0,
                            hint="the clipping norm C of a site's update must be > 0")
    noise_multiplier = 0.0 if ldpt else site_noise_multiplier(eps=eps, delta=delta,
                                                              rounds=rounds)
    plan = FedAvgPlan(
        method=method, seq_len=seq_len, horizon=horizon, period=period,
        channels=",".join(channels), freq=freq, sites=sites, rounds=rounds,
        local_epochs=local_epochs, eps=float(eps), delta=delta,
        batch_size=int(batch_size or (64 if ldpt else LINEAR_SETTINGS["batch_size"])),
        max_train_windows=int(max_train_windows or 0),
        max_eval_windows=int(max_eval_windows or 0),
        overrides=json.dumps(dict(overrides or {}), sort_keys=True), clip=clip,
        noise_multiplier=noise_multiplier, noise=noise)
    # the model's settings checked before any process starts
    if ldpt:
        plan.ldpt_setup()
    else:
        linear_maps(replace(DPSGD_LINEAR_DESIGN, period=period), seq_len=seq_len,
                    horizon=horizon)
    return plan


FEDAVG_WEIGHTS_NOTE = (
    "who sees what: every round each site sends its locally trained weights to the server in "
    "the clear (SecAgg+ is not used) with its number of training windows, and the server "
    "sends the window-weighted average back to every site; the weights, and so the targets "
    "they were fitted to, are not covered, at any site or round")
SITE_REPORT_NOTE = (
    "at the end each site evaluates the final weights on its own validation and test splits "
    "and sends the errors, its file's span and its z-score scaler (per-channel mean and std) "
    "to the server in the clear: measurements outside the guarantee; the run's scaler is "
    "the pooled union of the sites' scalers")


def ldpt_fedavg_claims(plan: FedAvgPlan, *, secret: bool) -> dict:
    """Central LDPT's claims (:func:`qpriv.forecasting.run_claims.run_claims`), per site and
    labelled: local eps-QDP per pass on the feature path of each site's own tokens
    (accounting=paper, token unit), composed over the ``rounds x local_epochs`` passes over
    each site's training windows; the targets, the weights and the sites' reports are not
    covered."""
    setup = plan.ldpt_setup()
    passes = plan.rounds * plan.local_epochs
    part = run_claims(setup, epochs=passes, delta_prime=DELTA_PRIME, strategy={},
                      target=None, delta=FEATURE_PATH_DELTA, secret=secret)
    federated = (
        f"federated (FedAvg over {plan.sites} sites, {plan.rounds} round(s) of "
        f"{plan.local_epochs} local epoch(s)): each claim holds at each site for its own "
        "tokens, which pass through that site's channel only; the composed claims count the "
        f"{passes} passes over a site's training windows",
        FEDAVG_WEIGHTS_NOTE, SITE_REPORT_NOTE)
    details = {"sites": plan.sites, "rounds": plan.rounds, "local_epochs": plan.local_epochs,
               "aggregation": "FedAvg weighted by training windows "
                              "(flwr.serverapp.strategy.FedAvg)"}
    for key in ("eps_per_pass", "eps_basic", "eps_advanced"):
        entry = part[key]
        part[key] = {**entry, **details, "notes": [*entry.get("notes", []), *federated]}
    part["privacy_notes"] = [*part["privacy_notes"], *federated]
    return part


def dp_fedavg_claim(plan: FedAvgPlan, *, secret: bool) -> PrivacyClaim:
    """Global (eps, delta)-DP at the site unit of every round's noisy global weights and the
    final model (:mod:`qpriv.privacy.site_dpfedavg` derives it)."""
    eps = site_epsilon(noise_multiplier=plan.noise_multiplier, rounds=plan.rounds,
                       delta=plan.delta) if plan.noise else float("inf")
    details = {
        "mechanism": "DP-FedAvg: server-side fixed clipping of each site's update to norm C, "
                     "uniform FedAvg, Gaussian noise of std z C / n on the average "
                     "(flwr DifferentialPrivacyServerSideFixedClipping)",
        "adjacency": ADJACENCY, "sensitivity": "2 C / n (L2, of the averaged update)",
        "sites": plan.sites, "rounds": plan.rounds, "local_epochs": plan.local_epochs,
        "clip": plan.clip, "noise_multiplier": plan.noise_multiplier,
        "noise_std": plan.noise_multiplier * plan.clip / plan.sites,
        "mu_gdp": site_mu(noise_multiplier=plan.noise_multiplier, rounds=plan.rounds)
        if plan.noise else None,
        "eps_target": plan.eps,
        "eps_pld": site_epsilon_pld(noise_multiplier=plan.noise_multiplier,
                                    rounds=plan.rounds, delta=plan.delta)
        if plan.noise else None,
        "accountant": "closed form (Gaussian composition is exactly mu-GDP; analytic "
                      "Gaussian mechanism), cross-checked by dp-accounting's PLD",
        "sampling": "every site, every round (no amplification claimed)",
        "noise": plan.noise,
    }
    notes = (
        "central DP: the server is trusted; it receives each site's locally trained weights in "
        "the clear and clips them itself; the guarantee holds for what it releases (each "
        "round's noisy global weights, sent to every site, and the final model) against "
        "everyone else, sites included",
        "the whole site is the unit: everything a site computes before it answers (its "
        "scaler, its windows, its local training and its choice of best local epoch, its "
        "seed) is inside the guarantee, since only its clipped update reaches the release",
        f"{plan.sites} sites, each sampled every round, each weighted 1 (uniform FedAvg): a "
        "round with fewer replies releases nothing, so the averaged update's sensitivity "
        "stays 2 C / n",
        SITE_REPORT_NOTE.replace("; the run's scaler is the pooled union of the sites' "
                                 "scalers", ": the linear model stores no scaler"),
        "the local learning rate, batch and epochs and the number of rounds are fixed before "
        "the run; the default clipping norm (0.01) is the order of one local epoch's update "
        "norm on ETTh1 split by time into 8 sites: on ETTh1 that choice read the training "
        "data and is not accounted (on other data it is a fixed constant)",
        "the server's Gaussian noise comes from qpriv's noise sampler (OpenDP's vetted "
        "sampler for a secret seed), in place of the wrapper's NumPy global generator",
        randomness_note(secret=secret),
    )
    return PrivacyClaim(value=eps, delta=plan.delta, kind=Kind.GLOBAL_DP,
                        accounting=Accounting.RIGOROUS, unit=Unit.SITE,
                        covers=f"{COVERS_LINEAR}, and every round's global weights",
                        notes=notes, details=details)
