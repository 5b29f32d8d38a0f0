"""The side-channel audit: RevIN and the classical path are found by
probes that leave every encoded state unchanged; normalisation 'fixed' at gate 1 closes them."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from qpriv.audits.sidechannel import default_probes, sidechannel_audit
from qpriv.audits.sidechannel_report import CLASSICAL_PATH, OTHER, REVIN, Probe
from qpriv.audits.sidechannel_subjects import synthetic_windows
from qpriv.errors import InvalidInputError
from qpriv.forecasting.config import ModelConfig
from qpriv.forecasting.methods import setup_method
from qpriv.forecasting.model import LDPTForecaster

BASE = ModelConfig(seq_len=64, horizon=8, n_channels=3, dim=16, stride=4, d_model=16,
                   n_heads=4, d_ff=32, n_shots=64)
SEED = 3


def build(name: str = "ldpt", eps: float | None = 0.1, **overrides) -> LDPTForecaster:
    torch.manual_seed(0)
    return LDPTForecaster(setup_method(name, base=BASE, eps=eps, overrides=overrides).config)


@pytest.fixture(scope="module")
def windows() -> torch.Tensor:
    return synthetic_windows(count=4, seq_len=BASE.seq_len, n_channels=BASE.n_channels, seed=1)


def probe(report, name):
    return next(r for r in report.probes if r.name == name)


def the_probe(name):
    return next(p for p in default_probes(n_channels=BASE.n_channels, seq_len=BASE.seq_len,
                                          dim=BASE.dim, stride=BASE.stride, seed=SEED)
                if p.name == name)


def test_paper_ldpt_is_flagged_with_a_revin_leak_of_the_closed_form_size(windows):
    model = build("ldpt")
    report = sidechannel_audit(model, windows, seed=SEED)
    assert not report.passed
    assert [leak.path for leak in report.leaks] == [REVIN]
    # per-window normalisation hides scale, shift and sign: every probe is valid and leaks
    assert all(r.valid and r.state_change <= 1e-9 and r.leaked for r in report.probes)
    assert all(set(r.paths) == {REVIN} for r in report.probes)

    # closed form, computed here from the forecast alone: RevIN returns y * std + mean with the
    # window's statistics, and y does not move (same states, same noise). A shift by b_j moves
    # channel j's forecast by exactly b_j.
    shift = the_probe("shift").transform(torch.zeros(1, BASE.seq_len, BASE.n_channels,
                                                     dtype=torch.float64))[0, 0]
    assert probe(report, "shift").output_change == pytest.approx(float(shift.abs().max()),
                                                                 rel=1e-5)
    # a scale by c maps the forecast y * std + mean to (about: RevIN's eps = 1e-5 sits in std)
    # c times itself, so the largest change is |c - 1| max|forecast|: the changes of the three
    # scale probes stand as 0.5 : 1 : 9
    half, double, ten = (probe(report, f"scale x{c:g}").output_change for c in (0.5, 2, 10))
    assert half / double == pytest.approx(0.5, rel=1e-4)
    assert ten / double == pytest.approx(9.0, rel=1e-4)
    for row in report.probes:
        assert row.relative_change == pytest.approx(row.output_change / report.forecast_rms)
    leak = report.leaks[0]
    assert leak.size == max(r.output_change for r in report.probes)
    assert report.accounting["eps_outside_channel_per_pass"]["value"] is None
    assert report.accounting["eps_outside_channel_per_pass"]["accounting"] == "rigorous"


def test_gate_below_one_also_flags_the_classical_path_and_the_fix_closes_both(windows):
    report = sidechannel_audit(build("ldpt", gate=0.5), windows, seed=SEED)
    assert [leak.path for leak in report.leaks] == [REVIN, CLASSICAL_PATH]
    negate = probe(report, "negate")
    # amplitude encoding cannot see the sign, x_cl can: a large change through the head
    assert negate.valid and negate.state_change == 0.0
    assert negate.paths[CLASSICAL_PATH] / negate.output_change > 0.1
    for row in report.probes:  # the split into the two paths is exact (triangle inequality)
        assert row.output_change <= sum(row.paths.values()) * (1 + 1e-6)
    assert report.fix["changes"] == {"normalisation": "fixed", "gate": 1.0}
    fixed = report.fix["audit"]
    assert fixed.passed and not fixed.leaks
    assert fixed.model["gate"] == 1.0 and fixed.model["normalisation"] == "fixed"
    assert "training split" in report.fix["note"] and "released once" in report.fix["note"]


def test_fixed_normalisation_at_gate_one_passes(windows):
    model = build("ldpt", normalisation="fixed")
    report = sidechannel_audit(model, windows, seed=SEED)
    assert report.passed and not report.leaks and report.fix is None
    for row in report.probes:
        if "shift" in row.name:  # without per-window statistics a shift moves the states
            assert not row.valid and row.state_change > 1e-3 and row.output_change is None
        else:  # same states, same noise: the forecast is the same to the bit
            assert row.valid and row.state_change <= 1e-9 and row.output_change == 0.0
    outside = report.accounting["eps_outside_channel_per_pass"]
    assert outside == {**outside, "value": 0.0, "kind": "local eps-QDP per pass",
                       "accounting": "rigorous"}
    stats = report.accounting["normalisation_statistics"]
    assert stats["value"] is None and stats["kind"] == "global (eps, delta)-DP"
    assert "training split" in stats["note"]


class _LeakAfterTheHead(LDPTForecaster):
    """The clean model (fixed normalisation, gate 1) with the window's magnitude added to the
    forecast after the head: a path outside the channel that neither the statistics nor the
    head carry."""

    def forward(self, x, *args, **kwargs):
        return super().forward(x, *args, **kwargs) + 1e-2 * x.abs().mean(dim=1, keepdim=True)


def test_a_leak_after_the_head_is_found_and_fails_the_audit(windows):
    torch.manual_seed(0)
    config = setup_method("ldpt", base=BASE, eps=0.1, overrides={"normalisation": "fixed"})
    report = sidechannel_audit(_LeakAfterTheHead(config.config), windows, seed=SEED)
    assert not report.passed
    assert [leak.path for leak in report.leaks] == [OTHER]
    assert probe(report, "scale x10").leaked and OTHER in probe(report, "scale x10").paths
    assert report.accounting["eps_outside_channel_per_pass"]["value"] is None


def test_the_classical_method_is_flagged(windows):
    report = sidechannel_audit(build("classical", eps=None), windows, seed=SEED)
    assert not report.passed
    assert {leak.path for leak in report.leaks} == {REVIN, CLASSICAL_PATH}
    assert all(r.valid and r.state_change is None for r in report.probes)
    assert "no quantum channel" in report.notes[0]
    assert report.fix["changes"] is None


def test_input_noise_is_audited_on_the_classical_path_and_refused_with_the_channel(windows):
    report = sidechannel_audit(build("classical", eps=None, input_noise=0.5), windows, seed=SEED)
    assert {leak.path for leak in report.leaks} == {REVIN, CLASSICAL_PATH}
    with pytest.raises(InvalidInputError, match=r"input_noise = 0\.5 with the quantum path"):
        sidechannel_audit(build("ldpt", input_noise=0.5), windows, seed=SEED)


def test_paper_accounting_reports_leaks_without_a_fix(windows):
    report = sidechannel_audit(build("ldpt"), windows, seed=SEED, accounting="paper")
    assert not report.passed and report.fix is None
    assert "channel only" in report.accounting["note"]


def _states_fixed(x: np.ndarray) -> np.ndarray:
    """|psi><psi| of every token of a 'fixed' model, computed here with numpy."""
    starts = range(0, BASE.seq_len - BASE.dim + 1, BASE.stride)
    tokens = np.stack([x[:, s:s + BASE.dim, :] for s in starts], axis=1)  # (B, T, D, C)
    psi = tokens / np.linalg.norm(tokens, axis=2, keepdims=True)
    return psi[:, :, :, None, :] * psi[:, :, None, :, :]


def test_the_validity_check_rejects_a_probe_that_moves_the_states(windows):
    ramp = torch.linspace(0, 1, BASE.seq_len, dtype=torch.float64)[None, :, None]
    probes = (Probe("ramp", "adds a ramp", lambda x: x + ramp),
              Probe("tiny ramp", "adds 1e-6 times a ramp", lambda x: x + 1e-6 * ramp))
    model = build("ldpt", normalisation="fixed")
    report = sidechannel_audit(model, windows, seed=SEED, probes=probes)
    assert not report.passed and not report.leaks
    assert "no probe left every encoded state unchanged" in report.notes[0]
    ramp_row, tiny_row = report.probes
    assert not ramp_row.valid and not tiny_row.valid and "moves an encoded state" in tiny_row.reason
    # the state change is what an independent computation of the density matrices gives
    x = windows.double().numpy()
    for row, moved in ((ramp_row, x + ramp.numpy()), (tiny_row, x + 1e-6 * ramp.numpy())):
        expected = np.abs(_states_fixed(moved) - _states_fixed(x)).max()
        assert row.state_change == pytest.approx(expected, rel=1e-6)
    assert 1e-9 < tiny_row.state_change < 1e-5


def test_encoded_tokens_are_what_the_forward_pass_sends_through_the_channel(windows):
    for normalisation in ("revin", "fixed"):
        model = build("ldpt", normalisation=normalisation)
        seen: list[torch.Tensor] = []
        handle = model.features.register_forward_hook(
            lambda module, inputs, output, seen=seen: seen.append(inputs[0]))
        model(windows)
        handle.remove()
        torch.testing.assert_close(model.encoded_tokens(windows.double()).float(), seen[0],
                                   rtol=1e-5, atol=1e-6)


def test_the_audit_leaves_the_model_as_it_was(windows):
    model = build("ldpt", gate=0.5).train()
    state = model.noise_state()
    sidechannel_audit(model, windows, seed=SEED)
    assert model.training
    assert all(torch.equal(state[k], v) for k, v in model.noise_state().items())
    assert model.features.stats.n_states == 0


def test_untokenised_samples_are_probed_when_there_are_some():
    config = ModelConfig(seq_len=66, horizon=4, n_channels=1, dim=16, stride=4, d_model=16,
                         n_heads=4, d_ff=32, n_shots=64, normalisation="fixed")
    names = [p.name for p in default_probes(n_channels=1, seq_len=66, dim=16, stride=4, seed=0)]
    assert "untokenised samples" in names and "negate channel 0" not in names
    torch.manual_seed(0)
    model = LDPTForecaster(config)
    x = synthetic_windows(count=2, seq_len=66, n_channels=1, seed=0)
    row = probe(sidechannel_audit(model, x, seed=0), "untokenised samples")
    assert row.valid and row.output_change == 0.0  # samples 64, 65 reach nothing
    revin = probe(sidechannel_audit(build_revin_66(), x, seed=0), "untokenised samples")
    assert not revin.valid  # they move the window's mean and std, so every state


def build_revin_66() -> LDPTForecaster:
    torch.manual_seed(0)
    return LDPTForecaster(ModelConfig(seq_len=66, horizon=4, n_channels=1, d_model=16,
                                      n_heads=4, d_ff=32, n_shots=64))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"accounting": "exact"}, "accounting = 'exact'"), ({"tolerance": 0.0}, "tolerance = 0"),
     ({"state_tolerance": 2.0}, "state_tolerance = 2")],
)
def test_bad_arguments_are_refused(windows, kwargs, match):
    with pytest.raises(InvalidInputError, match=match):
        sidechannel_audit(build("ldpt"), windows, **kwargs)


def test_windows_of_the_wrong_shape_are_refused(windows):
    with pytest.raises(InvalidInputError, match=r"seq_len = 64, n_channels = 3"):
        sidechannel_audit(build("ldpt"), windows[:, :32])
    with pytest.raises(InvalidInputError, match="finite"):
        sidechannel_audit(build("ldpt"), windows * float("nan"))


def test_normalisation_is_validated_and_fixed_has_no_window_statistics():
    with pytest.raises(InvalidInputError, match="'batch' is not one of revin, fixed"):
        ModelConfig(normalisation="batch")
    assert ModelConfig().normalisation == "revin"
    model = build("ldpt", normalisation="fixed")
    x = torch.randn(2, 3, BASE.seq_len)
    x_norm, z, stats = model.revin(x)
    assert stats is None and torch.equal(z, x) and torch.equal(x_norm, x)  # identity affine
    assert torch.equal(model.revin.denormalise(x[..., :8], None), x[..., :8])
