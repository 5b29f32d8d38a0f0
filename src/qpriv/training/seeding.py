"""Seeding of every random source, and capture/restore of their states for exact resume.

A run has one seed. Independent streams (the shuffle order, a model's noise, evaluation) get
their own seeds derived from it by name with :func:`derive_seed`, so adding a stream never
shifts the draws of another. The global sources (Python's ``random``, NumPy's legacy global RNG,
torch's CPU and CUDA generators) are seeded by :func:`seed_everything` and saved with
:func:`global_rng_state` in a form that ``torch.load(weights_only=True)`` accepts.
"""

from __future__ import annotations

import hashlib
import random

import numpy as np
import torch


def derive_seed(seed: int, stream: str) -> int:
    """A 63-bit seed for the named ``stream`` of run ``seed`` (SHA-256 of both)."""
    digest = hashlib.sha256(f"{int(seed)}:{stream}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def seed_everything(seed: int) -> None:
    """Seed Python's ``random``, NumPy's global RNG and torch (CPU and every CUDA device)."""
    random.seed(derive_seed(seed, "python"))
    np.random.seed(derive_seed(seed, "numpy") % 2**32)
    torch.manual_seed(derive_seed(seed, "torch"))


def global_rng_state() -> dict:
    """The state of every global random source (tensors, ints, lists: checkpoint-safe)."""
    version, internal, gauss = random.getstate()
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state = {
        "python": {"version": version, "internal": list(internal), "gauss": gauss},
        "numpy": {"kind": kind, "keys": torch.from_numpy(keys.astype(np.int64)), "pos": pos,
                  "has_gauss": has_gauss, "cached": cached},
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_global_rng_state(state: dict) -> None:
    """Restore what :func:`global_rng_state` captured."""
    py = state["python"]
    random.setstate((py["version"], tuple(py["internal"]), py["gauss"]))
    npy = state["numpy"]
    np.random.set_state((npy["kind"], npy["keys"].numpy().astype(np.uint32), npy["pos"],
                         npy["has_gauss"], npy["cached"]))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
