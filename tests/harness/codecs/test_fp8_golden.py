"""FP8 cast and decode tables: what the H200's Triton casts produce, pinned as goldens.

On a GPU lane the codes come from a real ``@triton.jit`` cast; on the interpreter lane they come from the
codec's hardware model, ``encode(..., arch="sm90")`` / ``decode``. Either way they must equal the H200 golden
bit for bit (an explicit exact tolerance: this is the claim that the codec models the hardware, not a
closeness).
"""

import pytest
import torch

from harness.fp8 import decode, encode, get_format
from harness.tolerances import Tolerance

EXACT = Tolerance(max_ulp=0, key="fp8_table/exact", note="encode() claims bit-exactness with the H200")

SRCS = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}
CASES = [(s, f) for s in SRCS for f in ("e4nv", "e5m2", "e4b15")]
FP32_RANDOM = 1 << 15


def _inputs(src: str, rng: torch.Generator) -> torch.Tensor:
    if src != "fp32":
        return torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(SRCS[src])
    # every grid midpoint of both e4m3 scalings and e5m2, with its fp32 neighbours (the tie cases), plus
    # random bit patterns and magnitudes spread over all FP8 ranges
    mids = []
    for scale in (1.0, 1.0 / 256.0):
        for dt in (torch.float8_e4m3fn, torch.float8_e5m2):
            g = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(dt).float()
            g = g[torch.isfinite(g)].unique().sort().values * scale
            mids.append((g[1:] + g[:-1]) / 2)
    b = torch.cat(mids).view(torch.int32)
    near = torch.cat([(b + d).view(torch.float32) for d in (-1, 0, 1)])
    rnd = torch.randint(-(2**31), 2**31 - 1, (FP32_RANDOM,), generator=rng, dtype=torch.int64)
    spread = (torch.rand(FP32_RANDOM, generator=rng) + 1) * torch.exp2(
        torch.randint(-24, 18, (FP32_RANDOM,), generator=rng).float())
    return torch.cat([near, -near, spread, -spread, rnd.to(torch.int32).view(torch.float32)])


def _gpu_cast(x: torch.Tensor, fmt: str) -> torch.Tensor:
    import triton
    import triton.language as tl

    @triton.jit
    def cast(x_ptr, y_ptr, n, DST: tl.constexpr, BLOCK: tl.constexpr):
        off = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = off < n
        v = tl.load(x_ptr + off, mask=m)
        if v.dtype == tl.bfloat16:
            v = v.to(tl.float32)  # bf16 -> e4b15 directly does not compile (seed bug 1)
        tl.store(y_ptr + off, v.to(DST).to(tl.uint8, bitcast=True), mask=m)

    xd = x.cuda()
    y = torch.empty(x.numel(), dtype=torch.uint8, device="cuda")
    cast[(triton.cdiv(x.numel(), 1024),)](xd, y, x.numel(), getattr(tl, get_format(fmt).triton_name), BLOCK=1024)
    return y.cpu()


@pytest.mark.harness_op("fp8_cast")
@pytest.mark.parametrize("src, fmt", CASES, ids=[f"{s}-{f}" for s, f in CASES])
def test_cast_table_matches_h200(src, fmt, rng, harness_arch, golden):
    x = _inputs(src, rng)
    if harness_arch.kind == "cuda":
        codes = _gpu_cast(x, fmt)
    else:
        codes = encode(x, fmt, arch="sm90", via=torch.float32 if src == "bf16" and fmt == "e4b15" else None)
    golden.check("codes", codes, fmt=fmt, tol=EXACT, equal_nan=True)  # NaN inputs cast to NaN codes


def _gpu_decode(fmt: str) -> torch.Tensor:
    import triton
    import triton.language as tl

    @triton.jit
    def dec(c_ptr, y_ptr, SRC: tl.constexpr):
        off = tl.arange(0, 256)
        tl.store(y_ptr + off, tl.load(c_ptr + off).to(SRC, bitcast=True).to(tl.float32))

    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8).cuda()
    y = torch.empty(256, dtype=torch.float32, device="cuda")
    dec[(1,)](codes, y, getattr(tl, get_format(fmt).triton_name))
    return y.cpu()


@pytest.mark.harness_op("fp8_decode")
@pytest.mark.parametrize("fmt", ["e4nv", "e5m2", "e4b15"])
def test_decode_table_matches_h200(fmt, harness_arch, golden):
    """All 256 codes to fp32, compared as bits (-0.0 and ±inf included). NaN payloads are not part of the
    claim, NaN positions are: every NaN is stored as the canonical 0x7fc00000."""
    if harness_arch.kind == "cuda":
        values = _gpu_decode(fmt)
    else:
        values = decode(torch.arange(256, dtype=torch.int32).to(torch.uint8), fmt)
    bits = torch.where(torch.isnan(values), torch.tensor(0x7FC00000, dtype=torch.int32), values.view(torch.int32))
    golden.check("fp32_bits", bits)
