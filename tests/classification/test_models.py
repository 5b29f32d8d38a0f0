"""The classifiers: parameter counts, per-example gradients vs a loop, Lipschitz constant."""

from __future__ import annotations

import pytest
import torch

from qpriv.classification.dpsgd import per_example_gradients, per_example_gradients_loop
from qpriv.classification.models import (
    GroupNormCNN,
    LipschitzMLP,
    QuantumClassifier,
    TanhMLP,
    count_parameters,
)
from qpriv.errors import InvalidInputError
from qpriv.training.dpsgd import per_example_gradient_dict, runs_per_example_weights


def test_parameter_counts() -> None:
    assert count_parameters(TanhMLP(n_features=16, n_classes=4)) == 16 * 32 + 32 + 32 * 32 + 32 \
        + 32 * 4 + 4
    # the two image models of the paper, both near 500 trainable parameters
    assert count_parameters(GroupNormCNN(n_classes=4)) == 492
    image_vqc = QuantumClassifier(n_features=64, n_classes=4, n_layers=28)
    assert image_vqc.circuit.n_qubits == 6
    assert count_parameters(image_vqc) == 504
    assert count_parameters(QuantumClassifier(n_features=16, n_classes=4, n_layers=8)) == 96
    lip = LipschitzMLP(n_features=16, n_classes=4, lipschitz=1.0)
    assert count_parameters(lip) == count_parameters(TanhMLP(n_features=16, n_classes=4))


def models_and_inputs():
    g = torch.Generator().manual_seed(0)
    tab = torch.randn(6, 16, generator=g)
    img = torch.rand(6, 8, 8, generator=g)
    torch.manual_seed(0)
    return [
        ("mlp", TanhMLP(n_features=16, n_classes=4), tab),
        ("lipschitz", LipschitzMLP(n_features=16, n_classes=4, lipschitz=1.5), tab),
        ("quantum", QuantumClassifier(n_features=16, n_classes=4, n_layers=3, tau=0.3,
                                      depolarizing=0.1, generator=g), tab),
        ("cnn", GroupNormCNN(n_classes=4), img),
    ]


@pytest.mark.parametrize("index", range(4), ids=["mlp", "lipschitz", "quantum", "cnn"])
def test_per_example_gradients_equal_a_loop(index: int) -> None:
    _, model, x = models_and_inputs()[index]
    y = torch.tensor([0, 1, 2, 3, 0, 1])
    model.train()
    fast = per_example_gradients(model, x, y)
    slow = per_example_gradients_loop(model, x, y)
    assert fast.shape == (6, count_parameters(model))
    torch.testing.assert_close(fast, slow, atol=2e-5, rtol=1e-4)
    assert float(fast.norm(dim=1).min()) > 0  # every parameter group receives gradient


class VmapOnly(torch.nn.Module):
    """The classifier without ``forward_per_example``: its gradients come from vmap of grad."""

    def __init__(self, model: QuantumClassifier) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor, readout_noise: torch.Tensor | None = None):
        return self.model(x, readout_noise=readout_noise)


def test_the_circuits_per_example_weights_give_vmaps_gradients_and_losses() -> None:
    g = torch.Generator().manual_seed(5)
    model = QuantumClassifier(n_features=12, n_classes=3, n_layers=4, tau=0.5,
                              depolarizing=0.2, generator=g).double()
    x = torch.randn(9, 12, generator=g, dtype=torch.float64)
    y = torch.randint(0, 3, (9,), generator=g)
    noise = {"readout_noise": 0.1 * torch.randn(9, 3, generator=g, dtype=torch.float64)}
    kwargs = {"loss_fn": torch.nn.functional.cross_entropy, "example_kwargs": noise}
    fast, fast_losses = per_example_gradient_dict(model, x, y, **kwargs)
    slow, slow_losses = per_example_gradient_dict(VmapOnly(model), x, y, **kwargs)
    torch.testing.assert_close(fast["weights"], slow["model.weights"], atol=1e-12, rtol=0)
    torch.testing.assert_close(fast_losses, slow_losses, atol=1e-14, rtol=0)
    chunked, chunked_losses = per_example_gradient_dict(model, x, y, chunk_size=4, **kwargs)
    torch.testing.assert_close(chunked["weights"], fast["weights"], atol=1e-14, rtol=0)
    torch.testing.assert_close(chunked_losses, fast_losses, atol=0, rtol=0)
    with pytest.raises(InvalidInputError, match="chunk_size"):
        per_example_gradient_dict(model, x, y, chunk_size=0, **kwargs)
    empty, empty_losses = per_example_gradient_dict(model, x[:0], y[:0], **{
        **kwargs, "example_kwargs": {"readout_noise": noise["readout_noise"][:0]}})
    assert empty["weights"].shape == (0, 4, 4, 3) and empty_losses.shape == (0,)


class Doubled(QuantumClassifier):
    """A subclass that changes ``forward`` alone: its gradients must be those of its forward."""

    def forward(self, x: torch.Tensor, readout_noise: torch.Tensor | None = None):
        return 2 * super().forward(x, readout_noise)


