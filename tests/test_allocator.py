"""reusing_freed_memory keeps a freed block for the next allocation inside it, and gives the
allocator's defaults back afterwards, measured by the page faults of touching fresh memory.

The measurements run in a fresh interpreter that imports what a training run imports (the
trainer's module, as `qpriv train` does before it trains): how a freed block is served depends
on the layout of the heap, which the test session's own allocations would leave unknown, and
which the imports before it shape (with torch alone, since `import qpriv` stopped importing the
library, a 64 MB block freed inside the setting was faulted in again: the setting is measured
where the trainer uses it)."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import pytest

PAGES = 64 * 2**20 // 4096  # a 64 MB block: above glibc's largest mmap threshold (32 MB)

pytestmark = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
    reason="the setting exists in glibc only")

MEASURE = """
import json, resource, torch
import qpriv.forecasting.run  # what a training process has imported when the trainer runs
from qpriv.allocator import reusing_freed_memory

BLOCK = 64 * 2**20

def faults(size=BLOCK):
    # minor page faults of allocating and filling size bytes right after freeing as many;
    # outside the setting the script asks for more than any block freed before, so no free
    # chunk of the heap can serve it
    first = torch.ones(size // 4)
    del first
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    second = torch.ones(size // 4)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    del second
    return after - before

out = {"before": faults(2 * BLOCK)}
with reusing_freed_memory() as active:
    faults()  # the heap grows once
    out |= {"active": active, "inside": faults()}
out["after"] = faults(3 * BLOCK)
with reusing_freed_memory():
    with reusing_freed_memory():
        faults()
    out["after_inner"] = faults()
out["after_outer"] = faults(4 * BLOCK)
print(json.dumps(out))
"""


def measure(**environment: str) -> dict:
    done = subprocess.run([sys.executable, "-c", MEASURE], capture_output=True, text=True,
                          check=True, env={**os.environ, **environment})
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def faults() -> dict:
    return measure()


def test_a_freed_block_is_reused_inside_and_fresh_pages_come_outside(faults):
    assert faults["before"] > PAGES  # glibc's default: a large block is mapped afresh
    assert faults["active"] is True
    assert faults["inside"] < PAGES // 20  # the freed block served the next allocation
    assert faults["after"] > PAGES  # the defaults are back


def test_nested_blocks_restore_only_at_the_outermost(faults):
    assert faults["after_inner"] < PAGES // 20  # still on after the inner block
    assert faults["after_outer"] > PAGES


def test_the_environment_can_opt_out():
    faults = measure(QPRIV_HOLD_FREED_MEMORY="0")
    assert faults["active"] is False
    assert faults["inside"] > PAGES // 2  # glibc's defaults throughout
