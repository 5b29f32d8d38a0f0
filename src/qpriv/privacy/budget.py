"""The deltas qpriv's guarantees are stated at when a caller gives none, each defined once.

An (eps, delta) guarantee may fail outright with probability delta, so delta must sit far below
1/n of the protected units (:func:`qpriv.privacy.claims.require_meaningful_delta` refuses
anything else). Two values serve two kinds of claim, and each name says which:
"""

from __future__ import annotations

GLOBAL_DELTA = 1e-6
"""delta of a global (eps, delta)-DP guarantee on released weights or inputs when none is
given: the LDPT paper's DP-SGD and DP-Input baselines (section 7.2: "delta = 1e-6"), and
qpriv's own dp-linear and dpsgd-linear."""

FEATURE_PATH_DELTA = 1e-5
"""delta of the rigorous accounting of the LDPT feature path (``qpriv account``, ``qpriv train
--accounting rigorous``) when none is given."""

CLASSIFIER_DELTA = 1e-5
"""delta of the private-training paper's DP-SGD classifiers in its reproduced experiments (the
paper does not state one; 1e-5 is the common choice for data sets of 10^4-10^5 records)."""
