"""Compile plain ``tl.dot`` and ``tl.dot_scaled`` tiles for sm100 on a machine with no GPU and print what
``harness.tensor_cores.tcgen05.LOWERING`` records: per tile, the MMA instruction kinds with one PTX line each, how
many MMAs the tile issues, whether the accumulator goes to TMEM (``tcgen05.st`` / ``tcgen05.ld``), the A
descriptor's step between MMAs (the k order), or the compiler's refusal.

    python scripts/compile_tcgen05_lowering.py [--json OUT]

Run it with each Triton (3.6: /work/main/.venv-oldest, 3.9) to re-read the facts. Kernels: those of
``scripts/compile_dot_scaled_lowering.py`` (``plain``: one ``tl.dot`` with an accumulator; ``probe``: one
``tl.dot_scaled``).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import compile_dot_scaled_lowering as c  # noqa: E402
import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

PLAIN = [(t, m, n, k, w) for t in ("fp16", "bf16", "tf32", "e4m3", "e4m3_e5m2")
         for m, n, k, w in ((128, 128, 64, 4), (64, 64, 64, 4), (128, 64, 128, 8), (64, 64, 64, 2))]
SCALED = [(fa, fb, kw, m, n, k, w) for fa, fb, kw in (("e2m1", "e2m1", {}), ("e2m1", "e2m1", {"G": 16, "NV": True}),
                                                     ("e4m3", "e4m3", {}), ("e5m2", "e4m3", {}),
                                                     ("e2m1", "e4m3", {}), ("bf16", "bf16", {}))
          for m, n, k, w in ((128, 128, 128, 4), (128, 16, 128, 4), (128, 8, 128, 4), (64, 64, 64, 4),
                             (256, 128, 128, 8), (128, 128, 32, 4))]
_MMA = re.compile(r"(tcgen05\.mma\S*|mma\.sync\S*|wgmma\.mma_async\S*)")


def summarise(ptx: str) -> dict:
    lines = [ln.strip() for ln in ptx.splitlines() if _MMA.search(ln) and "//" not in ln.split(_MMA.search(ln)
                                                                                                  .group(1))[0]]
    kinds: dict[str, str] = {}
    for ln in lines:
        kinds.setdefault(_MMA.search(ln).group(1), ln)
    steps = sorted({int(x) for x in re.findall(r"add\.s32\s+%r\d+, %r\d+, (\d+);", ptx)} & {1, 2, 4, 6, 8})
    return {"mma": kinds, "count": len(lines), "tmem_st": "tcgen05.st" in ptx, "tmem_ld": "tcgen05.ld" in ptx,
            "desc_steps": steps}


def compile_plain(t: str, m: int, n: int, k: int, w: int) -> dict:
    pa, pb = c.PLAIN_TYPES[t]
    sig = {"a_ptr": pa, "b_ptr": pb, "o_ptr": "*fp32", "M": "constexpr", "N": "constexpr", "K": "constexpr",
           "IP": "constexpr"}
    consts = {"M": m, "N": n, "K": k, "IP": "tf32" if t == "tf32" else None}
    try:
        kern = triton.compile(ASTSource(c.plain, sig, constexprs=consts), target=GPUTarget("cuda", 100, 32),
                              options={"num_warps": w})
    except Exception as e:  # noqa: BLE001 - the compiler's refusal is the datum
        return {"refused": f"{type(e).__name__}: {str(e).strip().splitlines()[0][:200]}"}
    return summarise(kern.asm["ptx"])


def compile_scaled(fa: str, fb: str, kw: dict, m: int, n: int, k: int, w: int) -> dict:
    cc = dict(M=m, N=n, K=k, KPA=True, SA=True, SB=True, G=32, NV=False, FM=False, FA=fa, FB=fb)
    cc.update(kw)
    cc["PA"] = 2 if fa == "e2m1" else 1
    cc["PB"] = 2 if fb == "e2m1" else 1
    sig = {"a_ptr": c.PTR[fa], "as_ptr": "*u8", "b_ptr": c.PTR[fb], "bs_ptr": "*u8", "o_ptr": "*fp32"}
    sig.update({key: "constexpr" for key in cc})
    try:
        kern = triton.compile(ASTSource(c.probe, sig, constexprs=cc), target=GPUTarget("cuda", 100, 32),
                              options={"num_warps": w})
    except Exception as e:  # noqa: BLE001
        msg = getattr(e, "error_message", None) or str(e).strip().splitlines()[0]
        return {"refused": f"{type(e).__name__}: {str(msg)[:200]}"}
    return summarise(kern.asm["ptx"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    out = {"triton": triton.__version__, "plain": {}, "scaled": {}}
    for t, m, n, k, w in PLAIN:
        name = f"{t} {m}x{n}x{k} w{w}"
        out["plain"][name] = r = compile_plain(t, m, n, k, w)
        print(f"triton {triton.__version__} tl.dot {name}: {r}", flush=True)
    for fa, fb, kw, m, n, k, w in SCALED:
        name = f"{fa} x {fb}{' nvfp4' if kw.get('NV') else ''} {m}x{n}x{k} w{w}"
        out["scaled"][name] = r = compile_scaled(fa, fb, kw, m, n, k, w)
        print(f"triton {triton.__version__} tl.dot_scaled {name}: {r}", flush=True)
    if args.json is not None:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
