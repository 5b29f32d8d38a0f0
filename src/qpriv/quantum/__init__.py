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

import lazy_loader

# The names below are imported on first use (the lazy_loader package): a module that needs one
# light piece of this package (the token count of qpriv.quantum.tokens) then does not pay for
# QuTiP and torch.
__getattr__, __dir__, __all__ = lazy_loader.attach(
    __name__,
    submod_attrs={
        "channels": [
            "apply_superoperator", "depolarize", "depolarized_pure_fidelity",
            "depolarized_pure_purity", "depolarizing_collapse_operators",
            "depolarizing_liouvillian", "depolarizing_p_from_rate", "depolarizing_propagator",
            "depolarizing_rate",
        ],
        "features": [
            "FeatureStats", "outcome_probabilities", "quantum_features",
            "quantum_features_reference",
        ],
        "povm": [
            "available_sic_dims", "sic_fiducial", "sic_overlap_deviation", "sic_povm",
            "sic_vectors", "verify_sic", "weyl_heisenberg_orbit",
        ],
        "shots": ["frequencies", "sample_counts"],
        "states": [
            "amplitude_encode", "amplitude_encode_with_mask", "density_matrix", "fidelity",
            "pure_trace_distance_full", "purity", "trace_distance_full", "trace_distance_half",
        ],
    },
)
