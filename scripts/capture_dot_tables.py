"""Capture what plain Triton ``tl.dot`` kernels compute on a GPU, and compare ``harness.tensor_cores`` with it.

    python scripts/capture_dot_tables.py capture OUTDIR     # on the GPU: writes OUTDIR/dot_tables.npz
    python scripts/capture_dot_tables.py compare NPZ        # anywhere: the model against the captured outputs

Every case (:data:`CASES`) is one plain kernel: a ``BM x BN`` tile per program, a loop over K in steps of
``BK`` with ``acc = tl.dot(a, b, acc, input_precision=..., max_num_imprecise_acc=...)``, starting from a loaded
accumulator or from zeros. The inputs are regenerated from the case's seed (:func:`inputs`: random normal,
wide-exponent bit patterns, and specials: zeros, subnormals, extremes, inf/NaN); only the outputs are stored
(fp32 bit patterns, compressed), with the instruction lines of each kernel's PTX (``wgmma.*`` / ``mma.sync.*``)
and the versions. ``capture`` imports nothing from this repo (so it runs where the repo's dependencies are
absent); ``compare`` uses :func:`harness.tensor_cores.dot`, one call per ``BK`` step, as the interpreter shim does.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import torch

FP8 = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
DT = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32, **FP8}


def _case(a, b, M, N, K, BM, BN, BK, warps, acc, dist, seed, ip=None, mnia=None):
    name = f"{a}x{b}_{dist}_M{M}N{N}K{K}_t{BM}x{BN}x{BK}w{warps}_{'acc' if acc else 'noacc'}"
    if ip:
        name += f"_{ip}"
    if mnia is not None:
        name += f"_mnia{mnia}"
    return dict(name=name, a=a, b=b, M=M, N=N, K=K, BM=BM, BN=BN, BK=BK, warps=warps, acc=acc, dist=dist,
                seed=seed, ip=ip, mnia=mnia)


def _cases() -> list[dict]:
    out = []
    s = 1000
    pairs = [("fp16", "fp16"), ("bf16", "bf16"), ("e4m3", "e4m3"), ("e5m2", "e5m2"), ("e4m3", "e5m2"),
             ("e5m2", "e4m3")]
    for a, b in pairs:
        fp8 = a in FP8
        bk = 64 if fp8 else 32
        # wgmma, one warpgroup; with and without acc; three input distributions (>= 10^5 outputs per pair)
        for dist in ("normal", "wide", "special"):
            for acc in (False, True):
                s += 1
                out.append(_case(a, b, 128, 128, 256, 64, 64, bk, 4, acc, dist, s))
        # other instruction shapes: two warpgroups / wide N, small M, num_warps=2 (not a warpgroup multiple)
        for BM, BN, w in ((128, 128, 8), (16, 64, 4), (64, 64, 2)):
            s += 1
            out.append(_case(a, b, 128, 128, 256, BM, BN, bk, w, True, "normal", s))
        if fp8:  # max_num_imprecise_acc: promotion to an fp32 accumulator every N products
            for mnia in (32, 64):
                s += 1
                out.append(_case(a, b, 128, 128, 256, 64, 64, 128, 4, True, "normal", s, mnia=mnia))
    for ip in ("tf32", "tf32x3", "ieee"):
        for dist in ("normal", "wide", "special"):
            s += 1
            out.append(_case("fp32", "fp32", 128, 128, 256, 64, 64, 32, 4, dist != "normal", dist, s, ip=ip))
        s += 1
        out.append(_case("fp32", "fp32", 128, 128, 256, 64, 64, 32, 2, True, "normal", s, ip=ip))
    return out


CASES = _cases()


def _codes(g: torch.Generator, shape, dt: torch.dtype) -> torch.Tensor:
    """Uniformly random finite bit patterns of dtype dt (fp32: exponents in [-30, 30])."""
    n = int(np.prod(shape))
    if dt == torch.float32:
        m = torch.rand(n, generator=g, dtype=torch.float64) + 1.0
        e = torch.randint(-30, 31, (n,), generator=g).double()
        sgn = torch.randint(0, 2, (n,), generator=g).double() * 2 - 1
        return (sgn * m * torch.exp2(e)).float().reshape(shape)
    bits = {1: torch.uint8, 2: torch.int16}[dt.itemsize]
    hi = 256 if dt.itemsize == 1 else 65536
    c = torch.randint(0, hi, (n,), generator=g, dtype=torch.int64)
    if dt.itemsize == 2:
        c = torch.where(c >= 32768, c - 65536, c)
    x = c.to(bits).view(dt)
    bad = ~torch.isfinite(x.float())
    x = torch.where(bad, torch.zeros_like(x.float()), x.float()).to(dt)
    return x.reshape(shape)


def _specials(dt: torch.dtype) -> torch.Tensor:
    fi = torch.finfo(dt)
    v = [0.0, -0.0, fi.tiny, -fi.tiny, fi.max, -fi.max, 1.0, -1.0, float("inf"), float("-inf"), float("nan")]
    if dt in FP8.values():
        v.append(float(torch.tensor(1, dtype=torch.uint8).view(dt).float()))  # smallest subnormal
        if dt == torch.float8_e4m3fn:
            v = [x for x in v if x == x and abs(x) != float("inf")] + [float("nan")]
    else:
        v.append(fi.tiny / 8)
    return torch.tensor(v, dtype=torch.float32).to(dt)


def inputs(c: dict) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """(a [M, K], b [K, N], acc [M, N] fp32 or None) of a case, on the CPU, from its seed."""
    g = torch.Generator().manual_seed(c["seed"])
    M, N, K = c["M"], c["N"], c["K"]
    ta, tb = DT[c["a"]], DT[c["b"]]

    def one(shape, dt):
        if c["dist"] == "wide":
            return _codes(g, shape, dt)
        scale = 4.0 if dt in FP8.values() else 1.0
        x = (torch.randn(shape, generator=g) * scale).to(dt)
        if c["dist"] == "special":
            sp = _specials(dt)
            pick = torch.rand(shape, generator=g) < 0.002
            idx = torch.randint(0, sp.numel(), shape, generator=g)
            x = torch.where(pick, sp[idx].float(), x.float()).to(dt)
        return x

    a, b = one((M, K), ta), one((K, N), tb)
    acc = None
    if c["acc"]:
        acc = torch.randn((M, N), generator=g) * 16
        if c["dist"] == "wide":
            acc = _codes(g, (M, N), torch.float32)
    return a, b, acc


# --- capture (GPU) ------------------------------------------------------------------------------------------

def _kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def dot_kernel(a_ptr, b_ptr, c_ptr, o_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                   N: tl.constexpr, HAS_ACC: tl.constexpr, IP: tl.constexpr, MNIA: tl.constexpr):
        pm = tl.program_id(0)
        pn = tl.program_id(1)
        rm = pm * BM + tl.arange(0, BM)
        rn = pn * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        if HAS_ACC:
            acc = tl.load(c_ptr + rm[:, None] * N + rn[None, :])
        else:
            acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k0 in range(0, K, BK):
            a = tl.load(a_ptr + rm[:, None] * K + (k0 + rk)[None, :])
            b = tl.load(b_ptr + (k0 + rk)[:, None] * N + rn[None, :])
            acc = tl.dot(a, b, acc, input_precision=IP, max_num_imprecise_acc=MNIA)
        tl.store(o_ptr + rm[:, None] * N + rn[None, :], acc)

    return dot_kernel


def capture(outdir: Path) -> None:
    import triton

    kern = _kernel()
    outdir.mkdir(parents=True, exist_ok=True)
    arrays, meta = {}, {"triton": triton.__version__, "torch": torch.__version__,
                        "device": torch.cuda.get_device_name(0), "cases": [], "instr": {}, "errors": {}}
    for c in CASES:
        a, b, acc = inputs(c)
        dev = "cuda"
        a_d, b_d = a.to(dev), b.to(dev)
        acc_d = acc.to(dev) if acc is not None else torch.empty(1, device=dev)
        o = torch.empty((c["M"], c["N"]), dtype=torch.float32, device=dev)
        grid = (c["M"] // c["BM"], c["N"] // c["BN"])
        try:
            h = kern[grid](a_d, b_d, acc_d, o, c["K"], BM=c["BM"], BN=c["BN"], BK=c["BK"], N=c["N"],
                           HAS_ACC=c["acc"], IP=c["ip"], MNIA=c["mnia"], num_warps=c["warps"])
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 - a refused case is a result too
            meta["errors"][c["name"]] = f"{type(e).__name__}: {str(e)[:500]}"
            print("ERR", c["name"], meta["errors"][c["name"]][:200], flush=True)
            continue
        ptx = h.asm.get("ptx", "")
        ins = sorted({m.group(0) for m in re.finditer(r"(wgmma\.mma_async[\w.]*|mma\.sync[\w.]*|fma\.rn\.f32)", ptx)})
        meta["instr"][c["name"]] = ins
        meta["cases"].append(c)
        arrays[c["name"]] = o.cpu().view(torch.int32).numpy()
        print("ok", c["name"], ins, flush=True)
    np.savez_compressed(outdir / "dot_tables.npz", meta=np.array(json.dumps(meta)), **arrays)
    print("saved", len(arrays), "cases", flush=True)


# --- compare (anywhere) -------------------------------------------------------------------------------------

def model_case(c: dict, arch: str = "sm90", instr: str = "wgmma") -> torch.Tensor:
    """What harness.tensor_cores says the case's kernel computes: one dot per BK step, like the kernel."""
    from harness.tensor_cores import dot

    a, b, acc = inputs(c)
    out = torch.zeros((c["M"], c["N"]), dtype=torch.float32) if acc is None else acc.clone()
    first = acc is None
    for k0 in range(0, c["K"], c["BK"]):
        out = dot(a[:, k0:k0 + c["BK"]], b[k0:k0 + c["BK"]], None if first else out, arch=arch,
                  input_precision=c["ip"], max_num_imprecise_acc=c["mnia"], instr=instr)
        first = False
    return out


