"""What a classifier run claims, and the gradient bound the claim rests on.

:func:`privacy_record` calibrates a private run's noise multiplier sigma with Opacus's RDP
accountant for the run's sample rate, steps and delta, reads the epsilon spent back from the same
accountant, and labels it as a :class:`~qpriv.privacy.claims.PrivacyClaim` with the notes on
what the guarantee does not cover (the diagnostics, the training statistics, the hyper-parameter
choices, the public constants of clipless DP-SGD). :func:`account_spent_steps` re-accounts a run
that stopped early for the steps it took, and :func:`name_the_guard` rewrites the claim of a
clipless run whose guard clipped. :func:`gradient_bound_record` reports the bound on every
per-example gradient: Theorem 3.2's for the quantum models (the private-training paper) and the
analytic bound Delta of the projected 1-Lipschitz MLP (``clip="analytic"``).
"""

from __future__ import annotations

from torch import nn

from qpriv.classification.bounds import clipping_bias_bound, cross_entropy_lipschitz
from qpriv.classification.dpsgd import DPSGDConfig
from qpriv.classification.models import ProjectedLipschitzMLP, QuantumClassifier
from qpriv.classification.request import ANALYTIC_TAU
from qpriv.privacy.claims import COVERS_WEIGHTS, Accounting, Kind, PrivacyClaim, Unit
from qpriv.privacy.dpsgd_accounting import ACCOUNTANTS, dpsgd_epsilon, noise_multiplier_for
from qpriv.privacy.randomness import randomness_note
from qpriv.privacy.samplers import SECURE_MODE, TORCH_SEEDED, sampler_note
from qpriv.training.trainer import DIVERGENCE_NOTE

ACCOUNTANT = ACCOUNTANTS["rdp"]
ACCOUNTING_NOTE = (
    f"{ACCOUNTANT}: sigma from opacus.accountants.utils.get_noise_multiplier("
    "accountant='rdp') for the run's sample rate, steps and delta; eps read back from the "
    "same accountant"
)
PRECLIP_NOTE = (
    "with pre-clipping noise s > 0 the update clips g_i + s z_i, but the diagnostics "
    "(clipping probability, clipping bias, alignment, the update MSE and its parts) are those "
    "of the noise-free per-example gradients g_i; Theorem 3.2's clipping-bias bound does not "
    "apply to the noised gradients either, so it is not reported")
DIAGNOSTICS_NOTE = (
    "the guarantee covers the trained weights: the per-epoch diagnostics (gradient norms, "
    "clipping probability, alignment, bias, update MSE), the training loss and accuracy and the "
    "unclipped reference read every training example without noise; they are research "
    "diagnostics, not private releases")
TRAINING_STATISTICS_NOTE = (
    "the result also states statistics of the training split outside the guarantee: its size "
    "N (declared public: the sample rate q = |B| / N reveals it too), the count of all-zero "
    "inputs of a quantum model and the image loaders' fidelities on the training images")
ANALYTIC_NOTE = (
    "clipless DP-SGD: the sensitivity of each step's gradient sum is the analytic bound Delta "
    "on every per-example gradient (inputs clipped to a public norm, weights and biases "
    "projected after every step); the noise is sigma * Delta, and clipping at Delta stays as a "
    "guard, which clipped no example in this run (p_clip = 0 at every step)")
ARRAYS_NOTE = (
    "arrays given to fit: 20 % of their rows were held out (stratified, seeded) as the test "
    "split, whose accuracy and per-epoch test metrics read them without noise; the guarantee "
    "protects the other rows, the training examples. The classes (the labels' distinct "
    "values, and so the model's outputs) were read from the labels and are taken as public")
ANALYTIC_NOTHING_CLIPPED = "(nothing clipped)"
ANALYTIC_GUARD_NOTE = (
    "clipless DP-SGD: the sensitivity of each step's gradient sum is Delta, the noise sigma * "
    "Delta; the guard clipped at Delta in this run (up to {fraction:.3g} of an epoch's "
    "examples): a per-example gradient passed the analytic bound (float32 rounding at the "
    "bound's edge, or a bound that failed), so the sensitivity still holds but the run is not "
    "free of clipping bias")
