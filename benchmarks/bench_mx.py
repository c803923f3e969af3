"""Time quantize_fp4 (as % of measured copy bandwidth) and scaled_gemm (against torch's emulated path) on a GPU.

Usage: ``python benchmarks/bench_mx.py [--json PATH] [--quantize-only] [--baseline QUANTIZE_PY] [--sweep]``. Not a
test: nothing asserts a time. ``--quantize-only`` skips the gemm table; ``--baseline`` times another tree's
``kernels/mx/quantize.py`` beside this one's, in the same process (rows "baseline"), to compare two versions on one
card; ``--sweep`` times launch configurations (rows x elements x warps per program, whole blocks per thread or
split between threads) of the quantize kernel, linear layout.

quantize: bytes = activations read + codes and scales written; ``floor ms`` = bytes / copy bandwidth, ``% copy`` =
floor / measured. gemm: TFLOP/s of ``scaled_gemm`` beside cuBLAS's bf16 dense matmul of the same shape (``%
cuBLAS``) and "torch emulated": dequantize both operands to bf16 with torch ops and ``torch.matmul`` (what a model
without an FP4 kernel runs), timed end to end. Skinny shapes (decode, MoE: M of 16 to 256) are bound by the bytes
of the operands and C: ``% copy`` = those bytes / copy bandwidth / time. A refused combination (NVFP4 on sm90
before Triton 3.9) is a row saying so. Rows "e4m3 x mxfp4": A in MXFP8 (e4m3, e8m0 scales), B in MXFP4.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import torch
from _common import check_larger_than_l2, copy_bandwidth_gbs, emit, graph_ms, parse_args, require_cuda, time_ms

import kernels.mx.quantize as quantize_mod  # noqa: E402  (after _common: repo root on sys.path)
from kernels.mx import gemm_refusal, quantize_fp4, scaled_gemm  # noqa: E402
from kernels.mx.reference import E2M1_VALUES, nvfp4_global_scale  # noqa: E402

QUANT_SHAPES = [(8192, 4096, torch.bfloat16), (16384, 8192, torch.bfloat16), (16384, 8192, torch.float16),
                (8192, 8192, torch.float32)]
GEMM_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (16, 4096, 4096), (16, 8192, 8192), (64, 4096, 4096),
               (64, 8192, 8192), (256, 4096, 4096), (256, 8192, 8192)]
SWEEP = [(16, 256, 4, True), (16, 256, 4, False), (16, 256, 8, True), (16, 256, 8, False)]
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


def _mxfp8(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x as MXFP8 e4m3 (codes, e8m0 scales per 32; floor rule, saturating): the A operand of the e4m3 x e2m1 rows.
    Timing only: the values need be finite, not the reference's (tests/kernels/mx check those)."""
    xb = x.float().reshape(x.shape[0], -1, 32)
    amax = xb.abs().amax(-1).clamp_min(2.0**-126)
    s = (torch.floor(torch.log2(amax)) - 8 + 127).clamp(0, 254)
    codes = (xb / torch.ldexp(torch.ones_like(s), s.int() - 127).unsqueeze(-1)).clamp(-448, 448)
    return codes.reshape(x.shape).to(torch.float8_e4m3fn), s.to(torch.uint8)


def _emulated_fp8(q) -> torch.Tensor:
    s = torch.ldexp(torch.ones_like(q[1], dtype=torch.float32), q[1].int() - 127)
    return (q[0].float() * s.repeat_interleave(32, -1)).to(torch.bfloat16)


def _options(p) -> None:
    p.add_argument("--quantize-only", action="store_true", help="skip the scaled_gemm table")
    p.add_argument("--baseline", type=Path, default=None, metavar="QUANTIZE_PY",
                   help="another tree's kernels/mx/quantize.py, timed beside this one's (rows 'baseline')")
    p.add_argument("--sweep", action="store_true", help="time quantize launch configurations (linear layout)")


