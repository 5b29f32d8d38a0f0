"""The side-channel audit: which paths from the raw window to the forecast bypass the channel?

LDPT's privacy claim (local eps-QDP per pass, Theorems 1-3) covers what the model learns about a
window through the quantum channel, i.e. through the amplitude-encoded state of each token.
Anything else that carries the window to the output is a side channel, outside the claim:
RevIN's per-window mean and std, restored at the output; the classical embedding x_cl, which
reaches the attention with weight 1 - g when the gate g is below 1; and whatever a later change
to the model adds.

The audit looks for them by construction. A probe is a change of the raw input window that leaves
every encoded token state unchanged; amplitude encoding (eq. 2) forgets each token's norm and
its sign (rho(x) = rho(-x)), so scaling a channel by c > 0 or negating it are such changes, and
with per-window normalisation a shift is one too. For each probe the audit

1. checks that the probe is valid: it recomputes the states of every token with the model's own
   normalisation and encoding (:meth:`~qpriv.forecasting.model.LDPTForecaster.encoded_tokens`,
   :func:`~qpriv.quantum.states.amplitude_encode_with_mask`) in float64 and compares the density
   matrices ``|psi><psi|`` entry by entry, before and after, to ``state_tolerance`` (1e-9); a probe
   that moves any state is reported as invalid and not used;
2. runs a float64 copy of the model (same configuration and weights; the caller's model is not
   touched) on the original and on the perturbed window with the same noise seed, so the
   injections draw the same numbers, and with the same channel output: the channel's output
   distribution is a function of the state alone, and the states are equal, so reusing the
   first pass's shots is an exact coupling (it keeps rounding near a sampling boundary from
   flipping a shot and posing as a leak). Float64 keeps the rounding of the perturbed window
   far below the tolerance (1e-9 of the forecast's RMS);
3. measures how far the forecast moved. With equal channel outputs and equal noise, a model whose
   only access to the window is the channel returns the same forecast to the bit; any change
   above the tolerance is a leak. The change is split exactly into the part the
   denormalisation adds with the new window statistics (RevIN) and the part that reaches the
   head (the classical path if x_cl changed, otherwise an unidentified path).

What the probes can and cannot show: they vary what amplitude encoding cannot see (per-channel
scale and sign, per-window shift where the model normalises per window, samples no token covers),
so a path that carries those to the forecast shows up as soon as it moves the forecast by more
than the tolerance at the probes' sizes. A path that carries only what the
states also determine is not a side channel; one that reacts to a change no probe makes would go
unnoticed. The zero that the rigorous accounting reports for the fixed configuration therefore
rests on the structure of the forward pass (quantum path on, g = 1, no per-window statistics:
the window reaches the backbone only through the channel), which the probes confirm.

The fix (``accounting="rigorous"``): ``normalisation="fixed"`` (no per-window statistics: the
series enters as the data loader z-scored it with the training split's per-channel statistics)
and gate g = 1. The audit checks the fix by running the same probes on that configuration with
the same weights. What the fix still releases outside the channel is the training split's
statistics, once: the report says so and labels it.

This module holds the probes, the audit and the fix with its accounting; what it reports is in
:mod:`qpriv.audits.sidechannel_report`, the audit of a finished run or of a method (``qpriv audit
sidechannel``) in :mod:`qpriv.audits.sidechannel_subjects`.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from qpriv.audits.sidechannel_report import (
    CLASSICAL_PATH,
    OTHER,
    REVIN,
    AuditConsistencyError,
    Leak,
    Probe,
    ProbeResult,
    SideChannelReport,
)
from qpriv.errors import InvalidInputError, require_in_range, require_positive_int
from qpriv.forecasting.config import ModelConfig
from qpriv.forecasting.methods import ACCOUNTINGS
from qpriv.forecasting.model import LDPTForecaster
from qpriv.privacy.claims import Accounting, Kind, PrivacyClaim, Unit
from qpriv.quantum.states import amplitude_encode_with_mask

DEFAULT_SCALES = (0.5, 2.0, 10.0)
STATE_TOLERANCE = 1e-9
OUTPUT_TOLERANCE = 1e-9
FIX = {"normalisation": "fixed", "gate": 1.0}
"""The configuration changes that close the side channels of an LDPT model."""


# --- probes -----------------------------------------------------------------------------------


def default_probes(
    *, n_channels: int, seq_len: int, dim: int, stride: int, seed: int,
    scales: tuple[float, ...] = DEFAULT_SCALES,
) -> tuple[Probe, ...]:
    """The standard probes: changes that amplitude encoding cannot see, and some that only a
    per-window normalisation hides (the audit checks which are valid for the model at hand).

    (a) every channel scaled by each c in ``scales``, and each channel by its own factor in
    [1/4, 4]; (b) a per-channel shift in [-3, 3] (z-score units), alone and with a scale of 2;
    (c) negation of every channel, of one channel, and negation with a shift; (d) a per-channel
    mix of sign and scale, and, where ``(L - D) mod s > 0``, a change of the samples after the
    last token, which no token encodes.
    """
    for name, value in (("n_channels", n_channels), ("seq_len", seq_len), ("dim", dim),
                        ("stride", stride)):
        require_positive_int(name, value)
    for c in scales:
        require_in_range("probe scale c", c, low=0.0, hint="a scale must be positive")
    rng = torch.Generator().manual_seed(int(seed))
    factor = torch.exp(torch.empty(n_channels, dtype=torch.float64).uniform_(
        -math.log(4.0), math.log(4.0), generator=rng))
    shift = torch.empty(n_channels, dtype=torch.float64).uniform_(-3.0, 3.0, generator=rng)
    sign = torch.where(torch.rand(n_channels, generator=rng, dtype=torch.float64) < 0.5, -1.0, 1.0)
    sign[0] = -1.0  # at least one channel flips

    def each(values: Tensor) -> Callable[[Tensor], Tensor]:
        return lambda x: x * values.to(x.device)

    probes = [Probe(f"scale x{c:g}", f"every channel multiplied by {c:g}",
                    lambda x, c=c: x * c) for c in scales]
    probes += [
        Probe("scale per channel", "each channel multiplied by its own factor in [1/4, 4]",
              each(factor)),
        Probe("shift", "each channel shifted by its own offset in [-3, 3]",
              lambda x: x + shift.to(x.device)),
        Probe("shift and scale", "x -> 2 x + offset per channel",
              lambda x: 2.0 * x + shift.to(x.device)),
        Probe("negate", "every channel negated (amplitude encoding: rho(-x) = rho(x))",
              lambda x: -x),
        Probe("negate and shift", "x -> -x + offset per channel",
              lambda x: shift.to(x.device) - x),
        Probe("sign and scale per channel",
              "each channel multiplied by its own sign and factor in [1/4, 4]",
              each(sign * factor)),
    ]
    if n_channels > 1:
        one = torch.ones(n_channels, dtype=torch.float64)
        one[0] = -1.0
        probes.append(Probe("negate channel 0", "only the first channel negated", each(one)))
    covered = (seq_len - dim) // stride * stride + dim
    if covered < seq_len:
        def tail(x: Tensor) -> Tensor:
            out = x.clone()
            out[:, covered:] += 1.0
            return out

        probes.append(Probe(
            "untokenised samples",
            f"samples {covered}..{seq_len - 1}, which no token covers, shifted by 1", tail))
    return tuple(probes)


# --- the audit --------------------------------------------------------------------------------


@dataclass
class _Pass:
    output: Tensor
    y: Tensor | None = None
    stats: object = None
    x_cl: Tensor | None = None
    qf: Tensor | None = None
    tokens: Tensor | None = None


class _Audited:
    """A float64 copy of a model in eval mode, with hooks that record what each pass computes
    and can replace the channel output; the caller's model is not touched."""

    def __init__(self, model: LDPTForecaster) -> None:
        self.model = copy.deepcopy(model).to(dtype=torch.float64).eval()
        self._record: dict = {}
        self._substitute: Tensor | None = None
        self.model.revin.register_forward_hook(self._keep("revin"))
        self.model.inject_output.register_forward_hook(self._keep("y"))
        if self.model.embed is not None:
            self.model.embed.register_forward_hook(self._keep("x_cl"))
        if self.model.features is not None:
            self.model.features.register_forward_hook(self._channel)

    def _keep(self, name: str) -> Callable:
        def hook(module, inputs, output):
            self._record[name] = output
        return hook

    def _channel(self, module, inputs, output):
        # the features are float32 by design (layers.QuantumFeatures); the backbone is float64
        self._record["tokens"] = inputs[0].detach()
        qf = output.to(torch.float64) if self._substitute is None else self._substitute
        self._record["qf"] = qf
        return qf

    def run(self, x: Tensor, *, seed: int, qf: Tensor | None = None) -> _Pass:
        """One pass on ``x`` (float64) with noise seed ``seed``; ``qf`` replaces the channel
        output (the exact coupling of two passes whose states are equal)."""
        self._record.clear()
        self._substitute = qf
        self.model.seed_noise(seed, device=x.device)
        with torch.no_grad():
            output = self.model(x)
        record = self._record
        return _Pass(output=output, y=record.get("y"), stats=record["revin"][2],
                     x_cl=record.get("x_cl"), qf=record.get("qf"), tokens=record.get("tokens"))


