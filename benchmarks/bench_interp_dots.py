"""What the tl.dot shim costs on the CPU lane: dot-heavy kernels on the Triton interpreter with ``harness.interp.dots``
(``tl.dot`` as the sm90 tensor cores compute it, ``harness.tensor_cores``) against the interpreter's own numpy
matmul (``dots.suspended()``). The issue-26 budget: a dot-heavy CPU test at most 2x slower with the shim on.

Usage: ``python benchmarks/bench_interp_dots.py [--repeat N] [--threads N] [--json PATH]``. CPU only (no GPU
needed); not a test: nothing asserts a time. Rows, per arch of ``--archs`` (sm90: the H200's measured rows; sm100:
tcgen05.mma's published model): the QSA logits kernels (prefill and decode, bf16 and FP8 caches: the kernels the
interpreter-lane QSA tests launch most), one plain ``tl.dot`` kernel per operand type (a 128 x 128 output, K = 256
in BK = 64 steps) and one 128 x 128 x 256 ``tl.dot_scaled`` tile per MX format (native on sm100, emulated on sm90;
issue 39's budget: sm100's at most 2x sm90's). Each row runs ``--repeat`` times with the shim and as often without,
alternately (so a change in the box's load meets both), after one warm-up of each; it reports the medians of wall
time and of the process's CPU time, and ``shim / plain`` of each: on a box shared with other jobs the CPU-time
ratio moves less. The lane's other shims (casts, bf16 arithmetic, approximate math) are on in both. The bf16 rows
without the shim compute garbage (the interpreter multiplies raw bf16 bit patterns): they are timed only as the
interpreter's own cost. ``--threads 1`` runs torch, OpenMP and the BLAS on one thread, which is what each of a CI
lane's two xdist workers on two cores effectively has.
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
if "--threads" in sys.argv[:-1]:  # before torch and numpy start their thread pools
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[_var] = sys.argv[sys.argv.index("--threads") + 1]
ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit
def _plain_dot(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
               PREC: tl.constexpr):
    m = tl.program_id(0) * BM + tl.arange(0, BM)
    n = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    for k0 in range(0, K, BK):
        k = k0 + tl.arange(0, BK)
        a = tl.load(a_ptr + m[:, None] * K + k[None, :])
        b = tl.load(b_ptr + k[:, None] * BN * tl.num_programs(1) + n[None, :])
        acc = tl.dot(a, b, acc, input_precision=PREC)
    tl.store(c_ptr + m[:, None] * BN * tl.num_programs(1) + n[None, :], acc)


def _plain_case(dtype: torch.dtype, precision: str = "tf32"):
    g = torch.Generator().manual_seed(0)
    M = N = 128
    K = 256
    a = torch.randn(M, K, generator=g).to(dtype)
    b = torch.randn(K, N, generator=g).to(dtype)
    c = torch.empty(M, N)

    def run():
        _plain_dot[(M // 64, N // 64)](a, b, c, K, BM=64, BN=64, BK=64, PREC=precision)

    return run


@triton.jit
def _scaled_dot(a_ptr, as_ptr, b_ptr, bs_ptr, c_ptr, K: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                FA: tl.constexpr, FB: tl.constexpr, PA: tl.constexpr, PB: tl.constexpr, G: tl.constexpr,
                NV: tl.constexpr):
    m = tl.arange(0, BM)
    n = tl.arange(0, BN)
    a = tl.load(a_ptr + m[:, None] * (K // PA) + tl.arange(0, K // PA)[None, :])
    b = tl.load(b_ptr + tl.arange(0, K // PB)[:, None] * BN + n[None, :])
    sa = tl.load(as_ptr + m[:, None] * (K // G) + tl.arange(0, K // G)[None, :])
    sb = tl.load(bs_ptr + n[:, None] * (K // G) + tl.arange(0, K // G)[None, :])
    if NV:
        sa = sa.to(tl.float8e4nv, bitcast=True)
        sb = sb.to(tl.float8e4nv, bitcast=True)
    acc = tl.dot_scaled(a, sa, FA, b, sb, FB, tl.zeros([BM, BN], dtype=tl.float32))
    tl.store(c_ptr + m[:, None] * BN + n[None, :], acc)


def _scaled_case(fmt: str, nvfp4: bool = False):
    """One 128 x 128 x 256 tl.dot_scaled tile (4 warps): native tcgen05 block-scaled MMA on sm100, the bf16 upcast
    and wgmma on sm90."""
    g = torch.Generator().manual_seed(2)
    M = N = 128
    K = 256
    pack = 2 if fmt == "e2m1" else 1
    a = torch.randint(0, 256, (M, K // pack), generator=g, dtype=torch.uint8)
    b = torch.randint(0, 256, (K // pack, N), generator=g, dtype=torch.uint8)
    if fmt != "e2m1":  # finite FP8 codes
        a, b = (torch.randn(x.shape, generator=g).to(torch.float8_e4m3fn).view(torch.uint8) for x in (a, b))
    grp = 16 if nvfp4 else 32
    lo, hi = (0x30, 0x40) if nvfp4 else (120, 135)
    sa = torch.randint(lo, hi, (M, K // grp), generator=g, dtype=torch.uint8)
    sb = torch.randint(lo, hi, (N, K // grp), generator=g, dtype=torch.uint8)
    c = torch.empty(M, N)

    def run():
        _scaled_dot[(1,)](a, sa, b, sb, c, K=K, BM=M, BN=N, FA=fmt, FB=fmt, PA=pack, PB=pack, G=grp, NV=nvfp4)

    return run


def _qsa_case(dtype: str, decode: bool):
    import kernels.qsa as qsa
    from kernels.qsa.inputs import build_case, decode_rows, prefill_rows
    from kernels.qsa.logits import decode_logits

    g = torch.Generator().manual_seed(1)
    cfg = qsa.IndexerConfig(num_heads=16, head_dim=128, compress_ratio=4, token_topk=64, page_size=16,
                            indexer_kv_dtype=dtype)
    case = build_case(cfg, [300, 97], rng=g, device="cpu")
    if decode:
        _, q, vis = decode_rows(case, 2, rng=g)
        n = int(vis.max())

        def run():
            decode_logits(case.cache, q, case.block_table, vis, decode_query_len=2, n_cols=n)
    else:
        _, row_req, q, vis = prefill_rows(case, [24, 10], rng=g)

        def run():
            qsa.paged_logits(case.cache, q, case.block_table, row_req, vis)

    return run


def _timed(fn) -> tuple[float, float]:
    w0, c0 = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - w0, time.process_time() - c0


def _medians(fn, repeat: int, suspended) -> dict[str, float]:
    """Median wall and CPU seconds of ``fn`` with the shim and under ``suspended()``, run alternately."""
    fn()  # warm-up: the interpreter's first call parses and patches
    with suspended():
        fn()
    shim, plain = [], []
    for _ in range(repeat):
        shim.append(_timed(fn))
        with suspended():
            plain.append(_timed(fn))
    return {"shim_s": statistics.median(t[0] for t in shim), "plain_s": statistics.median(t[0] for t in plain),
            "shim_cpu_s": statistics.median(t[1] for t in shim),
            "plain_cpu_s": statistics.median(t[1] for t in plain)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5, help="timed calls per row (default 5)")
    ap.add_argument("--threads", type=int, default=None, help="torch/OpenMP/BLAS threads (default: theirs)")
    ap.add_argument("--json", metavar="PATH", type=Path, default=None, help="also write the rows as JSON here")
    ap.add_argument("--archs", default="sm90,sm100", help="archs whose tensor cores the shims model (default "
                    "sm90,sm100; sm100 runs tcgen05.mma's published model)")
    args = ap.parse_args()
    if args.threads is not None:
        torch.set_num_threads(args.threads)

    from harness.interp import dots, shims
    from harness.interp.patch import Patch

    cases = [
        ("qsa prefill logits", "bf16", _qsa_case("bf16", False)),
        ("qsa prefill logits", "fp8", _qsa_case("fp8", False)),
        ("qsa decode logits (MTP 2)", "bf16", _qsa_case("bf16", True)),
        ("qsa decode logits (MTP 2)", "fp8", _qsa_case("fp8", True)),
        ("tl.dot 128x128, K=256", "fp16", _plain_case(torch.float16)),
        ("tl.dot 128x128, K=256", "bf16", _plain_case(torch.bfloat16)),
        ("tl.dot 128x128, K=256", "e4m3", _plain_case(torch.float8_e4m3fn)),
        ("tl.dot 128x128, K=256", "fp32 tf32", _plain_case(torch.float32)),
        ("tl.dot 128x128, K=256", "fp32 tf32x3", _plain_case(torch.float32, "tf32x3")),
        ("tl.dot 128x128, K=256", "fp32 ieee", _plain_case(torch.float32, "ieee")),
        ("tl.dot_scaled 128x128x256", "mxfp4", _scaled_case("e2m1")),
        ("tl.dot_scaled 128x128x256", "nvfp4", _scaled_case("e2m1", nvfp4=True)),
        ("tl.dot_scaled 128x128x256", "mxfp8", _scaled_case("e4m3")),
    ]
    print(f"# Triton {triton.__version__} interpreter, torch {torch.__version__}, {os.cpu_count()} CPUs, "
          f"torch threads {torch.get_num_threads()}, median of {args.repeat}; plain: the interpreter's own tl.dot "
          "(tl.dot_scaled rows: the shim in both columns)")
    rows = []
    for arch in args.archs.split(","):
        patch = Patch()
        shims.install(patch, arch)  # every shim the interpreter lane installs, for this arch
        if not dots.installed():
            raise SystemExit("harness.interp.dots does not understand this Triton's interpreter")
        print(f"## {arch}")
        print(f"{'kernel':<28} {'operands':<10} {'shim s':>8} {'plain s':>8} {'shim / plain':>12} {'CPU s':>7} "
              f"{'CPU plain':>9} {'CPU ratio':>9}")
        for name, dt, fn in cases:
            try:
                m = _medians(fn, args.repeat, dots.suspended)
            except Exception as e:  # what the arch's compiler refuses (NVFP4 on sm90 with Triton 3.6)
                why = e if isinstance(e, NotImplementedError) else e.__cause__  # the interpreter wraps it
                if not isinstance(why, NotImplementedError):
                    raise
                print(f"{name:<28} {dt:<10} refused: {str(why)[:80]}")
                continue
            row = {"arch": arch, "kernel": name, "operands": dt, **m, "ratio": m["shim_s"] / m["plain_s"],
                   "cpu_ratio": m["shim_cpu_s"] / m["plain_cpu_s"]}
            rows.append(row)
            print(f"{name:<28} {dt:<10} {m['shim_s']:>8.3f} {m['plain_s']:>8.3f} {row['ratio']:>12.2f} "
                  f"{m['shim_cpu_s']:>7.3f} {m['plain_cpu_s']:>9.3f} {row['cpu_ratio']:>9.2f}", flush=True)
        patch.undo()
    by = {(r["arch"], r["kernel"], r["operands"]): r for r in rows}
    archs = args.archs.split(",")
    if len(archs) == 2:
        print(f"## {archs[1]} / {archs[0]} (CPU time with the shim)")
        for (arch, name, dt), r in by.items():
            other = by.get((archs[0], name, dt))
            if arch == archs[1] and other is not None:
                print(f"{name:<28} {dt:<10} {r['shim_cpu_s'] / other['shim_cpu_s']:>8.2f}")
    if args.json is not None:
        args.json.write_text(json.dumps({"triton": triton.__version__, "threads": torch.get_num_threads(),
                                         "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
