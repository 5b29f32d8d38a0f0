"""Progress on stderr: a bar per training epoch (tqdm, running loss and ETA), one line per
finished epoch, and, for a job of several parts (``qpriv quickstart``), one overall bar with an
ETA across them.

Every bar and line carries the label of the part it belongs to (``[2/3 LDPT eps=1.0] epoch
1/3: ...``): :func:`label` and :meth:`JobProgress.part` set it for the code they run, so a
trainer deep inside a job needs no argument to say whose epoch it is. Bars are drawn only where
stderr is a terminal (tqdm's own test); in a CI log or a test the lines alone are written.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field, replace

from tqdm.auto import tqdm


@dataclass(frozen=True)
class Part:
    """One part of a job and the seconds it is planned to take: ``lead`` before its steps
    (data, accounting), then ``steps`` (the planned seconds of each training epoch, or of each
    cell of a grid), then whatever is left of ``seconds`` (testing)."""

    label: str
    seconds: float
    steps: tuple[float, ...] = ()
    lead: float = 0.0
    epochs_are_steps: bool = True
    """A training epoch finished inside the part is one of its steps (a grid of cells says
    when a cell is done with :func:`step_done` instead)."""


@dataclass
class _Running:
    """A part under way: where on the job's bar it started and how many steps are done."""

    job: JobProgress
    part: Part
    start: float
    steps_done: int = 0

    def at(self, steps: float) -> float:
        """The job's planned progress after ``steps`` (fractional) of this part's steps."""
        whole = int(steps)
        done = self.part.lead + sum(self.part.steps[:whole])
        if whole < len(self.part.steps):
            done += (steps - whole) * self.part.steps[whole]
        return self.start + min(done, self.part.seconds)

    def step_done(self) -> None:
        self.steps_done += 1
        self.job.move_to(self.at(self.steps_done))


@dataclass(frozen=True)
class _Scope:
    label: str = ""
    running: _Running | None = None
    epochs_move: bool = False
    """Training epochs in this scope move the job's bar (not in a cell of a grid)."""


_OUTSIDE = _Scope()
_SCOPE: ContextVar[_Scope | None] = ContextVar("qpriv_progress_scope", default=None)


def _scope() -> _Scope:
    """The part (and labels) the calling code runs in."""
    return _SCOPE.get() or _OUTSIDE


def labelled(text: str) -> str:
    """``text`` behind the label of the part that is running (itself outside any)."""
    prefix = _scope().label
    return f"{prefix} {text}" if prefix else text


@contextlib.contextmanager
def label(text: str) -> Iterator[None]:
    """Inside the block every bar and line starts with ``text``, after the labels of any
    enclosing parts (``[3/3 frontier] [12/17 ETTh1-H24-dpsgd-eps1-s2024] epoch 1/1: ...``)."""
    outer = _scope()
    token = _SCOPE.set(replace(outer, label=labelled(text), epochs_move=False))
    try:
        yield
    finally:
        _SCOPE.reset(token)


def say(line: str) -> None:
    """One labelled line on stderr, written above any open bar."""
    tqdm.write(labelled(line), file=sys.stderr)


def tell(line: str) -> None:
    """One result line on stdout, written above any open bar (which stays on stderr)."""
    tqdm.write(line, file=sys.stdout)


def step_done() -> None:
    """One step of the running part (a cell of a grid) is done: move the job's bar to where
    the plan puts its end. Nothing outside a job."""
    running = _scope().running
    if running is not None:
        running.step_done()


class _EpochBar(tqdm):
    """An epoch's bar whose batches also move the job's overall bar through the epoch's planned
    seconds (only in a part whose epochs are its steps)."""

    def update(self, n: float = 1) -> bool | None:
        shown = super().update(n)
        scope = _scope()
        if scope.epochs_move and scope.running is not None and self.total:
            running = scope.running
            running.job.move_to(running.at(running.steps_done + min(self.n / self.total, 1.0)))
        return shown


def epoch_bar(*, total: int, epoch: int, epochs: int, enabled: bool) -> tqdm:
    """A bar over the ``total`` batches of one epoch, written to stderr where it is a terminal;
    ``enabled=False`` gives a silent bar with the same interface (for tests and JSON output)."""
    return _EpochBar(
        total=total, desc=labelled(f"epoch {epoch}/{epochs}"), unit="batch", leave=False,
        disable=None if enabled else True, file=sys.stderr, dynamic_ncols=True,
    )


