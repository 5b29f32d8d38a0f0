"""qpriv: private machine learning with privacy noise calibrated through simulated quantum channels.

Two papers define the library (see README.md): LDPT, low-dimensional feature-path privacy for
transformer forecasting (qpriv.forecasting, calibrated by qpriv.privacy through qpriv.quantum),
and private training of classical, Lipschitz and variational quantum classifiers
(qpriv.classification). The command line (qpriv.cli, the qpriv console script) calls the same
functions.

Entry points:

    DPLinearForecaster  the recommended private forecaster as an estimator: fit(data) (a
                        dataset's name, a CSV, a DataFrame), predict(), claims_, save(dir);
                        PublicForecaster (the floor), RidgeForecaster (the non-private
                        reference) and TransformerForecaster (the LDPT backbone's methods) alike
                        (qpriv.forecasting.estimators)
    DPSGDClassifier     a classifier trained with DP-SGD as an estimator, any model (mlp,
                        lipschitz, quantum, cnn, quantum-image): fit(task or X, y),
                        predict(X), predict_proba(X), score(X, y), claims_, save(dir)
                        (qpriv.classification.estimators.DPSGDClassifier)
    load                the fitted estimator of a saved folder, forecaster or classifier
                        (qpriv.estimators.load)
    train_forecaster    train and test one forecaster (LDPT or a baseline); the result, a
                        typed ForecastResult, holds every privacy number as a PrivacyClaim
                        (qpriv.forecasting.run.run_forecast)
    load_run            read a finished forecasting run back: model, config, result, data;
                        its forecast(frame or CSV) gives the next H values in the data's own
                        units (qpriv.forecasting.artifacts.load_run)
    CsvFormat           how a CSV is written where it is not the default (date column, date
                        format, separator): train_forecaster(csv=..., csv_format=...)
                        (qpriv.forecasting.csv_input.CsvFormat)
    ForecastingRun      what load_run returns, for either family (the LDPT backbone or the
                        linear forecasters): forecast, forecast_report, claims, data
                        (qpriv.forecasting.inference.ForecastingRun)
    Forecast            one forecast with its source, passes and the run's privacy claims
                        (ForecastingRun.forecast_report; qpriv.forecasting.inference.Forecast)
    train_classifier    DP-SGD (or clipping only) on a classical, Lipschitz or quantum
                        classifier, its typed ClassifierResult returned; kept for one release
                        beside DPSGDClassifier (qpriv.classification.run.train_classifier)
    ClassifierResult    what a classifier run gave, typed: accuracy, claim, diagnostics;
                        to_json() is result.json (qpriv.classification.records)
    tune_learning_rate  choose a classifier's rate on a validation split
                        (qpriv.classification.tuning.tune_learning_rate)
    calibrate           Algorithm 1 of the LDPT paper: eps_s -> p, gamma, sigma
                        (qpriv.privacy.calibration.calibrate)
    account             the rigorous (eps, delta) of the LDPT feature path beside the paper's
                        (qpriv.privacy.feature_path.accountant.account)
    METHODS             the forecasting methods by name, each with the privacy it claims
                        (qpriv.forecasting.methods.METHODS)
    PrivacyClaim        one epsilon with its kind, accounting, unit and what it covers; Kind,
                        Accounting and Unit name those (qpriv.privacy.claims)
    QprivError          the base of every error qpriv raises on purpose; InvalidInputError for
                        bad input, ArgumentError for arguments that do not go together
    __version__         the installed version

Example:

>>> import qpriv
>>> round(qpriv.calibrate(0.1).p, 4)
0.9505
>>> print(qpriv.METHODS["ldpt"].privacy)
local eps-QDP per pass
"""

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# Each public name, and the module that defines it. They are imported on first use (PEP 562
# module __getattr__), not here: `import qpriv` and the qpriv console script then start without
# torch, QuTiP, SciPy and dp-accounting (about 3 s), which only the commands that compute need
# (benchmarks/startup.py). No library does this more simply than the language itself.
_ORIGINS = {
    "DPSGDClassifier": ("qpriv.classification.estimators", "DPSGDClassifier"),
    "ClassifierResult": ("qpriv.classification.records", "ClassifierResult"),
    "train_classifier": ("qpriv.classification.run", "train_classifier"),
    "tune_learning_rate": ("qpriv.classification.tuning", "tune_learning_rate"),
    "ArgumentError": ("qpriv.errors", "ArgumentError"),
    "InvalidInputError": ("qpriv.errors", "InvalidInputError"),
    "QprivError": ("qpriv.errors", "QprivError"),
    "load_run": ("qpriv.forecasting.artifacts", "load_run"),
    "DPLinearForecaster": ("qpriv.forecasting.estimators", "DPLinearForecaster"),
    "PublicForecaster": ("qpriv.forecasting.estimators", "PublicForecaster"),
    "RidgeForecaster": ("qpriv.forecasting.estimators", "RidgeForecaster"),
    "TransformerForecaster": ("qpriv.forecasting.estimators", "TransformerForecaster"),
    "Forecaster": ("qpriv.forecasting.estimators", "Forecaster"),
    "load": ("qpriv.estimators", "load"),
    "CsvFormat": ("qpriv.forecasting.csv_input", "CsvFormat"),
    "Forecast": ("qpriv.forecasting.inference", "Forecast"),
    "ForecastingRun": ("qpriv.forecasting.inference", "ForecastingRun"),
    "METHODS": ("qpriv.forecasting.methods", "METHODS"),
    "train_forecaster": ("qpriv.forecasting.run", "run_forecast"),
    "account": ("qpriv.privacy.feature_path.accountant", "account"),
    "calibrate": ("qpriv.privacy.calibration", "calibrate"),
    "Accounting": ("qpriv.privacy.claims", "Accounting"),
    "Kind": ("qpriv.privacy.claims", "Kind"),
    "PrivacyClaim": ("qpriv.privacy.claims", "PrivacyClaim"),
    "Unit": ("qpriv.privacy.claims", "Unit"),
}

