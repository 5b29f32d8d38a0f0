"""Where a release's noise is drawn: a seeded NumPy generator, or OpenDP's vetted samplers.

A mechanism's guarantee is a statement about exact distributions over the reals; what a
computer releases comes from a pseudo-random generator and floating-point arithmetic. Both
can leak. A generator that is not cryptographic (NumPy's PCG64, torch's Mersenne twister) can
be predicted from enough of its outputs, and a Gaussian or Laplace sample computed in floating
point has gaps and low bits whose pattern depends on the value it was added to: "On
significance of the least significant bits for differential privacy" (Mironov 2012) recovers
the input of a floating-point Laplace mechanism from those bits, and "Are we there yet?
Timing and floating-point attacks on differential privacy systems" (Jin et al. 2022) does the
same to Gaussian samplers in use. So a release has two samplers here:

* :class:`SeededSampler` (a run with a recorded seed): NumPy's generator seeded by the run's
  seed, with NumPy's floating-point Gaussian and ``Generator.choice``. Fast and reproducible to
  the bit (tests, resumed runs, grids), and replayable by whoever holds the seed, which the
  claims of such a run already say (:mod:`qpriv.privacy.randomness`).
* :class:`VettedSampler` (a release: ``--secret-seed``, ``seed=None``): OpenDP's samplers,
  which draw their bits from OpenSSL's cryptographic generator (seeded by the operating
  system; the Python wheel is built with it) and sample exactly, in rational arithmetic, so no
  floating-point rounding shapes the noise. The Gaussian is
  ``opendp.measurements.make_gaussian`` on a vector of floats at its default granularity:
  the input is rounded to the grid ``2^-1074 Z`` (every double lies on it, so nothing moves),
  a discrete Gaussian of scale sigma on that grid is added exactly ("The discrete Gaussian for
  differential privacy", Canonne, Kamath & Steinke 2020), and the sum is rounded once to the
  nearest double, which is post-processing. The selection is ``make_noisy_max`` (the report-
  noisy-max of exponential noise, "Permute-and-flip: a new mechanism for differentially
  private selection", McKenna & Sheldon 2020), exact in the scores.

DP-SGD draws hundreds of thousands of Gaussians a step, where OpenDP's exact sampler would make
an epoch about 20x slower; a release's DP-SGD noise comes from :class:`SecureModeGaussian`
instead: a cryptographic generator (ChaCha20) with Opacus's ``secure_mode`` rule against
floating-point attacks, cryptographic but not exact, and its claim says so.

Why the analytic Gaussian calibration still holds for the vetted Gaussian: two neighbouring
statistics differ by a vector on the grid g = 2^-1074 (both are doubles), and the discrete
Gaussian's privacy loss at an output x is the continuous one's, ``((x - mu')^2 - (x - mu)^2)
/ (2 sigma^2)``, read on grid points. Its (eps, delta) curve is a Riemann sum of the
continuous curve's integrals with step g, within ``O(g / sigma)`` of it: below 2^-1000 for
every sigma above 2^-70, while the calibration's margin (:data:`qpriv.privacy.ssp.Z_MARGIN`)
leaves delta about 2e-8 (relative) below its target. The noisy max is eps-DP for scores of
L-infinity sensitivity Delta at ``scale = 2 Delta / eps`` (OpenDP's own privacy map, which
:meth:`VettedSampler.select` checks), the exponential mechanism's budget.

Example:

>>> sampler = noise_sampler(7)
>>> sampler.name == SEEDED
True
>>> noise_sampler(None).name == VETTED
True
>>> round(float(VettedSampler().gaussian(np.zeros(2000), sigma=1.0).std()), 0)
1.0
"""

from __future__ import annotations

import secrets
from typing import Any, Protocol, runtime_checkable

import numpy as np
from opendp.domains import atom_domain, vector_domain
from opendp.measurements import make_gaussian, make_noisy_max
from opendp.measures import max_divergence
from opendp.metrics import l2_distance, linf_distance
from opendp.mod import enable_features
from randomgen import ChaCha

from qpriv.errors import InvalidInputError, require_in_range, require_seed

