"""The LDPT forecaster and its baselines' settings: shapes, noise, gradients, QC-AdaLN, methods."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F  # noqa: N812 (the PyTorch idiom)

from qpriv.errors import InvalidInputError
from qpriv.forecasting import layers
from qpriv.forecasting.config import ModelConfig
from qpriv.forecasting.layers import Injection, QCAdaLN
from qpriv.forecasting.methods import METHODS, setup_method
from qpriv.forecasting.model import LDPTForecaster, PassNoise
from qpriv.privacy.calibration import calibrate
from qpriv.training.dpsgd import PER_EXAMPLE_CHUNK, DPSGDStrategy

TINY = ModelConfig(seq_len=32, horizon=4, n_channels=3, dim=4, stride=4, d_model=16,
                   n_heads=4, d_ff=32, n_shots=64)


def build(name: str, eps: float | None = 0.1, **overrides) -> LDPTForecaster:
    torch.manual_seed(0)
    return LDPTForecaster(setup_method(name, base=TINY, eps=eps, overrides=overrides).config)


def batch(b: int = 5, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, TINY.seq_len, TINY.n_channels, generator=g).cumsum(1)


@pytest.mark.parametrize("name", ["classical", "ldpt", "ldpt-clean"])
def test_output_shape(name):
    model = build(name)
    assert model(batch()).shape == (5, TINY.horizon, TINY.n_channels)


def test_paper_token_count():
    config = ModelConfig()
    assert config.n_tokens == 81  # floor((336 - 16) / 4) + 1
    assert config.n_features == 257
    assert torch.zeros(336).unfold(-1, config.dim, config.stride).shape == (81, 16)


def test_classical_has_no_quantum_path_and_is_deterministic():
    model = build("classical").eval()
    assert model.features is None and model.proj is None
    assert all(block.norm1.condition is None for block in model.blocks)
    x = batch()
    assert torch.equal(model(x), model(x))


def test_ldpt_draws_fresh_noise_and_reproduces_under_a_seed():
    model = build("ldpt").eval()
    x = batch()
    model.seed_noise(7)
    first, second = model(x), model(x)
    assert not torch.equal(first, second)
    model.seed_noise(7)
    assert torch.equal(model(x), first)
    assert torch.equal(model(x), second)


def test_the_features_are_fresh_multinomial_shots():
    """Without injection only the shots are random: two passes still differ, every released
    frequency is a count over N_s, and across repeats each outcome's variance is the
    multinomial q (1 - q) / N_s of the exact channel probabilities."""
    from qpriv.quantum.features import outcome_probabilities
    from qpriv.quantum.states import amplitude_encode

    model = build("ldpt-no-injection", feature_scale="raw").eval()
    x = batch()
    assert not torch.equal(model(x), model(x))
    token = torch.tensor([0.3, -1.2, 0.5, 2.0])
    tokens = token.expand(4000, 1, 1, 4)
    qf = model.features(tokens, torch.Generator().manual_seed(0))[..., :16].reshape(4000, 16)
    counts = qf.double() * TINY.n_shots
    torch.testing.assert_close(counts, counts.round(), rtol=0, atol=1e-4)
    q = outcome_probabilities(amplitude_encode(token.double())[0][None], p=model.config.p)[0]
    torch.testing.assert_close(qf.double().mean(0), q, rtol=0, atol=4e-3)
    expected = q * (1 - q) / TINY.n_shots
    assert torch.allclose(qf.double().var(0), expected, rtol=0.1)


@pytest.mark.parametrize("name", ["ldpt", "ldpt-signed", "dp-input", "classical"])
def test_a_pass_with_noise_drawn_ahead_is_the_inline_pass(name):
    """draw_noise then forward(x, noise) is forward(x) for the same generator state, and the
    generators end in the same state; the drawn noise has the pass's shapes."""
    model = build(name)
    x = batch()
    model.seed_noise(3)
    inline = model(x)
    inline_state = model.noise_state()
    model.seed_noise(3)
    noise = model.draw_noise(x)
    assert all(torch.equal(a, b) for a, b in zip(model.noise_state().values(),
                                                  inline_state.values(), strict=True))
    assert torch.equal(model(x, noise=noise), inline)
    tokens = (5, TINY.n_channels, TINY.n_tokens)
    if name == "ldpt":
        assert noise.input is None and noise.features.shape == (*tokens, TINY.n_features)
        assert [z.shape for z in noise.injections] == [
            (*tokens, 2 * TINY.d_model), (*tokens, TINY.d_model), (*tokens, TINY.d_model),
            (5, TINY.n_channels, TINY.horizon)]
        assert model.draws_ahead
    elif name == "ldpt-signed":
        assert noise.features.shape == (*tokens, model.config.n_features)
    elif name == "dp-input":
        assert noise.input.shape == x.shape and noise.features is None
    else:
        assert noise == PassNoise(input=None, features=None, injections=(None,) * 4)
        assert not model.draws_ahead


