"""The frozen configuration of the LDPT forecaster's backbone (the LDPT paper, sections 5 and 7.2).

One :class:`ModelConfig` describes every method, LDPT and its baselines: they differ only in
which fields they set (see :mod:`qpriv.forecasting.methods`). Every field is checked when the
config is built, so a bad value fails before any data is loaded or any file is written.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from qpriv.errors import InvalidInputError, require_in_range
from qpriv.privacy.calibration import DEFAULT_D
from qpriv.privacy.trace_distance import (
    signed_neighbour_distance,
    signed_reference_for_distance,
)
from qpriv.quantum.tokens import n_tokens

NORMS = ("qc-adaln", "layernorm")
FEATURE_SCALES = ("centred", "raw")
NORMALISATIONS = ("revin", "fixed")
ENCODINGS = ("amplitude", "signed")


def _require_int(name: str, value: int, *, low: int, hint: str = "") -> int:
    if isinstance(value, bool) or int(value) != value or value < low:
        message = f"{name} = {value!r} is not an integer >= {low}"
        raise InvalidInputError(f"{message}; {hint}" if hint else message)
    return int(value)


@dataclass(frozen=True)
class ModelConfig:
    """Sizes and noise settings of one forecaster.

    Shapes: the input is ``(B, L, C)`` with ``L = seq_len`` and ``C = n_channels``; the output is
    ``(B, H, C)`` with ``H = horizon``. Each channel is cut into ``n_tokens`` tokens of length
    ``dim`` (= D, the Hilbert space dimension of the ``log2(dim)``-qubit register) at ``stride``.

    Noise fields (paper eqs. 6-8, 13-15): ``p`` is the depolarizing probability of the channel,
    ``n_shots`` the SIC-POVM shots per token (``None``: exact probabilities), ``sigma`` the
    injection scale, ``k`` the output amplification of noise #3, ``inject`` switches the three
    injections on. ``gate`` is the fixed classical gate g of eq. 11 (1.0: the attention sees only
    quantum features). ``norm`` is ``"qc-adaln"`` (eq. 12) or ``"layernorm"`` (the Table 10
    ablation). ``dropout`` defaults to 0.0 because the paper states none. ``feature_scale`` is the
    fixed map applied to qf before W_proj and the conditioning MLPs: ``"centred"`` (default,
    see :class:`~qpriv.forecasting.layers.QuantumFeatures`) or ``"raw"`` (the frequencies and
    purity as measured). ``normalisation`` is ``"revin"`` (the paper: each window z-scored with
    its own mean and std, restored at the output; those statistics bypass the channel: a side
    channel) or ``"fixed"`` (no per-window statistics: the series enters as the data loader
    scaled it, with the training split's statistics; RevIN's data-independent affine map
    stays).
    ``input_noise`` is the standard deviation of Gaussian noise added to every value of the
    (z-scored) input window on every pass, before anything else reads it (the DP-Input
    baseline of the LDPT paper, section 7.2).
    ``encoding`` is ``"amplitude"`` (eq. 2: psi = x / ||x||, D = ``dim`` amplitudes; blind to
    the sign and the norm of a token) or ``"signed"`` (the ``ldpt-signed`` variant: the token
    clipped to [-``clip``, ``clip``] and a fixed reference amplitude r appended, psi = (x, r) /
    ||(x, r)|| on one qubit more, 2 ``dim`` amplitudes;
    :func:`~qpriv.quantum.states.signed_amplitudes`). ``reference`` is r; None takes the r whose
    worst neighbouring trace distance is the LDPT paper's d = 0.1 at this ``clip``
    (r = 39.99 c; :func:`~qpriv.privacy.trace_distance.signed_reference_for_distance`). Both
    are read only by the signed encoding.
    """

    seq_len: int = 336
    horizon: int = 24
    n_channels: int = 7
    dim: int = 16
    stride: int = 4
    d_model: int = 128
    n_heads: int = 4
    n_layers: int = 1
    d_ff: int = 256
    dropout: float = 0.0
    use_quantum: bool = True
    p: float = 0.0
    n_shots: int | None = 1024
    sigma: float = 0.0
    k: float = 2.0
    inject: bool = True
    norm: str = "qc-adaln"
    gate: float = 1.0
    feature_scale: str = "centred"
    input_noise: float = 0.0
    normalisation: str = "revin"
    encoding: str = "amplitude"
    clip: float = 2.0
    reference: float | None = None

    def __post_init__(self) -> None:
        _require_int("dim (token length D)", self.dim, low=2)
        if self.dim & (self.dim - 1):
            raise InvalidInputError(
                f"dim = {self.dim} is not a power of two; a token of length D is amplitude-"
                "encoded into log2(D) qubits, so D must be 2, 4, 8, 16, ..."
            )
        _require_int(
            "seq_len (input length L)", self.seq_len, low=self.dim,
            hint=f"the input must hold at least one token of length dim = {self.dim}",
        )
        _require_int("horizon (H)", self.horizon, low=1, hint="forecast at least one step")
        _require_int("n_channels (C)", self.n_channels, low=1)
        _require_int("stride", self.stride, low=1)
        _require_int("n_heads", self.n_heads, low=1)
        _require_int(
            "d_model", self.d_model, low=self.n_heads,
            hint=f"d_model must be a multiple of n_heads = {self.n_heads}",
        )
        if self.d_model % self.n_heads:
            raise InvalidInputError(
                f"d_model = {self.d_model} is not a multiple of n_heads = {self.n_heads}; "
                "choose d_model = n_heads * head_dim"
            )
        _require_int("n_layers", self.n_layers, low=1)
        _require_int("d_ff", self.d_ff, low=1)
        require_in_range("dropout", self.dropout, low=0.0, low_inclusive=True, high=1.0,
                         high_inclusive=False)
        require_in_range("p (depolarizing probability)", self.p, low=0.0, low_inclusive=True,
                         high=1.0)
        if self.n_shots is not None:
            _require_int("n_shots", self.n_shots, low=1,
                         hint="use None for exact outcome probabilities")
        require_in_range("sigma (injection scale)", self.sigma, low=0.0, low_inclusive=True)
        require_in_range("k (noise #3 amplification)", self.k, low=0.0, low_inclusive=True)
        require_in_range("input_noise (input noise std)", self.input_noise, low=0.0,
                         low_inclusive=True)
        require_in_range("gate", self.gate, low=0.0, low_inclusive=True, high=1.0)
        if self.feature_scale not in FEATURE_SCALES:
            raise InvalidInputError(
                f"feature_scale = {self.feature_scale!r} is not one of {', '.join(FEATURE_SCALES)}"
            )
        if self.norm not in NORMS:
            raise InvalidInputError(f"norm = {self.norm!r} is not one of {', '.join(NORMS)}")
        if self.normalisation not in NORMALISATIONS:
            raise InvalidInputError(
                f"normalisation = {self.normalisation!r} is not one of "
                f"{', '.join(NORMALISATIONS)}; 'revin' normalises each window with its own "
                "statistics (the paper), 'fixed' uses none (the side-channel-free variant)"
            )
        if self.encoding not in ENCODINGS:
            raise InvalidInputError(
                f"encoding = {self.encoding!r} is not one of {', '.join(ENCODINGS)}; "
                "'amplitude' is eq. 2 (x / ||x||), 'signed' appends a reference amplitude"
            )
        require_in_range("clip (public range of the signed encoding)", self.clip, low=0.0)
        if self.reference is not None:
            require_in_range("reference (amplitude r of the signed encoding)", self.reference,
                             low=0.0)
        if not self.use_quantum and self.gate != 0.0:
            raise InvalidInputError(
                f"gate = {self.gate:g} with use_quantum = False would zero the only input the "
                "attention has; a model without the quantum path reads x_cl: set gate = 0.0"
            )

    @property
    def n_tokens(self) -> int:
        """T = floor((L - D) / s) + 1, the number of sliding-window tokens per channel."""
        return n_tokens(dim=self.dim, stride=self.stride, seq_len=self.seq_len)

    @property
    def hilbert_dim(self) -> int:
        """The dimension of the register a token is encoded in: ``dim`` for eq. 2's amplitude
        encoding, ``2 dim`` (one more qubit) for the signed encoding."""
        return 2 * self.dim if self.encoding == "signed" else self.dim

    @property
    def reference_amplitude(self) -> float:
        """r of the signed encoding: ``reference``, or the r whose worst neighbouring trace
        distance is d = 0.1 at ``clip``."""
        if self.reference is not None:
            return float(self.reference)
        return signed_reference_for_distance(d=DEFAULT_D, clip=self.clip)

    @property
    def neighbour_d(self) -> float:
        """The full trace distance d between neighbouring token states that the calibration
        (Theorem 1) and the accounting use: the LDPT paper's assumed d = 0.1 for the amplitude
        encoding (a real change can exceed it: Table 2, and a token near zero can flip to an
        orthogonal state), the proved worst case ``4 c r / (c^2 + r^2)`` of one value replaced
        within [-c, c] for the signed encoding
        (:func:`~qpriv.privacy.trace_distance.signed_neighbour_distance`)."""
        if self.encoding == "signed":
            return signed_neighbour_distance(clip=self.clip, reference=self.reference_amplitude)
        return DEFAULT_D

    @property
    def n_features(self) -> int:
        """D^2 + 1: the POVM frequencies plus the purity of one token (the qf vector), D the
        register's dimension (:attr:`hilbert_dim`)."""
        return self.hilbert_dim**2 + 1

    @property
    def uses_classical_embedding(self) -> bool:
        """Whether x_cl reaches the attention: without quantum path, or with gate g < 1."""
        return not self.use_quantum or self.gate < 1.0

    @property
    def conditioned(self) -> bool:
        """Whether QC-AdaLN reads the quantum features (eq. 12). Without the quantum path the
        conditioning vector is zero and QC-AdaLN is LayerNorm (the ``classical`` method)."""
        return self.use_quantum and self.norm == "qc-adaln"

    @property
    def injects(self) -> bool:
        """Whether any of the three injections of eqs. 13-15 draws noise."""
        return self.inject and self.sigma > 0.0

    @property
    def noisy_inference(self) -> bool:
        """Whether a forward pass draws noise (in inference as in training): finite shots of
        the quantum features, an injection, or DP-Input's input noise. Two passes of such a
        model differ; those of any other are equal."""
        shots = self.use_quantum and self.n_shots is not None
        return shots or self.injects or self.input_noise > 0.0

    @property
    def draws_ahead(self) -> bool:
        """Whether a pass has randomness or quantum features worth computing ahead of it, in
        the second thread of :mod:`qpriv.training.ahead` (so a run of this model on the CPU
        keeps one core more busy than its torch threads): the quantum path, exact or
        shot-sampled, or any noise of :attr:`noisy_inference`."""
        return self.use_quantum or self.noisy_inference

    def as_dict(self) -> dict:
        """A JSON-ready dict of every field."""
        return asdict(self)
