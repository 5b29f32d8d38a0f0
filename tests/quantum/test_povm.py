"""SIC-POVMs: the shipped fiducials, the Weyl-Heisenberg orbit, and the regenerating script."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
import torch

from qpriv.errors import InvalidInputError
from qpriv.quantum import (
    available_sic_dims,
    sic_fiducial,
    sic_overlap_deviation,
    sic_povm,
    sic_vectors,
    verify_sic,
    weyl_heisenberg_orbit,
)

DIMS = (2, 4, 8, 16, 32)


@pytest.fixture(scope="module")
def script(load_script) -> ModuleType:
    return load_script("generate_sic_fiducials")


def test_shipped_dims() -> None:
    assert available_sic_dims() == DIMS


@pytest.mark.parametrize("dim", DIMS)
def test_sic_povm_is_complete_positive_and_rank_one(dim: int) -> None:
    povm = sic_povm(dim)
    assert povm.shape == (dim * dim, dim, dim) and povm.dtype == torch.complex128
    identity = torch.eye(dim, dtype=torch.complex128)
    assert float((povm.sum(0) - identity).abs().max()) < 1e-10
    eigenvalues = torch.linalg.eigvalsh(povm)
    assert float(eigenvalues.min()) > -1e-12
    # Rank one with trace 1/D: the only non-zero eigenvalue is 1/D.
    torch.testing.assert_close(eigenvalues[:, -1], torch.full((dim * dim,), 1 / dim,
                                                             dtype=torch.float64))
    assert float(eigenvalues[:, :-1].abs().max()) < 1e-12


@pytest.mark.parametrize("dim", DIMS)
def test_sic_vectors_have_equal_overlaps(dim: int) -> None:
    vectors = sic_vectors(dim)
    assert vectors.shape == (dim * dim, dim)
    gram = (vectors.conj() @ vectors.T).abs().square()
    off_diagonal = gram[~torch.eye(dim * dim, dtype=torch.bool)]
    assert float((off_diagonal - 1 / (dim + 1)).abs().max()) < 1e-10
    torch.testing.assert_close(gram.diagonal(), torch.ones(dim * dim, dtype=torch.float64))
    assert verify_sic(vectors) < 1e-10


def test_orbit_order_is_x_power_a_times_z_power_b() -> None:
    dim = 4
    fiducial = sic_fiducial(dim)
    shift = torch.roll(torch.eye(dim, dtype=torch.complex128), 1, dims=0)  # X|j> = |j+1>
    j = torch.arange(dim, dtype=torch.float64)
    clock = torch.diag(torch.exp(2j * math.pi * j / dim))  # Z|j> = w^j |j>
    orbit = weyl_heisenberg_orbit(fiducial)
    for a in range(dim):
        for b in range(dim):
            expected = torch.linalg.matrix_power(shift, a) @ torch.linalg.matrix_power(clock, b)
            torch.testing.assert_close(orbit[a * dim + b], expected @ fiducial)


def test_a_non_sic_is_rejected() -> None:
    basis_orbit = weyl_heisenberg_orbit(torch.tensor([1.0, 0.0, 0.0, 0.0]))
    assert sic_overlap_deviation(basis_orbit) == pytest.approx(0.8)  # |<0|0>|^2 - 1/5
    with pytest.raises(InvalidInputError, match="not a SIC"):
        verify_sic(basis_orbit)


@pytest.mark.parametrize("dim", [3, 12, 0, 2.0])
def test_dims_that_are_not_powers_of_two_name_the_valid_ones(dim: object) -> None:
    with pytest.raises(InvalidInputError, match=r"2, 4, 8, 16"):
        sic_povm(dim)


def test_power_of_two_without_fiducial_names_the_valid_ones() -> None:
    with pytest.raises(InvalidInputError, match=r"no SIC fiducial is shipped for dim = 64.*2, 4"):
        sic_vectors(64)


def test_script_check_accepts_the_shipped_file(script: ModuleType) -> None:
    results = script.check_fiducial_file(script.default_output())
    assert sorted(results) == list(DIMS)
    assert max(results.values()) < 1e-12
    content = json.loads(script.default_output().read_text())
    for key, entry in content["fiducials"].items():
        dim = int(key)
        assert entry["frame_potential"] == pytest.approx(2 * dim / (dim + 1), abs=1e-12)


def test_script_check_rejects_a_perturbed_fiducial(script: ModuleType, tmp_path: Path) -> None:
    content = json.loads(script.default_output().read_text())
    content["fiducials"]["8"]["real"][3] += 1e-4
    corrupted = tmp_path / "sic.json"
    corrupted.write_text(json.dumps(content))
    with pytest.raises(ValueError, match="D = 8"):
        script.check_fiducial_file(corrupted)


def test_script_finds_a_fiducial_from_scratch(script: ModuleType) -> None:
    entry = script.find_fiducial(4, rng=np.random.default_rng(7), max_starts=20)
    assert entry["max_overlap_deviation"] < 1e-12
    real = torch.tensor(entry["real"], dtype=torch.float64)
    imag = torch.tensor(entry["imag"], dtype=torch.float64)
    vectors = weyl_heisenberg_orbit(torch.complex(real, imag))
    assert verify_sic(vectors) < 1e-12
