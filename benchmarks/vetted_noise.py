"""Cost of the vetted samplers (a secret-seed release) over the seeded path, in one run.

dp-linear: a full fit on every ETTh1 training window (H = 24, record unit by default) with a
recorded seed (NumPy's generator) against the same fit with ``seed=None`` (OpenDP's exact
samplers on OpenSSL's generator for the scaler's noisy max, the selection's and the fit's
Gaussians), timed in alternation, best of ``--repeats``.

DP-SGD: one step of :class:`qpriv.training.dpsgd.DPSGDStrategy` on the classical backbone (as
``dpsgd_cost.py``) with torch's seeded noise against the same step with ``secure=True`` (a
secret-seed run: ChaCha20 keyed by the operating system, four normals summed and halved as
Opacus's ``secure_mode`` draws them), timed in alternation and scaled to an epoch of
``N / batch`` steps; and what OpenDP's exact Gaussian would add to that epoch (one entry per
parameter a step, measured on ``--noise-sample`` entries, its cost being linear in the
count), which is why DP-SGD does not use it.

    python benchmarks/vetted_noise.py --repeats 3
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from _timing import (
    best_seconds_interleaved,
    dp_linear_arguments,
    machine_facts,
    print_record,
    run_benchmark,
)

from qpriv.forecasting.config import ModelConfig
from qpriv.forecasting.linear import fit_dp_linear
from qpriv.forecasting.methods import setup_method
from qpriv.forecasting.model import LDPTForecaster
from qpriv.forecasting.recipe import mse
from qpriv.forecasting.windows import load_forecasting_data
from qpriv.privacy.samplers import VettedSampler
from qpriv.training.dpsgd import DPSGDStrategy


def dp_linear_seconds(args: argparse.Namespace) -> tuple[float, float, int]:
    """(seeded fit s, vetted fit s, training windows) on the full training split."""
    data = load_forecasting_data(args.dataset, horizon=args.horizon, data_dir=args.data_dir)
    seeded, vetted = best_seconds_interleaved(
        [lambda: fit_dp_linear(data, eps=args.eps, unit=args.unit, seed=0),
         lambda: fit_dp_linear(data, eps=args.eps, unit=args.unit, seed=None)], args.repeats)
    return seeded, vetted, len(data.train)


def dpsgd_step_seconds(args: argparse.Namespace) -> tuple[float, float, int, int]:
    """(seeded DP-SGD step s, secure step s, parameters, training windows of the full
    split)."""
    data = load_forecasting_data(args.dataset, horizon=args.horizon, data_dir=args.data_dir,
                                 max_train_windows=args.batch_size, max_eval_windows=8)
    n_train = len(load_forecasting_data(args.dataset, horizon=args.horizon,
                                        data_dir=args.data_dir).train)
    base = ModelConfig(horizon=args.horizon, n_channels=data.n_channels)
    x, y = data.train.windows(torch.arange(args.batch_size))
    torch.manual_seed(0)
    model = LDPTForecaster(setup_method("dpsgd", base=base, eps=1.0).config)
    optimizer = torch.optim.RAdam(model.parameters(), lr=1e-4)
    scaler = torch.amp.GradScaler("cuda", enabled=False)
    steps = []
    for secure in (False, True):
        strategy = DPSGDStrategy(clip=1.0, noise_multiplier=1.0, sample_rate=0.01,
                                 steps_per_epoch=1, delta=1e-6, seed=0, secure=secure)
        strategy.prepare(model, optimizer, n_train=n_train, batch_size=args.batch_size)
        steps.append(lambda s=strategy: s.step(model, x, y, optimizer=optimizer,
                                               scaler=scaler, amp=False, loss=mse))
    seeded_s, secure_s = best_seconds_interleaved(steps, args.repeats)
    params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return seeded_s, secure_s, params, n_train


def vetted_seconds_per_entry(count: int) -> float:
    """Seconds per entry of the vetted Gaussian, from one release of ``count`` entries."""
    sampler = VettedSampler()
    values = np.zeros(count)
    sampler.gaussian(values[:10], sigma=1.0)  # warm-up
    started = time.perf_counter()
    sampler.gaussian(values, sigma=1.0)
    return (time.perf_counter() - started) / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    dp_linear_arguments(parser, repeats=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--noise-sample", type=int, default=20_000)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    facts = machine_facts()

    seeded_s, vetted_s, n_windows = dp_linear_seconds(args)
    print(f"dp-linear on {args.dataset} ({n_windows} training windows, H = {args.horizon}, "
          f"{args.unit} unit, eps {args.eps:g}): seeded {seeded_s:.3f} s, vetted "
          f"{vetted_s:.3f} s, ratio {vetted_s / seeded_s:.2f}")

    step_s, secure_step_s, params, n_train = dpsgd_step_seconds(args)
    per_entry = vetted_seconds_per_entry(args.noise_sample)
    steps = n_train / args.batch_size
    epoch_s, secure_s = step_s * steps, secure_step_s * steps
    noise_s = per_entry * params * steps
    print(f"DP-SGD epoch ({n_train} windows, batch {args.batch_size}, {steps:.0f} steps, "
          f"{params:,} parameters): seeded {epoch_s:.1f} s, secure (ChaCha20, secure_mode's "
          f"rule) {secure_s:.1f} s, ratio {secure_s / epoch_s:.2f}")
    print(f"OpenDP's exact Gaussian for that epoch's noise alone: {noise_s:.1f} s "
          f"({per_entry * 1e6:.1f} us per entry), ratio {(epoch_s + noise_s) / epoch_s:.1f}")
    print_record("vetted_noise", {
        "dataset": args.dataset, "horizon": args.horizon, "unit": args.unit, "eps": args.eps,
        "dp_linear_seeded_s": round(seeded_s, 5), "dp_linear_vetted_s": round(vetted_s, 5),
        "dp_linear_ratio": round(vetted_s / seeded_s, 4), "dpsgd_params": params,
        "dpsgd_steps_per_epoch": round(steps, 1), "dpsgd_epoch_seeded_s": round(epoch_s, 3),
        "dpsgd_epoch_secure_s": round(secure_s, 3),
        "dpsgd_secure_ratio": round(secure_s / epoch_s, 4),
        "dpsgd_epoch_exact_noise_s": round(noise_s, 3),
        "exact_us_per_entry": round(per_entry * 1e6, 3),
        "dpsgd_exact_ratio": round((epoch_s + noise_s) / epoch_s, 4),
    }, facts)


if __name__ == "__main__":
    run_benchmark(main)
