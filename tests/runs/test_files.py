"""Atomic writes: a failure names the file asked for."""

from __future__ import annotations

import os

import pytest

from qpriv.runs.files import atomic_write_bytes


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc")
def test_a_place_that_takes_no_file_is_named_not_the_hidden_temporary():
    # /proc exists and passes os.access for root, yet takes no new file
    with pytest.raises(OSError) as caught:
        atomic_write_bytes("/proc/qpriv-forecast.csv", b"x")
    assert caught.value.filename == "/proc/qpriv-forecast.csv"
    assert ".tmp" not in str(caught.value)


def test_an_atomic_write_leaves_only_the_file(tmp_path):
    target = atomic_write_bytes(tmp_path / "a" / "f.bin", b"abc")
    assert target.read_bytes() == b"abc" and os.listdir(tmp_path / "a") == ["f.bin"]
