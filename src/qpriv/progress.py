"""Progress on stderr: a bar per training epoch (tqdm, running loss and ETA) and one line per
finished epoch."""

from __future__ import annotations

import sys

from tqdm.auto import tqdm


def epoch_bar(*, total: int, epoch: int, epochs: int, enabled: bool) -> tqdm:
    """A bar over the ``total`` batches of one epoch, written to stderr; ``enabled=False``
    gives a silent bar with the same interface (for tests and JSON output)."""
    return tqdm(
        total=total, desc=f"epoch {epoch}/{epochs}", unit="batch", leave=False,
        disable=not enabled, file=sys.stderr, dynamic_ncols=True,
    )


def work_bar(*, total: int, desc: str, unit: str, enabled: bool,
             unit_scale: bool = False, initial: int = 0) -> tqdm:
    """A bar over ``total`` units of some long computation (not training), on stderr;
    ``unit_scale`` writes large counts as 12.3k; ``initial`` units are done already (they
    count towards the total, not towards the rate and the ETA)."""
    return tqdm(total=total, desc=desc, unit=unit, unit_scale=unit_scale, leave=False,
                disable=not enabled, file=sys.stderr, dynamic_ncols=True, initial=initial)


def epoch_summary(row: dict, *, epochs: int, best_epoch: int) -> None:
    """One line for a finished epoch (a trainer history row), written above any open bar."""
    lrs = ", ".join(f"{lr:.3g}" for lr in row["lr"])
    best = " (best)" if row["epoch"] == best_epoch else ""
    tqdm.write(
        f"epoch {row['epoch']}/{epochs}: train {row['train_loss']:.4f}, "
        f"val {row['val_loss']:.4f}{best}, lr {lrs}, "
        f"{row['train_seconds'] + row['val_seconds']:.1f} s",
        file=sys.stderr,
    )
    if row.get("diverged"):
        kept = (f"the best-validation weights of epoch {best_epoch} are kept" if best_epoch
                else "no epoch had a finite validation loss, so there is no model to keep")
        tqdm.write(f"epoch {row['epoch']}: the loss is not finite, training diverged and "
                   f"stops here; {kept}", file=sys.stderr)
