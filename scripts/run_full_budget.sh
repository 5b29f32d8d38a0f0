#!/usr/bin/env bash
# The full-budget grids whose small outputs belong under results/, in the order they are
# wanted, each resumable: run this again after an interruption and finished cells are reused,
# a killed cell continues from its last epoch. Two lanes run side by side at the lowest CPU
# priority (nice 19), one per core: the forecasting grids, and the classifier figures followed
# by the forecasting frontiers taken from the other end of the list. A grid runs under a lock
# on its dataset and horizon (the grids of one setting share transformer cells), so the two
# lanes never train the same cell: a lane that finds a setting taken moves on to the next grid.
# When a grid finishes it is published into results/ (scripts/publish_results.py); commit those.
# A grid already published under results/ is skipped (a record-unit DP-SGD folder once it
# holds every cell).
#
# The grids outlast a machine, so their finished cells are carried through the repository
# (scripts/carry_cells.py): on start the cells in CARRY (default
# carried-cells) are restored into OUT, and every 10 minutes, and after each grid, the newly
# finished ones are saved there; commit CARRY to keep them. Before the machine is given up (a
# session's end), save the cells still training too, with their checkpoints, so that they resume
# from their last epoch on the next machine:
#
#   .venv/bin/python scripts/carry_cells.py save --unfinished --out runs/full --carry carried-cells \
#       --no-weights    # once results/table9 is published: no finished cell's best.pt
#
#   QPRIV_DATA_DIR=/path/to/ETT-small bash scripts/run_full_budget.sh [OUT]   # default runs/full
#
# Logs go to OUT/logs/<grid>.log. Pause both lanes (say, to time a benchmark) with
# `pkill -STOP -f "qpriv (reproduce|frontier)"` and resume them with `pkill -CONT -f ...`.
# On a Ray cluster, pass the grids `--executor ray` instead (README, "Running a grid on many
# cores or a cluster"); the classifier figures hand out their runs too.
set -u
cd "$(dirname "$0")/.."
OUT=${1:-runs/full}
if [ -z "${QPRIV:-}" ] && [ ! -x .venv/bin/qpriv ]; then
    make -s .venv/.qpriv-installed  # a fresh machine: the venv the Makefile builds
fi
QPRIV=${QPRIV:-.venv/bin/qpriv}
PYTHON=${PYTHON:-.venv/bin/python}
CARRY=${CARRY:-carried-cells}
mkdir -p "$OUT/logs" "$OUT/locks"

carry() {  # carry save|restore, one at a time (the lanes and the timer all save)
    local weights=()
    # only Table 9's attack reads a finished cell's weights: once it is published, the cells
    # are carried without best.pt (5 MB a transformer cell)
    if [ "$1" = save ] && [ -e results/table9 ]; then
        weights=(--no-weights)
    fi
    flock "$OUT/locks/carry.lock" "$PYTHON" scripts/carry_cells.py "$1" --out "$OUT" \
        --carry "$CARRY" "${weights[@]}" >> "$OUT/logs/carry.log" 2>&1
}
if [ -d "$CARRY/cells" ]; then
    carry restore
fi

grid() {  # grid LOCK NAME KIND ID COMMAND...: run a grid, then publish it under results/NAME
    local lock=$1 name=$2 kind=$3 id=$4
    shift 4
    local command="qpriv $*"
    # a published grid is done: its cells need not be on this machine (delete results/NAME to
    # run it again); with GROWING="EPS,EPS METHOD..." it was published while some of its cells
    # were still to run, so it runs again (its finished cells are read) until its folder holds
    # every method at every eps (complete below)
    if [ -e "results/$name" ] && { [ -z "${GROWING:-}" ] || complete "results/$name" $GROWING; }; then
        echo "$name: already published in results/$name; skipped" >&2
        return 0
    fi
    # flock is released when the lane dies, so a killed run leaves no stale lock behind
    exec {fd}> "$OUT/locks/$lock.lock"
    if ! flock -n "$fd"; then
        echo "$name: $lock is being run by the other lane; skipped here" >&2
        exec {fd}>&-
        return 0
    fi
    if nice -n 19 "$QPRIV" "$@" --quiet --json > "$OUT/logs/$name.log" 2>&1; then
        "$PYTHON" scripts/publish_results.py --out "$OUT" "--$kind" "$id" --dest "results/$name" \
            --command "$command" >> "$OUT/logs/$name.log" 2>&1
    else
        echo "$name: failed, see $OUT/logs/$name.log" >&2
    fi
    carry save
    exec {fd}>&-
}

