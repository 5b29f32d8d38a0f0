"""``rigorous`` accounting of the LDPT feature path (the quantum features the channel releases),
beside the ``paper`` accounting and never mixed with it.

Per token and per pass the feature path releases the counts of N_s SIC-POVM shots of the
depolarizing channel's output (LDPT section 5.3), so one token's privacy loss is the
composition of N_s single-shot losses, composed again over the tokens, windows and epochs that
hold a changed record. The rooms, bottom first:

- :mod:`~qpriv.privacy.feature_path.pairs`: neighbouring pure states at trace distance d
  (``NeighbourPair``), the single-shot outcome distribution of a state, and the SIC-aligned
  pair that attains the closed-form single-shot maximum.
- :mod:`~qpriv.privacy.feature_path.divergences`: exact quantities of one discrete pair: its
  privacy losses, Renyi divergences and RDP eps, and its pessimistic privacy-loss distribution
  (PLD), composed in stages with dp-accounting.
- :mod:`~qpriv.privacy.feature_path.plan`: the units of privacy (token, token-training,
  window, record) and how many single-shot measurements each composes.
- :mod:`~qpriv.privacy.feature_path.worst_pair`: the numerical search for the worst
  neighbouring pair of a composed release (L-BFGS on the RDP bound, random restarts).
- :mod:`~qpriv.privacy.feature_path.accountant`: the rigorous (eps, delta) of a unit over the
  candidate pairs, the report of every unit beside the paper's numbers (``account``), and what
  every claim rests on (``rigorous_notes``, ``ASSUMPTIONS``).
- :mod:`~qpriv.privacy.feature_path.rigorous_calibration`: the inverse, the depolarizing p (with
  Algorithm 1's gamma and sigma) that a target rigorous eps needs.
"""
