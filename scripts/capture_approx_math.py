"""Measure on a GPU what Triton's approximate fp32 math computes, and check harness.interp.approx_math on it.

1. Tables: ``1.0 / y`` over every mantissa of [1, 2) (div.full.f32 with no scaling there: MUFU.RCP itself),
   ``tl.sqrt`` and ``tl.math.rsqrt`` over [1, 4), ``tl.exp2`` over [0, 1) in steps of 2^-23; stored as int8
   ulp differences from the correctly rounded result (``approx_math_tables.npz``, the module's data file).
2. Validation: the model (with those tables) against the kernels on all 2^32 fp32 inputs for ``1.0 / y``,
   ``tl.sqrt``, ``tl.math.rsqrt``, ``tl.exp2``, ``tl.exp``, ``tl.log2``, ``tl.log``; and ``x / y`` on 3 x 2^24
   random pairs plus every pair of an edge set (each exponent field x 8 mantissas x 2 signs); ``div_rn`` and
   ``sqrt_rn`` against IEEE. Counts and up to 4096 mismatches per op go to ``report.json`` / ``mismatch.npz``.

    python scripts/capture_approx_math.py OUTDIR

The kernels are Triton only (the same source lines a user writes); the model is imported for step 2 only.
"""

from __future__ import annotations

import json
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness.interp import approx_math as am  # noqa: E402

OPS = {"rcp": 0, "sqrt": 1, "rsqrt": 2, "exp": 3, "exp2": 4, "log2": 5, "log": 6, "div_rn1": 7, "sqrt_rn": 8}
BLOCK = 1024
CHUNK = 1 << 26
SEED = 20261204


@triton.jit
def k_div(x_ptr, y_ptr, z_ptr, n, BLOCK: tl.constexpr):
    off = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = off < n
    tl.store(z_ptr + off, tl.load(x_ptr + off, mask=m) / tl.load(y_ptr + off, mask=m), mask=m)


@triton.jit
def k_div_rn(x_ptr, y_ptr, z_ptr, n, BLOCK: tl.constexpr):
    off = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = off < n
    tl.store(z_ptr + off, tl.math.div_rn(tl.load(x_ptr + off, mask=m), tl.load(y_ptr + off, mask=m)), mask=m)


@triton.jit
def k_un(x_ptr, z_ptr, n, OP: tl.constexpr, BLOCK: tl.constexpr):
    off = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = off < n
    x = tl.load(x_ptr + off, mask=m)
    if OP == 0:
        r = 1.0 / x
    elif OP == 1:
        r = tl.sqrt(x)
    elif OP == 2:
        r = tl.math.rsqrt(x)
    elif OP == 3:
        r = tl.exp(x)
    elif OP == 4:
        r = tl.exp2(x)
    elif OP == 5:
        r = tl.log2(x)
    elif OP == 6:
        r = tl.log(x)
    elif OP == 7:
        r = tl.math.div_rn(1.0, x)
    else:
        r = tl.math.sqrt_rn(x)
    tl.store(z_ptr + off, r, mask=m)


def run_un(op: str, x: torch.Tensor) -> torch.Tensor:
    z = torch.empty_like(x)
    k_un[(triton.cdiv(x.numel(), BLOCK),)](x, z, x.numel(), OP=OPS[op], BLOCK=BLOCK)
    return z


def run_div(x: torch.Tensor, y: torch.Tensor, rn: bool = False) -> torch.Tensor:
    z = torch.empty_like(x)
    (k_div_rn if rn else k_div)[(triton.cdiv(x.numel(), BLOCK),)](x, y, z, x.numel(), BLOCK=BLOCK)
    return z


def differ(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a.view(torch.int32) != b.view(torch.int32)) & ~(torch.isnan(a) & torch.isnan(b))