def _density_matrices(tokens: Tensor) -> Tensor:
    """``|psi><psi|`` of the amplitude-encoded tokens ``(..., D)`` (float64), as the model
    encodes them (a token with norm below 1e-12 becomes the uniform superposition)."""
    psi, _ = amplitude_encode_with_mask(tokens.to(torch.float64))
    return psi.unsqueeze(-1) * psi.unsqueeze(-2)


def _max_abs(t: Tensor) -> float:
    return float(t.abs().max()) if t.numel() else 0.0


def _check_encoder(model: LDPTForecaster, run: _Pass, x: Tensor) -> None:
    """The coupling is exact only if the forward pass encodes what ``encoded_tokens`` returns."""
    expected = model.encoded_tokens(x)
    got = run.tokens
    scale = max(1.0, _max_abs(expected))
    if got.shape != expected.shape or _max_abs(got - expected) > 1e-12 * scale:
        raise AuditConsistencyError(
            "the model's forward pass sends tokens through the channel that "
            "LDPTForecaster.encoded_tokens does not reproduce; the side-channel audit cannot "
            "verify its probes. Keep encoded_tokens in step with forward"
        )


def _model_summary(config: ModelConfig) -> dict:
    return {"use_quantum": config.use_quantum, "gate": config.gate,
            "normalisation": config.normalisation, "p": config.p, "n_shots": config.n_shots,
            "sigma": config.sigma if config.injects else 0.0}


