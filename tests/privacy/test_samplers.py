"""The noise samplers: a seeded run draws exactly what it drew before samplers were named; a
release (a secret seed) draws dp-linear's noise from OpenDP's vetted samplers and DP-SGD's from
a cryptographic generator, says so in its claim, never repeats, and its draws follow the
stated laws."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats

from qpriv.classification.dpsgd import DPSGDConfig, dp_step
from qpriv.classification.models import TanhMLP
from qpriv.errors import InvalidInputError
from qpriv.forecasting.linear import fit_dp_linear
from qpriv.forecasting.windows import load_forecasting_data
from qpriv.privacy.claims import PrivacyClaim
from qpriv.privacy.randomness import SECRET_NOTE, SEEDED_NOTE
from qpriv.privacy.samplers import (
    SECURE_MODE,
    SECURE_MODE_NOTE,
    SEEDED,
    SEEDED_SAMPLER_NOTE,
    TORCH_SEEDED,
    TORCH_SEEDED_NOTE,
    VETTED,
    VETTED_SAMPLER_NOTE,
    SecureModeGaussian,
    SeededSampler,
    VettedSampler,
    as_sampler,
    noise_sampler,
    sampler_note,
)
from qpriv.privacy.ssp import SSPNoise, perturb
from qpriv.training.dpsgd import DPSGDStrategy, clip_and_noise

P_MIN = 1e-4
"""A goodness-of-fit test of a correct sampler fails with this probability (its own
randomness): small enough never to flake, while a wrong scale (10 % off) or a shifted mean
gives p-values below 1e-20 at these sample sizes."""


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    """300 hourly rows of 3 channels (a period-4 sine and unit noise), look-back 48, horizon 8."""
    rng = np.random.default_rng(0)
    t = np.arange(300)[:, None]
    values = 10 + 3 * np.sin(2 * np.pi * t / 4 + np.arange(3)) + rng.normal(size=(300, 3))
    frame = pd.DataFrame(values, columns=["c0", "c1", "c2"])
    frame.insert(0, "date", pd.date_range("2020-01-01", periods=300, freq="h"))
    path = tmp_path_factory.mktemp("toy") / "toy.csv"
    frame.to_csv(path, index=False)
    return load_forecasting_data(csv=path, seq_len=48, horizon=8)


#: (unit) -> (||kernel||_F, kernel[0, -1], kernel[-1, 5], ridge) of ``fit_dp_linear(toy, eps=1,
#: seed=3)``, recorded with the code before samplers existed (git fe5ab2f): the seeded path
#: must keep every draw (scaler, selection, fit) in place.
RECORDED = {
    "record": (2.1120879901398766, 0.013486597725631667, -0.01231420820906266,
               5930.7717152875075),
    "window": (2.1107915670534227, -0.08135438264827355, -0.01628786521735608,
               1801.788337071184),
}


@pytest.mark.parametrize("unit", ["record", "window"])
def test_a_seeded_fit_draws_what_it_drew_before_samplers(toy, unit):
    fit = fit_dp_linear(toy, eps=1.0, unit=unit, seed=3)
    kernel = np.asarray(fit.model.kernel, dtype=np.float64)
    got = (float(np.linalg.norm(kernel)), float(kernel[0, -1]), float(kernel[-1, 5]),
           float(fit.model.details["ridge"]))
    assert got == pytest.approx(RECORDED[unit], rel=1e-9)
    claim = fit.claims[0]
    assert claim.details["noise_sampler"] == SEEDED
    assert SEEDED_SAMPLER_NOTE in claim.notes and SEEDED_NOTE in claim.notes


@pytest.mark.parametrize("unit", ["record", "window"])
def test_a_secret_seed_fit_names_the_vetted_sampler_and_never_repeats(toy, unit):
    fits = [fit_dp_linear(toy, eps=1.0, unit=unit, seed=None) for _ in range(2)]
    kernels = [np.asarray(f.model.kernel, dtype=np.float64) for f in fits]
    assert not np.array_equal(kernels[0], kernels[1])
    for fit in fits:
        claim = fit.claims[0]
        assert claim.details["noise_sampler"] == VETTED
        assert VETTED_SAMPLER_NOTE in claim.notes and SECRET_NOTE in claim.notes
        assert SEEDED_SAMPLER_NOTE not in claim.notes
        again = PrivacyClaim.from_json(claim.to_json())
        assert again == claim and again.details["noise_sampler"] == VETTED


def test_a_claim_written_before_samplers_still_loads():
    entry = {"value": 1.0, "kind": "global (eps, delta)-DP", "accounting": "rigorous",
             "unit": "record", "covers": "the trained weights", "delta": 1e-6}
    claim = PrivacyClaim.from_json(entry)
    assert "noise_sampler" not in claim.details and claim.to_json() == entry


@pytest.mark.parametrize("sigma, shift", [(2.5, 0.0), (0.013, 7.25), (40.0, -1e4)])
def test_the_vetted_gaussian_follows_its_law(sigma, shift):
    """20,000 releases of a constant vector: (release - value) / sigma passes a two-sided
    Kolmogorov-Smirnov test against N(0, 1) and the chi-square test of its variance (which
    sees a scale 5 % off at about ten standard errors), and keeps the value's shape."""
    values = np.full((100, 200), shift)
    released = VettedSampler().gaussian(values, sigma=sigma)
    assert released.shape == values.shape
    z = ((released - values) / sigma).ravel()
    assert stats.kstest(z, "norm").pvalue > P_MIN
    assert stats.kstest(z * 1.1, "norm").pvalue < P_MIN  # the test sees a 10 % wrong scale
    assert _variance_pvalue(z) > P_MIN
    assert _variance_pvalue(z * 1.05) < P_MIN