def _load_baseline(path: Path):
    spec = importlib.util.spec_from_file_location("baseline_quantize", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.quantize_fp4


def main() -> None:
    args = parse_args(__doc__, extra=_options)
    require_cuda("bench_mx.py")
    copy = copy_bandwidth_gbs()
    versions = [("quantize", quantize_fp4)]
    if args.baseline is not None:
        versions.append(("baseline", _load_baseline(args.baseline)))
    rows = []
    for m, k, dtype in QUANT_SHAPES:
        x = torch.randn(m, k, device="cuda").to(dtype)
        for scheme in ("mxfp4", "nvfp4"):
            g = nvfp4_global_scale(x) if scheme == "nvfp4" else None
            block = 32 if scheme == "mxfp4" else 16
            nbytes = x.numel() * x.element_size() + x.numel() // 2 + x.numel() // block
            check_larger_than_l2(nbytes, f"quantize {m}x{k}")
            floor = nbytes / copy / 1e6
            shape = f"{m}x{k} {str(dtype)[6:]}"
            for layout in ("linear", "swizzled"):
                for op, quantize in versions:
                    out = quantize(x, scheme, global_scale=g, layout=layout)
                    bufs = (out[0], out[1])
                    def fn(x=x, s=scheme, g=g, lay=layout, b=bufs, q=quantize):
                        return q(x, s, global_scale=g, layout=lay, out=b)

                    call, graph = time_ms(fn), graph_ms(fn)
                    rows.append({"op": op, "scheme": scheme, "layout": layout, "shape": shape, "MB": nbytes / 1e6,
                                 "floor_ms": floor, "call_ms": call, "call_pct_copy": 100 * floor / call,
                                 "graph_ms": graph, "graph_pct_copy": 100 * floor / graph})
            if args.sweep:
                out = quantize_fp4(x, scheme, global_scale=g)
                rule = "nvfp4" if scheme == "nvfp4" else "floor"
                for cfg in SWEEP:
                    def launch(x=x, s=scheme, g=g, o=out, c=(cfg[0], cfg[1] // block, *cfg[2:]), r=rule):
                        quantize_mod.launch(x, o[0], o[1], g, s, r, "linear", c)

                    graph = graph_ms(launch)
                    name = "sweep {}x{} w{} {}".format(*cfg[:3], "whole" if cfg[3] else "split")
                    rows.append({"op": name, "scheme": scheme, "layout": "linear",
                                 "shape": shape, "MB": nbytes / 1e6, "floor_ms": floor, "call_ms": float("nan"),
                                 "call_pct_copy": float("nan"), "graph_ms": graph,
                                 "graph_pct_copy": 100 * floor / graph})
    emit("quantize_fp4 vs copy bandwidth", Q_COLUMNS, rows, args.json if args.quantize_only else None,
         extra={"copy_gbs": copy})
    if args.quantize_only:
        return
    grows = []
    cap = torch.cuda.get_device_capability()
    for m, n, k in GEMM_SHAPES:
        a, b = torch.randn(m, k, device="cuda"), torch.randn(n, k, device="cuda")
        a16, b16 = a.bfloat16(), b.bfloat16()
        cublas = time_ms(lambda a16=a16, b16=b16: a16 @ b16.T)
        for scheme, a_format in (("mxfp4", "e2m1"), ("mxfp4", "e4m3"), ("nvfp4", "e2m1")):
            ga = nvfp4_global_scale(a) if scheme == "nvfp4" else None
            gb = nvfp4_global_scale(b) if scheme == "nvfp4" else None
            qa = _mxfp8(a) if a_format == "e4m3" else quantize_fp4(a, scheme, global_scale=ga)
            qb = quantize_fp4(b, scheme, global_scale=gb)
            deq_a = (lambda qa=qa: _emulated_fp8(qa)) if a_format == "e4m3" else (lambda qa=qa, s=scheme:
                                                                                  _emulated(qa, s))
            emu = time_ms(lambda qb=qb, s=scheme, deq_a=deq_a: deq_a() @ _emulated(qb, s).T)
            why = gemm_refusal(scheme, interpreter=False, capability=cap, a_format=a_format)
            nbytes = sum(t.numel() * t.element_size() for t in (*qa[:2], *qb[:2])) + m * n * 4
            name = "e4m3 x mxfp4" if a_format == "e4m3" else scheme
            row = {"op": "gemm", "scheme": name, "shape": f"{m}x{n}x{k}", "torch_emulated_ms": emu,
                   "cublas_bf16_tflops": 2 * m * n * k / cublas / 1e9, "kernel_ms": float("nan"),
                   "kernel_tflops": float("nan"), "pct_cublas": float("nan"), "pct_copy": float("nan"),
                   "speedup": float("nan"), "note": why or ""}
            if why is None:
                c = scaled_gemm(qa, qb, scheme, a_format=a_format)
                ms = time_ms(lambda qa=qa, qb=qb, s=scheme, c=c, f=a_format: scaled_gemm(qa, qb, s, a_format=f, out=c))
                row.update(kernel_ms=ms, kernel_tflops=2 * m * n * k / ms / 1e9, pct_cublas=100 * cublas / ms,
                           pct_copy=100 * nbytes / copy / 1e6 / ms, speedup=emu / ms)
            grows.append(row)
    emit("scaled_gemm vs torch's emulated path (dequantize to bf16 + matmul)", G_COLUMNS, grows, args.json,
         extra={"quantize": rows, "copy_gbs": copy})


if __name__ == "__main__":
    main()
