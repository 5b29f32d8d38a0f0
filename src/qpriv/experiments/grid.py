"""The declared shape of an experiment: its cells, budgets and seeds, and how seeds aggregate.

:mod:`qpriv.experiments.registry` declares every table and figure with these; the runner
(:mod:`qpriv.experiments.runner`) and the tables that compute their own rows
(:mod:`qpriv.experiments.computed`, :mod:`qpriv.experiments.qml_rows`) read them.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qpriv.forecasting.csv_input import CsvFormat
from qpriv.forecasting.methods import DEFAULT_EPOCHS, TUNED_EPOCHS

PAPER_EPS = (0.1, 0.5, 1.0, 5.0)
PAPER_SEEDS = (2024, 2025, 2026)
PAPER_HORIZONS = (24, 48, 96, 168, 336, 720)

QML_SEEDS = tuple(range(2024, 2034))
"""The private-training paper's 10 seeds ("10 experiments ... with distinct random seeds"; it
does not print them). ``quick`` uses the first 2 of the seeds passed in, ``tiny`` the first."""


@dataclass(frozen=True)
class Cell:
    """One training run of a grid."""

    method: str
    eps: float | None = None
    dataset: str = "ETTh1"
    horizon: int = 24
    seed: int = 2024
    overrides: tuple[tuple[str, Any], ...] = ()

    @property
    def key(self) -> str:
        """A file-name-safe identity, e.g. ``ETTh1-H24-ldpt-eps0.1-s2024``."""
        parts = [self.dataset, f"H{self.horizon}", self.method]
        if self.eps is not None:
            parts.append(f"eps{self.eps:g}")
        parts += [f"{k}{v}" for k, v in self.overrides]
        parts.append(f"s{self.seed}")
        return "-".join(parts)

    @property
    def group(self) -> tuple:
        """What a table row is: the cell without its seed (seeds are averaged)."""
        return (self.dataset, self.horizon, self.method, self.eps, self.overrides)


@dataclass(frozen=True)
class CsvData:
    """A user's CSV as the data of a grid's cells (``qpriv frontier --csv``): the file, as an
    absolute path (a cell may run elsewhere), the channels kept and how the file is written.
    The cells' ``dataset`` is a label for their keys; the file is read from here."""

    path: str
    columns: tuple[str, ...] | None = None
    fmt: CsvFormat | None = None


def data_arguments(csv: CsvData | None, *, data_dir: str | Path | None) -> dict[str, Any]:
    """The data arguments of a grid's cell for :func:`qpriv.forecasting.run.run_forecast` (and
    :func:`qpriv.forecasting.windows.load_forecasting_data`): the named dataset, found from
    ``data_dir``, or the user's file ``csv`` (``data_dir`` is then not used)."""
    if csv is None:
        return {"data_dir": data_dir}
    return {"csv": csv.path, "csv_format": csv.fmt,
            "columns": None if csv.columns is None else list(csv.columns)}


@dataclass(frozen=True)
class Budget:
    """How much of the paper's protocol a run spends. ``None`` keeps the paper's value."""

    name: str
    epochs: int | None = None
    max_train_windows: int | None = None
    max_eval_windows: int | None = None
    seq_len: int = 336
    model: tuple[tuple[str, Any], ...] = ()
    trace_pairs: int = 1400
    mia_windows: int = 1000
    rigorous: bool = True
    """Add the rigorous accounting beside the paper's in each LDPT cell (a minute per new
    setting, cached); off for the small budgets, whose point is speed."""


FULL = Budget("full")
QUICK = Budget("quick", epochs=1, max_train_windows=256, max_eval_windows=128, mia_windows=128,
               rigorous=False)
"""``quick``: the paper's model and data on a few windows, so any experiment finishes in under
15 minutes on 2 CPU cores (about 10-25 s a cell); the numbers show the pipeline, not the
paper's results."""
TINY = Budget("tiny", epochs=1, max_train_windows=64, max_eval_windows=32, seq_len=48,
              model=(("d_model", 8), ("n_heads", 2), ("d_ff", 16), ("dim", 4), ("n_shots", 32)),
              trace_pairs=100, mia_windows=32, rigorous=False)
"""``tiny`` is for the test suite: every experiment end to end in seconds."""
BUDGETS = {b.name: b for b in (FULL, QUICK, TINY)}


