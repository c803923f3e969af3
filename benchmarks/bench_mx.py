"""Time quantize_fp4 (as % of measured copy bandwidth) and scaled_gemm (against torch's emulated path) on a GPU.

Usage: ``python benchmarks/bench_mx.py [--json PATH] [--quantize-only | --gemm-only] [--baseline QUANTIZE_PY]
[--sweep] [--dry-run] [--sweep-gemm]``. Not a test: nothing asserts a time. ``--quantize-only`` skips the gemm table,
``--gemm-only`` the quantize table; ``--baseline`` times another tree's ``kernels/mx/quantize.py`` beside this
one's, in the same process (rows "baseline"), to compare two versions on one card; ``--sweep`` times every block
layout of the quantize kernel (``kernels.mx.quantize.block_layouts``: threads a block, whole / half / quarter /
split) for each scheme and source dtype, linear and swizzled scales, at the shipped rows and warps, compiling them
first on every CPU core (``--dry-run`` lists them and exits, no GPU needed); ``--sweep-gemm`` times the skinny
shapes' launch configurations and K splits (``kernels.mx.gemm.launch_config`` and ``k_splits``), compiling them
first on every CPU core.

quantize: bytes = activations read + codes and scales written; ``floor ms`` = bytes / copy bandwidth, ``% copy`` =
floor / measured. gemm: TFLOP/s of ``scaled_gemm`` beside cuBLAS's bf16 dense matmul of the same shape (``%
cuBLAS``) and "torch emulated": dequantize both operands to bf16 with torch ops and ``torch.matmul`` (what a model
without an FP4 kernel runs), timed end to end. Skinny shapes (decode, MoE: M of 16 to 256) are bound by the bytes
of the operands and C: ``% copy`` = those bytes / copy bandwidth / time; ``graph`` columns time the same call
replayed from a CUDA graph (the kernels alone, without the Python launch, which at these sizes takes longer than the
GPU: decode runs under graphs). A refused combination (NVFP4 on sm90
before Triton 3.9) is a row saying so. Rows "e4m3 x mxfp4": A in MXFP8 (e4m3, e8m0 scales), B in MXFP4.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from _common import check_larger_than_l2, copy_bandwidth_gbs, emit, graph_ms, parse_args, require_cuda, time_ms

import kernels.mx.quantize as quantize_mod  # noqa: E402  (after _common: repo root on sys.path)
from kernels.mx import gemm_refusal, quantize_fp4, scaled_gemm  # noqa: E402
from kernels.mx.reference import E2M1_VALUES, nvfp4_global_scale  # noqa: E402

QUANT_SHAPES = [(8192, 4096, torch.bfloat16), (16384, 8192, torch.bfloat16), (16384, 8192, torch.float16),
                (8192, 8192, torch.float32)]
GEMM_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (16, 4096, 4096), (16, 8192, 8192), (64, 4096, 4096),
               (64, 8192, 8192), (256, 4096, 4096), (256, 8192, 8192)]
#: the source of each dtype in the quantize sweep: larger than an H100's or H200's L2, as the table's shapes
SWEEP_SHAPES = {"bf16": (16384, 8192), "fp16": (16384, 8192), "fp32": (8192, 8192)}
#: seconds a timing takes (do_bench's 25 ms warm-up and 100 ms of repetitions, a graph capture, the estimate
#: runs), for the dry run's forecast
_SECONDS_A_TIMING = 0.25
Q_COLUMNS = [("op", ""), ("scheme", ""), ("layout", ""), ("shape", ""), ("MB", ".1f"), ("floor_ms", ".4f"),
             ("call_ms", ".4f"), ("call_pct_copy", ".1f"), ("graph_ms", ".4f"), ("graph_pct_copy", ".1f")]
G_COLUMNS = [("op", ""), ("scheme", ""), ("shape", ""), ("kernel_ms", ".4f"), ("kernel_tflops", ".1f"),
             ("cublas_bf16_tflops", ".1f"), ("pct_cublas", ".1f"), ("pct_copy", ".1f"), ("graph_ms", ".4f"),
             ("graph_pct_copy", ".1f"), ("torch_emulated_ms", ".3f"),
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
    p.add_argument("--sweep", action="store_true", help="time every block layout of the quantize kernel")
    p.add_argument("--dry-run", action="store_true", help="list the --sweep configurations and exit (no GPU)")
    p.add_argument("--gemm-only", action="store_true", help="skip the quantize_fp4 table")
    p.add_argument("--sweep-gemm", action="store_true", help="time the skinny shapes' configurations and K splits")


def _load_baseline(path: Path):
    spec = importlib.util.spec_from_file_location("baseline_quantize", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.quantize_fp4


def _compile_on_every_core(compile_some: Callable[..., None], jobs: list, *args: Any) -> None:
    """``compile_some(part, *args)`` over ``jobs`` cut into one part per CPU core (up to 16 spawned processes, one
    core left to this one): Triton's disk cache then hands every kernel a sweep times to this process."""
    import multiprocessing as mp
    import os

    procs = max(1, min(16, (os.cpu_count() or 2) - 1))
    with mp.get_context("spawn").Pool(procs) as pool:
        pool.starmap(compile_some, [(jobs[i::procs], *args) for i in range(procs)])


