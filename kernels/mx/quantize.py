"""``quantize_fp4``: fp16/bf16/fp32 activations to packed e2m1 codes plus block scales (MXFP4 or NVFP4).

The same bits as ``harness.mx.quantize_mx`` / ``quantize_nvfp4`` (checked bit for bit on the interpreter and the
H200), computed so that no step depends on a GPU's approximate arithmetic:

* amax is exact (an integer max of |x|'s bits); a NaN anywhere in a block makes the block's amax NaN, whatever a
  target's float max does with NaN.
* MXFP4 scale: the e8m0 rule on amax's fp32 bits (floor/ceil/even read exponent and mantissa; rceil divides by 6
  with ``div_rn``, IEEE); a NaN or inf amax gives the NaN scale 0xFF, whose whole block is coded +max (0x7).
  Elements: y = |x| * 2^-scale (exact; the only inexact products are fp32 subnormals, far below e2m1's smallest
  step) rounded to e2m1 by one fp32 add of a power of two whose ulp is e2m1's step in y's binade
  (``_e2m1_pow2_code``): round to nearest even and saturation, with no comparison.
* NVFP4 scale: ue4m3 of ``amax / 6 / global_scale`` (two ``div_rn``), rounded to nearest even by the same kind of
  add and saturated to 448 in integer arithmetic (no FP8 cast, so every target computes it the same way). Elements
  are coded as the reference codes x / (scale * global_scale) in fp64, by comparing |x|'s bits with the e2m1
  midpoints times the scale (exact fp64 products, each turned into the fp32 threshold that decides alike: their
  bits truncated, ``_nvfp4_thresholds``, for global scales in [2^-115, 2^116); a rounding round trip,
  ``_fp32_threshold``, beyond), a binary search of three comparisons, ties to even, saturating, no division; a
  block whose scale is 0 or NaN is coded 0.
* A block is held by 1, 2, 4 or all of its 16-byte vectors' threads (``block_layouts``; ``SHIPPED_LAYOUT`` says
  which ships): whole blocks in a thread compute a block's amax, scale and thresholds once, without shuffles.

The element rules are checked against ``harness.mx`` on every bf16 value and every fp32 exponent beside each
rounding boundary (``tests/kernels/mx/test_mx_quantize_rules.py``).

Every bad input is a ``ValueError``/``TypeError`` naming the argument, raised before anything is launched; stores
are masked to the rows and blocks that exist, so ``out=`` buffers are written exactly where the layout says.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels._versions import triton_version
from kernels.mx import _checks
from kernels.mx.layout import BLOCK, RULE_CODE, cdiv, swizzled_size

__all__ = ["quantize_fp4", "launch_config", "block_layouts", "SHIPPED_LAYOUT", "MIRROR"]


_B22 = tl.constexpr(0x4A800000)  # bits of 2^22, whose fp32 ulp is 0.5 (e2m1's step below 2)
_B14 = tl.constexpr(0x46800000)  # bits of 2^14, whose fp32 ulp is 2^-9 (ue4m3's step below 2^-6)


@triton.jit
def _e8m0_code(amax, RULE: tl.constexpr):
    """The e8m0 scale code (int32) of a block of absolute maximum ``amax`` (fp32, >= 0 or NaN) for e2m1."""
    bits = amax.to(tl.int32, bitcast=True)
    expf = (bits >> 23) & 0xFF
    mant = bits & 0x7FFFFF
    if RULE == 3:  # rceil: 2^ceil(log2(fp32(amax / 6)))
        q = tl.math.div_rn(amax, 6.0)
        qb = q.to(tl.int32, bitcast=True)
        qe = (qb >> 23) & 0xFF
        qm = qb & 0x7FFFFF
        e = qe - 127 + (qm != 0).to(tl.int32)
        e = tl.where(qe == 0, tl.where(qm > 0x400000, -126, -127), e)
    else:  # floor(log2 amax) - emax(e2m1) = 2, moved up by ceil / even
        e = expf - 127 - 2
        if RULE == 1:
            e += (mant != 0).to(tl.int32)
        if RULE == 2:
            e += (mant >= 0x600000).to(tl.int32)  # significand >= 1.75 rounds to the next binade in e2m1
        e = tl.where(expf == 0, -127, e)  # fp32 subnormal amax: far below every clamp
    e = tl.where(amax == 0, -127, e)
    # harness: equivalent-mutant(clamp): e <= 126 for every finite amax (expf <= 254; amax / 6 <= FLT_MAX / 6)
    e = tl.minimum(tl.maximum(e, -127), 127)
    return tl.where(expf == 0xFF, 0xFF, e + 127)  # inf or NaN: the NaN scale


@triton.jit
def _ue4m3_code(q):
    """ue4m3 code (int32) of ``q`` (fp32, >= 0, inf or NaN): round to nearest even, saturate to 448, NaN -> 0x7F.
    Adding C = 2^(20 + max(e, -6)) (e: q's binade) rounds q to C's ulp, ue4m3's step there (3 mantissa bits; the
    fixed 2^-9 below 2^-6), ties to even; the sum's bits minus C's count the steps, 8 * (max(e, -6) + 6) more is the
    code (as ``_e2m1_pow2_code``). For q >= 2^109 the exponent sum wraps, C is 2^14 and the count is huge: saturated
    like inf."""
    qb = q.to(tl.int32, bitcast=True)
    cb = tl.maximum((qb & 0x7F800000) + (20 << 23), _B14)
    t = q + cb.to(tl.float32, bitcast=True)
    code = tl.minimum(t.to(tl.int32, bitcast=True) - cb + ((cb - _B14) >> 20), 0x7E)
    return tl.where(q != q, 0x7F, code)


@triton.jit
def _ue4m3_value64(c):
    """The value (fp64, exact) of ue4m3 code ``c`` (int32, 0..0x7E), from bits: (1 + m/8) * 2^(e - 7) is the fp64
    of high word ``(c << 17) + (1016 << 20)``; a subnormal code's m * 2^-9 is (1 + m/8) * 2^-6 - 2^-6."""
    sub = c < 8
    hi = (c << 17) + (1016 << 20) + tl.where(sub, 1 << 20, 0)
    return (hi.to(tl.int64) << 32).to(tl.float64, bitcast=True) - tl.where(sub, 0.015625, 0.0)


