"""Blackwell's ``tcgen05.mma`` (sm100) as data and its evaluator: the published bit-level model of B200's tensor-core
arithmetic, one :class:`Tcgen05Kind` row per instruction kind, evaluated vectorised over a tile and chained over k.

Source of every row: the public repository ``sf-tensor/tcgen05`` (MIT), ``tcgen05_model/MODEL.md`` and its frozen
B200 result words (``tcgen05_model/validation.py``, commit 8fce64d); its authors report raw-word equality on 46M
B200 cases. Published, validated on B200 by its authors, not measured here (no Blackwell GPU here). The rows
restate its facts; no code of it is used. What it says, for one instruction (one output element: ``d = sum_k
a_k * b_k (* scale_a * scale_b) + c``):

- operands decode to exact (mantissa, exponent) with their *raw* (encoded) exponent kept apart: a subnormal's raw
  exponent is the format's emin. fp32 ``c`` too (a subnormal ``c`` has raw exponent -126). tf32 and bf16 operands
  lose their low fraction bits before they are classified (an fp32 NaN whose payload lies only there is inf);
- unscaled kinds (f16, tf32, f8f6f4) and ``mxf8f6f4``: one window for the whole instruction, ``q = max(raw
  exponent sums of the nonzero products, raw exponent of a nonzero c) - 25``; every exact product and ``c`` is
  truncated toward zero to a multiple of ``2^q``, the multiples are summed exactly and the sum is truncated to fp32
  (subnormals kept, overflow to inf); a zero sum is +0. No lower clamp of the window (Hopper's rows clamp at -133);
- ``mxf4`` / ``mxf4nvf4`` with e8m0 scales: ``q = max(R - 39, S - 35)`` (R: the largest raw exponent of a nonzero
  scaled product or of c; S: the largest scale-pair raw exponent of a nonzero product); products are summed
  exactly in K=16 merge groups, each group truncated into the window; a group that ``c`` outranks (raw exponent of
  c >= the group's largest product raw exponent) is truncated through ``c``'s 35-bit window first; where the
  result is an fp32 subnormal, groups of a lower scale than S whose units fall below ``2^-174`` are dropped (the
  subnormal group floor); if ``c`` outranks every product, ``q = raw(c) - 35`` and the K=16 group sums go in;
- NVFP4 (``mxf4nvf4`` with ue4m3 scales, ``scale_vec::4X``): the same window, products summed exactly in K=4
  groups before truncation, the same ``c``-dominant rule, no subnormal floor;
- special values per instruction: an input or scale NaN, inf * 0 and opposite infinities give exactly 0x7fffffff;
  otherwise an infinite contribution gives that infinity; e8m0 0xFF and ue4m3 0x7F (sign bit ignored) are NaN;
  all products zero gives ``c`` (+0 for a zero ``c``).

A length-K dot is a chain of instructions in k order, each result the next one's ``c`` (fp32, in TMEM): that is
the lowering of Triton 3.6 and 3.9 for sm100 (:data:`LOWERING`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["KINDS", "LOWERING", "NAN_WORD", "PROVENANCE", "Tcgen05Kind", "mma_chain", "operand", "scale_operand"]

#: what every row here is
PROVENANCE = "published (tcgen05 model, validated on B200 by its authors; not measured here)"
_SRC = "sf-tensor/tcgen05 tcgen05_model/MODEL.md {} (commit 8fce64d); B200 words in tcgen05_model/validation.py"
#: the word of every NaN a tcgen05.mma generates (published: MODEL.md section 4)
NAN_WORD = 0x7FFFFFFF
_NEG = -100000.0  # raw exponent of a zero product / zero c: below every real one


@dataclass(frozen=True)
class Tcgen05Kind:
    """One ``tcgen05.mma`` kind's numerics (see the module docstring)."""

    kind: str                    #: the PTX kind (and scale_vec where it matters)
    k: int                       #: k per instruction
    window: int                  #: fraction bits of the window below the largest raw exponent
    scale_floor: int | None      #: S - scale_floor bounds the window from below (None: no scale floor)
    product_group: int | None    #: products summed exactly in groups of this many before truncation
    c_merge: bool                #: c outranking every product: q = raw(c) - 35 over K=16 group sums
    per_group_c: bool            #: a group that c outranks goes through c's 35-bit window
    subnormal_floor: int | None  #: the subnormal group floor exponent (-174), None: none
    scale_block: int | None      #: k per scale (None: unscaled)
    source: str

    @property
    def provenance(self) -> str:
        return "published"

    def __repr__(self) -> str:
        return f"Tcgen05Kind({self.kind}, k={self.k}, window={self.window}; {PROVENANCE})"


