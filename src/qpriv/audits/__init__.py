"""Audits of what a trained model releases, and attacks on it.

They load trained runs, so they sit above the models:

* :mod:`qpriv.audits.channel`: the exact max-relative entropy of the calibrated channel on
  neighbouring states against Theorem 1 of the LDPT paper;
* :mod:`qpriv.audits.paper`: the LDPT paper's six audits of a finished run (its section 7.9),
  run together: audits 1-4 (the run's privacy claim recomputed) in
  :mod:`qpriv.audits.paper_claim`, 5 and 6 (MSE and fidelity along eps) in
  :mod:`qpriv.audits.paper_trends`, what each returns in :mod:`qpriv.audits.paper_result`;
* :mod:`qpriv.audits.sidechannel`: what reaches the output without passing the channel (the
  probes and the audit), its report in :mod:`qpriv.audits.sidechannel_report`, the audit of a
  finished run or a method (``qpriv audit sidechannel``) in
  :mod:`qpriv.audits.sidechannel_subjects`;
* :mod:`qpriv.audits.mia`: loss-threshold membership inference (the LDPT paper's Table 9), with
  TPR at low false-positive rates beyond the paper;
* :mod:`qpriv.audits.lower_bound`: an empirical lower bound on the feature path's epsilon;
* :mod:`qpriv.audits.privacy`: ``qpriv audit privacy``, an empirical lower bound beside each
  guarantee: the many-run game on dp-linear (:mod:`qpriv.audits.privacy_linear`) and the
  one-run games on DP-SGD: the classifiers and the clipless model
  (:mod:`qpriv.audits.privacy_dpsgd`), dpsgd-linear with Dirac canary windows
  (:mod:`qpriv.audits.privacy_dpsgd_linear`) and the dpsgd transformer
  (:mod:`qpriv.audits.privacy_dpsgd_forecast`).
"""

from qpriv.audits.mia import MIAResult, TprAtFpr, membership_inference, mia_on_run, tpr_at_fpr

__all__ = ["MIAResult", "TprAtFpr", "membership_inference", "mia_on_run", "tpr_at_fpr"]