def _check_windows(model: LDPTForecaster, windows: Tensor) -> Tensor:
    cfg = model.config
    if not isinstance(windows, Tensor) or windows.ndim != 3 or windows.shape[0] < 1 \
            or windows.shape[1:] != (cfg.seq_len, cfg.n_channels):
        shape = tuple(windows.shape) if isinstance(windows, Tensor) else type(windows).__name__
        raise InvalidInputError(
            f"windows {shape} are not a (batch >= 1, seq_len = {cfg.seq_len}, n_channels = "
            f"{cfg.n_channels}) tensor; pass raw input windows of the model's shape"
        )
    if windows.is_complex() or not bool(torch.isfinite(windows).all()):
        raise InvalidInputError("windows must be real and finite (no NaN or inf)")
    return windows


def sidechannel_audit(
    model: LDPTForecaster,
    windows: Tensor,
    *,
    seed: int = 0,
    accounting: str = "rigorous",
    probes: tuple[Probe, ...] | None = None,
    tolerance: float = OUTPUT_TOLERANCE,
    state_tolerance: float = STATE_TOLERANCE,
    windows_source: str = "given by the caller",
    subject: str = "the model given",
    check_fix: bool = True,
) -> SideChannelReport:
    """Audit ``model`` for paths from the raw window to the forecast that bypass the channel.

    The method is in the module docstring.

    Args:
        model: an :class:`~qpriv.forecasting.model.LDPTForecaster` (any method of
            :mod:`qpriv.forecasting.methods`).
        windows: raw input windows ``(B, L, C)`` as the model reads them (z-scored by the
            training split's statistics); a few (e.g. 16) suffice, the audit is structural.
        seed: the noise seed of every pass (and of the probes' random factors).
        accounting: ``"rigorous"`` (offer the fix, check it, and label what leaves outside the
            channel) or ``"paper"`` (leaks only: the paper's accounting covers the channel).
        probes: the probes (default :func:`default_probes`).
        tolerance: a relative forecast change above this (RMS of the forecast as the unit) is
            a leak.
        state_tolerance: a probe is valid if no density-matrix entry moves by more than this.
        windows_source, subject: descriptions of ``windows`` and of the model for the report.
        check_fix: audit the fixed configuration too (rigorous accounting, when one exists).

    Returns:
        :class:`SideChannelReport`. The model's mode, noise state and feature counters are as
        before the call.

    Raises:
        InvalidInputError: windows of the wrong shape or not finite, an unknown accounting, a
            tolerance outside (0, 1), a quantum model with input noise.
    """
    if accounting not in ACCOUNTINGS:
        raise InvalidInputError(
            f"accounting = {accounting!r} is not one of {', '.join(ACCOUNTINGS)}"
        )
    require_in_range("tolerance", tolerance, low=0.0, high=1.0, high_inclusive=False)
    require_in_range("state_tolerance", state_tolerance, low=0.0, high=1.0,
                     high_inclusive=False)
    windows = _check_windows(model, windows)
    cfg = model.config
    if model.features is not None and getattr(cfg, "input_noise", 0.0) > 0:
        raise InvalidInputError(
            f"input_noise = {cfg.input_noise:g} with the quantum path: the channel encodes the "
            "window plus fresh input noise, so no change of the window leaves the encoded "
            "states unchanged and the audit has no valid probe; audit it with input_noise = 0"
        )
    x64 = windows.to(device=next(model.parameters()).device, dtype=torch.float64)
    if probes is None:
        probes = default_probes(n_channels=cfg.n_channels, seq_len=cfg.seq_len, dim=cfg.dim,
                                stride=cfg.stride, seed=seed)
    has_channel = model.features is not None
    audited = _Audited(model)
    reference_states = (_density_matrices(audited.model.encoded_tokens(x64)) if has_channel
                        else None)
    reference = audited.run(x64, seed=seed)
    if has_channel:
        _check_encoder(audited.model, reference, x64)
    scale = float(reference.output.square().mean().sqrt())
    scale = scale if scale > 0 else 1.0
    rows = [_run_probe(audited, probe, x64=x64, reference=reference,
                       reference_states=reference_states, seed=seed, scale=scale,
                       tolerance=tolerance, state_tolerance=state_tolerance)
            for probe in probes]

    leaks = _collect_leaks(rows, config=cfg, scale=scale)
    valid = [r for r in rows if r.valid]
    # a probe that moved the forecast is a leak whether or not its path was traced
    passed = bool(valid) and not leaks and not any(r.leaked for r in valid)
    notes = []
    if not valid:
        notes.append("no probe left every encoded state unchanged: the audit cannot pass")
    if not has_channel:
        notes.append("the model has no quantum channel: every path from the window to the "
                     "forecast bypasses it")
    fix = None
    if accounting == "rigorous" and leaks:
        fix = _offer_fix(model, windows, seed=seed, tolerance=tolerance,
                         state_tolerance=state_tolerance, windows_source=windows_source,
                         check=check_fix)
    return SideChannelReport(
        passed=passed, probes=tuple(rows), leaks=leaks, forecast_rms=scale,
        model=_model_summary(cfg),
        subject=subject, windows=int(windows.shape[0]), windows_source=windows_source,
        seed=int(seed), tolerance=tolerance, state_tolerance=state_tolerance,
        accounting_mode=accounting,
        accounting=_accounting(cfg, leaks=leaks, passed=passed, mode=accounting),
        fix=fix, notes=tuple(notes),
    )


