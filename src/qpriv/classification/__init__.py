"""Private training of classical, Lipschitz and variational quantum classifiers (second paper).

One front door, :class:`qpriv.classification.estimators.DPSGDClassifier` (``qpriv
train-classifier`` calls it)::

    import qpriv

    # DP-SGD at (eps, delta) = (10, 1e-5), sigma from Opacus's RDP accountant
    clf = qpriv.DPSGDClassifier(model="mlp", clip=1.5, eps=10.0, epochs=5, lr=0.01)
    clf.fit("synthetic")                        # or fit(X, y) on arrays of one's own
    clf.result_.accuracy, clf.claims_[0].label(), clf.predict(X_new)

    # clipping only (no noise), the paper's Figure 2 setting: no claim
    clf = qpriv.DPSGDClassifier(model="quantum", clip=1.0, eps=None, epochs=5, lr=0.03)
    clf.fit("synthetic").result_.gradient_bound

:func:`qpriv.classification.run.train_classifier` stays for one release: the same run by
keyword arguments, its typed :class:`~qpriv.classification.records.ClassifierResult` returned.

The rooms: ``data`` (tasks), ``models`` and ``loader`` (the classifiers and the quantum image
loader), ``dpsgd`` (per-example gradients, clipping, noise, accountant, the loop),
``diagnostics`` (clipping bias, alignment, the MSE decomposition), ``bounds`` (Theorems 3.1
and 3.2, and the analytic gradient bound of the projected Lipschitz MLP that clipless DP-SGD,
``clip="analytic"``, calibrates its noise to), ``request`` (the run's validated arguments),
``privacy`` (the run's claim and the gradient bound it rests on), ``run`` (the run),
``records`` (its typed result), ``tuning`` (the learning rate chosen on a validation split),
``estimators`` (the front door).
"""

from qpriv.classification.bounds import (
    GradientPerturbation,
    circuit_constant,
    clipping_bias_bound,
    gradient_norm_bound,
    gradient_perturbation,
    lipschitz_mlp_gradient_bounds,
    structural_clip,
    theorem_3_2_constant,
)
from qpriv.classification.data import ClassificationData, load_task
from qpriv.classification.diagnostics import (
    gradient_diagnostics,
    simulate_update_mse,
    update_mse_decomposition,
)
from qpriv.classification.dpsgd import (
    DPSGDConfig,
    per_example_gradients,
    train_dpsgd,
)
from qpriv.classification.loader import LoadedImages, fit_loaders
from qpriv.classification.models import (
    GroupNormCNN,
    LipschitzMLP,
    ProjectedLipschitzMLP,
    QuantumClassifier,
    TanhMLP,
    count_parameters,
)
from qpriv.classification.run import train_classifier

__all__ = [
    "ClassificationData",
    "DPSGDConfig",
    "GradientPerturbation",
    "GroupNormCNN",
    "LipschitzMLP",
    "LoadedImages",
    "ProjectedLipschitzMLP",
    "QuantumClassifier",
    "TanhMLP",
    "circuit_constant",
    "clipping_bias_bound",
    "count_parameters",
    "fit_loaders",
    "gradient_diagnostics",
    "gradient_norm_bound",
    "gradient_perturbation",
    "lipschitz_mlp_gradient_bounds",
    "load_task",
    "per_example_gradients",
    "simulate_update_mse",
    "structural_clip",
    "theorem_3_2_constant",
    "train_classifier",
    "train_dpsgd",
    "update_mse_decomposition",
]
