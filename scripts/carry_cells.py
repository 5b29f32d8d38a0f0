"""Carry a long grid's finished cells between machines through the repository: tooling for
this repository's own full-budget compute, not part of the installed library.

    python scripts/carry_cells.py save --out runs/full --carry carried-cells      # then commit
    python scripts/carry_cells.py save --unfinished --out runs/full --carry carried-cells
        # the same, and the cells still training with their checkpoints: once, before the
        # machine is given up
    python scripts/carry_cells.py save --no-weights ...   # finished cells without best.pt: once
        # no grid still to run attacks them (Table 9 is published)
    python scripts/carry_cells.py restore --carry carried-cells --out runs/full   # fresh machine

Finished cells of a grid carried between machines, so that a grid longer than one machine's
life still finishes.

A full-budget grid (``qpriv reproduce``, ``qpriv frontier``) can take tens of hours, and the
machine that runs it may be replaced before it is done; what survives is what the repository
holds. :func:`save` copies every *finished* cell of a run folder (``OUT/cells/<budget>/``) into a
carry folder that is committed; :func:`restore` copies them back into a fresh run folder, where
the runner reads them as finished (a cell is finished once its ``result.json`` exists) and never
trains them again. A cell still training is carried only when asked (``unfinished=True``, once
before a machine is given up): its checkpoint is rewritten every epoch, and carrying it each time
would bloat the repository's history, but a 1-2 hour cell that is not carried at all starts again
from epoch 1 on the next machine. A carried unfinished cell resumes there from its last epoch
(the checkpoint holds the model, the optimiser, the accountant and every generator), and is
replaced in the carry folder by its finished copy once it finishes.

What a carried cell holds: a forecasting cell's directory without its resumable checkpoint
(``config.json``, ``result.json``, ``best.pt`` whose weights Table 9's attack reads, ``mia.json``
and a linear forecaster's ``linear.npz`` where present; ``weights=False`` leaves ``best.pt``
behind, once no grid still to run attacks the cells: the frontiers and the figures read
``result.json`` alone, and a transformer's weights are 5 MB a cell); an unfinished one's
``config.json`` and checkpoint (which holds its best weights so far); a classifier grid's run,
one JSON file (``qml/<key>.json``). A named dataset's location on the machine that ran the
cell (``config.json``'s ``source``) is carried as the file name alone and set to this machine's
file on restore (runs of a named dataset compare their settings without it on resume); an attack's
``mia.json`` names its run folder relative to the carry folder, and the run folder's own on
restore, as the attack would have written it there.

Bad input exits with code 2 and one line. The carry folder is pruned once its grids are
published in ``results/`` (a finished cell refits, or is read back from ``results/``).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from qpriv.errors import InvalidInputError, QprivError
from qpriv.experiments.qml_runs import RUN_DIR as QML_DIR
from qpriv.forecasting.datasets import DATASETS, locate_dataset
from qpriv.runs.files import (
    atomic_write_bytes,
    atomic_write_json,
    load_checkpoint,
    read_json_object,
)
from qpriv.runs.layout import BEST_FILE, CHECKPOINT_FILE, CONFIG_FILE, MIA_FILE, RESULT_FILE

CELLS_DIR = "cells"
"""The folder of a run folder (and of a carry folder) that holds the cells, by budget."""
LEFT_BEHIND = (CHECKPOINT_FILE,)
"""Files of a finished cell that are not carried: the resumable state, of no use once finished."""
UNFINISHED_LEFT_BEHIND = (BEST_FILE,)
"""Files of an unfinished cell that are not carried: the best weights so far, which its checkpoint
holds too (the trainer writes them back to ``best.pt`` when it resumes)."""
_CHECKPOINT_FIX = "delete the cell's folder to train it again from epoch 1"


@dataclass(frozen=True)
class Carried:
    """What :func:`save` or :func:`restore` did: the cells copied and those already there."""

    copied: list[str]
    present: list[str]

    def as_dict(self) -> dict:
        return {"copied": len(self.copied), "present": len(self.present)}


def finished_cells(root: str | Path) -> list[Path]:
    """The finished cells under ``root/cells``, relative to ``root``, sorted: forecasting cell
    directories holding a ``result.json``, and classifier runs (``qml/<key>.json``)."""
    root = Path(root)
    found: list[Path] = []
    for budget in sorted((root / CELLS_DIR).glob("*")):
        if not budget.is_dir():
            continue
        for cell in sorted(budget.iterdir()):
            if cell.name.startswith("."):  # a temporary of an atomic write
                continue
            if cell.is_dir() and cell.name == QML_DIR:
                found += [run.relative_to(root) for run in sorted(cell.glob("*.json"))
                          if not run.name.startswith(".")]
            elif cell.is_dir() and (cell / RESULT_FILE).is_file():
                found.append(cell.relative_to(root))
    return found


def unfinished_cells(root: str | Path) -> list[Path]:
    """The forecasting cells under ``root/cells`` that hold a checkpoint and no ``result.json``
    (trained up to some epoch), relative to ``root``, sorted."""
    root = Path(root)
    return sorted(cell.parent.relative_to(root)
                  for cell in (root / CELLS_DIR).glob(f"*/*/{CHECKPOINT_FILE}")
                  if not cell.parent.name.startswith(".")
                  and not (cell.parent / RESULT_FILE).exists())


def _epoch(cell: Path) -> int:
    """The last finished epoch of an unfinished cell's checkpoint (0 where it has none)."""
    path = cell / CHECKPOINT_FILE
    if not path.is_file():
        return 0
    return int(load_checkpoint(path, fix=_CHECKPOINT_FIX).get("epoch", 0))


