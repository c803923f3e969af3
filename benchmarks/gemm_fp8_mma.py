"""MXFP4 (and e4m3 x MXFP4) GEMM on sm90's FP8 tensor cores: an alternative to ``scaled_gemm``'s emulation, timed.

``scaled_gemm`` on sm90 runs Triton's emulation of ``tl.dot_scaled`` (e2m1 upcast to bf16, scaled, bf16 MMA). This
script's kernel takes the other path the performance notes estimated: each e2m1 nibble becomes an e4m3 byte
exactly (``s e e m`` -> ``s 0 0 e e m 0 0``: the e2m1 value times 2^-6, subnormal 0.5 included), one FP8 ``tl.dot``
per 32-wide scale block (wgmma m64nNk32, or mma.sync through fp16 for 16-row tiles), and the block's two e8m0
scales applied to that partial sum in fp32 with one fma per output. Its products are exact against the fp64
reference wherever the 32-term block sums are (e2m1 x e2m1 always is); they are not ``scaled_gemm``'s bits.

    python benchmarks/gemm_fp8_mma.py OUT.json     # a GPU: check against fp64, then time beside scaled_gemm and cuBLAS

Measured on an H100 (2026-12-06, docs/performance.md, "scaled_gemm on sm90"): slower than the emulation at every
square shape, so it does not ship.
"""

from __future__ import annotations

