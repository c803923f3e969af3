"""quantize_fp4's element rules, run on the interpreter over every case they can meet, against harness.mx: the
MXFP4 code by one add (every bf16 value, every fp32 exponent beside each rounding boundary, every e8m0 scale) and
the NVFP4 block scale by one add and its value from bits, the NVFP4 thresholds built from fp64 bits (every ue4m3
scale code, global scales across the range they serve).
These are the kernel's own jit helpers, so a wrong rule fails here on any input, not only on the ones the
end-to-end tests happen to draw."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from harness.mx.formats import decode, encode
from kernels.mx.quantize import _e2m1_pow2_code, _nvfp4_thresholds, _ue4m3_code, _ue4m3_value64

pytestmark = [pytest.mark.harness_op("mx.quantize"), pytest.mark.lane_independent]

#: Elements a program: each kernel here is launched over 10^5-10^7 elements on the interpreter, where a bigger
#: program costs less Python a launch, while launch capture compiles it through ptxas for seven targets, where a
#: bigger program costs more: 1 << 16 took 36-153 s a kernel cold (the fp64 threshold kernel the most), 1 << 12 a
#: few seconds. The fp64 kernels run on few elements and take the small program; the e2m1 code kernel, on millions,
#: the middle one.
_CHUNK = 1 << 14
_FP64_CHUNK = 1 << 12


@triton.jit
def _pow2_code_kernel(x_ptr, e_ptr, out_ptr, N: tl.constexpr):
    i = tl.program_id(0) * N + tl.arange(0, N)
    x = tl.load(x_ptr + i)
    e = tl.load(e_ptr + i)
    xb = x.to(tl.int32, bitcast=True)
    inv = ((127 - e) << 23).to(tl.float32, bitcast=True)
    kc = 0x4A800000 - 0x3F800000 - (e << 23)
    tl.store(out_ptr + i, _e2m1_pow2_code(x, xb, inv, kc))


@triton.jit
def _ue4m3_kernel(q_ptr, code_ptr, value_ptr, N: tl.constexpr):
    i = tl.program_id(0) * N + tl.arange(0, N)
    code = _ue4m3_code(tl.load(q_ptr + i))
    tl.store(code_ptr + i, code)
    tl.store(value_ptr + i, _ue4m3_value64(tl.minimum(code, 0x7E)))


@triton.jit
def _thresholds_kernel(v_ptr, g_ptr, out_ptr, N: tl.constexpr):
    i = tl.program_id(0) * N + tl.arange(0, N)
    u0, u1, u2, u3, u4, u5, u6 = _nvfp4_thresholds(tl.load(v_ptr + i), tl.load(g_ptr + i))
    tl.store(out_ptr + i * 7, u0)
    tl.store(out_ptr + i * 7 + 1, u1)
    tl.store(out_ptr + i * 7 + 2, u2)
    tl.store(out_ptr + i * 7 + 3, u3)
    tl.store(out_ptr + i * 7 + 4, u4)
    tl.store(out_ptr + i * 7 + 5, u5)
    tl.store(out_ptr + i * 7 + 6, u6)


def _padded(t: torch.Tensor, fill, chunk: int = _CHUNK) -> torch.Tensor:
    return torch.cat((t, t.new_full((-t.numel() % chunk,), fill)))


def _pow2_codes(x: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
    n = x.numel()
    xp, ep = _padded(x, 0.0), _padded(e, 0)
    out = torch.empty_like(ep)
    _pow2_code_kernel[(xp.numel() // _CHUNK,)](xp, ep, out, N=_CHUNK)
    return out[:n]


def _reachable(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Every (x, E) with E in e8m0's finite range [-127, 126] and |x| * 2^-E < 16: each scale rule makes a block's
    amax * 2^-E < 8, so this holds every element the kernel codes (finite blocks; others get the NaN scale)."""
    e = torch.arange(-127, 127, dtype=torch.int32)
    xs, es = torch.broadcast_tensors(x[:, None], e[None, :])
    keep = torch.ldexp(xs.double().abs(), -es.double()) < 16
    return xs[keep].contiguous(), es[keep].contiguous()