def _portable_config(config: dict) -> dict:
    """``config.json`` with a named dataset's path cut to its file name."""
    if config.get("dataset") in DATASETS and isinstance(config.get("source"), str):
        return {**config, "source": Path(config["source"]).name}
    return config


def _local_config(config: dict) -> dict:
    """``config.json`` with a named dataset's file name made this machine's file."""
    if config.get("dataset") in DATASETS and isinstance(config.get("source"), str):
        located = locate_dataset(config["dataset"], allow_download=False)
        return {**config, "source": str(located)}
    return config


def _adapted(file: Path, dest: Path, *, portable: bool) -> bytes | dict:
    """What of the cell file ``file`` is written to ``dest``: its bytes, or for a JSON file that
    names a place (``config.json``'s dataset, ``mia.json``'s run folder) the JSON made portable
    or this machine's. ``dest`` is the cell's folder on the writing side; a carried attack names
    its run folder relative to the carry folder (``cells/<budget>/<key>``)."""
    fix = f"delete {file.parent} and run the cell again"
    if file.name == CONFIG_FILE:
        config = read_json_object(file, fix=fix)
        return _portable_config(config) if portable else _local_config(config)
    if file.name == MIA_FILE:
        attack = read_json_object(file, fix=fix)
        if isinstance(attack.get("run"), str):
            run = PurePosixPath(*dest.parts[-3:]) if portable else dest
            return {**attack, "run": str(run)}
        return attack
    return file.read_bytes()


def _write(dest: Path, content: bytes | dict) -> None:
    if isinstance(content, dict):
        atomic_write_json(dest, content)
    else:
        atomic_write_bytes(dest, content)


def _carried_files(source: Path, *, weights: bool = True) -> list[Path]:
    """The files of the cell folder ``source`` that are carried, ``result.json`` or, for an
    unfinished cell, its checkpoint last (so that an interrupted copy is neither a finished cell
    nor a resumable one); without ``weights`` a finished cell's ``best.pt`` stays behind."""
    finished = (source / RESULT_FILE).is_file()
    if finished:
        left_behind = LEFT_BEHIND if weights else (*LEFT_BEHIND, BEST_FILE)
    else:
        left_behind = UNFINISHED_LEFT_BEHIND
    return sorted((f for f in source.iterdir()
                   if f.is_file() and not f.name.startswith(".") and f.name not in left_behind),
                  key=lambda f: f.name in (RESULT_FILE, CHECKPOINT_FILE))


def _replace_cell(source: Path, dest: Path, *, portable: bool, weights: bool = True) -> None:
    """``dest`` made a copy of the cell ``source``, each file atomically; a copy already there
    (an unfinished one, stale beside a result or trained less) is removed first."""
    if source.is_file():
        atomic_write_bytes(dest, source.read_bytes())
        return
    if dest.is_dir():
        shutil.rmtree(dest)
    for file in _carried_files(source, weights=weights):
        _write(dest / file.name, _adapted(file, dest, portable=portable))


def _add_missing(source: Path, dest: Path, *, portable: bool, weights: bool = True) -> None:
    """Copy into a finished cell ``dest`` the files of ``source`` written after it was carried
    (Table 9's attack writes ``mia.json`` beside a finished cell); the settings are the
    cell's own on each side."""
    if not source.is_dir():
        return
    for file in _carried_files(source, weights=weights):
        if file.name != CONFIG_FILE and not (dest / file.name).exists():
            _write(dest / file.name, _adapted(file, dest, portable=portable))