def test_noise_state_round_trip():
    model = build("ldpt")
    x = batch()
    state = model.noise_state()
    first = model(x)
    model.load_noise_state(state)
    assert torch.equal(model(x), first)


def test_ldpt_clean_is_deterministic():
    model = build("ldpt-clean")
    assert model.config.p == 0.0 and model.config.n_shots is None and not model.config.injects
    x = batch()
    assert torch.equal(model(x), model(x))


def test_gradients_reach_every_parameter_but_not_through_the_features(monkeypatch):
    released = []
    real = layers.quantum_features

    def spy(windows, **kwargs):
        out = real(windows, **kwargs)
        released.append(out)
        return out

    monkeypatch.setattr(layers, "quantum_features", spy)
    model = build("ldpt")
    with torch.no_grad():  # leave the zero init (adaLN-Zero), whose first layer has no gradient
        for block in model.blocks:
            for norm in (block.norm1, block.norm2):
                norm.condition[-1].weight.normal_(std=0.1)
    x = batch().requires_grad_(True)
    model(x).square().mean().backward()
    for name, param in model.named_parameters():
        assert param.grad is not None, name
        assert torch.isfinite(param.grad).all(), name
        assert param.grad.abs().sum() > 0, name
    assert not any(t.requires_grad for t in released[0])
    # at gate 1 the input reaches the output only through the channel (and RevIN's detached
    # statistics): no gradient flows back to it
    assert x.grad is None or not x.grad.any()


def test_classical_gradients_reach_every_used_parameter():
    model = build("classical")
    x = batch().requires_grad_(True)
    model(x).square().mean().backward()
    d = TINY.d_model
    for name, param in model.named_parameters():
        grad = param.grad
        assert grad is not None, name
        if name == "blocks.0.attention.qkv.weight":
            # x_enh = [x_cl, 0]: the columns that read the absent quantum half stay at zero
            assert grad[:, :d].abs().sum() > 0 and not grad[:, d:].any()
        else:
            assert grad.abs().sum() > 0, name
    assert x.grad.abs().sum() > 0


def test_qc_adaln_is_layernorm_at_initialisation():
    torch.manual_seed(0)
    norm = QCAdaLN(16, n_features=17)
    with torch.no_grad():
        norm.norm.weight.uniform_(0.5, 1.5)
        norm.norm.bias.uniform_(-1, 1)
    x, q = torch.randn(2, 3, 5, 16), torch.rand(2, 3, 17)
    expected = F.layer_norm(x, (16,), norm.norm.weight, norm.norm.bias, norm.norm.eps)
    torch.testing.assert_close(norm(x, q), expected, rtol=0, atol=1e-6)


def test_qc_adaln_follows_eq_12_once_conditioned():
    torch.manual_seed(0)
    norm = QCAdaLN(16, n_features=17)
    with torch.no_grad():
        norm.condition[-1].weight.normal_()
        norm.condition[-1].bias.normal_()
    x, q = torch.randn(2, 3, 5, 16), torch.rand(2, 3, 17)
    dgamma, dbeta = norm.condition(q).unsqueeze(-2).chunk(2, dim=-1)
    x_hat = (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True, unbiased=False)
                                                        + norm.norm.eps)
    expected = (norm.norm.weight + dgamma) * x_hat + (norm.norm.bias + dbeta)
    torch.testing.assert_close(norm(x, q), expected, rtol=1e-5, atol=1e-5)