def _want_pow2(x: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
    # harness.mx.quantize_mx's element step: x / 2^E in fp64 (exact), e2m1 RNE saturating; the magnitude bits
    return encode(torch.ldexp(x.double().abs(), -e.double()), "e2m1").int() & 7


def test_pow2_code_on_every_bf16_and_every_scale():
    bits = torch.arange(0, 0x7F80, dtype=torch.int32).to(torch.int16)  # every finite non-negative bf16
    x = bits.view(torch.bfloat16).float()
    x = torch.cat((x, -x))
    xs, es = _reachable(x)
    got, want = _pow2_codes(xs, es), _want_pow2(xs, es)
    bad = (got != want).nonzero()
    assert bad.numel() == 0, (f"{bad.numel()} of {xs.numel()} codes differ; first: x={xs[bad[0]].item()!r} "
                              f"E={es[bad[0]].item()} got {got[bad[0]].item()} want {want[bad[0]].item()}")


def test_pow2_code_on_fp32_beside_every_boundary():
    """Every fp32 exponent with the mantissas that decide e2m1 rounding: 0, the half-step ties (1 << 21 and
    3 << 21 of the top two bits), one ulp either side of each, the binade's end; and random ones."""
    edges = [0, 1, 2, (1 << 21) - 1, 1 << 21, (1 << 21) + 1, (1 << 22) - 1, 1 << 22, (1 << 22) + 1,
             (3 << 21) - 1, 3 << 21, (3 << 21) + 1, (1 << 23) - 2, (1 << 23) - 1]
    rand = torch.randint(0, 1 << 23, (18,), generator=torch.Generator().manual_seed(5))
    mant = torch.cat((torch.tensor(edges), rand))
    exp = torch.arange(0, 255)
    bits = ((exp[:, None] << 23) | mant[None, :]).flatten().to(torch.int32)
    x = bits.view(torch.float32)
    xs, es = _reachable(torch.cat((x, -x)))
    got, want = _pow2_codes(xs, es), _want_pow2(xs, es)
    bad = (got != want).nonzero()
    assert bad.numel() == 0, (f"{bad.numel()} of {xs.numel()} codes differ; first: x={xs[bad[0]].item()!r} "
                              f"E={es[bad[0]].item()} got {got[bad[0]].item()} want {want[bad[0]].item()}")


def _global_scales() -> torch.Tensor:
    """Global scales across [2^-115, 2^116), the range the bit construction serves: every power of two, its
    neighbours, all-ones mantissas, the range's ends, and random mantissas at random exponents."""
    p = torch.arange(-115, 116, dtype=torch.float64).exp2().float()
    gen = torch.Generator().manual_seed(7)
    rand = (torch.randint(0x06000000, 0x79800000, (400,), generator=gen, dtype=torch.int64)).to(torch.int32)
    top = torch.tensor(0x79800000, dtype=torch.int32).view(torch.float32)  # 2^116
    g = torch.cat((p, p.nextafter(torch.full_like(p, np.inf)), p.nextafter(torch.zeros_like(p)),
                   (p.view(torch.int32) | 0x7FFFFF).view(torch.float32), rand.view(torch.float32),
                   top.nextafter(torch.zeros(())).reshape(1), torch.tensor([1 / 2688, 0.37, 3.0])))
    lo, hi = 2.0**-115, 2.0**116
    return g[(g >= lo) & (g < hi)]


def _want_thresholds(v: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """The fp32 bits u_k with a > u_k exactly when a / (v g) is past midpoint k (a >= for the ties to even at 0.75,
    1.75, 3.5: harness.mx's RNE), from the exact fp64 products: the largest fp32 <= m v g, or < m v g."""
    mids = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], dtype=torch.float64)
    at_least = torch.tensor([False, True, False, True, False, True, False])
    t = v.double()[:, None] * g.double()[:, None] * mids  # exact: 4 + 24 + 3 significant bits
    r = t.float()
    over = torch.where(at_least, r.double() >= t, r.double() > t)
    return torch.where(over, r.nextafter(torch.zeros_like(r)), r).view(torch.int32)