@triton.jit
def _e2m1_magnitude(a, u0, u1, u2, u3, u4, u5, u6):
    """e2m1 magnitude code (int32, 0..7) of ``a`` (the int32 bits of an fp32 >= 0): how many of the increasing
    thresholds ``u0..u6`` (fp32 bits too: for non-negative floats the bits order as the values) it exceeds, found by a
    binary search of three comparisons (seven, summed, made this kernel issue-bound on an H100)."""
    c2 = a > u3
    c1 = a > tl.where(c2, u5, u1)
    c0 = a > tl.where(c2, tl.where(c1, u6, u4), tl.where(c1, u2, u0))
    return c2.to(tl.int32) * 4 + c1.to(tl.int32) * 2 + c0.to(tl.int32)


@triton.jit
def _fp32_threshold(t, ok, AT_LEAST: tl.constexpr):
    """The fp32 ``u`` with ``a > u`` exactly when ``a > t`` (``a >= t`` with ``AT_LEAST``) for every fp32 ``a``, of
    an fp64 ``t > 0``: t rounded down (up, then one step down); +inf where ``ok`` is false, so nothing exceeds it.
    Why exact: between t and its fp32 neighbours lies no fp32 value for ``a`` to take."""
    r = t.to(tl.float32)  # to nearest; one step of its bits moves it to the neighbour (r > 0, so also from inf)
    bits = r.to(tl.int32, bitcast=True)
    back = r.to(tl.float64)
    step = (back >= t) if AT_LEAST else (back > t)
    return tl.where(ok, tl.where(step, bits - 1, bits).to(tl.float32, bitcast=True), float("inf"))


