"""Seconds per training epoch of the LDPT backbone, classical vs ldpt, in one run (Table 16).

Both methods train on the same windows with the same trainer; the script prints, per method,
the seconds per epoch on those windows and extrapolated to the paper's 8281 training windows,
the training step's achieved GFLOP/s (FLOPs of one step counted with
``torch.utils.flop_counter.FlopCounterMode``: matmuls and attention, forward and backward;
elementwise work, the shot sampling and the noise are not counted but take time)
beside this machine's fp32 matmul throughput measured in the same run, and last the ratio
ldpt / classical.

    python benchmarks/epoch_cost.py --threads 1
"""

from __future__ import annotations

import argparse
import time

import torch
from _timing import run_benchmark
from torch.utils.flop_counter import (
    FlopCounterMode,
    register_flop_formula,
    sdpa_backward_flop_count,
    sdpa_flop_count,
)

from qpriv.forecasting.config import ModelConfig
from qpriv.forecasting.methods import setup_method
from qpriv.forecasting.model import LDPTForecaster
from qpriv.forecasting.windows import load_forecasting_data
from qpriv.training import TrainConfig, Trainer

PAPER_TRAIN_WINDOWS = 8281


# FlopCounterMode knows the CUDA attention kernels but not the CPU flash kernel: count it too.
@register_flop_formula(torch.ops.aten._scaled_dot_product_flash_attention_for_cpu)
def _cpu_attention_flops(query_shape, key_shape, value_shape, *args, **kwargs) -> int:
    return sdpa_flop_count(query_shape, key_shape, value_shape)


@register_flop_formula(torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward)
def _cpu_attention_backward_flops(grad_shape, query_shape, key_shape, value_shape, *args,
                                  **kwargs) -> int:
    return sdpa_backward_flop_count(grad_shape, query_shape, key_shape, value_shape)


def matmul_gflops(*, n: int, repeats: int) -> float:
    """fp32 throughput of a large ``torch.mm`` (n x n by n x n), in GFLOP/s (best of repeats)."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.mm(a, b)
    best = float("inf")
    for _ in range(repeats):
        tic = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - tic)
    return 2 * n**3 / best / 1e9


def step_flops(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> int:
    """FLOPs of one training step (forward and backward) as FlopCounterMode counts them."""
    with FlopCounterMode(display=False) as counter:
        torch.nn.functional.mse_loss(model(x), y).backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops()


def measure(method: str, *, data, base: ModelConfig, eps: float, batch_size: int) -> dict:
    """Train one warm-up epoch and one timed epoch of ``method`` on ``data.train``."""
    torch.manual_seed(0)
    setup = setup_method(method, base=base, eps=eps)
    model = LDPTForecaster(setup.config)
    x, y = data.train.windows(torch.arange(min(batch_size, len(data.train))))
    flops = step_flops(model, x, y)
    config = TrainConfig(epochs=2, batch_size=batch_size, progress=False, device="cpu")
    history = Trainer(model, train=data.train, val=data.val, config=config).fit().history
    seconds = history[-1]["train_seconds"]
    steps = -(-len(data.train) // batch_size)
    full_batches = len(data.train) // batch_size
    flop_total = flops * full_batches + (flops * (len(data.train) % batch_size)) // batch_size
    return {
        "method": method,
        "seconds": seconds,
        "steps": steps,
        "seconds_full_epoch": seconds * PAPER_TRAIN_WINDOWS / len(data.train),
        "gflop_per_step": flops / 1e9,
        "gflops": flop_total / seconds / 1e9,
        "params": model.parameter_counts()["total"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="ETTh1")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--max-train-windows", type=int, default=384)
    parser.add_argument("--horizon", type=int, default=24)
    parser.add_argument("--eps", type=float, default=0.1)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--matmul-size", type=int, default=2048)
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    data = load_forecasting_data(
        args.dataset, horizon=args.horizon, data_dir=args.data_dir,
        max_train_windows=args.max_train_windows, max_eval_windows=8,
    )
    base = ModelConfig(horizon=args.horizon, n_channels=data.n_channels)
    peak = matmul_gflops(n=args.matmul_size, repeats=5)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), "
          f"{len(data.train)} training windows x {data.n_channels} channels, "
          f"batch {args.batch_size}, L = {base.seq_len}, H = {args.horizon}")
    print(f"fp32 matmul throughput ({args.matmul_size}^3 torch.mm): {peak:.1f} GFLOP/s")
    rows = [measure(m, data=data, base=base, eps=args.eps, batch_size=args.batch_size)
            for m in ("classical", "ldpt")]
    print(f"{'method':<10} {'params':>8} {'s/epoch':>8} {'s/epoch@8281':>13} "
          f"{'GFLOP/step':>11} {'GFLOP/s':>8} {'of matmul':>9}")
    for r in rows:
        print(f"{r['method']:<10} {r['params']:>8} {r['seconds']:>8.2f} "
              f"{r['seconds_full_epoch']:>13.1f} {r['gflop_per_step']:>11.2f} "
              f"{r['gflops']:>8.1f} {r['gflops'] / peak:>9.0%}")
    print(f"ratio ldpt / classical: {rows[1]['seconds'] / rows[0]['seconds']:.2f}")


if __name__ == "__main__":
    run_benchmark(main)
