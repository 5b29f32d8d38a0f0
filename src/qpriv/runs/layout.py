"""The names of the files in a run directory, each written once.

A forecasting run (:func:`qpriv.forecasting.run.run_forecast`) writes :data:`CONFIG_FILE`
first, :data:`CHECKPOINT_FILE` and :data:`BEST_FILE` after every epoch and :data:`RESULT_FILE`
at the end; a classifier run (:func:`qpriv.classification.run.train_classifier`) writes the
same config, checkpoint and result, :data:`CLASSIFIER_MODEL_FILE` (its weights) and
:data:`REFERENCE_FILE` for its unclipped twin. Runs
written by earlier versions use the same names, so they stay readable and resumable.
"""

from __future__ import annotations

CONFIG_FILE = "config.json"
"""What was asked: the run's settings, compared on resume."""
RESULT_FILE = "result.json"
"""The finished run's result; its presence marks a finished run."""
CHECKPOINT_FILE = "checkpoint.pt"
"""The state after the last finished epoch, for resuming a killed run."""
BEST_FILE = "best.pt"
"""A forecaster's best-validation weights (the model that is tested and audited)."""
REFERENCE_FILE = "reference.pt"
"""The checkpoint of a classifier run's unclipped twin (``unclipped_reference``)."""
TUNING_FILE = "lr_tuning.json"
"""``qpriv train-classifier --lr-grid``'s choice, kept so that a resumed run need not tune."""
MIA_FILE = "mia.json"
"""The membership-inference attack on a finished forecaster (Table 9), kept beside it."""
CLASSIFIER_MODEL_FILE = "classifier.pt"
"""A classifier's trained weights alone (no optimizer or generator state, which a checkpoint
holds): written beside its result, what ``DPSGDClassifier.save`` releases."""
LINEAR_MODEL_FILE = "linear.npz"
"""A linear forecaster's kernel (H x L), for the public floor, the ridge and dp-linear."""
REPORT_FILE = "report.html"
"""``qpriv report``'s page of a run, a grid or a quickstart, written into its folder."""
RUN_FILES = frozenset({CONFIG_FILE, RESULT_FILE, CHECKPOINT_FILE, BEST_FILE, REFERENCE_FILE,
                       TUNING_FILE, MIA_FILE, CLASSIFIER_MODEL_FILE, LINEAR_MODEL_FILE,
                       REPORT_FILE})
"""Every name above: a folder holding one of them holds (part of) a run."""
