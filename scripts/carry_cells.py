"""Carry a long grid's finished cells between machines through the repository.

    python scripts/carry_cells.py save --out runs/full --carry carried-cells      # then commit
    python scripts/carry_cells.py save --unfinished --out runs/full --carry carried-cells
        # the same, and the cells still training with their checkpoints: once, before the
        # machine is given up
    python scripts/carry_cells.py save --no-weights ...   # finished cells without best.pt: once
        # no grid still to run attacks them (Table 9 is published)
    python scripts/carry_cells.py restore --carry carried-cells --out runs/full   # fresh machine

What is carried and what is not: :mod:`qpriv.experiments.carry`. Bad input exits with code 2
and one line.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from qpriv.errors import QprivError
from qpriv.experiments.carry import restore, save


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
