"""Fixtures of the experiment tests."""

from __future__ import annotations

import logging
import os

import pytest


@pytest.fixture(scope="module")
def local_ray():
    """A local Ray for the module: 2 CPUs, a 200 MB object store, no dashboard, no token
    (skipped where Ray is not installed)."""
    ray = pytest.importorskip("ray")
    saved = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"
    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=200 * 2**20,
             logging_level=logging.WARNING)
    yield
    ray.shutdown()
    if saved is None:
        os.environ.pop("RAY_AUTH_MODE", None)
    else:
        os.environ["RAY_AUTH_MODE"] = saved
