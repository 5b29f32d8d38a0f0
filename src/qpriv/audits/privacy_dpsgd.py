"""A one-run audit of DP-SGD with many canaries: an empirical lower bound on its epsilon.

Steinke, Nasr & Jagielski 2023, "Privacy auditing with one (1) training run": draw m canary
examples, include each in the training set independently with probability 1/2, train once with
the real trainer (:func:`qpriv.classification.dpsgd.train_dpsgd`: Poisson batches, per-example
clipping, Gaussian noise calibrated by the accountant), score every canary, guess "included" for
the k highest scores and "excluded" for the k lowest, and count the correct guesses v of the r =
2k made. Their main theorem (the eps-DP case is a binomial tail: each guess is no better than
randomised response with accuracy e^eps / (1 + e^eps)) with its delta term (the p-value
``P[Bin(r, q_eps) >= v] + 2 m delta alpha`` of their reference code) bounds the chance of v or
more correct guesses under (eps, delta)-DP; the lower bound is the largest eps whose p-value is
below 1 - confidence. No maintained library ships this bound, so it is written here from the
paper (:func:`one_run_p_value`, :func:`one_run_epsilon`).

Canaries are input-space: points at the edge of the data (a random direction at ``canary_scale``
times the largest training norm; farther out, the tanh layer saturates and their gradients
vanish) with random labels, so each one's gradient is large and its effect on the model shows in
its own loss; the score is how much the training lowered the canary's loss (the initial weights
are the auditor's, as in the paper's setup). Guesses are fixed before training (k), so the count
is an honest test. The clip C = 0.1 is small beside the canaries' gradient norms, so that
clipping is what bounds their effect: a mechanism that skips it lets them through at tens of
times the noise it was calibrated for.

The audit covers the classifiers (``model`` ``mlp``; the DP-SGD of the forecasters shares
:func:`qpriv.training.dpsgd.clip_and_noise`). With a handful of canaries and a few epochs it
runs in seconds; the bound then stays far below a correct claim, and catches a mechanism whose
clipping is skipped (a test plants that bug).
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.stats
import torch
import torch.nn.functional as F  # noqa: N812 (the PyTorch idiom)
from torch import nn

from qpriv.classification.data import ClassificationData, synthetic_task
from qpriv.classification.dpsgd import DPSGDConfig, train_dpsgd
from qpriv.classification.models import ProjectedLipschitzMLP, TanhMLP
from qpriv.classification.request import ANALYTIC_DEFAULTS, ANALYTIC_TAU
from qpriv.errors import InvalidInputError, require_in_range, require_positive_int
from qpriv.privacy.claims import (
    COVERS_WEIGHTS,
    LOWER_BOUND,
    Accounting,
    Kind,
    PrivacyClaim,
    Unit,
)
from qpriv.privacy.dpsgd_accounting import dpsgd_epsilon, noise_multiplier_for

ONE_RUN_MODELS = ("mlp", "clipless")
"""The classifiers the one-run game trains: the tanh MLP (clip C) and the clipless model."""


def one_run_p_value(*, m: int, r: int, v: int, eps: float, delta: float) -> float:
    """The chance of ``v`` or more correct guesses out of ``r`` (``m`` canaries, each included
    with probability 1/2) under an (eps, delta)-DP mechanism: Steinke, Nasr & Jagielski 2023,
    their main theorem and its delta term,
    ``P[Bin(r, q) >= v] + 2 m delta max_i P[v > Bin(r, q) >= v - i] / i`` with
    ``q = e^eps / (1 + e^eps)``."""
    if not 0 <= v <= r <= m:
        raise InvalidInputError(f"guesses must satisfy 0 <= v <= r <= m; got {v}, {r}, {m}")
    q = 1.0 / (1.0 + math.exp(-eps))
    beta = float(scipy.stats.binom.sf(v - 1, r, q))
    pmf = scipy.stats.binom.pmf(np.arange(v - 1, -1, -1), r, q)  # P[Bin = v - i], i = 1..v
    alpha = float(np.max(np.cumsum(pmf) / np.arange(1, v + 1))) if v > 0 else 0.0
    return min(1.0, beta + 2.0 * m * delta * alpha)


def one_run_epsilon(*, m: int, r: int, v: int, delta: float, confidence: float = 0.95) -> float:
    """The largest eps whose :func:`one_run_p_value` is below ``1 - confidence`` (bisection):
    with probability ``confidence``, the mechanism is not (eps', delta)-DP for any eps' below
    it. 0 where the guesses are no evidence."""
    level = 1.0 - require_in_range("confidence", confidence, low=0.0, high=1.0,
                                   high_inclusive=False)
    low, high = 0.0, 1.0
    if one_run_p_value(m=m, r=r, v=v, eps=0.0, delta=delta) >= level:
        return 0.0
    while one_run_p_value(m=m, r=r, v=v, eps=high, delta=delta) < level:
        low, high = high, 2.0 * high
    for _ in range(50):
        mid = (low + high) / 2.0
        if one_run_p_value(m=m, r=r, v=v, eps=mid, delta=delta) < level:
            low = mid
        else:
            high = mid
    return low


@dataclass(frozen=True)
class OneRunAudit:
    """The one-run game's outcome: the bound beside the run's claim, and the guesses."""

    claim: PrivacyClaim
    lower_bound: PrivacyClaim
    canaries: int
    included: int
    guesses: int
    correct: int
    noise_multiplier: float
    steps: int
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"claim": self.claim.to_json(), "lower_bound": self.lower_bound.to_json(),
                "canaries": self.canaries, "included": self.included, "guesses": self.guesses,
                "correct": self.correct, "noise_multiplier": self.noise_multiplier,
                "steps": self.steps, "seconds": self.seconds}


def _canaries(x: torch.Tensor, n_classes: int, *, m: int, radius: float,
              generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """m points in random directions at norm ``radius``, random labels."""
    directions = torch.randn(m, x.shape[1], generator=generator, dtype=x.dtype)
    directions = directions / directions.norm(dim=1, keepdim=True)
    return radius * directions, torch.randint(n_classes, (m,), generator=generator)


def one_run_outcome(*, claim: PrivacyClaim, scores: torch.Tensor, member: torch.Tensor,
                    guesses: int, confidence: float, canary_words: str,
                    noise_multiplier: float, steps: int, start: float) -> OneRunAudit:
    """The game's guesses and bound from the canaries' ``scores`` (higher: more likely
    trained on) and the truth ``member``: "in" for the ``guesses`` highest, "out" for as many
    lowest, the correct ones counted and turned into a lower bound at the claim's delta and
    unit (:func:`one_run_epsilon`)."""
    m, k = int(member.shape[0]), require_positive_int("guesses", guesses)
    if 2 * k > m:
        raise InvalidInputError(f"guesses = {k} needs 2k <= canaries = {m}")
    order = torch.argsort(scores, descending=True)
    correct = int(member[order[:k]].sum()) + int((~member[order[-k:]]).sum())
    delta = claim.delta or 0.0
    value = one_run_epsilon(m=m, r=2 * k, v=correct, delta=delta, confidence=confidence)
    bound = PrivacyClaim(
        value=value, delta=delta, kind=Kind.GLOBAL_DP, accounting=Accounting.RIGOROUS,
        unit=claim.unit, covers=claim.covers,
        notes=(f"a one-run audit (Steinke, Nasr & Jagielski 2023): {canary_words}, "
               f"{correct} of {2 * k} guesses correct",),
        details={"bound": LOWER_BOUND, "confidence": confidence, "audit": "one-run"})
    return OneRunAudit(claim=claim, lower_bound=bound, canaries=m, included=int(member.sum()),
                       guesses=2 * k, correct=correct, noise_multiplier=noise_multiplier,
                       steps=steps, seconds=time.perf_counter() - start)


def _model(name: str, task: ClassificationData) -> tuple[nn.Module, float | None]:
    """The audited network and its clip: the tanh MLP at the game's clip (None: the caller's),
    or the clipless model at its analytic bound Delta."""
    if name == "mlp":
        return TanhMLP(n_features=task.n_features, n_classes=task.n_classes), None
    if name == "clipless":
        net = ProjectedLipschitzMLP(n_features=task.n_features, n_classes=task.n_classes,
                                    tau=ANALYTIC_TAU, **ANALYTIC_DEFAULTS)
        return net, net.gradient_bound()
    raise InvalidInputError(f"model {name!r} is not one of {ONE_RUN_MODELS}")


def audit_dpsgd_one_run(*, eps: float = 1.0, delta: float = 1e-5, canaries: int = 200,
                        guesses: int = 20, train_examples: int = 400, epochs: int = 4,
                        batch_size: int = 64, lr: float = 0.5, clip: float = 0.1,
                        canary_scale: float = 1.0, seed: int = 0,
                        confidence: float = 0.95, model: str = "mlp") -> OneRunAudit:
    """The one-run game on a classifier trained by DP-SGD (SGD, Poisson batches of expected
    size ``batch_size``, ``epochs``) on the synthetic task's first ``train_examples``
    training examples at (``eps``, ``delta``) at the example unit. ``model``: ``mlp``, the
    TanhMLP clipped at ``clip``; ``clipless``, the projected Lipschitz MLP of clipless DP-SGD
    at its defaults (``clip="analytic"``: noise sigma Delta, ``clip`` unused; its canaries sit
    at ``canary_scale`` times the input bound X, where the model clips its inputs).
    ``guesses`` k: the k highest and k lowest scores are guessed (2k <= ``canaries``).

    Raises:
        InvalidInputError: a bad count, budget, model or guess number.
    """
    start = time.perf_counter()
    m = require_positive_int("canaries", canaries)
    if 2 * require_positive_int("guesses", guesses) > m:
        raise InvalidInputError(f"guesses = {guesses} needs 2k <= canaries = {m}")
    gen = torch.Generator().manual_seed(seed)
    task = synthetic_task()
    x_real = task.x_train[:require_positive_int("train_examples", train_examples)].float()
    y_real = task.y_train[:train_examples]
    torch.manual_seed(seed)
    net, analytic = _model(model, task)
    radius = (canary_scale * float(x_real.norm(dim=1).max()) if analytic is None
              else canary_scale * net.input_bound)
    x_can, y_can = _canaries(x_real, task.n_classes, m=m, radius=radius, generator=gen)
    member = torch.rand(m, generator=gen) < 0.5
    x_train = torch.cat([x_real, x_can[member]])
    y_train = torch.cat([y_real, y_can[member]])
    n = int(x_train.shape[0])
    config = DPSGDConfig(batch_size=batch_size, epochs=epochs, lr=lr,
                         clip=clip if analytic is None else analytic,
                         sampling="poisson", optimizer="sgd", noise_multiplier=1.0)
    steps = epochs * config.steps_per_epoch(n)
    sigma = noise_multiplier_for(eps=eps, delta=delta, sample_rate=config.sample_rate(n),
                                 steps=steps)
    config = DPSGDConfig(**{**config.as_dict(), "noise_multiplier": sigma})
    initial = copy.deepcopy(net)
    train_dpsgd(net, x_train=x_train, y_train=y_train, x_test=task.x_test.float(),
                y_test=task.y_test, config=config,
                batch_generator=torch.Generator().manual_seed(seed + 1),
                noise_generator=torch.Generator().manual_seed(seed + 2), diagnostics=False)
    with torch.no_grad():
        scores = (F.cross_entropy(initial(x_can), y_can, reduction="none")
                  - F.cross_entropy(net(x_can), y_can, reduction="none"))
    spent = dpsgd_epsilon(noise_multiplier=sigma, sample_rate=config.sample_rate(n),
                          steps=steps, delta=delta)
    claim = PrivacyClaim(value=spent, delta=delta, kind=Kind.GLOBAL_DP,
                         accounting=Accounting.RIGOROUS, unit=Unit.EXAMPLE,
                         covers=COVERS_WEIGHTS,
                         details={"accountant": "rdp", "noise_multiplier": sigma,
                                  "sample_rate": config.sample_rate(n), "steps": steps,
                                  "clip": config.clip,
                                  "clip_mode": "fixed" if analytic is None else
                                  "analytic (clipless: C = Delta)"})
    return one_run_outcome(claim=claim, scores=scores, member=member, guesses=guesses,
                           confidence=confidence, canary_words=f"{m} input canaries",
                           noise_multiplier=sigma, steps=steps, start=start)