def compare(npz: Path) -> dict:
    z = np.load(npz)
    meta = json.loads(str(z["meta"]))
    rows = {}
    for c in meta["cases"]:
        gpu = torch.from_numpy(z[c["name"]])
        try:
            instr = "mma" if any(i.startswith("mma.sync") for i in meta["instr"][c["name"]]) else "wgmma"
            mod = model_case(c, instr=instr).view(torch.int32)
        except NotImplementedError as e:
            rows[c["name"]] = {"error": str(e)}
            continue
        g32, m32 = gpu.view(torch.float32), mod.view(torch.float32)
        same = (gpu == mod) | (torch.isnan(g32) & torch.isnan(m32))
        pair = f"{c['a']}x{c['b']}" + (f"/{c['ip']}" if c["ip"] else "")
        rows[c["name"]] = {"pair": pair, "n": same.numel(), "exact": int(same.sum()),
                           "instr": meta["instr"].get(c["name"])}
        print(f"{c['name']:60s} {int(same.sum()):7d}/{same.numel()} {meta['instr'].get(c['name'])}", flush=True)
    return {"meta": {k: meta[k] for k in ("triton", "torch", "device", "errors")}, "rows": rows}


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("capture", "compare"):
        sys.exit(__doc__)
    if sys.argv[1] == "capture":
        capture(Path(sys.argv[2]))
    else:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        print(json.dumps(compare(Path(sys.argv[2]))["meta"], indent=1))
