"""The baselines on the one backbone: DP-SGD per window, input noise,
bottlenecks, ablations, and what each says about its privacy."""

from __future__ import annotations

import json

import pytest
import torch

from qpriv.errors import ArgumentError, InvalidInputError
from qpriv.forecasting.config import ModelConfig
from qpriv.forecasting.methods import BACKBONE, METHODS, run_budget, setup_method
from qpriv.forecasting.model import LDPTForecaster
from qpriv.forecasting.recipe import mse
from qpriv.forecasting.rigorous import EQ2_NEIGHBOURHOOD_NOTE
from qpriv.forecasting.run import run_forecast
from qpriv.forecasting.windows import WINDOW_COUNT_NOTE
from qpriv.privacy.claims import COVERS_WEIGHTS, Accounting, Kind, PrivacyClaim, Unit
from qpriv.privacy.gaussian import gaussian_sigma
from qpriv.privacy.randomness import randomness_note
from qpriv.training.dpsgd import (
    DPSGDStrategy,
    clip_and_noise,
    per_example_gradient_dict,
    per_example_gradients,
    per_example_gradients_loop,
)
from qpriv.training.trainer import DIVERGENCE_NOTE

BACKBONE_METHODS = [name for name, entry in METHODS.items() if entry.family == BACKBONE]
"""The methods built on the LDPT backbone (the linear family has its own tests)."""

TINY = ModelConfig(seq_len=32, horizon=4, n_channels=3, dim=4, stride=4, d_model=8, n_heads=2,
                   d_ff=16, n_shots=16)
SMALL = {"seq_len": 48, "max_train_windows": 128, "max_eval_windows": 24, "progress": False,
         "rigorous": False,
         "overrides": {"d_model": 8, "n_heads": 2, "d_ff": 16, "dim": 4, "n_shots": 32}}


def classical_model(seed: int = 0) -> LDPTForecaster:
    torch.manual_seed(seed)
    return LDPTForecaster(setup_method("dpsgd", base=TINY, eps=1.0).config)


