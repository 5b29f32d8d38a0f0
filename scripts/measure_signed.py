"""How much of LDPT's loss is the encoding and how much the noise? (docs/backbone.md,
"ldpt-signed".)

Trains the one backbone on the same budget and seed as

- ``classical`` (no quantum path, no noise): the reference;
- ``ldpt-clean`` and ``ldpt-signed-clean`` (p = 0, exact probabilities, no injection): what
  each encoding allows without noise; their gap is what eq. 2's lost sign and norm cost;
- ``ldpt`` and ``ldpt-signed`` at the same per-pass eps_s (each calibrated at its own d and
  D by Algorithm 1): what the noise costs on top of each encoding.

Each run is one seed; test MSE on the z-scored test windows, one pass. A row per run is
printed, then one JSON line. First, in seconds and without training, the ratio of each
encoding's signal (the variance of the exact outcome probabilities over real tokens, summed
over outcomes) to the shot noise of N_s shots (sum_k q_k (1 - q_k) / N_s, averaged over
tokens) at every eps: how much a token's features say about it through the noise.

Usage::

    python scripts/measure_signed.py --eps 0.1 --max-train-windows 1024 --epochs 2  # ~13 min
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from qpriv.forecasting.config import ModelConfig
from qpriv.forecasting.methods import setup_method
from qpriv.forecasting.model import LDPTForecaster
from qpriv.forecasting.run import run_forecast
from qpriv.forecasting.windows import load_forecasting_data
from qpriv.quantum.features import outcome_probabilities
from qpriv.quantum.states import amplitude_encode

METHODS = ("classical", "ldpt-clean", "ldpt-signed-clean", "ldpt", "ldpt-signed")
NEEDS_EPS = ("ldpt", "ldpt-signed")


def signal_to_shot_noise(name: str, *, eps: float, tokens_x: torch.Tensor,
                         seq_len: int) -> tuple[float, float]:
    """(p, signal variance / shot-noise variance) of method ``name`` at ``eps`` on the real
    windows ``tokens_x`` (B, L, C), over 4000 of their tokens."""
    config = setup_method(name, base=ModelConfig(seq_len=seq_len), eps=eps).config
    model = LDPTForecaster(config)
    vectors = model.encoded_tokens(tokens_x.double()).reshape(-1, config.hilbert_dim)
    pick = torch.randperm(len(vectors), generator=torch.Generator().manual_seed(0))[:4000]
    psi, _ = amplitude_encode(vectors[pick])
    q = outcome_probabilities(psi, p=config.p)
    noise = float((q * (1 - q)).sum(dim=1).mean()) / config.n_shots
    return config.p, float(q.var(dim=0).sum()) / noise


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="ETTh1")
    parser.add_argument("--horizon", type=int, default=24)
    parser.add_argument("--eps", type=float, nargs="+", default=[0.1])
    parser.add_argument("--methods", nargs="*", default=list(METHODS),
                        help="methods to train (none: only the signal-to-noise table)")
    parser.add_argument("--seq-len", type=int, default=336)
    parser.add_argument("--max-train-windows", type=int, default=1024)
    parser.add_argument("--max-eval-windows", type=int, default=512)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=2024)
    args = parser.parse_args()
    torch.set_num_threads(1)
    data = load_forecasting_data(args.dataset, horizon=args.horizon, seq_len=args.seq_len)
    windows, _ = data.train.windows(torch.arange(0, len(data.train), 31))
    for name in NEEDS_EPS:
        for eps in args.eps:
            p, ratio = signal_to_shot_noise(name, eps=eps, tokens_x=windows,
                                            seq_len=args.seq_len)
            print(f"{name:<18} eps {eps:<5g} p {p:.4f}  signal / shot-noise variance per token "
                  f"{ratio:.3g}", flush=True)
    rows = []
    for name in args.methods:
        for eps in (args.eps if name in NEEDS_EPS else [None]):
            started = time.perf_counter()
            result = run_forecast(
                dataset=args.dataset, horizon=args.horizon, method=name, eps=eps,
                seq_len=args.seq_len, epochs=args.epochs, seed=args.seed,
                max_train_windows=args.max_train_windows,
                max_eval_windows=args.max_eval_windows, progress=False, threads=1,
                rigorous=False)
            row = {"method": name, "eps": eps, "p": result.p, "val_loss": result.val_loss,
                   "test_mse": result.mse, "test_mae": result.mae,
                   "seconds": time.perf_counter() - started}
            rows.append(row)
            print(f"{name:<18} eps {eps!s:<5} p {row['p'] or 0:.4f}  test MSE "
                  f"{row['test_mse']:.4f}  MAE {row['test_mae']:.4f}  ({row['seconds']:.0f} s)",
                  flush=True)
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
