"""NVFP4 ``scaled_gemm`` on sm90 as Triton 3.9 compiles it, run on a GPU whose Triton (3.6) refuses it.

Triton 3.6 cannot compile NVFP4 ``tl.dot_scaled`` for sm90 (``PassManager::run failed in
TritonGPUAccelerateMatmul``); 3.9 emulates it. The GPU image has 3.6, so the kernels are compiled where 3.9 is
installed (no GPU needed) and only loaded on the GPU:

    python benchmarks/nvfp4_ptx.py compile DIR                   # Triton 3.9, any machine
    python benchmarks/nvfp4_ptx.py run DIR [--json OUT.json]     # the GPU: torch and CuPy; writes DIR/check.npz
    python benchmarks/nvfp4_ptx.py compare DIR                   # the CPU, Triton 3.9: the interpreter lane's bits
    python benchmarks/nvfp4_ptx.py golden DIR golden/mx/nvfp4_sm90_triton3.9.npz   # the capture as a golden

``compile`` builds ``kernels.mx.gemm``'s launches exactly as ``scaled_gemm`` makes them on an sm90 GPU
(``launch_config`` and ``k_splits`` for capability 9.0, NVFP4, linear scales, every argument specialized as
Triton's JIT specializes it: pointers and multiples of 16 divisible by 16), for each GEMM shape of
``bench_mx.py`` and for small check shapes, and writes each kernel's cubin and PTX with ``manifest.json``.
``run`` loads each cubin (or, where the driver refuses it, the PTX with its ``.version`` lowered to the driver's),
launches it with the arguments ``scaled_gemm`` passes, checks C against fp64 products of the dequantized
operands, times it (``time_ms`` and ``graph_ms``, as ``bench_mx.py``) beside cuBLAS bf16 and the MXFP4
``scaled_gemm`` of the installed Triton (graph replay) at the same shape, and stores the check shapes' seeded
operands and products in ``check.npz``. ``compare`` computes the check shapes on the interpreter with the
harness's sm90 shims and counts the products that differ, bit for bit. ``golden`` writes the capture as the
golden ``tests/kernels/mx/test_mx_gemm.py`` checks on the Triton 3.9 interpreter lane (the operands' digest, each
product's digest and its first products in full; ``tests/kernels/mx/nvfp4_sm90.py`` has the shapes, operands and
layout).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.kernels.mx.nvfp4_sm90 import (  # noqa: E402
    CHECK_SHAPES,
    GROUP,
    KEPT,
    case_name,
    digest,
    operand_digest,
    operands,
)

#: bench_mx.py's GEMM shapes (M, N, K)
BENCH_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (16, 4096, 4096), (16, 8192, 8192), (64, 4096, 4096),
                (64, 8192, 8192), (256, 4096, 4096), (256, 8192, 8192)]
SPLIT_BLOCK = 1024  # _split_sum_kernel's BLOCK_E, as scaled_gemm launches it


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _gemm_ints(m: int, n: int, k: int) -> dict[str, int]:
    """The integer arguments ``kernels.mx.gemm._launch`` passes for linear NVFP4 operands of this shape."""
    cols = k // GROUP
    return {"M": m, "N": n, "K": k, "stride_a": k // 2, "stride_b": k // 2, "stride_c": n, "stride_as": cols,
            "stride_bs": cols, "a_scale_cols": _cdiv(cols, 4) * 4, "b_scale_cols": _cdiv(cols, 4) * 4}


def _compile_one(fn, pointers: dict[str, str], ints: dict[str, int], tile: dict, options: dict, out: Path,
                 stem: str) -> dict:
    """``fn`` compiled for sm90 as Triton's JIT specializes a launch with these arguments
    (:func:`harness.lowering.compiled.specialize`: pointers 16-byte aligned, as ``run``'s are, and ints by value),
    through the harness's own compile; its cubin and PTX written to ``out``, what ``run`` needs returned."""
    import torch

    from harness.compile.cache import compile_memoized
    from harness.compile.targets import parse_target
    from harness.interp.jit import as_jit
    from harness.lowering.compiled import specialize
    from tests.lowering.aot import ptx_header, ptx_params

    tensors = [torch.empty(16, dtype=getattr(torch, dtype)) for dtype in pointers.values()]  # 64-byte aligned
    spec = specialize(fn, (*tensors, *ints.values()), {**tile, **options})
    sig = {name: spec.signature.get(name, "constexpr") for name in as_jit(fn).arg_names}
    done = compile_memoized(as_jit(fn), sig, spec.constexprs, parse_target("sm90"),
                            {"num_warps": spec.num_warps, **spec.options}, spec.divisible)
    if isinstance(done, BaseException):
        raise done
    k = done.kernel
    ptx = k.asm["ptx"]
    (out / f"{stem}.ptx").write_text(ptx)
    (out / f"{stem}.cubin").write_bytes(k.asm["cubin"])
    name = k.metadata.name
    return {"stem": stem, "name": name, "num_warps": k.metadata.num_warps, "shared": k.metadata.shared,
            "n_params": len(ptx_params(ptx, name)),
            "global_scratch_size": getattr(k.metadata, "global_scratch_size", 0) or 0,
            "profile_scratch_size": getattr(k.metadata, "profile_scratch_size", 0) or 0,
            # the runtime ints in parameter order (an int equal to 1 became a constexpr)
            "ints": {n: v for n, v in ints.items() if spec.signature.get(n, "constexpr") != "constexpr"},
            "mma": sorted(set(re.findall(r"wgmma\.mma_async[\w.]*|mma\.sync[\w.]*", ptx))),
            "ptx_version": ptx_header(ptx)["version"]}


def compile_all(out: Path) -> None:
    import triton

    from kernels.mx.gemm import _scaled_gemm_kernel, _split_sum_kernel, k_splits, launch_config

    out.mkdir(parents=True, exist_ok=True)
    pointers = {"a_ptr": "uint8", "as_ptr": "uint8", "b_ptr": "uint8", "bs_ptr": "uint8", "c_ptr": "float32",
                "ga_ptr": "float32", "gb_ptr": "float32"}
    cases = []
    for kind, shapes in (("bench", BENCH_SHAPES), ("check", CHECK_SHAPES)):
        for m, n, k in shapes:
            bm, bn, bk, group_m, warps, stages = launch_config(m, n, k, (9, 0))
            splits = k_splits(m, n, k)
            tile = dict(BM=bm, BN=bn, BK=bk, GROUP=GROUP, NVFP4=True, SWIZZLED=False, GROUP_M=group_m,
                        A_FORMAT="e2m1", AK=bk // 2, SPLIT=splits)
            stem = f"gemm_{m}x{n}x{k}"
            case = {"kind": kind, "shape": [m, n, k], "splits": splits, "config": [bm, bn, bk, group_m, warps, stages],
                    "grid": [_cdiv(m, bm) * _cdiv(n, bn), splits],
                    "gemm": _compile_one(_scaled_gemm_kernel, pointers, _gemm_ints(m, n, k), tile,
                                         {"num_warps": warps, "num_stages": stages}, out, stem)}
            if splits > 1:
                case["sum"] = _compile_one(
                    _split_sum_kernel, dict.fromkeys(("w_ptr", "c_ptr", "ga_ptr", "gb_ptr"), "float32"),
                    {"M": m, "N": n, "stride_c": n}, dict(SPLIT=splits, NVFP4=True, BLOCK_E=SPLIT_BLOCK),
                    {"num_warps": 4}, out, stem + "_sum")
                case["sum"]["grid"] = [_cdiv(m * n, SPLIT_BLOCK)]
            print(stem, case["config"], "splits", splits, case["gemm"]["mma"], "shared", case["gemm"]["shared"],
                  flush=True)
            cases.append(case)
    (out / "manifest.json").write_text(json.dumps({"triton": triton.__version__, "target": "sm90", "cases": cases},
                                                  indent=1))


def _load(cp, d: Path, k: dict, notes: list[str]):
    """The kernel of entry ``k``: its cubin, or its PTX with ``.version`` lowered where the driver refuses it."""
    try:
        fn = cp.RawModule(path=str(d / f"{k['stem']}.cubin")).get_function(k["name"])
        how = "cubin"
    except Exception as e:  # noqa: BLE001 - the fallback below is the point
        ptx = (d / f"{k['stem']}.ptx").read_text()
        lowered = re.sub(r"^\.version\s+\S+", ".version 8.8", ptx, count=1, flags=re.M)
        path = d / f"{k['stem']}.v88.ptx"
        path.write_text(lowered)
        fn = cp.RawModule(path=str(path)).get_function(k["name"])
        how = f"ptx (.version {k['ptx_version']} -> 8.8; cubin refused: {type(e).__name__}: {str(e)[:120]})"
    if k["shared"] > 48 * 1024:
        fn.max_dynamic_shared_size_bytes = k["shared"]
    notes.append(f"{k['stem']}: {how}")
    return fn


def _extra(cp, k: dict, programs: int) -> list:
    """The scratch pointers Triton appends to a kernel's parameters (null where it needs none)."""
    extra = []
    for size in (k["global_scratch_size"], k["profile_scratch_size"]):
        extra.append(cp.zeros(size * programs, dtype=cp.uint8) if size else np.uint64(0))
    return extra


def run(d: Path, json_path: Path | None) -> None:
    import cupy as cp
    import torch
    import triton
    from _common import copy_bandwidth_gbs, device_info, graph_ms, time_ms

    from kernels.mx import quantize_fp4, scaled_gemm
    from kernels.mx.reference import dequantize_fp4, nvfp4_global_scale

    manifest = json.loads((d / "manifest.json").read_text())
    notes: list[str] = []
    rows, check = [], {}
    copy = copy_bandwidth_gbs()

    def ptr(t):
        assert t.data_ptr() % 16 == 0, "every pointer is specialized as 16-byte aligned"
        return np.uint64(t.data_ptr())

    for case in manifest["cases"]:
        m, n, k = case["shape"]
        if case["kind"] == "check":
            qa, qb = (tuple(t.cuda() for t in q) for q in operands(m, n, k))
        else:
            a, b = torch.randn(m, k, device="cuda"), torch.randn(n, k, device="cuda")
            qa = quantize_fp4(a, "nvfp4", global_scale=nvfp4_global_scale(a))
            qb = quantize_fp4(b, "nvfp4", global_scale=nvfp4_global_scale(b))
        out = torch.empty(m, n, dtype=torch.float32, device="cuda")
        splits = case["splits"]
        c = out if splits == 1 else torch.empty(splits, m, n, dtype=torch.float32, device="cuda")
        g, gf = case["gemm"], _load(cp, d, case["gemm"], notes)
        programs = case["grid"][0] * case["grid"][1]
        gargs = (*(ptr(t) for t in (qa[0], qa[1], qb[0], qb[1], c, qa[2], qb[2])),
                 *(np.int32(v) for v in g["ints"].values()), *_extra(cp, g, programs))
        gargs = gargs[: g["n_params"]]
        launches = [(gf, tuple(case["grid"]), 32 * g["num_warps"], gargs, g["shared"])]
        if splits > 1:
            s = case["sum"]
            sargs = (*(ptr(t) for t in (c, out, qa[2], qb[2])),
                     *(np.int32(v) for v in s["ints"].values()), *_extra(cp, s, s["grid"][0]))
            launches.append((_load(cp, d, s, notes), tuple(s["grid"]), 32 * s["num_warps"], sargs[: s["n_params"]],
                             s["shared"]))

        def fn(launches=launches):
            # on torch's current stream, so that do_bench's events and a CUDA graph capture see the launches
            with cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
                for f, grid, block, args, shared in launches:
                    f(grid, (block,), args, shared_mem=shared)

        fn()
        torch.cuda.synchronize()
        da, db = (dequantize_fp4(q[0], q[1], "nvfp4", q[2]) for q in (qa, qb))
        ref, bound = da @ db.T, da.abs() @ db.abs().T
        err = float(((out.double() - ref).abs() / bound.clamp_min(1e-300)).max())
        row = {"shape": f"{m}x{n}x{k}", "kind": case["kind"], "splits": splits, "config": case["config"],
               "finite": bool(torch.isfinite(out).all()), "max_err_over_abs_product": err}
        if case["kind"] == "check":
            name = case_name(m, n, k)
            check[name] = out.cpu().numpy()
            for side, q in (("a", qa), ("b", qb)):
                for i, t in enumerate(q):
                    check[f"{name}__{side}{i}"] = t.cpu().numpy()
        else:
            ms, graph = time_ms(fn), graph_ms(fn)
            a16, b16 = a.bfloat16(), b.bfloat16()
            cublas = time_ms(lambda a16=a16, b16=b16: a16 @ b16.T)
            ma, mb = quantize_fp4(a, "mxfp4"), quantize_fp4(b, "mxfp4")
            mc = scaled_gemm(ma, mb, "mxfp4")
            mx_graph = graph_ms(lambda ma=ma, mb=mb, mc=mc: scaled_gemm(ma, mb, "mxfp4", out=mc))
            nbytes = sum(t.numel() * t.element_size() for t in (*qa[:2], *qb[:2])) + m * n * 4
            flop = 2 * m * n * k
            row.update(nvfp4_ms=ms, nvfp4_tflops=flop / ms / 1e9, cublas_bf16_tflops=flop / cublas / 1e9,
                       pct_cublas=100 * cublas / ms, nvfp4_graph_ms=graph,
                       graph_pct_copy=100 * nbytes / copy / 1e6 / graph, mxfp4_graph_ms=mx_graph,
                       nvfp4_over_mxfp4=mx_graph / graph)
        print(json.dumps(row), flush=True)
        rows.append(row)
    meta = {**device_info(), "ptx_triton": manifest["triton"], "run_triton": triton.__version__,
            "copy_gbs": copy, "loads": notes}
    np.savez_compressed(d / "check.npz", meta=np.array(json.dumps(meta)), **check)
    for line in notes:
        print(line)
    if json_path:
        json_path.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))