def work_bar(*, total: int, desc: str, unit: str, enabled: bool,
             unit_scale: bool = False, initial: int = 0) -> tqdm:
    """A bar over ``total`` units of some long computation (not training), on stderr where it
    is a terminal (elsewhere one line says what starts); ``unit_scale`` writes large counts
    as 12.3k; ``initial`` units are done already (they count towards the total, not towards
    the rate and the ETA)."""
    bar = tqdm(total=total, desc=labelled(desc), unit=unit, unit_scale=unit_scale,
               leave=False, disable=None if enabled else True, file=sys.stderr,
               dynamic_ncols=True, initial=initial)
    if enabled and bar.disable:
        say(f"{desc}: {total:,} {unit}{'' if total == 1 else 's'}")
    return bar


def epoch_summary(row: dict, *, epochs: int, best_epoch: int) -> None:
    """One line for a finished epoch (a trainer history row), written above any open bar; in
    a job's training part it also moves the overall bar to the epoch's planned end."""
    lrs = ", ".join(f"{lr:.3g}" for lr in row["lr"])
    best = " (best)" if row["epoch"] == best_epoch else ""
    say(f"epoch {row['epoch']}/{epochs}: train loss {row['train_loss']:.4f}, "
        f"val loss {row['val_loss']:.4f}{best}, lr {lrs}, "
        f"{row['train_seconds'] + row['val_seconds']:.1f} s")
    if row.get("diverged"):
        kept = (f"the best-validation weights of epoch {best_epoch} are kept" if best_epoch
                else "no epoch had a finite validation loss, so there is no model to keep")
        say(f"epoch {row['epoch']}: the loss is not finite, training diverged and stops "
            f"here; {kept}")
    scope = _scope()
    if scope.epochs_move and scope.running is not None:
        scope.running.step_done()


def _clock(seconds: float) -> str:
    return tqdm.format_interval(max(seconds, 0.0))


@dataclass
class JobProgress:
    """One overall bar across the parts of a job, each planned to take some seconds (rough).

    The bar moves by the plan: a part's training epochs move it batch by batch, a grid's cells
    cell by cell, and a finished part moves it to the part's planned end. Its ETA is tqdm's at
    the average pace so far (``smoothing=0``), so a machine slower or faster than the plan is
    corrected for as the job goes. Where stderr is not a terminal there is no bar; a line after
    each part says how far through its plan the job is. Use as a context manager::

        with JobProgress(parts=plan, desc="quickstart", enabled=True) as job:
            with job.part(plan[0]):
                ...
    """

    parts: Sequence[Part]
    desc: str
    enabled: bool
    planned: float = field(init=False)
    done: float = field(init=False, default=0.0)
    started: float = field(init=False, default_factory=time.perf_counter)
    bar: tqdm = field(init=False)

    def __post_init__(self) -> None:
        self.planned = max(sum(p.seconds for p in self.parts), 1e-6)
        self.bar = tqdm(
            total=self.planned, desc=self.desc, file=sys.stderr, smoothing=0,
            disable=None if self.enabled else True, dynamic_ncols=True,
            bar_format="{desc}: {percentage:3.0f}%|{bar}| {elapsed} elapsed, ~{remaining} "
                       "left{postfix}")

    def __enter__(self) -> JobProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.close()

    def move_to(self, done: float) -> None:
        """Move the bar forward to ``done`` planned seconds (never back, never past the
        plan)."""
        done = min(done, self.planned)
        if done > self.done:
            self.bar.update(done - self.done)
            self.done = done

    def status(self) -> str:
        """``58 % of the plan done in 03:10, about 02:18 left`` (the pace so far)."""
        elapsed = time.perf_counter() - self.started
        share = self.done / self.planned
        left = elapsed * (1 - share) / share if share > 0 else float("nan")
        guess = f"about {_clock(left)} left" if share > 0 else "no pace yet"
        return f"{100 * share:.0f} % of the plan done in {_clock(elapsed)}, {guess}"

    @contextlib.contextmanager
    def part(self, part: Part) -> Iterator[None]:
        """Run one part of the plan: its label on every bar and line inside, its epochs (or
        :func:`step_done` calls) moving the bar, and the bar at its planned end afterwards."""
        running = _Running(job=self, part=part, start=self.done)
        token = _SCOPE.set(_Scope(label=part.label, running=running,
                                  epochs_move=part.epochs_are_steps))
        try:
            yield
        finally:
            _SCOPE.reset(token)
        self.move_to(running.start + part.seconds)
        if self.enabled and self.bar.disable:  # no bar to look at: a line instead
            tqdm.write(f"{part.label} done; the job: {self.status()}", file=sys.stderr)
