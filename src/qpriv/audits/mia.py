"""Loss-threshold membership inference (the LDPT paper, section 7.11, Table 9).

The attacker sees the per-sample loss of each window under the trained model and guesses
whether the window was a training window (member) or not (non-member). As in the paper, a
logistic regression classifier on the per-sample MSE losses of (up to) 1000 training and 1000
test windows predicts membership, and the report gives its accuracy, its AUC and the loss gap;
beyond the paper, also the true-positive rate at 1 % and 0.1 % false-positive rate (the regime
that matters for a privacy attack: confident hits on a few records).

Measurement choices, each stated in the result:

* The attack model is scikit-learn's ``LogisticRegression`` on the log of the loss (a monotone
  map: with one feature the classifier is a threshold on the loss, and the log keeps heavy
  tails, e.g. of a diverged model, from dominating its fit). It is evaluated by stratified
  k-fold cross-validation: every window is scored by a classifier that did not see it, and
  accuracy, AUC and the ROC curve are computed from those out-of-fold scores.
* LDPT's predictions are stochastic; the attack sees the losses of one pass whose noise is
  seeded, so a result is reproducible.
* The loss gap is Table 9's: mean member (train) loss minus mean non-member (test) loss;
  negative when the model fits its training windows better.
* Members are training windows and non-members test windows, as in the paper. On a time
  series the two come from different periods, so the attack also sees any shift between the
  periods, not only memorisation, and what it measures is this attack's success: a stronger
  attack may reveal more, so no number here is a privacy guarantee. Non-members share no row
  with the training split (on a user's CSV with a short split the first test windows'
  look-backs can reach into it; those are left out).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score, roc_curve
from sklearn.model_selection import StratifiedKFold, cross_val_predict
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from qpriv.errors import ArgumentError, InvalidInputError, require_in_range, require_positive_int
from qpriv.forecasting.artifacts import LinearRun, LoadedRun, load_run
from qpriv.forecasting.windows import WindowDataset
from qpriv.training.evaluation import per_window_losses
from qpriv.training.seeding import derive_seed

#: Table 9's sample size: 1000 training and 1000 test windows.
PAPER_N = 1000
#: False-positive rates at which the true-positive rate is reported (beyond the paper).
TARGET_FPRS = (0.01, 0.001)
DEFAULT_FOLDS = 5
DEFAULT_SEED = 2024


MEANING = ("these are one attack's measurements, not a privacy guarantee: a stronger attack may "
           "reveal more, and a weak result does not bound what the model leaks")

@dataclass(frozen=True)
class TprAtFpr:
    """The ROC curve's true-positive rate at a target false-positive rate.

    ``tpr`` is the highest TPR among the ROC points with FPR <= ``target_fpr``; ``achieved_fpr``
    the FPR of that point. ``resolved`` is False when the target lies below the curve's
    resolution 1 / n_nonmembers: then only FPR = 0 is within the target, and ``tpr`` is the TPR
    at FPR = 0.
    """

    target_fpr: float
    tpr: float
    achieved_fpr: float
    resolved: bool


def tpr_at_fpr(labels: np.ndarray, scores: np.ndarray, target_fpr: float) -> TprAtFpr:
    """TPR at ``target_fpr`` from the ROC curve of ``scores`` (higher = member; labels 1 =
    member, 0 = non-member), every threshold kept (``drop_intermediate=False``)."""
    target_fpr = require_in_range("target_fpr", target_fpr, low=0.0, high=1.0)
    labels = np.asarray(labels)
    fpr, tpr, _ = roc_curve(labels, scores, drop_intermediate=False)
    within = fpr <= target_fpr + 1e-15
    best = int(np.flatnonzero(within)[np.argmax(tpr[within])])
    n_negative = int(np.sum(labels == 0))
    return TprAtFpr(target_fpr=target_fpr, tpr=float(tpr[best]), achieved_fpr=float(fpr[best]),
                    resolved=target_fpr >= 1.0 / n_negative)


@dataclass(frozen=True)
class MIAResult:
    """A loss-threshold membership inference attack (Table 9 and beyond).

    ``accuracy`` and ``auc`` are those of the cross-validated logistic regression (chance:
    0.5); ``accuracy_std_error`` is sqrt(acc (1 - acc) / N) and ``auc_null_std`` the standard
    deviation of the AUC of a useless attack at these sample sizes (Mann-Whitney:
    sqrt((n1 + n2 + 1) / (12 n1 n2))), so a reader can tell a real signal from chance.
    ``auc_loss_threshold`` is the AUC of the raw loss as the score (lower loss = member; the
    attack of Yeom et al. with no fitted parameter), a cross-check of ``auc``.
    ``loss_gap`` = ``member_loss_mean - nonmember_loss_mean`` (Table 9's Train - Test MSE).
    """

    n_members: int
    n_nonmembers: int
    folds: int
    seed: int
    accuracy: float
    accuracy_std_error: float
    auc: float
    auc_null_std: float
    auc_loss_threshold: float
    loss_gap: float
    member_loss_mean: float
    nonmember_loss_mean: float
    tpr_at_fpr: tuple[TprAtFpr, ...]
    attack: str = ("scikit-learn LogisticRegression on log(per-window MSE), scored out of "
                   "fold by stratified k-fold cross-validation")
    notes: tuple[str, ...] = field(default=())

    def as_dict(self) -> dict:
        """A JSON-ready dict."""
        out = asdict(self)
        out["tpr_at_fpr"] = [asdict(t) for t in self.tpr_at_fpr]
        out["notes"] = list(self.notes)
        return out


def _check_losses(name: str, losses: np.ndarray | torch.Tensor) -> np.ndarray:
    values = np.asarray(losses, dtype=np.float64)
    if values.ndim != 1 or values.size == 0:
        raise InvalidInputError(f"{name} must be a non-empty 1-D array, got shape {values.shape}")
    if not np.all(np.isfinite(values)) or np.any(values < 0):
        raise InvalidInputError(
            f"{name} holds a negative, NaN or infinite value; per-sample losses are finite "
            "and >= 0"
        )
    return values


def membership_inference(
    member_losses: np.ndarray | torch.Tensor,
    nonmember_losses: np.ndarray | torch.Tensor,
    *,
    seed: int = DEFAULT_SEED,
    folds: int = DEFAULT_FOLDS,
) -> MIAResult:
    """The loss-threshold attack on given per-sample losses (members: training samples).

    Args:
        member_losses, nonmember_losses: per-sample losses (finite, >= 0), the same number of
            each (a balanced attack, as in the paper; chance accuracy is then 0.5).
        seed: the fold assignment's seed.
        folds: k of the stratified k-fold cross-validation (2 <= k <= samples per class).

    Raises:
        InvalidInputError: empty, non-finite or negative losses, unequal counts, or a ``folds``
            outside [2, samples per class].
    """
    members = _check_losses("member_losses", member_losses)
    nonmembers = _check_losses("nonmember_losses", nonmember_losses)
    if members.size != nonmembers.size:
        raise InvalidInputError(
            f"the attack is balanced: got {members.size} member and {nonmembers.size} "
            "non-member losses; subsample the larger set to the size of the smaller"
        )
    n = members.size
    folds = require_positive_int("folds", folds)
    if not 2 <= folds <= n:
        raise ArgumentError(
            f"{{folds}} = {folds} is outside [2, {n}]: stratified k-fold needs at least 2 "
            f"folds and at most as many as there are samples per class ({n})"
        )
    losses = np.concatenate([members, nonmembers])
    labels = np.concatenate([np.ones(n, dtype=np.int64), np.zeros(n, dtype=np.int64)])
    features = np.log(np.maximum(losses, np.finfo(np.float64).tiny))[:, None]
    attack = make_pipeline(StandardScaler(), LogisticRegression())
    splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed % 2**32)
    scores = cross_val_predict(attack, features, labels, cv=splitter,
                               method="predict_proba")[:, 1]
    accuracy = float(np.mean((scores > 0.5) == labels))
    notes = []
    rates = tuple(tpr_at_fpr(labels, scores, target) for target in TARGET_FPRS)
    for rate in rates:
        if not rate.resolved:
            notes.append(
                f"TPR at {rate.target_fpr:g} FPR is below the resolution 1/{n} of {n} "
                f"non-members: reported at FPR = 0 ({rate.tpr:.4g}); use n >= "
                f"{math.ceil(1 / rate.target_fpr)} to resolve it"
            )
    return MIAResult(
        n_members=n, n_nonmembers=n, folds=folds, seed=seed,
        accuracy=accuracy, accuracy_std_error=math.sqrt(accuracy * (1 - accuracy) / (2 * n)),
        auc=float(roc_auc_score(labels, scores)),
        auc_null_std=math.sqrt((2 * n + 1) / (12 * n * n)),
        auc_loss_threshold=float(roc_auc_score(labels, -losses)),
        loss_gap=float(members.mean() - nonmembers.mean()),
        member_loss_mean=float(members.mean()), nonmember_loss_mean=float(nonmembers.mean()),
        tpr_at_fpr=rates, notes=tuple(notes),
    )


def window_losses(run: LoadedRun | LinearRun, windows: WindowDataset, *, index: np.ndarray,
                  seed: int) -> np.ndarray:
    """The MSE of each selected window over its (H, C) targets under the run's model: one
    seeded pass of the LDPT backbone (:func:`~qpriv.training.evaluation.per_window_losses`), or
    the linear kernel's deterministic forecast."""
    if isinstance(run, LoadedRun):
        return per_window_losses(run.model, windows, index=index, seed=seed).numpy()
    x, y = windows.windows(torch.as_tensor(index, dtype=torch.long))
    forecast = run.model.predict(x.double().numpy())
    return np.square(forecast - y.double().numpy()).mean(axis=(1, 2))


def mia_on_run(
    run: str | Path | LoadedRun | LinearRun,
    *,
    n: int = PAPER_N,
    seed: int = DEFAULT_SEED,
    folds: int = DEFAULT_FOLDS,
    data_dir: str | Path | None = None,
) -> dict:
    """The Table 9 attack on a finished forecasting run, of the LDPT backbone or of the linear
    family (whose weights the attack reads are what dp-linear's guarantee covers).

    Members are ``n`` of the run's training windows (the windows it was trained on, with its
    window limit), non-members ``n`` of the test windows that share no row with the training
    split (every test window on ETT); both sets are drawn at random with ``seed`` and cut to
    the smaller split's size when a split holds fewer than ``n`` (the result says how many). The
    per-window losses come from one pass of the best-validation model with its noise seeded
    from ``seed`` (a linear kernel draws no noise).

    Returns:
        ``{"run", "method", "eps_per_pass", "horizon", "n_requested", "attack": MIAResult
        as a dict, "notes"}``; ``eps_per_pass`` is the run's labelled claim (None without one).

    Raises:
        InvalidInputError: a run directory that is not a finished run (see
            :func:`~qpriv.forecasting.artifacts.load_run`), data that cannot be found, or
            ``n`` < ``folds``.
    """
    n = require_positive_int("n (windows per class)", n)
    loaded = run if isinstance(run, (LoadedRun, LinearRun)) else load_run(run, data_dir=data_dir)
    data = loaded.data(limit_eval=False)
    # a non-member shares no row with the training split: on a short user CSV the first test
    # windows' look-backs can reach back into it (on ETT the validation split lies between)
    train_end = data.split.train[1]
    unseen = np.flatnonzero(data.test.starts.cpu().numpy() + data.test.row_offset >= train_end)
    n_used = min(n, len(data.train), len(unseen))
    if n_used < folds:
        raise InvalidInputError(
            f"only {n_used} windows per class are available (train {len(data.train)}, test "
            f"windows sharing no row with the training split {len(unseen)}); the {folds}-fold "
            f"cross-validation needs at least {folds}"
        )
    rng = np.random.default_rng(derive_seed(seed, "mia-sample"))
    member_index = np.sort(rng.choice(len(data.train), size=n_used, replace=False))
    nonmember_index = np.sort(rng.choice(unseen, size=n_used, replace=False))
    members = window_losses(loaded, data.train, index=member_index,
                            seed=derive_seed(seed, "mia-members"))
    nonmembers = window_losses(loaded, data.test, index=nonmember_index,
                               seed=derive_seed(seed, "mia-nonmembers"))
    attack = membership_inference(members, nonmembers, seed=seed, folds=folds)

    notes = []
    claim = loaded.result.released_claim
    if claim is not None and not loaded.result.covers_weights:
        notes.append("the run's epsilon holds for what passes its mechanism (the released "
                     "features or inputs), not for the trained weights this attack reads: the "
                     "forecast targets reach them without the mechanism")
    if n_used < n:
        notes.append(
            f"{n_used} windows per class, not the {n} asked: the run has {len(data.train)} "
            f"training and {len(data.test)} test windows"
        )
    return {
        "run": str(loaded.run_dir),
        "method": loaded.result.method,
        "eps_per_pass": loaded.result.raw.get("eps_per_pass"),
        "privacy": loaded.result.privacy,
        "eps": loaded.result.raw.get("eps") or loaded.result.raw.get("eps_total"),
        "horizon": loaded.request.horizon,
        "n_requested": n,
        "protocol": ("members: the run's training windows; non-members: test windows (a later "
                     "period of the series, so period shift adds to what the attack sees)"),
        "meaning": MEANING,
        "attack": attack.as_dict(),
        "notes": notes + list(attack.notes),
    }
