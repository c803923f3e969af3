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
#: the PTX line it was read from (``scripts/compile_tcgen05_lowering.py``, compiled on the CPU box)
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
    "emulated dot_scaled": "the sm90 decomposition (TTGIR of 3.9 for sm100, 64x64x64 e4m3: 'tt.fp_to_fp' to bf16, "
                           "'arith.mulf' by the scale), then kind::f16 (3.9/3.6: 4 '...kind::f16' for 64x64x64)",
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


def _pow2(e: torch.Tensor) -> torch.Tensor:
    return ((e.to(torch.int64) + 1023) << 52).view(torch.float64)


def _trunc_div(x: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """trunc(x / 2^q): exact (a power-of-two division in float64's range, then truncation)."""
    return torch.div(x, q, rounding_mode="trunc")


def _rz_f32(x: torch.Tensor) -> torch.Tensor:
    """x (float64, finite) truncated toward zero to fp32 (subnormals kept), +-inf from 2^128 on, +0 for 0."""
    e = (torch.frexp(x)[1] - 1).to(torch.float64).clamp_min(-126)
    step = _pow2(e - 23)
    r = _trunc_div(x, step) * step
    r = torch.where(r.abs() >= 2.0 ** 128, torch.copysign(torch.full_like(r, float("inf")), r), r)
    return torch.where(x != 0, r, torch.zeros_like(r))


def _one(P: torch.Tensor, R: torch.Tensor, S: torch.Tensor | None, C: torch.Tensor, row: Tcgen05Kind) -> torch.Tensor:
    """One instruction on finite terms: P [..., k] exact products (scales in), R [..., k] their raw exponent sums
    (_NEG for zero products), S [..., k] scale-pair raw exponents (scaled kinds), C [...] finite fp32 values.
    Returns the fp32 results as float64."""
    nz = P != 0
    R = torch.where(nz, R, _NEG)
    maxR = R.amax(-1)
    rc = torch.where(C != 0, (torch.frexp(C)[1] - 1).to(torch.float64).clamp_min(-126), _NEG)
    anyp = maxR > _NEG / 2
    if row.product_group is None:  # one window, every product truncated on its own
        top = torch.maximum(maxR, rc)
        q = torch.where(top > _NEG / 2, top - row.window, 0.0)
        qq = _pow2(q)
        units = _trunc_div(P, qq[..., None]).sum(-1) + _trunc_div(C, qq)
        return _rz_f32(units * qq)
    Smax = torch.where(nz, S, _NEG).amax(-1)
    lead = P.shape[:-1]
    g = row.product_group
    gsum = P.reshape(*lead, -1, g).sum(-1)  # exact: a group's products share one scale pair (see module docstring)
    m = 16  # the c-dominant merge groups
    msum = P.reshape(*lead, -1, m).sum(-1)
    cnz = C != 0
    cdom = cnz & anyp & (rc >= maxR)
    # c outranks every product: c's 35-bit window over K=16 group sums
    qa = _pow2(torch.where(cdom, rc - 35, 0.0))
    ua = _trunc_div(C, qa) + _trunc_div(msum, qa[..., None]).sum(-1)
    # products lead: the wide window and the scale floor
    top = torch.maximum(maxR, rc) - row.window
    qe = torch.where(anyp, torch.maximum(top, Smax - row.scale_floor), 0.0)
    qb = _pow2(qe)
    uc = _trunc_div(C, qb)
    if row.per_group_c:
        gR = R.reshape(*lead, -1, g).amax(-1)
        gq = torch.where(cnz[..., None] & (gR > _NEG / 2) & (rc[..., None] >= gR),
                         torch.maximum(qe[..., None], rc[..., None] - 35), qe[..., None])
        bu = _trunc_div(gsum, _pow2(gq)) * _pow2(gq - qe[..., None])
    else:
        bu = _trunc_div(gsum, qb[..., None])
    ub = uc + bu.sum(-1)
    d = _rz_f32(ub * qb)
    if row.subnormal_floor is not None:
        sub = (d != 0) & (d.abs() < 2.0 ** -126)
        if bool(sub.any()):
            gS = torch.where(nz, S, _NEG).reshape(*lead, -1, g).amax(-1)
            thr = torch.where(qe < row.subnormal_floor, _pow2(row.subnormal_floor - qe), 1.0)
            drop = (gS > _NEG / 2) & (gS < Smax[..., None]) & (bu.abs() < thr[..., None])
            ub2 = uc + torch.where(drop, 0.0, bu).sum(-1)
            d = torch.where(sub, _rz_f32(ub2 * qb), d)
    d = torch.where(cdom, _rz_f32(ua * qa), d)
    return torch.where(anyp, d, torch.where(cnz, C, 0.0))


def mma_chain(A: torch.Tensor, RA: torch.Tensor, B: torch.Tensor, RB: torch.Tensor, C: torch.Tensor,
              row: Tcgen05Kind, SA: tuple[torch.Tensor, torch.Tensor] | None = None,
              SB: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
    """The chain of ``tcgen05.mma`` instructions of ``row`` over k, in k order: A [..., M, K] and B [..., K, N]
    operand values (float64, inf/NaN allowed) with their raw exponents RA, RB (:func:`operand`), C [..., M, N]
    fp32 values in float64 (inf/NaN allowed); SA = (values, raw) of A's scales per k [..., M, K], SB of B's
    [..., K, N] (:func:`scale_operand`, repeated over their blocks), None for unscaled kinds. K must be a
    multiple of the instruction's k. Returns fp32 (NaNs are the word 0x7fffffff)."""
    K = A.shape[-1]
    if K % row.k:
        raise ValueError(f"K={K} is not a multiple of {row.kind}'s k={row.k}")
    scaled = SA is not None
    At, Bt = A, B.transpose(-1, -2)
    RBt = RB.transpose(-1, -2)
    if scaled:
        sav, sar = SA
        sbv, sbr = SB[0].transpose(-1, -2), SB[1].transpose(-1, -2)
    acc = C.double()
    for k0 in range(0, K, row.k):
        sl = slice(k0, k0 + row.k)
        a, b = At[..., :, None, sl], Bt[..., None, :, sl]
        raw = a * b  # IEEE: the special values' classes
        R = RA[..., :, None, sl] + RBt[..., None, :, sl]
        S = None
        if scaled:
            sa, sb = sav[..., :, None, sl], sbv[..., None, :, sl]
            raw = raw * sa * sb
            S = sar[..., :, None, sl] + sbr[..., None, :, sl]
            R = R + S
        fin = torch.isfinite(raw)
        cfin = torch.isfinite(acc)
        P = torch.where(fin, raw, 0.0)
        d = _one(P, R, S, torch.where(cfin, acc, 0.0), row)
        special = ~cfin | ~fin.all(-1)
        if bool(special.any()):
            ieee = torch.where(cfin, 0.0, acc) + torch.where(fin, 0.0, raw).sum(-1)
            d = torch.where(special, ieee, d)
        acc = d
    out = acc.float()
    return torch.where(torch.isnan(out), torch.tensor(NAN_WORD, dtype=torch.int32).view(torch.float32), out)


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
    NaNs of that set to 0, then dot(a_big, b_big, ...), then add.f32 to the accumulator."""
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
    """Whether Triton runs a ``tl.dot_scaled`` tile of ``m`` x ``n`` (on a multiple of 4 warps) on native
    ``tcgen05.mma ... block_scale`` on sm100: M a multiple of 128 and N >= 16 (Triton 3.6 and 3.9; below that the
    tile is emulated: upcast to bf16 and kind::f16, :data:`LOWERING`)."""
    return m % 128 == 0 and n >= 16
