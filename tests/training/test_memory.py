"""The allocator setting of the DP-SGD step (qpriv.training.memory)."""

from __future__ import annotations

import platform
import sys

import pytest

from qpriv.training import memory


@pytest.mark.skipif(not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
                    reason="glibc's mallopt only")
def test_glibc_agrees_to_hold_freed_memory():
    memory._applied = None
    assert memory.hold_freed_memory() is True
    assert memory.hold_freed_memory() is True  # once per process, then remembered


def test_other_platforms_are_left_alone(monkeypatch):
    monkeypatch.setattr(memory, "_applied", None)
    monkeypatch.setattr(memory.sys, "platform", "darwin")
    assert memory.hold_freed_memory() is False


def test_the_environment_can_opt_out(monkeypatch):
    monkeypatch.setattr(memory, "_applied", None)
    monkeypatch.setenv("QPRIV_HOLD_FREED_MEMORY", "0")
    monkeypatch.setattr(memory.ctypes, "CDLL", lambda *a, **k: pytest.fail("libc was called"))
    assert memory.hold_freed_memory() is False