def compare(d: Path) -> int:
    os.environ["TRITON_INTERPRET"] = "1"
    import triton

    from harness.interp import shims
    from harness.interp.patch import Patch
    from kernels.mx.gemm import scaled_gemm

    shims.install(Patch(), "sm90")
    z = np.load(d / "check.npz", allow_pickle=False)
    meta = json.loads(str(z["meta"]))
    bad = 0
    for m, n, k in CHECK_SHAPES:
        name = case_name(m, n, k)
        qa, qb = operands(m, n, k)
        for side, q in (("a", qa), ("b", qb)):
            for i, t in enumerate(q):
                if not np.array_equal(t.numpy(), z[f"{name}__{side}{i}"]):
                    print(f"{name}: operand {side}{i} differs from the capture's")
                    bad += 1
        got = scaled_gemm(qa, qb, "nvfp4").numpy()
        want = z[name]
        differ = int((got.view(np.int32) != want.view(np.int32)).sum())
        bad += differ > 0
        print(f"{name}: {differ} of {got.size} products differ from {meta.get('gpu')} (PTX of Triton "
              f"{meta['ptx_triton']}; interpreter of Triton {triton.__version__})")
    return 1 if bad else 0


def golden(d: Path, out: Path) -> None:
    """``run``'s capture (``d/check.npz``) as the golden of ``tests/kernels/mx/test_mx_gemm.py``: per check shape
    the operands' digest (refused if the capture's operands are not what :func:`operands` draws here), the
    product's digest and its first ``KEPT`` products as raw fp32 bits; ``meta`` says which card, driver and
    Tritons (the PTX's and the image's)."""
    z = np.load(d / "check.npz", allow_pickle=False)
    meta = json.loads(str(z["meta"]))
    keep = {k: meta[k] for k in ("gpu", "capability", "torch", "python", "date", "ptx_triton", "run_triton", "loads")}
    arrays = {"meta": np.array(json.dumps({**keep, "triton": meta["ptx_triton"], "source":
                                           "benchmarks/nvfp4_ptx.py run (cubins of Triton 3.9 on the GPU)"})),
              "cases": np.array([case_name(*s) for s in CHECK_SHAPES])}
    for m, n, k in CHECK_SHAPES:
        c = case_name(m, n, k)
        captured = digest(*(z[f"{c}__{side}{i}"] for side in "ab" for i in range(3)))
        if captured != operand_digest(m, n, k):
            raise SystemExit(f"{c}: the capture's operands are not what operands() draws here: no golden written")
        bits = np.ascontiguousarray(z[c]).view(np.uint32)
        arrays.update({f"{c}__inputs": np.array(captured), f"{c}__sha256": np.array(digest(bits)),
                       f"{c}__kept": bits.reshape(-1)[:KEPT]})
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, **arrays)
    print(f"{out}: {len(CHECK_SHAPES)} products of {meta['gpu']} (PTX of Triton {meta['ptx_triton']})")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("step", choices=("compile", "run", "compare", "golden"))
    p.add_argument("dir", type=Path)
    p.add_argument("out", type=Path, nargs="?", help="golden: the file to write")
    p.add_argument("--json", type=Path, default=None, help="run: write the rows here too")
    a = p.parse_args()
    if a.step == "compile":
        compile_all(a.dir)
    elif a.step == "run":
        sys.path.insert(0, str(ROOT / "benchmarks"))
        run(a.dir, a.json)
    elif a.step == "golden":
        if a.out is None:
            p.error("golden: give the file to write (golden/mx/nvfp4_sm90_triton3.9.npz)")
        golden(a.dir, a.out)
    else:
        return compare(a.dir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
