"""Simulated quantum core: states, the Lindblad depolarizing channel, SIC-POVMs, shots, features.

Everything runs classically in torch (QuTiP builds the Lindblad operators). The feature path of
the LDPT paper is one call::

    import torch
    from qpriv.quantum import quantum_features

    windows = torch.randn(81, 16)                       # 81 windows of D = 16 (4 qubits)
    freqs, purity = quantum_features(windows, p=0.9505, n_shots=1024)
    freqs.shape, purity.shape                           # (81, 256), (81,)

Trace distances follow the papers: ``trace_distance_full`` is ||rho - sigma||_1 in [0, 2].
"""

from qpriv.quantum.channels import (
    apply_superoperator,
    depolarize,
    depolarized_pure_fidelity,
    depolarized_pure_purity,
    depolarizing_collapse_operators,
    depolarizing_liouvillian,
    depolarizing_p_from_rate,
    depolarizing_propagator,
    depolarizing_rate,
)
from qpriv.quantum.features import (
    FeatureStats,
    outcome_probabilities,
    quantum_features,
    quantum_features_reference,
)
from qpriv.quantum.povm import (
    available_sic_dims,
    sic_fiducial,
    sic_overlap_deviation,
    sic_povm,
    sic_vectors,
    verify_sic,
    weyl_heisenberg_orbit,
)
from qpriv.quantum.shots import frequencies, sample_counts
from qpriv.quantum.states import (
    amplitude_encode,
    amplitude_encode_with_mask,
    density_matrix,
    fidelity,
    pure_trace_distance_full,
    purity,
    trace_distance_full,
    trace_distance_half,
)

__all__ = [
    "FeatureStats",
    "amplitude_encode",
    "amplitude_encode_with_mask",
    "apply_superoperator",
    "available_sic_dims",
    "density_matrix",
    "depolarize",
    "depolarized_pure_fidelity",
    "depolarized_pure_purity",
    "depolarizing_collapse_operators",
    "depolarizing_liouvillian",
    "depolarizing_p_from_rate",
    "depolarizing_propagator",
    "depolarizing_rate",
    "fidelity",
    "frequencies",
    "outcome_probabilities",
    "pure_trace_distance_full",
    "purity",
    "quantum_features",
    "quantum_features_reference",
    "sample_counts",
    "sic_fiducial",
    "sic_overlap_deviation",
    "sic_povm",
    "sic_vectors",
    "trace_distance_full",
    "trace_distance_half",
    "verify_sic",
    "weyl_heisenberg_orbit",
]