ANALYTIC_DERIVATION = (
    "inputs clipped to ||x|| <= X, weights projected onto ||W_k||_2 <= 1 and biases onto "
    "||b_k|| <= B after every step, norm-preserving pair sorting, cross-entropy on f(x) / tau "
    "(sqrt(2) / tau-Lipschitz in f): ||h_{k-1}|| <= X + (k - 1) B, ||dL/dz_k|| <= sqrt(2) / "
    "tau, so ||dL/dW_k||_F <= sqrt(2) / tau (X + (k - 1) B) and ||dL/db_k|| <= sqrt(2) / tau; "
    "Delta = sqrt(sum_k of both squared)")


def analytic_constants_note(*, task: str, input_bound: float, bias_bound: float, tau: float,
                            default_input_bound: bool) -> str:
    """The claim's note on clipless DP-SGD's public constants X, B and tau: their values, and
    which were chosen on training data outside the guarantee (the default X on the synthetic
    task's training inputs; the default tau and the figures' rate on its validation share)."""
    if not default_input_bound:
        origin = "given by the user"
    elif task == "synthetic":
        origin = ("the default, read off this task's training inputs: about the 90th "
                  "percentile of their norms")
    else:
        origin = "the default, read off the synthetic task's training inputs, not this task's"
    return (f"clipless DP-SGD's public constants are not accounted: the input bound "
            f"X = {input_bound:g} ({origin}), the bias bound B = {bias_bound:g} and the "
            f"temperature tau = {tau:g}; the default tau ({ANALYTIC_TAU:g}) and the figures' "
            "rate were chosen on the validation share of the synthetic task's training split")


def privacy_record(config: DPSGDConfig, *, n_train: int, eps: float | None, delta: float,
                   analytic: str | None = None, secret: bool = False,
                   arrays: bool = False) -> dict:
    """sigma and the labelled privacy numbers of the run (``analytic``: clipless DP-SGD, C is
    the analytic bound Delta, and this is the note on its constants,
    :func:`analytic_constants_note`; ``secret``: the run's seed is secret, else recorded;
    ``arrays``: the data are arrays given to fit, :data:`ARRAYS_NOTE`)."""
    if eps is None:
        mode = "clipping only" if config.clip is not None else "unclipped"
        return {"sigma": 0.0, "privacy": f"none ({mode}: no noise, no privacy guarantee)",
                "eps": None, "noise_multiplier": None}
    rate = config.sample_rate(n_train)
    steps = config.epochs * config.steps_per_epoch(n_train)
    sigma = noise_multiplier_for(eps=eps, delta=delta, sample_rate=rate, steps=steps)
    spent = dpsgd_epsilon(noise_multiplier=sigma, sample_rate=rate, steps=steps, delta=delta)
    notes = [
        "hyper-parameter choices (lr, C, epochs, model) are not accounted",
        "preprocessing is per example with fixed constants",
        DIAGNOSTICS_NOTE,
        TRAINING_STATISTICS_NOTE,
        "shot and depolarizing noise of quantum models are not counted as privacy "
        "(the private-training paper, section 3.2)",
        DIVERGENCE_NOTE,
        randomness_note(secret=secret),
        sampler_note(SECURE_MODE if secret else TORCH_SEEDED),
    ]
    if analytic:
        notes += [ANALYTIC_NOTE, analytic]
    if arrays:
        notes.append(ARRAYS_NOTE)
    claim = PrivacyClaim(
        value=spent, delta=delta, kind=Kind.GLOBAL_DP, accounting=Accounting.RIGOROUS,
        unit=Unit.EXAMPLE, covers=COVERS_WEIGHTS, notes=tuple(notes),
        details={"target": eps, "accountant": ACCOUNTANT,
                 "neighbourhood": "add or remove one training example",
                 "sampling": f"Poisson, rate q = {rate:.6g}", "steps": steps,
                 "how": ACCOUNTING_NOTE,
                 "noise_sampler": SECURE_MODE if secret else TORCH_SEEDED})
    return {
        "sigma": sigma,
        "privacy": Kind.GLOBAL_DP,
        "eps": claim.to_json(),
        "noise_multiplier": {"value": sigma, "kind": "DP-SGD noise multiplier",
                             "accounting": "rigorous", "accountant": ACCOUNTANT,
                             "meaning": ("Gaussian noise std sigma * Delta on the sum of the "
                                         f"per-example gradients, Delta their analytic bound "
                                         f"{ANALYTIC_NOTHING_CLIPPED}" if analytic else
                                         "Gaussian noise std sigma * C on the sum of clipped "
                                         "per-example gradients")},
        "privacy_notes": notes,
    }