import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit
def _scale1d(rows, c, stride, scale_cols, SWIZZLED: tl.constexpr):
    r = rows.to(tl.int64)
    if SWIZZLED:
        return ((r // 128) * (scale_cols // 4) + c // 4) * 512 + (r % 32) * 16 + (r % 128 // 32) * 4 + c % 4
    return r * stride + c


@triton.jit
def _e2m1_to_e4m3(x):
    # nibble s e e m -> byte s 0 0 e e m 0 0: the e2m1 value times 2^-6, subnormal 0.5 included
    lo = ((x & 0x08) << 4) | ((x & 0x07) << 2)
    hi = (x & 0x80) | ((x & 0x70) >> 2)
    return lo, hi


@triton.jit
def _e8m0(u, shift):
    # 2^(u - 127 + shift) as fp32 (biased exponent u + shift); u = 255 is NaN
    e = u.to(tl.int32) + shift
    bits = tl.where(e > 0, e << 23, 0x00400000 >> (-e).to(tl.int32))
    v = bits.to(tl.float32, bitcast=True)
    return tl.where(u == 255, float("nan"), v)


@triton.jit
def mx_fp8_kernel(a_ptr, as_ptr, b_ptr, bs_ptr, c_ptr, M, N, K, stride_a, stride_b, stride_c, stride_as, stride_bs,
                  a_scale_cols, b_scale_cols, BM: tl.constexpr, BN: tl.constexpr, J: tl.constexpr,
                  GROUP_M: tl.constexpr, A_E4M3: tl.constexpr, SWIZZLED: tl.constexpr):
    pid = tl.program_id(0)
    per_group = GROUP_M * tl.cdiv(N, BN)
    first_m = pid // per_group * GROUP_M
    size_m = tl.minimum(tl.cdiv(M, BM) - first_m, GROUP_M)
    rm = (first_m + pid % per_group % size_m) * BM + tl.arange(0, BM)
    rn = (pid % per_group // size_m) * BN + tl.arange(0, BN)
    mm = rm < M
    nm = rn < N
    kh = tl.arange(0, 16)
    k32 = tl.arange(0, 32)
    acc = tl.zeros((BM, BN), tl.float32)
    for k0 in range(0, K, 32 * J):
        for j in tl.static_range(J):
            kb = k0 + 32 * j  # first k of this scale block
            if A_E4M3:
                a8 = tl.load(a_ptr + rm.to(tl.int64)[:, None] * stride_a + (kb + k32)[None, :],
                             mask=mm[:, None], other=0).to(tl.float8e4nv, bitcast=True)
            else:
                ab = tl.load(a_ptr + rm.to(tl.int64)[:, None] * stride_a + (kb // 2 + kh)[None, :],
                             mask=mm[:, None], other=0)
                alo, ahi = _e2m1_to_e4m3(ab)
                a8 = tl.join(alo, ahi).reshape(BM, 32).to(tl.float8e4nv, bitcast=True)
            bb = tl.load(b_ptr + rn.to(tl.int64)[:, None] * stride_b + (kb // 2 + kh)[None, :],
                         mask=nm[:, None], other=0)
            blo, bhi = _e2m1_to_e4m3(bb)
            b8 = tl.join(blo, bhi).reshape(BN, 32).to(tl.float8e4nv, bitcast=True)
            p = tl.dot(a8, tl.trans(b8))
            ua = tl.load(as_ptr + _scale1d(rm, kb // 32, stride_as, a_scale_cols, SWIZZLED), mask=mm, other=127)
            ub = tl.load(bs_ptr + _scale1d(rn, kb // 32, stride_bs, b_scale_cols, SWIZZLED), mask=nm, other=127)
            sa = _e8m0(ua, 0)
            sb = _e8m0(ub, 6 + (0 if A_E4M3 else 6))
            acc = tl.fma(p, sa[:, None] * sb[None, :], acc)
    tl.store(c_ptr + rm.to(tl.int64)[:, None] * stride_c + rn[None, :], acc, mask=mm[:, None] & nm[None, :])


def gemm(qa, qb, a_format="e2m1", config=(128, 128, 4, 8, 8, 3), out=None):
    codes_a, sa = qa[0], qa[1]
    codes_b, sb = qb[0], qb[1]
    M, N = codes_a.shape[0], codes_b.shape[0]
    K = codes_b.shape[1] * 2
    bm, bn, j, gm, w, st = config
    if out is None:
        out = torch.empty(M, N, dtype=torch.float32, device=codes_a.device)
    cols = K // 32
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    a = codes_a.view(torch.uint8) if a_format == "e4m3" else codes_a
    mx_fp8_kernel[grid](a, sa, codes_b, sb, out, M, N, K, a.stride(0), codes_b.stride(0), out.stride(0),
                        sa.stride(0), sb.stride(0), (cols + 3) // 4 * 4, (cols + 3) // 4 * 4, BM=bm, BN=bn, J=j,
                        GROUP_M=gm, A_E4M3=a_format == "e4m3", SWIZZLED=False, num_warps=w, num_stages=st)
    return out


#: tiles (BM, BN, J scale blocks a k step, GROUP_M, warps, stages) timed per kind of shape
CONFIGS = {
    "square": [(128, 128, 1, 8, 8, 4), (128, 128, 1, 8, 8, 6), (128, 256, 1, 8, 8, 4), (64, 128, 1, 8, 4, 4),
               (128, 128, 2, 8, 8, 4), (64, 256, 1, 8, 8, 4), (128, 64, 1, 8, 4, 4)],
    "m16": [(16, 64, 2, 1, 4, 4), (16, 32, 4, 1, 4, 4), (16, 64, 4, 1, 4, 4), (16, 128, 2, 1, 4, 4),
            (16, 32, 2, 1, 2, 4)],
    "m64": [(64, 64, 2, 1, 4, 4), (16, 64, 2, 1, 4, 4), (64, 128, 1, 1, 4, 4), (32, 64, 2, 1, 4, 4)],
    "m256": [(64, 128, 1, 1, 4, 4), (128, 128, 1, 8, 8, 4), (64, 64, 2, 1, 4, 4), (64, 128, 2, 4, 4, 4)],
}
SHAPES = [(4096, 4096, 4096, "square"), (8192, 8192, 8192, "square"), (16, 4096, 4096, "m16"),
          (16, 8192, 8192, "m16"), (64, 4096, 4096, "m64"), (64, 8192, 8192, "m64"), (256, 4096, 4096, "m256"),
          (256, 8192, 8192, "m256")]


def _check() -> list[dict]:
    """Each kernel tile against the fp64 product (error over the product of magnitudes), beside scaled_gemm."""
    from kernels.mx import quantize_fp4, scaled_gemm
    from kernels.mx.reference import dequantize_fp4, scaled_gemm_reference

    rows = []
    for m, n, k in [(256, 512, 1024), (16, 4096, 4096), (130, 67, 256)]:
        a = torch.randn(m, k, device="cuda") * torch.exp2(torch.randint(-8, 8, (m, 1), device="cuda").float())
        qa, qb = quantize_fp4(a, "mxfp4"), quantize_fp4(torch.randn(n, k, device="cuda"), "mxfp4")
        cpu = [tuple(t.cpu() for t in q) for q in (qa, qb)]
        ref = scaled_gemm_reference(cpu[0], cpu[1], "mxfp4")
        bound = (dequantize_fp4(*cpu[0][:2], "mxfp4").abs() @ dequantize_fp4(*cpu[1][:2], "mxfp4").abs().T
                 ).clamp_min(1e-300)
        for cfg in [(128, 128, 1, 8, 8, 4), (64, 128, 1, 8, 4, 4), (16, 64, 2, 1, 4, 4)]:
            c, cur = gemm(qa, qb, config=cfg).cpu(), scaled_gemm(qa, qb, "mxfp4").cpu()
            rows.append({"shape": [m, n, k], "cfg": cfg, "finite": bool(torch.isfinite(c).all()),
                         "new_err": float(((c.double() - ref).abs() / bound).max()),
                         "cur_err": float(((cur.double() - ref).abs() / bound).max())})
            print(rows[-1], flush=True)
    return rows


def _time_shape(m: int, n: int, k: int, configs: list[tuple[int, ...]], t_end: float) -> dict:
    from _common import graph_ms, time_ms

    from kernels.mx import quantize_fp4, scaled_gemm

    a, b = torch.randn(m, k, device="cuda"), torch.randn(n, k, device="cuda")
    qa, qb = quantize_fp4(a, "mxfp4"), quantize_fp4(b, "mxfp4")
    fp8 = (a.clamp(-448, 448).to(torch.float8_e4m3fn), torch.full((m, k // 32), 127, dtype=torch.uint8,
                                                                  device="cuda"))
    a16, b16 = a.bfloat16(), b.bfloat16()
    c, ce = scaled_gemm(qa, qb, "mxfp4"), scaled_gemm(fp8, qb, "mxfp4", a_format="e4m3")
    flop = 2 * m * n * k
    row = {"shape": [m, n, k], "cublas_ms": time_ms(lambda: a16 @ b16.T),
           "cur_ms": time_ms(lambda: scaled_gemm(qa, qb, "mxfp4", out=c)),
           "cur_graph_ms": graph_ms(lambda: scaled_gemm(qa, qb, "mxfp4", out=c)),
           "cur_e4m3_ms": time_ms(lambda: scaled_gemm(fp8, qb, "mxfp4", a_format="e4m3", out=ce)), "new": {}}
    row["cublas_tflops"], row["cur_tflops"] = flop / row["cublas_ms"] / 1e9, flop / row["cur_ms"] / 1e9
    for cfg in configs:
        if time.time() > t_end:
            row["new"]["stopped"] = "budget"
            break
        o, o8 = gemm(qa, qb, config=cfg), gemm(fp8, qb, a_format="e4m3", config=cfg)
        ms = time_ms(lambda cfg=cfg, o=o: gemm(qa, qb, config=cfg, out=o))
        ms8 = time_ms(lambda cfg=cfg, o8=o8: gemm(fp8, qb, a_format="e4m3", config=cfg, out=o8))
        row["new"][str(cfg)] = {"ms": ms, "graph_ms": graph_ms(lambda cfg=cfg, o=o: gemm(qa, qb, config=cfg, out=o)),
                                "e4m3_ms": ms8, "tflops": flop / ms / 1e9, "pct_cublas": 100 * row["cublas_ms"] / ms,
                                "x_cur": row["cur_ms"] / ms, "pct_cublas_e4m3": 100 * row["cublas_ms"] / ms8}
        print(m, n, k, cfg, row["new"][str(cfg)], flush=True)
    return row


def main(out_path: str) -> None:
    from _common import copy_bandwidth_gbs, device_info

    torch.manual_seed(0)
    res = {"meta": {**device_info(), "copy_gbs": copy_bandwidth_gbs()}, "check": _check(), "rows": []}
    t_end = time.time() + float(os.environ.get("BUDGET_S", "330"))
    for m, n, k, kind in SHAPES:
        res["rows"].append(_time_shape(m, n, k, CONFIGS[kind], t_end))
        with open(out_path, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(f"usage: python {sys.argv[0]} OUT.json")
    main(sys.argv[1])