def test_injection_matches_eq_13():
    x = torch.randn(4, 3, 5, 8)
    out = Injection(sigma=0.3, factor=2.0)(x, torch.Generator().manual_seed(5))
    z = torch.randn(x.shape, generator=torch.Generator().manual_seed(5))
    torch.testing.assert_close(out, x + 0.6 * x.std(-1, keepdim=True, correction=0) * z)


@pytest.mark.parametrize("name", ["classical", "ldpt-clean"])
def test_windows_are_independent(name):
    """Changing window j moves no other window's output (the precondition of DP-SGD)."""
    model = build(name).eval()
    x = batch(6)
    changed = x.clone()
    changed[2] = changed[2] * 3.0 + torch.randn_like(changed[2])
    before, after = model(x), model(changed)
    keep = [0, 1, 3, 4, 5]
    assert torch.equal(before[keep], after[keep])
    assert not torch.equal(before[2], after[2])


def test_per_window_gradients_sum_to_the_batch_gradient():
    """Each window is one sample: the batch gradient is the sum of per-window gradients."""
    model = build("classical")
    x, y = batch(4), batch(4, seed=9)[:, : TINY.horizon]

    def grads(xs, ys):
        model.zero_grad()
        F.mse_loss(model(xs), ys, reduction="sum").backward()
        return torch.cat([p.grad.flatten() for p in model.parameters()])

    whole = grads(x, y)
    parts = sum(grads(x[i : i + 1], y[i : i + 1]) for i in range(4))
    torch.testing.assert_close(whole, parts, rtol=1e-4, atol=1e-5)


def test_a_dpsgd_step_in_chunks_is_the_step_in_one_call():
    """PER_EXAMPLE_CHUNK bounds memory only: a DP-SGD step over 150 windows in vmap chunks of
    64 (the default) moves the weights exactly as one call over all 150 does, noise included."""
    x, y = batch(150), batch(150, seed=9)[:, : TINY.horizon]
    moved = []
    for chunk in (PER_EXAMPLE_CHUNK, None):
        model = build("classical")
        strategy = DPSGDStrategy(clip=0.5, noise_multiplier=0.7, sample_rate=0.5,
                                 steps_per_epoch=1, delta=1e-5, seed=3, chunk_size=chunk)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        strategy.prepare(model, optimizer, n_train=300, batch_size=150)
        strategy.step(model, x, y, optimizer=optimizer, scaler=None, amp=False,
                      loss=F.mse_loss)
        moved.append(torch.cat([p.detach().flatten() for p in model.parameters()]))
    assert PER_EXAMPLE_CHUNK < 150 and DPSGDStrategy.__init__.__kwdefaults__[
        "chunk_size"] == PER_EXAMPLE_CHUNK
    assert torch.equal(moved[0], moved[1])
    assert not torch.equal(moved[0], torch.cat([p.detach().flatten()
                                                for p in build("classical").parameters()]))


def test_ldpt_method_is_calibrated():
    setup = setup_method("ldpt", base=ModelConfig(), eps=0.1)
    cal = calibrate(0.1)
    assert setup.config.p == pytest.approx(cal.p) and setup.config.sigma == pytest.approx(cal.sigma)
    assert setup.config.p == pytest.approx(0.9505, abs=1e-4)
    assert setup.config.sigma == pytest.approx(0.0840, abs=1e-4)
    assert setup.config.n_shots == 1024 and setup.config.k == 2.0 and setup.config.gate == 1.0
    assert setup.eps_per_pass == 0.1 and setup.privacy == "local eps-QDP per pass"


@pytest.mark.parametrize(
    ("name", "eps"), [("ldpt", 0.0), ("ldpt", -1.0), ("ldpt", None), ("ldpt", float("nan"))]
)
def test_bad_eps_is_rejected(name, eps):
    with pytest.raises(InvalidInputError, match="eps"):
        setup_method(name, base=TINY, eps=eps)