complete() {  # complete FOLDER EPS,EPS METHOD...: its frontier.csv has every method at every eps
    "$PYTHON" - "$@" <<'PY'
import csv, sys
from pathlib import Path
folder, eps, methods = Path(sys.argv[1]), [float(e) for e in sys.argv[2].split(",")], sys.argv[3:]
with (folder / "frontier.csv").open(newline="") as handle:
    rows = {(r["method"], float(r["eps"]) if r["eps"] else None) for r in csv.DictReader(handle)}
# a method without eps (the floor, the references) has one row; every other, one per eps
missing = [m for m in methods if (m, None) not in rows and any((m, e) not in rows for e in eps)]
sys.exit(1 if missing else 0)
PY
}

frontier() {  # frontier DATASET HORIZON UNIT [EPS...]: every eps of the default where none given
    local dataset=$1 horizon=$2 unit=$3
    shift 3
    grid "$dataset-H$horizon" "frontier-$dataset-H$horizon-$unit" frontier \
        "$dataset-H$horizon-$unit" frontier --dataset "$dataset" --horizon "$horizon" \
        --unit "$unit" ${1:+--eps "$@"} --out "$OUT" --threads 1
}

# the frontier table's other settings, at the two eps the table shows (0.1 and 1): 5
# transformer cells each (about 1-1.5 h a cell) instead of 9, shared between the two units;
# their closed-form methods at every eps are published in the *-linear folders
OTHER_SETTINGS=("ETTh1 96" "ETTh1 336" "ETTh1 720" "ETTh2 24")
OTHER_EPS=(0.1 1)

# DP-SGD at the record unit: the linear family's cells take seconds, the transformer's 40-120
# minutes each (dpsgd-tuned's 1.5 to 3 hours); each folder is published as its grid finishes and
# run again while it lacks a cell (the folders were first published with the linear family
# alone). classical is the transformer's noiseless twin (the cell Table 3 and the other
# frontiers share, where they ran).
RECORD_DPSGD_SETTINGS=("ETTh1 24" "ETTh1 96" "ETTh2 24" "ETTh2 96")
RECORD_DPSGD_METHODS=(dpsgd dpsgd-tuned classical dpsgd-linear dpsgd-dlinear dlinear dp-linear
                      public ridge)
RECORD_DPSGD_EPS=(0.1 1)

record_dpsgd() {  # record_dpsgd DATASET HORIZON
    local eps
    eps=$(IFS=,; echo "${RECORD_DPSGD_EPS[*]}")
    GROWING="$eps ${RECORD_DPSGD_METHODS[*]}" grid "$1-H$2" "frontier-$1-H$2-record-dpsgd" \
        frontier "$1-H$2-record" frontier --dataset "$1" --horizon "$2" --unit record \
        --eps "${RECORD_DPSGD_EPS[@]}" --methods "${RECORD_DPSGD_METHODS[@]}" --out "$OUT" \
        --threads 1
}

forecasting() {
    grid ETTh1-H24 table3 reproduce table3 reproduce table3 --out "$OUT" --threads 1
    frontier ETTh1 24 record
    frontier ETTh1 24 window
    grid ETTh1-H24 table9 reproduce table9 reproduce table9 --out "$OUT" --threads 1
    for setting in "${OTHER_SETTINGS[@]}"; do
        frontier $setting record "${OTHER_EPS[@]}"
        frontier $setting window "${OTHER_EPS[@]}"
    done
    for setting in "${RECORD_DPSGD_SETTINGS[@]}"; do
        record_dpsgd $setting
    done
}

classifiers() {
    for figure in 3 4 5 6 2 7; do
        grid "qml-figure$figure" "qml-figure$figure" reproduce "qml-figure$figure" \
            reproduce "qml-figure$figure" --out "$OUT" --threads 1
    done
    # then the forecasting frontiers from the far end, until the lanes meet
    for ((i = ${#OTHER_SETTINGS[@]} - 1; i >= 0; i--)); do
        frontier ${OTHER_SETTINGS[$i]} record "${OTHER_EPS[@]}"
        frontier ${OTHER_SETTINGS[$i]} window "${OTHER_EPS[@]}"
    done
    for ((i = ${#RECORD_DPSGD_SETTINGS[@]} - 1; i >= 0; i--)); do
        record_dpsgd ${RECORD_DPSGD_SETTINGS[$i]}
    done
}

carrier() {  # save the newly finished cells every 10 minutes
    while true; do
        sleep 600
        carry save
    done
}

forecasting &
lanes=($!)
classifiers &
lanes+=($!)
carrier &
carrier_pid=$!
wait "${lanes[@]}"
kill "$carrier_pid"
carry save
