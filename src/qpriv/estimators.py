"""``qpriv.load``: the fitted estimator of any saved folder, forecaster or classifier.

The two families sit side by side and blind to each other (``qpriv.forecasting``,
``qpriv.classification``), each with its own estimators and its own ``load``; this module sits
above both and sends a folder to the family that wrote it (a classifier's result names a task
and a model by name, a forecaster's a method).
"""

from __future__ import annotations

from pathlib import Path

from qpriv.classification import estimators as classifiers
from qpriv.classification.estimators import DPSGDClassifier
from qpriv.forecasting import estimators as forecasters
from qpriv.forecasting.estimators import Forecaster

__all__ = ["load"]


def load(directory: str | Path, *,
         data_dir: str | Path | None = None) -> Forecaster | DPSGDClassifier:
    """The fitted estimator of the run (or saved model) in ``directory``: a
    :class:`~qpriv.classification.estimators.DPSGDClassifier` for a classifier
    (:func:`qpriv.classification.estimators.load`), otherwise the forecaster of its method
    (:func:`qpriv.forecasting.estimators.load`; ``data_dir`` finds a named dataset's file).

    Examples:
        Seconds: a classifier saved and read back predicts the same:

        >>> import tempfile, numpy as np, qpriv
        >>> X = np.random.default_rng(1).normal(size=(200, 3)); y = (X.sum(axis=1) > 0)
        >>> clf = qpriv.DPSGDClassifier(eps=1.0, epochs=1, threads=1).fit(X, y)
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     again = qpriv.load(clf.save(folder + "/clf"))
        ...     (again.predict_proba(X) == clf.predict_proba(X)).all(), again.claims_ == clf.claims_
        (np.True_, True)

    Raises:
        InvalidInputError: the folder holds neither, or its files are damaged.
    """
    if classifiers.is_classifier_folder(directory):
        return classifiers.load(directory)
    return forecasters.load(directory, data_dir=data_dir)