def _run_probe(
    audited: _Audited, probe: Probe, *, x64: Tensor, reference: _Pass,
    reference_states: Tensor | None, seed: int, scale: float, tolerance: float,
    state_tolerance: float,
) -> ProbeResult:
    x_new = probe.transform(x64)
    if x_new.shape != x64.shape or not bool(torch.isfinite(x_new).all()):
        raise InvalidInputError(f"probe {probe.name!r} changed the shape or made non-finite "
                                "values; a probe must map finite windows to finite windows")
    state_change = None
    if reference_states is not None:
        state_change = _max_abs(_density_matrices(audited.model.encoded_tokens(x_new))
                                - reference_states)
        if not state_change <= state_tolerance:
            return ProbeResult(
                probe.name, probe.description, valid=False, state_change=state_change,
                reason=f"moves an encoded state by {state_change:.3g} > {state_tolerance:g}",
            )
    new = audited.run(x_new, seed=seed, qf=reference.qf)
    if reference_states is not None:
        _check_encoder(audited.model, new, x_new)
    revin, y_ref = audited.model.revin, reference.y
    with torch.no_grad():
        total = new.output - reference.output
        via_stats = revin.denormalise(y_ref, new.stats) - revin.denormalise(y_ref, reference.stats)
        via_head = revin.denormalise(new.y, new.stats) - revin.denormalise(y_ref, new.stats)
    paths = {}
    if _max_abs(via_stats) / scale > tolerance:
        paths[REVIN] = _max_abs(via_stats)
    if _max_abs(via_head) / scale > tolerance:
        x_cl_moved = new.x_cl is not None and not torch.equal(new.x_cl, reference.x_cl)
        paths[CLASSICAL_PATH if x_cl_moved else OTHER] = _max_abs(via_head)
    # what neither the statistics nor the head explain: a path after the head (say, a term of
    # the window added to the forecast) that the two parts above cannot see
    unexplained = _max_abs(total - (via_stats + via_head).transpose(1, 2))  # (B, H, C)
    if unexplained / scale > tolerance:
        paths[OTHER] = max(paths.get(OTHER, 0.0), unexplained)
    change = _max_abs(total)
    return ProbeResult(
        probe.name, probe.description, valid=True, state_change=state_change,
        output_change=change, relative_change=change / scale, paths=paths,
        leaked=change / scale > tolerance or bool(paths),
    )


