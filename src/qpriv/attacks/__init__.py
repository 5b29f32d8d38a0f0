"""Attacks on trained models: what an adversary can learn, measured (SPEC section 0.3).

:mod:`qpriv.attacks.mia` holds the loss-threshold membership inference attack of the LDPT
paper's section 7.11 (Table 9), with TPR at low false-positive rates beyond the paper.
"""

from qpriv.attacks.mia import MIAResult, TprAtFpr, membership_inference, mia_on_run, tpr_at_fpr

__all__ = ["MIAResult", "TprAtFpr", "membership_inference", "mia_on_run", "tpr_at_fpr"]
