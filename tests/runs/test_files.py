"""Atomic writes: a failure names the file asked for."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from qpriv.errors import InvalidInputError
from qpriv.runs.files import atomic_write_bytes, load_checkpoint, read_json_object


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


def test_a_file_that_cannot_be_read_is_named_for_why_not_as_damaged(tmp_path, monkeypatch):
    """Re-running the training is the fix for a damaged file, not for a permission (root
    reads past chmod 000, so the refusal is simulated), a missing file or a directory."""
    run = tmp_path / "result.json"
    run.write_text("{}")
    fix = "re-run the training"

    def refuse(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(self))

    with monkeypatch.context() as patch:
        patch.setattr(Path, "read_text", refuse)
        with pytest.raises(InvalidInputError) as info:
            read_json_object(run, fix=fix)
    assert str(info.value) == (f"cannot read {run}: permission denied; give the user who runs "
                               "qpriv read access to it (chmod u+r), or run qpriv as its owner")
    with pytest.raises(InvalidInputError, match=r"it does not exist; re-run the training$"):
        read_json_object(tmp_path / "absent.json", fix=fix)
    with pytest.raises(InvalidInputError, match=r"it is a directory, not a file; re-run"):
        load_checkpoint(tmp_path, fix=fix)
    (tmp_path / "best.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(InvalidInputError, match=r"the file is damaged \(.*\); re-run the"):
        load_checkpoint(tmp_path / "best.pt", fix=fix)
    torch.save({"ok": 1}, tmp_path / "good.pt")
    assert load_checkpoint(tmp_path / "good.pt") == {"ok": 1}
