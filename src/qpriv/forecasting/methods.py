"""The methods of SPEC section 4 as configurations of one backbone.

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

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from qpriv.errors import InvalidInputError
from qpriv.forecasting.config import ModelConfig
from qpriv.privacy.calibration import Calibration, calibrate, check_eps

NO_PRIVACY = "none"
LOCAL_QDP = "local eps-QDP per pass"


@dataclass(frozen=True)
class MethodSetup:
    """What a method makes of ``(base, eps)``: the model config and its privacy metadata.

    ``privacy`` is the notion the method claims (``"none"`` or ``"local eps-QDP per pass"``);
    ``eps_per_pass`` the budget it was calibrated to (None without a claim); ``noise`` the scales
    it injects (e.g. ``{"p": ..., "sigma": ...}``); ``calibration`` Algorithm 1's output.
    """

    config: ModelConfig
    privacy: str = NO_PRIVACY
    eps_per_pass: float | None = None
    noise: Mapping[str, float] = field(default_factory=dict)
    calibration: Calibration | None = None


@dataclass(frozen=True)
class Method:
    """A registry entry: name, claimed privacy notion, whether it needs eps, and its builder."""

    name: str
    privacy: str
    needs_eps: bool
    summary: str
    build: Callable[[ModelConfig, float | None], MethodSetup]


METHODS: dict[str, Method] = {}
"""The registered methods, by name."""


def register(
    name: str, *, privacy: str, needs_eps: bool, summary: str
) -> Callable[[Callable], Callable]:
    """Decorator: register ``build(base, eps) -> MethodSetup | ModelConfig`` under ``name``."""

    def decorate(build: Callable) -> Callable:
        if name in METHODS:
            raise ValueError(f"method {name!r} is registered twice")
        METHODS[name] = Method(name=name, privacy=privacy, needs_eps=needs_eps,
                               summary=summary, build=build)
        return build

    return decorate


def method(name: str) -> Method:
    """The registry entry of ``name``, or an error listing the known methods."""
    if name not in METHODS:
        raise InvalidInputError(
            f"unknown method {name!r}; known methods: {', '.join(sorted(METHODS))}"
        )
    return METHODS[name]


def check_method_eps(name: str, eps: float | None) -> float | None:
    """Validate ``eps`` for method ``name``: required and > 0 where the method calibrates to it,
    ignored (None) otherwise."""
    entry = method(name)
    if not entry.needs_eps:
        return None
    if eps is None:
        raise InvalidInputError(
            f"method {name!r} needs a per-pass privacy budget eps > 0 (e.g. eps = 0.1)"
        )
    return check_eps("eps (per-pass budget eps_s)", eps)


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


@register("ldpt", privacy=LOCAL_QDP, needs_eps=True,
          summary="section 3: calibrated channel, N_s shots, three-point injection")
def _ldpt(base: ModelConfig, eps: float | None) -> MethodSetup:
    # needs_eps: setup_method has checked that eps is a number > 0
    cal = calibrate(eps, dim=base.dim, d_model=base.d_model)
    config = replace_config(base, use_quantum=True, p=cal.p, sigma=cal.sigma, inject=True)
    return MethodSetup(
        config=config, privacy=LOCAL_QDP, eps_per_pass=eps,
        noise={"p": cal.p, "gamma": cal.gamma, "sigma": cal.sigma}, calibration=cal,
    )


@register("ldpt-clean", privacy=NO_PRIVACY, needs_eps=False,
          summary="quantum path with p = 0, exact probabilities, no injection (LDPT Baseline)")
def _ldpt_clean(base: ModelConfig, eps: float | None) -> MethodSetup:
    config = replace_config(base, use_quantum=True, p=0.0, n_shots=None, inject=False,
                            sigma=0.0)
    return MethodSetup(config=config)
