"""Capture what plain Triton ``tl.dot`` kernels compute on a GPU, and compare ``harness.tensor_cores`` with it.

    python scripts/capture_dot_tables.py capture OUTDIR     # on the GPU: writes OUTDIR/dot_tables.npz
    python scripts/capture_dot_tables.py compare NPZ        # anywhere: the model against the captured outputs
    python scripts/capture_dot_tables.py capture OUTDIR --only scaled [--jobs 8]
                                                            # tl.dot_scaled only: OUTDIR/dot_scaled_tables.npz

``tl.dot_scaled`` cases (``SCALED_CASES``) and their inputs (``scaled_inputs``) are defined in
``tests/harness/tensor_cores/dot_scaled_cases.py``, beside the test of their goldens (one definition for the
capture, ``scripts/import_dot_scaled_tables.py`` and the test): every operand-format pair (e2m1, e4m3, e5m2, bf16,
fp16 on either side) with e8m0 scales, a 128x128 output over K = 256 in two ``BK = 128`` steps, plus e2m1 packed
along M/N, ``fast_math`` and unscaled operands. ``--jobs`` compiles and runs them in that many processes (one
GPU). ``compare`` on such a file runs :func:`harness.tensor_cores.dot_scaled` for the Triton version that captured
it.

Every case (:data:`CASES`) is one plain kernel: a ``BM x BN`` tile per program, a loop over K in steps of
``BK`` with ``acc = tl.dot(a, b, acc, input_precision=..., max_num_imprecise_acc=...)``, starting from a loaded
accumulator or from zeros. The inputs are regenerated from the case's seed (:func:`inputs`: random normal,
wide-exponent bit patterns, and specials: zeros, subnormals, extremes, inf/NaN); only the outputs are stored
(fp32 bit patterns, compressed), with the instruction lines of each kernel's PTX (``wgmma.*`` / ``mma.sync.*``)
and the versions. ``capture`` imports nothing from the harness (only the case module above, which needs torch and
numpy), so it runs where the repo's dependencies are absent; ``compare`` uses :func:`harness.tensor_cores.dot`, one
call per ``BK`` step, as the interpreter shim does.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import torch

# the dot_scaled cases and their inputs live beside their test (one definition; see its docstring)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "harness" / "tensor_cores"))
from dot_scaled_cases import FP8, PACK, SCALED_CASES, k_step, scaled_inputs, specials  # noqa: E402

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
            sp = specials(dt)
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


# --- tl.dot_scaled (capture on the GPU, compare anywhere) ------------------------------------------------------

def _scaled_kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def dot_scaled_kernel(a_ptr, as_ptr, b_ptr, bs_ptr, c_ptr, o_ptr, K, N: tl.constexpr, BM: tl.constexpr,
                          BN: tl.constexpr, BK: tl.constexpr, FA: tl.constexpr, FB: tl.constexpr, PA: tl.constexpr,
                          PB: tl.constexpr, KPA: tl.constexpr, KPB: tl.constexpr, SA: tl.constexpr,
                          SB: tl.constexpr, HAS_ACC: tl.constexpr, FAST: tl.constexpr):
        pm = tl.program_id(0)
        pn = tl.program_id(1)
        rm = pm * BM + tl.arange(0, BM)
        rn = pn * BN + tl.arange(0, BN)
        rs = tl.arange(0, BK // 32)
        if HAS_ACC:
            acc = tl.load(c_ptr + rm[:, None] * N + rn[None, :])
        else:
            acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k0 in range(0, K, BK):
            if KPA:
                a = tl.load(a_ptr + rm[:, None] * (K // PA) + (k0 // PA + tl.arange(0, BK // PA))[None, :])
            else:
                ra = pm * (BM // PA) + tl.arange(0, BM // PA)
                a = tl.load(a_ptr + ra[:, None] * K + (k0 + tl.arange(0, BK))[None, :])
            if KPB:
                b = tl.load(b_ptr + (k0 // PB + tl.arange(0, BK // PB))[:, None] * N + rn[None, :])
            else:
                rb = pn * (BN // PB) + tl.arange(0, BN // PB)
                b = tl.load(b_ptr + (k0 + tl.arange(0, BK))[:, None] * (N // PB) + rb[None, :])
            if SA:
                sa = tl.load(as_ptr + rm[:, None] * (K // 32) + (k0 // 32 + rs)[None, :])
            else:
                sa = None
            if SB:
                sb = tl.load(bs_ptr + rn[:, None] * (K // 32) + (k0 // 32 + rs)[None, :])
            else:
                sb = None
            acc = tl.dot_scaled(a, sa, FA, b, sb, FB, acc, fast_math=FAST, lhs_k_pack=KPA, rhs_k_pack=KPB)
        tl.store(o_ptr + rm[:, None] * N + rn[None, :], acc)

    return dot_scaled_kernel


def _capture_scaled_part(cases: list[dict]) -> tuple[dict, dict, dict]:
    """Run ``cases`` on GPU 0: (outputs as int32 arrays, instruction lines, errors)."""
    kern = _scaled_kernel()
    arrays, instr, errors = {}, {}, {}
    for c in cases:
        a, sa, b, sb, acc = scaled_inputs(c)
        dev = "cuda"
        dummy = torch.zeros(1, dtype=torch.uint8, device=dev)
        o = torch.empty((c["M"], c["N"]), dtype=torch.float32, device=dev)
        try:
            h = kern[(c["M"] // c["BM"], c["N"] // c["BN"])](
                a.to(dev), dummy if sa is None else sa.to(dev), b.to(dev), dummy if sb is None else sb.to(dev),
                torch.zeros(1, device=dev) if acc is None else acc.to(dev), o, c["K"], N=c["N"], BM=c["BM"],
                BN=c["BN"], BK=c["BK"], FA=c["a"], FB=c["b"], PA=PACK.get(c["a"], 1), PB=PACK.get(c["b"], 1),
                KPA=c["kpa"], KPB=c["kpb"], SA=c["sa"], SB=c["sb"], HAS_ACC=c["acc"], FAST=c["fast"],
                num_warps=c["warps"])
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 - a refused case is a result too
            errors[c["name"]] = f"{type(e).__name__}: {str(e)[:500]}"
            print("ERR", c["name"], errors[c["name"]][:200], flush=True)
            continue
        ptx = h.asm.get("ptx", "")
        instr[c["name"]] = sorted({m.group(0) for m in re.finditer(r"(wgmma\.mma_async[\w.]*|mma\.sync[\w.]*)", ptx)})
        arrays[c["name"]] = o.cpu().view(torch.int32).numpy()
        print("ok", c["name"], instr[c["name"]], flush=True)
    return arrays, instr, errors


def capture_scaled(outdir: Path, jobs: int = 1) -> None:
    """The dot_scaled cases on the GPU, in ``jobs`` processes (compiles dominate): OUTDIR/dot_scaled_tables.npz."""
    import triton

    outdir.mkdir(parents=True, exist_ok=True)
    meta = {"kind": "dot_scaled", "triton": triton.__version__, "torch": torch.__version__,
            "device": torch.cuda.get_device_name(0), "cases": [], "instr": {}, "errors": {}}
    groups: dict[tuple, list[dict]] = {}  # one compile per group: keep each in one process
    for c in SCALED_CASES:
        groups.setdefault(tuple(c[k] for k in ("a", "b", "acc", "kpa", "kpb", "fast", "sa", "sb")), []).append(c)
    parts: list[list[dict]] = [[] for _ in range(jobs)]
    for i, g in enumerate(groups.values()):
        parts[i % jobs].extend(g)
    if jobs == 1:
        results = [_capture_scaled_part(parts[0])]
    else:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(jobs, mp_context=mp.get_context("spawn")) as ex:
            results = list(ex.map(_capture_scaled_part, parts))
    arrays = {}
    for arr, instr, errors in results:
        arrays.update(arr)
        meta["instr"].update(instr)
        meta["errors"].update(errors)
    meta["cases"] = [c for c in SCALED_CASES if c["name"] in arrays]
    np.savez_compressed(outdir / "dot_scaled_tables.npz", meta=np.array(json.dumps(meta)), **arrays)
    print("saved", len(arrays), "dot_scaled cases;", len(meta["errors"]), "refused", flush=True)


def model_scaled_case(c: dict, triton_version: str, arch: str = "sm90") -> torch.Tensor:
    """What harness.tensor_cores.dot_scaled says the case's kernel computes: one call per BK step, per tile row
    and column block as the kernel slices them."""
    from harness.tensor_cores import dot_scaled

    inputs = scaled_inputs(c)
    acc = inputs[4]
    out = torch.zeros((c["M"], c["N"]), dtype=torch.float32) if acc is None else acc.clone()
    for k0 in range(0, c["K"], c["BK"]):
        a_k, s_a, b_k, s_b = k_step(c, inputs, k0)
        out = dot_scaled(a_k, s_a, c["a"], b_k, s_b, c["b"], out, arch=arch, fast_math=c["fast"],
                         a_k_pack=c["kpa"], b_k_pack=c["kpb"], triton=triton_version)
    return out


def compare_scaled(npz: Path) -> dict:
    z = np.load(npz)
    meta = json.loads(str(z["meta"]))
    rows = {}
    for c in meta["cases"]:
        gpu = torch.from_numpy(z[c["name"]])
        try:
            mod = model_scaled_case(c, meta["triton"]).view(torch.int32)
        except NotImplementedError as e:
            rows[c["name"]] = {"error": str(e)}
            print(f"{c['name']:60s} model: {e}", flush=True)
            continue
        g32, m32 = gpu.view(torch.float32), mod.view(torch.float32)
        same = (gpu == mod) | (torch.isnan(g32) & torch.isnan(m32))
        rows[c["name"]] = {"pair": f"{c['a']}x{c['b']}", "n": same.numel(), "exact": int(same.sum()),
                           "nan_gpu": int(torch.isnan(g32).sum()), "nan_model": int(torch.isnan(m32).sum()),
                           "instr": meta["instr"].get(c["name"])}
        print(f"{c['name']:60s} {int(same.sum()):6d}/{same.numel()}  NaN gpu {rows[c['name']]['nan_gpu']:5d} "
              f"model {rows[c['name']]['nan_model']:5d}", flush=True)
    for name, err in meta["errors"].items():
        rows[name] = {"refused": err}
        print(f"{name:60s} refused on the GPU: {err[:120]}", flush=True)
    return {"meta": {k: meta[k] for k in ("triton", "torch", "device", "errors")}, "rows": rows}


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("cmd", choices=("capture", "compare"))
    ap.add_argument("path", type=Path)
    ap.add_argument("--only", choices=("dot", "scaled"), default=None,
                    help="capture: only the tl.dot cases or only the tl.dot_scaled cases (default: both)")
    ap.add_argument("--jobs", type=int, default=1, help="capture: processes for the dot_scaled cases")
    args = ap.parse_args()
    if args.cmd == "capture":
        if args.only != "scaled":
            capture(args.path)
        if args.only != "dot":
            capture_scaled(args.path, max(1, args.jobs))
    else:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        kind = json.loads(str(np.load(args.path)["meta"])).get("kind")
        out = compare_scaled(args.path) if kind == "dot_scaled" else compare(args.path)
        print(json.dumps(out["meta"], indent=1))