def test_nvfp4_thresholds_for_every_scale_code():
    codes = torch.arange(1, 0x7F, dtype=torch.uint8)  # every positive finite ue4m3 scale
    v = decode(codes, "ue4m3").double()
    g = _global_scales()
    vs, gs = (t.flatten().contiguous() for t in torch.broadcast_tensors(v[:, None], g[None, :]))
    n = vs.numel()
    vp, gp = _padded(vs, 1.0, _FP64_CHUNK), _padded(gs, 1.0, _FP64_CHUNK)
    out = torch.empty(vp.numel() * 7, dtype=torch.int32)
    _thresholds_kernel[(vp.numel() // _FP64_CHUNK,)](vp, gp, out, N=_FP64_CHUNK)
    got = out.view(-1, 7)[:n]
    want = _want_thresholds(vs, gs)
    bad = (got != want).any(1).nonzero()
    assert bad.numel() == 0, (f"{bad.numel()} of {n} (scale, global scale) pairs differ; first: "
                              f"v={vs[bad[0]].item()!r} g={gs[bad[0]].item()!r} got {got[bad[0]].tolist()} "
                              f"want {want[bad[0]].tolist()}")


def _fp32_beside_boundaries(cut: int, seed: int) -> torch.Tensor:
    """Every fp32 exponent (inf and NaN included) with the mantissas that decide rounding to ``23 - cut`` mantissa
    bits: 0, the half step (1 << (cut - 1)) and its neighbours, the kept bit's parity, the binade's end; random."""
    h = 1 << (cut - 1)
    edges = [0, 1, h - 1, h, h + 1, 3 * h - 1, 3 * h, 3 * h + 1, 2 * h, (1 << 23) - 1, (1 << 23) - h, (1 << 23) - h - 1]
    rand = torch.randint(0, 1 << 23, (20,), generator=torch.Generator().manual_seed(seed))
    mant = torch.cat((torch.tensor(edges), rand))
    bits = ((torch.arange(0, 256)[:, None] << 23) | mant[None, :]).flatten().to(torch.int32)
    return bits.view(torch.float32)


def test_ue4m3_code_and_value_beside_every_boundary():
    every = decode(torch.arange(0, 0x7F, dtype=torch.uint8), "ue4m3").float()
    q = torch.cat((_fp32_beside_boundaries(20, 11), every))
    n = q.numel()
    qp = _padded(q, 0.0, _FP64_CHUNK)
    code, value = torch.empty(qp.numel(), dtype=torch.int32), torch.empty(qp.numel(), dtype=torch.float64)
    _ue4m3_kernel[(qp.numel() // _FP64_CHUNK,)](qp, code, value, N=_FP64_CHUNK)
    code, value = code[:n], value[:n]
    # harness.mx.quantize_nvfp4's block scale: encode(amax / 6 / g, "ue4m3"), RNE, saturating, NaN kept
    want = encode(q, "ue4m3").int()
    bad = (code != want).nonzero()
    assert bad.numel() == 0, (f"{bad.numel()} of {n} codes differ; first: q={q[bad[0]].item()!r} "
                              f"got {code[bad[0]].item()} want {want[bad[0]].item()}")
    finite = want != 0x7F
    want_v = decode(want[finite].to(torch.uint8), "ue4m3").double()
    assert torch.equal(value[finite], want_v), "ue4m3 values from bits"
    assert set(want[finite].tolist()) == set(range(0x7F)), "every finite code is met"
