"""Private classifiers as estimators: configure, ``fit(task or X, y)``, ``predict(X)``.

One class, :class:`DPSGDClassifier`, for every model (``mlp``, ``lipschitz``, ``quantum``,
``cnn``, ``quantum-image``) rather than one class per family: the families share one algorithm
(DP-SGD: Poisson batches, per-example clipping, Gaussian noise, Opacus's accountant) and all
of its settings, and differ only in the module it trains, as Opacus's
``PrivacyEngine.make_private(module=...)`` takes any module; the settings of one model
(``tau``, ``n_layers``, ``shots`` of the quantum models, ``hidden`` of the MLPs, the bounds of
``clip="analytic"``) are checked against the model when ``fit`` validates them, with the same
messages as ``qpriv train-classifier``.

The estimator is a scikit-learn estimator (``sklearn.base.BaseEstimator`` and
``ClassifierMixin``: ``get_params`` / ``set_params``, ``clone``, its ``repr``): ``fit``
returns the estimator, and what fitting learns ends in ``_`` (``result_``, ``claims_``,
``model_``, ``classes_``). ``fit`` runs exactly what ``qpriv train-classifier`` runs (the
command calls this class): the same request, the same run
(:func:`qpriv.classification.run.run_request`), the same files with ``out_dir``.
``save(dir)`` writes the result and the weights alone (no checkpoint, whose generator states
would let the noise be replayed), which ``qpriv.load`` reads back.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin
from torch import nn

from qpriv.classification.data import ARRAYS, DEFAULT_IMAGE_SIZE, ClassificationData, array_task
from qpriv.classification.dpsgd import evaluate
from qpriv.classification.records import ClassifierResult
from qpriv.classification.request import DEFAULT_LR, ClassifierRequest, validate_request
from qpriv.classification.run import build_model, loaded_images, read_weights, run_request
from qpriv.classification.tuning import tune_learning_rate
from qpriv.errors import InvalidInputError
from qpriv.privacy.budget import CLASSIFIER_DELTA
from qpriv.privacy.claims import PrivacyClaim
from qpriv.runs.files import atomic_torch_save, atomic_write_json, read_json_object
from qpriv.runs.layout import CHECKPOINT_FILE, CLASSIFIER_MODEL_FILE, RESULT_FILE

__all__ = ["DPSGDClassifier", "is_classifier_folder", "load"]

class DPSGDClassifier(ClassifierMixin, BaseEstimator):
    """A classifier trained with DP-SGD (see the module docstring for why one class).

    Settings (keyword-only; :func:`qpriv.classification.run.train_classifier` documents each):
    ``model``, ``eps`` (None: no noise and no claim; ``claims_`` is then empty), ``delta``,
    ``clip`` (C, ``"structural"``, ``"analytic"`` or None), ``batch``, ``epochs``, ``lr``
    (None: the default rate, or the one ``lr_grid`` tunes on a validation split of the training
    data, outside the guarantee), ``seed`` (None: a secret seed, recorded nowhere, for a
    release), ``optimizer``, ``preclip_noise``, ``tau``, ``n_layers``, ``depolarizing``,
    ``shots``, ``hidden``, ``input_bound``, ``bias_bound``, ``image_size``, ``loader_layers``,
    ``loader_steps``, ``unclipped_reference``, ``diagnostics``, ``threads``.

    Examples:
        Seconds: two epochs of a small MLP on the paper's synthetic task at eps = 1, and on
        arrays of one's own (any labels; predictions come back in them):

        >>> import numpy as np, qpriv
        >>> clf = qpriv.DPSGDClassifier(model="mlp", eps=1.0, epochs=2, threads=1)
        >>> clf = clf.fit("synthetic")
        >>> claim = clf.claims_[0]           # Opacus's RDP accountant, for the steps taken
        >>> print(claim.kind, claim.unit, claim.value <= 1.0)
        global (eps, delta)-DP example True
        >>> clf.result_.accuracy > 0.5       # on the task's held-out test split
        True
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(400, 4)); y = np.where(X[:, 0] > 0, "up", "down")
        >>> own = qpriv.DPSGDClassifier(model="mlp", eps=1.0, epochs=2, threads=1).fit(X, y)
        >>> own.classes_.tolist(), own.predict(X[:3]).tolist()
        (['down', 'up'], ['up', 'down', 'down'])
        >>> own.predict_proba(X[:3]).shape, own.score(X, y) > 0.8
        ((3, 2), True)
    """

    def __init__(self, *, model: str = "mlp", eps: float | None = 1.0,
                 delta: float = CLASSIFIER_DELTA, clip: float | str | None = 1.0,
                 batch: int = 64, epochs: int = 20, lr: float | None = None,
                 lr_grid: Sequence[float] | None = None, seed: int | None = 2024,
                 optimizer: str = "adam", preclip_noise: float = 0.0,
                 tau: float | None = None, n_layers: int | None = None,
                 depolarizing: float = 0.0, shots: int | None = None,
                 hidden: Sequence[int] = (32, 32), input_bound: float | None = None,
                 bias_bound: float | None = None, image_size: int = DEFAULT_IMAGE_SIZE,
                 loader_layers: int = 3, loader_steps: int = 200,
                 unclipped_reference: bool = False, diagnostics: bool = True,
                 threads: int | None = None) -> None:
        # scikit-learn's contract: the settings stored as given, checked when fit runs
        self.model, self.eps, self.delta, self.clip = model, eps, delta, clip
        self.batch, self.epochs, self.lr, self.lr_grid, self.seed = batch, epochs, lr, lr_grid, seed
        self.optimizer, self.preclip_noise, self.tau = optimizer, preclip_noise, tau
        self.n_layers, self.depolarizing, self.shots = n_layers, depolarizing, shots
        self.hidden, self.input_bound, self.bias_bound = hidden, input_bound, bias_bound
        self.image_size, self.loader_layers = image_size, loader_layers
        self.loader_steps, self.unclipped_reference = loader_steps, unclipped_reference
        self.diagnostics, self.threads = diagnostics, threads

    def set_params(self, **params: Any) -> DPSGDClassifier:
        """Change settings before the next ``fit`` (scikit-learn's); an unknown one is
        refused in one line that lists the settings."""
        unknown = sorted(set(params) - set(self.get_params()))
        if unknown:
            raise InvalidInputError(f"{type(self).__name__} has no setting {unknown}; its "
                                    f"settings are {sorted(self.get_params())}")
        return super().set_params(**params)

    def fit(self, X: str | Any, y: Any = None, *, out_dir: str | Path | None = None,
            resume: bool = False, progress: bool = False) -> DPSGDClassifier:
        """Train on a task, ``fit("synthetic")`` (``digits``, ``folder:PATH``), or on arrays,
        ``fit(X, y)`` (task ``arrays``: :func:`qpriv.classification.data.array_task`; 20 % of
        the rows, stratified, are held out as the test split ``result_.accuracy`` is measured
        on, and are outside the guarantee, which protects the training rows). With
        ``out_dir`` the run is written there as ``qpriv train-classifier --out`` writes it
        (``resume`` continues it); ``progress`` prints a line per epoch on stderr. Returns the
        estimator.

        Raises:
            InvalidInputError: bad data or settings, before anything is trained or written.
        """
        data = _data(X, y)
        arguments = self._run_arguments()
        lr, tuning = self.lr, None
        if self.lr_grid is not None:
            tuning = tune_learning_rate(grid=self.lr_grid, lr=lr, task=data,
                                        out_dir=out_dir, resume=resume, **arguments)
            lr = tuning["lr"]
            if progress:
                trials = ", ".join(f"{t['lr']:g}: {t['validation_accuracy']:.3f}"
                                   for t in tuning["trials"])
                print(f"learning rate {lr:g} chosen on the validation split ({trials})",
                      file=sys.stderr)
        given = data if isinstance(data, ClassificationData) else None
        request = validate_request(
            **arguments, task=data if given is None else given.name,
            lr=DEFAULT_LR if lr is None else lr, validation=None,
            unclipped_reference=self.unclipped_reference)
        trained = run_request(request, given=given, diagnostics=self.diagnostics,
                              out_dir=out_dir, resume=resume, lr_tuning=tuning,
                              progress=progress)
        self._adopt(trained.result, trained.model, request, folder=out_dir)
        self.lr_tuning_: dict | None = tuning
        return self

    def _run_arguments(self) -> dict[str, Any]:
        """The settings that are keyword arguments of
        :func:`~qpriv.classification.run.train_classifier` and of the learning-rate tuning's
        trials (all but the task, ``lr`` and what only the final run takes)."""
        return {key: value for key, value in self.get_params().items()
                if key not in ("lr", "lr_grid", "diagnostics", "unclipped_reference")}

    def _adopt(self, result: ClassifierResult, model: nn.Module | None,
               request: ClassifierRequest, *, folder: str | Path | None = None) -> None:
        """Keep what a run gave (``model`` None: a finished run read back that kept no
        weights, whose result stands but which cannot predict)."""
        self._no_weights = None if model is not None else (
            f"the finished run in {folder} kept no weights ({CLASSIFIER_MODEL_FILE} or "
            f"{CHECKPOINT_FILE}): it states its result but cannot predict; train it again into "
            "a fresh folder")
        self.result_ = result
        self.model_ = model
        self.request_ = request
        self.claims_: tuple[PrivacyClaim, ...] = result.claims
        task = result.raw["task"]
        labels = task.get("labels") if task.get("task") == ARRAYS else None
        self.classes_ = np.asarray(labels if labels is not None
                                   else range(int(task["n_classes"])))
        self.feature_shape_ = tuple(int(n) for n in task["feature_shape"])

    def _fitted(self) -> DPSGDClassifier:
        if not hasattr(self, "model_"):
            raise InvalidInputError(f"this {type(self).__name__} is not fitted yet: call "
                                    "fit(task) or fit(X, y) first (or qpriv.load(folder))")
        if self._no_weights:
            raise InvalidInputError(self._no_weights)
        return self

    @torch.no_grad()
    def _logits(self, X: Any) -> torch.Tensor:
        """The model's logits for ``X`` (exact read-out: a model with ``shots`` predicts from
        the expectations its S-shot estimates scatter around)."""
        return self._fitted().model_(self._inputs(X))

    def _inputs(self, X: Any) -> torch.Tensor:
        """``X`` as the model's inputs: float32 rows of the fitted feature shape (images
        loaded by their own loaders for ``quantum-image``)."""
        try:
            x = torch.as_tensor(np.asarray(X, dtype=np.float32))
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(f"X is not a numeric array ({exc})") from None
        if tuple(x.shape[1:]) != self.feature_shape_ or x.shape[0] < 1:
            raise InvalidInputError(f"X has shape {tuple(x.shape)}; this classifier was fitted "
                                    f"on rows of shape {self.feature_shape_}: give (N, "
                                    f"{', '.join(map(str, self.feature_shape_))}), N >= 1")
        if self.request_.model == "quantum-image":
            return loaded_images(self.request_, x).states
        return x

    def predict_proba(self, X: Any) -> np.ndarray:
        """The class probabilities, softmax of the logits: (N, classes), columns in the order
        of ``classes_`` (a row is NaN where the model's outputs are not finite)."""
        return torch.softmax(self._logits(X), dim=1).numpy()

    def predict(self, X: Any) -> np.ndarray:
        """The most probable class of each row of ``X``, in ``classes_``' labels.

        Raises:
            InvalidInputError: the model's outputs for a row are not finite (training
                diverged): it predicts no class.
        """
        logits = self._logits(X)
        broken = ~torch.isfinite(logits).all(dim=1)
        if bool(broken.any()):
            raise InvalidInputError(
                f"the model's outputs for {int(broken.sum())} rows are not finite (training "
                f"diverged at epoch {self.result_.diverged_epoch}): it predicts no class; "
                "train again with a smaller lr")
        return self.classes_[logits.argmax(dim=1).numpy()]

    def score(self, X: Any, y: Any) -> float:
        """The accuracy on (X, y), as a run measures its test accuracy (a row whose outputs
        are not finite counts as wrong)."""
        labels = np.asarray(y)
        known = np.isin(labels, self._fitted().classes_)
        if labels.shape != (len(np.asarray(X)),) or not known.all():
            raise InvalidInputError(f"y must hold one label per row of X, each one of "
                                    f"{self.classes_.tolist()}")
        index = torch.as_tensor(np.searchsorted(self.classes_, labels))  # classes_ sorted
        return evaluate(self.model_, self._inputs(X), index)["accuracy"]

    def save(self, directory: str | Path) -> Path:
        """Write the result (``result.json``) and the trained weights (``classifier.pt``) to
        ``directory``, which must not exist: what the claim covers and nothing else (no
        config.json, no checkpoint). ``qpriv.load`` reads it back and ``qpriv report`` shows
        it."""
        target = Path(directory).expanduser()
        if target.exists():
            raise InvalidInputError(f"{target} exists; save into a new folder")
        self._fitted()
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
        atomic_torch_save(staging / CLASSIFIER_MODEL_FILE, self.model_.state_dict())
        atomic_write_json(staging / RESULT_FILE, self.result_.to_json())
        os.replace(staging, target)  # the folder appears whole or not at all
        return target


def is_classifier_folder(directory: str | Path) -> bool:
    """Whether ``directory`` holds a classifier run or a saved classifier (its result names a
    ``task`` and a model by name)."""
    path = Path(directory).expanduser() / RESULT_FILE
    if not path.is_file():
        return False
    result = read_json_object(path, fix="train the run again into a fresh folder")
    return "task" in result and isinstance(result.get("model"), str)


def load(directory: str | Path) -> DPSGDClassifier:
    """The fitted :class:`DPSGDClassifier` of a saved classifier or a finished
    ``qpriv train-classifier --out`` run: its settings and result from ``result.json``, its
    model rebuilt and its weights read back.

    Raises:
        InvalidInputError: not such a folder, or its files are damaged.
    """
    path = Path(directory).expanduser()
    if not is_classifier_folder(path):
        raise InvalidInputError(f"{path} holds no classifier: expected {RESULT_FILE} of "
                                "qpriv train-classifier --out or DPSGDClassifier.save")
    fix = "train the run again into a fresh folder"
    result = ClassifierResult.from_json(read_json_object(path / RESULT_FILE, fix=fix))
    request = ClassifierRequest.from_json(result.request)
    task = result.raw["task"]
    weights = read_weights(path)
    if weights is None:
        raise InvalidInputError(f"{path} holds no classifier weights ({CLASSIFIER_MODEL_FILE} "
                                f"or {CHECKPOINT_FILE}): its result stands, but there is no "
                                "model to load; train it again into a fresh folder")
    model = build_model(request, n_features=int(np.prod(task["feature_shape"])),
                        n_classes=int(task["n_classes"]), generator=None)
    try:
        model.load_state_dict(weights)
    except RuntimeError as exc:
        raise InvalidInputError(f"{path}: the weights do not fit the model its result records "
                                f"({exc}); {fix}") from None
    estimator = DPSGDClassifier()
    estimator.set_params(**{key: getattr(request, key) for key in estimator.get_params()
                            if hasattr(request, key)})  # the run's settings, defaults filled
    estimator._adopt(result, model, request, folder=path)
    estimator.lr_tuning_ = result.raw.get("lr_tuning")
    return estimator


def _data(X: Any, y: Any) -> str | ClassificationData:
    """``fit``'s data: a task's name, or the arrays as task ``arrays``."""
    if isinstance(X, str):
        if y is not None:
            raise InvalidInputError(f"fit({X!r}, y): a task's name brings its own labels; "
                                    "give y only with an array X")
        return X
    if y is None:
        raise InvalidInputError("fit(X) needs the labels: fit(X, y), or a task's name such "
                                "as fit('synthetic')")
    return array_task(X, y)
