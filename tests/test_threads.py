"""torch_threads holds torch and the BLAS library to one thread count and gives it back."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from threadpoolctl import threadpool_info, threadpool_limits

from qpriv.errors import InvalidInputError
from qpriv.threads import torch_threads


def blas_threads() -> list[int]:
    np.ones((4, 4)) @ np.ones((4, 4))  # the BLAS library is loaded
    return [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]


def test_torch_and_blas_run_on_the_threads_asked_and_are_restored():
    with threadpool_limits(limits=2, user_api="blas"):
        torch.set_num_threads(2)
        assert set(blas_threads()) == {2}
        with torch_threads(1) as used:
            assert used == torch.get_num_threads() == 1
            assert set(blas_threads()) == {1}
        assert torch.get_num_threads() == 2
        assert set(blas_threads()) == {2}
        with torch_threads(None) as used:  # None leaves the caller's setting
            assert used == 2 and set(blas_threads()) == {2}


def test_a_bad_count_is_refused():
    with pytest.raises(InvalidInputError, match="threads = 0 is not an integer >= 1"), \
            torch_threads(0):
        pass
    # torch starts every thread it is given: 100,000 crashed the process with no message
    with pytest.raises(InvalidInputError, match=r"threads = 1025 is outside the valid range "
                                                r"\[1, 1024\]"), torch_threads(1025):
        pass
