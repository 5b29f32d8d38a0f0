"""Privacy: the papers' formulas (``paper`` accounting) and the audits of the channel.

Pure functions of numbers, each citing its equation in the LDPT paper. The stateful pieces
(accountants, audits of trained runs) sit on top and import from here.
"""

from qpriv.privacy.calibration import Calibration, calibrate, depolarizing_p, lindblad_gamma
from qpriv.privacy.composition import advanced_composition, basic_composition
from qpriv.privacy.gaussian import gaussian_sigma
from qpriv.privacy.theorems import (
    channel_epsilon,
    effective_epsilon,
    hybrid_composition,
    measurement_epsilon_bound,
)

__all__ = [
    "Calibration",
    "advanced_composition",
    "basic_composition",
    "calibrate",
    "channel_epsilon",
    "depolarizing_p",
    "effective_epsilon",
    "gaussian_sigma",
    "hybrid_composition",
    "lindblad_gamma",
    "measurement_epsilon_bound",
]
