"""How a look-back window becomes tokens: the count the model and the accountant both read.

Plain arithmetic, apart from the simulation, so that the model's configuration (and the command
line that checks it) does not import the quantum simulator to count tokens."""

from __future__ import annotations

from qpriv.errors import InvalidInputError


def n_tokens(*, dim: int, stride: int, seq_len: int) -> int:
    """T = floor((L - D) / s) + 1, the sliding-window tokens of length D and stride s per
    channel (the LDPT paper's tokenisation). The one place the count is written: the model and
    the accountant both read it."""
    if seq_len < dim:
        raise InvalidInputError(
            f"seq_len = {seq_len} is shorter than one token (dim = {dim}); use seq_len >= dim"
        )
    return (seq_len - dim) // stride + 1
