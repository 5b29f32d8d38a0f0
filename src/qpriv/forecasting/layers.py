"""The boxes of the LDPT pipeline (LDPT paper, Figure 1 and section 5), one module each.

Shape convention: every tensor keeps the window as its leading axis and the channel as its
second, ``(B, C, T, d)`` for token streams, so that per-window (per-example) gradient clipping
sees one example per window and never one per channel. Randomness is drawn only from the
``torch.Generator`` passed in, never from the global RNG, so a model's noise is reproducible from
its seed and its state can be checkpointed.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F  # noqa: N812 (the PyTorch idiom)
from torch import Tensor, nn

from qpriv.quantum.features import FeatureStats, quantum_features


class QuantumFeatures(nn.Module):
    """Stage 3: amplitude encoding, calibrated depolarizing channel, SIC-POVM with N_s shots.

    Returns ``qf = [frequencies, purity]`` of dimension D^2 + 1 per token (paper section 5.3).
    Nothing learned precedes the channel, so the features carry no gradient and are computed in
    one batched no-grad call, with fresh shots on every pass, training and inference alike.
    ``stats`` counts the tokens seen and those with no direction (norm below 1e-12, encoded as
    the uniform superposition), for reports.

    ``scale="centred"`` maps the features through a fixed, data-independent affine map,
    ``f_k -> D^2 f_k - 1`` and ``purity -> (D purity - 1) / (D - 1)``. The SIC outcomes of the
    maximally mixed state become 0; those of a pure state spread over [-1, D - 1] with mean 0
    and mean square (D - 1) / (D + 1) (0.88 at D = 16: the SIC is a 2-design); the purity runs
    from 0 (maximally mixed) to 1 (pure). The raw frequencies sit near 1/D^2 = 0.004 with a
    spread of about 0.001, far below the scale at which W_proj and the conditioning MLPs are
    initialised, and the backbone does not learn from them at the paper's learning rates
    (measured on ETTh1: even ldpt-clean's train loss stays flat at the level of predicting the
    window mean). The map is post-processing of the measured features, so the privacy of the
    feature path is unchanged, and W_proj composed with it is again an affine map of the raw
    features, so the model class is the paper's. ``scale="raw"`` keeps them as measured.

    The signed encoding (``baseline`` and ``gain`` given) centres the frequencies on those of
    its token x = 0, the state |r> that every token is close to when r >> c, and scales them:
    ``f_k -> gain D^2 (f_k - baseline_k)``. D^2 (f_k - baseline_k) moves with the data by about
    (1 - p) c / r (the signal) and with the shots by about D / sqrt(N_s) (the noise), so the
    model sets ``gain = 1 / sqrt(((1 - p) c / r)^2 + D^2 / N_s)`` (r / c for exact
    probabilities): the features are O(1) whatever r, p and N_s. Again a fixed,
    data-independent affine map of the measured features (privacy unchanged).
    """

    def __init__(self, *, p: float, n_shots: int | None, scale: str = "centred",
                 baseline: Tensor | None = None, gain: float = 1.0) -> None:
        super().__init__()
        self.p = p
        self.n_shots = n_shots
        self.scale = scale
        self.gain = gain
        self.register_buffer("baseline", baseline, persistent=False)
        self.stats = FeatureStats()

    def forward(self, tokens: Tensor, generator: torch.Generator) -> Tensor:
        """``tokens (B, C, T, D)`` -> ``qf (B, C, T, D^2 + 1)``, float32, no grad."""
        with torch.no_grad(), torch.autocast(tokens.device.type, enabled=False):
            dim = tokens.shape[-1]
            qf = torch.empty(*tokens.shape[:-1], dim * dim + 1, dtype=torch.float32,
                             device=tokens.device)
            freqs, purity = quantum_features(
                tokens.float(), p=self.p, n_shots=self.n_shots, generator=generator,
                stats=self.stats, out=qf[..., :-1],
            )
            if self.scale == "centred":
                if self.baseline is None:
                    freqs.mul_(dim * dim).sub_(1.0)
                else:
                    freqs.sub_(self.baseline).mul_(self.gain * dim * dim)
                purity = purity.mul_(dim).sub_(1.0).div_(dim - 1)
            qf[..., -1] = purity
            return qf

    def extra_repr(self) -> str:
        centre = "" if self.baseline is None else f", centred on |r>, gain={self.gain:.4g}"
        return f"p={self.p:.4g}, n_shots={self.n_shots}, scale={self.scale}{centre}"


def sinusoidal_positions(n_tokens: int, d_model: int) -> Tensor:
    """The fixed sine/cosine positional encoding of Vaswani et al., shape (T, d_model)."""
    position = torch.arange(n_tokens, dtype=torch.float32).unsqueeze(1)  # (T, 1)
    freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(1e4) / d_model))
    table = torch.zeros(n_tokens, d_model)
    table[:, 0::2] = torch.sin(position * freq)
    table[:, 1::2] = torch.cos(position * freq[: d_model // 2])
    return table


class ClassicalEmbedding(nn.Module):
    """Stage 4's classical path: ``x_cl = Linear(D -> d_model)(tokens) + positional encoding``.

    The positional encoding is the fixed sinusoidal one (no parameters). At gate g = 1 (the
    paper's setting) x_cl is zeroed, so the LDPT model does not build this module at all.
    """

    def __init__(self, *, dim: int, d_model: int, n_tokens: int) -> None:
        super().__init__()
        self.linear = nn.Linear(dim, d_model)
        self.register_buffer("positions", sinusoidal_positions(n_tokens, d_model), persistent=False)

    def forward(self, tokens: Tensor) -> Tensor:
        """``tokens (B, C, T, D)`` -> ``x_cl (B, C, T, d_model)``."""
        return self.linear(tokens) + self.positions


class Injection(nn.Module):
    """Eqs. 13-15, the three-point injection: ``x <- x + factor sigma std(x) z``, z ~ N(0, I).

    ``std`` is the population standard deviation over the last (feature) axis of each token,
    detached, so the noise scales with the signal but adds no gradient path. ``factor`` is 1 for
    noise #1 and #2 and k for noise #3. A scale of zero draws nothing. (At horizon H = 1 the
    prediction has no spread over its feature axis and noise #3 is zero.)

    ``z`` depends on nothing but the shape, so it can be drawn ahead of the pass (:meth:`draw`)
    and handed to :meth:`forward`; given a generator instead, ``forward`` draws it itself.
    """

    def __init__(self, *, sigma: float, factor: float = 1.0) -> None:
        super().__init__()
        self.scale = sigma * factor

    def draw(self, shape: tuple[int, ...], generator: torch.Generator, *,
             dtype: torch.dtype = torch.float32) -> Tensor | None:
        """z ~ N(0, I) of ``shape`` on the generator's device, or None when the scale is zero."""
        if self.scale == 0.0:
            return None
        return torch.randn(shape, generator=generator, device=generator.device, dtype=dtype)

    def forward(self, x: Tensor, noise: Tensor | torch.Generator | None) -> Tensor:
        """``x`` plus the injection, with ``noise`` the z of :meth:`draw` (None: nothing to
        add) or a generator to draw it from now."""
        if isinstance(noise, torch.Generator):
            noise = self.draw(tuple(x.shape), noise, dtype=x.dtype)
        if noise is None:
            return x
        x0 = x.detach()
        # population std over the last axis; two passes through vector_norm run about twice
        # as fast on the CPU as Tensor.std, with the same result to rounding
        std = torch.linalg.vector_norm(x0 - x0.mean(dim=-1, keepdim=True), dim=-1, keepdim=True)
        return torch.addcmul(x, noise.to(x.dtype), std.mul_(self.scale * x.shape[-1] ** -0.5))

    def extra_repr(self) -> str:
        return f"scale={self.scale:.4g}"


class QCAdaLN(nn.Module):
    """Eq. 12, quantum-conditioned adaptive LayerNorm.

    ``QC-AdaLN(x, q) = gamma_q * (x - mu_x) / sigma_x + beta_q`` with ``gamma_q = gamma_0 +
    dgamma`` and ``beta_q = beta_0 + dbeta``; ``(dgamma, dbeta)`` come from the token-mean-pooled
    quantum features through ``Linear(D^2+1, d) -> GELU -> Linear(d, 2d)``, whose last layer is
    zero-initialised so the module equals LayerNorm at initialisation. ``gamma_0, beta_0`` are the
    affine parameters of an ``nn.LayerNorm``. Built with ``n_features=None`` (no conditioning:
    the classical model, or the LayerNorm ablation) it is exactly ``nn.LayerNorm``.
    """

    def __init__(self, d_model: int, *, n_features: int | None) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d_model)  # gamma_0, beta_0
        self.condition = None
        if n_features is not None:
            self.condition = nn.Sequential(
                nn.Linear(n_features, d_model), nn.GELU(), nn.Linear(d_model, 2 * d_model)
            )
            nn.init.zeros_(self.condition[-1].weight)
            nn.init.zeros_(self.condition[-1].bias)

    def forward(self, x: Tensor, q: Tensor | None) -> Tensor:
        """``x (B, C, T, d)``, pooled features ``q (B, C, D^2+1)`` -> ``(B, C, T, d)``."""
        if self.condition is None or q is None:
            return self.norm(x)  # gamma_0 * x_hat + beta_0
        dgamma, dbeta = self.condition(q).unsqueeze(-2).chunk(2, dim=-1)  # (B, C, 1, d) each
        x_hat = F.layer_norm(x, x.shape[-1:], eps=self.norm.eps)
        return torch.addcmul(self.norm.bias + dbeta, x_hat, self.norm.weight + dgamma)