def budget_stamp(budget: Budget, *, tuned: bool = False) -> str:
    """What a forecasting run of ``budget`` spends, in one line for a figure's corner:
    ``budget quick: 1 epoch, 256 training and 128 evaluation windows, L = 336``. ``tuned``:
    the figure draws ``dpsgd-tuned``, whose own epochs a budget without epochs then names."""
    own = f"{DEFAULT_EPOCHS}; dpsgd-tuned {TUNED_EPOCHS}" if tuned else f"{DEFAULT_EPOCHS}"
    epochs = (f"the method's epochs ({own})"
              if budget.epochs is None
              else f"{budget.epochs} epoch{'s' if budget.epochs != 1 else ''}")
    train = ("every training window" if budget.max_train_windows is None
             else f"{budget.max_train_windows} training windows")
    evaluation = ("every evaluation window" if budget.max_eval_windows is None
                  else f"{budget.max_eval_windows} evaluation windows")
    model = (", model " + ", ".join(f"{k} = {v}" for k, v in budget.model)
             if budget.model else "")
    return f"budget {budget.name}: {epochs}, {train}, {evaluation}, L = {budget.seq_len}{model}"


@dataclass(frozen=True)
class Experiment:
    """A paper table or figure.

    ``cells(seeds)`` lists the training runs (empty for computed tables); ``metrics`` the result
    fields tabulated per row (see :func:`qpriv.experiments.runner.cell_metrics`); ``compute``
    the rows of a table that trains no forecaster, called with the keywords ``budget``,
    ``data_dir``, ``seeds``, ``progress`` and ``out_dir`` (a folder where it keeps its own
    finished runs, so that a second call recomputes nothing); ``derive`` adds
    columns computed across rows (e.g. Table 10's eps-separation); ``figure`` names the plot
    (:mod:`qpriv.experiments.figures`). ``paper`` is the id in
    :data:`qpriv.experiments.paper_numbers.PAPER_TABLES` whose numbers are printed beside ours.
    ``seeds`` are the paper's, replaced by the ones a caller gives; none (``()``) for a table
    that trains nothing, which refuses any.
    ``full_hours`` is a rough cost of the full budget on 2 CPU cores (one epoch of the
    classical backbone on 8281 windows takes about 2.5 minutes there, LDPT about twice that).
    """

    id: str
    title: str
    paper: str
    cells: Callable[[Sequence[int]], list[Cell]] = field(default=lambda seeds: [])
    metrics: tuple[str, ...] = ()
    compute: Callable[..., list[dict]] | None = None
    derive: Callable[[list[dict]], list[dict]] | None = None
    figure: str | None = None
    seeds: tuple[int, ...] = (2024,)
    full_hours: float = 0.0
    quick_minutes: float | None = None
    """Measured ``--quick`` wall time of a computed experiment (cells are estimated per cell)."""
    stamp: Callable[[Budget], str] = budget_stamp
    """The budget's line on the figure (the classifier figures spend theirs differently)."""
    distributes: bool = False
    """Whether ``compute`` hands its runs to the grid's executor (keywords ``executor`` and
    ``announce``: the classifier figures' runs), so that ``--executor ray`` runs them as Ray
    tasks; the other computed tables run only here."""


# -- grid builders --------------------------------------------------------------------------


def grid(
    methods: Iterable[tuple[str, Iterable[float | None]]],
    *,
    datasets: Iterable[str] = ("ETTh1",),
    horizons: Iterable[int] = (24,),
) -> Callable[[Sequence[int]], list[Cell]]:
    """Cells for every (dataset, horizon, method, eps, seed); ``methods`` pairs a method with
    its eps values (``(None,)`` for methods without a budget)."""
    methods = [(m, tuple(eps)) for m, eps in methods]
    datasets, horizons = tuple(datasets), tuple(horizons)

    def cells(seeds: Sequence[int]) -> list[Cell]:
        return [Cell(method=m, eps=e, dataset=d, horizon=h, seed=s)
                for d in datasets for h in horizons for m, eps in methods for e in eps
                for s in seeds]

    return cells


def mean_std(values: Iterable[Any]) -> tuple[float | None, float | None]:
    """Mean and sample standard deviation of the finite numbers (None where undefined)."""
    numbers = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(
        v, bool) and math.isfinite(v)]
    if not numbers:
        return None, None
    std = statistics.stdev(numbers) if len(numbers) > 1 else None
    return statistics.fmean(numbers), std
