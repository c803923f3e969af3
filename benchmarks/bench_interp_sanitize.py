"""What the sanitizer costs on the CPU lane: a few kernels on the Triton interpreter with
:mod:`harness.sanitize` (every load, store and atomic lane checked against the launch's storages, stores logged
for the race check) against the same interpreter with the sanitizer lifted. The issue-42 target: at most 1.3x.

Usage: ``python benchmarks/bench_interp_sanitize.py [--repeat N] [--threads N] [--json PATH]``. CPU only; not
a test: nothing asserts a time. Each row runs ``--repeat`` times sanitized and as often plain, alternately, after
one warm-up of each; medians of CPU time (process time: the machine may be shared) and their ratio. The lane's
other shims (casts, bf16 arithmetic, approximate math, dots, lowering) are on in both, as in a pytest run.

Rows: the shipped turboquant store and load (many small programs, byte-level stores), the MX FP4 quantizer
(2-D blocks), and kernels of the sanitizer's tests: a masked copy over 64 programs (loads and stores, nothing
else: the worst case) and over one, a store every program makes to the same block (the race check's worst
case), and one program storing its block twice (the check of one program's threads: its compiled kernel's facts
come from memory after the first call).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "1"  # before triton decorates any kernel
if "--threads" in sys.argv[:-1]:
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[_var] = sys.argv[sys.argv.index("--threads") + 1]
ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import triton  # noqa: E402


def _cases() -> list[tuple[str, str, Callable[[], None]]]:
    from kernels.mx.quantize import quantize_fp4
    from kernels.turboquant import slot_bytes, tq_load_k8v4, tq_store_k8v4
    from tests.harness.sanitize import sanitize_kernels as K
    from tests.harness.sanitize import thread_kernels as T

    g = torch.Generator().manual_seed(0)
    t, h, d, nb, bs = 32, 2, 64, 4, 16
    key = torch.randn(t, h, d, generator=g, dtype=torch.float32).to(torch.bfloat16)
    value = torch.randn(t, h, d, generator=g, dtype=torch.float32).to(torch.bfloat16)
    cache = torch.zeros(nb, bs, h, slot_bytes(d), dtype=torch.uint8)
    slots = torch.randperm(nb * bs, generator=g)[:t].to(torch.int64)
    x = torch.randn(64, 256, generator=g, dtype=torch.float32).to(torch.bfloat16)
    n = 64 * 128 - 5
    src, dst = torch.randn(n, generator=g), torch.zeros(n)
    same = torch.zeros(128, dtype=torch.int32)
    twice = torch.zeros(4096, dtype=torch.int32)
    return [
        ("tq_store_k8v4", f"{t} tokens x {h} heads, d={d}",
         lambda: tq_store_k8v4(key, value, cache, slots, fp8_format="e4nv")),
        ("tq_load_k8v4", f"{t} tokens x {h} heads, d={d}",
         lambda: tq_load_k8v4(cache, slots, head_dim=d, fp8_format="e4nv")),
        ("quantize_fp4", "64 x 256 bf16, mxfp4", lambda: quantize_fp4(x, "mxfp4")),
        ("copy_masked", f"{n} fp32, 64 programs", lambda: K.copy_masked[(64,)](src, dst, n, BLOCK=128)),
        ("copy_masked", f"{n} fp32, 1 program", lambda: K.copy_masked[(1,)](src, dst, n, BLOCK=8192)),
        ("store_constant", "128 int32, 64 programs, one block", lambda: K.store_constant[(64,)](same, BLOCK=128)),
        ("zero_then_masked", "4096 int32, 1 program, stored twice",
         lambda: T.zero_then_masked[(1,)](twice, 4000, BLOCK=4096)),
    ]


def _timed(fn: Callable[[], None]) -> float:
    """CPU seconds of one call (the machine may be shared: wall time would count the others' work), after a
    collection so that neither side pays for the other's garbage."""
    gc.collect()
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5, help="timed calls per row and side (default 5)")
    ap.add_argument("--threads", type=int, default=None, help="torch/OpenMP/BLAS threads (default: theirs)")
    ap.add_argument("--json", metavar="PATH", type=Path, default=None, help="also write the rows as JSON here")
    args = ap.parse_args()
    if args.repeat < 1:
        raise SystemExit(f"--repeat must be at least 1, got {args.repeat}")
    if args.threads is not None:
        torch.set_num_threads(args.threads)

    import warnings

    from harness.interp import shims
    from harness.interp.patch import Patch, lift
    from harness.sanitize import State, install
    from harness.sanitize.launch import TAG

    warnings.simplefilter("ignore")  # the shims' warnings are the tests' business, not the timing's
    patch = Patch()
    shims.install(patch, "sm90")
    state = State("fail")
    if not install(patch, state):
        raise SystemExit(f"harness.sanitize does not understand this Triton's interpreter: {state.unsupported}")
    print(f"# Triton {triton.__version__} interpreter, torch {torch.__version__}, {os.cpu_count()} CPUs, "
          f"torch threads {torch.get_num_threads()}, median of {args.repeat}")
    print(f"{'kernel':<16} {'case':<36} {'sanitized s':>11} {'plain s':>8} {'ratio':>6}  (CPU seconds)")
    rows = []
    for name, case, fn in _cases():
        fn()
        with lift(TAG):
            fn()
        on, off = [], []
        for _ in range(args.repeat):
            on.append(_timed(fn))
            with lift(TAG):
                off.append(_timed(fn))
        row = {"kernel": name, "case": case, "sanitized_s": statistics.median(on), "plain_s": statistics.median(off)}
        row["ratio"] = row["sanitized_s"] / row["plain_s"]
        rows.append(row)
        print(f"{name:<16} {case:<36} {row['sanitized_s']:>11.3f} {row['plain_s']:>8.3f} {row['ratio']:>6.2f}",
              flush=True)
    findings = [f.message().splitlines()[0] for f in state.findings if f.kind != "overlap"]
    print(f"# {state.launches} sanitized launches; findings other than benign overlaps: {findings or 'none'}")
    patch.undo()
    if args.json is not None:
        args.json.write_text(json.dumps({"triton": triton.__version__, "threads": torch.get_num_threads(),
                                         "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
