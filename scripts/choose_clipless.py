"""How the clipless Lipschitz MLP's logit temperature tau and SGD base rate were chosen: on the
validation share of the synthetic task's training split, never on the test split.

Every (tau, lr) of the grid trains 15 epochs at |B| = 64, seed 2024, with SGD (the figures'
optimiser), the public bounds X = 16 and B = 1, without noise and at eps 1 and 10 (delta 1e-5);
the choice is the pair with the best mean validation accuracy over the three (ties to the
smaller rate). The test split is not read. The library's constants are the choice:
``qpriv.classification.request.ANALYTIC_TAU`` and ``qpriv.experiments.qml_protocol.CLIPLESS_LR``.

    python scripts/choose_clipless.py            # about 2 minutes on one core
"""

from __future__ import annotations

import itertools
import json

import numpy as np

from qpriv.classification.data import VALIDATION_FRACTION
from qpriv.classification.request import ANALYTIC_DEFAULTS
from qpriv.classification.run import train_classifier
from qpriv.experiments.qml_protocol import OPTIMIZER, PROTOCOLS
from qpriv.privacy.budget import CLASSIFIER_DELTA

TAUS = (0.5, 1.0, 2.0)
RATES = (0.003, 0.01, 0.03, 0.1)
NOISE = (None, 1.0, 10.0)


def main() -> None:
    hidden = PROTOCOLS["full"].hidden
    rows = []
    for tau, lr in itertools.product(TAUS, RATES):
        scores = []
        for eps in NOISE:
            r = train_classifier(task="synthetic", model="lipschitz", clip="analytic", batch=64,
                                 epochs=15, seed=2024, lr=lr, optimizer=OPTIMIZER, eps=eps,
                                 delta=CLASSIFIER_DELTA, tau=tau, hidden=hidden, threads=1,
                                 validation=VALIDATION_FRACTION, diagnostics=False,
                                 **ANALYTIC_DEFAULTS)
            assert r.evaluated_on == "validation"
            scores.append(r.accuracy)
        rows.append({"tau": tau, "lr": lr, "val_accuracy": dict(zip(
            ["no noise", "eps 1", "eps 10"], scores, strict=True)), "mean": float(np.mean(scores))})
        print(f"tau {tau:<4g} lr {lr:<6g} " + "  ".join(
            f"{k} {v:.3f}" for k, v in rows[-1]["val_accuracy"].items())
            + f"  mean {rows[-1]['mean']:.3f}", flush=True)
    best = max(rows, key=lambda row: (round(row["mean"], 12), -row["lr"]))
    print(f"chosen: tau {best['tau']:g}, lr {best['lr']:g} (mean {best['mean']:.3f})")
    print(json.dumps({"rows": rows, "chosen": {"tau": best["tau"], "lr": best["lr"]}}))


if __name__ == "__main__":
    main()
