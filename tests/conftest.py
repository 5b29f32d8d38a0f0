"""Fixtures shared by every test folder."""

import pytest
import torch


@pytest.fixture(autouse=True)
def single_thread():
    """Run each test on one torch thread (the samplers and per-example gradients issue many
    small ops; on a shared 2-core CPU, thread hand-offs dominate) and restore the caller's
    setting afterwards."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