def test_unknown_method_and_setting_are_rejected():
    with pytest.raises(InvalidInputError, match="known methods: bottleneck, bottleneck-dp, cla"):
        setup_method("dp-magic", base=TINY, eps=0.1)
    with pytest.raises(InvalidInputError, match="valid settings"):
        setup_method("ldpt", base=TINY, eps=0.1, overrides={"n_shot": 5})
    assert setup_method("classical", base=TINY, eps=None).eps_per_pass is None
    assert {"classical", "ldpt", "ldpt-clean"} <= set(METHODS)


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [("horizon", 0, "horizon"), ("dim", 12, "power of two"), ("seq_len", 2, "seq_len"),
     ("d_model", 18, "multiple of n_heads"), ("norm", "batchnorm", "norm"), ("p", 1.5, "p ")],
)
def test_bad_config_is_rejected(field, value, match):
    with pytest.raises(InvalidInputError, match=match):
        ModelConfig(**{**TINY.as_dict(), field: value})


def test_wrong_input_shape_is_rejected():
    with pytest.raises(InvalidInputError, match="seq_len = 32"):
        build("classical")(torch.zeros(2, 31, 3))


def test_parameter_groups_at_paper_size():
    model = LDPTForecaster(setup_method("ldpt", base=ModelConfig(), eps=0.1).config)
    counts = model.parameter_counts()
    d, f = 128, 257
    w_proj = f * d + d
    qkvo = 2 * d * 3 * d + 3 * d + d * d + d
    assert counts["quantum_attention"] == w_proj + qkvo == 148_224
    assert counts["total"] == counts["classical"] + counts["quantum_attention"]
    classical = LDPTForecaster(setup_method("classical", base=ModelConfig(), eps=None).config)
    assert classical.parameter_counts()["quantum_attention"] == qkvo  # the same backbone


@pytest.mark.filterwarnings("ignore:Full backward hook is firing")
def test_opacus_per_example_gradients_are_per_window_gradients():
    """Opacus's per-sample gradients (our per-example ones) of the backbone equal a per-window
    loop: the window, not the channel, is the example. RevIN's affine is left out: it is used
    twice (normalise and denormalise), which Opacus's per-layer hooks do not see (torch.func
    handles it)."""
    opacus = pytest.importorskip("opacus")
    model = build("classical")
    model.revin.requires_grad_(False)
    x, y = batch(4), batch(4, seed=9)[:, : TINY.horizon]
    loops = []
    for i in range(4):
        model.zero_grad()
        F.mse_loss(model(x[i : i + 1]), y[i : i + 1], reduction="sum").backward()
        loops.append({n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad})
    model.zero_grad()
    wrapped = opacus.GradSampleModule(model, loss_reduction="sum")
    F.mse_loss(wrapped(x), y, reduction="sum").backward()
    for name, param in model.named_parameters():
        if param.requires_grad:
            expected = torch.stack([loop[name] for loop in loops])
            torch.testing.assert_close(param.grad_sample, expected, rtol=1e-4, atol=1e-5)


def test_centred_features_of_pure_and_mixed_states():
    """The fixed feature map: a pure state's SIC outcomes have mean 0 and mean square
    (D - 1) / (D + 1) (2-design), the maximally mixed state maps to zero, purity to [0, 1]."""
    from qpriv.forecasting.layers import QuantumFeatures

    tokens = torch.randn(5, 16, generator=torch.Generator().manual_seed(3))
    pure = QuantumFeatures(p=0.0, n_shots=None)(tokens, torch.Generator())
    assert pure[:, :-1].mean(dim=-1).abs().max() < 1e-5
    assert torch.allclose(pure[:, :-1].square().mean(dim=-1), torch.full((5,), 15 / 17), atol=1e-4)
    assert torch.allclose(pure[:, -1], torch.ones(5))
    mixed = QuantumFeatures(p=1.0, n_shots=None)(tokens, torch.Generator())
    assert mixed.abs().max() < 1e-5
    raw = QuantumFeatures(p=0.3, n_shots=None, scale="raw")(tokens, torch.Generator())
    centred = QuantumFeatures(p=0.3, n_shots=None)(tokens, torch.Generator())
    assert torch.allclose(centred[:, :-1], raw[:, :-1] * 256 - 1, atol=1e-5)
