"""The typed privacy claim: its JSON form, legacy entries, and the label every output prints."""

import pytest

from qpriv.errors import InvalidInputError
from qpriv.privacy.claims import LOWER_BOUND, Accounting, Kind, PrivacyClaim, Unit


def _claim(**changes) -> PrivacyClaim:
    base = {"value": 0.9999, "kind": Kind.GLOBAL_DP, "accounting": Accounting.RIGOROUS,
            "unit": Unit.WINDOW, "covers": "the trained weights", "delta": 1e-6}
    return PrivacyClaim(**{**base, **changes})


def test_the_json_form_is_flat_and_round_trips():
    claim = _claim(notes=("the scaler is released in the clear",),
                   details={"accountant": "opacus RDP", "target": 1.0})
    entry = claim.to_json()
    assert entry == {"value": 0.9999, "kind": "global (eps, delta)-DP",
                     "accounting": "rigorous", "unit": "window", "covers": "the trained weights",
                     "delta": 1e-6, "notes": ["the scaler is released in the clear"],
                     "accountant": "opacus RDP", "target": 1.0}
    assert PrivacyClaim.from_json(entry) == claim


def test_an_entry_written_before_units_reads_back_with_its_kinds_unit():
    old = {"value": 0.1, "kind": "local eps-QDP per pass", "accounting": "paper",
           "neighbourhood": "trace distance d = 0.1 (full norm)"}
    claim = PrivacyClaim.from_json(old)
    assert claim.unit is Unit.TOKEN and claim.covers == "not recorded"
    assert claim.details == {"neighbourhood": "trace distance d = 0.1 (full norm)"}
    assert PrivacyClaim.from_json({"value": 1.0, "kind": "global (eps, delta)-DP",
                                   "accounting": "rigorous", "delta": 1e-6}).unit is Unit.WINDOW


@pytest.mark.parametrize(("claim", "label"), [
    (_claim(), "0.9999 (global (eps, delta)-DP, delta=1e-06, accounting=rigorous)"),
    (_claim(value=2.5605, kind=Kind.COMPOSED, accounting=Accounting.PAPER, unit=Unit.TOKEN,
            delta=None, details={"delta_prime": 1e-6}),
     "2.561 (composed, delta'=1e-06, accounting=paper)"),
    (_claim(value=2.0, kind=Kind.COMPOSED, accounting=Accounting.PAPER, unit=Unit.TOKEN,
            delta=None, details={"delta_total": 2e-5}),
     "2 (composed, total delta=2e-05, accounting=paper)"),
    (_claim(value=0.1, kind=Kind.LOCAL_QDP, accounting=Accounting.PAPER, unit=Unit.TOKEN,
            delta=None), "0.1 (local eps-QDP per pass, accounting=paper)"),
])
def test_the_label_names_kind_delta_and_accounting(claim, label):
    assert claim.label() == label


@pytest.mark.parametrize(("changes", "needle"), [
    ({"value": -0.1}, "negative"),
    ({"delta": 1.0}, r"not in \[0, 1\)"),
    ({"unit": "person"}, "person"),
    ({"kind": "eps"}, "eps"),
    ({"details": {"value": 2.0}}, "repeat the claim's own fields"),
])
def test_a_malformed_claim_is_refused(changes, needle):
    with pytest.raises((InvalidInputError, ValueError), match=needle):
        _claim(**changes)


def test_the_kinds_and_units_are_each_written_once():
    assert [u.value for u in Unit] == ["token", "window", "record", "example", "site"]
    assert len({k.value for k in Kind}) == len(Kind)


def test_only_an_empirical_lower_bound_prints_as_one():
    """A claim's details may hold a 'bound' of another meaning (dp-linear's record bound):
    only the audit's lower bound prints with '>='."""
    fit = PrivacyClaim(value=1.0, delta=1e-6, kind=Kind.GLOBAL_DP, accounting=Accounting.RIGOROUS,
                       unit=Unit.RECORD, covers="weights",
                       details={"bound": "projected rows (column norms)"})
    assert fit.label() == "1 (global (eps, delta)-DP, delta=1e-06, accounting=rigorous)"
    lower = PrivacyClaim(value=0.1, delta=1e-5, kind=Kind.COMPOSED,
                         accounting=Accounting.RIGOROUS, unit=Unit.TOKEN, covers="one token",
                         details={"bound": LOWER_BOUND, "confidence": 0.95})
    assert lower.label() == (">= 0.1 (empirical lower bound at 95% confidence, composed, "
                             "delta=1e-05)")