def account_spent_steps(result: dict, *, history: list[dict], config: DPSGDConfig,
                        n_train: int, delta: float) -> None:
    """A private run that stopped early (diverged) spent only its steps: account those."""
    eps = result.get("eps")
    if not eps or len(history) == config.epochs:
        return
    steps = len(history) * config.steps_per_epoch(n_train)
    eps.update(value=dpsgd_epsilon(noise_multiplier=config.noise_multiplier,
                                   sample_rate=config.sample_rate(n_train), steps=steps,
                                   delta=delta),
               steps=steps, planned_steps=eps["steps"])


def name_the_guard(result: dict) -> None:
    """A clipless run whose guard clipped says so: the notes written before training (that no
    example was clipped) give way to :data:`ANALYTIC_GUARD_NOTE`, and the clipping-bias bound
    0 to None (``gradient_bound.max_epoch_clip_fraction`` counts every step's clipping)."""
    bound = result.get("gradient_bound")
    if not isinstance(bound, dict) or not bound.get("max_epoch_clip_fraction"):
        return
    bound["clipping_bias_bound"] = None
    note = ANALYTIC_GUARD_NOTE.format(fraction=bound["max_epoch_clip_fraction"])
    if result.get("eps"):
        result["eps"]["notes"] = [note if n == ANALYTIC_NOTE else n
                                  for n in result["eps"]["notes"]]
        result["privacy_notes"] = [note if n == ANALYTIC_NOTE else n
                                   for n in result["privacy_notes"]]
        meaning = result["noise_multiplier"]["meaning"]
        result["noise_multiplier"]["meaning"] = meaning.replace(
            ANALYTIC_NOTHING_CLIPPED, "(the guard clipped at Delta: see the notes)")


def gradient_bound_record(net: nn.Module, clip: float | None, *, tau: float,
                          preclip_noise: float, history: list[dict]) -> dict:
    """The result's ``gradient_bound`` of a model with a bound on every per-example gradient
    (the quantum classifiers, Theorem 3.2; the projected Lipschitz MLP, Delta); empty for any
    other model."""
    if isinstance(net, ProjectedLipschitzMLP):
        return {"gradient_bound": _analytic_bound_record(net, history)}
    if not isinstance(net, QuantumClassifier):
        return {}
    constant = net.gradient_constant()
    bound = net.gradient_bound()
    # Theorem 3.2 bounds g_i, not the g_i + s z that pre-clipping noise hands to the clipping
    unbounded = clip is None or preclip_noise > 0
    return {"gradient_bound": {
        "G": constant, "per_example_norm_bound": bound, "theorem": "3.2",
        "clipping_bias_bound": (None if unbounded else
                                clipping_bias_bound(constant=constant, tau=tau, clip=clip)),
    }}


def _analytic_bound_record(net: ProjectedLipschitzMLP, history: list[dict]) -> dict:
    """Delta, its parts, and the per-example norms measured against it (every epoch)."""
    bound = net.gradient_bound()
    measured = [h["max_example_norm"] for h in history if "max_example_norm" in h]
    largest = max(measured) if measured else None
    # the guard's work at every step (each epoch's mean fraction clipped at Delta), where the
    # norms above are only the epoch-end snapshots: any clipping means the bound failed
    clipped = max((h.get("batch_clip_fraction", 0.0) for h in history), default=0.0)
    return {
        "per_example_norm_bound": bound,
        "derivation": ANALYTIC_DERIVATION,
        "loss_lipschitz": cross_entropy_lipschitz(tau=net.tau),
        "input_bound": net.input_bound, "bias_bound": net.bias_bound, "tau": net.tau,
        "weight_norm_bound": net.WEIGHT_NORM_BOUND,
        "final_weight_norms": net.weight_norms(),
        "layers": [{"input_norm": b.input_norm, "output_gradient": b.output_gradient,
                    "weight": b.weight, "bias": b.bias, "total": b.total}
                   for b in net.layer_gradient_bounds()],
        "max_example_norm": largest,
        "max_example_norm_over_bound": None if largest is None else largest / bound,
        "max_epoch_clip_fraction": clipped,
        "clipping_bias_bound": 0.0,
    }
