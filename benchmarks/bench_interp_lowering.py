"""What the lowering shim costs on the CPU lane: the everyday-pattern kernels of issue 38 (``tests/lowering/
kernels.py``) on the Triton interpreter with ``harness.interp.lowering`` (fma contraction, reductions and scans in
the compiled kernel's order) against the same interpreter with that shim lifted (``lowering.suspended()``). The
issue-38 target: at most 1.5x per pattern.

Usage: ``python benchmarks/bench_interp_lowering.py [--repeat N] [--threads N] [--patterns a,b] [--json PATH]``.
CPU only; not a test: nothing asserts a time. One case per pattern (its first in ``kernels.PATTERNS``), its
inputs from the kernels module's seed, 8 rows where the pattern has rows (the interpreter runs one program at a
time, so the cost per program is what counts). Each row runs ``--repeat`` times with the shim and as often
without, alternately, after one warm-up of each (the warm-up looks up the launch's compiled facts: from the disk
cache when warm, else one sm90 compile, reported as ``first s``); medians of wall and CPU time, and their ratios.
The lane's other shims (casts, bf16 arithmetic, approximate math, dots) are on in both.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
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

ROWS = 8


def _case(pattern: str):
    from tests.lowering import kernels

    name, p = kernels.PATTERNS[pattern][0]
    inputs = kernels.make_inputs(pattern, p)
    inputs = {k: (v[:ROWS].contiguous() if isinstance(v, torch.Tensor) and v.dim() == 2 and
                  pattern not in ("acc_loop", "col_sum") else v) for k, v in inputs.items()}

    def run():
        kernels.launch(pattern, p, inputs, "cpu")

    return name, run


def _timed(fn) -> tuple[float, float]:
    w0, c0 = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - w0, time.process_time() - c0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5, help="timed calls per row (default 5)")
    ap.add_argument("--threads", type=int, default=None, help="torch/OpenMP/BLAS threads (default: theirs)")
    ap.add_argument("--patterns", default="", help="comma-separated subset (default: all)")
    ap.add_argument("--json", metavar="PATH", type=Path, default=None, help="also write the rows as JSON here")
    args = ap.parse_args()
    if args.repeat < 1:
        raise SystemExit(f"--repeat must be at least 1, got {args.repeat}")
    if args.threads is not None:
        torch.set_num_threads(args.threads)

    import warnings

    from harness.interp import lowering, shims
    from harness.interp.patch import Patch
    from tests.lowering import kernels

    wanted = [p for p in args.patterns.split(",") if p] or list(kernels.PATTERNS)
    unknown = sorted(set(wanted) - set(kernels.PATTERNS))
    if unknown:
        raise SystemExit(f"--patterns: unknown {unknown}; known: {sorted(kernels.PATTERNS)}")
    warnings.simplefilter("ignore")  # the shims' warnings are the tests' business, not the timing's
    patch = Patch()
    shims.install(patch, "sm90")
    if not lowering.installed():
        raise SystemExit("harness.interp.lowering does not understand this Triton's interpreter")
    print(f"# Triton {triton.__version__} interpreter, torch {torch.__version__}, {os.cpu_count()} CPUs, "
          f"torch threads {torch.get_num_threads()}, median of {args.repeat}")
    print(f"{'pattern':<16} {'case':<18} {'first s':>8} {'shim s':>8} {'plain s':>8} {'ratio':>6} {'CPU ratio':>9}")
    rows = []
    for pattern in wanted:
        case, fn = _case(pattern)
        first = _timed(fn)[0]
        with lowering.suspended():
            fn()
        shim, plain = [], []
        for _ in range(args.repeat):
            shim.append(_timed(fn))
            with lowering.suspended():
                plain.append(_timed(fn))
        m = {"shim_s": statistics.median(t[0] for t in shim), "plain_s": statistics.median(t[0] for t in plain),
             "shim_cpu_s": statistics.median(t[1] for t in shim),
             "plain_cpu_s": statistics.median(t[1] for t in plain)}
        row = {"pattern": pattern, "case": case, "first_s": first, **m, "ratio": m["shim_s"] / m["plain_s"],
               "cpu_ratio": m["shim_cpu_s"] / m["plain_cpu_s"]}
        rows.append(row)
        print(f"{pattern:<16} {case:<18} {first:>8.3f} {m['shim_s']:>8.3f} {m['plain_s']:>8.3f} {row['ratio']:>6.2f} "
              f"{row['cpu_ratio']:>9.2f}", flush=True)
    patch.undo()
    if args.json is not None:
        args.json.write_text(json.dumps({"triton": triton.__version__, "threads": torch.get_num_threads(),
                                         "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
