"""The privacy claims a backbone forecasting run states, in the JSON form its result records.

:func:`qpriv.forecasting.run.run_forecast` builds a method of the LDPT backbone at its budget
(:func:`qpriv.forecasting.methods.setup_method`) and trains it; :func:`run_claims` states what
that guarantees, one :class:`~qpriv.privacy.claims.PrivacyClaim` per epsilon, each with what it
covers and leaves out: the LDPT paper's per-pass local eps-QDP (its Algorithm 1) composed over
the passes by eqs. 16 and 17, the rigorous record-level budget the channel was calibrated for,
DP-SGD's global (eps, delta) on the weights (at the record unit composed with its scaler,
:func:`qpriv.forecasting.record_dpsgd.record_privacy`), or DP-Input's Gaussian mechanism (eq. 1).
:func:`name_the_source` adds what a user's CSV escapes.
"""

from __future__ import annotations

from dataclasses import replace

from qpriv.forecasting.inference import source_notes
from qpriv.forecasting.methods import MethodSetup
from qpriv.forecasting.record_dpsgd import RecordScaling, record_privacy
from qpriv.forecasting.records import CLAIM_KEYS
from qpriv.forecasting.rigorous import (
    RIGOROUS_PRIVACY,
    TARGETS_NOTE,
    neighbourhood_notes,
    signed_neighbourhood,
)
from qpriv.forecasting.windows import WINDOW_COUNT_NOTE
from qpriv.privacy.budget import PrivacyTarget
from qpriv.privacy.claims import (
    COVERS_FEATURES_OVER_TRAINING,
    COVERS_FEATURES_PER_PASS,
    COVERS_INPUT_PER_PASS,
    Accounting,
    Kind,
    PrivacyClaim,
    Unit,
)
from qpriv.privacy.composition import advanced_composition, basic_composition
from qpriv.privacy.feature_path.accountant import rigorous_notes
from qpriv.privacy.randomness import randomness_note
from qpriv.training.trainer import DIVERGENCE_NOTE, HISTORY_NOTE

SCALER_NOTE = ("the data loader's z-score scaler (the training split's per-channel mean and "
               "std, 2C numbers) is fitted outside the mechanism and belongs with the model: "
               "released in the clear and not accounted; the epsilon holds given it "
               "(neighbouring data sets are taken to share it, since a changed value would "
               "otherwise move every z-scored value of its channel)")
"""Every guarantee a forecaster states leaves out the dataset scaler; each says so."""


