"""DP-SGD of the classifiers: one step against a hand computation, batches, the training loop."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F  # noqa: N812 (the PyTorch idiom)

from qpriv.classification import dpsgd
from qpriv.classification.diagnostics import update_mse_decomposition
from qpriv.classification.dpsgd import (
    DPSGDConfig,
    _batches,
    dp_step,
    per_example_gradients,
    per_example_gradients_loop,
    train_dpsgd,
)
from qpriv.classification.models import QuantumClassifier, TanhMLP
from qpriv.errors import InvalidInputError
from qpriv.runs.files import load_checkpoint
from qpriv.training.trainer import CHECKPOINT_FORMAT


def test_one_step_equals_the_hand_computation() -> None:
    torch.manual_seed(0)
    model = TanhMLP(n_features=5, n_classes=3, hidden=(4,))
    before = copy.deepcopy(model)
    g = torch.Generator().manual_seed(1)
    # a Poisson batch of 5 drawn where 8 are expected: the sum is divided by 8
    x, y = torch.randn(5, 5, generator=g), torch.randint(0, 3, (5,), generator=g)
    config = DPSGDConfig(batch_size=8, epochs=1, lr=1.0, clip=0.5, noise_multiplier=1.3,
                         sampling="poisson", optimizer="sgd")
    noise_gen = torch.Generator().manual_seed(7)
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    dp_step(model, optimizer, x, y, config=config, generator=noise_gen)

    grads = per_example_gradients_loop(before, x, y)
    factors = torch.clamp(0.5 / grads.norm(dim=1), max=1.0)
    noise = 1.3 * 0.5 * torch.randn(grads.shape[1], generator=torch.Generator().manual_seed(7))
    update = ((grads * factors[:, None]).sum(0) + noise) / 8  # divided by the expected size
    expected = torch.cat([p.detach().flatten() for p in before.parameters()]) - update
    got = torch.cat([p.detach().flatten() for p in model.parameters()])
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    # an empty Poisson batch still releases the noise, divided by the expected size
    dp_step(model, optimizer, x[:0], y[:0], config=config,
            generator=torch.Generator().manual_seed(8))
    noise = 1.3 * 0.5 * torch.randn(grads.shape[1], generator=torch.Generator().manual_seed(8))
    after = torch.cat([p.detach().flatten() for p in model.parameters()])
    torch.testing.assert_close(after, got - noise / 8, atol=1e-5, rtol=1e-5)


def _flat(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def test_preclip_noise_is_added_before_clipping() -> None:
    # a hand computation: loop gradients, plus s z from the same seeded generator, then clipped
    torch.manual_seed(0)
    model = TanhMLP(n_features=3, n_classes=2, hidden=(2,))
    before = copy.deepcopy(model)
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(4, 3, generator=g), torch.tensor([0, 1, 0, 1])
    config = DPSGDConfig(batch_size=4, epochs=1, lr=1.0, clip=1.0, preclip_noise=0.5,
                         optimizer="sgd")
    dp_step(model, torch.optim.SGD(model.parameters(), lr=1.0), x, y, config=config,
            generator=torch.Generator().manual_seed(3))
    grads = per_example_gradients_loop(before, x, y)
    grads = grads + 0.5 * torch.randn(grads.shape, generator=torch.Generator().manual_seed(3))
    factors = torch.clamp(1.0 / grads.norm(dim=1), max=1.0)
    torch.testing.assert_close(_flat(model), _flat(before) - (grads * factors[:, None]).sum(0) / 4,
                               atol=1e-5, rtol=1e-5)


def test_the_step_trains_on_the_drawn_shots() -> None:
    # straight-through read-out: the gradient of each example's loss at its own S-shot logits
    g = torch.Generator().manual_seed(0)
    model = QuantumClassifier(n_features=16, n_classes=4, n_layers=2, tau=0.2, shots=20,
                              generator=g)
    before = copy.deepcopy(model)
    x, y = torch.randn(6, 16, generator=g), torch.tensor([0, 1, 2, 3, 0, 1])
    config = DPSGDConfig(batch_size=6, epochs=1, lr=1.0, clip=None, optimizer="sgd")
    dp_step(model, torch.optim.SGD(model.parameters(), lr=1.0), x, y, config=config,
            generator=torch.Generator().manual_seed(5))
    noise = before.draw_readout_noise(x, generator=torch.Generator().manual_seed(5))
    rows = [torch.autograd.grad(
                F.cross_entropy(before(x[i:i + 1], readout_noise=noise[i:i + 1]), y[i:i + 1]),
                before.weights)[0].flatten() for i in range(6)]
    torch.testing.assert_close(_flat(model), _flat(before) - torch.stack(rows).mean(0),
                               atol=1e-5, rtol=1e-4)


def test_training_draws_its_batches_and_reports_its_own_sampling() -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(96, 8, generator=g)
    y = (x[:, 0] > 0).long()
    torch.manual_seed(0)
    model = TanhMLP(n_features=8, n_classes=2, hidden=(4,))
    config = DPSGDConfig(batch_size=32, epochs=2, lr=0.1, clip=0.5, noise_multiplier=0.7,
                         sampling="poisson", optimizer="sgd")
    seen, real = [], dpsgd.dp_step

    def spy(m, o, xb, yb, **kwargs):
        seen.append(xb.clone())
        return real(m, o, xb, yb, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(dpsgd, "dp_step", spy)
        history = train_dpsgd(model, x_train=x, y_train=y, x_test=x, y_test=y, config=config,
                              batch_generator=torch.Generator().manual_seed(1),
                              noise_generator=torch.Generator().manual_seed(2))
    batches = torch.Generator().manual_seed(1)  # the batch generator alone draws the batches
    expected = [x[i] for _ in range(2) for i in dpsgd._batches(96, config, batches)]
    assert len(seen) == len(expected) and all(torch.equal(a, b)
                                              for a, b in zip(seen, expected, strict=True))
    parts = update_mse_decomposition(per_example_gradients(model, x, y), clip=0.5, batch_size=32,
                                     noise_multiplier=0.7, sampling="poisson")
    assert history[-1]["mse_sampling_variance"] == pytest.approx(parts["sampling_variance"],
                                                                 rel=1e-5)


def test_batches() -> None:
    g = torch.Generator().manual_seed(0)
    shuffle = _batches(100, DPSGDConfig(batch_size=32, epochs=1, lr=0.1), g)
    assert [len(b) for b in shuffle] == [32, 32, 32, 4]
    assert sorted(torch.cat(shuffle).tolist()) == list(range(100))
    poisson = DPSGDConfig(batch_size=10, epochs=1, lr=0.1, sampling="poisson")
    sizes = [len(b) for _ in range(200) for b in _batches(100, poisson, g)]
    assert len(sizes) == 200 * 10  # round(N / |B|) steps per epoch
    assert sum(sizes) / len(sizes) == pytest.approx(10, rel=0.05)


def test_config_rejects_incoherent_settings() -> None:
    with pytest.raises(InvalidInputError, match="noise needs a clipping threshold"):
        DPSGDConfig(batch_size=8, epochs=1, lr=0.1, clip=None, noise_multiplier=1.0,
                    sampling="poisson")
    with pytest.raises(InvalidInputError, match="Poisson"):
        DPSGDConfig(batch_size=8, epochs=1, lr=0.1, clip=1.0, noise_multiplier=1.0)
    with pytest.raises(InvalidInputError, match="optimizer"):
        DPSGDConfig(batch_size=8, epochs=1, lr=0.1, optimizer="lbfgs")
    with pytest.raises(InvalidInputError, match="clip = 0 is outside"):
        DPSGDConfig(batch_size=8, epochs=1, lr=0.1, clip=0.0)


def test_training_loop_records_consistent_diagnostics() -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(96, 16, generator=g)
    y = (x[:, 0] > 0).long() + 2 * (x[:, 1] > 0).long()
    model = QuantumClassifier(n_features=16, n_classes=4, n_layers=2, tau=0.3, shots=200,
                              generator=g)
    config = DPSGDConfig(batch_size=32, epochs=2, lr=0.05, clip=0.5, noise_multiplier=0.5,
                         sampling="poisson")
    history = train_dpsgd(
        model, x_train=x, y_train=y, x_test=x[:32], y_test=y[:32], config=config,
        batch_generator=torch.Generator().manual_seed(1),
        noise_generator=torch.Generator().manual_seed(2), eval_generator_seed=3,
        reference_losses=[1.0, 0.5],
    )
    assert [h["epoch"] for h in history] == [1, 2]
    last = history[-1]
    assert 0.0 <= last["clip_probability"] <= 1.0
    assert last["max_example_norm"] <= model.gradient_bound()
    assert last["mse_total"] == pytest.approx(last["mse_sampling_variance"]
                                              + last["mse_noise_variance"]
                                              + last["mse_bias_squared"])
    assert last["mse_noise_variance"] == pytest.approx(24 * (0.5 * 0.5) ** 2 / 32**2)
    assert last["distance_from_unclipped_loss"] == pytest.approx(abs(last["train_loss"] - 0.5))
    with pytest.raises(InvalidInputError, match="reference_losses has 1 epochs"):
        train_dpsgd(model, x_train=x, y_train=y, x_test=x, y_test=y, config=config,
                    batch_generator=g, noise_generator=g, reference_losses=[1.0])


def test_training_stops_at_the_first_non_finite_loss() -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 5, generator=g)
    y = (x[:, 0] > 0).long()
    model = TanhMLP(n_features=5, n_classes=2, hidden=(4,))
    config = DPSGDConfig(batch_size=16, epochs=5, lr=0.1, clip=1.0, sampling="shuffle")

    def poison_after_epoch_two(record: dict) -> None:
        if record["epoch"] == 2:
            with torch.no_grad():
                next(model.parameters())[0, 0] = float("nan")

    history = train_dpsgd(model, x_train=x, y_train=y, x_test=x, y_test=y, config=config,
                          batch_generator=torch.Generator().manual_seed(1),
                          noise_generator=torch.Generator().manual_seed(2),
                          on_epoch=poison_after_epoch_two)
    assert [h["epoch"] for h in history] == [1, 2, 3]
    assert not any(h.get("diverged") for h in history[:2])
    assert history[2]["diverged"] and history[2]["non_finite"]
    # NaN logits predict no class: argmax alone would have counted them as class 0
    assert history[2]["test_accuracy"] == 0.0 and history[2]["train_accuracy"] == 0.0
    assert history[1]["test_accuracy"] > 0.5


def test_the_epoch_record_scores_exactly_on_train_and_with_seeded_shots_on_test() -> None:
    g = torch.Generator().manual_seed(4)
    model = QuantumClassifier(n_features=16, n_classes=4, n_layers=1, tau=0.5, shots=32,
                              generator=g)
    x, y = torch.randn(40, 16, generator=g), torch.randint(0, 4, (40,), generator=g)
    xt, yt = torch.randn(20, 16, generator=g), torch.randint(0, 4, (20,), generator=g)
    config = DPSGDConfig(batch_size=8, epochs=1, lr=0.05, clip=1.0, optimizer="sgd")
    (record,) = train_dpsgd(model, x_train=x, y_train=y, x_test=xt, y_test=yt, config=config,
                            batch_generator=torch.Generator().manual_seed(1),
                            noise_generator=torch.Generator().manual_seed(2),
                            eval_generator_seed=9, diagnostics=False)
    assert record["train_loss"] == dpsgd.evaluate(model, x, y)["loss"]  # exact read-out
    shots = dpsgd.evaluate(model, xt, yt, generator=torch.Generator().manual_seed(9))
    assert record["test_accuracy"] == shots["accuracy"]
    assert record["test_loss"] == shots["loss"] != dpsgd.evaluate(model, xt, yt)["loss"]


def test_the_checkpoint_is_the_trainers_and_resumes_only_the_same_settings(tmp_path) -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 5, generator=g)
    y = (x[:, 0] > 0).long()
    config = DPSGDConfig(batch_size=16, epochs=3, lr=0.1, clip=1.0, noise_multiplier=0.5,
                         sampling="poisson")

    def run(config: DPSGDConfig, **kwargs) -> list[dict]:
        torch.manual_seed(0)
        model = TanhMLP(n_features=5, n_classes=2, hidden=(4,))
        return train_dpsgd(model, x_train=x, y_train=y, x_test=x, y_test=y, config=config,
                           batch_generator=torch.Generator().manual_seed(1),
                           noise_generator=torch.Generator().manual_seed(2), **kwargs)

    def kill_after_epoch_one(record: dict) -> None:
        if record["epoch"] == 1:
            raise KeyboardInterrupt

    straight = run(config)
    path = tmp_path / "checkpoint.pt"
    with pytest.raises(KeyboardInterrupt):
        run(config, checkpoint=path, on_epoch=kill_after_epoch_one)
    state = load_checkpoint(path)
    assert state["format"] == CHECKPOINT_FORMAT and state["epoch"] == 1
    assert set(state["strategy"]) == {"config", "batch_generator", "noise_generator"}
    with pytest.raises(InvalidInputError, match=r"checkpoint.pt: it was written by a run with "
                                                r"other DP-SGD settings .*lr.*delete it"):
        run(replace(config, lr=0.2), checkpoint=path)
    resumed = run(config, checkpoint=path)
    assert [{k: v for k, v in h.items() if k != "seconds"} for h in resumed] == [
        {k: v for k, v in h.items() if k != "seconds"} for h in straight]