__all__ = [
    "CHACHA",
    "CHACHA_NOTE",
    "SECURE_MODE",
    "SECURE_MODE_NOTE",
    "SEEDED",
    "SEEDED_SAMPLER_NOTE",
    "TORCH_SEEDED",
    "TORCH_SEEDED_NOTE",
    "VETTED",
    "VETTED_SAMPLER_NOTE",
    "NoiseSampler",
    "SecureModeGaussian",
    "SeededSampler",
    "VettedSampler",
    "as_sampler",
    "cryptographic_generator",
    "noise_sampler",
    "sampler_note",
    "skellam_noise",
]

SEEDED = "numpy-seeded"
"""The name of :class:`SeededSampler` in a claim's details (``noise_sampler``)."""
VETTED = "opendp-vetted"
"""The name of :class:`VettedSampler` in a claim's details (``noise_sampler``)."""

SEEDED_SAMPLER_NOTE = (
    "noise sampler: NumPy's PCG64 generator seeded by the run's seed, floating-point Gaussian "
    "and exponential-mechanism draws (reproducible; not cryptographic, not floating-point "
    "safe)")
"""The note of a claim whose noise came from :class:`SeededSampler`."""
VETTED_SAMPLER_NOTE = (
    "noise sampler: OpenDP's vetted samplers, drawing from OpenSSL's cryptographic generator "
    "seeded by the operating system: every Gaussian is an exact discrete Gaussian on the "
    "floating-point grid (make_gaussian, Canonne, Kamath & Steinke 2020), every selection an "
    "exact report-noisy-max (make_noisy_max); no floating-point rounding shapes the noise")
"""The note of a claim whose noise came from :class:`VettedSampler`."""

TORCH_SEEDED = "torch-seeded"
"""The name of DP-SGD's noise drawn from torch's generator seeded by the run's seed."""
SECURE_MODE = "chacha20-secure-mode"
"""The name of :class:`SecureModeGaussian` in a claim's details (``noise_sampler``)."""
TORCH_SEEDED_NOTE = (
    "noise sampler: torch's generator seeded from the run's seed, floating-point Gaussian "
    "(reproducible; not cryptographic, not floating-point safe)")
"""The note of a DP-SGD claim whose noise came from torch's seeded generator."""
SECURE_MODE_NOTE = (
    "noise sampler: randomgen's ChaCha20 generator keyed by 256 bits of the operating "
    "system's entropy; every Gaussian entry the sum of four normals halved, Opacus's "
    "secure_mode rule against floating-point attacks (Holohan & Braghin 2021): cryptographic, "
    "not an exact sampler (OpenDP's would cost about 20x an epoch); the Poisson batches still "
    "come from torch's generator seeded by the secret seed")
"""The note of a DP-SGD claim whose noise came from :class:`SecureModeGaussian`."""
CHACHA = "numpy-chacha20"
"""The name of NumPy's samplers on :func:`cryptographic_generator`'s bits in a claim's
details (``noise_sampler``): the federated sites' Skellam shares."""
CHACHA_NOTE = (
    "noise sampler: NumPy's samplers on randomgen's ChaCha20 generator keyed by 256 bits of the "
    "operating system's entropy, a fresh key at every site: cryptographic bits, integer "
    "(Poisson) draws with no floating-point low bits in the output; NumPy's Poisson algorithm "
    "is not an exact sampler")
"""The note of a claim whose noise came from NumPy's samplers on ChaCha20 bits."""

#: Relative margin on the noisy max's scale, as on the Gaussian's (``ssp.Z_MARGIN``): OpenDP
#: rounds its privacy map up, so the exact scale 2 Delta / eps could map just above eps.
_SCALE_MARGIN = 1e-9


@runtime_checkable
class NoiseSampler(Protocol):
    """What a mechanism asks of its randomness: Gaussian releases and one private selection.

    Every method releases the data passed to it (``values`` plus noise; an index chosen from
    ``utility``), never bare noise to be added by the caller: a floating-point-safe sampler
    must see the value it perturbs.
    """

    name: str

    def gaussian(self, values: np.ndarray, *, sigma: float) -> np.ndarray:
        """``values`` plus i.i.d. N(0, sigma^2) noise on every entry."""
        ...

    def symmetric_gaussian(self, values: np.ndarray, *, sigma: float) -> np.ndarray:
        """A square ``values`` whose upper triangle (diagonal included) gets i.i.d.
        N(0, sigma^2) noise, mirrored below: the release reads only that triangle."""
        ...

    def select(self, candidates: np.ndarray, utility: np.ndarray, *, eps: float,
               sensitivity: float) -> Any:
        """One of ``candidates``, eps-DP for their ``utility`` (one score each) of L-infinity
        sensitivity ``sensitivity`` (the exponential mechanism's budget)."""
        ...