def test_a_subclass_that_changes_forward_alone_gets_its_own_gradients() -> None:
    model = Doubled(n_features=16, n_classes=4, n_layers=2,
                    generator=torch.Generator().manual_seed(1))
    x, y = torch.randn(5, 16), torch.tensor([0, 1, 2, 3, 0])
    assert not runs_per_example_weights(model)
    assert runs_per_example_weights(QuantumClassifier(n_features=16, n_classes=4, n_layers=2))
    torch.testing.assert_close(per_example_gradients(model, x, y),
                               per_example_gradients_loop(model, x, y), atol=2e-5, rtol=1e-4)


def test_lipschitz_mlp_is_c_lipschitz_in_its_input() -> None:
    torch.manual_seed(1)
    for c in (0.5, 1.5, 10.0):
        model = LipschitzMLP(n_features=16, n_classes=4, lipschitz=c).train()
        model(torch.randn(4, 16))  # settle the power iteration of the spectral normalisation
        norms = []
        for x in torch.randn(20, 16):
            jac = torch.autograd.functional.jacobian(lambda v, m=model: m(v[None])[0], x)
            norms.append(float(torch.linalg.matrix_norm(jac, ord=2)))
        assert max(norms) <= c * 1.01
        assert max(norms) >= 0.5 * c  # GNP layers lose little: the bound is nearly attained
    with pytest.raises(InvalidInputError, match="even"):
        LipschitzMLP(n_features=16, n_classes=4, lipschitz=1.0, hidden=(31,))
    with pytest.raises(InvalidInputError, match="lipschitz = 0 is outside"):
        LipschitzMLP(n_features=16, n_classes=4, lipschitz=0.0)


def test_quantum_classifier_logits_padding_and_shots() -> None:
    g = torch.Generator().manual_seed(2)
    model = QuantumClassifier(n_features=10, n_classes=3, n_layers=2, tau=0.25, generator=g)
    assert model.circuit.n_qubits == 4  # 10 features pad to D = 16
    x = torch.randn(5, 10, generator=g)
    padded = torch.cat([x, torch.zeros(5, 6)], dim=1)
    torch.testing.assert_close(model.encode(x), padded / padded.norm(dim=1, keepdim=True))
    e = model.expectations(x)
    torch.testing.assert_close(model(x), e / 0.25)
    assert model.draw_readout_noise(x) is None  # exact read-out without shots

    noisy = QuantumClassifier(n_features=10, n_classes=3, n_layers=2, tau=0.25, shots=50,
                              generator=torch.Generator().manual_seed(2))
    noise = noisy.draw_readout_noise(x, generator=torch.Generator().manual_seed(3))
    estimates = e + noise
    # an S-shot estimate is a multiple of 2/S in [-1, 1]
    torch.testing.assert_close(((estimates + 1) * 25), ((estimates + 1) * 25).round(),
                               atol=1e-4, rtol=0)
    torch.testing.assert_close(noisy(x, readout_noise=noise), estimates / 0.25)
    # straight-through: the per-example gradient with drawn shots equals the loop's
    y = torch.tensor([0, 1, 2, 0, 1])
    fast = per_example_gradients(noisy, x, y, readout_noise=noise)
    for i in range(5):
        loss = torch.nn.functional.cross_entropy(noisy(x[i:i + 1], readout_noise=noise[i:i + 1]),
                                                 y[i:i + 1])
        (slow,) = torch.autograd.grad(loss, noisy.weights)
        torch.testing.assert_close(fast[i], slow.flatten(), atol=1e-5, rtol=1e-4)


def test_quantum_classifier_validates_inputs() -> None:
    with pytest.raises(InvalidInputError, match="need at least 4 qubits"):
        QuantumClassifier(n_features=16, n_classes=4, n_layers=1, n_qubits=3)
    model = QuantumClassifier(n_features=16, n_classes=4, n_layers=1)
    with pytest.raises(InvalidInputError, match="built for 16"):
        model(torch.randn(2, 12))
    with pytest.raises(InvalidInputError, match="tau = 0 is outside"):
        QuantumClassifier(n_features=16, n_classes=4, n_layers=1, tau=0.0)


def test_depolarizing_scales_the_expectations_and_shots_sample_around_them() -> None:
    g = torch.Generator().manual_seed(2)
    clean = QuantumClassifier(n_features=16, n_classes=4, n_layers=2, generator=g)
    noisy = QuantumClassifier(n_features=16, n_classes=4, n_layers=2, depolarizing=0.4,
                              shots=100)
    noisy.load_state_dict(clean.state_dict())
    x = torch.randn(3, 16, generator=g)
    torch.testing.assert_close(noisy.expectations(x), 0.6 * clean.expectations(x))  # 1 - lambda
    xs = x.repeat(4000, 1)
    draws = noisy.draw_readout_noise(xs, generator=torch.Generator().manual_seed(1))
    estimates = (noisy.expectations(xs) + draws + 1) * 50  # counts of S = 100 shots
    torch.testing.assert_close(estimates, estimates.round(), atol=1e-3, rtol=0)
    # centred on the depolarized mean: within 5 standard errors (each |<Z>| < 1)
    assert float(draws.mean(0).abs().max()) < 5 * (1 / 100 / 4000) ** 0.5
