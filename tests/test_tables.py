"""Plain tables: numbers right, text left, and a wide text column wrapped to a width."""

from qpriv.tables import format_table


def test_numbers_align_right_and_text_left():
    table = format_table(["name", "mse"], [["a", 0.5], ["longer", 12.25]])
    assert table.splitlines() == ["name        mse",
                                  "------  -------",
                                  "a        0.5000",
                                  "longer  12.2500"]


def test_a_wide_text_column_wraps_to_the_width():
    text = "word " * 30
    table = format_table(["id", "what"], [[1, text.strip()], [2, "short"]], max_width=40)
    lines = table.splitlines()
    assert max(len(line) for line in lines) <= 40
    assert len(lines) > 4  # the long cell took several lines
    assert " ".join(line[4:].strip() for line in lines[2:-1]) == text.strip()
    assert lines[-1].split() == ["2", "short"]


def test_significant_digits_drop_trailing_zeros():
    from qpriv.tables import format_cell

    assert format_cell(5.8, significant=True) == "5.8"
    assert format_cell(5.8) == "5.8000"  # the command line's aligned decimals are unchanged
    assert format_cell(0.123456, significant=True) == "0.1235"
    assert format_cell(2.0, significant=True) == "2"
    assert format_cell(1e-6, significant=True) == "1e-06"
    assert format_cell(12345.6, significant=True) == "12,346"
    assert format_cell(3, significant=True) == "3" and format_cell(None, significant=True) == "—"
    table = format_table(["eps_train", "mse"], [[5.8, 0.35712]], markdown=True,
                         significant=True)
    assert table.splitlines()[-1] == "| 5.8       | 0.3571 |"


def test_an_astronomical_number_is_written_in_scientific_notation():
    """`qpriv calibrate --eps 700` printed eq. 17's e^eps-sized bound as 309 grouped digits."""
    from qpriv.tables import format_cell

    assert format_cell(1.42e308) == "1.42e+308"
    assert format_cell(-3.5e15, significant=True) == "-3.50e+15"
    assert format_cell(999_999_999_999.0) == "999,999,999,999"  # grouped up to 1e12
