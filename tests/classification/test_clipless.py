"""Clipless DP-SGD: the projected Lipschitz MLP's analytic per-example gradient bound.

The bound is checked on real per-example gradients (vmap, and a loop for a few) of random data
through weights that DP-SGD has trained (biases pushed to their bound, weights to spectral
norm 1), layer by layer; the same check fails when the projection is skipped or the bound
leaves out a term. The step's noise is sigma times the bound and nothing is clipped.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F  # noqa: N812 (the PyTorch idiom)
from deel import torchlip
from torch.func import vjp

from qpriv.classification import privacy as classifier_privacy
from qpriv.classification.bounds import (
    cross_entropy_lipschitz,
    global_gradient_bound,
    lipschitz_mlp_gradient_bounds,
)
from qpriv.classification.dpsgd import (
    DPSGDConfig,
    _make_optimizer,
    dp_step,
    per_example_gradients,
    per_example_gradients_loop,
)
from qpriv.classification.models import PairSort, ProjectedLipschitzMLP
from qpriv.classification.run import train_classifier
from qpriv.errors import InvalidInputError
from qpriv.privacy.dpsgd_accounting import dpsgd_epsilon
from qpriv.training import dpsgd as training_dpsgd

N_FEATURES, N_CLASSES, HIDDEN = 12, 4, (16, 8)
TAU, INPUT_BOUND, BIAS_BOUND = 0.5, 3.0, 1.5


def _data(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Random examples: norms from 0 (an all-zero row, every pair tied) to well beyond X."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, N_FEATURES, generator=g) * torch.rand(n, 1, generator=g) * 3.0
    x[0] = 0.0
    return x, torch.randint(0, N_CLASSES, (n,), generator=g)


def _model() -> ProjectedLipschitzMLP:
    torch.manual_seed(5)
    return ProjectedLipschitzMLP(n_features=N_FEATURES, n_classes=N_CLASSES, hidden=HIDDEN,
                                 tau=TAU, input_bound=INPUT_BOUND, bias_bound=BIAS_BOUND)


def _train(model: torch.nn.Module, *, steps: int = 40) -> torch.nn.Module:
    """Noisy DP-SGD steps at a large rate: the weights hit their constraints."""
    x, y = _data(256, seed=1)
    config = DPSGDConfig(batch_size=32, epochs=1, lr=0.3, clip=model.gradient_bound(),
                         noise_multiplier=0.5, sampling="poisson", optimizer="sgd")
    optimizer = _make_optimizer(model, config)
    g = torch.Generator().manual_seed(2)
    for _ in range(steps):
        index = torch.randint(0, 256, (32,), generator=g)
        dp_step(model, optimizer, x[index], y[index], config=config, generator=g)
    return model


def _layer_norms(model: ProjectedLipschitzMLP, grads: torch.Tensor) -> list[torch.Tensor]:
    """Per-example norms of each parameter block, in named_parameters order (W_1, b_1, ...)."""
    norms, offset = [], 0
    for p in model.parameters():
        norms.append(grads[:, offset:offset + p.numel()].norm(dim=1))
        offset += p.numel()
    return norms


def bound_violations(model: ProjectedLipschitzMLP, x: torch.Tensor, y: torch.Tensor,
                     *, bound: float | None = None) -> list[str]:
    """Every per-example gradient block (and whole gradient) above its analytic bound."""
    grads = per_example_gradients(model, x, y)
    found = []
    norms = _layer_norms(model, grads)
    for k, layer in enumerate(model.layer_gradient_bounds()):
        for part, limit, measured in (("W", layer.weight, norms[2 * k]),
                                      ("b", layer.bias, norms[2 * k + 1])):
            if float(measured.max()) > limit * (1 + 1e-5):
                found.append(f"layer {k + 1} {part}: {float(measured.max()):.4g} > {limit:.4g}")
    total = model.gradient_bound() if bound is None else bound
    if float(grads.norm(dim=1).max()) > total * (1 + 1e-5):
        found.append(f"whole gradient: {float(grads.norm(dim=1).max()):.4g} > {total:.4g}")
    return found


def test_the_cross_entropy_is_sqrt2_over_tau_lipschitz_and_the_constant_is_tight() -> None:
    g = torch.Generator().manual_seed(0)
    z = torch.randn(2000, 5, generator=g) * 10
    y = torch.randint(0, 5, (2000,), generator=g)
    z.requires_grad_(True)
    (grad,) = torch.autograd.grad(F.cross_entropy(z / 0.3, y, reduction="sum"), z)
    assert float(grad.norm(dim=1).max()) <= cross_entropy_lipschitz(tau=0.3)
    # all the mass on one wrong class: the gradient norm approaches sqrt(2) / tau
    worst = torch.tensor([[0.0, 60.0, 0.0, 0.0, 0.0]], requires_grad=True)
    (grad,) = torch.autograd.grad(F.cross_entropy(worst / 0.3, torch.tensor([0])), worst)
    assert float(grad.norm()) == pytest.approx(math.sqrt(2) / 0.3, rel=1e-6)
    with pytest.raises(InvalidInputError, match="tau = 0 is outside"):
        cross_entropy_lipschitz(tau=0.0)


def test_the_layer_bounds_follow_the_recursion() -> None:
    layers = lipschitz_mlp_gradient_bounds(input_bound=2.0, weight_norms=[1.0, 0.5, 2.0],
                                           bias_bounds=[0.3, 0.7, 9.0], loss_lipschitz=3.0)
    # ||h_0|| = 2, ||h_1|| <= 1 * 2 + 0.3, ||h_2|| <= 0.5 * 2.3 + 0.7
    assert [b.input_norm for b in layers] == pytest.approx([2.0, 2.3, 1.85])
    # ||delta_3|| <= 3, ||delta_2|| <= 2 * 3, ||delta_1|| <= 0.5 * 6
    assert [b.output_gradient for b in layers] == pytest.approx([3.0, 6.0, 3.0])
    assert [b.weight for b in layers] == pytest.approx([6.0, 13.8, 5.55])
    assert global_gradient_bound(layers) == pytest.approx(math.sqrt(
        6**2 + 3**2 + 13.8**2 + 6**2 + 5.55**2 + 3**2))
    with pytest.raises(InvalidInputError, match="one weight norm and one bias bound per layer"):
        lipschitz_mlp_gradient_bounds(input_bound=1.0, weight_norms=[1.0], bias_bounds=[],
                                      loss_lipschitz=1.0)


def test_pair_sort_keeps_the_values_and_never_grows_a_gradient_at_ties() -> None:
    z = torch.randn(7, 10, generator=torch.Generator().manual_seed(3))
    torch.testing.assert_close(PairSort()(z), torchlip.GroupSort2()(z))
    torch.testing.assert_close(PairSort()(z).norm(dim=1), z.norm(dim=1))

    def jacobian_norm(activation: torch.nn.Module, at: torch.Tensor) -> float:
        _, pullback = vjp(activation, at)
        rows = [pullback(torch.eye(at.shape[1])[i][None])[0][0] for i in range(at.shape[1])]
        return float(torch.linalg.matrix_norm(torch.stack(rows), ord=2))

    tied = torch.zeros(1, 4)
    assert jacobian_norm(PairSort(), tied) == pytest.approx(1.0)
    assert jacobian_norm(PairSort(), z[:1]) == pytest.approx(1.0)
    # why PairSort: deel-torchlip's GroupSort2 sends both gradients of a tie to one unit
    assert jacobian_norm(torchlip.GroupSort2(), tied) == pytest.approx(math.sqrt(2))
    # in the model: at x = 0 with zero biases every pair of every layer is tied, and the
    # backward pass through the network still grows nothing (||J|| <= 1 / tau)
    model = _model()
    jac = torch.autograd.functional.jacobian(lambda v: model(v[None])[0],
                                             torch.zeros(N_FEATURES))
    assert float(torch.linalg.matrix_norm(jac, ord=2)) <= (1 + 1e-5) / TAU


def test_every_per_example_gradient_of_trained_weights_is_within_the_bound() -> None:
    model = _train(_model())
    assert max(model.weight_norms()) == pytest.approx(1.0, abs=1e-5)  # the ball's edge
    bias_norms = [float(layer.bias.detach().norm()) for layer in model.layers]
    assert max(bias_norms) == pytest.approx(BIAS_BOUND)
    x, y = _data(400, seed=9)
    assert float(x.norm(dim=1).max()) > 2 * INPUT_BOUND  # the input clipping acts
    assert bound_violations(model, x, y) == []
    # vmap agrees with one autograd call per example
    grads = per_example_gradients(model, x, y)
    torch.testing.assert_close(grads[:8], per_example_gradients_loop(model, x[:8], y[:8]),
                               atol=1e-5, rtol=1e-4)
    # the bound is not vacuous: the largest norm comes within a factor 2 of it
    assert float(grads.norm(dim=1).max()) > 0.5 * model.gradient_bound()
    # and the bound with the weights' own spectral norms holds too
    own = global_gradient_bound(model.layer_gradient_bounds(model.weight_norms()))
    assert float(grads.norm(dim=1).max()) <= own * (1 + 1e-5)
    assert model.gradient_bound() == pytest.approx(global_gradient_bound(
        lipschitz_mlp_gradient_bounds(input_bound=INPUT_BOUND, weight_norms=[1.0] * 3,
                                      bias_bounds=[BIAS_BOUND] * 3,
                                      loss_lipschitz=math.sqrt(2) / TAU)))


def test_a_broken_bound_is_caught(monkeypatch) -> None:
    x, y = _data(400, seed=9)
    # the projection skipped: the weights leave the ball and the gradients the bound
    monkeypatch.setattr(ProjectedLipschitzMLP, "project", lambda self: None)
    unprojected = _train(_model(), steps=60)
    assert max(unprojected.weight_norms()) > 1.2
    assert bound_violations(unprojected, x, y) != []
    monkeypatch.undo()
    # a bound that forgets the biases' share of the hidden norms is exceeded too
    model = _train(_model())
    no_bias_terms = global_gradient_bound(lipschitz_mlp_gradient_bounds(
        input_bound=INPUT_BOUND, weight_norms=[1.0] * 3, bias_bounds=[0.0] * 3,
        loss_lipschitz=math.sqrt(2) / TAU))
    assert bound_violations(model, x, y) == []
    assert bound_violations(model, x, y, bound=0.6 * no_bias_terms) != []


def test_the_step_adds_noise_sigma_times_the_bound_and_clips_nothing() -> None:
    model = _train(_model(), steps=10)
    bound = model.gradient_bound()
    x, y = _data(48, seed=4)
    config = DPSGDConfig(batch_size=40, epochs=1, lr=1e-9, clip=bound, noise_multiplier=1.3,
                         sampling="poisson", optimizer="sgd")
    grads = per_example_gradients(model, x, y)
    assert float(grads.norm(dim=1).max()) <= bound  # removing any example moves the sum <= Delta
    g = torch.Generator().manual_seed(11)
    twin = torch.Generator().set_state(g.get_state())
    stats = dp_step(model, _make_optimizer(model, config), x, y, config=config, generator=g)
    assert stats["batch_clip_fraction"] == 0.0
    assigned = torch.cat([p.grad.flatten() for p in model.parameters()])
    noise = torch.randn(grads.shape[1], generator=twin)
    torch.testing.assert_close(assigned * 40 - grads.sum(0), 1.3 * bound * noise,
                               atol=1e-3, rtol=1e-4)


def test_a_private_run_calibrates_the_noise_to_the_bound_and_never_clips() -> None:
    r = train_classifier(task="synthetic", model="lipschitz", clip="analytic", batch=128,
                         epochs=1, seed=3, lr=0.01, eps=10.0, tau=1.0, threads=1).to_json()
    bound = r["gradient_bound"]
    # the synthetic task: 16 features, X = 16, B = 1, tau = 1, three layers
    expected = math.sqrt(2) * math.sqrt(sum(h**2 + 1 for h in (16.0, 17.0, 18.0)))
    assert bound["per_example_norm_bound"] == pytest.approx(expected)
    assert r["clip"]["value"] == r["dpsgd"]["clip"] == pytest.approx(expected)
    assert r["clip"]["mode"].startswith("analytic")
    d = r["final_diagnostics"]
    assert d["clip_probability"] == 0.0 and d["batch_clip_fraction"] == 0.0
    assert d["clipping_bias_norm"] == 0.0
    assert 0.3 < bound["max_example_norm_over_bound"] <= 1.0
    assert max(bound["final_weight_norms"]) <= 1.0 + 1e-5
    sigma = r["noise_multiplier"]["value"]
    assert r["eps"]["value"] == pytest.approx(dpsgd_epsilon(
        noise_multiplier=sigma, sample_rate=128 / 1638, steps=round(1638 / 128), delta=1e-5))
    assert r["eps"]["value"] <= 10.0 + 1e-9
    assert "sigma * Delta" in r["noise_multiplier"]["meaning"]
    assert any(note.startswith("clipless DP-SGD") for note in r["privacy_notes"])
    # what escapes the guarantee is named: the training split's statistics and how the
    # default X (training norms) and tau (validation share) were chosen
    assert classifier_privacy.TRAINING_STATISTICS_NOTE in r["privacy_notes"]
    assert classifier_privacy.analytic_constants_note(
        task="synthetic", input_bound=16.0, bias_bound=1.0, tau=1.0,
        default_input_bound=True) in r["privacy_notes"]
    assert any("X = 16 (the default, read off this task's training inputs" in note
               for note in r["eps"]["notes"])
    assert r["gradient_bound"]["max_epoch_clip_fraction"] == 0.0
    assert classifier_privacy.ANALYTIC_NOTE in r["eps"]["notes"]
    assert r["gradient_bound"]["clipping_bias_bound"] == 0.0
    assert r["accuracy"] > 0.5


def test_the_bound_is_reached_where_every_inequality_is_tight() -> None:
    """Two units: x on an axis at the input bound's far side, W_1 = I with the bias along x,
    W_2 a 45 degree rotation with the bias along the output, a wrong label with all the
    probability on the other class: the norms add up and the loss gradient is sqrt(2) / tau,
    so every per-example gradient bound is reached (to float32): a Delta set any lower than
    the true supremum fails here, where the data-based checks above leave a factor 2."""
    s = 1 / math.sqrt(2)
    for tau, bound_x, bound_b in ((0.1, 20.0, 1.0), (0.5, 3.0, 1.5), (0.2, 16.0, 0.0)):
        model = ProjectedLipschitzMLP(n_features=2, n_classes=2, hidden=(2,), tau=tau,
                                      input_bound=bound_x, bias_bound=bound_b)
        with torch.no_grad():
            model.layers[0].weight.copy_(torch.eye(2))
            model.layers[0].bias.copy_(torch.tensor([bound_b, 0.0]))
            model.layers[1].weight.copy_(torch.tensor([[s, -s], [s, s]]))
            model.layers[1].bias.copy_(torch.tensor([-bound_b * s, bound_b * s]))
        model.project()  # already inside the constraint set: nothing moves
        assert model.weight_norms() == pytest.approx([1.0, 1.0], abs=1e-6)
        grads = per_example_gradients(model, torch.tensor([[3 * bound_x, 0.0]]),
                                      torch.tensor([0]))
        assert float(grads.norm()) == pytest.approx(model.gradient_bound(), rel=1e-6)
        # and each layer's weight and bias block reaches its own bound
        norms = _layer_norms(model, grads)
        for k, layer in enumerate(model.layer_gradient_bounds()):
            assert float(norms[2 * k]) == pytest.approx(layer.weight, rel=1e-6)
            assert float(norms[2 * k + 1]) == pytest.approx(layer.bias, rel=1e-6)


def test_every_gradient_is_taken_at_projected_weights(monkeypatch) -> None:
    """The bound holds for the weights the gradient is taken at: every step's, not only the
    last one's (a projection skipped on some steps leaves the final weights projected)."""
    model = _model()
    seen = []
    original = training_dpsgd.per_example_gradients

    def checked(net, *args, **kwargs):
        seen.append((max(net.weight_norms()),
                     max(float(layer.bias.detach().norm()) for layer in net.layers)))
        return original(net, *args, **kwargs)

    monkeypatch.setattr(training_dpsgd, "per_example_gradients", checked)
    _train(model, steps=30)
    assert len(seen) == 30
    assert max(w for w, _ in seen) <= 1.0 + 1e-6
    assert max(b for _, b in seen) <= BIAS_BOUND * (1 + 1e-6)
    # the rate is large enough that an unprojected step leaves the ball
    assert max(w for w, _ in seen[1:]) > 1.0 - 1e-4