#: kind -> its numerics (published; see the module docstring)
KINDS: dict[str, Tcgen05Kind] = {
    "f16": Tcgen05Kind("kind::f16", 16, 25, None, None, False, False, None, None, _SRC.format("section 3")),
    "tf32": Tcgen05Kind("kind::tf32", 8, 25, None, None, False, False, None, None, _SRC.format("sections 2-3")),
    "f8f6f4": Tcgen05Kind("kind::f8f6f4", 32, 25, None, None, False, False, None, None, _SRC.format("section 3")),
    "mxf8f6f4": Tcgen05Kind("kind::mxf8f6f4.block_scale", 32, 25, None, None, False, False, None, 32,
                            _SRC.format("section 5, UE8M0 MXF8F6F4")),
    "mxf4": Tcgen05Kind("kind::mxf4.block_scale.scale_vec::2X", 64, 39, 35, 16, True, True, -174, 32,
                        _SRC.format("section 5, UE8M0 MXF4")),
    "mxf4nvf4_2x": Tcgen05Kind("kind::mxf4nvf4.block_scale.scale_vec::2X", 64, 39, 35, 16, True, True, -174, 32,
                               _SRC.format("section 5, UE8M0 MXF4NVF4")),
    "mxf4nvf4_4x": Tcgen05Kind("kind::mxf4nvf4.block_scale.scale_vec::4X", 64, 39, 35, 16, True, True, -174, 16,
                               _SRC.format("section 5, UE8M0 MXF4NVF4")),
    "nvfp4": Tcgen05Kind("kind::mxf4nvf4.block_scale.scale_vec::4X (ue4m3)", 64, 39, 35, 4, True, False, None, 16,
                         _SRC.format("section 5, UE4M3 NVFP4")),
}