def ulps(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Signed ulp distance on the monotone integer line of fp32."""
    def key(t):
        i = t.view(torch.int32).long()
        return torch.where(i < 0, -(i & 0x7FFFFFFF), i)
    return key(a) - key(b)


class Book:
    def __init__(self, out: Path):
        self.out = out
        self.report: dict = {}
        self.samples: dict[str, list[np.ndarray]] = {}

    def save(self) -> None:
        (self.out / "report.json").write_text(json.dumps(self.report, indent=1) + "\n")
        samples = {k: np.concatenate(v, axis=1) for k, v in self.samples.items()}
        np.savez_compressed(self.out / "mismatch.npz", **samples)

    def add(self, op: str, bad: torch.Tensor, *cols: torch.Tensor, n: int) -> None:
        r = self.report.setdefault(op, {"n": 0, "mismatch": 0})
        r["n"] += n
        k = int(bad.sum())
        r["mismatch"] += k
        have = sum(len(a[0]) for a in self.samples.get(op, [])) if op in self.samples else 0
        if k and have < 4096:
            idx = bad.nonzero().flatten()[: 4096 - have]
            self.samples.setdefault(op, []).append(np.stack([c[idx].view(torch.int32).cpu().numpy() for c in cols]))


def tables(out: Path, report: dict) -> Path:
    dev = "cuda"
    arrays: dict[str, np.ndarray] = {}
    meta: dict = {"checksums": {}, "stats": {}}
    for name, op in (("rcp", "rcp"), ("sqrt", "sqrt"), ("rsqrt", "rsqrt"), ("ex2", "exp2")):
        x64 = am.reference_inputs(name)
        hw = run_un(op, x64.float().to(dev)).cpu()
        ref = am.reference(name, x64)
        d = hw.view(torch.int32).long() - ref.view(torch.int32).long()
        meta.setdefault("max_abs_diff", {})[name] = int(d.abs().max())  # must be < 128 to fit
        arrays[name] = d.clamp(-128, 127).to(torch.int8).numpy()
        meta["checksums"][name] = am.values_checksum(hw.view(torch.int32))
        hist = {int(v): int(c) for v, c in zip(*np.unique(arrays[name], return_counts=True), strict=True)}
        meta["stats"][name] = {"n": int(d.numel()), "ulp_hist": hist}
    meta.update(source="scripts/capture_approx_math.py", date=time.strftime("%Y-%m-%d"),
                device=torch.cuda.get_device_name(), capability=list(torch.cuda.get_device_capability()),
                triton=triton.__version__, torch=torch.__version__, host=platform.node(),
                diff="int8: table value bits minus approx_math.reference() bits (fp64 math, one rounding to fp32)")
    report["tables"] = meta
    path = out / "approx_math_tables.npz"
    np.savez_compressed(path, meta=np.array(json.dumps(meta)), **arrays)
    return path


MODELS = {
    "rcp": lambda x: am.div_full(torch.ones_like(x), x), "sqrt": am.sqrt_approx, "rsqrt": am.rsqrt_approx,
    "exp": am.exp_approx, "exp2": am.ex2_approx, "log2": am.log2_libdevice, "log": am.log_libdevice,
}


def exhaustive(book: Book) -> None:
    for op, model in MODELS.items():
        t0 = time.time()
        alt = 0
        for start in range(-(2**31), 2**31, CHUNK):
            x = torch.arange(start, start + CHUNK, dtype=torch.int64, device="cuda").to(torch.int32).view(torch.float32)
            hw, mo = run_un(op, x), model(x)
            book.add(op, differ(hw, mo), x, hw, mo, n=x.numel())
            if op == "exp2":
                alt += int(differ(hw, am.ex2_approx(x, _quantize=torch.floor)).sum())
            del x, hw, mo
        book.report[op]["seconds"] = round(time.time() - t0, 1)
        if op == "exp2":
            book.report[op]["mismatch_if_floor"] = alt
        print(op, book.report[op], flush=True)
        book.save()
    # correctly rounded references on their own (IEEE ops: exact on every lane)
    for op, ref in (("div_rn1", lambda x: 1.0 / x), ("sqrt_rn", torch.sqrt)):
        bad = 0
        for start in range(-(2**31), 2**31, CHUNK):
            x = torch.arange(start, start + CHUNK, dtype=torch.int64, device="cuda").to(torch.int32).view(torch.float32)
            bad += int(differ(run_un(op, x), ref(x)).sum())
        book.report[op] = {"n": 2**32, "mismatch_vs_torch_ieee": bad}
        print(op, book.report[op], flush=True)


def ex2_dense(out: Path) -> None:
    """int8 (hw - model) ulps of tl.exp2 on every fp32 of a few binades: the evidence for the fixed-point
    quantization, kept whatever the model says."""
    arrs = {}
    for name, lo in (("p_half", 0.5), ("n_half", -0.5), ("p_2m12", 2.0**-12), ("n_2m12", -(2.0**-12)), ("p_one", 1.0)):
        b0 = torch.tensor([lo], dtype=torch.float32).view(torch.int32).item()
        bits = torch.arange(b0, b0 + (1 << 23), dtype=torch.int64, device="cuda").to(torch.int32)
        x = bits.view(torch.float32)
        arrs[name] = ulps(run_un("exp2", x), am.ex2_approx(x)).clamp(-127, 127).to(torch.int8).cpu().numpy()
    np.savez_compressed(out / "ex2_dense.npz", **arrs)


def edge_values() -> torch.Tensor:
    g = torch.Generator().manual_seed(SEED)
    mants = [0, 1, 2, 0x400000, 0x7FFFFE, 0x7FFFFF] + torch.randint(0, 1 << 23, (2,), generator=g).tolist()
    vals = [(s << 31) | (e << 23) | m for s in (0, 1) for e in range(256) for m in mants]
    return torch.tensor(vals, dtype=torch.int64).to(torch.int32).view(torch.float32)


def division(book: Book) -> None:
    g = torch.Generator().manual_seed(SEED)
    n = 1 << 24
    def rnd():
        return torch.randint(-(2**31), 2**31, (n,), generator=g, dtype=torch.int64).to(torch.int32).view(torch.float32)

    spread = lambda: torch.randn(n, generator=g) * torch.exp2(torch.randint(-40, 41, (n,), generator=g).float())  # noqa: E731
    # quant-like: |x| <= amax, y = amax / 448 (what per-group FP8 quant divides)
    amax = torch.rand(n, generator=g) * torch.exp2(torch.randint(-30, 31, (n,), generator=g).float())
    qx = (torch.rand(n, generator=g) * 2 - 1) * amax
    qy = am.div_full(amax, torch.full_like(amax, 448.0))
    e = edge_values()
    ex, ey = e.repeat_interleave(e.numel()), e.repeat(e.numel())
    cases = {"div_random_bits": (rnd(), rnd()), "div_spread": (spread(), spread()), "div_quant": (qx, qy),
             "div_edges": (ex, ey)}
    stats = {}
    for op, (x, y) in cases.items():
        x, y = x.cuda(), y.cuda()
        hw, mo = run_div(x, y), am.div_full(x, y)
        book.add("div", differ(hw, mo), x, y, hw, mo, n=x.numel())
        book.report.setdefault("div_parts", {})[op] = int(differ(hw, mo).sum())
        rn = run_div(x, y, rn=True)
        book.report.setdefault("div_rn_vs_ieee", {})[op] = int(differ(rn, x / y).sum())
        fin = torch.isfinite(rn) & torch.isfinite(hw) & (rn.abs() >= 2.0**-126)
        u = ulps(hw, rn)[fin].abs()
        stats[op] = {"finite_normal": int(fin.sum()), "not_cr": int((u > 0).sum()),
                     "ulp_hist": {int(k): int(v) for k, v in zip(*torch.unique(u, return_counts=True), strict=True)}}
    book.report["div_vs_div_rn"] = stats
    print("div", book.report["div"], book.report["div_parts"], stats, flush=True)


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    book = Book(out)
    t0 = time.time()
    am.use_tables(tables(out, book.report))
    print("tables", round(time.time() - t0, 1), json.dumps(book.report["tables"]["stats"]), flush=True)
    book.save()
    division(book)
    book.save()
    ex2_dense(out)
    exhaustive(book)
    book.report["seconds"] = round(time.time() - t0, 1)
    book.save()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
