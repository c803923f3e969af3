"""Measure the QSA logits kernel against the fp32 reference in the metric the ``qsa.logits`` rows use.

Metric: worst ``|got - ref| / S`` over visible columns, ``S[r, c] = Σ_h Σ_d |q_{r,h,d} · k_{c,d}|``
(``kernels.qsa.reference.logits_scale``; a dot product's rounding error scales with S, not with |ref|).
Sweep: ``kernels.qsa.inputs.LOGITS_SWEEP`` (every shape the CPU tests apply the rows to, plus heads
1..64 × head_dim 64/128 × pages 1/7/64 × ratios 1/4), and on a GPU also ``LOGITS_SWEEP_GPU`` (the
realistic shapes of tests/kernels/qsa/test_qsa_gpu.py). Prints one line per shape and seed, then per dtype the worst
and a ready-to-paste ``tests/tolerances/qsa.toml`` ``qsa.select`` row (rtol = 2 × worst, atol = 0; the
``qsa.logits`` rows are the derived bound, tests/harness/tensor_cores/test_bounds_rows.py).

    python scripts/measure_qsa_logits.py            # GPU if there is one, else the Triton interpreter
    python scripts/measure_qsa_logits.py --seeds 1 --lane interp
    python scripts/measure_qsa_logits.py --seeds 1 --lane interp --arch sm100   # the interpreter as sm100 computes
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

# kernels/ is not installed (only harness is): import it from this checkout.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lane", choices=["auto", "interp", "gpu"], default="auto")
    ap.add_argument("--seeds", type=int, default=3, help="seeds per shape (default 3)")
    ap.add_argument("--dtype", choices=["bf16", "fp8"], action="append", help="default: both")
    ap.add_argument("--limit", type=int, default=None, help="only the first N shapes (a smoke run)")
    ap.add_argument("--arch", default="sm90", help="interpreter lane: the arch whose numerics the shims give (default "
                    "sm90; sm100: tcgen05.mma); its rows are printed for that arch")
    args = ap.parse_args()

    import torch

    lane = args.lane
    if lane == "auto":
        lane = "gpu" if torch.cuda.is_available() else "interp"
    if lane == "gpu" and not torch.cuda.is_available():
        raise SystemExit("--lane gpu: no CUDA device")
    if lane == "interp":
        os.environ["TRITON_INTERPRET"] = "1"  # before the kernels are imported (they decorate at import)
        _install_shims(args.arch)
    from harness.arch import detect_arch, parse_arch
    from kernels.qsa import dtype_key, resolve_indexer_dtype
    from kernels.qsa.inputs import LOGITS_SWEEP, LOGITS_SWEEP_GPU, logits_errors, paste_row, prefill_logits

    arch = parse_arch(args.arch) if lane == "interp" and args.arch != "sm90" else detect_arch()
    device = "cuda" if lane == "gpu" else "cpu"
    shapes = (LOGITS_SWEEP + (LOGITS_SWEEP_GPU if lane == "gpu" else ()))[: args.limit]
    import triton

    where = torch.cuda.get_device_name() if lane == "gpu" else "triton interpreter"
    print(f"# {where} ({arch.name}), torch {torch.__version__}, triton {triton.__version__}, seeds {args.seeds}")
    print(f"{'dtype':<5} {'shape':<28} {'seed':>4} {'n':>8} {'|err|/S':>10} {'|err|/max(|ref|,1)':>18} "
          f"{'|err|':>10} {'max|ref|':>10} {'max S':>10}")
    worst: dict[str, tuple[float, str]] = {}
    t0 = time.time()
    for dtype in args.dtype or ["bf16", "fp8"]:
        key = dtype_key(resolve_indexer_dtype(dtype))
        for shape in shapes:
            for seed in range(args.seeds):
                got, ref, scale = prefill_logits(shape, dtype, rng=torch.Generator().manual_seed(seed), device=device)
                e = logits_errors(got, ref, scale)
                print(f"{key:<5} {shape.label:<28} {seed:>4} {e['n']:>8} {e['scaled']:>10.3e} {e['normwise']:>18.3e} "
                      f"{e['abs']:>10.3e} {e['max_ref']:>10.3e} {e['max_scale']:>10.3e}", flush=True)
                w = worst.get(key, (-1.0, ""))
                if not e["scaled"] <= w[0]:  # NaN wins: it must show
                    worst[key] = (e["scaled"], f"{shape.label} seed {seed}")
    print(f"# {time.time() - t0:.0f} s")
    print(f"\n# worst |err|/S per dtype on {arch.name}; qsa.select rows (the selections' tie band) for "
          "tests/tolerances/qsa.toml (rtol = 2 x worst; the qsa.logits rows are derived):")
    how = f"Measured on {where} by scripts/measure_qsa_logits.py ({len(shapes)} shapes x {args.seeds} seeds)"
    for key, (w, at) in worst.items():
        print(paste_row("qsa.select", key, arch.family, w, f"{how}, worst at {at}") + "\n")
    bad = any(not math.isfinite(w) for w, _ in worst.values())
    return 1 if bad else 0


def _install_shims(arch: str) -> None:
    """What the pytest plugin installs on the interpreter lane (harness.interp), for ``arch`` (as
    ``--harness-arch``): without the tl.dot shim the interpreter multiplies raw bf16 bit patterns, and its FP8 dot
    and casts are not the GPU's."""
    from harness.interp import shims
    from harness.interp.patch import Patch

    shims.install(Patch(), arch)  # for the whole script

if __name__ == "__main__":
    sys.exit(main())
