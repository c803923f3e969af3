"""How far the Triton interpreter's FP8 casts are from the hardware's (sm90), on in-range finite inputs.

Runs a real ``x.to(<fp8>)`` kernel under ``TRITON_INTERPRET=1`` over every finite fp16/bf16 input with
|x| <= the format's saturation value, plus a deterministic fp32 sample (every FP8 grid midpoint, its fp32
neighbours, and a spread of random values), and compares the codes with ``harness.fp8.encode(arch="sm90")``.
Out-of-range inputs are left out on purpose: there the interpreter does not saturate at all (NaN codes), which
no tolerance can describe. Prints, per (source, format): mismatches, max ULP, max |decoded diff| of the
mismatching elements, and the smallest floor such that every element passes the mixed rule
(ULP <= 1, or |diff| <= floor with the same sign). It also checks that ``encode(arch="interp")`` reproduces
the kernel bit for bit.

    TRITON_INTERPRET=1 python scripts/measure_interp_fp8.py [--gpu-exact]

``--gpu-exact`` measures the interpreter with the plugin's GPU-exact casts installed
(``harness.interp.casts.install("sm90")``): every mismatch count must then be 0.
"""

from __future__ import annotations

import os
import sys

os.environ["TRITON_INTERPRET"] = "1"  # read when kernels are decorated: before importing triton

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from harness import fp8  # noqa: E402
from harness.cast_probe import fp8_cast  # noqa: E402

FORMATS = ("e4nv", "e5m2", "e4b15")
SEED = 20261203


def interp_cast(x: torch.Tensor, f: fp8.FP8Format, via_fp32: bool) -> torch.Tensor:
    y = torch.empty(x.numel(), dtype=torch.uint8)
    block = 1 << 16
    fp8_cast[(triton.cdiv(x.numel(), block),)](
        x, y, x.numel(), getattr(tl, f.triton_name), via_fp32, BLOCK=block
    )
    return y


def fp32_sample() -> torch.Tensor:
    g = torch.Generator().manual_seed(SEED)
    parts = []
    for dt, scale in ((torch.float8_e4m3fn, 1.0), (torch.float8_e5m2, 1.0), (torch.float8_e4m3fn, 1 / 256)):
        grid = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(dt).float()
        grid = grid[torch.isfinite(grid)].unique().sort().values * scale
        mid = ((grid[1:].double() + grid[:-1].double()) / 2).float()  # exact: midpoints are fp32 values
        bits = mid.view(torch.int32)
        parts += [(bits + d).view(torch.float32) for d in (-1, 0, 1)]
    expo = torch.randint(-26, 17, (1 << 18,), generator=g).float()
    mant = torch.rand(1 << 18, generator=g) + 1.0
    parts.append(mant * torch.exp2(expo))
    x = torch.cat(parts)
    return torch.cat([x, -x])


def sources() -> list[tuple[str, torch.Tensor, bool]]:
    bits = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16)
    h, b = bits.view(torch.float16), bits.view(torch.bfloat16)
    return [
        ("fp16", h, False),
        ("bf16", b, False),
        ("fp32", fp32_sample(), False),
        ("fp16 via fp32", h, True),
        ("bf16 via fp32", b, True),
    ]


def measure(x: torch.Tensor, f: fp8.FP8Format, via: bool) -> dict[str, object]:
    keep = torch.isfinite(x) & (x.float().abs() <= f.sat_max)
    x = x[keep].contiguous()
    got = interp_cast(x, f, via)
    model = fp8.encode(x, f, arch="interp", via=torch.float32 if via else None)
    hw = fp8.encode(x, f, arch="sm90", via=torch.float32 if via else None)
    ulp = fp8.ulp_distance(got, hw, f)
    bad = got != hw
    va, vh = fp8.decode(got, f).double(), fp8.decode(hw, f).double()
    diff = (va - vh).abs()
    far = ulp > 1
    opposite = far & ((va * vh) < 0)
    nonfinite = far & ~torch.isfinite(diff)
    if bool(opposite.any() | nonfinite.any()):
        floor = "none (sign flip or NaN)"
    else:
        floor = f"{float(diff[far].max()):.6g}" if bool(far.any()) else "0"
    return {
        "n": x.numel(),
        "mismatch": int(bad.sum()),
        "max_ulp": int(ulp.max()) if x.numel() else 0,
        "max_abs": float(diff[bad].max()) if bool(bad.any()) else 0.0,
        "floor": floor,
        "model_exact": bool(torch.equal(got, model)),
    }


def main() -> int:
    exact = "--gpu-exact" in sys.argv[1:]
    if exact:
        from harness.interp import casts as interp_casts

        if interp_casts.install("sm90") is None:
            print("this Triton's interpreter is not understood by harness.interp.casts")
            return 2
    print(
        f"triton {triton.__version__}, torch {torch.__version__}: interpreter cast vs encode(arch='sm90'), "
        f"finite |x| <= sat_max"
    )
    head = (
        f"{'source':<14} {'fmt':<6} {'n':>8} {'mismatch':>9} {'max ulp':>8} {'max |diff|':>11} "
        f"{'mixed floor':>24}  interp model exact"
    )
    print(head)
    print("-" * len(head))
    ok = True
    for sname, x, via in sources():
        for name in FORMATS:
            if exact and x.dtype == torch.bfloat16 and name == "e4b15" and not via:
                print(f"{sname:<14} {name:<6} refused (as by the compiler: bf16 -> e4b15 needs fp32 first)")
                continue
            r = measure(x, fp8.get_format(name), via)
            ok &= bool(r["model_exact"]) and (not exact or r["mismatch"] == 0)
            print(
                f"{sname:<14} {name:<6} {r['n']:>8} {r['mismatch']:>9} {r['max_ulp']:>8} "
                f"{r['max_abs']:>11.4g} "
                f"{r['floor']:>24}  {r['model_exact']}"
            )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
