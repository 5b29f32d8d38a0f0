"""Where a mechanism's randomness comes from, and what that does to its guarantee.

A differential-privacy guarantee is a statement about the mechanism's random draws (the
Gaussian noise of DP-SGD or of sufficient-statistics perturbation, the Poisson batches, the
shots of the quantum features): it holds against an adversary who cannot predict them. qpriv
seeds every generator from the run's seed, so that a run can be reproduced bit for bit (tests,
a resumed run, a grid on Ray against the local executor), and it writes that seed into
``config.json`` and ``result.json``. Whoever knows the seed can replay the run on each of two
neighbouring training sets and see which one gives the released weights: with the seed there is
no privacy at all. So the claims of a seeded run say so (:data:`SEEDED_NOTE`), and a run meant
for release draws its seed from the operating system's entropy instead (:func:`secret_seed`,
``qpriv train --secret-seed``), uses it for every stream and writes it nowhere: its claims say
that (:data:`SECRET_NOTE`). Python's :mod:`secrets` is the well-kept source for that seed; the
batches and shots stay torch's and NumPy's generators driven by it. The noise a guarantee
rests on does not: without a seed, dp-linear's comes from OpenDP's vetted samplers and DP-SGD's
from a ChaCha20 generator keyed by the operating system (:mod:`qpriv.privacy.samplers`), and
each claim names its sampler.

Example:

>>> randomness_note(secret=False) == SEEDED_NOTE
True
>>> 0 <= secret_seed() < 2**62
True
>>> run_seed(7)
7
"""

from __future__ import annotations

import secrets

SEEDED_NOTE = (
    "the mechanism's random draws (noise, sampled batches, shots) come from generators seeded "
    "by the run's seed, which config.json and result.json record so that the run can be "
    "reproduced: the guarantee holds only against an adversary who does not know that seed "
    "(with it, the run can be replayed on two neighbouring training sets); train with "
    "--secret-seed (seed=None in Python) for a release")
"""The note on every claim of a run whose seed is recorded."""

SECRET_NOTE = (
    "the run's seed was drawn from the operating system's entropy (Python's secrets) and "
    "written nowhere: the mechanism's random draws cannot be replayed from the run's files "
    "(a checkpoint, where a run keeps one, holds the generators' state: keep it as private "
    "as the data)")
"""The note on every claim of a run with a secret seed."""


def secret_seed() -> int:
    """A seed of 62 bits from the operating system's entropy, for a run that records none."""
    return secrets.randbits(62)


def run_seed(seed: int | None) -> int:
    """The seed a run drives its streams with: ``seed`` itself, or a :func:`secret_seed` for
    None (the caller records None, never this one)."""
    return secret_seed() if seed is None else seed


def randomness_note(*, secret: bool) -> str:
    """The note that says where a run's mechanism drew its randomness from."""
    return SECRET_NOTE if secret else SEEDED_NOTE