_EXPLANATIONS = {
    REVIN: "RevIN z-scores each window with its own mean and std and restores them at the "
           "output: both reach the forecast without passing the channel",
    CLASSICAL_PATH: "the classical embedding x_cl = Linear(tokens) reaches the attention with "
                    "weight 1 - g, so the raw tokens, sign and norm included, bypass the channel",
    OTHER: "the forecast moved although the channel output, the noise and x_cl did not: some "
           "path outside the channel reads the window; inspect the forward pass",
}


def _collect_leaks(
    rows: list[ProbeResult], *, config: ModelConfig, scale: float
) -> tuple[Leak, ...]:
    found: dict[str, list[ProbeResult]] = {}
    for row in rows:
        for path in row.paths:
            found.setdefault(path, []).append(row)
    leaks = []
    for path in (REVIN, CLASSICAL_PATH, OTHER):
        if path not in found:
            continue
        size = max(r.paths[path] for r in found[path])
        explanation = _EXPLANATIONS[path]
        if path == CLASSICAL_PATH and not config.use_quantum:
            explanation = ("the model has no quantum channel: the classical embedding "
                           "x_cl = Linear(tokens) carries the whole window to the forecast")
        elif path == CLASSICAL_PATH:
            explanation += f" (gate g = {config.gate:g})"
        leaks.append(Leak(path, size=size, relative=size / scale,
                          probes=tuple(r.name for r in found[path]), explanation=explanation))
    return tuple(leaks)


# --- the fix and its accounting -----------------------------------------------------------------