if TYPE_CHECKING:  # what type checkers and editors see: the same names, eagerly
    from qpriv.classification.estimators import DPSGDClassifier
    from qpriv.classification.records import ClassifierResult
    from qpriv.classification.run import train_classifier
    from qpriv.classification.tuning import tune_learning_rate
    from qpriv.errors import ArgumentError, InvalidInputError, QprivError
    from qpriv.estimators import load
    from qpriv.forecasting.artifacts import load_run
    from qpriv.forecasting.csv_input import CsvFormat
    from qpriv.forecasting.estimators import (
        DPLinearForecaster,
        Forecaster,
        PublicForecaster,
        RidgeForecaster,
        TransformerForecaster,
    )
    from qpriv.forecasting.inference import Forecast, ForecastingRun
    from qpriv.forecasting.methods import METHODS
    from qpriv.forecasting.run import run_forecast as train_forecaster
    from qpriv.privacy.calibration import calibrate
    from qpriv.privacy.claims import Accounting, Kind, PrivacyClaim, Unit
    from qpriv.privacy.feature_path.accountant import account


def __getattr__(name: str) -> Any:
    """Import a public name's module the first time the name is read (PEP 562)."""
    if name not in _ORIGINS:
        raise AttributeError(f"module 'qpriv' has no attribute {name!r}")
    module, attribute = _ORIGINS[name]
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value  # later reads skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_ORIGINS))


__all__ = [
    "METHODS",
    "Accounting",
    "ArgumentError",
    "ClassifierResult",
    "CsvFormat",
    "DPLinearForecaster",
    "DPSGDClassifier",
    "Forecast",
    "Forecaster",
    "ForecastingRun",
    "InvalidInputError",
    "Kind",
    "PrivacyClaim",
    "PublicForecaster",
    "QprivError",
    "RidgeForecaster",
    "TransformerForecaster",
    "Unit",
    "__version__",
    "account",
    "calibrate",
    "load",
    "load_run",
    "train_classifier",
    "train_forecaster",
    "tune_learning_rate",
]
