"""Launch each kernel whose bandwidth or TFLOP/s target is not met once, for a profiler to read (issue 43's
evidence: why a row stands where it does). Not a table and not a test: it prints which case it launches; the
numbers come from the profiler, e.g.

    ncu --clock-control none --nvtx --nvtx-include "profile/" --section SpeedOfLight --section SchedulerStats \\
        --section WarpStateStats --section Occupancy --section LaunchStats python benchmarks/ncu_cases.py \\
        [--only quantize gemm qsa]

Each case is called twice: the first call compiles; the second, the one a profiler should read, runs inside an
NVTX range ``profile`` (the ``--nvtx-include`` above), with nothing else in it but the case's own kernels. The
shapes are bench_mx.py's and bench_qsa.py's.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager

import _common  # noqa: F401  (puts the repo root on sys.path)
import bench_qsa as bq
import torch
from _common import require_cuda

from kernels.mx import quantize_fp4, scaled_gemm  # noqa: E402
from kernels.mx.reference import nvfp4_global_scale  # noqa: E402
from kernels.qsa import decode_select  # noqa: E402

GROUPS = ("quantize", "gemm", "qsa")


@contextmanager
def _profiled(label: str) -> Iterator[None]:
    """The one call of a case a profiler reads: an NVTX range of its own, the GPU idle before and after."""
    torch.cuda.synchronize()
    print(label, flush=True)
    with torch.cuda.nvtx.range("profile"):
        yield
    torch.cuda.synchronize()


def _quantize_cases() -> None:
    for m, k, dtype in [(16384, 8192, torch.bfloat16), (8192, 8192, torch.float32)]:
        x = torch.randn(m, k, device="cuda").to(dtype)
        for scheme in ("mxfp4", "nvfp4"):
            g = nvfp4_global_scale(x) if scheme == "nvfp4" else None
            out = quantize_fp4(x, scheme, global_scale=g)
            torch.cuda.synchronize()
            with _profiled(f"quantize_fp4 {scheme} {m}x{k} {str(dtype)[6:]} linear"):
                quantize_fp4(x, scheme, global_scale=g, out=(out[0], out[1]))


def _gemm_cases() -> None:
    for m, n, k in [(8192, 8192, 8192), (16, 8192, 8192)]:
        a, b = torch.randn(m, k, device="cuda"), torch.randn(n, k, device="cuda")
        qa, qb = quantize_fp4(a, "mxfp4"), quantize_fp4(b, "mxfp4")
        c = scaled_gemm(qa, qb, "mxfp4")
        torch.cuda.synchronize()
        with _profiled(f"scaled_gemm mxfp4 {m}x{n}x{k}"):
            scaled_gemm(qa, qb, "mxfp4", out=c)


def _qsa_cases() -> None:
    for i in (0, 3):  # 64x32k MTP1 (top-k 26 us of 60) and 16x128k MTP4 (top-k 80 us of 143)
        label, reqs, tokens, mtp = bq.DECODE[i]
        g = torch.Generator(device="cuda").manual_seed(0)
        _, cache, bt, q, vis, _, _ = bq._build("fp8", reqs, tokens, mtp, True, g)
        decode_select(cache, q, bt, vis, decode_query_len=mtp, topk_blocks=bq.K)
        torch.cuda.synchronize()
        with _profiled(f"decode_select fp8 {label}"):
            decode_select(cache, q, bt, vis, decode_query_len=mtp, topk_blocks=bq.K)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", nargs="+", choices=GROUPS, default=list(GROUPS), help="the groups of cases to launch")
    args = p.parse_args()
    require_cuda("ncu_cases.py")
    cases = {"quantize": _quantize_cases, "gemm": _gemm_cases, "qsa": _qsa_cases}
    for group in args.only:
        cases[group]()


if __name__ == "__main__":
    main()