#: How Triton 3.6 and 3.9 lower ``tl.dot`` / ``tl.dot_scaled`` for ``GPUTarget("cuda", 100, 32)``, each fact with
#: the PTX line it was read from (``scripts/compile_tcgen05_lowering.py`` with Triton 3.6.0 and 3.9.0, compiled on
#: the CPU box 2026-12-05)
LOWERING: dict[str, str] = {
    "plain kinds": "fp16/bf16 -> kind::f16, fp32 (tf32) -> kind::tf32, e4m3/e5m2 and mixed pairs -> kind::f8f6f4; 3.9 "
                   "128x128x64 w4 fp16: '@%p7 tcgen05.mma.cta_group::1.kind::f16 [ %r311 + 0 ], %rd134, %rd135, %r40, "
                   "%p6;', tf32 64x64x64 w4: '... kind::tf32 [ %r194 + 0 ], %rd74, %rd75, %r108, %p6;', e4m3 x e5m2 "
                   "64x64x64 w4: '... kind::f8f6f4 [ %r93 + 0 ], %rd72, %rd73, %r19, %p6;' (3.6: the same kinds)",
    "instructions per tile": "one per instruction k along K whatever M and N (M=64/128, N up to 128 in one "
                             "instruction): K=64 gives 4 kind::f16, 8 kind::tf32, 2 kind::f8f6f4; K=128 (128x64 w8) "
                             "8 / 16 / 4",
    "k order": "ascending: each instruction's A descriptor advances 32 bytes ('add.s32 %r47, %r42, 2;' then "
               "'mov.b64 %rd136, {%r47, %r45};', 16 fp16 k values per step), in program order",
    "accumulator": "in TMEM: the fp32 accumulator is stored first ('tcgen05.st.sync.aligned.32x32b.x128.b32 "
                   "[%r182 + 0], {...}') and every MMA of the tile accumulates (enable-input-d '%p6', 'mov.pred %p6, "
                   "-1;'); the result is read back with 'tcgen05.ld.sync.aligned.32x32b.x128.b32'; no add.f32 "
                   "between instructions: the chain's c is the previous D",
    "which plain tiles": "tcgen05 for M a multiple of 64 on a multiple of 4 warps (128x128 w4/w8, 64x64 w4, 128x64 "
                         "w8); mma.sync below (harness.interp.dots.instruction)",
    "native dot_scaled": "e2m1 x e2m1, e8m0 groups of 32: 3.9 'tcgen05.mma.cta_group::1.kind::mxf4.block_scale."
                         "block32', 3.6 '...kind::mxf4.block_scale.scale_vec::2X' (K=64 per instruction: 128x128x128 "
                         "gives 2); NVFP4 (e4m3 scales, groups of 16): 3.9 '...kind::mxf4nvf4.block_scale.block16', "
                         "3.6 '...kind::mxf4nvf4.block_scale.scale_vec::4X'; e4m3 x e4m3, e5m2 x e4m3, e2m1 x e4m3: "
                         "3.9 '...kind::mxf8f6f4.block_scale.block32', 3.6 '...scale_vec::1X' (K=32: 4 per "
                         "128x128x128)",
    "native tiles": "M a multiple of 128 and N >= 16 on 4 or 8 warps (128x16/32/64/128 w4, 128x128 w8, 256x128 w8: "
                    "native; 64x64, 64x128 w4: emulated over kind::f16; 128x8 w4: 3.9 kind::f16, 3.6 "
                    "'mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32')",
    "unscaled operand": "a native-size tile with an operand unscaled (scale None) is emulated: 3.9, e2m1 x e2m1 and "
                        "e4m3 x e4m3 128x128x128 w4 with one or no scale: 8 '@%p7 tcgen05.mma.cta_group::1.kind::f16 "
                        "[ %r876 + 0 ], [ %r605 + 0 ], %rd136, %r606, %p6;' (A from TMEM; 3.6 not compiled)",
    "emulated dot_scaled": "the sm90 decomposition (TTGIR of 3.9 for sm100, 64x64x64 e4m3: 'tt.fp_to_fp' to bf16, "
                           "'arith.mulf' by the scale), then kind::f16 (3.9/3.6: 4 '...kind::f16' for 64x64x64)",
    "tf32x3": "F32DotTC splits each fp32 operand ('cvt.rna.tf32.f32 %r41, %r42;' then 'sub.f32 %r232, %r42, %r41;'), "
              "then three kind::tf32 chains, A read from TMEM (3.9 128x64x32 w4, loaded acc: '@%p7 tcgen05.mma."
              "cta_group::1.kind::tf32 [ %r668 + 0 ], [ %r530 + 0 ], %rd156, %r380, %p6;', A advancing 8 TMEM columns "
              "a step: '[ %r530 + 8 ]', '+ 16', '+ 24'; 3.6: '[ %r652 + 0 ], [ %r518 + 0 ], %rd156, %r380, %p3;'): "
              "a_small x b_big into a TMEM accumulator stored as zeros ('ttng.tmem_store %cst_2'), a_big x b_small "
              "into the same one, read back ('tcgen05.ld.sync.aligned.32x32b.x128.b32'), NaN to 0 ('setp.num.f32 "
              "%p17, %r304, %r304;' 'selp.f32 %r432, %r304, 0f00000000, %p17;'), stored again, a_big x b_big on it, "
              "read back, and only then the tile's accumulator added: 'add.f32x2 %rd237, %rd4, %rd236;' (TTGIR "
              "'arith.addf %acc_49, %c_31'; 3.6 the same: 'add.f32x2 %rd249, %rd4, %rd248;'). 12 instructions for "
              "K=32, 4 a chain",
    "refused": "bf16 x bf16 and e4m3 x bf16 on a native tile (3.6/3.9: PassManager::run failed; 'Unsupported type' "
               "at MMAv5.cpp, 'LHS and RHS operand dtypes kinds don't match'); e2m1 x e2m1 with K=32 on a native "
               "tile (3.9: 'K dimension must be at least 64 for this scaled MMA'; 3.6 fails too); NVFP4 on an "
               "emulated tile with 3.6 (as on sm90)",
}

_EMIN = {"fp16": -14, "bf16": -126, "tf32": -126, "e4m3": -6, "e5m2": -14, "e2m1": 0}


def _raw(x: torch.Tensor, emin: int) -> torch.Tensor:
    """Raw (encoded) exponent of finite float64 values: floor(log2|x|) clamped below at emin; _NEG for 0."""
    e = (torch.frexp(x)[1] - 1).to(torch.float64).clamp_min(emin)
    return torch.where(x != 0, e, torch.full_like(e, _NEG))


