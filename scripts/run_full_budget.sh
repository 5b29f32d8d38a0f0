#!/usr/bin/env bash
# The full-budget grids whose small outputs belong under results/, in the order they are
# wanted, each resumable: run this again after an interruption and finished cells are reused,
# a killed cell continues from its last epoch. Two lanes run side by side at the lowest CPU
# priority (nice 19), one per core: the forecasting grids and the classifier figures. When a
# grid finishes it is published into results/ (scripts/publish_results.py); commit those.
#
#   QPRIV_DATA_DIR=/path/to/ETT-small bash scripts/run_full_budget.sh [OUT]   # default runs/full
#
# Logs go to OUT/logs/<grid>.log. Pause both lanes (say, to time a benchmark) with
# `pkill -STOP -f "qpriv (reproduce|frontier)"` and resume them with `pkill -CONT -f ...`.
# On a Ray cluster, pass the forecasting grids `--executor ray` instead (README, "Running a grid
# on many cores or a cluster").
set -u
cd "$(dirname "$0")/.."
OUT=${1:-runs/full}
QPRIV=${QPRIV:-.venv/bin/qpriv}
PYTHON=${PYTHON:-.venv/bin/python}
mkdir -p "$OUT/logs"

grid() {  # grid NAME COMMAND...: run a grid, then publish it under results/NAME
    local name=$1 kind=$2 id=$3
    shift 3
    local command="qpriv $*"
    if nice -n 19 "$QPRIV" "$@" --quiet --json > "$OUT/logs/$name.log" 2>&1; then
        "$PYTHON" scripts/publish_results.py --out "$OUT" "--$kind" "$id" --dest "results/$name" \
            --command "$command" >> "$OUT/logs/$name.log" 2>&1
    else
        echo "$name: failed, see $OUT/logs/$name.log" >&2
    fi
}

forecasting() {
    grid table3 reproduce table3 reproduce table3 --out "$OUT" --threads 1
    for unit in record window; do
        grid "frontier-ETTh1-H24-$unit" frontier "ETTh1-H24-$unit" \
            frontier --dataset ETTh1 --horizon 24 --unit "$unit" --out "$OUT" --threads 1
    done
    grid table9 reproduce table9 reproduce table9 --out "$OUT" --threads 1
    # the frontier table's other settings: 9 transformer cells each (about 1-2 h a cell)
    for setting in "ETTh1 96" "ETTh1 336" "ETTh1 720" "ETTh2 24"; do
        set -- $setting
        for unit in record window; do
            grid "frontier-$1-H$2-$unit" frontier "$1-H$2-$unit" \
                frontier --dataset "$1" --horizon "$2" --unit "$unit" --out "$OUT" --threads 1
        done
    done
}

classifiers() {
    for figure in 3 4 5 6 2 7; do
        grid "qml-figure$figure" reproduce "qml-figure$figure" \
            reproduce "qml-figure$figure" --out "$OUT" --threads 1
    done
}

forecasting &
classifiers &
wait
