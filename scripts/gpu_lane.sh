#!/usr/bin/env bash
# The GPU lane as run on the lent H200 (no internet): tox comes as wheels in .whl/ (see README), the
# machine's own torch/triton are used. Logs go to $OUT (or ./gpu-logs).
#   bash scripts/gpu_lane.sh [test|regen|bench|all]
set -uo pipefail
out=${OUT:-gpu-logs}; mkdir -p "$out"
what=${1:-all}
if [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl \
        && export PYTHONPATH=/tmp/site  # tox itself; the test envs see only HARNESS_GPU_SITE_PACKAGES
fi
export PYTHONUNBUFFERED=1
HARNESS_GPU_SITE_PACKAGES=$(python3 -c 'import site; print(":".join(site.getsitepackages()))')
export HARNESS_GPU_SITE_PACKAGES
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/device.txt"
python3 -c "import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)" \
    | tee -a "$out/device.txt"
rc=0
if [ "$what" = regen ] || [ "$what" = all ]; then
    # Twice: the second run must change no file (the goldens are deterministic on one machine).
    python3 -m tox -e regen -- -q -n "${HARNESS_GPU_WORKERS:-4}" 2>&1 | tee "$out/regen.log"; rc=$(( rc | PIPESTATUS[0] ))
    find golden -name '*.npz' -print0 | sort -z | xargs -0 sha256sum > "$out/golden.sha256"
    python3 -m tox -e regen -- -q -n "${HARNESS_GPU_WORKERS:-4}" 2>&1 | tee "$out/regen2.log"; rc=$(( rc | PIPESTATUS[0] ))
    if sha256sum --quiet -c "$out/golden.sha256" >/dev/null 2>&1; then
        echo "regen twice: the second run changed no golden file" | tee -a "$out/regen2.log"
    else
        echo "regen twice: the second run CHANGED golden files:" | tee -a "$out/regen2.log"
        sha256sum --quiet -c "$out/golden.sha256" 2>&1 | tee -a "$out/regen2.log"; rc=1
    fi
    tar czf "$out/golden.tgz" golden  # the captured goldens, to commit from the machine that asked
fi
if [ "$what" = test ] || [ "$what" = all ]; then
    python3 -m tox -e gpu -- -q --harness-report="$out/report.json" --junitxml="$out/junit.xml" 2>&1 \
        | tee "$out/gpu.log"; rc=$(( rc | PIPESTATUS[0] ))
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
    for b in benchmarks/bench_*.py; do
        [ -f "$b" ] && python3 "$b" 2>&1 | tee -a "$out/bench.log"
    done
fi
exit $rc