# global scales in [_G_LO, _G_HI) make every NVFP4 threshold a normal fp32: 0.25 * 2^-9 * g >= 2^-126 and
# 5 * 448 * g < 2^128
_G_LO = tl.constexpr(2.0**-115)
_G_HI = tl.constexpr(2.0**116)


@triton.jit
def _e2m1_pow2_code(x, xb, inv, kc):
    """e2m1 magnitude code (int32, 0..7) of ``y = |x| * inv``, ``inv = 2^-E`` (``xb``: x's fp32 bits; ``kc`` =
    ``bits(2^22) - bits(1.0) - (E << 23)``), rounded to nearest even and saturated, by one add instead of
    comparisons. Adding C = 2^(22 + max(e, 0)) (e: y's binade) rounds y to C's ulp, 2^(max(e, 0) - 1): e2m1's step
    in that binade (0.5 below 2, 1 in [2, 4), 2 in [4, 8)), ties to even (an even step count is an even code). The
    sum's bits minus C's count the steps; 2 * max(e, 0) more is the code. The product is exact, or far below 0.25
    and then lost in the add either way, so fusing it into an fma changes nothing."""
    cb = tl.maximum((xb & 0x7F800000) + kc, _B22)
    t = tl.abs(x) * inv + cb.to(tl.float32, bitcast=True)
    return tl.minimum(t.to(tl.int32, bitcast=True) - cb + (cb >> 22) - (_B22 >> 22), 7)


@triton.jit
def _fp32_below(t, AT_LEAST: tl.constexpr):
    """fp32 bits of the largest fp32 ``u`` with ``a > u`` exactly when ``a > t`` (``a >= t`` with ``AT_LEAST``) for
    every fp32 ``a``, of an fp64 ``t`` in fp32's normal range: t's bits truncated to fp32's 23 mantissa bits are t
    rounded down (positive t); for ``a >= t`` the fp64 just below t is truncated, the largest fp32 under t."""
    b = t.to(tl.int64, bitcast=True)
    if AT_LEAST:
        b = b - 1
    return ((b >> 29) - ((1023 - 127) << 23)).to(tl.int32)


@triton.jit
def _nvfp4_thresholds(v, g):
    """The seven e2m1 decision thresholds of NVFP4 blocks of ue4m3 scale value ``v`` (fp64, > 0) and global scale
    ``g`` in [2^-115, 2^116), as int32 fp32 bits to compare |x|'s bits with: |x| > u_k exactly when |x| / (v * g) is
    above (at or above, for 0.75, 1.75, 3.5: ties to even) the k-th midpoint 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.
    s = v * g and m * s are exact in fp64 (4 + 24 + 3 significant bits) and, in that range of g, normal fp32 values
    (0.25 * 2^-9 * g >= 2^-126, 5 * 448 * g < 2^128), so each threshold is s's bits truncated and a double is one
    more exponent: 2.5 = 2 * 1.25, 3.5 = 2 * 1.75, 5 = 4 * 1.25, 0.25 = 1 / 4."""
    s = v * g.to(tl.float64)
    u0 = _fp32_below(s, False) - (2 << 23)
    u1 = _fp32_below(0.75 * s, True)
    u2 = _fp32_below(1.25 * s, False)
    u3 = _fp32_below(1.75 * s, True)
    return u0, u1, u2, u3, u2 + (1 << 23), u3 + (1 << 23), u2 + (2 << 23)


