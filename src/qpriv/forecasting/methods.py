"""The forecasting methods (LDPT and its baselines, the LDPT paper's section 7.2) as
configurations of one backbone.

A method is a registry entry: a function ``(base, eps) -> MethodSetup`` that turns the shape of
the problem (``base``: sequence length, horizon, channels, sizes) and a per-pass budget into a
:class:`~qpriv.forecasting.config.ModelConfig` plus the privacy metadata a report needs. Adding
a baseline or an ablation is one more decorated function::

    @register("ldpt-no-injection", privacy="local eps-QDP per pass", needs_eps=True,
              summary="ldpt without the three-point injection (Table 10)")
    def _ldpt_no_injection(base, eps):
        return replace_config(_ldpt(base, eps), inject=False)

Every privacy number is labelled with its accounting (``paper``: the LDPT paper's formulas) and
its kind, so a report never mixes up a per-pass budget with a composed one.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from qpriv.errors import ArgumentError, InvalidInputError, require_in_range
from qpriv.forecasting.config import ModelConfig
from qpriv.privacy.budget import GLOBAL_DELTA, PrivacyTarget, Spend
from qpriv.privacy.calibration import Calibration, calibrate, check_eps
from qpriv.privacy.claims import Kind, Unit
from qpriv.privacy.gaussian import gaussian_sigma

NO_PRIVACY = "none"


@dataclass(frozen=True)
class MethodSetup:
    """What a method makes of ``(base, eps)``: the model config and its privacy metadata.

    ``privacy`` is the notion the method claims and the code enforces (``"none"``,
    ``"local eps-QDP per pass"``, ``"local (eps, delta)-DP per pass"`` or
    ``"global (eps, delta)-DP"``); ``eps_per_pass`` the per-pass budget it was calibrated to
    (None without one); ``noise`` the scales it injects (e.g. ``{"p": ..., "sigma": ...}``);
    ``calibration`` Algorithm 1's output. ``training`` replaces fields of the
    :class:`~qpriv.training.trainer.TrainConfig` (e.g. the tuned DP-SGD's batch and epochs);
    ``dpsgd`` asks for the DP-SGD step (``{"eps", "delta", "clip"}``, and ``"unit": "record"``
    with its ``"scaler"`` at the record unit), whose noise multiplier needs the training-set
    size and so is computed when the data is loaded. ``notes`` say what
    the method does not claim, e.g. where the paper claims more than the code enforces.
    ``rigorous`` holds the inverse calibration when the noise was set for a rigorous budget
    (:func:`qpriv.forecasting.rigorous.rigorous_setup`).
    """

    config: ModelConfig
    privacy: str = NO_PRIVACY
    eps_per_pass: float | None = None
    noise: Mapping[str, float] = field(default_factory=dict)
    calibration: Calibration | None = None
    training: Mapping[str, Any] = field(default_factory=dict)
    dpsgd: Mapping[str, Any] | None = None
    notes: tuple[str, ...] = ()
    rigorous: Mapping[str, Any] | None = None


BACKBONE = "backbone"
"""The family of the methods built on the one LDPT backbone and trained by the one trainer."""
LINEAR = "linear"
"""The family of the channel-independent linear forecasters fitted in closed form
(:mod:`qpriv.forecasting.linear`): the public floor, the ridge and dp-linear."""
READS_NO_DATA = "none needed: reads no training data"
"""The privacy of a forecast that reads no training data (the public floor)."""


@dataclass(frozen=True)
class Method:
    """A registry entry: name, claimed privacy notion, whether it needs eps, its family, the
    privacy units its guarantee can be stated at (``units[0]`` the default; empty: it states
    none at a unit a user may choose) and, for the backbone family, its builder."""

    name: str
    privacy: str
    needs_eps: bool
    summary: str
    build: Callable[[ModelConfig, float | None], MethodSetup] | None
    family: str = BACKBONE
    units: tuple[str, ...] = ()

    def check_unit(self, unit: str | None) -> str | None:
        """The unit a run of this method states its guarantee at: ``unit`` if the method
        offers it, its default (None: no unit to choose) when ``unit`` is None.

        Raises:
            ArgumentError: a unit the method does not offer, or any unit for a method that
                states no guarantee at a chosen unit.
        """
        if unit is None:
            return self.units[0] if self.units else None
        if unit not in [u.value for u in Unit]:
            raise ArgumentError(f"{{unit}} = {unit!r} is not a privacy unit; use one of "
                                f"{', '.join(u.value for u in Unit)}")
        if not self.units:
            raise ArgumentError(f"method {self.name!r} states no guarantee at a unit you can "
                                "choose; leave {unit} out")
        if unit not in self.units:
            raise ArgumentError(f"method {self.name!r} states its guarantee at the "
                                f"{' or '.join(self.units)} unit, not {unit!r}; use "
                                f"{{unit}} {self.units[0]}")
        return unit


METHODS: dict[str, Method] = {}
"""The registered methods, by name."""


def register(
    name: str, *, privacy: str, needs_eps: bool, summary: str, units: tuple[str, ...] = ()
) -> Callable[[Callable], Callable]:
    """Decorator: register ``build(base, eps) -> MethodSetup | ModelConfig`` under ``name``."""

    def decorate(build: Callable) -> Callable:
        _add(Method(name=name, privacy=privacy, needs_eps=needs_eps, summary=summary,
                    build=build, units=units))
        return build

    return decorate


def _add(entry: Method) -> None:
    if entry.name in METHODS:
        raise ValueError(f"method {entry.name!r} is registered twice")
    METHODS[entry.name] = entry


def method(name: str, *, listed: Collection[str] | None = None) -> Method:
    """The registry entry of ``name``; for an unknown name, an error naming the closest known
    method and listing them all (``listed``: only these, e.g. those a frontier takes)."""
    if name not in METHODS:
        known = sorted(METHODS if listed is None else listed)
        close = difflib.get_close_matches(str(name), known, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise InvalidInputError(f"unknown method {name!r}{hint}; known methods: "
                                f"{', '.join(known)}")
    return METHODS[name]


def check_method_eps(name: str, eps: float | None) -> float | None:
    """Validate ``eps`` for method ``name``: required and > 0 where the method calibrates to it,
    ignored (None) otherwise."""
    entry = method(name)
    if not entry.needs_eps:
        return None
    per_pass = entry.privacy.endswith("per pass")
    if eps is None:
        what = "a per-pass privacy budget" if per_pass else "a privacy budget"
        raise InvalidInputError(f"method {name!r} needs {what} eps > 0 (e.g. eps = 0.1)")
    if per_pass:  # calibrated through the channel, whose formulas take eps <= MAX_EPS
        return check_eps("eps (per-pass budget eps_s)", eps)
    # a global (eps, delta) budget, met by the method's own accountant
    return require_in_range("eps", eps, low=0.0, hint=f"{name}'s (eps, delta) budget must be "
                            "a finite number > 0, e.g. 1")


RECOMMENDED = "dp-linear"
"""The private forecaster to use: the default method of ``qpriv train`` and
:func:`qpriv.forecasting.run.run_forecast`. Its guarantee covers the weights and every forecast
at the record or window unit, it beats the public floor, and it fits in seconds; the papers'
methods stay one ``--method`` away."""
DEFAULT_EPS = 0.1
"""The budget of a run of a method that needs one when none is given: the per-pass eps_s of a
method that sets its noise per pass, the released model's eps of the global (eps, delta)-DP
ones (dp-linear, DP-SGD); :func:`run_budget` types it by which."""
DEFAULT_EPOCHS = 20
"""Training epochs of a backbone method that names none (the LDPT paper's)."""
DEFAULT_BATCH = 64
"""Training batch of a backbone method that names none (the LDPT paper's); DP-SGD's expected
Poisson batch."""
TUNED_EPOCHS = 50
"""Training epochs of ``dpsgd-tuned``, the one backbone method that names its own (paper
section 8.3)."""
TUNED_BATCH = 512
"""Training batch of ``dpsgd-tuned`` (paper section 8.3)."""
TUNED_WARMUP_EPOCHS = 5
"""Learning-rate warm-up of ``dpsgd-tuned``: the paper (section 8.3) says "a warmup" without
its length; 5 of its epochs is our choice."""
ACCOUNTINGS = ("paper", "rigorous")
"""How an LDPT run's channel is calibrated and accounted (``accounting=``): the paper's per-pass
eps_s, or the rigorous record-level eps over the whole training; the run and its side-channel
audit take the same two."""


def run_budget(name: str, *, eps: float | None = None, eps_total: float | None = None,
               accounting: str = "paper") -> PrivacyTarget | None:
    """The one budget a run of method ``name`` is built to meet, from the two a caller may
    give, typed by what it is spent on (None: a method that adds no noise).

    Under ``accounting="paper"`` the budget is ``eps``: the per-pass eps_s of Algorithm 1 for
    a method that sets its noise per pass (:data:`DEFAULT_EPS` when it gets none), the
    released model's (eps, delta) for the global (eps, delta)-DP ones (dp-linear, DP-SGD).
    Under ``"rigorous"`` it is ``eps_total``,
    the record-level eps over the whole training (:mod:`qpriv.forecasting.rigorous`), which
    must be given; ``eps`` is then refused, so that neither budget is ever silently read as the
    other.

    Examples:
        >>> run_budget("ldpt")
        PrivacyTarget(eps=0.1, spend=<Spend.PER_PASS: 'per pass'>, delta=None, unit=None)
        >>> run_budget("ldpt", eps_total=2.0, accounting="rigorous").eps_total
        2.0
        >>> run_budget("dp-linear", eps=1.0).spend.value
        'release'
        >>> run_budget("classical") is None
        True

    Raises:
        ArgumentError: ``eps`` and ``eps_total`` mixed up with the accounting, or ``eps`` for
            a method without noise.
        InvalidInputError: an unknown method or accounting.
    """
    entry = method(name)
    if accounting not in ACCOUNTINGS:
        raise InvalidInputError(f"accounting = {accounting!r} is not 'paper' or 'rigorous'")
    if accounting == "rigorous":
        if eps_total is None:
            raise ArgumentError("{accounting} needs {eps_total} (the record-level eps over "
                                "the whole training, at {delta})",
                                values={"accounting": "rigorous"})
        if eps is not None:
            raise ArgumentError("{eps} is the paper's per-pass budget; {accounting} takes "
                                "{eps_total} only", values={"accounting": "rigorous"})
        return PrivacyTarget(eps=eps_total, spend=Spend.OVER_TRAINING)
    if eps_total is not None:
        raise ArgumentError("{eps_total} is the rigorous budget: pass {accounting} with it, "
                            "or {eps} for the paper's per-pass budget",
                            values={"accounting": "rigorous"})
    if not entry.needs_eps:
        if eps is not None:
            raise ArgumentError(f"method {name!r} adds no noise and takes no {{eps}}; leave it "
                                "out")
        return None
    # a global (eps, delta)-DP method spends its budget on what it releases; every other one
    # (the channel, DP-Input, the bottleneck baselines) sets its noise per pass
    spend = Spend.RELEASE if entry.privacy == Kind.GLOBAL_DP else Spend.PER_PASS
    return PrivacyTarget(eps=DEFAULT_EPS if eps is None else eps, spend=spend)


def budget_arguments(name: str, budget: PrivacyTarget) -> dict[str, Any]:
    """The arguments of a run of method ``name`` that spend the typed ``budget``: ``eps`` (and
    the paper's accounting) for a per-pass or a release budget, ``eps_total`` with the rigorous
    accounting for one over the whole training, then its ``delta`` and ``unit`` where it names
    them. A budget spent on something the method does not spend its eps on is refused, so that
    a per-pass eps_s is never read as a released model's eps, nor the reverse.

    Examples:
        >>> budget_arguments("dp-linear", PrivacyTarget(1.0, Spend.RELEASE, unit="window"))
        {'eps': 1.0, 'accounting': 'paper', 'unit': 'window'}
        >>> budget_arguments("ldpt", PrivacyTarget(2.0, Spend.OVER_TRAINING, delta=1e-5))
        {'eps_total': 2.0, 'accounting': 'rigorous', 'delta': 1e-05}

    Raises:
        InvalidInputError: ``budget`` is not a :class:`PrivacyTarget`, or the method spends its
            eps on something else (or adds no noise).
    """
    if not isinstance(budget, PrivacyTarget):
        raise InvalidInputError(f"budget = {budget!r} is not a PrivacyTarget: give "
                                "PrivacyTarget(eps, Spend.RELEASE | PER_PASS | OVER_TRAINING)")
    rigorous = budget.spend is Spend.OVER_TRAINING
    arguments: dict[str, Any] = ({"eps_total": budget.eps, "accounting": "rigorous"} if rigorous
                                 else {"eps": budget.eps, "accounting": "paper"})
    entry = method(name)
    # whether a per-pass method's channel can be calibrated rigorously is the run's to refuse
    spends = ({Spend.RELEASE} if entry.privacy == Kind.GLOBAL_DP
              else {Spend.PER_PASS, Spend.OVER_TRAINING})
    if not entry.needs_eps or budget.spend not in spends:
        offered = (" or ".join(sorted(spend.name for spend in spends)) if entry.needs_eps
                   else "none: it adds no noise")
        raise InvalidInputError(
            f"method {name!r} does not spend its eps {budget.spend.value}; the budgets it "
            f"takes: {offered} (PrivacyTarget(eps, Spend.X))")
    if budget.delta is not None:
        arguments["delta"] = budget.delta
    if budget.unit is not None:
        arguments["unit"] = budget.unit
    return arguments


def replace_config(config: ModelConfig, **changes: Any) -> ModelConfig:
    """``dataclasses.replace`` that names the valid fields when a change has a wrong name."""
    known = {f.name for f in fields(ModelConfig)}
    unknown = sorted(set(changes) - known)
    if unknown:
        raise InvalidInputError(
            f"unknown model setting(s) {unknown}; valid settings: {', '.join(sorted(known))}"
        )
    return replace(config, **changes)


def setup_method(
    name: str,
    *,
    base: ModelConfig,
    eps: float | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> MethodSetup:
    """Build method ``name`` on ``base`` at budget ``eps`` with ``overrides`` (an ablation or a
    size change, e.g. ``{"n_shots": 256}``). Everything is validated here.

    The overrides are applied to ``base`` before the method is built (so that a calibration
    sees the overridden sizes, e.g. ``d_model`` in sigma = p / sqrt(d_model)) and again to the
    method's config (so that they win over the method's own choices, e.g. ``inject=False``).
    """
    entry = method(name)
    if entry.build is None:
        raise InvalidInputError(f"method {name!r} is a {entry.family} forecaster, not built on "
                                "the backbone; train it with `qpriv train --method "
                                f"{name}`")
    eps = check_method_eps(name, eps)
    changes = dict(overrides or {})
    built = entry.build(replace_config(base, **changes), eps)
    setup = built if isinstance(built, MethodSetup) else MethodSetup(config=built)
    if changes:
        setup = replace(setup, config=replace_config(setup.config, **changes))
    return setup


@register("classical", privacy=NO_PRIVACY, needs_eps=False,
          summary="no quantum path, no noise: tokens are x_cl, QC-AdaLN acts as LayerNorm")
def _classical(base: ModelConfig, eps: float | None) -> MethodSetup:
    config = replace_config(base, use_quantum=False, gate=0.0, inject=False, sigma=0.0, p=0.0)
    return MethodSetup(config=config)


@register("ldpt", privacy=Kind.LOCAL_QDP, needs_eps=True,
          summary="the LDPT paper's pipeline: calibrated channel, N_s shots, three-point "
                  "injection")
def _ldpt(base: ModelConfig, eps: float | None) -> MethodSetup:
    # needs_eps: setup_method has checked that eps is a number > 0
    cal = calibrate(eps, dim=base.dim, d_model=base.d_model)
    config = replace_config(base, use_quantum=True, p=cal.p, sigma=cal.sigma, inject=True)
    return MethodSetup(
        config=config, privacy=Kind.LOCAL_QDP, eps_per_pass=eps,
        noise={"p": cal.p, "gamma": cal.gamma, "sigma": cal.sigma}, calibration=cal,
    )


@register("ldpt-clean", privacy=NO_PRIVACY, needs_eps=False,
          summary="quantum path with p = 0, exact probabilities, no injection (LDPT Baseline)")
def _ldpt_clean(base: ModelConfig, eps: float | None) -> MethodSetup:
    config = replace_config(base, use_quantum=True, p=0.0, n_shots=None, inject=False,
                            sigma=0.0)
    return MethodSetup(config=config)


SIGNED_NOTE = ("the signed encoding psi = (x, r) / ||(x, r)|| (x clipped to [-c, c], a fixed "
               "reference amplitude r, one qubit more, a SIC-POVM with D^2 = 1024 outcomes) "
               "tells x from -x and keeps the norm; its "
               "neighbouring trace distance d = 4 c r / (c^2 + r^2) is proved for one value "
               "replaced within [-c, c], not assumed as eq. 2's d = 0.1 is")


@register("ldpt-signed", privacy=Kind.LOCAL_QDP, needs_eps=True,
          summary="ldpt with the signed encoding (x, r) / ||(x, r)||: sign and norm kept, "
                  "neighbouring trace distance proved (d = 0.1 at c = 2, r = 80); channel "
                  "calibrated at that d and D = 32")
def _ldpt_signed(base: ModelConfig, eps: float | None) -> MethodSetup:
    """LDPT's feature path with each token's sign and scale kept (``encoding="signed"``).

    A token x in R^16 (after the model's normalisation) is clipped to the public range
    [-c, c] (c = 2) and encoded with a fixed reference amplitude r on five qubits,
    psi(x) = (x, r, 0, ..., 0) / sqrt(||x||^2 + r^2), so psi(-x) != psi(x) and the norm is
    seen through the weight of r (eq. 2's x / ||x|| sees neither). Neighbouring tokens (one
    value replaced within [-c, c]) lie at full trace distance at most
    d = 4 c r / (c^2 + r^2) (r >= c; :func:`qpriv.privacy.trace_distance.signed_neighbour_distance`
    derives it): the default r = c (2 + sqrt(4 - d^2)) / d = 79.95 makes that the LDPT paper's
    d = 0.1, now a proved bound rather than an assumption. Algorithm 1 calibrates the channel
    at that d and at the register's D = 32 (Theorem 1, eq. 4: p = d D / (e^eps_ch - 1 + d D),
    0.9746 at eps_s = 0.1 against ldpt's 0.9505), and the rigorous accounting composes the
    exact single-shot outcomes of the worst pure pair at that d over shots, tokens (of 16
    values) and epochs. The measurement is the D = 32 SIC-POVM (1024 outcomes, a shipped
    fiducial; :mod:`qpriv.quantum.povm`). Like
    ``ldpt``'s, the guarantee covers the released quantum features only, not the forecast
    targets nor the trained weights; with RevIN (the default) the bound holds per token state
    only, with ``normalisation="fixed"`` (``--accounting rigorous``) for every window and
    record too.

    Measured (ETTh1, H = 24, L = 336, 1024 training windows, 2 epochs, one seed;
    ``scripts/measure_signed.py``): without noise the encoding matches the classical backbone
    (test MSE 0.456 against 0.461; eq. 2's ``ldpt-clean`` 0.625), but with noise it trails
    ``ldpt`` (0.913 / 0.907 / 0.879 at eps_s = 0.1 / 1 / 5, against 0.895 / 0.740 / 0.661):
    a proved d = 0.1 keeps every state within about ||x|| / r of |r>, so the features' signal
    is 700-2600 times weaker against the shot noise than eq. 2's.
    """
    signed = replace_config(base, encoding="signed")
    cal = calibrate(eps, d=signed.neighbour_d, dim=signed.hilbert_dim, d_model=base.d_model)
    config = replace_config(signed, use_quantum=True, p=cal.p, sigma=cal.sigma, inject=True)
    return MethodSetup(
        config=config, privacy=Kind.LOCAL_QDP, eps_per_pass=eps,
        noise={"p": cal.p, "gamma": cal.gamma, "sigma": cal.sigma}, calibration=cal,
        notes=(SIGNED_NOTE,),
    )


@register("ldpt-signed-clean", privacy=NO_PRIVACY, needs_eps=False,
          summary="ldpt-signed with p = 0, exact probabilities, no injection (what the signed "
                  "encoding allows without noise)")
def _ldpt_signed_clean(base: ModelConfig, eps: float | None) -> MethodSetup:
    config = replace_config(base, encoding="signed", use_quantum=True, p=0.0, n_shots=None,
                            inject=False, sigma=0.0)
    return MethodSetup(config=config)


# -- baselines (the LDPT paper, section 7.2) -------------------------------------------------


@register("dpsgd", privacy=Kind.GLOBAL_DP, needs_eps=True, units=("window", "record"),
          summary="classical + DP-SGD: per-window clipping C = 1, Poisson batches of 64, "
                  "Gaussian noise from Opacus's accountant for (eps, delta = 1e-6)")
def _dpsgd(base: ModelConfig, eps: float | None) -> MethodSetup:
    return replace(_classical(base, None), privacy=Kind.GLOBAL_DP,
                   dpsgd={"eps": eps, "delta": GLOBAL_DELTA, "clip": 1.0})


@register("dpsgd-tuned", privacy=Kind.GLOBAL_DP, needs_eps=True, units=("window", "record"),
          summary=f"DP-SGD with batch {TUNED_BATCH}, {TUNED_EPOCHS} epochs and a "
                  f"{TUNED_WARMUP_EPOCHS}-epoch learning-rate warm-up (paper section 8.3)")
def _dpsgd_tuned(base: ModelConfig, eps: float | None) -> MethodSetup:
    return replace(_dpsgd(base, eps),
                   training={"batch_size": TUNED_BATCH, "epochs": TUNED_EPOCHS,
                             "warmup_epochs": TUNED_WARMUP_EPOCHS})


@register("dp-input", privacy=Kind.LOCAL_DP, needs_eps=True,
          summary="classical + Gaussian noise on the z-scored input, Gaussian-mechanism sigma "
                  "(Delta = 1, delta = 1e-6), fresh on every pass")
def _dp_input(base: ModelConfig, eps: float | None) -> MethodSetup:
    sigma = gaussian_sigma(eps=eps, delta=GLOBAL_DELTA, sensitivity=1.0)
    config = replace_config(_classical(base, None).config, input_noise=sigma)
    notes = ["each pass releases a fresh noisy copy of every window: (eps, delta) holds per "
             "pass, for neighbouring windows at L2 distance <= 1 in z-score units; passes "
             "compose (the paper calls it global)",
             "the L2 sensitivity 1 is eq. 1's neighbourhood, assumed, not enforced: the input "
             "is not clipped, so one changed value moves every window that holds it by as "
             "much as it changes in z-score units, and the guarantee says nothing about a "
             "change beyond distance 1"]
    if not 0 < eps < 1:
        notes.append(f"eq. 1's classical proof needs eps < 1; at eps = {eps:g} the Gaussian "
                     "sigma carries no proven guarantee")
    return MethodSetup(config=config, privacy=Kind.LOCAL_DP, eps_per_pass=eps,
                       noise={"input_sigma": sigma, "delta": GLOBAL_DELTA}, notes=tuple(notes))


@register("bottleneck", privacy=NO_PRIVACY, needs_eps=True,
          summary="classical + the three-point injection at LDPT's sigma(eps); no privacy claim")
def _bottleneck(base: ModelConfig, eps: float | None) -> MethodSetup:
    cal = calibrate(eps, dim=base.dim, d_model=base.d_model)
    config = replace_config(_classical(base, None).config, inject=True, sigma=cal.sigma)
    return MethodSetup(config=config, noise={"sigma": cal.sigma}, calibration=cal,
                       notes=("noise at LDPT's sigma(eps) without the channel: no mechanism "
                              "maps this sigma to a privacy parameter (paper section 8.4)",))


@register("bottleneck-dp", privacy=NO_PRIVACY, needs_eps=True,
          summary="classical + three-point injection at the Gaussian-mechanism sigma "
                  "(Delta = 1, delta = 1e-6); the paper's (eps, delta)-DP claim is not enforced")
def _bottleneck_dp(base: ModelConfig, eps: float | None) -> MethodSetup:
    sigma = gaussian_sigma(eps=eps, delta=GLOBAL_DELTA, sensitivity=1.0)
    config = replace_config(_classical(base, None).config, inject=True, sigma=sigma)
    return MethodSetup(
        config=config, noise={"sigma": sigma, "delta": GLOBAL_DELTA},
        notes=("the paper claims (eps, delta)-DP; the injection scales its noise by each "
               "token's own std (data-dependent) and nothing bounds the sensitivity of the "
               "activations it perturbs, so the Gaussian mechanism's proof does not apply and "
               "no guarantee is reported",),
    )


# -- ablations (Table 10) -------------------------------------------------------------------


def _ablation(name: str, summary: str, **changes: Any) -> None:
    """Register ``ldpt-<name>``: LDPT at eps with ``changes``; the channel (and so the local
    eps-QDP per pass of Theorem 1) is kept unless ``p`` is changed."""
    keeps_channel = "p" not in changes

    def build(base: ModelConfig, eps: float | None) -> MethodSetup:
        setup = _ldpt(base, eps)
        config = replace_config(setup.config, **changes)
        noise = {"p": config.p, "gamma": setup.noise["gamma"] if config.p else 0.0,
                 "sigma": config.sigma if config.injects else 0.0}
        setup = replace(setup, config=config, noise=noise)
        if not keeps_channel:
            setup = replace(setup, privacy=NO_PRIVACY, eps_per_pass=None,
                            notes=("the channel is removed: no privacy claim",))
        return setup

    register(f"ldpt-{name}", privacy=Kind.LOCAL_QDP if keeps_channel else NO_PRIVACY,
             needs_eps=True, summary=f"{summary} (Table 10 ablation)")(build)


_ablation("no-injection", "ldpt without the three-point injection", inject=False)
_ablation("no-channel", "ldpt with gamma = 0 (p = 0), the injection kept at sigma(eps)", p=0.0)
_ablation("shots256", "ldpt with N_s = 256 shots", n_shots=256)
_ablation("shots4096", "ldpt with N_s = 4096 shots", n_shots=4096)
_ablation("k1", "ldpt with noise #3 factor k = 1", k=1.0)
_ablation("k3", "ldpt with noise #3 factor k = 3", k=3.0)
_ablation("layernorm", "ldpt with LayerNorm instead of QC-AdaLN", norm="layernorm")


# -- the linear family (qpriv.forecasting.linear): fitted in closed form, no backbone ---------

_add(Method(name="public", privacy=READS_NO_DATA, needs_eps=False, build=None, family=LINEAR,
            summary="the public floor: a seasonal forecast of the look-back that reads no "
                    "training data (every private method must beat it)"))
_add(Method(name="ridge", privacy=NO_PRIVACY, needs_eps=False, build=None, family=LINEAR,
            summary="channel-independent ridge on the dp-linear features, fitted in the clear "
                    "(the non-private reference of dp-linear)"))
_add(Method(name="dp-linear", privacy=Kind.GLOBAL_DP, needs_eps=True, build=None,
            family=LINEAR, units=("record", "window"),
            summary="channel-independent linear forecaster by sufficient-statistics "
                    "perturbation (AdaSSP); (eps, delta)-DP at the record or window unit, "
                    "scaler inside the guarantee"))
_add(Method(name="dlinear", privacy=NO_PRIVACY, needs_eps=False, build=None, family=LINEAR,
            summary="DLinear (Zeng et al. 2023): moving-average trend/seasonal split, one "
                    "linear head each, trained by the one trainer without noise"))


def _add_dpsgd_trained(name: str, model: str) -> None:
    """Register ``name``: the linear-family ``model`` trained by DP-SGD at either unit."""
    _add(Method(name=name, privacy=Kind.GLOBAL_DP, needs_eps=True, build=None, family=LINEAR,
                units=("window", "record"),
                summary=f"{model} trained by DP-SGD (per-window clipping); (eps, delta)-DP at "
                        "the window unit (Opacus RDP) or the record unit (structured-"
                        "subsampling accountant, scaler private or public)"))


_add_dpsgd_trained("dpsgd-linear", "dp-linear's model, for comparison,")
_add_dpsgd_trained("dpsgd-dlinear", "DLinear")