def test_per_window_gradients_equal_a_loop_over_windows():
    model = classical_model()
    x, y = torch.randn(5, 32, 3), torch.randn(5, 4, 3)
    fast, losses = per_example_gradients(model, x, y, loss_fn=mse)
    slow = per_example_gradients_loop(model, x, y, loss_fn=mse)
    n_params = sum(p.numel() for p in model.parameters())
    assert fast.shape == (5, n_params)  # one row per window, not per (window, channel)
    torch.testing.assert_close(fast, slow, rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(losses, torch.stack(
        [mse(model(x[i:i + 1]), y[i:i + 1]) for i in range(5)]).detach())


def test_one_window_moves_the_clipped_sum_by_at_most_the_clip_norm():
    """The sensitivity DP-SGD's accountant assumes: adding one window (all its channels) to a
    batch changes the clipped gradient sum by at most C. Clipping per (window, channel) would
    let a 3-channel window move it by up to 3 C."""
    model = classical_model()
    torch.manual_seed(1)
    x, y = 50 * torch.randn(8, 32, 3), 50 * torch.randn(8, 4, 3)  # large: every row is clipped
    grads, _ = per_example_gradient_dict(model, x, y, loss_fn=mse)
    gen = torch.Generator().manual_seed(0)
    kwargs = {"shapes": {k: v.shape[1:] for k, v in grads.items()}, "clip": 1.0,
              "noise_multiplier": 0.0, "denominator": 1.0, "generator": gen}
    with_all, clipped = clip_and_noise(grads, **kwargs)
    assert clipped == 1.0

    def distance(a: dict, b: dict) -> float:
        return float(sum((a[k] - b[k]).pow(2).sum() for k in a)) ** 0.5

    for i in range(8):
        without, _ = clip_and_noise({k: torch.cat([g[:i], g[i + 1:]]) for k, g in grads.items()},
                                    **kwargs)
        assert distance(with_all, without) <= 1.0 + 1e-5
        assert distance(with_all, without) == pytest.approx(1.0, rel=1e-4)


@pytest.mark.parametrize("bad", [float("inf"), float("nan")])
def test_a_sample_whose_gradient_overflowed_is_dropped_not_spread_into_the_sum(bad):
    """C / inf is 0 but 0 * inf is nan: clipping alone would let one overflowing sample make the
    whole released sum nan, a change no noise covers. It is dropped (counted as clipped), so the
    sum equals the sum without it, and the noise is the same draw."""
    grads = {"w": torch.tensor([[1.0, 2.0], [bad, 0.0], [0.5, -0.5]]),
             "b": torch.tensor([[3.0], [1.0], [0.1]])}
    kwargs = {"shapes": {"w": torch.Size([2]), "b": torch.Size([1])}, "clip": 1.0,
              "noise_multiplier": 1.0, "denominator": 3.0}
    with_bad, clipped = clip_and_noise(grads, generator=torch.Generator().manual_seed(3),
                                       **kwargs)
    without, _ = clip_and_noise({k: g[[0, 2]] for k, g in grads.items()},
                                generator=torch.Generator().manual_seed(3), **kwargs)
    assert all(torch.isfinite(t).all() for t in with_bad.values())
    for name in grads:
        torch.testing.assert_close(with_bad[name], without[name])
    assert clipped == pytest.approx(2 / 3)  # the first sample (norm 3.2) and the dropped one


def test_dpsgd_noise_has_the_accountants_scale():
    n_params = 20_000
    gen = torch.Generator().manual_seed(0)
    noise, _ = clip_and_noise(None, shapes={"w": torch.Size([n_params])}, clip=2.0,
                              noise_multiplier=3.0, denominator=4.0, generator=gen)
    assert float(noise["w"].std()) == pytest.approx(3.0 * 2.0 / 4.0, rel=0.02)


def test_dpsgd_strategy_steps_with_poisson_batches_and_reports_its_spend():
    model = classical_model()
    strategy = DPSGDStrategy(clip=1.0, noise_multiplier=1.0, sample_rate=0.25,
                             steps_per_epoch=4, delta=1e-5, seed=3, target_eps=8.0)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    strategy.prepare(model, optimizer, n_train=40, batch_size=10)
    batches = strategy.batches(40, batch_size=10, generator=torch.Generator().manual_seed(0))
    assert len(batches) == 4 and len({len(b) for b in batches}) > 1  # Poisson sizes vary
    before = [p.detach().clone() for p in model.parameters()]
    x, y = torch.randn(40, 32, 3), torch.randn(40, 4, 3)
    for index in batches:
        strategy.step(model, x[index], y[index], optimizer=optimizer, scaler=None, amp=False,
                      loss=mse)
    strategy.step(model, x[:0], y[:0], optimizer=optimizer, scaler=None, amp=False,
                  loss=mse)  # empty
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    report = strategy.report()
    assert report["steps"] == 5
    assert report["eps"]["kind"] == "global (eps, delta)-DP"
    assert report["eps"]["accounting"] == "rigorous"
    assert report["eps"]["value"] > 0
    state = strategy.state_dict()
    again = DPSGDStrategy(clip=1.0, noise_multiplier=1.0, sample_rate=0.25, steps_per_epoch=4,
                          delta=1e-5, seed=99)
    again.load_state_dict(state)
    assert torch.equal(again.noise.get_state(), strategy.noise.get_state())
    # a checkpoint of other settings would have its steps counted at the wrong sigma or q
    for change in ({"noise_multiplier": 2.0}, {"sample_rate": 0.5}, {"clip": 3.0}):
        other = DPSGDStrategy(**{"clip": 1.0, "noise_multiplier": 1.0, "sample_rate": 0.25,
                                 "steps_per_epoch": 4, "delta": 1e-5, "seed": 99, **change})
        key = next(iter(change))
        with pytest.raises(InvalidInputError, match=f"other DP-SGD settings .*{key}"):
            other.load_state_dict(state)
    # one written before the settings were stored is taken (its config.json is checked)
    legacy = {key: value for key, value in state.items() if key != "settings"}
    again.load_state_dict(legacy)
    assert again.steps == 5


def test_every_method_names_its_privacy_and_noise():
    kinds = {"none", "local eps-QDP per pass", "local (eps, delta)-DP per pass",
             "global (eps, delta)-DP"}
    for name in BACKBONE_METHODS:
        setup = setup_method(name, base=TINY, eps=0.5)
        assert setup.privacy in kinds, name
        LDPTForecaster(setup.config)(torch.randn(2, 32, 3))  # every config builds and runs
    sigma = gaussian_sigma(eps=0.5, delta=1e-6)
    assert setup_method("dp-input", base=TINY, eps=0.5).config.input_noise == sigma
    assert setup_method("bottleneck-dp", base=TINY, eps=0.5).config.sigma == sigma
    assert setup_method("bottleneck-dp", base=TINY, eps=0.5).privacy == "none"
    ldpt = setup_method("ldpt", base=TINY, eps=0.5)
    assert setup_method("bottleneck", base=TINY, eps=0.5).config.sigma == ldpt.config.sigma
    no_channel = setup_method("ldpt-no-channel", base=TINY, eps=0.5)
    assert no_channel.config.p == 0.0 and no_channel.config.sigma == ldpt.config.sigma
    assert no_channel.privacy == "none"
    assert setup_method("ldpt-shots256", base=TINY, eps=0.5).config.n_shots == 256
    assert setup_method("ldpt-layernorm", base=TINY, eps=0.5).config.norm == "layernorm"
    tuned = setup_method("dpsgd-tuned", base=TINY, eps=0.5)
    assert tuned.training == {"batch_size": 512, "epochs": 50, "warmup_epochs": 5}


def test_every_stated_guarantee_says_the_scaler_is_outside_it():
    from qpriv.forecasting.run_claims import SCALER_NOTE, run_claims

    dpsgd_claim = PrivacyClaim(value=0.5, delta=1e-6, kind=Kind.GLOBAL_DP,
                               accounting=Accounting.RIGOROUS, unit=Unit.WINDOW,
                               covers=COVERS_WEIGHTS)
    strategy = {"eps": dpsgd_claim.to_json(), "noise_multiplier": {"value": 3.0}}
    claimed = []
    for name in BACKBONE_METHODS:
        setup = setup_method(name, base=TINY, eps=0.5)
        if setup.privacy == "none":
            continue
        claimed.append(setup.privacy)
        for secret in (False, True):
            privacy = run_claims(setup, epochs=2, delta_prime=1e-6, strategy=strategy,
                               target=run_budget(name, eps=0.5), delta=1e-6, secret=secret)
            assert SCALER_NOTE in privacy["privacy_notes"], name
            # and in the claim itself, where a reader of the epsilon finds it, with where the
            # mechanism's randomness came from
            notes = PrivacyClaim.from_json(privacy.get("eps_per_pass") or privacy["eps"]).notes
            assert SCALER_NOTE in notes, name
            assert randomness_note(secret=secret) in notes, name
            if setup.privacy == "global (eps, delta)-DP":  # DP-SGD: its stop reads the data
                assert DIVERGENCE_NOTE in notes, name
                assert WINDOW_COUNT_NOTE in notes, name  # add/remove a window moves the count
            # a neighbourhood the code assumes and does not enforce is said in the claim
            assumed = (EQ2_NEIGHBOURHOOD_NOTE in notes
                       or any("assumed, not enforced" in note for note in notes))
            # DP-SGD clips each window; the signed encoding proves its d
            enforced = (setup.privacy == "global (eps, delta)-DP"
                        or setup.config.encoding == "signed")
            assert assumed != enforced, name
    assert set(claimed) == {"local eps-QDP per pass", "local (eps, delta)-DP per pass",
                            "global (eps, delta)-DP"}


def test_input_noise_is_fresh_and_seeded():
    setup = setup_method("dp-input", base=TINY, eps=0.5)
    model = LDPTForecaster(setup.config)
    x = torch.zeros(2, 32, 3)
    model.seed_noise(1)
    first = model(x)
    assert not torch.equal(first, model(x))
    model.seed_noise(1)
    assert torch.equal(first, model(x))


@pytest.mark.needs_ett
def test_a_dpsgd_run_is_labelled_and_resumes(tmp_path):
    out = tmp_path / "dpsgd"
    result = run_forecast(method="dpsgd", eps=8.0, horizon=4, epochs=2, out_dir=out, **SMALL)
    assert result.privacy == "global (eps, delta)-DP"
    eps = result.claims["eps"]
    assert eps.accounting == "rigorous" and eps.details["target"] == 8.0
    assert eps.value == pytest.approx(8.0, rel=0.05)
    assert eps.value <= 8.0 * (1 + 1e-9)
    assert result.noise_multiplier > 0
    assert result.to_json()["strategy"]["steps"] == 2 * round(128 / 64)
    # a run written before config.json had accounting and delta resumes as the paper's
    config = json.loads((out / "config.json").read_text())
    del config["accounting"], config["delta"]
    (out / "config.json").write_text(json.dumps(config))
    again = run_forecast(method="dpsgd", eps=8.0, horizon=4, epochs=2, out_dir=out, resume=True,
                         **SMALL)
    assert (again.mse, again.mae) == (result.mse, result.mae)
    assert config["dpsgd"] == {"eps": 8.0, "delta": 1e-6, "clip": 1.0}
    # the noise was calibrated for eps 8: the run cannot be resumed, or re-reported, as eps 0.5


    with pytest.raises(InvalidInputError, match=r"settings differ in \['dpsgd', 'eps'\]"):
        run_forecast(method="dpsgd", eps=0.5, horizon=4, epochs=2, out_dir=out, resume=True,
                     **SMALL)
    # a run from before eps and dpsgd were recorded cannot be checked: it is not resumed
    del config["eps"], config["dpsgd"]
    (out / "config.json").write_text(json.dumps(config))
    with pytest.raises(InvalidInputError,
                       match=r"older qpriv that did not record \['dpsgd', 'eps'\]"):
        run_forecast(method="dpsgd", eps=8.0, horizon=4, epochs=2, out_dir=out, resume=True,
                     **SMALL)


@pytest.mark.parametrize(("method", "needle"), [
    ("dpsgd", "runs at the paper's delta = 1e-06"),
    ("dp-input", "runs at the paper's delta = 1e-06"),
    ("bottleneck-dp", "runs at the paper's delta = 1e-06"),
    ("classical", "has no feature path to account"),
])
def test_a_delta_the_method_would_not_use_is_refused(method, needle):


    message = f"cannot be set for method '{method}': it {needle}"
    with pytest.raises(InvalidInputError, match=message):
        run_forecast(method=method, eps=None if method == "classical" else 1.0, delta=1e-5,
                     horizon=4, epochs=1, **SMALL)


@pytest.mark.needs_ett
def test_a_budget_no_multiplier_meets_is_refused_before_writing(tmp_path):


    out = tmp_path / "run"
    with pytest.raises(InvalidInputError, match="no DP-SGD noise multiplier"):
        run_forecast(method="dpsgd", eps=0.005, horizon=4, epochs=1, out_dir=out, **SMALL)
    assert not out.exists() or not any(out.iterdir())


def test_dpsgd_strategy_step_is_the_hand_computation():
    """One DP-SGD step without noise: theta - lr * (sum of per-window gradients clipped to C)
    / (q N), the expected batch size, not the drawn one; then the noise alone has std
    lr sigma C / (q N) per coordinate, and the spend is the accountant's for the steps taken."""
    from qpriv.privacy.dpsgd_accounting import dpsgd_epsilon

    model = classical_model()
    strategy = DPSGDStrategy(clip=0.5, noise_multiplier=0.0, sample_rate=0.25,
                             steps_per_epoch=4, delta=1e-5, seed=3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    strategy.prepare(model, optimizer, n_train=40, batch_size=10)
    torch.manual_seed(2)
    x, y = torch.randn(7, 32, 3), torch.randn(7, 4, 3)  # 7 drawn, 10 expected
    grads = per_example_gradients_loop(model, x, y, loss_fn=mse)
    scale = (0.5 / grads.norm(dim=1)).clamp(max=1.0)
    assert float(scale.max()) < 1.0  # every window is clipped: the clip is exercised
    before = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    strategy.step(model, x, y, optimizer=optimizer, scaler=None, amp=False, loss=mse)
    after = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    expected = before - 0.1 * (scale[:, None] * grads).sum(dim=0) / (0.25 * 40)
    torch.testing.assert_close(after, expected, rtol=1e-4, atol=1e-7)

    noisy = DPSGDStrategy(clip=1e-6, noise_multiplier=2.0, sample_rate=0.25,
                          steps_per_epoch=4, delta=1e-5, seed=3)
    noisy.prepare(model, optimizer, n_train=40, batch_size=10)
    for _ in range(3):
        noisy.step(model, x, y, optimizer=optimizer, scaler=None, amp=False, loss=mse)
    moved = torch.cat([p.detach().reshape(-1) for p in model.parameters()]) - after
    # three independent draws: std sqrt(3) * lr * sigma * C / (q N); the clipped gradients
    # (at most 7 C per step in norm) are negligible against noise over every coordinate
    assert float(moved.std()) == pytest.approx(3**0.5 * 0.1 * 2.0 * 1e-6 / 10, rel=0.05)
    assert noisy.report()["eps"]["value"] == pytest.approx(dpsgd_epsilon(
        noise_multiplier=2.0, sample_rate=0.25, steps=3, delta=1e-5))


def test_a_linear_method_is_not_set_up_on_the_backbone():


    assert {"public", "ridge", "dp-linear"} <= set(METHODS) - set(BACKBONE_METHODS)
    with pytest.raises(InvalidInputError, match="linear forecaster, not built on the backbone"):
        setup_method("dp-linear", base=TINY, eps=0.5)


def test_every_budget_says_what_its_eps_is_spent_on():
    """One name per meaning of eps: a global (eps, delta)-DP method's budget is its release's,
    a method that sets noise per pass gets a per-pass eps_s, the rigorous accounting an
    over-training eps; a method without noise none."""
    from qpriv.forecasting.methods import DEFAULT_EPS
    from qpriv.privacy.budget import Spend

    spends = {}
    for name, entry in METHODS.items():
        target = run_budget(name)
        if not entry.needs_eps:
            assert target is None, name
            continue
        assert target.eps == DEFAULT_EPS, name
        read = (target.eps_per_pass, target.eps_total, target.eps_release)
        assert sorted(read, key=lambda v: v is None) == [DEFAULT_EPS, None, None], name
        spends[name] = target.spend
    assert spends["dp-linear"] is spends["dpsgd"] is spends["dpsgd-linear"] is Spend.RELEASE
    assert spends["ldpt"] is spends["dp-input"] is spends["bottleneck"] is Spend.PER_PASS
    rigorous = run_budget("ldpt", eps_total=3.0, accounting="rigorous")
    assert (rigorous.spend, rigorous.eps_total, rigorous.eps_per_pass) == (
        Spend.OVER_TRAINING, 3.0, None)
    with pytest.raises(ArgumentError, match="takes eps_total only"):
        run_budget("ldpt", eps=0.1, eps_total=3.0, accounting="rigorous")