STATISTICS_NOTE = (
    "normalisation 'fixed' uses the per-channel mean and std of the training split (the data "
    "loader's ZScoreScaler): 2 C numbers, a deterministic function of the training rows, "
    "released once (they are part of the model), not per window. No (eps, delta) guarantee "
    "covers them as they are. Options: treat them as public (take them from public data or fix "
    "them by hand: no privacy cost), or release them noised under their own budget (e.g. the "
    "Gaussian mechanism on clipped per-channel sums, composed with the channel's budget). This "
    "fix uses the training-split statistics as they are; neither option is implemented here."
)


def _structurally_closed(config: ModelConfig) -> bool:
    """Whether the forward pass reads the window only through the channel (model.py): the
    quantum path on, no classical embedding (g = 1), no per-window statistics."""
    return config.use_quantum and config.gate == 1.0 and config.normalisation == "fixed"


def _accounting(config: ModelConfig, *, leaks: tuple[Leak, ...], passed: bool, mode: str) -> dict:
    """The labelled privacy numbers of what leaves the model outside the channel."""
    if mode == "paper":
        return {"note": "the paper's accounting covers the channel only; it does not count the "
                        "paths this audit finds"}
    covers = ("everything a forecast reveals of one window outside the channel, on one pass")

    def outside(value: float | None, meaning: str) -> dict:
        return PrivacyClaim(value=value, kind=Kind.LOCAL_QDP, accounting=Accounting.RIGOROUS,
                            unit=Unit.TOKEN, covers=covers,
                            details={"meaning": meaning}).to_json()

    if leaks:
        claim = outside(None, "unbounded: windows whose encoded states are identical (trace "
                              "distance 0) get forecasts that the probes move by an amount the "
                              f"window controls ({', '.join(leak.path for leak in leaks)}), so "
                              "no finite eps holds")
    elif _structurally_closed(config) and passed:
        claim = outside(0.0, "no path outside the channel: with normalisation 'fixed', gate 1 "
                             "and the quantum path on, the forward pass reads the window only "
                             "through the channel, and no probe moved the forecast")
    else:
        claim = outside(None, "not established: the probes found no leak, but this "
                              "configuration does not exclude paths outside the channel by "
                              "construction")
    result = {"eps_outside_channel_per_pass": claim}
    if config.normalisation == "fixed":
        result["normalisation_statistics"] = PrivacyClaim(
            value=None, kind=Kind.GLOBAL_DP, accounting=Accounting.RIGOROUS, unit=Unit.WINDOW,
            covers="the fixed normalisation statistics fitted on the training split",
            details={"meaning": "no guarantee: released in the clear",
                     "note": STATISTICS_NOTE}).to_json()
    return result


def _offer_fix(model: LDPTForecaster, windows: Tensor, *, seed: int, tolerance: float,
               state_tolerance: float, windows_source: str, check: bool) -> dict:
    config = model.config
    if not config.use_quantum:
        return {"changes": None,
                "note": "no fix within this method: it has no quantum channel, so the whole "
                        "window bypasses it. Use an LDPT variant with normalisation 'fixed' "
                        "and gate 1"}
    changes = {k: v for k, v in FIX.items() if getattr(config, k) != v}
    with torch.random.fork_rng(devices=[]):  # the weights are overwritten next
        fixed = LDPTForecaster(replace(config, **changes)).to(next(model.parameters()).device)
    missing, _ = fixed.load_state_dict(model.state_dict(), strict=False)
    if missing:  # the fixed configuration only drops modules (x_cl); it never adds one
        raise AuditConsistencyError(f"the fixed configuration has new parameters {missing}")
    fix = {
        "changes": changes,
        "weights": "the audited model's (the fixed configuration drops x_cl and the per-window "
                   "statistics; retrain for utility)",
        "statistics": "training split (the data loader's scaler), released once",
        "options": ["public or hand-fixed statistics (no privacy cost)",
                    "noised statistics under their own budget (not implemented)",
                    "training-split statistics in the clear (used by this fix)"],
        "note": STATISTICS_NOTE,
    }
    if check:
        fix["audit"] = sidechannel_audit(
            fixed, windows, seed=seed, accounting="rigorous", tolerance=tolerance,
            state_tolerance=state_tolerance, windows_source=windows_source,
            subject=f"the audited model with {changes}", check_fix=False,
        )
    return fix