class SeededSampler:
    """NumPy's generator: the reproducible path of a run with a recorded seed. Its draws are
    those every release made before samplers were named (same calls, same order)."""

    name = SEEDED

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng

    def gaussian(self, values: np.ndarray, *, sigma: float) -> np.ndarray:
        values = np.asarray(values, dtype=np.float64)
        return values + self.rng.normal(0.0, sigma, size=values.shape)

    def symmetric_gaussian(self, values: np.ndarray, *, sigma: float) -> np.ndarray:
        values = _square(values)
        upper = np.triu(self.rng.normal(0.0, sigma, size=values.shape))
        return values + (upper + np.triu(upper, 1).T)

    def select(self, candidates: np.ndarray, utility: np.ndarray, *, eps: float,
               sensitivity: float) -> Any:
        """The exponential mechanism: candidate j with probability proportional to
        ``exp(eps u_j / (2 Delta))``, computed and sampled in double precision."""
        logits = eps * np.asarray(utility, dtype=np.float64) / (2.0 * sensitivity)
        p = np.exp(logits - logits.max())
        return self.rng.choice(candidates, p=p / p.sum())


class VettedSampler:
    """OpenDP's exact samplers on OpenSSL's cryptographic generator (module docstring): the
    path of a release. Nothing is seeded, so nothing can be replayed or recorded."""

    name = VETTED

    def __init__(self) -> None:
        enable_features("contrib")
        self._floats = vector_domain(atom_domain(T=float, nan=False))

    def gaussian(self, values: np.ndarray, *, sigma: float) -> np.ndarray:
        values = np.asarray(values, dtype=np.float64)
        if values.size == 0:
            return values.copy()
        if not np.all(np.isfinite(values)):
            raise InvalidInputError("a Gaussian release needs finite values; clip or drop "
                                    "the non-finite ones first")
        sigma = require_in_range("sigma", sigma, low=0.0, hint="a noise std must be > 0")
        measurement = make_gaussian(self._floats, l2_distance(T=float), scale=sigma)
        released = measurement(values.ravel().tolist())
        return np.asarray(released, dtype=np.float64).reshape(values.shape)

    def symmetric_gaussian(self, values: np.ndarray, *, sigma: float) -> np.ndarray:
        values = _square(values)
        rows, cols = np.triu_indices(values.shape[0])
        upper = np.zeros_like(values)
        upper[rows, cols] = self.gaussian(values[rows, cols], sigma=sigma)
        return upper + np.triu(upper, 1).T

    def select(self, candidates: np.ndarray, utility: np.ndarray, *, eps: float,
               sensitivity: float) -> Any:
        """Report-noisy-max at ``scale = 2 Delta / eps`` (slightly above, by
        :data:`_SCALE_MARGIN`), after checking that OpenDP's map gives at most eps."""
        scores = np.asarray(utility, dtype=np.float64).ravel()
        if not np.all(np.isfinite(scores)):
            raise InvalidInputError("a private selection needs finite utilities")
        scale = 2.0 * sensitivity / eps * (1.0 + _SCALE_MARGIN)
        measurement = make_noisy_max(self._floats, linf_distance(T=float), max_divergence(),
                                     scale=scale)
        spent = measurement.map(float(sensitivity))
        if not spent <= eps:
            raise InvalidInputError(f"OpenDP's noisy max spends {spent!r} > eps = {eps!r} at "
                                    f"scale {scale!r}")
        return candidates[int(measurement(scores.tolist()))]


