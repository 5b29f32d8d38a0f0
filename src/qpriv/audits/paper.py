"""The six audits of the LDPT paper's section 7.9, applied to one finished run: :func:`run_audits`.

Audits 1-4 recompute the run's privacy claim from its files (:mod:`qpriv.audits.paper_claim`):
the calibration chain (Algorithm 1, eqs. 6-8), trace distance within bounds (Table 2),
composition (eqs. 5, 16, 17) and the budget not exceeded (section 7.8). Audits 5 and 6 ask what
tracks eps (:mod:`qpriv.audits.paper_trends`): the test MSE at short horizons, across runs
trained at each eps (Table 3), and the fidelity of the run's token states through the channel
(Table 7).

Every audit returns an :class:`~qpriv.audits.paper_result.AuditResult` with its status
(``pass``, ``fail`` or ``not applicable`` with the reason: a run that claims no privacy is never
reported as passing a privacy audit), the measured value, the threshold it is held to and the
numbers behind it. All epsilons here are local eps-QDP per pass, ``paper`` accounting (composed
ones labelled so).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from qpriv.audits.paper_claim import (
    audit_budget,
    audit_calibration_chain,
    audit_composition,
    audit_trace_distance,
)
from qpriv.audits.paper_result import (
    AUDIT_NAMES,
    DEFAULT_SEED,
    DEFAULT_WINDOWS,
    AuditResult,
    not_applicable,
)
from qpriv.audits.paper_trends import (
    DEFAULT_LADDER,
    audit_fidelity_tracks_eps,
    audit_mse_tracks_eps,
    check_ladder,
    sibling_runs,
)
from qpriv.errors import require_positive_int
from qpriv.forecasting.artifacts import LinearRun, LoadedRun, load_backbone_run, load_run

LINEAR_REASON = ("{method} is a linear forecaster: it has no quantum feature path (no channel, "
                 "calibration, token states or per-pass composition) for the audits of section "
                 "7.9 to check; what its weights leak: qpriv attack mia RUN_DIR")
"""Why each of the six audits is not applicable to a run of the linear family."""


# --- all six --------------------------------------------------------------------------------

def run_audits(
    run: str | Path | LoadedRun | LinearRun,
    *,
    ladder: Sequence[float] = DEFAULT_LADDER,
    windows: int = DEFAULT_WINDOWS,
    pairs: int = 2000,
    seed: int = DEFAULT_SEED,
    data_dir: str | Path | None = None,
    compare: Sequence[str | Path | LoadedRun] = (),
    discover: bool = True,
) -> list[AuditResult]:
    """The six audits of section 7.9 on the finished run ``run`` (a directory or a
    :class:`LoadedRun`), in the paper's order; a run of the linear family has none of what
    they check, and each is not applicable (:data:`LINEAR_REASON`).

    Args:
        ladder: the eps of audits 5 and 6 (default 0.1, 0.5, 1, 5: Tables 3 and 7).
        windows: test windows re-evaluated per eps (audit 5) and drawn for token states
            (audits 2 and 6).
        pairs: neighbouring state pairs of the exact channel audit (audit 4).
        seed: every random choice of the audits (windows, tokens, pairs, noise).
        data_dir: where the run's data is (also for the ``compare`` runs; None: each run's
            recorded file, else ``$QPRIV_DATA_DIR`` and the user cache).
        compare: finished runs of the same method, data and horizon at other eps; audit 5
            compares the runs (Table 3's design).
        discover: without ``compare``, let audit 5 compare the finished runs beside ``run``
            that differ from it only in eps
            (:func:`~qpriv.audits.paper_trends.sibling_runs`); alone, audit 5 is not applicable.

    Raises:
        InvalidInputError: not a finished run, data not found, a bad ladder, windows or pairs,
            a compared run that differs in more than eps.
    """
    loaded = run if isinstance(run, (LoadedRun, LinearRun)) else load_run(run, data_dir=data_dir)
    if isinstance(loaded, LinearRun):  # nothing of section 7.9 exists in it
        return [not_applicable(number, LINEAR_REASON.format(method=loaded.result.method))
                for number in AUDIT_NAMES]
    windows = require_positive_int("windows", windows)
    pairs = require_positive_int("pairs", pairs)
    check_ladder(ladder)  # a run without a claim skips audits 5 and 6, yet a bad value is bad
    others = [r if isinstance(r, LoadedRun) else load_backbone_run(r, data_dir=data_dir)
              for r in compare]
    if not others and discover and loaded.claims_local_qdp:
        others = sibling_runs(loaded)
    # audits 2, 5 and 6 read the data; a run without a quantum path or a claim skips them
    needs_data = loaded.config.use_quantum or loaded.claims_local_qdp
    data = loaded.data() if needs_data else None
    return [
        audit_calibration_chain(loaded),
        audit_trace_distance(loaded, data, windows=windows, seed=seed),
        audit_composition(loaded),
        audit_budget(loaded, pairs=pairs, seed=seed),
        audit_mse_tracks_eps(loaded, data, ladder=ladder, windows=windows, seed=seed,
                             compare=others),
        audit_fidelity_tracks_eps(loaded, data, ladder=ladder, windows=windows, seed=seed),
    ]
