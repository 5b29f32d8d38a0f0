"""Per-example gradients of the quantum classifier: ours (per-example weights) vs vmap vs PennyLane.

Times, in one run, on the same weights and the same 64 examples, the per-example gradients of
the cross-entropy loss of the variational quantum classifier (amplitude encoding, L layers of
RZ RY RZ and a CNOT ring, logits <Z_k> / tau on the first K = 4 qubits):

* ours       ``qpriv.classification.dpsgd.per_example_gradients``: each example runs through
             its own copy of the angles (``QuantumClassifier.forward_per_example``) and one
             backward pass gives every example's gradient (the statevector of
             ``qpriv.quantum.circuits``);
* vmap       the generic path every other model takes, torch.func vmap of grad over the
             batch, on the same model;
* pennylane  ``default.qubit`` with ``interface="torch"`` and ``diff_method="backprop"``, the
             same ansatz, one forward and one ``torch.autograd.grad`` per example (a Python
             loop: PennyLane has no per-example gradient of its own).

for n = 4 and 6 qubits and L = 2 and 6 layers; it checks that all three give the same gradients
(to 1e-4 in float32) and prints seconds per batch for each, the ratios per setting and, last,
the ratios of the total times. Targets: ours >= 20x faster than PennyLane, and faster than vmap
(the reason the per-example weights exist). Runs in well under a minute.

    python benchmarks/per_example_grads.py
    python benchmarks/per_example_grads.py --threads 2 --repeats 5
"""

from __future__ import annotations

import argparse

import torch
from _timing import (
    best_seconds,
    best_seconds_interleaved,
    machine_facts,
    print_record,
    run_benchmark,
)

from qpriv.classification.dpsgd import per_example_gradients
from qpriv.classification.models import QuantumClassifier
from qpriv.quantum.circuits import pennylane_reference

N_CLASSES = 4
TAU = 0.5


class VmapOnly(torch.nn.Module):
    """The classifier without ``forward_per_example``: per-example gradients by vmap of grad."""

    def __init__(self, model: QuantumClassifier) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)


def pennylane_gradients(model: QuantumClassifier, x: torch.Tensor, y: torch.Tensor):
    """A function computing the (B, P) per-example gradients with PennyLane, one at a time."""
    circuit = pennylane_reference(model.circuit.n_qubits, N_CLASSES)
    psi = model.encode(x).detach()

    def run() -> torch.Tensor:
        weights = model.weights.detach().clone().requires_grad_()
        rows = []
        for i in range(x.shape[0]):
            logits = torch.stack(list(circuit(psi[i], weights))) / model.tau
            loss = torch.nn.functional.cross_entropy(logits[None].float(), y[i:i + 1])
            (g,) = torch.autograd.grad(loss, weights)
            rows.append(g.flatten())
        return torch.stack(rows)

    return run


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=2024)
    args = parser.parse_args(argv)

    torch.set_num_threads(args.threads)
    facts = machine_facts()
    total_ours = total_vmap = total_theirs = 0.0
    settings = []
    print(f"per-example gradients of {args.batch} examples, cross-entropy on <Z_k>/tau, "
          f"K = {N_CLASSES}, {args.threads} thread(s)")
    print(f"{'qubits':>6} {'layers':>6} {'params':>6} {'ours s':>10} {'vmap s':>10} "
          f"{'pennylane s':>12} {'vmap/ours':>8} {'pl/ours':>8}")
    for n_qubits in (4, 6):
        for n_layers in (2, 6):
            generator = torch.Generator().manual_seed(args.seed)
            model = QuantumClassifier(n_features=1 << n_qubits, n_classes=N_CLASSES,
                                      n_layers=n_layers, tau=TAU, generator=generator)
            x = torch.randn(args.batch, 1 << n_qubits, generator=generator)
            y = torch.randint(0, N_CLASSES, (args.batch,), generator=generator)
            theirs_run = pennylane_gradients(model, x, y)
            torch.testing.assert_close(per_example_gradients(model, x, y), theirs_run().float(),
                                       atol=1e-4, rtol=1e-3)
            vmapped = VmapOnly(model)
            torch.testing.assert_close(per_example_gradients(model, x, y),
                                       per_example_gradients(vmapped, x, y), atol=1e-6, rtol=1e-5)
            ours, vmap = best_seconds_interleaved(
                [lambda m=model, a=x, b=y: per_example_gradients(m, a, b),
                 lambda m=vmapped, a=x, b=y: per_example_gradients(m, a, b)], args.repeats)
            theirs = best_seconds(theirs_run, max(1, args.repeats // 3))
            total_ours += ours
            total_vmap += vmap
            total_theirs += theirs
            settings.append({"qubits": n_qubits, "layers": n_layers, "ours_s": ours,
                             "vmap_s": vmap, "pennylane_s": theirs, "ratio": theirs / ours,
                             "vmap_ratio": vmap / ours})
            print(f"{n_qubits:>6} {n_layers:>6} {model.circuit.n_parameters:>6} {ours:>10.4f} "
                  f"{vmap:>10.4f} {theirs:>12.4f} {vmap / ours:>7.2f}x {theirs / ours:>7.1f}x")
    print(f"total: ours {total_ours:.3f} s, vmap {total_vmap:.3f} s, pennylane "
          f"{total_theirs:.3f} s")
    print(f"speed-up (vmap / ours): {total_vmap / total_ours:.2f}x; (pennylane / ours): "
          f"{total_theirs / total_ours:.1f}x")
    print_record("per_example_grads", {"batch": args.batch, "settings": settings,
                                       "speed_up": total_theirs / total_ours,
                                       "speed_up_over_vmap": total_vmap / total_ours}, facts)


if __name__ == "__main__":
    run_benchmark(main)
