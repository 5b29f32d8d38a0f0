"""Find Weyl-Heisenberg SIC fiducials numerically; write ``qpriv/quantum/data/sic_fiducials.json``.

For a fiducial psi the overlaps c_ab = <psi| X^a Z^b |psi> (see ``qpriv.quantum.povm``) define the
frame potential

    F(psi) = sum_{a,b} |c_ab|^4 >= 2 D / (D + 1),

with equality exactly when |c_ab|^2 = 1 / (D + 1) for every (a, b) != (0, 0), i.e. when the orbit
is a SIC. For each dimension the script

1. minimises F over the real and imaginary parts of psi with L-BFGS from seeded random starts,
   keeping the first start that reaches the bound to 1e-9;
2. polishes that start with least squares on the residuals |c_ab|^2 - 1/(D+1)
   (trust-region reflective) to machine precision;
3. verifies |<phi_j|phi_k>|^2 = 1/(D+1) for all j != k on the full orbit and stores the fiducial
   with the deviation it achieved.

Usage::

    python scripts/generate_sic_fiducials.py              # regenerate D = 2, 4, 8, 16
    python scripts/generate_sic_fiducials.py --dims 32 --seed 7 --starts 3000 --merge
    python scripts/generate_sic_fiducials.py --check      # verify the shipped file only

D = 32 (the five-qubit register of the signed encoding) is found much less often: the shipped
fiducial took 564 starts (about 5 minutes on one core) with seed 7. ``--merge`` keeps the
file's other dimensions and records each entry's seed.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch
from scipy.optimize import least_squares, minimize

import qpriv.quantum
from qpriv.quantum.povm import SIC_TOLERANCE, sic_overlap_deviation, weyl_heisenberg_orbit

DEFAULT_DIMS = (2, 4, 8, 16)
DEFAULT_SEED = 2024
POTENTIAL_TOLERANCE = 1e-9
"""A start counts as converged when F - 2D/(D+1) is below this before polishing."""


def default_output() -> Path:
    """The package-data file that ``qpriv.quantum.povm`` reads."""
    return Path(qpriv.quantum.__file__).resolve().parent / "data" / "sic_fiducials.json"


def _fiducial(params: np.ndarray | torch.Tensor, dim: int) -> torch.Tensor:
    x = torch.as_tensor(params, dtype=torch.float64)
    return torch.complex(x[:dim], x[dim:])


def overlaps_squared(params: torch.Tensor, dim: int) -> torch.Tensor:
    """|<psi| X^a Z^b |psi>|^2 for all k = a D + b, psi from real and imaginary parts."""
    psi = _fiducial(params, dim)
    psi = psi / torch.linalg.vector_norm(psi)
    return (weyl_heisenberg_orbit(psi) @ psi.conj()).abs().square()


def frame_potential_bound(dim: int) -> float:
    """The minimum 2D/(D+1) of the frame potential, reached exactly by SIC fiducials."""
    return 2.0 * dim / (dim + 1)


def _potential_and_gradient(params: np.ndarray, dim: int) -> tuple[float, np.ndarray]:
    x = torch.tensor(params, dtype=torch.float64, requires_grad=True)
    value = overlaps_squared(x, dim).square().sum()
    value.backward()
    return float(value.detach()), x.grad.numpy().copy()


def _residuals(params: np.ndarray, dim: int) -> np.ndarray:
    with torch.no_grad():
        sq = overlaps_squared(torch.from_numpy(params), dim)
    return (sq[1:] - 1.0 / (dim + 1)).numpy()


def _jacobian(params: np.ndarray, dim: int) -> np.ndarray:
    def residual(x: torch.Tensor) -> torch.Tensor:
        return overlaps_squared(x, dim)[1:]

    return torch.autograd.functional.jacobian(residual, torch.from_numpy(params)).numpy()


def find_fiducial(dim: int, *, rng: np.random.Generator, max_starts: int) -> dict:
    """Minimise the frame potential from random starts, polish, verify; return the file entry."""
    bound = frame_potential_bound(dim)
    for start in range(1, max_starts + 1):
        x0 = rng.standard_normal(2 * dim)
        result = minimize(
            _potential_and_gradient, x0, args=(dim,), jac=True, method="L-BFGS-B",
            options={"maxiter": 5000, "ftol": 1e-15, "gtol": 1e-12},
        )
        if result.fun - bound > POTENTIAL_TOLERANCE:
            continue
        polished = least_squares(
            _residuals, result.x, jac=_jacobian, args=(dim,), method="trf",
            xtol=1e-15, ftol=1e-15, gtol=1e-15, max_nfev=2000,
        )
        psi = _fiducial(polished.x, dim)
        psi = psi / torch.linalg.vector_norm(psi)
        psi = psi * torch.exp(-1j * torch.angle(psi[0]))  # fix the global phase: psi[0] real
        psi = torch.complex(psi.real, torch.cat([psi.imag.new_zeros(1), psi.imag[1:]]))
        deviation = sic_overlap_deviation(weyl_heisenberg_orbit(psi))
        if deviation > SIC_TOLERANCE:
            continue
        potential = float(overlaps_squared(torch.cat([psi.real, psi.imag]), dim).square().sum())
        return {
            "real": psi.real.tolist(),
            "imag": psi.imag.tolist(),
            "max_overlap_deviation": deviation,
            "frame_potential": potential,
            "frame_potential_bound": bound,
            "starts_used": start,
        }
    raise RuntimeError(
        f"no SIC fiducial found for D = {dim} in {max_starts} starts; raise --starts"
    )


def check_fiducial_file(path: Path, *, atol: float = SIC_TOLERANCE) -> dict[int, float]:
    """Verify every fiducial in ``path``; return {D: max overlap deviation} or raise ValueError.

    Checks that the full Weyl-Heisenberg orbit has |<phi_j|phi_k>|^2 = 1/(D+1) for j != k to
    ``atol`` and that the stored deviation matches the recomputed one.
    """
    data = json.loads(Path(path).read_text())
    results: dict[int, float] = {}
    for key, entry in data["fiducials"].items():
        dim = int(key)
        psi = torch.complex(
            torch.tensor(entry["real"], dtype=torch.float64),
            torch.tensor(entry["imag"], dtype=torch.float64),
        )
        if psi.shape != (dim,):
            raise ValueError(f"fiducial for D = {dim} has {psi.shape[0]} entries")
        deviation = sic_overlap_deviation(weyl_heisenberg_orbit(psi))
        if not deviation <= atol:
            raise ValueError(f"D = {dim}: max SIC overlap deviation {deviation:.3g} > {atol:g}")
        if not math.isclose(deviation, entry["max_overlap_deviation"], rel_tol=0.5, abs_tol=1e-12):
            raise ValueError(
                f"D = {dim}: stored deviation {entry['max_overlap_deviation']:.3g} does not match "
                f"the recomputed {deviation:.3g}"
            )
        results[dim] = deviation
    return results


def generate(dims: tuple[int, ...], *, seed: int, max_starts: int) -> dict:
    """Find, polish and verify a fiducial for each dimension; return the whole file content."""
    torch.set_num_threads(1)
    rng = np.random.default_rng(seed)
    fiducials = {}
    for dim in dims:
        started = time.perf_counter()
        entry = find_fiducial(dim, rng=rng, max_starts=max_starts)
        fiducials[str(dim)] = entry
        print(
            f"D = {dim:2d}: max overlap deviation {entry['max_overlap_deviation']:.2e} "
            f"after {entry['starts_used']} start(s), {time.perf_counter() - started:.2f} s"
        )
    return {
        "description": "Weyl-Heisenberg SIC-POVM fiducials, found numerically and verified",
        "convention": (
            "phi_k = X^a Z^b psi, k = a*D + b, X|j> = |j+1 mod D>, Z|j> = exp(2 pi i j / D)|j>; "
            "psi = real + 1j * imag, normalised, psi[0] real"
        ),
        "generated_by": "scripts/generate_sic_fiducials.py",
        "seed": seed,
        "fiducials": fiducials,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dims", type=int, nargs="+", default=list(DEFAULT_DIMS))
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--starts", type=int, default=200, help="random starts per dimension")
    parser.add_argument("--output", type=Path, default=None, help="default: the package data file")
    parser.add_argument("--check", action="store_true", help="only verify the existing file")
    parser.add_argument("--merge", action="store_true",
                        help="keep the output file's other dimensions, replace or add these")
    args = parser.parse_args(argv)
    output = args.output or default_output()
    if not args.check:
        content = generate(tuple(args.dims), seed=args.seed, max_starts=args.starts)
        if args.merge and output.exists():
            kept = json.loads(output.read_text())
            for entry in content["fiducials"].values():
                entry["seed"] = args.seed
            kept["fiducials"].update(content["fiducials"])
            kept["fiducials"] = dict(sorted(kept["fiducials"].items(), key=lambda kv: int(kv[0])))
            content = kept
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(content, indent=1) + "\n")
        print(f"wrote {output}")
    for dim, deviation in check_fiducial_file(output).items():
        print(f"check D = {dim:2d}: max overlap deviation {deviation:.2e} <= {SIC_TOLERANCE:g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
