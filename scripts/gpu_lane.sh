#!/usr/bin/env bash
# The GPU lane as run on the lent H200 (no internet): wheels in .whl/ (see docs/running.md) go to /tmp/site, the
# machine's own torch/triton are used; tox when the image has it, else tox.ini's gpu steps by hand (tox_env).
# Logs go to $OUT (or ./gpu-logs).
#   bash scripts/gpu_lane.sh [test|regen|bench|all|profile]
# test: `tox -e gpu`, whose first step starts compiling the kernels of the committed launch manifest
#   .gpu_launches.json on every CPU core beside pytest, whose workers wait for it before their first test
#   (python -m harness compile --warm --background; HARNESS_WARM_MANIFEST=none skips it, HARNESS_WARM_BESIDE=0
#   runs it before pytest instead).
# profile: the lane cold on an empty Triton cache, recording its launches to $OUT/gpu_launches.json; then, on
#   another empty cache, `tox -e gpu` warm-started from that manifest, for each worker count per GPU in
#   HARNESS_PROFILE_WORKERS (default "4") (docs/gpu-lane.md, "Warm start").
#   Each step's wall time goes to $OUT/times.txt, a per-file/per-test profile of each junit to $OUT/profile-*.txt.
set -uo pipefail
out=${OUT:-gpu-logs}; mkdir -p "$out"
# stamp WHAT T0: WHAT's wall time since T0 ($EPOCHREALTIME) and since the script began, to $out/times.txt
start=$EPOCHREALTIME
stamp() {
    awk -v what="$1" -v t0="$2" -v s="$start" -v now="$EPOCHREALTIME" \
        'BEGIN { printf "%s: %.1f s (%.1f s into gpu_lane.sh)\n", what, now - t0, now - s }' | tee -a "$out/times.txt"
}
what=${1:-all}
if [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl \
        && export PYTHONPATH=/tmp/site  # tox (where carried), mmaemu, pytest-split; tox envs see HARNESS_GPU_SITE_PACKAGES
fi
export PYTHONUNBUFFERED=1
# Python's default: bytecode written and reused (each of the lane's workers otherwise compiles the harness and
# re-rewrites every test module it collects); the log says whether the image had turned it off.
echo "PYTHONDONTWRITEBYTECODE=${PYTHONDONTWRITEBYTECODE-<unset>} (unset for the lane)" | tee "$out/env.txt"
unset PYTHONDONTWRITEBYTECODE
HARNESS_GPU_SITE_PACKAGES=$(python3 -c 'import site; print(":".join(site.getsitepackages()))')
export HARNESS_GPU_SITE_PACKAGES
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/device.txt"
# in the background: a cold box takes seconds to import torch, which nothing before pytest needs
python3 -c "import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)" \
    >>"$out/device.txt" &
versions_pid=$!
rc=0

# tox_env ENV [pytest args]: `tox -e ENV -- args` (gpu or regen), or where the image has no tox (the lent H200's
# has none, and .whl/ carries only mmaemu and pytest-split), the same steps as tox.ini's gpu env, by hand.
installed=0
tox_env() {
    local env=$1; shift
    if python3 -m tox --version >/dev/null 2>&1; then
        python3 -m tox -e "$env" -- "$@"; return
    fi
    # The editable install (pip on one core, for pytest's entry point) runs beside the warm start, which needs
    # none of it (python -m harness from the repo root imports the checkout).
    local pip_pid= t0=$EPOCHREALTIME
    if [ "$installed" = 0 ]; then
        python3 -m pip install -q --no-deps --no-build-isolation --no-index -e . >"$out/pip-editable.log" 2>&1 &
        pip_pid=$!
    fi
    # as tox's "- " prefix: a failed warm start leaves the lane to compile as it launches. Beside the run (the
    # default, as tox.ini): it compiles while pytest's workers start, and they wait for it before their first
    # test; HARNESS_WARM_BESIDE=0: before pytest, as it was.
    local warm_done beside=${HARNESS_WARM_BESIDE:-1}
    warm_done="$(cd "$out" && pwd)/warm-$env.done"
    local warm_args=(--warm "${HARNESS_WARM_MANIFEST:-.gpu_launches.json}" --missing-ok --jobs "${HARNESS_WARM_JOBS:-0}")
    [ "$beside" = 1 ] && warm_args+=(--background "$warm_done")
    python3 -m harness compile "${warm_args[@]}" \
        || echo "gpu_lane: the warm start failed (exit $?); the lane compiles as it goes"
    if [ -n "$pip_pid" ]; then
        if ! wait "$pip_pid"; then
            echo "gpu_lane: pip install -e . failed:" >&2; cat "$out/pip-editable.log" >&2; return 1
        fi
        installed=1
    fi
    if [ "$beside" = 1 ]; then
        export HARNESS_WARM_DONE=$warm_done
        stamp "$env: the editable install (the warm start going on beside pytest)" "$t0"
    else
        unset HARNESS_WARM_DONE
        stamp "$env: warm start (and the editable install beside it)" "$t0"
    fi
    t0=$EPOCHREALTIME
    local rc=0
    if [ "$env" = regen ]; then
        TRITON_INTERPRET=0 HARNESS_WORKERS_PER_GPU=${HARNESS_WORKERS_PER_GPU:-8} python3 -m harness golden regen "$@" \
            || rc=$?
    else
        TRITON_INTERPRET=0 HARNESS_WORKERS_PER_GPU=${HARNESS_WORKERS_PER_GPU:-8} \
            python3 -m pytest -n "${HARNESS_GPU_WORKERS:-auto}" --dist worksteal --harness-lane=gpu "$@" || rc=$?
    fi
    stamp "$env: pytest" "$t0"
    if [ "$beside" = 1 ]; then  # the warm start's own line, from its log
        grep -h "^harness compile --warm" "$warm_done.log" 2>/dev/null | sed "s/^/$env: beside pytest: /" | tee -a "$out/times.txt"
    fi
    return "$rc"
}

# profile_junit JUNIT: where a lane's summed test time went (per file, the slowest tests, the critical path).
profile_junit() {
    python3 - "$1" "${HARNESS_WORKERS_PER_GPU:-8}" <<'PY'
import collections, sys, xml.etree.ElementTree as ET
path, workers = sys.argv[1], int(sys.argv[2])
ran = [(float(t.get("time", 0)), f"{t.get('classname')}::{t.get('name')}") for t in ET.parse(path).iter("testcase")
       if t.find("skipped") is None]
total = sum(t for t, _ in ran)
print(f"{path}: {len(ran)} tests ran, {total:.0f} s summed; / {workers} workers = {total / workers:.0f} s; "
      f"longest test {max(ran)[0]:.0f} s (the least wall time is the larger of the two)")
files = collections.Counter()
for t, name in ran:
    files[name.split("::")[0]] += t
for f, t in files.most_common(15):
    print(f"  {t:7.1f} s  {f}")
for t, name in sorted(ran, reverse=True)[:25]:
    print(f"  {t:7.2f} s  {name}")
PY
}

if [ "$what" = regen ] || [ "$what" = all ]; then
    # Twice: the second run must change no file (the goldens are deterministic on one machine).
    tox_env regen -q -n "${HARNESS_GPU_WORKERS:-4}" 2>&1 | tee "$out/regen.log"; rc=$(( rc | PIPESTATUS[0] ))
    find golden -name '*.npz' -print0 | sort -z | xargs -0 sha256sum > "$out/golden.sha256"
    tox_env regen -q -n "${HARNESS_GPU_WORKERS:-4}" 2>&1 | tee "$out/regen2.log"; rc=$(( rc | PIPESTATUS[0] ))
    if sha256sum --quiet -c "$out/golden.sha256" >/dev/null 2>&1; then
        echo "regen twice: the second run changed no golden file" | tee -a "$out/regen2.log"
    else
        echo "regen twice: the second run CHANGED golden files:" | tee -a "$out/regen2.log"
        sha256sum --quiet -c "$out/golden.sha256" 2>&1 | tee -a "$out/regen2.log"; rc=1
    fi
    tar czf "$out/golden.tgz" golden  # the captured goldens, to commit from the machine that asked
fi
if [ "$what" = test ] || [ "$what" = all ]; then
    tox_env gpu -q --harness-report="$out/report.json" --junitxml="$out/junit.xml" 2>&1 \
        | tee "$out/gpu.log"; rc=$(( rc | PIPESTATUS[0] ))
    profile_junit "$out/junit.xml" > "$out/profile.txt" 2>&1
fi
if [ "$what" = profile ]; then
    find golden -name '*.npz' -print0 | sort -z | xargs -0 sha256sum > "$out/golden.sha256"
    cache=$(mktemp -d)
    # 1. cold (a Triton cache of its own, no manifest), recording what the lane compiles
    t0=$(date +%s)
    TRITON_CACHE_DIR=$cache/cold HARNESS_WARM_MANIFEST=none tox_env gpu -q --durations=30 \
        --harness-record-launches="$out/gpu_launches.json" --junitxml="$out/junit-cold.xml" 2>&1 \
        | tee "$out/gpu-cold.log"; rc=$(( rc | PIPESTATUS[0] ))
    echo "cold lane (records $out/gpu_launches.json): $(( $(date +%s) - t0 )) s" | tee -a "$out/times.txt"
    profile_junit "$out/junit-cold.xml" > "$out/profile-cold.txt" 2>&1
    # 2. `tox -e gpu` as committed, on another empty cache each time: its first step is the warm start from the
    #    manifest just recorded (its summary line, with its own wall time, is in the log), then the lane; once per
    #    worker count in HARNESS_PROFILE_WORKERS (default "4"; e.g. "4 2 1" to compare)
    for w in ${HARNESS_PROFILE_WORKERS:-4}; do
        t0=$(date +%s)
        TRITON_CACHE_DIR=$cache/warm-$w HARNESS_WORKERS_PER_GPU=$w HARNESS_WARM_MANIFEST="$out/gpu_launches.json" \
            tox_env gpu -q --durations=30 --junitxml="$out/junit-warm-$w.xml" 2>&1 | tee "$out/gpu-warm-$w.log"
        rc=$(( rc | PIPESTATUS[0] ))
        echo "warm start + lane, $w workers per GPU: $(( $(date +%s) - t0 )) s" | tee -a "$out/times.txt"
        HARNESS_WORKERS_PER_GPU=$w profile_junit "$out/junit-warm-$w.xml" > "$out/profile-warm-$w.txt" 2>&1
    done
    if sha256sum --quiet -c "$out/golden.sha256" >/dev/null 2>&1; then
        echo "goldens unchanged by the lane" | tee -a "$out/times.txt"
    else
        echo "the lane CHANGED golden files" | tee -a "$out/times.txt"; rc=1
    fi
    rm -rf "$cache"
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
    for b in benchmarks/bench_*.py; do
        [ -f "$b" ] && python3 "$b" 2>&1 | tee -a "$out/bench.log"
    done
fi
wait "$versions_pid"; cat "$out/device.txt"
stamp "gpu_lane.sh $what" "$start"
exit $rc