def _is_finished(path: Path) -> bool:
    return path.is_file() or (path / RESULT_FILE).is_file()


def _carry(source_root: Path, dest_root: Path, *, portable: bool, unfinished: bool,
           weights: bool = True) -> Carried:
    if not (source_root / CELLS_DIR).is_dir():
        raise InvalidInputError(f"{source_root} holds no {CELLS_DIR}/ folder: not a run folder "
                                "of qpriv reproduce or qpriv frontier (check the path)")
    copied, present = [], []
    for cell in finished_cells(source_root):
        target = dest_root / cell
        if _is_finished(target):
            _add_missing(source_root / cell, target, portable=portable, weights=weights)
            present.append(str(cell))
        else:
            _replace_cell(source_root / cell, target, portable=portable, weights=weights)
            copied.append(str(cell))
    for cell in unfinished_cells(source_root) if unfinished else ():
        target = dest_root / cell
        # only a copy trained further replaces one: the target may have gone on since (the
        # source's checkpoint is read only where the target has one)
        trained = _epoch(target)
        if _is_finished(target) or (trained and trained >= _epoch(source_root / cell)):
            present.append(str(cell))
        else:
            _replace_cell(source_root / cell, target, portable=portable)
            copied.append(str(cell))
    return Carried(copied=copied, present=present)


def save(out_dir: str | Path, carry_dir: str | Path, *, unfinished: bool = False,
         weights: bool = True) -> Carried:
    """Copy the finished cells of the run folder ``out_dir`` that ``carry_dir`` lacks, and with
    ``unfinished`` the cells still training (their checkpoint included) where ``out_dir``'s copy
    has trained more epochs than the carried one. Without ``weights`` a finished cell is carried
    without its ``best.pt`` (a copy carried before keeps it).

    Raises:
        InvalidInputError: ``out_dir`` is not a run folder; a checkpoint cannot be read.
    """
    return _carry(Path(out_dir), Path(carry_dir), portable=True, unfinished=unfinished,
                  weights=weights)


def restore(carry_dir: str | Path, out_dir: str | Path) -> Carried:
    """Copy the carried cells into the run folder ``out_dir`` where it has no finished copy
    (a half-trained copy there is replaced by the finished one), and the carried unfinished
    cells where ``out_dir`` has none trained as far.

    Raises:
        InvalidInputError: ``carry_dir`` holds no cells; a carried named dataset is not found on
            this machine (``QPRIV_DATA_DIR``); a checkpoint cannot be read.
    """
    return _carry(Path(carry_dir), Path(out_dir), portable=False, unfinished=True)

def parser() -> argparse.ArgumentParser:
    """The script's arguments."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("action", choices=("save", "restore"),
                   help="save: run folder -> carry folder; restore: carry folder -> run folder")
    p.add_argument("--out", required=True, help="the grids' run folder (their --out)")
    p.add_argument("--carry", required=True, help="the carry folder in the repository")
    p.add_argument("--unfinished", action="store_true",
                   help="save: also the cells still training, with their checkpoints (restore "
                        "always brings them back)")
    p.add_argument("--no-weights", dest="weights", action="store_false",
                   help="save: leave a finished cell's best.pt behind (only an attack on the "
                        "cell, Table 9's, reads its weights; the frontiers and figures read "
                        "result.json)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Save or restore; exit code 2 with one line on stderr if refused."""
    args = parser().parse_args(argv)
    if args.unfinished and args.action != "save":
        print("carry_cells: error: --unfinished is for save (restore always brings the "
              "unfinished cells back); drop it", file=sys.stderr)
        return 2
    if not args.weights and args.action != "save":
        print("carry_cells: error: --no-weights is for save (restore brings back what was "
              "carried); drop it", file=sys.stderr)
        return 2
    try:
        if args.action == "save":
            done = save(args.out, args.carry, unfinished=args.unfinished,
                        weights=args.weights)
        else:
            done = restore(args.carry, args.out)
    except (QprivError, OSError) as err:
        print(f"carry_cells: error: {err}", file=sys.stderr)
        return 2
    counts = done.as_dict()
    print(f"carry_cells {args.action}: {counts['copied']} cells copied, "
          f"{counts['present']} already there")
    return 0


if __name__ == "__main__":
    sys.exit(main())
