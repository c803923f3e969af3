#!/usr/bin/env bash
# GPU run for the QSA top-k (issue 12 item 2). Writes to $OUT: log.txt (everything printed, including the
# top-k timings as JSON lines), topk.json, bench_qsa.json. Cap: 5 minutes wall. Each step logs its failure
# and the next one still runs.
set -u
OUT=${OUT:?OUT must name the output directory}
export PYTHONPATH=${PYTHONPATH:-$PWD}
PY=${PYTHON:-python}
LOG=$OUT/log.txt
step() {  # step NAME SECONDS CMD...
    local name=$1 secs=$2; shift 2
    echo "=== $name ($(date -u +%T))" >>"$LOG"
    timeout "$secs" "$@" >>"$LOG" 2>&1
    echo "=== $name rc=$? ($(date -u +%T))" >>"$LOG"
}
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; $PY -c "import torch, triton; print(torch.__version__, triton.__version__)"; } >>"$LOG" 2>&1
# (1) exactness: radix plans, bitwise and the shipped choice vs a stable-sort reference; (2) do_bench timings
step topk 100 $PY benchmarks/gpu_topk.py "$OUT/topk.json"
# (3) end to end with the shipped top-k
step bench 90 $PY benchmarks/bench_qsa.py --json "$OUT/bench_qsa.json"
echo "done $(date -u +%T)" >>"$LOG"