@triton.jit
def _nvfp4_block(amax, gs_ptr):
    """(ue4m3 scale code, whether it codes elements, the seven thresholds of :func:`_e2m1_magnitude`) of NVFP4 blocks
    of absolute maximum ``amax`` (fp32, >= 0 or NaN) under the global scale at ``gs_ptr``."""
    g = tl.load(gs_ptr).to(tl.float32)
    scode = _ue4m3_code(tl.math.div_rn(tl.math.div_rn(amax, 6.0), g))
    v = _ue4m3_value64(scode)
    # x / s (s = v * g) is coded by comparing |x| with the e2m1 midpoints times s (exact in fp64: 4 + 24 + 3
    # significant bits), each turned into the fp32 threshold that decides alike: no division. The reference's
    # rounded fp64 quotient lies on the same side of each midpoint m as the exact one: |x| and m * s (24 and
    # 31 significant bits) are equal or differ by 2^-32 of m * s, far beyond fp64's rounding. A scale of 0 or
    # NaN codes its block 0.
    ok = (scode != 0) & (scode != 0x7F)
    if (g >= _G_LO) & (g < _G_HI):
        u0, u1, u2, u3, u4, u5, u6 = _nvfp4_thresholds(v, g)
    else:
        sd = v * g.to(tl.float64)
        u0 = _fp32_threshold(0.25 * sd, ok, False).to(tl.int32, bitcast=True)
        u1 = _fp32_threshold(0.75 * sd, ok, True).to(tl.int32, bitcast=True)
        u2 = _fp32_threshold(1.25 * sd, ok, False).to(tl.int32, bitcast=True)
        u3 = _fp32_threshold(1.75 * sd, ok, True).to(tl.int32, bitcast=True)
        u4 = _fp32_threshold(2.5 * sd, ok, False).to(tl.int32, bitcast=True)
        u5 = _fp32_threshold(3.5 * sd, ok, True).to(tl.int32, bitcast=True)
        u6 = _fp32_threshold(5.0 * sd, ok, False).to(tl.int32, bitcast=True)
    return scode, ok, u0, u1, u2, u3, u4, u5, u6


@triton.jit
def _nvfp4_magnitude(a, u0, u1, u2, u3, u4, u5, u6):
    """:func:`_e2m1_magnitude` of elements ``a`` with per-block thresholds."""
    return _e2m1_magnitude(a, _per_block(u0), _per_block(u1), _per_block(u2), _per_block(u3), _per_block(u4),
                           _per_block(u5), _per_block(u6))


@triton.jit
def _elements(block_off, part_off, vec_off, j, MIRROR: tl.constexpr):
    """Element offsets in the kernel's (LANES, ROWS, BLOCKS, Q / LANES, VEC) layout from a (ROWS, BLOCKS) block
    offset, a (LANES,) part offset, a (Q / LANES,) vector offset and (VEC,) lanes; with ``MIRROR`` in
    (Q / LANES, BLOCKS, ROWS, LANES, VEC) from a (BLOCKS, ROWS) block offset."""
    if MIRROR:
        return block_off[None, :, :, None, None] + part_off[:, None] + vec_off[:, None, None, None, None] + j
    else:
        return block_off[None, :, :, None, None] + part_off[:, None, None, None, None] + vec_off[:, None] + j


@triton.jit
def _per_block(t):
    """A (ROWS, BLOCKS) value broadcast against the elements."""
    return t[None, :, :, None, None]


@triton.jit
def _block_max(t):
    return tl.max(tl.max(tl.max(t, axis=4), axis=3), axis=0)