class SecureModeGaussian:
    """Standard normal draws for DP-SGD's noise in a release: randomgen's ChaCha20 (20 rounds)
    keyed by 256 bits from Python's :mod:`secrets`, each entry ``(z_1 + z_2 + z_3 + z_4) / 2``
    of four standard normals: the rule of Opacus's ``secure_mode`` ("Secure random sampling in
    differential privacy", Holohan & Braghin 2021, Section 5.1, n = 2), which makes the
    floating-point attack on a single Gaussian sample cost about 2^159 work. Cryptographic,
    but not exact as :class:`VettedSampler` is: OpenDP's exact Gaussian costs about 50-100
    microseconds an entry, 20x a DP-SGD epoch of the forecaster's backbone
    (``benchmarks/vetted_noise.py``), while this made one 1.19x the seeded epoch there.

    The state (:meth:`get_state`) is the generator's key and counter: a checkpoint that holds
    it must be kept as private as the data.
    """

    name = SECURE_MODE

    def __init__(self) -> None:
        self.generator = cryptographic_generator()

    def standard_normal(self, shape: tuple[int, ...]) -> np.ndarray:
        """Float64 N(0, 1) draws of ``shape``, each the halved sum of four."""
        return self.generator.standard_normal((4, *shape)).sum(axis=0) / 2.0

    def get_state(self) -> dict[str, Any]:
        """The generator's state as plain lists and numbers (a checkpoint loads it with
        ``weights_only``)."""
        state = self.generator.bit_generator.state
        inner = {key: value.tolist() if isinstance(value, np.ndarray) else value
                 for key, value in state["state"].items()}
        return {**{k: v for k, v in state.items() if k != "state"}, "state": inner}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`get_state`'s form."""
        current = self.generator.bit_generator.state
        inner = {key: np.asarray(value, dtype=current["state"][key].dtype)
                 if isinstance(current["state"][key], np.ndarray) else value
                 for key, value in state["state"].items()}
        self.generator.bit_generator.state = {**state, "state": inner}


def cryptographic_generator() -> np.random.Generator:
    """NumPy's :class:`~numpy.random.Generator` on randomgen's ChaCha20 (20 rounds), keyed by
    256 bits of the operating system's entropy: bits no one can predict from earlier outputs,
    for noise no seed may replay (NumPy's PCG64 can be)."""
    return np.random.Generator(ChaCha(key=secrets.randbits(256), counter=0, rounds=20))


def _square(values: np.ndarray) -> np.ndarray:
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 2 or values.shape[0] != values.shape[1]:
        raise InvalidInputError(f"a symmetric release needs a square matrix, got shape "
                                f"{values.shape}")
    return values


def noise_sampler(seed: int | None) -> NoiseSampler:
    """The sampler of a run: :class:`SeededSampler` on ``np.random.default_rng(seed)`` for a
    recorded seed, :class:`VettedSampler` for None (a secret seed: a release)."""
    if seed is None:
        return VettedSampler()
    return SeededSampler(np.random.default_rng(require_seed("seed", seed)))


def as_sampler(randomness: np.random.Generator | NoiseSampler) -> NoiseSampler:
    """``randomness`` as a sampler: a sampler itself, or a NumPy generator (or any object with
    its ``normal`` and ``choice``) wrapped in :class:`SeededSampler`."""
    if isinstance(randomness, NoiseSampler):
        return randomness
    return SeededSampler(randomness)


def sampler_note(name: str) -> str:
    """The claim note that says which sampler drew a release's noise."""
    notes = {SEEDED: SEEDED_SAMPLER_NOTE, VETTED: VETTED_SAMPLER_NOTE,
             TORCH_SEEDED: TORCH_SEEDED_NOTE, SECURE_MODE: SECURE_MODE_NOTE,
             CHACHA: CHACHA_NOTE}
    if name not in notes:
        raise InvalidInputError(f"noise sampler {name!r} is not one of {sorted(notes)}")
    return notes[name]


def skellam_noise(mu: float, shape: tuple[int, ...], *,
                  rng: np.random.Generator) -> np.ndarray:
    """``Sk(mu)`` noise of ``shape`` as int64: the difference of two Poisson draws (exact); the
    Skellam mechanism's sampler (its accounting: :mod:`qpriv.privacy.skellam`)."""
    if mu <= 0:
        return np.zeros(shape, dtype=np.int64)
    return rng.poisson(mu, size=shape).astype(np.int64) - \
        rng.poisson(mu, size=shape).astype(np.int64)