def test_a_run_whose_guard_clipped_says_so(monkeypatch) -> None:
    # a bound set at a third of the true one: the guard clips, the sensitivity stays the
    # (wrong) Delta, and the claim must not say that nothing was clipped
    true_bound = ProjectedLipschitzMLP.gradient_bound
    monkeypatch.setattr(ProjectedLipschitzMLP, "gradient_bound",
                        lambda self: true_bound(self) / 3)
    r = train_classifier(task="synthetic", model="lipschitz", clip="analytic", batch=128,
                         epochs=1, seed=3, lr=0.01, eps=10.0, tau=1.0, threads=1).to_json()
    fraction = r["gradient_bound"]["max_epoch_clip_fraction"]
    assert fraction > 0
    assert classifier_privacy.ANALYTIC_NOTE not in r["eps"]["notes"]
    assert classifier_privacy.ANALYTIC_NOTE not in r["privacy_notes"]
    guard = classifier_privacy.ANALYTIC_GUARD_NOTE.format(fraction=fraction)
    assert guard in r["eps"]["notes"] and guard in r["privacy_notes"]
    assert "nothing clipped" not in r["noise_multiplier"]["meaning"]
    assert "the guard clipped" in r["noise_multiplier"]["meaning"]
    assert r["gradient_bound"]["clipping_bias_bound"] is None