def _variance_pvalue(z: np.ndarray) -> float:
    """Two-sided p-value of sum z^2 ~ chi^2(n), the law of n standard normals."""
    total = float(np.sum(z ** 2))
    return 2 * min(stats.chi2.cdf(total, z.size), stats.chi2.sf(total, z.size))


def test_the_vetted_symmetric_release_reads_only_the_upper_triangle():
    sampler = VettedSampler()
    a = np.arange(36.0).reshape(6, 6)  # not symmetric: its lower triangle must be ignored
    first = sampler.symmetric_gaussian(a, sigma=1e-6)
    assert np.array_equal(first, first.T)
    upper = np.triu_indices(6)
    assert np.allclose(first[upper], a[upper], atol=1e-4)
    noise = np.concatenate([(sampler.symmetric_gaussian(np.zeros((40, 40)), sigma=3.0)
                             [np.triu_indices(40)]) for _ in range(10)])
    assert stats.kstest(noise / 3.0, "norm").pvalue > P_MIN


def test_the_vetted_selection_follows_the_noisy_max_law():
    """Two candidates, scores u and u - d, scale s = 2 Delta / eps: with exponential noise the
    lower one wins with probability exp(-d / s) / 2 (the difference of two Exp(s) is
    Laplace(s)). At eps = 1, Delta = 1, d = 1 that is e^-0.5 / 2 = 0.3033; 4,000 draws."""
    sampler = VettedSampler()
    candidates = np.array([10.0, 20.0])
    wins = sum(sampler.select(candidates, np.array([3.0, 2.0]), eps=1.0, sensitivity=1.0)
               == 20.0 for _ in range(4000))
    expected = math.exp(-0.5) / 2
    assert stats.binomtest(wins, 4000, expected).pvalue > P_MIN
    assert stats.binomtest(wins, 4000, expected * 1.2).pvalue < P_MIN


def test_seeded_perturb_is_the_generators_draws_in_order():
    """The seeded release adds exactly the draws the generator gives: d x d normals (upper
    triangle mirrored) for A, then d x k for B."""
    noise = SSPNoise(sigma_a=2.0, sigma_b=0.5, sensitivity_a=1.0, sensitivity_b=1.0,
                     noise_multiplier=1.0, share_a=0.5, eps=1.0, delta=1e-6)
    a, b = np.eye(3), np.ones((3, 2))
    noisy_a, noisy_b = perturb(a, b, noise, rng=np.random.default_rng(5))
    draws = np.random.default_rng(5)
    upper = np.triu(draws.normal(0.0, 2.0, size=(3, 3)))
    np.testing.assert_array_equal(noisy_a, a + upper + np.triu(upper, 1).T)
    np.testing.assert_array_equal(noisy_b, b + draws.normal(0.0, 0.5, size=(3, 2)))


def test_samplers_are_chosen_by_the_seed_and_named():
    assert isinstance(noise_sampler(0), SeededSampler)
    assert isinstance(noise_sampler(None), VettedSampler)
    vetted = VettedSampler()
    assert as_sampler(vetted) is vetted
    assert isinstance(as_sampler(np.random.default_rng(0)), SeededSampler)
    assert sampler_note(VETTED) == VETTED_SAMPLER_NOTE
    with pytest.raises(InvalidInputError, match="not one of"):
        sampler_note("mersenne")
    with pytest.raises(InvalidInputError, match="finite"):
        vetted.gaussian(np.array([1.0, np.nan]), sigma=1.0)
    with pytest.raises(InvalidInputError, match="square"):
        vetted.symmetric_gaussian(np.ones((2, 3)), sigma=1.0)


