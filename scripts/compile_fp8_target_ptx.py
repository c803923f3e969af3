"""Compile one plain FP8 cast kernel to PTX for several NVIDIA targets, on a machine with no GPU.

Step 1 of the per-target cast tables (step 2, ``capture_fp8_target_tables.py``, JIT-loads this PTX on one
GPU: PTX is forward-compatible, so an sm90 device executes the sm80 lowering's instructions). Run it with
the Triton whose lowering is to be measured (the GPU image's, 3.6). The kernels are
``harness.cast_probe``'s (Triton only).

Every (target, source dtype, format, via fp32, aligned) case is compiled. ``aligned`` gives the pointers
and ``n`` the divisibility-by-16 specialization a launch with torch tensors gets; Triton 3.6 lowers some
casts differently without it (vectorized pairs use the hardware ``cvt``, scalar elements a software
sequence), so both are tabled.

    python scripts/compile_fp8_target_ptx.py OUTDIR [--targets 75,80,86,89,90]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's harness, installed or not
from harness.cast_probe import fp8_cast, fp32_div  # noqa: E402

SRCS = {"fp16": "*fp16", "bf16": "*bf16", "fp32": "*fp32"}
FORMATS = {"e4nv": "float8e4nv", "e5m2": "float8e5", "e4b15": "float8e4b15"}
BLOCK = 1024


def cases():
    for src in SRCS:
        for fmt in FORMATS:
            for via in ((False, True) if src != "fp32" else (False,)):
                for aligned in (True, False):
                    yield src, fmt, via, aligned


def case_id(src: str, fmt: str, via: bool, aligned: bool) -> str:
    return f"{src}{'_via_fp32' if via else ''}_{fmt}_{'aligned' if aligned else 'unaligned'}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--targets", default="75,80,86,89,90")
    ap.add_argument("--one-target", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.one_target is None:
        manifest: dict = {"triton": triton.__version__, "block": BLOCK, "kernels": {}}
        for cap in args.targets.split(","):
            # a fresh process per target, and no cache (an entry may hold another process's lowering)
            env = dict(os.environ, TRITON_ALWAYS_COMPILE="1")
            subprocess.run([sys.executable, __file__, str(args.out), "--one-target", cap], check=True, env=env)
            part = json.loads((args.out / f"manifest_sm{cap}.json").read_text())
            manifest["kernels"].update(part["kernels"])
            manifest.update({k: v for k, v in part.items() if k != "kernels"})
            (args.out / f"manifest_sm{cap}.json").unlink()
        (args.out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True))
        return
    manifest = {"triton": triton.__version__, "block": BLOCK, "kernels": {}}
    for cap in [args.one_target]:
        for src, fmt, via, aligned in cases():
            cid = f"sm{cap}/{case_id(src, fmt, via, aligned)}"
            attrs = {(i,): [["tt.divisibility", 16]] for i in range(3)} if aligned else {}
            sig = {"x_ptr": SRCS[src], "y_ptr": "*u8", "n": "i32", "DST": "constexpr", "VIA_FP32": "constexpr",
                   "BLOCK": "constexpr"}
            try:
                k = triton.compile(ASTSource(fp8_cast, sig, constexprs={"DST": getattr(tl, FORMATS[fmt]),
                                   "VIA_FP32": via, "BLOCK": BLOCK}, attrs=attrs),
                                   target=GPUTarget("cuda", cap, 32))
            except Exception as e:  # the refusal is part of the table
                msg = str(e).strip().splitlines()
                manifest["kernels"][cid] = {"error": f"{type(e).__name__}: {msg[-1][:200] if msg else ''}"}
                print(cid, "refused", flush=True)
                continue
            ptx = k.asm["ptx"]
            name = k.metadata.name
            entry = re.search(r"\.entry\s+" + re.escape(name) + r"\s*\((.*?)\)", ptx, re.S)
            n_params = len(re.findall(r"\.param", entry.group(1))) if entry else None
            fname = cid.replace("/", "__") + ".ptx"
            (args.out / fname).write_text(ptx)
            manifest["kernels"][cid] = {
                "ptx": fname, "name": name, "num_warps": k.metadata.num_warps, "shared": k.metadata.shared,
                "n_params": n_params, "global_scratch_size": getattr(k.metadata, "global_scratch_size", 0),
                "profile_scratch_size": getattr(k.metadata, "profile_scratch_size", 0),
                "cvt": sorted(set(re.findall(r"cvt\.[\w.]+", ptx))),
            }
            print(cid, name, n_params, manifest["kernels"][cid]["cvt"], flush=True)
    (args.out / f"manifest_sm{args.one_target}.json").write_text(json.dumps(manifest))
    if args.one_target != 90:
        return
    # fp32 `/` as Triton lowers it (div.full.f32: approximate, documented 2 ulp), for the README's table
    k = triton.compile(ASTSource(fp32_div, {"x_ptr": "*fp32", "y_ptr": "*fp32", "z_ptr": "*fp32", "n": "i32",
                                            "BLOCK": "constexpr"}, constexprs={"BLOCK": BLOCK},
                                 attrs={(i,): [["tt.divisibility", 16]] for i in range(4)}),
                       target=GPUTarget("cuda", 90, 32))
    (args.out / "sm90__fp32_div.ptx").write_text(k.asm["ptx"])
    manifest["div"] = {"ptx": "sm90__fp32_div.ptx", "name": k.metadata.name, "num_warps": k.metadata.num_warps,
                       "shared": k.metadata.shared, "div": sorted(set(re.findall(r"div\.[\w.]+", k.asm["ptx"])))}
    (args.out / f"manifest_sm{args.one_target}.json").write_text(json.dumps(manifest))


if __name__ == "__main__":
    main()
