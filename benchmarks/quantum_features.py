"""Throughput of the LDPT quantum feature path: fast closed form vs slow reference vs the RNG floor.

Times, in one run and on the same random windows:

* fast   ``qpriv.quantum.quantum_features`` (closed-form probabilities + guide-table sampler);
* slow   ``qpriv.quantum.quantum_features_reference`` (density matrix -> Lindblad propagator ->
         tr(M_k rho) -> torch.multinomial), the twin the tests check the fast path against;
* floor  ``torch.rand``: drawing one uniform number per shot (states x shots) with torch alone,
         in blocks of 256 states.

It prints states per second for each, the seconds the features of one ETTh1 training epoch
(8281 windows x 7 channels x 81 tokens) would take, and, last, the speed ratio fast / slow.
Targets: fast >= 20x slow, and fast time <= 4x floor time.

    python benchmarks/quantum_features.py                 # D = 16, 1024 shots, p = 0.9505
    python benchmarks/quantum_features.py --p 0.03 --threads 2
"""

from __future__ import annotations

import argparse

import torch
from _timing import best_seconds, run_benchmark

from qpriv.quantum import quantum_features, quantum_features_reference

ETTH1_EPOCH_STATES = 8281 * 7 * 81




def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--states", type=int, default=50_000, help="windows for fast and floor")
    parser.add_argument("--slow-states", type=int, default=2_000, help="windows for the slow path")
    parser.add_argument("--dim", type=int, default=16, help="window length D (2, 4, 8, 16)")
    parser.add_argument("--shots", type=int, default=1024)
    parser.add_argument("--p", type=float, default=0.9505, help="depolarizing probability")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=2024)
    args = parser.parse_args(argv)

    torch.set_num_threads(args.threads)
    generator = torch.Generator().manual_seed(args.seed)
    windows = torch.randn(args.states, args.dim, generator=generator)
    slow_windows = windows[: args.slow_states]

    fast = best_seconds(
        lambda: quantum_features(windows, p=args.p, n_shots=args.shots, generator=generator),
        args.repeats,
    )
    slow = best_seconds(
        lambda: quantum_features_reference(
            slow_windows, p=args.p, n_shots=args.shots, generator=generator
        ),
        args.repeats,
    )
    # The floor draws its numbers in blocks of the size the fast sampler works on, so that
    # neither side pays for page faults on one giant allocation.
    rows_per_block = max(1, (1 << 18) // args.shots)

    def draw_uniforms() -> None:
        for start in range(0, args.states, rows_per_block):
            rows = min(rows_per_block, args.states - start)
            torch.rand(rows, args.shots, generator=generator)

    floor = best_seconds(draw_uniforms, args.repeats)

    rates = {
        "fast": args.states / fast,
        "slow": slow_windows.shape[0] / slow,
        "floor": args.states / floor,
    }
    print(
        f"D = {args.dim}, {args.shots} shots, p = {args.p}, {args.threads} thread(s), "
        f"{args.states} states (slow path: {slow_windows.shape[0]})"
    )
    for name, rate in rates.items():
        print(
            f"{name:>5}: {rate:12,.0f} states/s   ETTh1 epoch ({ETTH1_EPOCH_STATES:,} states): "
            f"{ETTH1_EPOCH_STATES / rate:9.1f} s"
        )
    print(f"fast time / floor time: {rates['floor'] / rates['fast']:.2f} (target <= 4)")
    print(f"fast / slow: {rates['fast'] / rates['slow']:.1f}x (target >= 20)")


if __name__ == "__main__":
    run_benchmark(main)
