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
