"""The range checks' messages: the argument's Python name in Python, its flag on the command
line, and text that holds braces or describes a quantity left as it is."""

from __future__ import annotations

import pytest

from qpriv.errors import (
    ArgumentError,
    InvalidInputError,
    require_finite,
    require_in_range,
    require_positive_int,
    require_seed,
)


def test_a_named_argument_is_spelled_by_the_interface_that_gave_it():
    with pytest.raises(ArgumentError) as err:
        require_in_range("preclip_noise", -1, low=0.0, low_inclusive=True,
                         hint="a set {0} of braces stays as written")
    assert str(err.value) == ("preclip_noise = -1 is outside the valid range [0, inf); a set "
                              "{0} of braces stays as written")
    assert err.value.spelled({"preclip_noise": "--preclip-noise"}).startswith(
        "--preclip-noise = -1 is outside")
    with pytest.raises(ArgumentError, match=r"^seq_len = 0 is outside the valid range"):
        require_positive_int("seq_len", 0)
    with pytest.raises(ArgumentError, match=r"^lr must be a finite number, got nan"):
        require_finite("lr", float("nan"))


def test_a_described_quantity_is_plain_text():
    for check in (lambda: require_positive_int("hidden width", 0),
                  lambda: require_in_range("eps (per-pass budget eps_s)", 0.0, low=0.0)):
        with pytest.raises(InvalidInputError) as err:
            check()
        assert not isinstance(err.value, ArgumentError)
    assert require_in_range("eps", 0.5, low=0.0, high=1.0) == 0.5


def test_a_seed_is_an_integer_numpy_and_torch_both_take():
    assert require_seed("seed", 0) == 0 and require_seed("seed", 2**63 - 1) == 2**63 - 1
    for bad in (-1, 2**63, 1.5, True, "3"):
        with pytest.raises(ArgumentError, match=r"^seed = .* is not a seed: give an integer in "
                                                r"\[0, 2\*\*63\)"):
            require_seed("seed", bad)


@pytest.mark.parametrize("value", [True, False, "1", "0.5", None, [1.0]])
def test_a_number_argument_takes_only_real_numbers(value):
    """``train_forecaster(eps=True)`` and ``eps="1"`` were read as eps 1 (issue 42, D15)."""
    with pytest.raises(InvalidInputError, match=r"eps = .* is not a number; give a real number"):
        require_in_range("eps", value, low=0.0)


def test_numpy_numbers_still_count():
    import numpy as np

    assert require_finite("eps", np.float64(0.5)) == 0.5
    assert require_in_range("eps", np.int64(2), low=0.0) == 2.0


def test_the_python_entry_refuses_a_bool_budget_and_a_frame_without_dates_with_the_fix():
    import pandas as pd

    import qpriv

    with pytest.raises(InvalidInputError, match="eps = True is not a number"):
        qpriv.train_forecaster(method="dp-linear", eps=True)
    with pytest.raises(InvalidInputError, match=r"the DataFrame needs its timestamps as a "
                                                r"DatetimeIndex or as one 'date' column"):
        qpriv.train_forecaster(method="dp-linear", csv=pd.DataFrame({"a": [1.0]}))
    with pytest.raises(InvalidInputError, match=r"neither a file path nor a DataFrame"):
        qpriv.train_forecaster(method="dp-linear", csv=[1.0, 2.0])
