#!/usr/bin/env bash
# Store-kernel variants (issue 12 item 1) on the H200: timing first, then bit-exactness vs the shipped kernel.
# Run as: OUT=/some/dir PYTHONPATH=<tree root> bash gpu.sh   (cap: 6 minutes wall; Triton 3.6 expected)
# Writes $OUT/bench.log (timing + PTX stats), $OUT/check.log (PASS/FAIL), $OUT/bench.json, $OUT/check.json.
set -u
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$HERE"
[ -f "$ROOT/kernels/turboquant/store.py" ] || ROOT="${PYTHONPATH%%:*}"
OUT="${OUT:-$HERE/.gpu-out}"
mkdir -p "$OUT"
PY="${PYTHON:-python}"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
unset TRITON_INTERPRET
cd "$ROOT" || exit 1
{
  date -u; nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv 2>&1 | head -3
  "$PY" -c "import torch, triton; print(torch.__version__, triton.__version__)" 2>&1
  # 1) timing at 128k tok x 8 kvh (d128, d256 primary; d96 bf16, d80 fp32, d128 fp16 secondary), PTX stats
  timeout 200 "$PY" benchmarks/bench_store_variants.py --bench-only --json "$OUT/bench.json" 2>&1
  echo "bench rc=$?"
} > "$OUT/bench.log" 2>&1
{
  # 2) bit-exactness: 4k tok x 8 heads, d80/128/256 x fp16/bf16/fp32 x e4nv/e4b15 x contiguous/heads-major
  #    (+ d64, d96 bf16), specials mixed in, skipped and out-of-range slots; mixed key/value dtypes
  timeout 140 "$PY" benchmarks/bench_store_variants.py --check-only --json "$OUT/check.json" 2>&1
  echo "check rc=$?"
  date -u
} > "$OUT/check.log" 2>&1
tail -3 "$OUT/check.log"
grep -E "graph|ERROR" "$OUT/bench.log" | tail -40
