"""A one-run audit of ``dpsgd``, the forecasting transformer trained by DP-SGD per window.

The one-run game of Steinke, Nasr & Jagielski 2023 ("Privacy auditing with one (1) training
run"; :mod:`qpriv.audits.privacy_dpsgd`) on the LDPT backbone without its quantum path, trained
exactly as ``qpriv train --method dpsgd`` trains it: the run's own plan, DP-SGD step and
training (:func:`qpriv.forecasting.run.plan_run`, :func:`qpriv.forecasting.run.train_planned`
and :func:`qpriv.forecasting.record_dpsgd.dpsgd_strategy`, imported rather than rebuilt so that
the game plays the method's mechanism: per-window clipping at C = 1, Poisson batches, the noise
multiplier from Opacus's accountant, RAdam), on a small model and look-back so that a test
affords it.

**The canaries** are windows with a random look-back and a horizon that is flat except for one
step h, set to ``s b`` (a random sign s, ``b`` = :data:`SPIKE` data standard deviations):
far out of the data in a direction the model fits, so each one's gradient is far above the clip
(clipped, it pushes by exactly C) and sits mostly in the output head's row h, which canaries
of other steps do not share. Each is added to the training windows with probability 1/2; the
validation windows are all the canaries (the auditor's public choice; the best-epoch selection
is post-processing of the private weights), so a late epoch is released.

**The score** is white-box: canary i's clipped gradient ``g_i`` at the initial weights (the
auditor knows the initialisation: it is seeded) against the weights' whole move,
``<theta_0 - theta_released, g_i> / ||g_i||``: how far training went down that canary's
gradient. Canaries of the same step and sign share the head bias's direction, so their scores
are correlated; the guesses and the bound are those of :mod:`qpriv.audits.privacy_dpsgd`.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import torch

from qpriv.audits.privacy_dpsgd import OneRunAudit, one_run_outcome
from qpriv.audits.privacy_dpsgd_linear import CanaryWindows, WindowsWithCanaries
from qpriv.audits.privacy_linear import audit_dataset
from qpriv.errors import require_positive_int
from qpriv.forecasting.methods import method as method_entry
from qpriv.forecasting.model import LDPTForecaster
from qpriv.forecasting.recipe import mse
from qpriv.forecasting.record_dpsgd import dpsgd_strategy
from qpriv.forecasting.run import checked_target, plan_run, train_planned
from qpriv.forecasting.windows import ForecastData, load_forecasting_data
from qpriv.privacy.claims import PrivacyClaim
from qpriv.training.dpsgd import per_example_gradients, trainable_parameters
from qpriv.training.seeding import derive_seed, seed_everything

AUDIT_SHAPE = {"seq_len": 48, "horizon": 24}
"""The game's window shape (the method's mechanism does not depend on it)."""
TINY_MODEL = {"d_model": 16, "n_heads": 2, "d_ff": 32}
"""The backbone's widths in the game: small enough for a test; DP-SGD's guarantee and its
step are the same for every width."""
AUDIT_ROWS = 1000
"""Rows of the game's series (about 630 training windows)."""
SPIKE = 1e3
"""b: the canary's horizon spike, in data standard deviations."""


def spike_windows(data: ForecastData, *, m: int, generator: torch.Generator
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """m canary windows (module docstring): random look-backs, a horizon spike ``s b`` at a
    random step, the same in every channel."""
    x = torch.randn(m, data.seq_len, data.n_channels, generator=generator)
    steps = torch.randint(data.horizon, (m,), generator=generator)
    signs = torch.randint(2, (m,), generator=generator).float() * 2.0 - 1.0
    y = torch.zeros(m, data.horizon, data.n_channels)
    y[torch.arange(m), steps] = SPIKE * signs[:, None]
    return x, y


def _flat(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.reshape(-1) for p in trainable_parameters(model).values()])


def audit_dpsgd_forecast_one_run(*, eps: float = 1.0, canaries: int = 100, guesses: int = 20,
                                 epochs: int = 4, seed: int = 0, confidence: float = 0.95,
                                 data: ForecastData | None = None) -> OneRunAudit:
    """The one-run game on ``dpsgd`` at ``eps`` (its delta is the method's, 1e-6) per window:
    ``canaries`` spike windows, each added with probability 1/2, one training of ``epochs``
    on :data:`TINY_MODEL`, ``guesses`` k a side. ``data``: the auditor's series (default:
    :func:`~qpriv.audits.privacy_linear.audit_dataset` of :data:`AUDIT_ROWS` rows at
    :data:`AUDIT_SHAPE`).

    Raises:
        InvalidInputError: a bad count or budget.
    """
    start = time.perf_counter()
    if data is None:
        data = load_forecasting_data(csv=audit_dataset(seed=0, rows=AUDIT_ROWS), **AUDIT_SHAPE)
    m = require_positive_int("canaries", canaries)
    generator = torch.Generator().manual_seed(seed)
    x_can, y_can = spike_windows(data, m=m, generator=generator)
    member = torch.rand(m, generator=generator) < 0.5
    data = replace(data, train=WindowsWithCanaries(data.train, x_can[member], y_can[member]),
                   val=CanaryWindows(x_can, y_can))
    target = checked_target(method_entry("dpsgd"), eps=eps, eps_total=None, accounting="paper")
    plan = plan_run("dpsgd", target=target, delta=None, seq_len=data.seq_len,
                    horizon=data.horizon, overrides=TINY_MODEL, epochs=epochs, batch_size=None,
                    seed=seed + 1, eval_passes=1, progress=False)
    plan = replace(plan, setup=replace(plan.setup, config=replace(
        plan.setup.config, n_channels=data.n_channels)))
    strategy = dpsgd_strategy(plan.setup, n_train=len(data.train), train_config=plan.train_config)
    # the initial weights, as train_planned draws them: the auditor's reference point
    seed_everything(derive_seed(plan.train_config.seed, "model-init"))
    initial = LDPTForecaster(plan.setup.config)
    grads, _ = per_example_gradients(initial, x_can, y_can, loss_fn=mse)
    trained = train_planned(plan, data=data, strategy=strategy, out=None, resume=False)
    moved = _flat(initial) - _flat(trained.model)
    scores = grads @ moved / grads.norm(dim=1).clamp(min=torch.finfo(grads.dtype).tiny)
    report: dict[str, Any] = strategy.report()
    return one_run_outcome(
        claim=PrivacyClaim.from_json(report["eps"]), scores=scores, member=member,
        guesses=guesses, confidence=confidence,
        canary_words=f"{m} horizon-spike canary windows, scored by the weights' move along "
                     "each one's gradient at the initial weights (white-box)",
        noise_multiplier=report["noise_multiplier"]["value"], steps=report["steps"],
        start=start)