class QCAttention(nn.Module):
    """Stage 6, quantum-conditioned multi-head self-attention over the tokens of each channel.

    ``Q, K, V = Linear(in_dim -> d_model)`` (one fused matrix, as W_q, W_k, W_v stacked), output
    ``Linear(d_model -> d_model)``, and torch's ``scaled_dot_product_attention`` (the fused
    kernel where the device has one). ``in_dim`` is 2 d_model for the first block, which reads
    x_enh (eq. 11), and d_model for later ones. The head split and the attention itself carry
    no parameters, so flattening (B, C) for the kernel call does not change what a per-window
    gradient sees.
    """

    def __init__(self, *, in_dim: int, d_model: int, n_heads: int, dropout: float) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.dropout = dropout
        self.qkv = nn.Linear(in_dim, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def forward(self, x: Tensor) -> Tensor:
        """``x (B, C, T, in_dim)`` -> ``(B, C, T, d_model)``."""
        B, C = x.shape[:2]
        # (B, C, T, 3d) -> three (B*C, heads, T, head_dim), the same split as chunk(3): unbind,
        # whose backward is one stack, where chunk's writes each slice into a zero-filled copy
        q, k, v = (self.qkv(x).unflatten(-1, (3, self.n_heads, -1)).permute(3, 0, 1, 4, 2, 5)
                   .flatten(1, 2).unbind(0))
        dropout = self.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout)  # (B*C, heads, T, hd)
        y = y.unflatten(0, (B, C)).transpose(-3, -2).flatten(-2)  # (B, C, T, d)
        return self.out(y)


