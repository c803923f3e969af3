"""Compile one ``tl.dot_scaled`` tile for NVIDIA targets on a machine with no GPU, and summarise how the installed
Triton lowers it: refused or not, and the instructions of the upcast, the scale multiply and the MMA; with
``--plain``, per plain ``tl.dot`` operand pair (fp16, bf16, tf32, e4m3, e5m2 and the mixed FP8 pairs) and tile:
refused (the error) or its MMA instruction, its operand conversions (``tt.fp_to_fp``) and dot operand ``kWidth``.

Why: ``harness.tensor_cores`` models the lowering per target and Triton version from this compiler output (the
docstrings of ``scaled.py`` and ``models.py`` cite it); run the script with each Triton (3.6 and 3.9) to re-read it.

    python scripts/compile_dot_scaled_lowering.py OUTDIR [--targets 80,86,89,90,100,120] [--dump] [--plain]

Cases: every (a format, b format) of e2m1/e4m3/e5m2/bf16/fp16, both operands scaled by e8m0 codes in groups of
32, fast_math off and on; then for e2m1 x e2m1: NVFP4 (e4m3 scales, groups of 16), e8m0 in groups of 16, e2m1
packed along M, and unscaled operands. One tile: M = N = K = 64, 4 warps. Writes OUTDIR/summary.json (per target
and case: ``ok``, the error's first line, and the distinct PTX instructions of interest) and with ``--dump`` each
case's TTGIR and PTX. Each target compiles in a process of its own (Triton 3.6 latches some lowerings to the first
target it compiles for).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

FORMATS = ("e2m1", "e4m3", "e5m2", "bf16", "fp16")
PTR = {"e2m1": "*u8", "e4m3": "*u8", "e5m2": "*u8", "bf16": "*bf16", "fp16": "*fp16"}
M = N = K = 64

#: PTX instructions worth reading: MMAs, conversions, the 16-bit multiplies, selects and fmas
_INSTR = re.compile(r"^\s*(?:@%p\d+\s+)?((?:mma|wgmma|tcgen05\.mma|cvt|mul|fma|selp|min|max|and|or|shl|prmt)"
                    r"[.\w:]*)")


@triton.jit
def probe(a_ptr, as_ptr, b_ptr, bs_ptr, o_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
          FA: tl.constexpr, FB: tl.constexpr, PA: tl.constexpr, PB: tl.constexpr, KPA: tl.constexpr,
          SA: tl.constexpr, SB: tl.constexpr, G: tl.constexpr, NV: tl.constexpr, FM: tl.constexpr):
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    if KPA:
        a = tl.load(a_ptr + rm[:, None] * (K // PA) + tl.arange(0, K // PA)[None, :])
    else:
        a = tl.load(a_ptr + tl.arange(0, M // PA)[:, None] * K + tl.arange(0, K)[None, :])
    b = tl.load(b_ptr + tl.arange(0, K // PB)[:, None] * N + rn[None, :])
    sa = None
    sb = None
    if SA:
        sa = tl.load(as_ptr + rm[:, None] * (K // G) + tl.arange(0, K // G)[None, :])
        if NV:
            sa = sa.to(tl.float8e4nv, bitcast=True)
    if SB:
        sb = tl.load(bs_ptr + rn[:, None] * (K // G) + tl.arange(0, K // G)[None, :])
        if NV:
            sb = sb.to(tl.float8e4nv, bitcast=True)
    acc = tl.zeros((M, N), tl.float32)
    acc = tl.dot_scaled(a, sa, FA, b, sb, FB, acc, fast_math=FM, lhs_k_pack=KPA)
    tl.store(o_ptr + rm[:, None] * N + rn[None, :], acc)


@triton.jit
def plain(a_ptr, b_ptr, o_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr, IP: tl.constexpr):
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    rk = tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    acc = tl.dot(a, b, tl.zeros((M, N), tl.float32), input_precision=IP)
    tl.store(o_ptr + rm[:, None] * N + rn[None, :], acc)


#: plain tl.dot cases: operand pointer types (a, b), tiles (M, N, K, num_warps)
PLAIN_TYPES = {"fp16": ("*fp16",) * 2, "bf16": ("*bf16",) * 2, "tf32": ("*fp32",) * 2, "e4m3": ("*fp8e4nv",) * 2,
               "e5m2": ("*fp8e5",) * 2, "e4m3_e5m2": ("*fp8e4nv", "*fp8e5"), "e5m2_e4m3": ("*fp8e5", "*fp8e4nv")}
PLAIN_TILES = ((128, 128, 64, 4), (64, 64, 64, 4), (16, 64, 64, 4), (64, 64, 64, 2))


def plain_target(cap: int) -> dict:
    """Per case: refused (the error's first line) or the MMA instructions of the PTX, the operand conversions
    (``tt.fp_to_fp``) and the dot operand layouts' ``kWidth`` of the TTGIR."""
    res = {}
    for t, (pa, pb) in PLAIN_TYPES.items():
        for m, n, k, w in PLAIN_TILES:
            sig = {"a_ptr": pa, "b_ptr": pb, "o_ptr": "*fp32", "M": "constexpr", "N": "constexpr",
                   "K": "constexpr", "IP": "constexpr"}
            consts = {"M": m, "N": n, "K": k, "IP": "tf32" if t == "tf32" else None}
            name = f"{t}_{m}x{n}x{k}_w{w}"
            try:
                kern = triton.compile(ASTSource(plain, sig, constexprs=consts), target=GPUTarget("cuda", cap, 32),
                                      options={"num_warps": w})
            except Exception as e:  # noqa: BLE001 - the compiler's refusal is the datum
                msg = getattr(e, "error_message", None) or str(e).strip().splitlines()[0]
                res[name] = {"ok": False, "error": f"{type(e).__name__}: {str(msg)[:200]}"}
                continue
            mma = [x for x in instructions(kern.asm["ptx"]) if x.startswith(("mma", "wgmma.mma", "tcgen05.mma"))]
            ttgir = kern.asm.get("ttgir", "")
            kw = sorted({int(x) for x in re.findall(r"kWidth\s*=\s*(\d+)", ttgir)})
            conv = sorted({f"{x}->{y}" for x, y in re.findall(r"tt\.fp_to_fp[^:]*:\s*tensor<[\dx]*x(\w+),.*?"
                                                               r"-> tensor<[\dx]*x(\w+),", ttgir)})
            res[name] = {"ok": True, "mma": mma, "kWidth": kw, "fp_to_fp": conv}
    return res


def cases():
    for fa in FORMATS:
        for fb in FORMATS:
            for fm in (False, True):
                yield f"{fa}_{fb}{'_fm' if fm else ''}", dict(FA=fa, FB=fb, FM=fm)
    yield "e2m1_e2m1_nvfp4", dict(FA="e2m1", FB="e2m1", G=16, NV=True)
    yield "e2m1_e4m3_nvfp4", dict(FA="e2m1", FB="e4m3", G=16, NV=True)
    yield "e2m1_e2m1_e8m0_g16", dict(FA="e2m1", FB="e2m1", G=16)
    yield "e2m1_e2m1_mpacked", dict(FA="e2m1", FB="e2m1", KPA=False)
    yield "e2m1_e2m1_unscaled", dict(FA="e2m1", FB="e2m1", SA=False, SB=False)
    yield "bf16_bf16_unscaled", dict(FA="bf16", FB="bf16", SA=False, SB=False)


def compile_case(cap: int, kw: dict) -> tuple[bool, str, dict]:
    c = dict(M=M, N=N, K=K, KPA=True, SA=True, SB=True, G=32, NV=False, FM=False)
    c.update(kw)
    c["PA"] = 2 if c["FA"] == "e2m1" else 1
    c["PB"] = 2 if c["FB"] == "e2m1" else 1
    sig = {"a_ptr": PTR[c["FA"]], "as_ptr": "*u8", "b_ptr": PTR[c["FB"]], "bs_ptr": "*u8", "o_ptr": "*fp32"}
    sig.update({k: "constexpr" for k in c})
    try:
        k = triton.compile(ASTSource(probe, sig, constexprs=c), target=GPUTarget("cuda", cap, 32),
                           options={"num_warps": 4})
    except Exception as e:  # noqa: BLE001 - the compiler's refusal is the datum
        msg = getattr(e, "error_message", None)  # a CompilationError's own message, without the kernel source
        if not msg:
            text = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
            msg = next((ln for ln in text if "error" in ln.lower() or "failed" in ln.lower()), text[0] if text else "")
        return False, f"{type(e).__name__}: {str(msg).strip()[:300]}", {}
    return True, "", {"ttgir": k.asm.get("ttgir", ""), "ptx": k.asm.get("ptx", "")}


def instructions(ptx: str) -> list[str]:
    seen: dict[str, None] = {}
    for ln in ptx.splitlines():
        m = _INSTR.match(ln)
        if m:
            seen.setdefault(m.group(1), None)
    return list(seen)


def ttgir_ops(ttgir: str) -> list[str]:
    seen: dict[str, None] = {}
    for ln in ttgir.splitlines():
        for m in re.finditer(r"\b(tt\.dot(?:_scaled)?|ttng\.\w+|ttg\.fp4_to_fp|ttg\.upcast_mxfp|tt\.fp_to_fp|"
                             r"arith\.mulf|arith\.select|math\.fma)\b[^:]*:\s*([^\n]*)", ln):
            seen.setdefault(f"{m.group(1)} : {m.group(2)[:140]}", None)
    return list(seen)


def one_target(cap: int, out: Path, dump: bool) -> dict:
    res = {}
    for name, kw in cases():
        ok, err, asm = compile_case(cap, kw)
        row = {"ok": ok}
        if ok:
            row["ptx"] = instructions(asm["ptx"])
            row["ttgir"] = ttgir_ops(asm["ttgir"])
            if dump:
                (out / f"sm{cap}_{name}.ttgir").write_text(asm["ttgir"])
                (out / f"sm{cap}_{name}.ptx").write_text(asm["ptx"])
        else:
            row["error"] = err
        res[name] = row
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--targets", default="80,86,89,90,100,120")
    ap.add_argument("--dump", action="store_true")
    ap.add_argument("--plain", action="store_true", help="plain tl.dot per operand type and tile instead")
    ap.add_argument("--one-target", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.one_target is not None:
        res = plain_target(args.one_target) if args.plain else one_target(args.one_target, args.out, args.dump)
        (args.out / f"sm{args.one_target}.json").write_text(json.dumps(res, indent=1))
        return
    summary = {"triton": triton.__version__, "tile": [M, N, K], "num_warps": 4, "targets": {}}
    for cap in args.targets.split(","):
        cmd = [sys.executable, __file__, str(args.out), "--one-target", cap] + (["--dump"] if args.dump else []) \
            + (["--plain"] if args.plain else [])
        subprocess.run(cmd, check=True)
        summary["targets"][f"sm{cap}"] = json.loads((args.out / f"sm{cap}.json").read_text())
    (args.out / ("plain.json" if args.plain else "summary.json")).write_text(json.dumps(summary, indent=1))
    for t, rows in summary["targets"].items():
        if args.plain:
            for n, r in rows.items():
                what = f"{r['mma']} kWidth {r['kWidth']} {' '.join(r['fp_to_fp'])}" if r["ok"] else r["error"]
                print(f"triton {summary['triton']} {t} {n}: {what}")
            continue
        refused = [n for n, r in rows.items() if not r["ok"]]
        print(f"triton {summary['triton']} {t}: {len(rows) - len(refused)} compiled, refused: {refused}")


if __name__ == "__main__":
    main()
