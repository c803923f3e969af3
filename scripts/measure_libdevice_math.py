#!/usr/bin/env python
"""Measure, on a GPU, how far the interpreter's fp32 ``tl.sin`` / ``tl.cos`` / ``tl.erf`` (NumPy's float32
functions) are from what the compiled kernel computes (libdevice ``__nv_sinf`` / ``__nv_cosf`` / ``__nv_erff``:
software sequences of ``fma.rn.ftz`` and MUFU ``ex2``, sm90 PTX of Triton 3.6 and 3.9). The bound that
:data:`harness.interp.differences.KNOWN_DIFFERENT` states for these rows is this script's output.

Inputs: every fp32 mantissa (erf: every 8th) of a set of binades chosen to cover the functions' regimes (tiny,
where ``sin x = x``; the polynomial range; the reduced range up to 2^20; large arguments), with both signs, plus the
special values (±0, ±inf, NaN, subnormals, ±FLT_MAX). Per function and binade: how many outputs differ and by
how many ulp at most (NaN against NaN counts equal). ``--json PATH`` writes the table.

    python scripts/measure_libdevice_math.py [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np
import torch
import triton
import triton.language as tl

FUNCS = {"sin": 0, "cos": 1, "erf": 2}
BINADES = {"sin": [-40, -20, -12, -6, -2, -1, 0, 1, 2, 3, 5, 8, 12, 20, 40, 100, 127],
           "erf": [-40, -20, -12, -6, -2, -1, 0, 1, 2, 3]}  # erf is +-1 from 2^3 on
BINADES["cos"] = BINADES["sin"]
STRIDE = {"sin": 1, "cos": 1, "erf": 8}  # erf: every 8th mantissa (the interpreter's erf is a Python loop)


@triton.jit
def _k(x_ptr, y_ptr, n, FN: tl.constexpr, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = o < n
    x = tl.load(x_ptr + o, mask=m)
    if FN == 0:
        y = tl.sin(x)
    elif FN == 1:
        y = tl.cos(x)
    else:
        y = tl.math.erf(x)
    tl.store(y_ptr + o, y, mask=m)


def _ordered(bits: np.ndarray) -> np.ndarray:
    b = bits.astype(np.int64)
    return np.where(b < 0, -(b & 0x7FFFFFFF), b)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("measure_libdevice_math: needs a CUDA GPU", file=sys.stderr)
        return 2
    from triton.runtime import interpreter as itp  # the interpreter's own fp32 functions, as it calls them

    ref = {"sin": np.sin, "cos": np.cos, "erf": itp.np_erf_fp32}
    rows = []
    meta = {"device": torch.cuda.get_device_name(), "triton": triton.__version__, "torch": torch.__version__,
            "numpy": np.__version__}
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40, 3.4028235e38, -3.4028235e38],
                       dtype=np.float32)
    for fname, fn in FUNCS.items():
        mant = np.arange(0, 1 << 23, STRIDE[fname], dtype=np.int64)
        for e in BINADES[fname] + ["special"]:
            if e == "special":
                x = special
            else:
                bits = ((e + 127) << 23) | mant
                x = np.concatenate([bits, bits | (1 << 31)]).astype(np.uint32).view(np.float32)
            xd = torch.from_numpy(x.copy()).cuda()
            yd = torch.empty_like(xd)
            _k[(triton.cdiv(x.size, 1024),)](xd, yd, x.size, FN=fn, BLOCK=1024)
            gpu = yd.cpu().numpy()
            with np.errstate(all="ignore"):
                cpu = np.asarray(ref[fname](x), dtype=np.float32)
            both_nan = np.isnan(gpu) & np.isnan(cpu)
            g, c = gpu.view(np.int32), cpu.view(np.int32)
            diff = (g != c) & ~both_nan
            ulp = np.abs(_ordered(g) - _ordered(c))
            ulp[both_nan] = 0
            one_nan = np.isnan(gpu) ^ np.isnan(cpu)
            rows.append({"fn": fname, "binade": e, "n": int(x.size), "differ": int(diff.sum()),
                         "max_ulp": int(ulp[~one_nan].max()) if (~one_nan).any() else 0,
                         "nan_mismatch": int(one_nan.sum())})
            r = rows[-1]
            print(f"{fname:4} 2^{e!s:8} n={r['n']:9d} differ={r['differ']:9d} "
                  f"({100 * r['differ'] / r['n']:5.1f}%) max_ulp={r['max_ulp']} nan_mismatch={r['nan_mismatch']}",
                  flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
