"""The one trainer: resume equality, checkpoints, seeding, evaluation."""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import threading

import pytest
import torch

from qpriv.errors import InvalidInputError
from qpriv.forecasting.config import ModelConfig
from qpriv.forecasting.methods import setup_method
from qpriv.forecasting.model import LDPTForecaster
from qpriv.forecasting.recipe import ForecasterRecipe, ForecasterTrainConfig
from qpriv.forecasting.windows import WindowDataset
from qpriv.quantum.shots import _draws_binomials
from qpriv.runs.files import (
    atomic_torch_save,
    atomic_write_json,
    load_checkpoint,
    read_json_object,
    remove_stale_temporaries,
)
from qpriv.training import StepStrategy, Trainer, evaluate
from qpriv.training.ahead import draw_ahead
from qpriv.training.seeding import global_rng_state, seed_everything, set_global_rng_state
from qpriv.training.trainer import CHECKPOINT_FORMAT

TINY = ModelConfig(seq_len=24, horizon=4, n_channels=2, dim=4, stride=4, d_model=8,
                   n_heads=2, d_ff=16, n_shots=32)


def series(rows: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    t = torch.arange(rows, dtype=torch.float32).unsqueeze(1)
    return torch.sin(t / 5 + torch.arange(2)) + 0.1 * torch.randn(rows, 2, generator=g)


def windows(rows: int, seed: int) -> WindowDataset:
    return WindowDataset(series(rows, seed), seq_len=TINY.seq_len, horizon=TINY.horizon)


TRAIN, VAL, TEST = windows(100, 1), windows(50, 2), windows(50, 3)


def make_trainer(tmp_path, *, epochs=3, method="ldpt", strategy=None,
                 draw_ahead=True, n_shots=TINY.n_shots) -> Trainer:
    torch.manual_seed(0)
    base = dataclasses.replace(TINY, n_shots=n_shots)
    model = LDPTForecaster(setup_method(method, base=base, eps=0.5).config)
    config = ForecasterTrainConfig(epochs=epochs, batch_size=16, seed=11, progress=False,
                                   device="cpu", draw_ahead=draw_ahead)
    return Trainer(model, train=TRAIN, val=VAL, config=config, checkpoint_dir=tmp_path,
                   recipe=ForecasterRecipe(), strategy=strategy)


def kill_in_third_epoch(trainer: Trainer, monkeypatch) -> None:
    """Run ``trainer.fit()`` until a KeyboardInterrupt at the start of epoch 3 (a killed run:
    two epochs checkpointed)."""
    real_epoch = Trainer._train_epoch

    def crash_in_third_epoch(self, epoch):
        if epoch == 3:
            raise KeyboardInterrupt
        return real_epoch(self, epoch)

    monkeypatch.setattr(Trainer, "_train_epoch", crash_in_third_epoch)
    with pytest.raises(KeyboardInterrupt):
        trainer.fit()
    monkeypatch.setattr(Trainer, "_train_epoch", real_epoch)


def without_timing(history):
    return [{k: v for k, v in h.items() if not k.endswith("seconds")} for h in history]


@pytest.mark.parametrize("n_shots", [TINY.n_shots, 1024], ids=["shots", "binomials"])
def test_resume_continues_to_the_same_result(tmp_path, monkeypatch, n_shots):
    """Also with the counts drawn by conditional binomials (D = 4: 16 outcomes, 1024 shots),
    which advance the same shot generator that the checkpoint holds."""
    probs = torch.full((1, TINY.dim**2), TINY.dim**-2.0)
    assert _draws_binomials(probs, n_shots) == (n_shots == 1024)
    straight = make_trainer(tmp_path / "straight", n_shots=n_shots)
    result = straight.fit()
    expected_test = straight.evaluate(TEST)

    kill_in_third_epoch(make_trainer(tmp_path / "resumed", n_shots=n_shots), monkeypatch)
    assert load_checkpoint(tmp_path / "resumed" / "checkpoint.pt")["epoch"] == 2

    torch.manual_seed(123)  # a new process: other global state, other initial weights
    resumed = make_trainer(tmp_path / "resumed", n_shots=n_shots)
    with torch.no_grad():
        for p in resumed.model.parameters():
            p.add_(1.0)
    again = resumed.fit(resume=True)

    assert without_timing(again.history) == without_timing(result.history)
    assert (again.best_epoch, again.best_val_loss) == (result.best_epoch, result.best_val_loss)
    for (name, a), b in zip(straight.model.state_dict().items(),
                            resumed.model.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
    for a, b in zip(straight.optimizer.state_dict()["state"].values(),
                    resumed.optimizer.state_dict()["state"].values(), strict=True):
        assert all(torch.equal(a[k], b[k]) for k in a)
    assert resumed.evaluate(TEST) == expected_test


def test_a_damaged_checkpoint_is_named_not_a_traceback(tmp_path, monkeypatch):
    kill_in_third_epoch(make_trainer(tmp_path), monkeypatch)
    checkpoint = tmp_path / "checkpoint.pt"
    checkpoint.write_bytes(checkpoint.read_bytes()[:5000])  # truncated by something outside
    with pytest.raises(InvalidInputError, match=r"cannot read .*checkpoint.pt: the file is "
                                                r"damaged .*delete it to train the run"):
        make_trainer(tmp_path).fit(resume=True)
    checkpoint.write_bytes(b"")
    with pytest.raises(InvalidInputError, match="damaged"):
        make_trainer(tmp_path).fit(resume=True)


def test_a_format_1_checkpoint_resumes_and_an_unknown_format_is_named(tmp_path, monkeypatch):
    result = make_trainer(tmp_path / "straight").fit()
    kill_in_third_epoch(make_trainer(tmp_path), monkeypatch)
    path = tmp_path / "checkpoint.pt"
    state = load_checkpoint(path)
    atomic_torch_save(path, {**state, "format": 1})  # qpriv 0.1.0's: the same keys
    again = make_trainer(tmp_path).fit(resume=True)
    assert without_timing(again.history) == without_timing(result.history)
    assert load_checkpoint(path)["format"] == CHECKPOINT_FORMAT  # only the new one is written
    atomic_torch_save(path, {**state, "format": 7})
    with pytest.raises(InvalidInputError, match=r"checkpoint.pt has checkpoint format 7, this "
                                                r"version reads 1 and 2; delete it"):
        make_trainer(tmp_path).fit(resume=True)


def test_resume_puts_best_pt_back_to_the_checkpoints_best(tmp_path, monkeypatch):
    # best.pt is written before checkpoint.pt: a kill between the two leaves best.pt ahead
    kill_in_third_epoch(make_trainer(tmp_path), monkeypatch)
    saved = load_checkpoint(tmp_path / "checkpoint.pt")["best"]
    atomic_torch_save(tmp_path / "best.pt", {"epoch": 3, "val_loss": 0.0, "model": {}})
    stale = tmp_path / ".checkpoint.pt.0123456789abcdef.tmp"  # a killed write's leftover
    stale.write_bytes(b"partial")
    os.utime(stale, (0, 0))
    trainer = make_trainer(tmp_path, epochs=2)  # nothing left to train: only the restore
    trainer.fit(resume=True)
    best = load_checkpoint(tmp_path / "best.pt")
    assert best["epoch"] == saved["epoch"]
    assert all(torch.equal(best["model"][k], v) for k, v in saved["model"].items())
    assert not stale.exists()


def test_checkpoint_helpers_name_the_damage_and_keep_live_temporaries(tmp_path):
    (tmp_path / "r.json").write_text('{"mse": 0.')
    with pytest.raises(InvalidInputError, match=r"cannot read .*r.json: the file is damaged "
                                                r"\(JSONDecodeError: .*\); do this"):
        read_json_object(tmp_path / "r.json", fix="do this")
    (tmp_path / "l.json").write_text("[1]")
    with pytest.raises(InvalidInputError, match="holds list, not a JSON object; do this"):
        read_json_object(tmp_path / "l.json", fix="do this")
    old, live = tmp_path / ".a.pt.00.tmp", tmp_path / ".b.pt.11.tmp"
    old.write_bytes(b"x")
    live.write_bytes(b"y")
    os.utime(old, (0, 0))
    assert remove_stale_temporaries(tmp_path) == [old]
    assert live.exists() and (tmp_path / "r.json").exists()


def test_best_validation_weights_are_kept(tmp_path):
    trainer = make_trainer(tmp_path, epochs=3)
    result = trainer.fit()
    losses = [h["val_loss"] for h in result.history]
    assert result.best_epoch == 1 + losses.index(min(losses))
    best = load_checkpoint(tmp_path / "best.pt")
    assert best["epoch"] == result.best_epoch
    for name, value in trainer.model.state_dict().items():
        assert torch.equal(value, best["model"][name]), name
    assert trainer.evaluate(VAL)["mse"] == pytest.approx(result.best_val_loss, rel=1e-6)


def test_optimizer_groups_follow_the_protocol(tmp_path):
    trainer = make_trainer(tmp_path)
    groups = {g["name"]: g for g in trainer.optimizer.param_groups}
    assert isinstance(trainer.optimizer, torch.optim.RAdam)
    assert groups["classical"]["lr"] == 3e-4 and groups["quantum_attention"]["lr"] == 1.5e-4
    assert all(g["decoupled_weight_decay"] and g["weight_decay"] == 1.2e-3
               for g in groups.values())
    assert trainer.scheduler.patience == 5 and trainer.scheduler.factor == 0.5


@pytest.mark.parametrize("method", ["ldpt", "dp-input", "ldpt-clean"])
def test_drawing_the_noise_ahead_gives_the_same_run(tmp_path, monkeypatch, method):
    """The features and injections drawn one batch ahead in the worker thread (in training
    and validation) are the ones drawn inline: the same losses, weights and noise state."""
    drawn_in = []
    real_draw = LDPTForecaster.draw_noise

    def spy(self, x):
        drawn_in.append(threading.current_thread().name)
        return real_draw(self, x)

    monkeypatch.setattr(LDPTForecaster, "draw_noise", spy)
    runs = {}
    for ahead in (True, False):
        drawn_in.clear()
        trainer = make_trainer(tmp_path / str(ahead), method=method, draw_ahead=ahead)
        history = without_timing(trainer.fit().history)
        training_draws = [name for name in drawn_in if name.startswith("qpriv-draw-ahead")]
        per_epoch = -(-len(TRAIN) // 16) + -(-len(VAL) // 256)  # training and validation
        assert len(training_draws) == (3 * per_epoch if ahead else 0)
        runs[ahead] = (history, trainer.model.state_dict(), trainer.model.noise_state())
    (history, weights, noise), (inline_history, inline_weights, inline_noise) = runs.values()
    assert history == inline_history
    for name, value in weights.items():
        assert torch.equal(value, inline_weights[name]), name
    for name, state in noise.items():
        assert torch.equal(state, inline_noise[name]), name


def test_evaluation_with_the_noise_drawn_ahead_is_the_inline_evaluation():
    torch.manual_seed(0)
    model = LDPTForecaster(setup_method("ldpt", base=TINY, eps=0.5).config)
    metrics = [evaluate(model, VAL, seed=5, passes=2, batch_size=8, draw_ahead=ahead)
               for ahead in (True, False)]
    assert metrics[0] == metrics[1] and metrics[0]["mse_std"] > 0


def test_draw_ahead_yields_every_batch_in_order_and_passes_errors_on():
    batches = [(torch.full((2,), float(i)), torch.zeros(2)) for i in range(5)]
    drawn = list(draw_ahead(lambda x: x * 10, batches))
    assert [int(x[0]) for x, _, _ in drawn] == list(range(5))
    assert all(torch.equal(noise, x * 10) for x, _, noise in drawn)
    assert list(draw_ahead(lambda x: x, [])) == []

    def fails(x):
        raise InvalidInputError(f"bad batch {int(x[0])}")

    with pytest.raises(InvalidInputError, match="bad batch 0"):
        list(draw_ahead(fails, batches))


def test_a_strategy_takes_every_step(tmp_path):
    class Counting(StepStrategy):
        name = "counting"
        steps = 0

        def step(self, model, x, y, **kwargs):
            self.steps += 1
            return super().step(model, x, y, **kwargs)

        def state_dict(self):
            return {"steps": self.steps}

    strategy = Counting()
    make_trainer(tmp_path, epochs=2, strategy=strategy).fit()
    assert strategy.steps == 2 * -(-len(TRAIN) // 16)
    assert load_checkpoint(tmp_path / "checkpoint.pt")["strategy"] == {"steps": strategy.steps}


def test_evaluation_is_seeded_and_leaves_the_training_noise_alone():
    torch.manual_seed(0)
    model = LDPTForecaster(setup_method("ldpt", base=TINY, eps=0.5).config)
    state = model.noise_state()
    first = evaluate(model, TEST, seed=5, passes=3)
    assert evaluate(model, TEST, seed=5, passes=3) == first
    assert evaluate(model, TEST, seed=6)["mse"] != first["mse"]
    assert first["mse_std"] > 0 and set(first) >= {"mse", "mae", "mse_mean", "mae_mean"}
    # the passes are the single passes at seeds 5, 6, 7: mean and sample std over them
    singles = [evaluate(model, TEST, seed=5 + m) for m in range(3)]
    assert first["mse"] == singles[0]["mse"] and first["passes"] == 3
    assert first["mse_mean"] == pytest.approx(statistics.fmean(s["mse"] for s in singles))
    assert first["mse_std"] == pytest.approx(statistics.stdev(s["mse"] for s in singles))
    assert first["mae_mean"] == pytest.approx(statistics.fmean(s["mae"] for s in singles))
    assert first["mae_std"] == pytest.approx(statistics.stdev(s["mae"] for s in singles))
    assert all(torch.equal(state[k], model.noise_state()[k]) for k in state)


def test_global_rng_state_round_trip():
    import random

    import numpy as np

    seed_everything(3)
    state = global_rng_state()
    draws = (random.random(), np.random.rand(), torch.rand(1))
    set_global_rng_state(state)
    assert draws == (random.random(), np.random.rand(), torch.rand(1))


def test_atomic_json_survives_a_crash_mid_write(tmp_path, monkeypatch):
    path = tmp_path / "result.json"
    atomic_write_json(path, {"mse": 0.3})

    def crash(fd):
        raise OSError("disk gone")

    monkeypatch.setattr(os, "fsync", crash)
    with pytest.raises(OSError, match="disk gone"):
        atomic_write_json(path, {"mse": 0.4})
    assert json.loads(path.read_text()) == {"mse": 0.3}
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]


def test_atomic_checkpoint_survives_a_crash_mid_write(tmp_path, monkeypatch):
    path = tmp_path / "checkpoint.pt"
    atomic_torch_save(path, {"epoch": 1})
    real_save = torch.save

    def half_written(obj, handle):
        handle.write(b"PK\x03\x04 partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", half_written)
    with pytest.raises(KeyboardInterrupt):
        atomic_torch_save(path, {"epoch": 2})
    monkeypatch.setattr(torch, "save", real_save)
    assert load_checkpoint(path) == {"epoch": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint.pt"]


def test_json_that_cannot_be_encoded_writes_nothing(tmp_path):
    with pytest.raises(TypeError):
        atomic_write_json(tmp_path / "run" / "result.json", {"bad": object()})
    assert not (tmp_path / "run").exists()


def test_a_killed_dpsgd_run_resumes_to_the_same_result(tmp_path, monkeypatch):
    """DP-SGD's Poisson batches, Gaussian noise and step count survive a kill and resume."""
    from qpriv.training.dpsgd import DPSGDStrategy

    def strategy() -> DPSGDStrategy:
        return DPSGDStrategy(clip=1.0, noise_multiplier=0.8, sample_rate=0.25,
                             steps_per_epoch=4, delta=1e-5, seed=7)

    straight = make_trainer(tmp_path / "straight", method="dpsgd", strategy=strategy())
    result = straight.fit()

    kill_in_third_epoch(make_trainer(tmp_path / "resumed", method="dpsgd", strategy=strategy()),
                        monkeypatch)

    resumed_strategy = strategy()
    resumed = make_trainer(tmp_path / "resumed", method="dpsgd", strategy=resumed_strategy)
    again = resumed.fit(resume=True)
    assert without_timing(again.history) == without_timing(result.history)
    assert resumed_strategy.steps == straight.strategy.steps == 12
    assert resumed_strategy.report()["eps"]["value"] == straight.strategy.report()["eps"]["value"]
    for (name, a), b in zip(straight.model.state_dict().items(),
                            resumed.model.state_dict().values(), strict=True):
        assert torch.equal(a, b), name


class PoisonAtStep(StepStrategy):
    """Plain steps until step ``at`` (1-based), which fills every weight with NaN: a run that
    diverges in the epoch holding that step."""

    name = "poison"

    def __init__(self, at: int):
        self.at, self.steps = at, 0

    def step(self, model, x, y, **kwargs):
        self.steps += 1
        loss = super().step(model, x, y, **kwargs)
        if self.steps == self.at:
            with torch.no_grad():
                for p in model.parameters():
                    p.fill_(float("nan"))
        return loss


BATCHES_PER_EPOCH = -(-len(TRAIN) // 16)


def test_a_diverged_run_stops_and_keeps_the_best_finite_epoch(tmp_path):
    trainer = make_trainer(tmp_path, epochs=5, strategy=PoisonAtStep(2 * BATCHES_PER_EPOCH + 1))
    result = trainer.fit()
    assert [h["epoch"] for h in result.history] == [1, 2, 3]  # epochs 4 and 5 never ran
    assert result.diverged_epoch == 3 and result.history[2]["diverged"]
    assert not any(h.get("diverged") for h in result.history[:2])
    losses = [h["val_loss"] for h in result.history[:2]]
    assert result.best_epoch == 1 + losses.index(min(losses))
    assert all(torch.isfinite(v).all() for v in trainer.model.state_dict().values()
               if v.is_floating_point())
    assert trainer.evaluate(VAL)["mse"] == pytest.approx(result.best_val_loss, rel=1e-6)

    # resuming a diverged run trains nothing more and says the same
    again = make_trainer(tmp_path, epochs=5).fit(resume=True)
    assert len(again.history) == 3 and again.diverged_epoch == 3
    assert again.best_epoch == result.best_epoch


def test_a_run_that_diverges_in_its_first_epoch_has_no_best_epoch(tmp_path):
    result = make_trainer(tmp_path, epochs=3, strategy=PoisonAtStep(1)).fit()
    assert result.diverged_epoch == 1 and result.best_epoch == 0
    assert result.best_val_loss == float("inf") and len(result.history) == 1
    assert not (tmp_path / "best.pt").exists()


def test_a_healthy_run_reports_no_divergence(tmp_path):
    result = make_trainer(tmp_path, epochs=2).fit()
    assert result.diverged_epoch is None
    assert not any("diverged" in h for h in result.history)


def test_the_loop_is_generic_every_run_names_its_recipe_and_loss(tmp_path):
    """The trainer writes no loss, metric or model shape: a recipe names itself, the step
    back-propagates the recipe's loss, and the forecasters' recipe reads its own config."""
    from qpriv.training.trainer import Recipe, TrainConfig

    with pytest.raises(TypeError, match="must name itself"):
        type("Nameless", (Recipe,), {})
    with pytest.raises(TypeError, match="recipe"):
        Trainer(torch.nn.Linear(2, 2), train=TRAIN, val=VAL, config=TrainConfig())

    class L1(ForecasterRecipe):
        name = "l1"

        def loss(self, prediction, target):
            return (prediction.float() - target).abs().mean()

    def trained(recipe):
        trainer = make_trainer(tmp_path / recipe.name, epochs=1, method="classical")
        trainer.recipe = recipe
        trainer.fit()
        return torch.cat([p.detach().reshape(-1) for p in trainer.model.parameters()])

    # the same model, batches and seed: only the loss differs, and so do the weights
    assert not torch.equal(trained(ForecasterRecipe()), trained(L1()))
    with pytest.raises(TypeError, match="ForecasterTrainConfig"):
        ForecasterRecipe().optimizer(torch.nn.Linear(2, 2), TrainConfig())
