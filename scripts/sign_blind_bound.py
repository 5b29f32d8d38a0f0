"""How good can a forecaster be that sees each window only up to sign? (docs/backbone.md,
"What the sign costs".)

Amplitude encoding gives rho(x) = rho(-x), and LDPT's attention sees nothing else of the input
(gate g = 1). Its forecast in RevIN-normalised units is therefore an even function of the
normalised window: mirroring a window about its own mean leaves the forecast unchanged. This
script measures both halves of that argument:

1. ``--run RUN_DIR`` (a finished ``qpriv train --out`` LDPT run): the relative change of the
   forecast when every test window is mirrored, with the same noise seed.
2. The best a sign-blind model can do on this backbone: the classical backbone made even,
   f(x) = (f(x) + f(mirror(x))) / 2, trained beside the plain classical backbone on the same
   budget; both test MSEs are printed.

The even model is an experiment, not a qpriv method: the script swaps the backbone's forward
for the symmetrised one while it trains and restores it after.

Usage::

    python scripts/sign_blind_bound.py --max-train-windows 2048 --epochs 6    # ~20 min, 2 cores
    python scripts/sign_blind_bound.py --max-train-windows 0 --epochs 20      # hours: all windows
    python scripts/sign_blind_bound.py --run runs/ldpt-eps0.1 --skip-training
"""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import Iterator

import torch

from qpriv.forecasting.model import LDPTForecaster
from qpriv.forecasting.run import run_forecast


def mirror(x: torch.Tensor) -> torch.Tensor:
    """Each window (B, L, C) reflected about its own per-channel mean: RevIN maps it to the
    negative of the original's normalised window, with the same mean and std."""
    return 2 * x.mean(dim=1, keepdim=True) - x


@contextlib.contextmanager
def even_backbone() -> Iterator[None]:
    """While active, every LDPTForecaster forecasts (f(x) + f(mirror(x))) / 2."""
    plain = LDPTForecaster.forward

    def even(self: LDPTForecaster, x: torch.Tensor) -> torch.Tensor:
        return 0.5 * (plain(self, x) + plain(self, mirror(x)))

    LDPTForecaster.forward = even
    try:
        yield
    finally:
        LDPTForecaster.forward = plain


def mirror_invariance(run_dir: str, *, seed: int = 7, stride: int = 8) -> float:
    """Relative change ||f(x) - f(mirror(x))|| / ||f(x)|| of a finished run's forecasts over
    every ``stride``-th test window, both passes under the same noise seed."""
    from qpriv.forecasting.artifacts import load_run

    run = load_run(run_dir)
    test = run.data().test
    x = torch.stack([test[i][0] for i in range(0, len(test), stride)])
    with torch.no_grad():
        run.model.seed_noise(seed)
        plain = run.model(x)
        run.model.seed_noise(seed)
        mirrored = run.model(mirror(x))
    return float((plain - mirrored).norm() / plain.norm())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", help="a finished LDPT run directory to test for invariance")
    parser.add_argument("--skip-training", action="store_true")
    parser.add_argument("--dataset", default="ETTh1")
    parser.add_argument("--horizon", type=int, default=24)
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--max-train-windows", type=int, default=2048,
                        help="training windows (0: all 8281, the paper's budget with --epochs 20)")
    parser.add_argument("--seed", type=int, default=2024)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    report: dict = {}
    if args.run:
        report["mirror_relative_change"] = mirror_invariance(args.run)
    if not args.skip_training:
        settings = {"dataset": args.dataset, "horizon": args.horizon, "method": "classical",
                    "eps": None, "epochs": args.epochs, "seed": args.seed,
                    "max_train_windows": args.max_train_windows or None, "progress": False,
                    "threads": 1, "rigorous": False}
        plain = run_forecast(**settings)
        with even_backbone():
            even = run_forecast(**settings)
        report.update(classical={"mse": plain.mse, "mae": plain.mae},
                      even_classical={"mse": even.mse, "mae": even.mae})
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
