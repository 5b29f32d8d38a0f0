"""The LDPT forecaster: one channel-independent transformer backbone for every method.

The forward pass reads as the pipeline of the LDPT paper (section 5.1, Figure 1):

1. RevIN per window and channel (``normalisation="fixed"``:   (B, L, C) -> (B, C, L)
   no per-window statistics, which would bypass the channel);
2. tokens: sliding windows of length D, stride s;           (B, C, T, D), T = (L - D) // s + 1
3. quantum features qf = [SIC-POVM frequencies, purity];    (B, C, T, D^2 + 1), no grad
   (``encoding="signed"``: each token clipped and given a
   reference amplitude on one qubit more, D -> 2D);
4. W_proj qf and the classical embedding x_cl,
   x_enh = [(1 - g) x_cl, W_proj qf] (eq. 11);              (B, C, T, 2 d_model)
   without the quantum path x_enh = [x_cl, 0]: every method runs the same backbone, so
   they differ only in where noise enters (paper sections 5.2 and 7.2);
5. noise #1 on x_enh (eq. 13);
6. quantum-conditioned attention, residual from W_proj qf;
7. QC-AdaLN (eq. 12) after attention and FFN, noise #2 after each (eq. 14);
8. head: flatten tokens -> Linear -> H per channel;         (B, C, H)
9. noise #3 with factor k (eq. 15);
10. RevIN denormalisation.                                  (B, H, C)

The window stays the leading axis of every tensor through every parameter layer (never a
``(B*C, ...)`` reshape), so a per-example gradient is a per-window gradient.

Everything random in a pass (the shots of stage 3, the z of the injections, DP-Input's noise)
depends on the input window and the noise generators only, never on the weights, so it is
drawn in one place, :meth:`LDPTForecaster.draw_noise`, which the forward pass calls first. A
trainer may call it for the next batch ahead of time, in a background thread, while the
current batch trains, and hand the result to ``forward(x, noise=...)``: with the generators
used in the same order the pass is the same.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from qpriv.errors import InvalidInputError
from qpriv.forecasting.config import ModelConfig
from qpriv.forecasting.layers import (
    Block,
    ClassicalEmbedding,
    Head,
    Injection,
    QuantumFeatures,
)
from qpriv.forecasting.revin import RevIN
from qpriv.quantum.features import outcome_probabilities
from qpriv.quantum.states import signed_amplitudes

#: The paper's parameter count (section 7.2), for comparison in reports. Ours is larger: the
#: flatten head alone is T d_model H = 81 x 128 x 24 = 249 K weights, and the rest of the model
#: (347 K) matches the paper's total, which seems to leave the head out.
PAPER_PARAMETERS = {"classical": 163_000, "quantum_attention": 182_000, "total": 345_000}

QUANTUM_ATTENTION = "quantum_attention"
CLASSICAL = "classical"


@dataclass(frozen=True)
class PassNoise:
    """The random draws of one forward pass over a batch (:meth:`LDPTForecaster.draw_noise`).

    ``input``: DP-Input's noise on the raw window ``(B, L, C)``; ``features``: the quantum
    features ``qf (B, C, T, D^2+1)`` (from the noised window); ``injections``: the z of noise
    #1, of noise #2 after the attention and after the FFN of every block, and of noise #3, in
    that order. None where the model draws nothing.
    """

    input: Tensor | None
    features: Tensor | None
    injections: tuple[Tensor | None, ...]


class LDPTForecaster(nn.Module):
    """The LDPT backbone (the LDPT paper, section 5); every method is a configuration of it.

    The model owns two ``torch.Generator`` streams, one for the shots of the quantum features
    and one for the three injections, seeded by :meth:`seed_noise` (seed 0 at construction).
    Both are active in training and in inference: two calls draw fresh noise, and the same seed
    reproduces the same draws. Their state is saved and restored with :meth:`noise_state` and
    :meth:`load_noise_state`; the generators live on the device the model had when seeded.

    >>> model = LDPTForecaster(ModelConfig(seq_len=32, horizon=4, n_channels=2, d_model=16,
    ...                                    use_quantum=False, gate=0.0))
    >>> model(torch.zeros(3, 32, 2)).shape
    torch.Size([3, 4, 2])
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        cfg = config
        d, T = cfg.d_model, cfg.n_tokens
        sigma = cfg.sigma if cfg.injects else 0.0

        # token t holds positions t*s .. t*s + D - 1; a gather (not Tensor.unfold) so that
        # per-window gradients under torch.func.vmap have a batching rule for its backward
        self.register_buffer("token_index", (torch.arange(T)[:, None] * cfg.stride
                                             + torch.arange(cfg.dim)[None, :]), persistent=False)
        self.revin = RevIN(cfg.n_channels, per_window=cfg.normalisation == "revin")
        self.embed = (
            ClassicalEmbedding(dim=cfg.dim, d_model=d, n_tokens=T)
            if cfg.uses_classical_embedding else None
        )
        self.features = self.proj = None
        if cfg.use_quantum:
            centre = {}
            if cfg.encoding == "signed":  # centred on the state of the token x = 0
                zero = signed_amplitudes(torch.zeros(cfg.dim, dtype=torch.float64),
                                         clip=cfg.clip, reference=cfg.reference_amplitude)
                signal = (1.0 - cfg.p) * cfg.clip / cfg.reference_amplitude
                noise = cfg.hilbert_dim**2 / cfg.n_shots if cfg.n_shots else 0.0
                centre = {"baseline": outcome_probabilities(zero / zero.norm(), p=cfg.p).float(),
                          "gain": 1.0 / math.sqrt(signal**2 + noise)}
            self.features = QuantumFeatures(p=cfg.p, n_shots=cfg.n_shots, scale=cfg.feature_scale,
                                            **centre)
            self.proj = nn.Linear(cfg.n_features, d)  # W_proj
        self.inject_input = Injection(sigma=sigma)  # noise #1
        n_features = cfg.n_features if cfg.conditioned else None
        self.blocks = nn.ModuleList(
            Block(
                in_dim=2 * d if i == 0 else d, d_model=d, n_heads=cfg.n_heads, d_ff=cfg.d_ff,
                dropout=cfg.dropout, n_features=n_features, sigma=sigma,
            )
            for i in range(cfg.n_layers)
        )
        self.head = Head(n_tokens=T, d_model=d, horizon=cfg.horizon)
        self.inject_output = Injection(sigma=sigma, factor=cfg.k)  # noise #3
        self.seed_noise(0)

    def forward(self, x: Tensor, noise: PassNoise | None = None) -> Tensor:
        """``x (B, L, C)`` -> forecast ``(B, H, C)``; one pass draws fresh shots and noise
        (:meth:`draw_noise`), unless ``noise`` drawn ahead for this ``x`` is given.
        An input of another dtype (float64, say) is cast to the weights' (float32)."""
        cfg = self.config
        x = self._checked_input(x)
        if noise is None:
            noise = self.draw_noise(x)
        if noise.input is not None:  # DP-Input: the raw window is noised before anything reads it
            x = x + noise.input
        noise_input, *noise_blocks, noise_output = noise.injections

        x_norm, _, stats = self.revin(x.transpose(1, 2))  # (B, C, L) each
        tokens = x_norm[..., self.token_index]  # (B, C, T, D), the unfold as a gather
        x_cl = self.embed(tokens) if self.embed is not None else None  # (B, C, T, d)
        if self.features is not None:
            qf = noise.features  # (B, C, T, D^2+1), no grad
            x_q = self.proj(qf)  # (B, C, T, d)
            q = qf.mean(dim=2)  # (B, C, D^2+1), token-mean-pooled conditioning
            x_cl = (1.0 - cfg.gate) * x_cl if x_cl is not None else torch.zeros_like(x_q)
            x_enh = self.inject_input(torch.cat([x_cl, x_q], dim=-1), noise_input)  # (B,C,T,2d)
            h = x_enh[..., cfg.d_model:]  # residual stream: the (noised) W_proj qf
        else:  # no quantum path: the tokens are x_cl, the quantum half of x_enh is zero
            q = None
            x_enh = self.inject_input(torch.cat([x_cl, torch.zeros_like(x_cl)], dim=-1),
                                      noise_input)
            h = x_enh[..., : cfg.d_model]  # residual stream: x_cl
        for i, block in enumerate(self.blocks):
            h = block(h, x_enh if i == 0 else h, q, noise_blocks[2 * i: 2 * i + 2])  # (B,C,T,d)
        y = self.inject_output(self.head(h), noise_output)  # (B, C, H)
        return self.revin.denormalise(y, stats).transpose(1, 2)  # (B, H, C)

    @torch.no_grad()
    def draw_noise(self, x: Tensor) -> PassNoise:
        """Everything random of one pass over ``x (B, L, C)``, drawn from the noise generators.

        The shots of the quantum features come from the shot generator; DP-Input's noise and
        the injections' z, in pass order, from the injection generator. Nothing here reads a
        weight, so it may run ahead of the pass, in another thread, while the weights train
        (the generators must then be left to it alone); ``forward(x, noise=...)`` with the
        result is the pass that ``forward(x)`` would have been.
        """
        cfg = self.config
        x = self._checked_input(x)
        shots_rng, noise_rng = self._generators(x.device)
        input_noise = None
        if cfg.input_noise > 0:
            input_noise = cfg.input_noise * torch.randn(x.shape, generator=noise_rng,
                                                        device=x.device, dtype=x.dtype)
        features = None
        if self.features is not None:
            noised = x if input_noise is None else x + input_noise
            z, _ = self.revin.standardise(noised.transpose(1, 2))  # (B, C, L)
            features = self.features(self._channel_input(z), shots_rng)
        tokens = (x.shape[0], cfg.n_channels, cfg.n_tokens)
        shapes = [(*tokens, 2 * cfg.d_model)]
        shapes += [(*tokens, cfg.d_model)] * (2 * len(self.blocks))
        shapes += [(x.shape[0], cfg.n_channels, cfg.horizon)]
        injections = [self.inject_input, *(b.inject for b in self.blocks for _ in range(2)),
                      self.inject_output]
        return PassNoise(
            input=input_noise, features=features,
            injections=tuple(inject.draw(shape, noise_rng, dtype=x.dtype)
                             for inject, shape in zip(injections, shapes, strict=True)),
        )

    @property
    def draws_ahead(self) -> bool:
        """Whether :meth:`draw_noise` has work worth doing ahead of the pass: the quantum
        features (exact or shot-sampled) or any noise."""
        return self.features is not None or self.config.noisy_inference

    def _checked_input(self, x: Tensor) -> Tensor:
        """``x`` of shape (B, L, C), in the weights' dtype."""
        cfg = self.config
        if x.ndim != 3 or x.shape[1:] != (cfg.seq_len, cfg.n_channels):
            raise InvalidInputError(
                f"input shape {tuple(x.shape)} is not (batch, seq_len = {cfg.seq_len}, "
                f"n_channels = {cfg.n_channels})"
            )
        if x.dtype != self.head.linear.weight.dtype:
            x = x.to(self.head.linear.weight.dtype)
        return x

    def encoded_tokens(self, x: Tensor) -> Tensor | None:
        """The tokens that :meth:`forward` amplitude-encodes and sends through the channel.

        ``x (B, L, C)`` -> ``(B, C, T, D)`` in x's dtype (float64 in, float64 out, so an audit
        can compare states to 1e-9), by the same normalisation and unfolding as the forward
        pass (the signed encoding: the signed amplitudes ``(B, C, T, 2 D)``); None for a model
        without the quantum path. Used by the side-channel audit
        (:mod:`qpriv.audits.sidechannel`).
        """
        if self.features is None:
            return None
        z, _ = self.revin.standardise(x.transpose(1, 2))  # (B, C, L)
        return self._channel_input(z)

    def _channel_input(self, z: Tensor) -> Tensor:
        """``z (B, C, L)`` -> the vectors amplitude-encoded per token: the tokens ``(B, C, T, D)``
        (eq. 2), or their signed amplitudes ``(B, C, T, 2 D)`` (the ``ldpt-signed`` encoding)."""
        cfg = self.config
        tokens = z.unfold(-1, cfg.dim, cfg.stride)
        if cfg.encoding == "signed":
            return signed_amplitudes(tokens, clip=cfg.clip, reference=cfg.reference_amplitude)
        return tokens

    # -- noise streams ---------------------------------------------------------------------

    def seed_noise(self, seed: int, *, device: torch.device | str | None = None) -> None:
        """Seed the shot and injection generators, on ``device`` (default: the parameters')."""
        if device is None:
            device = next(self.parameters()).device
        derive = torch.Generator().manual_seed(int(seed))
        shots_seed, noise_seed = torch.randint(2**62, (2,), generator=derive).tolist()
        self._shots_rng = torch.Generator(device=device).manual_seed(shots_seed)
        self._noise_rng = torch.Generator(device=device).manual_seed(noise_seed)

    def noise_state(self) -> dict[str, Tensor]:
        """The state of both noise generators (CPU byte tensors), for checkpoints."""
        return {"shots": self._shots_rng.get_state(), "injection": self._noise_rng.get_state()}

    def load_noise_state(self, state: dict[str, Tensor]) -> None:
        """Restore the generators from :meth:`noise_state`."""
        self._shots_rng.set_state(state["shots"])
        self._noise_rng.set_state(state["injection"])

    def _generators(self, device: torch.device) -> tuple[torch.Generator, torch.Generator]:
        if self._noise_rng.device.type != device.type:
            raise InvalidInputError(
                f"the model's noise generators are on {self._noise_rng.device} but the input is "
                f"on {device}; call model.seed_noise(seed) after moving the model to {device}"
            )
        return self._shots_rng, self._noise_rng

    # -- parameters ------------------------------------------------------------------------

    def parameter_groups(self) -> dict[str, list[nn.Parameter]]:
        """Trainable parameters by learning-rate group (the LDPT paper, section 7.2).

        ``quantum_attention``: W_proj and the Q/K/V/O projections of every block; ``classical``:
        everything else (RevIN, x_cl, QC-AdaLN and its conditioning MLPs, FFN, head). The
        grouping is by role, the same for every method of the backbone.
        """
        quantum_ids = {id(p) for block in self.blocks for p in block.attention.parameters()}
        if self.proj is not None:
            quantum_ids |= {id(p) for p in self.proj.parameters()}
        groups: dict[str, list[nn.Parameter]] = {CLASSICAL: [], QUANTUM_ATTENTION: []}
        for p in self.parameters():
            if p.requires_grad:
                groups[QUANTUM_ATTENTION if id(p) in quantum_ids else CLASSICAL].append(p)
        return groups

    def parameter_counts(self) -> dict[str, int]:
        """Trainable parameter counts per group and in total."""
        counts = {name: sum(p.numel() for p in ps) for name, ps in self.parameter_groups().items()}
        counts["total"] = sum(counts.values())
        return counts
