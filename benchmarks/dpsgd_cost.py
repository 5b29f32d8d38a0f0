"""DP-SGD step time over the plain step on the same backbone and batch, in one run.

The plain step is the trainer's default (forward, batch-mean MSE, backward, RAdam); the DP-SGD
step is :class:`qpriv.training.dpsgd.DPSGDStrategy` (per-window gradients by vmap of grad,
clipping at C, Gaussian noise, RAdam). Both use the classical backbone at the paper's size on
real ETTh1 windows, timed in alternation (best of ``--repeats`` rounds each), and the whole
measurement is taken ``--trials`` times (3 by default) to show its spread; the ratio
dpsgd / plain of each trial is printed, and last one JSON object (issue target: <= 1.3 in 3
of 3 trials).

    python benchmarks/dpsgd_cost.py --threads 1
"""

from __future__ import annotations

import argparse

import torch
from _timing import best_seconds_interleaved, machine_facts, print_record, run_benchmark

from qpriv.allocator import reusing_freed_memory
from qpriv.forecasting.config import ModelConfig
from qpriv.forecasting.methods import setup_method
from qpriv.forecasting.model import LDPTForecaster
from qpriv.forecasting.recipe import mse
from qpriv.forecasting.windows import load_forecasting_data
from qpriv.training.dpsgd import DPSGDStrategy
from qpriv.training.trainer import StepStrategy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="ETTh1")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--horizon", type=int, default=24)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=10, help="rounds per trial")
    parser.add_argument("--trials", type=int, default=3)
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    facts = machine_facts()
    data = load_forecasting_data(args.dataset, horizon=args.horizon, data_dir=args.data_dir,
                                 max_train_windows=args.batch_size, max_eval_windows=8)
    base = ModelConfig(horizon=args.horizon, n_channels=data.n_channels)
    x, y = data.train.windows(torch.arange(args.batch_size))
    torch.manual_seed(0)
    model = LDPTForecaster(setup_method("dpsgd", base=base, eps=1.0).config)
    optimizer = torch.optim.RAdam(model.parameters(), lr=1e-4, decoupled_weight_decay=True,
                                  weight_decay=1.2e-3)
    scaler = torch.amp.GradScaler("cuda", enabled=False)
    plain = StepStrategy()
    private = DPSGDStrategy(clip=1.0, noise_multiplier=1.0, sample_rate=0.01,
                            steps_per_epoch=1, delta=1e-6, seed=0)
    private.prepare(model, optimizer, n_train=len(x) * 100, batch_size=args.batch_size)

    def step(strategy: StepStrategy) -> None:
        strategy.step(model, x, y, optimizer=optimizer, scaler=scaler, amp=False, loss=mse)

    with reusing_freed_memory():  # as the trainer runs every step (qpriv.allocator)
        trials = [best_seconds_interleaved([lambda: step(plain), lambda: step(private)],
                                           args.repeats) for _ in range(args.trials)]
    params = sum(p.numel() for p in model.parameters())
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), batch "
          f"{args.batch_size} windows x {data.n_channels} channels, L = {base.seq_len}, "
          f"H = {args.horizon}, {params:,} parameters, load average "
          f"{facts['load_average_1min']}")
    for index, (plain_s, dp_s) in enumerate(trials, start=1):
        print(f"trial {index}: plain step {plain_s * 1e3:8.1f} ms, DP-SGD step "
              f"{dp_s * 1e3:8.1f} ms (per-window vmap gradients, clip, noise), "
              f"ratio {dp_s / plain_s:.2f}")
    ratios = [dp_s / plain_s for plain_s, dp_s in trials]
    print(f"ratio dpsgd / plain: {', '.join(f'{r:.2f}' for r in ratios)} (target <= 1.3)")
    print_record("dpsgd_cost", {
        "batch_size": args.batch_size, "params": params,
        "plain_seconds": [round(p, 5) for p, _ in trials],
        "dpsgd_seconds": [round(d, 5) for _, d in trials],
        "ratios": [round(r, 4) for r in ratios], "ratio_max": round(max(ratios), 4),
    }, facts)


if __name__ == "__main__":
    run_benchmark(main)