def test_the_constants_note_names_the_input_bound_used() -> None:
    r = train_classifier(task="digits", model="lipschitz", clip="analytic", batch=256,
                         epochs=1, seed=3, lr=0.01, eps=10.0, input_bound=5.0,
                         threads=1).to_json()
    note = next(n for n in r["eps"]["notes"] if n.startswith("clipless DP-SGD's public"))
    assert "X = 5 (given by the user)" in note and "read off" not in note
    assert r["gradient_bound"]["input_bound"] == 5.0
    default = classifier_privacy.analytic_constants_note(
        task="digits", input_bound=16.0, bias_bound=1.0, tau=2.0, default_input_bound=True)
    assert "the synthetic task's training inputs, not this task's" in default


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"model": "mlp", "clip": "analytic"}, "clip = 'analytic' needs model 'lipschitz'"),
    ({"model": "lipschitz", "clip": "structural"}, "clip = 'structural' needs a quantum model"),
    ({"model": "lipschitz", "clip": 1.5, "input_bound": 4.0}, "a clip of 1.5 takes neither"),
    ({"model": "lipschitz", "clip": "analytic", "input_bound": 0.0}, "input_bound = 0"),
    ({"model": "lipschitz", "clip": "analytic", "preclip_noise": 0.1}, "leave it at 0"),
])
def test_bad_analytic_settings_are_refused_before_training(kwargs, needle) -> None:
    with pytest.raises(InvalidInputError, match=needle):
        train_classifier(task="synthetic", batch=64, epochs=1, seed=0, **kwargs)
