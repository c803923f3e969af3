"""Time quantize_fp4 (as % of measured copy bandwidth) and scaled_gemm (against torch's emulated path) on a GPU.

Usage: ``python benchmarks/bench_mx.py [--json PATH]``. Not a test: nothing asserts a time.

quantize: bytes = activations read + codes and scales written; ``floor ms`` = bytes / copy bandwidth, ``% copy`` =
floor / measured. gemm: TFLOP/s of ``scaled_gemm`` beside cuBLAS's bf16 dense matmul of the same shape (``%
cuBLAS``) and "torch emulated": dequantize both operands to bf16 with torch ops and ``torch.matmul`` (what a model
without an FP4 kernel runs), timed end to end. Skinny shapes (decode, MoE: M of 16 to 256) are bound by the bytes
of the operands and C: ``% copy`` = those bytes / copy bandwidth / time. A refused combination (NVFP4 on sm90
before Triton 3.9) is a row saying so.
"""

from __future__ import annotations

import torch
from _common import check_larger_than_l2, copy_bandwidth_gbs, emit, graph_ms, parse_args, require_cuda, time_ms

from kernels.mx import gemm_refusal, quantize_fp4, scaled_gemm  # noqa: E402  (after _common: repo root on sys.path)
from kernels.mx.reference import E2M1_VALUES, nvfp4_global_scale  # noqa: E402

QUANT_SHAPES = [(8192, 4096, torch.bfloat16), (16384, 8192, torch.bfloat16), (16384, 8192, torch.float16),
                (8192, 8192, torch.float32)]
GEMM_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (16, 4096, 4096), (16, 8192, 8192), (64, 4096, 4096),
               (64, 8192, 8192), (256, 4096, 4096), (256, 8192, 8192)]
Q_COLUMNS = [("op", ""), ("scheme", ""), ("layout", ""), ("shape", ""), ("MB", ".1f"), ("floor_ms", ".4f"),
             ("call_ms", ".4f"), ("call_pct_copy", ".1f"), ("graph_ms", ".4f"), ("graph_pct_copy", ".1f")]
G_COLUMNS = [("op", ""), ("scheme", ""), ("shape", ""), ("kernel_ms", ".4f"), ("kernel_tflops", ".1f"),
             ("cublas_bf16_tflops", ".1f"), ("pct_cublas", ".1f"), ("pct_copy", ".1f"), ("torch_emulated_ms", ".3f"),
             ("speedup", ".2f"), ("note", "")]


def _emulated(q, scheme: str) -> torch.Tensor:
    codes, scales = q[0], q[1]
    v = E2M1_VALUES.to(codes.device)[torch.stack((codes & 0xF, codes >> 4), -1).flatten(-2).long()]
    if scheme == "mxfp4":
        s = torch.ldexp(torch.ones_like(scales, dtype=torch.float32), scales.int() - 127)
    else:
        s = scales.view(torch.float8_e4m3fn).float() * q[2]
    return (v * s.repeat_interleave(32 if scheme == "mxfp4" else 16, -1)).to(torch.bfloat16)


def main() -> None:
    args = parse_args(__doc__)
    require_cuda("bench_mx.py")
    copy = copy_bandwidth_gbs()
    rows = []
    for m, k, dtype in QUANT_SHAPES:
        x = torch.randn(m, k, device="cuda").to(dtype)
        for scheme in ("mxfp4", "nvfp4"):
            g = nvfp4_global_scale(x) if scheme == "nvfp4" else None
            block = 32 if scheme == "mxfp4" else 16
            nbytes = x.numel() * x.element_size() + x.numel() // 2 + x.numel() // block
            check_larger_than_l2(nbytes, f"quantize {m}x{k}")
            for layout in ("linear", "swizzled"):
                out = quantize_fp4(x, scheme, global_scale=g, layout=layout)
                bufs = (out[0], out[1])
                def fn(x=x, s=scheme, g=g, lay=layout, b=bufs):
                    return quantize_fp4(x, s, global_scale=g, layout=lay, out=b)

                floor = nbytes / copy / 1e6
                call, graph = time_ms(fn), graph_ms(fn)
                rows.append({"op": "quantize", "scheme": scheme, "layout": layout,
                             "shape": f"{m}x{k} {str(dtype)[6:]}", "MB": nbytes / 1e6, "floor_ms": floor,
                             "call_ms": call, "call_pct_copy": 100 * floor / call, "graph_ms": graph,
                             "graph_pct_copy": 100 * floor / graph})
    emit("quantize_fp4 vs copy bandwidth", Q_COLUMNS, rows, None)
    grows = []
    cap = torch.cuda.get_device_capability()
    for m, n, k in GEMM_SHAPES:
        a, b = torch.randn(m, k, device="cuda"), torch.randn(n, k, device="cuda")
        a16, b16 = a.bfloat16(), b.bfloat16()
        cublas = time_ms(lambda a16=a16, b16=b16: a16 @ b16.T)
        for scheme in ("mxfp4", "nvfp4"):
            ga = nvfp4_global_scale(a) if scheme == "nvfp4" else None
            gb = nvfp4_global_scale(b) if scheme == "nvfp4" else None
            qa, qb = quantize_fp4(a, scheme, global_scale=ga), quantize_fp4(b, scheme, global_scale=gb)
            emu = time_ms(lambda qa=qa, qb=qb, s=scheme: _emulated(qa, s) @ _emulated(qb, s).T)
            why = gemm_refusal(scheme, interpreter=False, capability=cap)
            nbytes = sum(t.numel() * t.element_size() for t in (*qa[:2], *qb[:2])) + m * n * 4
            row = {"op": "gemm", "scheme": scheme, "shape": f"{m}x{n}x{k}", "torch_emulated_ms": emu,
                   "cublas_bf16_tflops": 2 * m * n * k / cublas / 1e9, "kernel_ms": float("nan"),
                   "kernel_tflops": float("nan"), "pct_cublas": float("nan"), "pct_copy": float("nan"),
                   "speedup": float("nan"), "note": why or ""}
            if why is None:
                c = scaled_gemm(qa, qb, scheme)
                ms = time_ms(lambda qa=qa, qb=qb, s=scheme, c=c: scaled_gemm(qa, qb, s, out=c))
                row.update(kernel_ms=ms, kernel_tflops=2 * m * n * k / ms / 1e9, pct_cublas=100 * cublas / ms,
                           pct_copy=100 * nbytes / copy / 1e6 / ms, speedup=emu / ms)
            grows.append(row)
    emit("scaled_gemm vs torch's emulated path (dequantize to bf16 + matmul)", G_COLUMNS, grows, args.json,
         extra={"quantize": rows, "copy_gbs": copy})


if __name__ == "__main__":
    main()