@triton.jit
def _quantize_fp4_kernel(x_ptr, codes_ptr, scales_ptr, gs_ptr, rows, n_blocks, stride_x, stride_c, stride_s,
                         scale_rows, scale_cols, ROWS: tl.constexpr, BLOCKS: tl.constexpr, BLOCK: tl.constexpr,
                         RULE: tl.constexpr, SWIZZLED: tl.constexpr, VEC: tl.constexpr, LANES: tl.constexpr,
                         MIRROR: tl.constexpr):
    # x as (LANES, ROWS, BLOCKS, Q / LANES, VEC), one 16-byte load per vector: a block's vector p + LANES * i sits at
    # [p, ..., i, :]. Triton 3.6's coalescing orders the dims after the contiguous VEC by index: threads go over LANES,
    # then ROWS, then BLOCKS, and Q / LANES stays in one thread: LANES threads share a block, each holding Q / LANES
    # vectors of it, and one warp load reads LANES consecutive vectors (whole 32-byte sectors from LANES = 2 on) of
    # each block it touches. LANES = 1, whole blocks in a thread: amax and scale need no shuffle, the thresholds are
    # built once per block, and each warp load reads 16 bytes of every block it touches (the L1 serves the rest to
    # the next loads). LANES = Q, split: consecutive threads read a block's consecutive vectors (whole lines) and
    # share its amax by shuffles; each computes the block's scale and thresholds. Measured on an H100 (Triton 3.6,
    # 2026-12-06, docs/performance.md): whole is 2-6 points of copy faster for MXFP4 and 14-20 for NVFP4 from 16-bit
    # sources, and for NVFP4 from fp32 (57.7% against 48.4%: split, a thread holds parts of 8 blocks and their
    # thresholds, 203 registers), but MXFP4 from fp32 (128-byte blocks) falls to 50% whole; there quarter (LANES =
    # 4) reads at 89-90% against split's 82-86% (the 19:13 UTC sweep; SHIPPED_LAYOUT).
    # MIRROR: the same layout for a Triton whose coalescing orders the dims after VEC by reverse index (3.9; 3.6
    # by index): the dims mirrored, (Q / LANES, BLOCKS, ROWS, LANES, VEC), every per-block value (BLOCKS, ROWS).
    Q: tl.constexpr = BLOCK // VEC
    r = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    b = tl.program_id(1) * BLOCKS + tl.arange(0, BLOCKS)
    p = tl.arange(0, LANES)
    q = tl.arange(0, Q // LANES)
    j = tl.arange(0, VEC)
    jj = tl.arange(0, VEC // 2)
    if MIRROR:
        rr = r[None, :]
        bb = b[:, None]
    else:
        rr = r[:, None]
        bb = b[None, :]
    rr64 = rr.to(tl.int64)
    real = (rr < rows) & (bb < n_blocks)  # (ROWS, BLOCKS), or (BLOCKS, ROWS) with MIRROR
    x_off = _elements(rr64 * stride_x + bb * BLOCK, p * VEC, q * (LANES * VEC), j, MIRROR)
    # harness: equivalent-mutant(other): a masked lane belongs to a block outside the tensor, never stored
    x = tl.load(x_ptr + x_off, mask=_per_block(real), other=0.0).to(tl.float32)
    xb = x.to(tl.int32, bitcast=True)
    a = xb & 0x7FFFFFFF
    if RULE == 0:
        # the floor rule reads amax's exponent alone (inf and NaN share 0xFF, 0 and subnormals 0): the max of the
        # exponent fields, which the element code computes anyway
        amax = _block_max(xb & 0x7F800000).to(tl.float32, bitcast=True)
    else:
        # |x|'s bits order as |x| does, with every NaN above inf: one integer max is the amax, NaN when the block
        # holds one (a float max's NaN propagation differs between targets)
        amax = _block_max(a).to(tl.float32, bitcast=True)  # one per block
    sign = (xb >> 28) & 8  # code bit 3; the scale is > 0, so the quotient's sign is x's (-0 too)
    if RULE == 4:
        scode, ok, u0, u1, u2, u3, u4, u5, u6 = _nvfp4_block(amax, gs_ptr)
        codes = tl.where(_per_block(ok), _nvfp4_magnitude(a, u0, u1, u2, u3, u4, u5, u6) | sign, 0)
    else:
        scode = _e8m0_code(amax, RULE)
        inv = ((254 - scode) << 23).to(tl.float32, bitcast=True)  # 2^-(scode - 127), normal for scode <= 253
        kc = _B22 - 0x3F800000 - ((scode - 127) << 23)
        mag = _e2m1_pow2_code(x, xb, _per_block(inv), _per_block(kc))
        # NaN and inf blocks have the NaN scale, coded +max
        codes = tl.where(_per_block(scode == 0xFF), 7, mag | sign)
    if MIRROR:
        pairs = tl.reshape(codes, (Q // LANES, BLOCKS, ROWS, LANES, VEC // 2, 2))
    else:
        pairs = tl.reshape(codes, (LANES, ROWS, BLOCKS, Q // LANES, VEC // 2, 2))
    lo, hi = tl.split(pairs)
    packed = (lo + hi * 16).to(tl.uint8)  # one shift-and-add
    c_off = _elements(rr64 * stride_c + bb * (BLOCK // 2), p * (VEC // 2), q * (LANES * VEC // 2), jj, MIRROR)
    tl.store(codes_ptr + c_off, packed, mask=_per_block(real))
    if SWIZZLED:
        # every byte of the padded tile grid is written (0 in the padding): the buffer is the layout, whole
        tile = rr64 // 128 * (scale_cols // 4) + bb // 4
        s_off = tile * 512 + (rr % 32) * 16 + (rr % 128 // 32) * 4 + bb % 4
        # harness: equivalent-mutant(mask-compare@19): the grid spans scale_rows (128s) in ROWS: r < scale_rows
        in_grid = (rr < scale_rows) & (bb < scale_cols)
        tl.store(scales_ptr + s_off, tl.where(real, scode, 0).to(tl.uint8), mask=in_grid)
    else:
        tl.store(scales_ptr + rr64 * stride_s + bb, scode.to(tl.uint8), mask=real)


#: Whether this Triton's coalescing orders a load's non-contiguous dims by reverse index, so that the kernel must
#: mirror its dims to get the layout LANES names: the TTGIR of Triton 3.6 (by index) and 3.9 (by reverse index),
#: 2026-12-06 (``benchmarks/quantize_sass.py``'s "got" column); the versions between were not read.
MIRROR: bool = triton_version() >= (3, 9)

#: The block layout that ships per (scheme, source dtype): a name of :func:`block_layouts`, the fastest of
#: ``bench_mx.py --sweep`` on an H100 (Triton 3.6, 2026-12-06 19:13 UTC, graph replay, docs/performance.md):
#: whole for 16-bit sources and NVFP4; quarter for MXFP4 from fp32 (88.6 / 89.6% of copy linear / swizzled,
#: against split's 81.8 / 86.2% and whole's 49.7 / 50.6%).
SHIPPED_LAYOUT: dict[tuple[str, torch.dtype], str] = {
    ("mxfp4", torch.bfloat16): "whole", ("mxfp4", torch.float16): "whole", ("mxfp4", torch.float32): "quarter",
    ("nvfp4", torch.bfloat16): "whole", ("nvfp4", torch.float16): "whole", ("nvfp4", torch.float32): "whole",
}


def block_layouts(scheme: str, dtype: torch.dtype) -> dict[str, int]:
    """Every legal block layout of a ``dtype`` source, name -> threads a block (the kernel's LANES, a power of two
    dividing the block's 16-byte vectors): whole (1), half (2), quarter (4), split (all of them)."""
    vectors = BLOCK[scheme] * dtype.itemsize // 16
    names = {1: "whole", 2: "half", 4: "quarter"}
    return {("split" if n == vectors else names[n]): n for n in (1, 2, 4, 8) if n <= vectors}


def launch_config(scheme: str, dtype: torch.dtype = torch.bfloat16,
                  block_layout: str | None = None) -> tuple[int, int, int, int]:
    """(rows per program, blocks per program, num_warps, threads a block) for a ``dtype`` source: 4,096 elements per
    program on 4 warps, the fastest of sweeps on an H100 (Triton 3.6, 2026-12-06: 8 warps 6-17 points of copy
    bandwidth slower, 8,192 elements per program half as fast; ``docs/performance.md``); the block layout
    ``block_layout`` of :func:`block_layouts`, by default the one :data:`SHIPPED_LAYOUT` names."""
    layouts = block_layouts(scheme, dtype)
    name = SHIPPED_LAYOUT[scheme, dtype] if block_layout is None else block_layout
    if name not in layouts:
        raise ValueError(f"block_layout: expected one of {', '.join(layouts)} for {scheme} from {dtype}; "
                         f"got {name!r}")
    return 16, 256 // BLOCK[scheme], 4, layouts[name]


def launch(x: torch.Tensor, codes: torch.Tensor, scales: torch.Tensor, g: torch.Tensor | None, scheme: str, rule: str,
           layout: str, config: tuple[int, int, int, int], mirror: bool | None = None) -> None:
    """Launch the kernel on checked arguments (what :func:`quantize_fp4` does after its checks) with ``config`` as
    :func:`launch_config` gives it: for the launch-configuration sweep of ``benchmarks/bench_mx.py``. ``mirror``:
    the kernel's MIRROR, :data:`MIRROR` (this Triton's) unless given; either gives the same bits."""
    rows, k = x.shape
    n_blocks = k // BLOCK[scheme]
    if not (rows and n_blocks):
        return
    srows, scols = swizzled_size(rows, n_blocks) if layout == "swizzled" else (rows, n_blocks)
    rp, bp, warps, lanes = config
    grid = (cdiv(srows, rp), cdiv(scols, bp))
    _quantize_fp4_kernel[grid](
        x, codes, scales, g if g is not None else x, rows, n_blocks, x.stride(0), codes.stride(0), scales.stride(0),
        srows, scols, ROWS=rp, BLOCKS=bp, BLOCK=BLOCK[scheme], RULE=RULE_CODE[rule], SWIZZLED=layout == "swizzled",
        VEC=16 // x.element_size(), LANES=lanes, MIRROR=MIRROR if mirror is None else mirror, num_warps=warps)


def quantize_fp4(x: torch.Tensor, scheme: str = "mxfp4", *, scale_rule: str | None = None,
                 global_scale: torch.Tensor | None = None, layout: str = "linear",
                 out: tuple[torch.Tensor, torch.Tensor] | None = None) -> tuple[torch.Tensor, ...]:
    """Quantize ``x`` (rows, K), fp16/bf16/fp32 with a unit stride along K, to ``scheme`` blocks along K.

    Returns ``(codes, scales)`` for ``mxfp4`` and ``(codes, scales, global_scale)`` for ``nvfp4``: codes uint8
    (rows, K / 2); scales uint8 (rows, K / block) when ``layout="linear"``, or the flat swizzled buffer
    (``swizzled_size(rows, K / block)`` bytes) when ``"swizzled"``. ``scale_rule`` (mxfp4): floor (default, OCP),
    ceil, even, rceil. ``global_scale`` (nvfp4, required): a one-element fp32 tensor on x's device, finite and > 0
    (``kernels.mx.reference.nvfp4_global_scale(x)`` is the usual amax / 2688). ``out``: (codes, scales) buffers to
    write instead of allocating, of exactly those shapes, dtype and device.
    """
    rule = _checks.scheme_rule(scheme, scale_rule)
    _checks.activations(x)
    block = BLOCK[scheme]
    rows, k = x.shape
    if k % block:
        raise ValueError(f"x: K = {k} is not a multiple of the {scheme} block ({block}); pad it with zeros")
    if layout not in ("linear", "swizzled"):
        raise ValueError(f"layout: expected 'linear' or 'swizzled'; got {layout!r}")
    n_blocks = k // block
    scale_shape = (rows, n_blocks) if layout == "linear" else (swizzled_size(rows, n_blocks)[0]
                                                              * swizzled_size(rows, n_blocks)[1],)
    g = _checks.global_scale(global_scale, scheme, x.device)
    codes, scales = _checks.outputs(out, (rows, k // 2), scale_shape, x.device, layout)
    launch(x, codes, scales, g, scheme, rule, layout, launch_config(scheme, x.dtype))
    return (codes, scales) if g is None else (codes, scales, g.reshape(()))
