"""Peak resident memory (RSS) of one full-budget training epoch: ldpt and DP-SGD.

Each method trains in a child process of its own, so that each peak is its own, on the full
ETTh1 training split (8281 windows) at the paper's model size and batch 64, as ``qpriv train``
runs it: ``ldpt`` at eps 0.1 (each batch's quantum features and injection noise drawn one batch
ahead in a worker thread) and ``dpsgd`` (per-window gradients by vmap, Poisson batches of
expected size 64, the noise multiplier of eps 1 over 20 epochs), one epoch followed by the
validation pass over the 2857 validation windows (batches of 256) that the trainer runs after
every epoch. The child reports the peak RSS (``resource.getrusage``'s ``ru_maxrss``) after each
training step and at the end.

``--batches N`` trains only the first N batches of the epoch (then the same validation pass).
A plain step allocates the same buffers every time, so ldpt's training peak is reached within
the first few steps and then stays level (the per-step peaks are printed to show it). A DP-SGD
step's per-window gradients grow with its Poisson batch, so its peak follows the largest batch
drawn so far (printed beside it): a shortened epoch extrapolates by that slope to the largest
batch a full epoch draws (about 64 + 3 sqrt(64)). The output says which was run. Target
(issue): <= 4 GB for each.

DP-SGD computes its per-window gradients in vmap chunks of ``PER_EXAMPLE_CHUNK`` windows; the
same step with every window of a batch in one call (``dpsgd-one-call``) is measured in the same
run as its reference, and the ratio printed: at batch 64 they are one call, at ``dpsgd-tuned``'s
512 (``--batch-size 512``) the chunks keep the peak from growing with the batch.

    python benchmarks/peak_memory.py                 # the three full epochs (minutes)
    python benchmarks/peak_memory.py --batches 10
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys

import torch
from _timing import machine_facts, print_record, run_benchmark

from qpriv.forecasting.config import ModelConfig
from qpriv.forecasting.methods import setup_method
from qpriv.forecasting.model import LDPTForecaster
from qpriv.forecasting.recipe import ForecasterRecipe, ForecasterTrainConfig
from qpriv.forecasting.windows import load_forecasting_data
from qpriv.privacy.dpsgd_accounting import dpsgd_schedule, noise_multiplier_for
from qpriv.training import StepStrategy, Trainer
from qpriv.training.dpsgd import PER_EXAMPLE_CHUNK, DPSGDStrategy

ONE_CALL = "dpsgd-one-call"
"""``dpsgd`` with each batch's per-window gradients in one vmap call (``chunk_size`` None)."""
METHODS = {"ldpt": 0.1, "dpsgd": 1.0, ONE_CALL: 1.0}
"""The methods measured and their eps."""
FULL_RUN_EPOCHS = 20


