#!/usr/bin/env bash
# The H200 tables of a newer Triton's FP8 cast lowering (harness.fp8.LOWERINGS), in two steps:
#
#   1. here, on the CPU, with the Triton to be tabled installed (the main venv: 3.9):
#        bash scripts/capture_fp8_lowering_tables.sh compile build/ptx-3.9
#   2. on the H200 (one run, ~1 minute of GPU time; the GPU image's Triton is not used, only CuPy):
#        bash scripts/capture_fp8_lowering_tables.sh run build/ptx-3.9 "$OUT/fp8-lowering"
#      (build/ is ignored by git: carry it to the device, e.g. run(carry=["build/ptx-3.9"])).
#
# Step 2 writes fp8_targets_sm{75,80,86,89,90}.npz + fp8_targets.json exactly as for Triton 3.6 (the metadata's
# triton_lowering says which Triton compiled the PTX; tests/harness/codecs/test_fp8_targets.py passes it to
# encode(triton=...)).
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  compile)
    python scripts/compile_fp8_target_ptx.py "$2" --targets 75,80,86,89,90
    python -c "import json,sys; m=json.load(open('$2/manifest.json')); print('PTX of Triton', m['triton'], len(m['kernels']), 'cases')"
    ;;
  run)
    python -c "import json; m=json.load(open('$2/manifest.json')); assert m['triton'] != '3.6.0', 'this PTX is 3.6 (already tabled)'"
    python scripts/capture_fp8_target_tables.py "$2" "$3"
    ;;
  *)
    echo "usage: $0 compile PTXDIR | run PTXDIR OUTDIR" >&2
    exit 2
    ;;
esac