def _dpsgd(*, secure: bool, seed: int = 4) -> DPSGDStrategy:
    return DPSGDStrategy(clip=1.0, noise_multiplier=2.0, sample_rate=0.1, steps_per_epoch=3,
                         delta=1e-6, seed=seed, secure=secure)


def _noise(strategy: DPSGDStrategy) -> np.ndarray:
    """One step's released noise: an empty Poisson batch releases N(0, sigma^2 C^2) alone
    (divided by the expected batch size, 1 here)."""
    update, _ = clip_and_noise(None, shapes={"w": torch.Size([50, 40])}, clip=strategy.clip,
                               noise_multiplier=strategy.noise_multiplier, denominator=1.0,
                               generator=strategy.noise)
    return update["w"].double().numpy().ravel()


def test_a_secure_dpsgd_step_draws_cryptographic_noise_at_its_scale_and_says_so():
    seeded = [_noise(_dpsgd(secure=False)) for _ in range(2)]
    np.testing.assert_array_equal(*seeded)  # the seeded path replays
    secure = [_noise(_dpsgd(secure=True)) for _ in range(2)]
    assert not np.array_equal(*secure)  # the secure one, same seed, never does
    z = np.concatenate(secure) / 2.0  # sigma C = 2
    assert stats.kstest(z, "norm").pvalue > P_MIN and _variance_pvalue(z) > P_MIN
    claim = PrivacyClaim.from_json(_dpsgd(secure=True).report()["eps"])
    assert claim.details["noise_sampler"] == SECURE_MODE and SECURE_MODE_NOTE in claim.notes
    claim = PrivacyClaim.from_json(_dpsgd(secure=False).report()["eps"])
    assert claim.details["noise_sampler"] == TORCH_SEEDED and TORCH_SEEDED_NOTE in claim.notes


def test_the_secure_mode_gaussian_follows_its_law_and_resumes_from_its_state():
    """Each entry is four ChaCha20 normals summed and halved: N(0, 1) again (KS and variance
    over 40,000 draws). A checkpoint's state (plain lists, as ``weights_only`` loads them)
    resumes the stream exactly; a seeded checkpoint is refused by a secure run."""
    sampler = SecureModeGaussian()
    z = sampler.standard_normal((200, 200)).ravel()
    assert stats.kstest(z, "norm").pvalue > P_MIN and _variance_pvalue(z) > P_MIN
    first = _dpsgd(secure=True)
    state = first.state_dict()
    expected = _noise(first)
    again = _dpsgd(secure=True)
    again.load_state_dict(state)
    np.testing.assert_array_equal(_noise(again), expected)
    with pytest.raises(InvalidInputError, match="another sampler"):
        _dpsgd(secure=True).load_state_dict(_dpsgd(secure=False).state_dict())


def test_a_secure_classifier_step_takes_its_noise_from_the_secure_sampler():
    """The classifiers' step with ``secure_noise``: the released noise is the secure
    sampler's (its state replayed gives the same step), not the seeded generator's, which is
    left untouched for the shots."""
    config = DPSGDConfig(batch_size=8, epochs=1, lr=1.0, clip=0.5, noise_multiplier=1.3,
                         sampling="poisson", optimizer="sgd")
    x, y = torch.zeros(0, 5), torch.zeros(0, dtype=torch.long)  # empty batch: noise alone

    def step(secure: SecureModeGaussian | None) -> tuple[torch.Tensor, torch.Tensor]:
        torch.manual_seed(0)
        model = TanhMLP(n_features=5, n_classes=3, hidden=(4,))
        before = torch.cat([p.detach().flatten() for p in model.parameters()])
        generator = torch.Generator().manual_seed(7)
        dp_step(model, torch.optim.SGD(model.parameters(), lr=1.0), x, y, config=config,
                generator=generator, secure_noise=secure)
        after = torch.cat([p.detach().flatten() for p in model.parameters()])
        return (before - after) * 8 / (1.3 * 0.5), torch.randn(3, generator=generator)

    sampler = SecureModeGaussian()
    state = sampler.get_state()
    secure_noise, untouched = step(sampler)
    seeded_noise, after_seeded = step(None)
    assert not torch.allclose(secure_noise, seeded_noise)
    torch.testing.assert_close(untouched, torch.randn(3, generator=torch.Generator()
                                                      .manual_seed(7)))
    assert not torch.equal(after_seeded, untouched)  # the seeded step drew from it
    replay = SecureModeGaussian()
    replay.set_state(state)
    torch.testing.assert_close(step(replay)[0], secure_noise)