class FeedForward(nn.Module):
    """The position-wise feed-forward sub-layer: ``Linear(d, d_ff) -> GELU -> Linear(d_ff, d)``."""

    def __init__(self, *, d_model: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.up = nn.Linear(d_model, d_ff)
        self.down = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(self.down(F.gelu(self.up(x))))


class Block(nn.Module):
    """One post-norm encoder layer with the paper's noise #2 (eq. 14) after each sub-layer::

        h <- inject(QC-AdaLN_1(h + attention(a), q))
        h <- inject(QC-AdaLN_2(h + FFN(h), q))

    ``a`` is what the attention reads: x_enh in the first block, h in later ones.
    """

    def __init__(
        self,
        *,
        in_dim: int,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float,
        n_features: int | None,
        sigma: float,
    ) -> None:
        super().__init__()
        self.attention = QCAttention(
            in_dim=in_dim, d_model=d_model, n_heads=n_heads, dropout=dropout
        )
        self.norm1 = QCAdaLN(d_model, n_features=n_features)
        self.ffn = FeedForward(d_model=d_model, d_ff=d_ff, dropout=dropout)
        self.norm2 = QCAdaLN(d_model, n_features=n_features)
        self.resid_dropout = nn.Dropout(dropout)
        self.inject = Injection(sigma=sigma)  # noise #2

    def forward(
        self, h: Tensor, a: Tensor, q: Tensor | None, noise: tuple[Tensor | None, Tensor | None]
    ) -> Tensor:
        """``h (B, C, T, d)``, ``a (B, C, T, in_dim)``, ``q (B, C, D^2+1)`` -> ``(B, C, T, d)``;
        ``noise`` holds the z of noise #2 after the attention and after the FFN
        (:meth:`Injection.draw`)."""
        after_attention, after_ffn = noise
        h = self.inject(self.norm1(h + self.resid_dropout(self.attention(a)), q), after_attention)
        return self.inject(self.norm2(h + self.ffn(h), q), after_ffn)


class Head(nn.Module):
    """Stage 8: flatten the tokens of each channel and map them to H values."""

    def __init__(self, *, n_tokens: int, d_model: int, horizon: int) -> None:
        super().__init__()
        self.linear = nn.Linear(n_tokens * d_model, horizon)

    def forward(self, h: Tensor) -> Tensor:
        """``h (B, C, T, d)`` -> ``(B, C, H)``."""
        return self.linear(h.flatten(-2))
