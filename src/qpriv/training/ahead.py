"""Drawing each batch's pass noise one batch ahead, in a background thread.

A noisy forecaster's pass draws its randomness (the shots of the quantum features, the
injections' z) from the input window and its own generators alone, never from the weights
(:meth:`qpriv.forecasting.model.LDPTForecaster.draw_noise`). So the draws of batch i + 1 can run
while batch i trains: :func:`draw_ahead` hands them to one worker thread, where the sampling
(torch and its kernels release the GIL) overlaps the forward and backward pass on the caller's.

The draws still happen one batch after the other, in batch order, on the one worker, and only
there while the stream runs: the generators advance exactly as they would inline, so a run with
draws ahead is the run without them (a test trains both and compares). The worker runs its
kernels on one intra-op thread, whatever the caller's setting: it is one extra thread beside
the training, not a second pool.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import torch
from torch import Tensor

Noise = TypeVar("Noise")


def _one_intra_op_thread() -> None:
    """Worker initialiser: this thread's kernels run on one thread (the setting is per thread
    under OpenMP; the caller's own is left as it is)."""
    torch.set_num_threads(1)


def draw_ahead(
    draw: Callable[[Tensor], Noise], batches: Iterable[tuple[Tensor, Tensor]]
) -> Iterator[tuple[Tensor, Tensor, Noise]]:
    """Yield ``(x, y, draw(x))`` for every batch ``(x, y)``, in order.

    ``draw(x)`` of the next batch runs in a background thread while the caller works on the
    current one; at most two batches' draws exist at a time. Exceptions raised by ``draw``
    come out of the iteration; closing the iterator early waits for the draw in flight.
    ``draw`` must be the only user of whatever state it advances while the stream runs.
    """
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="qpriv-draw-ahead",
                            initializer=_one_intra_op_thread) as worker:
        pending = None
        for x, y in batches:
            upcoming = (x, y, worker.submit(draw, x))
            if pending is not None:
                yield pending[0], pending[1], pending[2].result()
            pending = upcoming
        if pending is not None:
            yield pending[0], pending[1], pending[2].result()