def quantize_sweep_configs() -> list[dict]:
    """Every (scheme, source dtype, block layout, scale layout) the quantize sweep times, on SWEEP_SHAPES."""
    from kernels.mx.quantize import block_layouts, launch_config

    out = []
    for scheme in ("mxfp4", "nvfp4"):
        for src, (m, k) in SWEEP_SHAPES.items():
            dtype = getattr(torch, _TORCH_DTYPE[src])
            for name in block_layouts(scheme, dtype):
                for layout in ("linear", "swizzled"):
                    out.append({"scheme": scheme, "src": src, "shape": (m, k), "block_layout": name,
                                "layout": layout, "config": launch_config(scheme, dtype, name)})
    return out


_TORCH_DTYPE = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


def _quantize_buffers(c: dict, m: int, k: int, device: str = "cuda"):
    from kernels.mx.layout import BLOCK, swizzled_size

    x = torch.randn(m, k, device=device).to(getattr(torch, _TORCH_DTYPE[c["src"]]))
    g = nvfp4_global_scale(x).reshape(1) if c["scheme"] == "nvfp4" else None
    cols = k // BLOCK[c["scheme"]]
    n_s = (m, cols) if c["layout"] == "linear" else (swizzled_size(m, cols)[0] * swizzled_size(m, cols)[1],)
    codes = torch.empty(m, k // 2, dtype=torch.uint8, device=device)
    return x, g, codes, torch.empty(n_s, dtype=torch.uint8, device=device)


def _quantize_launch(c: dict, x, g, codes, scales) -> None:
    quantize_mod.launch(x, codes, scales, g, c["scheme"], "nvfp4" if c["scheme"] == "nvfp4" else "floor",
                        c["layout"], c["config"])


def _compile_quantize(configs: list[dict]) -> None:
    """Launch each configuration once on a small source whose int arguments specialize as the sweep's do
    (multiples of 16): Triton's cache then holds every kernel the sweep runs."""
    for c in configs:
        try:
            _quantize_launch(c, *_quantize_buffers(c, 256, 4096))
        except Exception as e:  # noqa: BLE001 - reported, and the sweep's own launch fails the same way
            print(f"compile failed: {c['scheme']} {c['src']} {c['block_layout']} {c['layout']}: "
                  f"{type(e).__name__}: {str(e)[:200]}")
    torch.cuda.synchronize()


def sweep_quantize(copy: float) -> list[dict]:
    """Every configuration of :func:`quantize_sweep_configs`, timed from a CUDA graph, compiled first on every CPU
    core."""
    from kernels.mx.layout import BLOCK

    configs = quantize_sweep_configs()
    _compile_on_every_core(_compile_quantize, configs)
    rows = []
    for c in configs:
        m, k = c["shape"]
        x, g, codes, scales = _quantize_buffers(c, m, k)
        block = BLOCK[c["scheme"]]
        nbytes = x.numel() * x.element_size() + x.numel() // 2 + x.numel() // block
        check_larger_than_l2(nbytes, f"quantize sweep {m}x{k}")
        floor = nbytes / copy / 1e6
        try:
            ms = graph_ms(lambda c=c, x=x, g=g, o=codes, s=scales: _quantize_launch(c, x, g, o, s))
        except Exception as e:  # noqa: BLE001
            print(f"failed: {c['scheme']} {c['src']} {c['block_layout']} {c['layout']}: {type(e).__name__}")
            continue
        shipped = quantize_mod.launch_config(c["scheme"], x.dtype) == c["config"]
        rows.append({"op": f"sweep {c['block_layout']}" + (" (shipped)" if shipped else ""), "scheme": c["scheme"],
                     "layout": c["layout"], "shape": f"{m}x{k} {c['src']}", "MB": nbytes / 1e6, "floor_ms": floor,
                     "call_ms": float("nan"), "call_pct_copy": float("nan"), "graph_ms": ms,
                     "graph_pct_copy": 100 * floor / ms})
    return rows


def dry_run() -> None:
    configs = quantize_sweep_configs()
    for c in configs:
        m, k = c["shape"]
        print(f"{c['scheme']:<6} {c['src']:<5} {m}x{k:<6} {c['block_layout']:<8} {c['layout']:<9} "
              f"(rows, blocks, warps, threads a block) = {c['config']}")
    print(f"{len(configs)} timings, about {len(configs) * _SECONDS_A_TIMING:.0f} s of GPU time after "
          f"{len(configs)} compiles spread over the CPU cores")


def _sweep_configs() -> list[tuple[int, tuple[int, ...], int]]:
    """(M, (BM, BN, BK, GROUP_M, warps, stages), splits) swept for each skinny M: the tiles whose sm90 SASS issues
    the fewest instructions per weight element (Triton 3.6: 16x128x128 on 4 warps 0.44 warp-instructions, 16x64x256
    0.56, 16x32x256 0.76), the shipped ones, and K splits of 1 to 8."""
    out = []
    for config in ((16, 64, 256, 1, 4, 4), (16, 128, 128, 1, 4, 4)):
        out += [(16, config, splits) for splits in (1, 4, 8)]
    for config in ((16, 128, 128, 1, 4, 4), (16, 64, 256, 1, 4, 4), (64, 128, 128, 1, 4, 4), (64, 64, 256, 1, 4, 4)):
        out += [(64, config, splits) for splits in (1, 4, 8)]
    for config in ((64, 128, 256, 1, 4, 4), (64, 128, 128, 1, 4, 4), (128, 128, 128, 1, 8, 4)):
        out += [(256, config, splits) for splits in (1, 2)]
    return out


def _sweep_operands(m: int, n: int, k: int, a_format: str):
    a, b = torch.randn(m, k, device="cuda"), torch.randn(n, k, device="cuda")
    return (_mxfp8(a) if a_format == "e4m3" else quantize_fp4(a)), quantize_fp4(b)


def _compile_some(jobs: list[tuple[int, tuple[int, ...], int]], a_format: str) -> None:
    from kernels.mx.gemm import _launch

    for m, config, splits in jobs:
        qa, qb = _sweep_operands(m, 4096, 4096, a_format)
        try:
            _launch(qa, qb, torch.empty(m, 4096, device="cuda"), "mxfp4", "linear", a_format, config, splits)
        except Exception as e:  # noqa: BLE001 - a config that fails to compile is reported, not fatal
            print(f"compile failed: M={m} {config} splits={splits}: {type(e).__name__}: {str(e)[:200]}")
    torch.cuda.synchronize()


def sweep_gemm(copy: float, a_formats: tuple[str, ...] = ("e2m1",)) -> list[dict]:
    """Every configuration of :func:`_sweep_configs` at N = K = 4096 and 8192, timed from a CUDA graph. MXFP4 A
    alone by default: the skinny rows' cost is B's upcast, the same whatever A holds (e4m3 rows reuse the result)."""
    from kernels.mx.gemm import _launch

    configs = _sweep_configs()
    rows = []
    for a_format in a_formats:
        _compile_on_every_core(_compile_some, configs, a_format)
        for nk in (4096, 8192):
            ops = {m: _sweep_operands(m, nk, nk, a_format) for m in (16, 64, 256)}
            for m, config, splits in configs:
                qa, qb = ops[m]
                c = torch.empty(m, nk, device="cuda")
                def fn(qa=qa, qb=qb, c=c, config=config, splits=splits, f=a_format):
                    _launch(qa, qb, c, "mxfp4", "linear", f, config, splits)
                try:
                    ms = graph_ms(fn)
                except Exception as e:  # noqa: BLE001
                    print(f"failed: M={m} {config} splits={splits}: {type(e).__name__}")
                    continue
                nbytes = sum(t.numel() * t.element_size() for t in (*qa[:2], *qb[:2])) + m * nk * 4
                rows.append({"a": a_format, "shape": f"{m}x{nk}x{nk}", "config": "x".join(map(str, config)),
                             "splits": splits, "graph_ms": ms, "graph_pct_copy": 100 * nbytes / copy / 1e6 / ms})
    return rows


def main() -> None:
    args = parse_args(__doc__, extra=_options)
    if args.dry_run:
        dry_run()
        return
    require_cuda("bench_mx.py")
    copy = copy_bandwidth_gbs()
    versions = [("quantize", quantize_fp4)]
    if args.baseline is not None:
        versions.append(("baseline", _load_baseline(args.baseline)))
    if args.sweep_gemm:
        srows = sweep_gemm(copy)
        emit("scaled_gemm skinny sweep (graph replay)", [("a", ""), ("shape", ""), ("config", ""), ("splits", "d"),
             ("graph_ms", ".4f"), ("graph_pct_copy", ".1f")], srows, None)
        best = {}
        for r in srows:
            key = (r["a"], r["shape"])
            if key not in best or r["graph_ms"] < best[key]["graph_ms"]:
                best[key] = r
        emit("scaled_gemm skinny sweep: the fastest per shape", [("a", ""), ("shape", ""), ("config", ""),
             ("splits", "d"), ("graph_ms", ".4f"), ("graph_pct_copy", ".1f")], list(best.values()),
             args.json.with_suffix(".sweep.json") if args.json else None, extra={"all": srows, "copy_gbs": copy})
    rows = []
    for m, k, dtype in [] if args.gemm_only else QUANT_SHAPES:
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
        rows += sweep_quantize(copy)
    if rows:
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
                   "graph_ms": float("nan"), "graph_pct_copy": float("nan"), "speedup": float("nan"),
                   "note": why or ""}
            if why is None:
                c = scaled_gemm(qa, qb, scheme, a_format=a_format)
                def fn(qa=qa, qb=qb, s=scheme, c=c, f=a_format):
                    return scaled_gemm(qa, qb, s, a_format=f, out=c)

                ms, graph = time_ms(fn), graph_ms(fn)
                row.update(kernel_ms=ms, kernel_tflops=2 * m * n * k / ms / 1e9, pct_cublas=100 * cublas / ms,
                           pct_copy=100 * nbytes / copy / 1e6 / ms, graph_ms=graph,
                           graph_pct_copy=100 * nbytes / copy / 1e6 / graph, speedup=emu / ms)
            grows.append(row)
    emit("scaled_gemm vs torch's emulated path (dequantize to bf16 + matmul)", G_COLUMNS, grows, args.json,
         extra={"quantize": rows, "copy_gbs": copy})


if __name__ == "__main__":
    main()
