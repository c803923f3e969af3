#!/usr/bin/env bash
# GPU run for the radix top-k (issue 12 item 2). Writes to $OUT: log.txt, topk.json, bench_qsa.json,
# bench_qsa_bitwise.json. Cap: 5 minutes wall. Each step logs its failure and the next one still runs.
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
# (1) exactness new vs bitwise vs a stable-sort reference, (2) do_bench timings of every tile plan
step topk 110 $PY benchmarks/gpu_topk.py "$OUT/topk.json"
# (3) end to end with the shipped top-k, then with the bitwise one (the top-k of main) for the same-session baseline
step bench_new 100 $PY benchmarks/bench_qsa.py --json "$OUT/bench_qsa.json"
step bench_bitwise 80 $PY -c "
import runpy, sys
sys.path.insert(0, 'benchmarks')
import kernels.qsa.topk as T
T.SINGLE, T.TILE = -1, 0  # every plan is refused: the bitwise kernel runs
sys.argv = ['bench_qsa.py', '--json', '$OUT/bench_qsa_bitwise.json']
runpy.run_path('benchmarks/bench_qsa.py', run_name='__main__')
"
echo "done $(date -u +%T)" >>"$LOG"