def operand(x: torch.Tensor, fmt: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(values as float64 with inf/NaN, raw exponents) of operand values in ``fmt`` (fp16, bf16, tf32 (fp32 bits
    truncated to tf32 first), e4m3, e5m2, e2m1 (values)); zero, inf and NaN get _NEG."""
    if fmt == "tf32":
        x = (x.float().view(torch.int32) & -8192).view(torch.float32)
    v = x.double()
    fin = torch.isfinite(v)
    return v, _raw(torch.where(fin, v, 0.0), _EMIN[fmt])


def scale_operand(s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(values, raw exponents) of block scales: e8m0 codes (uint8: 2^(s-127), 0xFF NaN) or ue4m3
    (float8_e4m3fn: the 7 low bits as an unsigned e4m3, 0x7F NaN; zero is zero)."""
    if s.dtype == torch.uint8:
        c = s.to(torch.int64)
        raw = (c - 127).double()
        v = torch.ldexp(torch.ones_like(raw), raw)
        return torch.where(c == 255, torch.full_like(v, float("nan")), v), raw
    u = (s.contiguous().view(torch.uint8) & 0x7F).view(torch.float8_e4m3fn).double()
    fin = torch.isfinite(u)
    return u, _raw(torch.where(fin, u, 0.0), -6)


_LOW29 = -(1 << 29)  # int64 mask that clears a float64's low 29 significand bits
_FLOOR = -600.0  # a window exponent below every real one (raw exponents here are >= -126 - 126 - 254 - 12)


def _pow2(e: torch.Tensor) -> torch.Tensor:
    return ((e.to(torch.int64) + 1023) << 52).view(torch.float64)


def _trunc_div(x: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """trunc(x / q) for a power of two q: exact (a power-of-two division, then truncation toward zero)."""
    return torch.div(x, q, rounding_mode="trunc")


def _rz_f32(x: torch.Tensor) -> torch.Tensor:
    """x (float64, finite) truncated toward zero to fp32 (subnormals kept), +-inf from 2^128 on, +0 for 0. Why bit
    masks: a float64 holds an fp32 significand with 29 bits to spare, so clearing its low 29 bits truncates toward
    zero wherever the result is an fp32 normal; below 2^-126 the grid is fp32's subnormal step 2^-149; the cast of
    the truncated value to fp32 is then exact, and inf from 2^128 on."""
    r = (x.view(torch.int64) & _LOW29).view(torch.float64)
    r = torch.where(r.abs() < 2.0 ** -126, _trunc_div(x, 2.0 ** -149) * 2.0 ** -149, r)
    return (r + 0.0).float().double()  # + 0.0: a -0 sum is +0


def _raw_c(C: torch.Tensor) -> torch.Tensor:
    """Raw exponent of finite fp32 accumulator values (a subnormal's is -126); _NEG for 0."""
    return torch.where(C != 0, (torch.frexp(C)[1] - 1).to(torch.float64).clamp_min(-126), _NEG)


def _window_step(P: torch.Tensor, maxR: torch.Tensor, C: torch.Tensor, row: Tcgen05Kind) -> torch.Tensor:
    """One instruction of a one-window kind on finite terms: P [..., M, N, k] exact products, maxR [..., M, N]
    the largest raw exponent sum of its nonzero products (_NEG: none), C finite fp32 values as float64."""
    top = torch.maximum(maxR, _raw_c(C))
    qq = _pow2(torch.where(top > _NEG / 2, top - row.window, 0.0))
    units = _trunc_div(P, qq[..., None]).sum(-1) + _trunc_div(C, qq)
    return _rz_f32(units * qq)


def _grouped_step(gsum: torch.Tensor, gR: torch.Tensor, gS: torch.Tensor, msum: torch.Tensor, C: torch.Tensor,
                  row: Tcgen05Kind) -> torch.Tensor:
    """One instruction of an mxf4 / mxf4nvf4 kind on finite terms: gsum [..., g, M, N] each product group's exact
    sum (scales in), msum [..., m, M, N] the exact sums of the K=16 merge groups, gR the largest raw exponent of a
    nonzero scaled product of each merge group and gS its scale-pair raw exponent (_NEG for a merge group of zero
    products); C [..., M, N] finite fp32 values as float64. The per-group rules (c's window, the subnormal floor)
    are stated for kinds whose product groups are the merge groups."""
    maxR = gR.amax(-3)
    Smax = gS.amax(-3)
    rc = _raw_c(C)
    anyp = maxR > _NEG / 2
    cnz = C != 0
    cdom = cnz & anyp & (rc >= maxR) & row.c_merge
    # c outranks every product: c's 35-bit window over the K=16 group sums
    qa = _pow2(torch.where(cdom, rc - 35, 0.0))
    ua = _trunc_div(C, qa) + _trunc_div(msum, qa).sum(-3)
    # products lead: the wide window and the scale floor
    qe = torch.where(anyp, torch.maximum(torch.maximum(maxR, rc) - row.window, Smax - row.scale_floor), 0.0)
    qb = _pow2(qe)
    uc = _trunc_div(C, qb)
    if row.per_group_c or row.subnormal_floor is not None:
        assert row.product_group == 16, "per-group rules are stated for K=16 product groups"
    if row.per_group_c:
        gq = torch.where(cnz & (gR > _NEG / 2) & (rc >= gR), torch.maximum(qe, rc - 35), qe)
        bu = _trunc_div(gsum, _pow2(gq)) * _pow2(gq - qe)
    else:
        bu = _trunc_div(gsum, qb.to(gsum.dtype))
    d = _rz_f32((uc + bu.sum(-3, dtype=torch.float64)) * qb)
    if row.subnormal_floor is not None:
        sub = (d != 0) & (d.abs() < 2.0 ** -126)
        if bool(sub.any()):
            thr = torch.where(qe < row.subnormal_floor, _pow2(row.subnormal_floor - qe), 1.0)
            drop = (gS > _NEG / 2) & (gS < Smax) & (bu.abs() < thr)
            d = torch.where(sub, _rz_f32((uc + torch.where(drop, 0.0, bu).sum(-3)) * qb), d)
    d = torch.where(cdom, _rz_f32(ua * qa), d)
    return torch.where(anyp, d, torch.where(cnz, C, 0.0))


def _nan_word(out: torch.Tensor) -> torch.Tensor:
    return torch.where(torch.isnan(out), torch.tensor(NAN_WORD, dtype=torch.int32).view(torch.float32), out)


def _chain_grouped(A: torch.Tensor, RA: torch.Tensor, B: torch.Tensor, RB: torch.Tensor, C: torch.Tensor,
                   row: Tcgen05Kind, SA: tuple[torch.Tensor, torch.Tensor], SB: tuple[torch.Tensor, torch.Tensor]
                   ) -> torch.Tensor:
    """:func:`mma_chain` for the grouped kinds (e2m1 operands, always finite), all k at once. Why matmuls are
    exact here: a group's products share one scale pair (a group lies in one scale block), so its sum is the
    unscaled group sum (multiples of 1/4, at most 16 * 36: exact in any order) times the two scales (powers of two,
    or ue4m3 values of 4 bits); its largest raw exponent is read from one matmul of 2^(5 * raw) weights: e2m1's
    nonzero raw exponents are 0-2, a group holds at most 16 < 32 products per level, so the sum's level
    floor(log2 / 5) is the largest raw exponent sum."""
    g = row.product_group
    K = A.shape[-1]
    lead = A.shape[:-2]
    M, N = A.shape[-2], B.shape[-1]
    G = K // g

    def groups_a(x: torch.Tensor) -> torch.Tensor:  # [..., M, K] -> [..., G, M, g]
        return x.reshape(*lead, M, G, g).transpose(-3, -2)

    def groups_b(x: torch.Tensor) -> torch.Tensor:  # [..., K, N] -> [..., G, g, N]
        return x.reshape(*lead, G, g, N)

    # the scales go into the operands: a product group lies in one scale block, so its sum of scaled products is
    # exact as the sum of its unscaled products was; fp32 where every scaled value and product fits it exactly
    # (NVFP4's ue4m3 scales: at most 4 + 2 significant bits a value, 2^-20..2^11), else float64
    sa_v, sb_v = torch.where(torch.isnan(SA[0]), 0.0, SA[0]), torch.where(torch.isnan(SB[0]), 0.0, SB[0])
    As, Bs = A * sa_v, B * sb_v
    f32 = all(bool(x.abs().amax() < 2.0 ** 30) and bool((x == 0).logical_or(x.abs() > 2.0 ** -30).all())
              for x in (As, Bs) if x.numel())
    wide = torch.float32 if f32 else torch.float64
    gsum = groups_a(As.to(wide)) @ groups_b(Bs.to(wide))  # [..., G, M, N]: each product group's exact sum
    # largest raw exponents and scales per K=16 merge group (a scale block holds whole merge groups, so a merge
    # group's scale pair is one; its largest product exponent is the largest of its product groups')
    G16 = K // 16
    wa = torch.where(A != 0, torch.exp2(5 * RA.clamp_min(0)), 0.0).reshape(*lead, M, G16, 16).transpose(-3, -2)
    wb = torch.where(B != 0, torch.exp2(5 * RB.clamp_min(0)), 0.0).reshape(*lead, G16, 16, N)
    lv = wa @ wb
    nz = lv > 0
    lvl = ((torch.frexp(lv)[1] - 1) // 5).to(torch.float64)
    sav, sar = (x[..., ::16].transpose(-1, -2)[..., :, :, None] for x in SA)   # [..., G16, M, 1]
    sbv, sbr = (x[..., ::16, :][..., :, None, :] for x in SB)                  # [..., G16, 1, N]
    gS = torch.where(nz, sar + sbr, _NEG)
    gR = torch.where(nz, lvl + sar + sbr, _NEG)
    scale_nan = torch.isnan(sav) | torch.isnan(sbv)
    per = 16 // g
    msum = gsum.reshape(*lead, G16, per, M, N).sum(-3, dtype=torch.float64) if per > 1 else gsum.double()
    m_i = row.k // 16  # merge groups per instruction
    acc = C.double()
    for i in range(K // row.k):
        sl, slg = slice(i * m_i, (i + 1) * m_i), slice(i * m_i * per, (i + 1) * m_i * per)
        fin = torch.isfinite(acc)
        d = _grouped_step(gsum[..., slg, :, :], gR[..., sl, :, :], gS[..., sl, :, :], msum[..., sl, :, :],
                          torch.where(fin, acc, 0.0), row)
        d = torch.where(fin, d, acc)  # an inf accumulator meets finite products: itself; NaN stays NaN
        acc = torch.where(scale_nan[..., sl, :, :].any(-3), float("nan"), d)
    return _nan_word(acc.float())


def _chain_window(A: torch.Tensor, RA: torch.Tensor, B: torch.Tensor, RB: torch.Tensor, C: torch.Tensor,
                  row: Tcgen05Kind, SA: tuple[torch.Tensor, torch.Tensor] | None,
                  SB: tuple[torch.Tensor, torch.Tensor] | None) -> torch.Tensor:
    """:func:`mma_chain` of a one-window kind on finite operands, one instruction at a time. Why it is exact and
    cheaper: an instruction's scale pair is one per output (mxf8f6f4: a scale block is the instruction's k, so
    ``2^S`` scales every product alike: aligning ``a * b * 2^S`` at ``2^q`` is aligning ``a * b`` at ``2^(q - S)``);
    products of fp16 / FP8 / e2m1 values are exact in fp32 (at most 22 significant bits, exponents within
    [-48, 32]) and so are their quotients by the window step (a power of two, clamped into fp32's range); bf16/tf32
    products (exponents to 2^-252) stay in float64."""
    k = row.k
    small = all(bool(torch.where(x != 0, r, 0.0).amin() > -60) and bool(x.abs().amax() < 2.0 ** 40)
                for x, r in ((A, RA), (B, RB)) if x.numel())
    wide = torch.float32 if small else torch.float64
    lo, hi = (-149, 127) if small else (-1022, 1023)
    Af, Bt = A.to(wide), B.transpose(-1, -2).to(wide)
    ra = torch.where(A != 0, RA, _NEG).to(torch.float32)
    rb = torch.where(B != 0, RB, _NEG).transpose(-1, -2).to(torch.float32)
    acc = C.double()
    for i in range(A.shape[-1] // k):
        sl = slice(i * k, (i + 1) * k)
        ab = Af[..., :, None, sl] * Bt[..., None, :, sl]
        maxR = (ra[..., :, None, sl] + rb[..., None, :, sl]).amax(-1).double()
        S = 0.0
        nan = None
        if SA is not None:  # one scale pair per instruction (a scale block is its k)
            sav, sar = SA[0][..., :, i * k], SA[1][..., :, i * k]
            sbv, sbr = SB[0][..., i * k, :], SB[1][..., i * k, :]
            S = sar[..., :, None] + sbr[..., None, :]
            nan = torch.isnan(sav)[..., :, None] | torch.isnan(sbv)[..., None, :]
        fin = bool(torch.isfinite(acc).all())
        c = acc if fin else torch.where(torch.isfinite(acc), acc, 0.0)
        # the window, floored where there is nothing to align (no nonzero product, c = 0)
        q = (torch.maximum(torch.where(maxR > _NEG / 2, maxR + S, _NEG), _raw_c(c)) - row.window).clamp_min(_FLOOR)
        # the step in units of the unscaled products, held in their type: where products set the window it is at
        # least 2^-145 (fp32 products here are >= 2^-120); clamped elsewhere, which moves no product's units (a zero
        # product's are 0, and a c that sets a window above 2^hi leaves every product below it)
        step = _pow2((q - S).clamp(lo, hi)).to(wide)
        units = _trunc_div(ab, step[..., None]).sum(-1, dtype=torch.float64)
        qq = _pow2(q)
        d = _rz_f32(units * qq + _trunc_div(c, qq) * qq)
        if not fin:
            d = torch.where(torch.isfinite(acc), d, acc)
        acc = d if nan is None else torch.where(nan, float("nan"), d)
    return _nan_word(acc.float())


def mma_chain(A: torch.Tensor, RA: torch.Tensor, B: torch.Tensor, RB: torch.Tensor, C: torch.Tensor,
              row: Tcgen05Kind, SA: tuple[torch.Tensor, torch.Tensor] | None = None,
              SB: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
    """The chain of ``tcgen05.mma`` instructions of ``row`` over k, in k order: A [..., M, K] and B [..., K, N]
    operand values (float64, inf/NaN allowed) with their raw exponents RA, RB (:func:`operand`), C [..., M, N]
    fp32 values in float64 (inf/NaN allowed); SA = (values, raw) of A's scales per k [..., M, K], SB of B's
    [..., K, N] (:func:`scale_operand`, repeated over their blocks), None for unscaled kinds. K must be a
    multiple of the instruction's k. Returns fp32 (NaNs are the word 0x7fffffff).

    Every product, its raw exponent and the largest of each instruction are formed once for all k; the chain
    then only aligns each instruction's products to the window its accumulator sets."""
    K = A.shape[-1]
    if K % row.k:
        raise ValueError(f"K={K} is not a multiple of {row.kind}'s k={row.k}")
    if row.product_group is not None:
        if not (bool(torch.isfinite(A).all()) and bool(torch.isfinite(B).all())):
            raise ValueError(f"{row.kind}: e2m1 operands are finite; got inf/NaN values")
        return _chain_grouped(A, RA, B, RB, C, row, SA, SB)
    if bool(torch.isfinite(A).all()) and bool(torch.isfinite(B).all()) and \
            (SA is None or row.scale_block == row.k):
        return _chain_window(A, RA, B, RB, C, row, SA, SB)
    lead = A.shape[:-2]
    M, N = A.shape[-2], B.shape[-1]
    nI = K // row.k
    Bt, RBt = B.transpose(-1, -2), RB.transpose(-1, -2)
    raw = A[..., :, None, :] * Bt[..., None, :, :]  # IEEE: the special values' classes
    R = RA[..., :, None, :] + RBt[..., None, :, :]
    if SA is not None:
        sbv, sbr = SB[0].transpose(-1, -2), SB[1].transpose(-1, -2)
        raw = raw * SA[0][..., :, None, :] * sbv[..., None, :, :]
        R = R + SA[1][..., :, None, :] + sbr[..., None, :, :]
    fin = torch.isfinite(raw)
    specials = not bool(fin.all())
    P = torch.where(fin, raw, 0.0) if specials else raw
    maxR = torch.where(P != 0, R, _NEG).reshape(*lead, M, N, nI, row.k).amax(-1)
    acc = C.double()
    for i in range(nI):
        sl = slice(i * row.k, (i + 1) * row.k)
        cfin = torch.isfinite(acc)
        d = _window_step(P[..., sl], maxR[..., i], torch.where(cfin, acc, 0.0), row)
        special = ~cfin
        if specials:
            special = special | ~fin[..., sl].all(-1)
        if bool(special.any()):
            ieee = torch.where(cfin, 0.0, acc)
            if specials:
                ieee = ieee + torch.where(fin[..., sl], 0.0, raw[..., sl]).sum(-1)
            d = torch.where(special, ieee, d)
        acc = d
    return _nan_word(acc.float())


# --- tl.dot and tl.dot_scaled on tcgen05 ------------------------------------------------------------------------

#: torch dtype -> operand format of a plain tl.dot
_PLAIN = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "tf32", torch.float8_e4m3fn: "e4m3",
          torch.float8_e5m2: "e5m2"}


def check_arch(arch: str) -> None:
    """sm100 only: the published model was validated on B200; other tcgen05 archs (sm103, sm110) are unverified."""
    if arch != "sm100":
        raise NotImplementedError(f"harness.tensor_cores: {arch}'s tcgen05.mma numerics are unverified: the published "
                                  "model (sf-tensor/tcgen05) was validated on B200 (sm100) only, and no published "
                                  f"source says {arch} computes the same")


def plain_dot(a: torch.Tensor, b: torch.Tensor, C: torch.Tensor, input_precision: str | None = None) -> torch.Tensor:
    """``tl.dot(a, b, acc)`` of one tile (or a batch of tiles) under ``tcgen05.mma`` (:data:`LOWERING`): fp16/bf16
    -> kind::f16, fp32 -> kind::tf32 (``"tf32"``: the fp32 bits, read as tf32; ``"tf32x3"``: Triton's three-dot
    split, each dot a kind::tf32 chain), FP8 (any e4m3/e5m2 pair) -> kind::f8f6f4. C: fp32 values as float64.
    Returns fp32 (``"ieee"`` is not a tensor-core dot: the caller's FMA dot)."""
    fa, fb = _PLAIN[a.dtype], _PLAIN[b.dtype]
    if {fa, fb} <= {"e4m3", "e5m2"}:
        row = KINDS["f8f6f4"]
    elif fa != fb:
        raise NotImplementedError(f"harness.tensor_cores.dot: mixed operands {fa} x {fb} are not modelled")
    else:
        row = KINDS["tf32" if fa == "tf32" else "f16"]
    K = a.shape[-1]
    pad = (-K) % row.k  # zero products change nothing: a K below the instruction's k is padded by the compiler
    if pad:
        a = torch.nn.functional.pad(a.float(), (0, pad)).to(a.dtype)
        b = torch.nn.functional.pad(b.float(), (0, 0, 0, pad)).to(b.dtype)
    if fa == "tf32" and (input_precision or "tf32") == "tf32x3":
        return _tf32x3(a, b, C, row)
    A, RA = operand(a, fa)
    B, RB = operand(b, fb)
    return mma_chain(A, RA, B, RB, C, row)


def _tf32x3(a: torch.Tensor, b: torch.Tensor, C: torch.Tensor, row: Tcgen05Kind) -> torch.Tensor:
    """Triton's F32DotTC split (the TTGIR pass every NVIDIA target runs, ``tritongpu-F32DotTC`` in the sm100
    pipeline of 3.9): big = cvt.rna.tf32(x), small = x - big; dot(a_small, b_big, 0), then dot(a_big, b_small, ...),
    NaNs of that set to 0, then dot(a_big, b_big, ...), then add.f32 to the accumulator: the order and the TMEM
    round trips of the PTX that Triton 3.6 and 3.9 emit for cuda:100 (:data:`LOWERING` "tf32x3")."""
    def rna(x: torch.Tensor) -> torch.Tensor:
        i = x.float().view(torch.int32)
        return torch.where(torch.isfinite(x.float()), (i + 0x1000) & -8192, i).view(torch.float32)

    def tc(x: torch.Tensor, y: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        X, RX = operand(x, "tf32")
        Y, RY = operand(y, "tf32")
        return mma_chain(X, RX, Y, RY, c, row).double()

    a_big, b_big = rna(a), rna(b)
    a_small, b_small = a.float() - a_big, b.float() - b_big
    zero = torch.zeros_like(C)
    if all(bool(torch.isfinite(x).all()) for x in (a_big, b_big, a_small, b_small)):
        # finite split operands (not so for a finite x that rna rounds up to inf): the three chains are one chain
        # over their k ranges end to end (K is a whole number of instructions, and a NaN needs an inf or NaN operand:
        # a finite instruction overflows to inf, and an inf accumulator stays itself), so the NaN rule has nothing to
        # do and one call does the work of three
        return tc(torch.cat([a_small, a_big, a_big], -1), torch.cat([b_big, b_small, b_big], -2), zero).float() + \
            C.float()
    d1 = tc(a_big, b_small, tc(a_small, b_big, zero))
    d1 = torch.where(torch.isnan(d1), zero, d1)
    d2 = tc(a_big, b_big, d1)
    return d2.float() + C.float()


def scaled_row(fa: str, fb: str, scale: torch.dtype | None, group: int) -> Tcgen05Kind:
    """The kind Triton emits for a native ``tl.dot_scaled`` (:data:`LOWERING`): e2m1 x e2m1 with e8m0 scales in
    groups of 32 -> kind::mxf4 (scale_vec::2X), in groups of 16 -> kind::mxf4nvf4 scale_vec::4X, with ue4m3
    (NVFP4) -> kind::mxf4nvf4 scale_vec::4X; any other pair of e2m1/e4m3/e5m2 -> kind::mxf8f6f4."""
    if fa == fb == "e2m1":
        if scale == torch.float8_e4m3fn:
            return KINDS["nvfp4"]
        return KINDS["mxf4" if group == 32 else "mxf4nvf4_4x"]
    return KINDS["mxf8f6f4"]


def native_tile(m: int, n: int) -> bool:
    """Whether Triton runs a ``tl.dot_scaled`` tile of ``m`` x ``n`` (on a multiple of 4 warps, both operands
    scaled) on native ``tcgen05.mma ... block_scale`` on sm100: M a multiple of 128 and N >= 16 (Triton 3.6 and
    3.9; below that, or with an unscaled operand, the tile is emulated: upcast to bf16 and kind::f16,
    :data:`LOWERING`)."""
    return m % 128 == 0 and n >= 16