def run_claims(setup: MethodSetup, *, epochs: int, delta_prime: float, strategy: dict,
               target: PrivacyTarget | None, delta: float, secret: bool,
               scaling: RecordScaling | None = None) -> dict:
    """The privacy part of a result: each epsilon a :class:`PrivacyClaim` in its JSON form.
    ``secret``: the run's seed is secret (else recorded: every claim says what that means);
    ``scaling``: the scaler of a record-unit DP-SGD run."""
    notes = list(setup.notes)
    drawn = randomness_note(secret=secret)
    if setup.privacy == RIGOROUS_PRIVACY:
        # the calibration's own forward value can land a hair above the target (its worst
        # pair is a numerical search): the claim states the larger
        achieved = setup.rigorous["achieved"]["eps"]["value"]
        eps_total = target.eps_total
        claim = PrivacyClaim(
            value=max(eps_total, achieved), delta=delta, kind=Kind.COMPOSED,
            accounting=Accounting.RIGOROUS, unit=Unit.RECORD,
            covers=COVERS_FEATURES_OVER_TRAINING,
            notes=(TARGETS_NOTE, SCALER_NOTE,
                   *rigorous_notes("record", d=setup.config.neighbour_d),
                   *neighbourhood_notes(setup.config), drawn),
            details={"epochs": epochs, "target": eps_total})
        return {"privacy": setup.privacy, "eps_per_pass": None, "eps_total": claim.to_json(),
                "p": setup.noise["p"], "gamma": setup.noise["gamma"],
                "sigma": setup.noise["sigma"], "rigorous_calibration": setup.rigorous,
                "privacy_notes": notes}
    if setup.privacy == Kind.GLOBAL_DP and scaling is not None:
        return record_privacy(strategy, scaling, privacy=setup.privacy, notes=(
            *notes, HISTORY_NOTE, DIVERGENCE_NOTE, drawn))
    if setup.privacy == Kind.GLOBAL_DP:
        claim = PrivacyClaim.from_json(strategy["eps"])
        claim_notes = [
            "hyper-parameters and the validation split used for model selection are not "
            "accounted",
            "the unit is one window; one time step of the series lies in up to L + H "
            "overlapping windows, so a record-level guarantee follows only by group privacy "
            "over those windows, which at the paper's L + H (360 to 1056) gives no useful "
            "epsilon",
            "RevIN statistics are per window and inside the clipped gradient: covered",
            WINDOW_COUNT_NOTE, HISTORY_NOTE, DIVERGENCE_NOTE, SCALER_NOTE, drawn]
        return {"privacy": setup.privacy, "eps_per_pass": None,
                "eps": replace(claim, notes=(*claim.notes, *claim_notes)).to_json(),
                "noise_multiplier": strategy["noise_multiplier"],
                "privacy_notes": [*notes, *claim_notes]}
    if setup.privacy == Kind.LOCAL_DP:
        eps = setup.eps_per_pass
        delta = setup.noise["delta"]
        mechanism = {"mechanism": "Gaussian (eq. 1), L2 sensitivity 1 assumed (input not "
                                  "clipped)"}
        per_pass = PrivacyClaim(
            value=eps, delta=delta, kind=Kind.LOCAL_DP, accounting=Accounting.PAPER,
            unit=Unit.TOKEN, covers=COVERS_INPUT_PER_PASS,
            notes=(*setup.notes, SCALER_NOTE, drawn),
            details=mechanism)
        composed = replace(
            per_pass, value=basic_composition(eps, epochs=epochs), kind=Kind.COMPOSED,
            details={**mechanism, "composition": "basic (eq. 16), training passes only",
                     "delta_total": epochs * delta, "epochs": epochs})
        return {
            "privacy": setup.privacy,
            "eps_per_pass": per_pass.to_json(),
            "eps_basic": composed.to_json(),
            "sigma": setup.noise["input_sigma"],
            "privacy_notes": [*notes, SCALER_NOTE, drawn],
        }
    if setup.privacy != Kind.LOCAL_QDP or setup.eps_per_pass is None:
        extra = {"sigma": setup.noise["sigma"]} if "sigma" in setup.noise else {}
        return {"privacy": setup.privacy, "eps_per_pass": None, **extra,
                **({"privacy_notes": notes} if notes else {})}
    eps = setup.eps_per_pass
    cal = setup.calibration
    bypass = ("RevIN's per-window mean and std reach the output without passing the channel "
              "(a side channel)" if setup.config.normalisation == "revin" else
              "normalisation fixed: no per-window statistic bypasses the channel")
    claim_notes = (
        "paper accounting counts one use of the channel per token and pass; the features "
        "release N_s shots of every token, over all tokens and passes: see the rigorous "
        "accounting",
        TARGETS_NOTE, bypass, SCALER_NOTE, *neighbourhood_notes(setup.config), drawn)
    neighbourhood = {"neighbourhood": (
        signed_neighbourhood(setup.config) if setup.config.encoding == "signed"
        else f"trace distance d = {cal.d:g} (full norm)")}
    per_pass = PrivacyClaim(
        value=eps, kind=Kind.LOCAL_QDP, accounting=Accounting.PAPER, unit=Unit.TOKEN,
        covers=COVERS_FEATURES_PER_PASS, notes=claim_notes, details=neighbourhood)
    over_training = replace(per_pass, kind=Kind.COMPOSED, covers=COVERS_FEATURES_OVER_TRAINING)
    return {
        "privacy": setup.privacy,
        "eps_per_pass": per_pass.to_json(),
        "eps_basic": replace(
            over_training, value=basic_composition(eps, epochs=epochs),
            details={**neighbourhood, "composition": "basic (eq. 16)", "epochs": epochs},
        ).to_json(),
        "eps_advanced": replace(
            over_training,
            value=advanced_composition(eps, epochs=epochs, delta_prime=delta_prime),
            details={**neighbourhood, "composition": "advanced (eq. 17)", "epochs": epochs,
                     "delta_prime": delta_prime},
        ).to_json(),
        "p": setup.config.p,
        "gamma": cal.gamma,
        "sigma": setup.config.sigma,
        "calibration": cal.as_dict(),
        "privacy_notes": [*notes, *claim_notes],
    }


def name_the_source(result: dict, *, source_sha256: str | None) -> None:
    """A user's CSV: its digest escapes every guarantee, and each claim says so; then the
    result's list of claims."""
    source = list(source_notes(source_sha256))
    for key in CLAIM_KEYS:
        if source and isinstance(result.get(key), dict):
            result[key] = {**result[key], "notes": [*result[key].get("notes", []), *source]}
    if source:
        result["privacy_notes"] = [*result.get("privacy_notes", []), *source]
    result["claims"] = [result[key] for key in CLAIM_KEYS if isinstance(result.get(key), dict)]