def peak_rss_bytes() -> int:
    """The process's peak resident set size so far, in bytes (Linux reports KiB, macOS
    bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


class FirstBatches(StepStrategy):
    """``inner``'s steps on the first ``limit`` batches of each epoch (None: all of them),
    recording the peak RSS after every step."""

    name = "first-batches"

    def __init__(self, inner: StepStrategy, limit: int | None) -> None:
        self.inner = inner
        self.limit = limit
        self.draws_ahead = inner.draws_ahead
        self.peaks: list[int] = []
        self.sizes: list[int] = []

    def prepare(self, model, optimizer, *, n_train: int, batch_size: int):
        return self.inner.prepare(model, optimizer, n_train=n_train, batch_size=batch_size)

    def batches(self, n_train: int, *, batch_size: int, generator: torch.Generator):
        batches = self.inner.batches(n_train, batch_size=batch_size, generator=generator)
        return batches if self.limit is None else batches[: self.limit]

    def step(self, model, x, y, **kwargs):
        loss = self.inner.step(model, x, y, **kwargs)
        self.peaks.append(peak_rss_bytes())
        self.sizes.append(x.shape[0])
        return loss


def child(args: argparse.Namespace) -> None:
    """Train one epoch of ``args.child`` and print its peaks as one JSON line."""
    torch.set_num_threads(args.threads)
    data = load_forecasting_data(args.dataset, horizon=args.horizon, data_dir=args.data_dir)
    setup = setup_method("dpsgd" if args.child == ONE_CALL else args.child,
                         base=ModelConfig(horizon=args.horizon, n_channels=data.n_channels),
                         eps=METHODS[args.child])
    torch.manual_seed(0)
    model = LDPTForecaster(setup.config)
    config = ForecasterTrainConfig(epochs=1, batch_size=args.batch_size, progress=False,
                                   device="cpu")
    inner = StepStrategy()
    if setup.dpsgd is not None:
        spec = setup.dpsgd
        q, steps = dpsgd_schedule(n_train=len(data.train), batch_size=args.batch_size,
                                  epochs=FULL_RUN_EPOCHS)
        inner = DPSGDStrategy(
            clip=spec["clip"], sample_rate=q, steps_per_epoch=steps // FULL_RUN_EPOCHS,
            noise_multiplier=noise_multiplier_for(eps=spec["eps"], delta=spec["delta"],
                                                  sample_rate=q, steps=steps),
            delta=spec["delta"], seed=0,
            chunk_size=None if args.child == ONE_CALL else PER_EXAMPLE_CHUNK)
    strategy = FirstBatches(inner, args.batches)
    before = peak_rss_bytes()
    history = Trainer(model, train=data.train, val=data.val, config=config,
                      recipe=ForecasterRecipe(), strategy=strategy).fit().history
    print(json.dumps({"method": args.child, "train_windows": len(data.train),
                      "val_windows": len(data.val), "batches": len(strategy.peaks),
                      "before_training_bytes": before, "step_peaks_bytes": strategy.peaks,
                      "batch_sizes": strategy.sizes,
                      "peak_bytes": peak_rss_bytes(),
                      "train_seconds": history[-1]["train_seconds"],
                      "val_seconds": history[-1]["val_seconds"]}))


def measure(method: str, args: argparse.Namespace) -> dict:
    command = [sys.executable, __file__, "--child", method, "--dataset", args.dataset,
               "--horizon", str(args.horizon), "--batch-size", str(args.batch_size),
               "--threads", str(args.threads)]
    if args.data_dir:
        command += ["--data-dir", args.data_dir]
    if args.batches is not None:
        command += ["--batches", str(args.batches)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        raise SystemExit(done.returncode)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="ETTh1")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--horizon", type=int, default=24)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batches", type=int, default=None,
                        help="train only the first N batches of the epoch (default: all)")
    parser.add_argument("--child", choices=sorted(METHODS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return

    torch.set_num_threads(args.threads)
    facts = machine_facts(matmul=False)
    gib = 1024**3
    results = {}
    for method in METHODS:
        r = measure(method, args)
        results[method] = r
        peaks = r["step_peaks_bytes"]
        shown = sorted({0, 1, 4, 9, len(peaks) // 2, len(peaks) - 1} & set(range(len(peaks))))
        epoch = ("the full epoch" if args.batches is None
                 else f"the first {r['batches']} batches of the epoch")
        print(f"{method}: {epoch} of {r['train_windows']} windows, then validation on "
              f"{r['val_windows']}; train {r['train_seconds']:.0f} s, validation "
              f"{r['val_seconds']:.0f} s")
        print("  peak RSS after step " + ", ".join(f"{i + 1}: {peaks[i] / gib:.2f}"
                                                   for i in shown) + " GiB")
        print(f"  largest batch {max(r['batch_sizes'])} windows")
        print(f"  peak RSS of the run: {r['peak_bytes'] / gib:.2f} GiB (target <= 4 GB = "
              f"{4e9 / gib:.2f} GiB)")
    ratio = results["dpsgd"]["peak_bytes"] / results[ONE_CALL]["peak_bytes"]
    print(f"dpsgd in chunks of {PER_EXAMPLE_CHUNK} windows against one call per batch: "
          f"peak {ratio:.2f}x (batch {args.batch_size})")
    print_record("peak_memory", {
        "batch_size": args.batch_size, "chunk": PER_EXAMPLE_CHUNK,
        "chunked_over_one_call_peak": ratio,
        "full_epoch": args.batches is None, "batches": args.batches,
        **{f"{m}_peak_bytes": r["peak_bytes"] for m, r in results.items()},
        **{f"{m}_step_peaks_bytes": r["step_peaks_bytes"] for m, r in results.items()},
        "target_bytes": int(4e9),
    }, facts)


if __name__ == "__main__":
    run_benchmark(main)
