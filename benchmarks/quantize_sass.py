"""SASS of ``quantize_fp4``'s kernel per block layout, compiled ahead of time for sm90 (no GPU: Triton's bundled
ptxas and cuobjdump): instructions a thread executes on the common path, per element, registers, and the widths of
its global loads and stores. A table to choose which layout the GPU sweep (``bench_mx.py --sweep``) should confirm.

The program is the shipped one (16 rows x 256 elements on 4 warps) as ``bench_mx.py`` launches it on an
8192 x 8192 source (every int argument divisible by 16, so Triton specializes them as a launch does). The common
path: every instruction up to the last ``EXIT`` (the IEEE division's slow path lies after it, out of line), less
the regions an unconditional forward ``BRA`` jumps over: NVFP4's branch for global scales outside [2^-115, 2^116)
(the division's fast path is counted with its not-taken call). Registers: ``cuobjdump -res-usage``.

    python benchmarks/quantize_sass.py [--arch 90] [--scheme nvfp4] [--src fp32] [--json PATH]

Not a test; prints a table. The H100 numbers in docs/performance.md come from Triton 3.6 (the H100 image's).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import io
import json
import re
from pathlib import Path

import _common  # noqa: F401  (puts the repo root on sys.path)
import torch
import triton
from _common import cuobjdump

import kernels.mx.quantize as q
from kernels.mx.layout import BLOCK, RULE_CODE

_DTYPES = {"bf16": ("*bf16", torch.bfloat16), "fp16": ("*fp16", torch.float16), "fp32": ("*fp32", torch.float32)}
_ARGS = ["x_ptr", "codes_ptr", "scales_ptr", "gs_ptr", "rows", "n_blocks", "stride_x", "stride_c", "stride_s",
         "scale_rows", "scale_cols"]
_LINE = re.compile(r"\s*/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z0-9_]+)((?:\.[A-Z0-9_]+)*)")
_BRA = re.compile(r"BRA\s+(?:`\(\S+\)\s*)?0x([0-9a-f]+)")


def compile_kernel(scheme: str, src: str, block_layout: str, arch: int, swizzled: bool = False):
    """The kernel for ``scheme`` from ``src`` in ``block_layout`` compiled for sm``arch`` (its ``asm`` holds the
    TTGIR and the cubin)."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    ptr, dtype = _DTYPES[src]
    sig = dict.fromkeys(_ARGS, "i32")
    sig.update(x_ptr=ptr, codes_ptr="*u8", scales_ptr="*u8", gs_ptr="*fp32" if scheme == "nvfp4" else ptr)
    attrs = {(i,): [["tt.divisibility", 16]] for i in range(len(_ARGS))}  # 16-byte pointers, ints divisible by 16
    rows, blocks, warps, lanes = q.launch_config(scheme, dtype, block_layout)
    consts = {"ROWS": rows, "BLOCKS": blocks, "BLOCK": BLOCK[scheme],
              "RULE": RULE_CODE["nvfp4" if scheme == "nvfp4" else "floor"], "SWIZZLED": swizzled,
              "VEC": 16 // dtype.itemsize, "LANES": lanes, "MIRROR": q.MIRROR}
    sig.update(dict.fromkeys(consts, "constexpr"))
    with contextlib.redirect_stdout(io.StringIO()):
        compiled = triton.compile(ASTSource(q._quantize_fp4_kernel, sig, consts, attrs),
                                  target=GPUTarget("cuda", arch, 32), options={"num_warps": warps})
    return compiled


_BLOCKED = re.compile(r"#ttg\.blocked<\{sizePerThread = \[([\d, ]+)\], threadsPerWarp = \[([\d, ]+)\], "
                      r"warpsPerCTA = \[([\d, ]+)\]")


def threads_a_block(ttgir: str, vec: int) -> int:
    """Threads that share a block in the layout Triton gave the source load: the (LANES, ROWS, BLOCKS, Q / LANES,
    VEC) layout (mirrored: (Q / LANES, BLOCKS, ROWS, LANES, VEC)) of ``vec`` elements a thread along VEC, whose
    threads and warps along dims 0 and 3 hold parts of one block. It equals LANES when the kernel's MIRROR matches
    the way this Triton's coalescing orders the other dims (3.6 by index, 3.9 by reverse index)."""
    for m in _BLOCKED.finditer(ttgir):
        spt, tpw, wpc = ([int(v) for v in g.split(",")] for g in m.groups())
        if len(spt) == 5 and spt[4] == vec:
            return tpw[0] * wpc[0] * tpw[3] * wpc[3]
    raise RuntimeError("no 5-D blocked layout of the source load in the TTGIR")


def common_path(sass: str) -> list[tuple[int, str]]:
    """(address, opcode with modifiers) of the instructions on the common path (module docstring)."""
    ins = []
    for line in sass.splitlines():
        if m := _LINE.match(line):
            ins.append((int(m.group(1), 16), m.group(3) + m.group(4), m.group(2) is None, line))
    if not ins:
        raise RuntimeError("no SASS instructions parsed from cuobjdump's output")
    end = max(a for a, op, _, _ in ins if op == "EXIT")
    skipped = []
    for a, op, unconditional, line in ins:
        if a <= end and op == "BRA" and unconditional and (m := _BRA.search(line)) and int(m.group(1), 16) > a:
            skipped.append((a + 16, int(m.group(1), 16)))
    return [(a, op) for a, op, _, _ in ins if a <= end and not any(lo <= a < hi for lo, hi in skipped)]


def measure(scheme: str, src: str, block_layout: str, arch: int) -> dict:
    compiled = compile_kernel(scheme, src, block_layout, arch)
    cubin = compiled.asm["cubin"]
    path = common_path(cuobjdump(cubin, "-sass"))
    regs = int(re.search(r"REG:(\d+)", cuobjdump(cubin, "-res-usage")).group(1))
    rows, blocks, warps, _ = q.launch_config(scheme, _DTYPES[src][1])
    per_thread = rows * blocks * BLOCK[scheme] // (32 * warps)
    mem = collections.Counter(op for _, op in path if op.startswith(("LDG", "STG")))
    ops = collections.Counter(op.split(".")[0] for _, op in path)
    return {"threads_a_block": threads_a_block(compiled.asm["ttgir"], 16 // _DTYPES[src][1].itemsize),
            "instructions": len(path), "per_element": len(path) / per_thread, "registers": regs,
            "loads": {k: v for k, v in mem.items() if k.startswith("LDG")},
            "stores": {k: v for k, v in mem.items() if k.startswith("STG")}, "opcodes": dict(ops.most_common(6))}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--arch", type=int, default=90, help="compute capability to compile for (default 90)")
    p.add_argument("--scheme", choices=("mxfp4", "nvfp4"), action="append", help="default: both")
    p.add_argument("--src", choices=tuple(_DTYPES), action="append", help="default: all three")
    p.add_argument("--json", type=Path, default=None)
    a = p.parse_args()
    rows = []
    print(f"quantize_fp4 kernel SASS, sm{a.arch}, Triton {triton.__version__}, common path (shipped layout: *)")
    print(f"{'scheme':<6} {'src':<5} {'layout':<8} {'LANES':>5} {'got':>3} {'SASS':>5} {'/elem':>6} {'regs':>4}  "
          "loads; stores; top opcodes  (got: threads a block in the layout Triton gave the load)")
    for scheme in a.scheme or ("mxfp4", "nvfp4"):
        for src in a.src or tuple(_DTYPES):
            dtype = _DTYPES[src][1]
            for name, lanes in q.block_layouts(scheme, dtype).items():
                r = measure(scheme, src, name, a.arch)
                mark = "*" if q.SHIPPED_LAYOUT[scheme, dtype] == name else " "
                ld = " ".join(f"{k} x{v}" for k, v in sorted(r["loads"].items()))
                st = " ".join(f"{k} x{v}" for k, v in sorted(r["stores"].items()))
                top = ", ".join(f"{k} {v}" for k, v in r["opcodes"].items())
                print(f"{scheme:<6} {src:<5} {name + mark:<8} {lanes:>5} {r['threads_a_block']:>3} "
                      f"{r['instructions']:>5} {r['per_element']:>6.1f} "
                      f"{r['registers']:>4}  {ld}; {st}; {top}")
                rows.append({"scheme": scheme, "src": src, "layout": name, "lanes": lanes,
                             "shipped": mark == "*", **r})
    if a.json is not None:
        a.json.write_text(json.dumps({"arch": a.arch, "triton": triton.__version__, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
