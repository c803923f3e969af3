"""``tl.dot_scaled`` as the target computes it: the operands upcast and scaled the way Triton's lowering does, then
the ordinary tensor-core dot of :mod:`.chain`.

Why a model of its own: sm90 has no block-scaled MMA. Triton decomposes ``dot_scaled`` (its
``TritonGPUAccelerateMatmul`` pass) into an upcast of each operand to bf16 (fp16 when either format is fp16), a
multiply by the scale in that type, and a plain bf16/fp16 ``wgmma``; every rounding, overflow and NaN of that
upcast is visible in the product. Triton's interpreter (3.8/3.9) instead multiplies in fp32 with numpy's matmul, so
57-88% of its outputs differ from the H200 (issue 26).

What the lowering does on sm90, read from the TTGIR and PTX of Triton 3.6.0 and 3.9.0
(``triton.compile(ASTSource(...), target=GPUTarget("cuda", 90, 32))``, every format pair, fast_math on and off,
compiled 2026-12-04; :data:`LOWERINGS` holds it as data):

- compute type: fp16 if either format is fp16, else bf16; the dot is ``wgmma ... f32.bf16.bf16`` (``.f16.f16``).
  fp8 operands never reach an FP8 ``wgmma``;
- operand upcast (``tt.fp_to_fp`` / ``ttg.fp4_to_fp``): e2m1, e4m3 (``cvt.rn.f16x2.e4m3x2`` then
  ``cvt.bf16.f16``) and e5m2 to fp16 (``cvt.rn.f16x2.e5m2x2``) are exact. e5m2 to bf16 is a bit trick, the
  same in both versions: the e5m2 byte shifted into a bf16 exponent field and multiplied by 2^112
  (``mul.rn.bf16x2 ... 0x77807780``), so the e5m2 infinities and NaNs come out *finite*: ±2^16·(1 + m/4).
  bf16 to fp16 (3.9, a bf16 x fp16 pair) is ``cvt.rn.f16.bf16``: round to nearest even, overflow to inf;
- e8m0 scale code s, bf16 compute: the bf16 with bits ``s << 7`` (2^(s-127); 3.6: s = 0 is +0, 3.9 raises the
  bits to at least 0x0040, so s = 0 is 2^-127); fp16 compute: the fp32 with bits ``s << 23`` rounded to fp16
  (``cvt.rn.f16.f32``: 2^(s-127) is 0 below s = 103, inf from s = 143; s = 0 is 0 in both versions);
- scale code 255: 3.6 selects NaN for every element of its group (``arith.select``), 3.9 makes the scale NaN with
  ``fma(s, 0, s)``; with fast_math neither is emitted (3.6 and 3.9: no ``arith.select``/``selp``, no fma) and the
  scale stays inf (so x·inf = ±inf, 0·inf = NaN);
- e4m3 scales (NVFP4, groups of 16): Triton 3.6 refuses them for sm90 (``PassManager::run failed``,
  :func:`harness.arch.supports_scaled_dot`); 3.9 upcasts the scale byte as an e4m3 number (sign bit included,
  NaN for 0x7F/0xFF) to the compute type. Groups of 16 with e8m0 bytes compile on 3.9 only;
- the scale multiply is ``mul.bf16`` / ``mul.f16``: round to nearest even, subnormals kept, overflow to inf;
- bf16 x fp16, and e2m1 packed along M or N (``lhs_k_pack``/``rhs_k_pack=False``), are refused by Triton 3.6
  for sm90 (``PassManager::run failed``, compiled here 2026-12-04); 3.9 compiles both (the same upcast, unpacked
  along M/N);
- k order: the scaled operands feed one ordinary dot over the tile's K (:func:`harness.tensor_cores.dot`); under
  ``wgmma`` in the plain k order (the H200 capture's 64x64 tiles, 4 warps), under ``mma.sync`` (tiles below a
  warpgroup: 64x64 with 2 warps, compiled with 3.6 and 3.9) in the k order of the operand layout, as on sm80-sm89
  below (derived from the compiler output; the H200 capture ran no such tile).

Versions 3.7/3.8 were not compiled here; they are assumed to lower as 3.6 does (as :mod:`harness.arch` assumes
for the NVFP4 refusal).

sm80, sm86 and sm89 (read from the TTGIR/PTX of Triton 3.6.0 and 3.9.0 for each, every format pair, fast_math on
and off, NVFP4, groups of 16, e2m1 packed along M; ``scripts/compile_dot_scaled_lowering.py``, 2026-12-04) emulate
``dot_scaled`` as sm90 does, value for value: the same compute type, upcasts, scale codes and NaN rules per version
(:data:`LOWERINGS`). What differs is the instructions, not their results: the bf16 scale multiply is
``fma.rn.bf16(x, s, -0.0)`` (no ``mul.bf16`` before sm90; one rounding, the same value), e4m3 reaches bf16 through
``cvt.rn.f16x2.e4m3x2``, ``cvt.f32.f16``, ``cvt.rn.bf16.f32`` (exact), e5m2's bit trick multiplies by 2^112 in fp32
(exact), bf16 to fp16 is ``cvt.f32.bf16`` then ``cvt.rn.f16.f32`` (one rounding). The dot is ``mma.sync m16n8k16
.f32.bf16.bf16`` (``.f16.f16``) for every tile, the A100 row of :data:`harness.tensor_cores.MODELS` (published, not
measured here: no such GPU here), on operands in a ``dot_op`` layout of ``kWidth = 32 /`` the narrowest bit width
among the operands and scales (e2m1: 8; FP8 or any scale: 4; else 2), whose k order
:func:`harness.tensor_cores.chain.mma_k_order` gives (the one that FP8 ``tl.dot`` under mma.sync takes).
What their compilers refuse (:class:`DotScaledRefused`): e4m3 operands or NVFP4's e4m3 scales on sm80/sm86 (the front
end: "type fp8e4nv not supported in this architecture"), e2m1 with fp16 there (ptxas: the e2m1 to fp16 upcast's
``cvt .e4m3x2`` needs sm_89), and per version what sm90 refuses (3.6: NVFP4 on sm89, bf16 x fp16, packing along M/N,
e8m0 in groups of 16). Below sm80 nothing was compiled: ``NotImplementedError``.

sm100 (Triton 3.6 and 3.9 PTX for ``GPUTarget("cuda", 100, 32)``, :data:`harness.tensor_cores.tcgen05.LOWERING`):
tiles with M a multiple of 128 and N >= 16 on a multiple of 4 warps run native ``tcgen05.mma ... block_scale`` on
the operands and scales as stored (kind::mxf4, kind::mxf4nvf4 scale_vec::4X, kind::mxf8f6f4), whose published model
(:mod:`.tcgen05`) computes them; bf16/fp16 operands and e2m1 with K=32 on such tiles do not compile
(:class:`DotScaledRefused`). Smaller tiles are emulated as on sm90 (the same upcast and refusals) and the dot is
``tcgen05.mma kind::f16`` (the same model), or mma.sync below a warpgroup (and, with 3.6, for N < 16). sm103 and
other tcgen05 archs are unverified, sm120 is not modelled (``NotImplementedError`` naming what is known): its native
``mma.sync ... block_scale`` (e2m1 x e2m1 and FP8 pairs) has no published numerics, and mixed pairs are emulated
over ``mma.sync`` bf16 with upcasts not modelled here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from harness.names import names
from harness.tensor_cores.chain import dot, mma_k_order

if TYPE_CHECKING:
    from harness.arch import Arch

__all__ = ["FORMATS", "LOWERINGS", "DotScaledRefused", "ScaledLowering", "dot_scaled", "lowering_for"]

#: the operand formats ``tl.dot_scaled`` takes
FORMATS = ("e2m1", "e4m3", "e5m2", "bf16", "fp16")

_PTX = ("Triton {} TTGIR/PTX for sm80, sm86, sm89 and sm90 (triton.compile, every format pair, fast_math on/off; "
        "scripts/compile_dot_scaled_lowering.py; compiled 2026-12-04)")


class DotScaledRefused(NotImplementedError):
    """The target's compiler refuses this ``tl.dot_scaled`` (a kernel holding it does not compile there)."""


@dataclass(frozen=True)
class ScaledLowering:
    """How one Triton version lowers ``tl.dot_scaled`` for sm90, and for sm80-sm89 with the same values (see the
    module docstring)."""

    version: str           #: the Triton version it was read from
    zero_scale_bf16: str   #: e8m0 code 0 in bf16: "zero" (bits 0) or "2^-127" (bits raised to 0x0040)
    nan_255: str           #: code 255, NaN unless fast_math (then inf): by "select" or by "fma" (see above)
    e4m3_scales: bool      #: NVFP4 scales compile for sm89/sm90
    e8m0_group16: bool     #: e8m0 scales in groups of 16 compile
    bf16_fp16: bool        #: a bf16 x fp16 pair compiles (bf16 rounded to fp16)
    mn_packed: bool        #: e2m1 packed along M/N (``lhs_k_pack``/``rhs_k_pack=False``) compiles
    source: str

    def __repr__(self) -> str:
        return f"ScaledLowering(triton {self.version}; derived from the compiler output)"


#: Triton minor version -> its sm90 lowering (derived from the compiler output; see the module docstring)
LOWERINGS: dict[str, ScaledLowering] = {
    "3.6": ScaledLowering("3.6", "zero", "select", False, False, False, False, _PTX.format("3.6.0")),
    "3.9": ScaledLowering("3.9", "2^-127", "fma", True, True, True, True, _PTX.format("3.9.0")),
}

_E2M1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=torch.float64)
_OPERAND_DTYPES = {
    "e2m1": (torch.uint8,),
    "e4m3": (torch.float8_e4m3fn, torch.uint8),
    "e5m2": (torch.float8_e5m2, torch.uint8),
    "bf16": (torch.bfloat16, torch.int16, torch.uint16),
    "fp16": (torch.float16, torch.int16, torch.uint16),
}
#: (mantissa bits, smallest normal exponent, largest finite value) of the compute types
_GRID = {"bf16": (7, -126, (2 - 2 ** -7) * 2.0 ** 127), "fp16": (10, -14, 65504.0)}


def _minor(triton: str | None) -> str:
    if triton is None:
        from harness.versions import triton_version

        triton = triton_version()
    m = re.match(r"(\d+)\.(\d+)", str(triton))
    if m is None:
        raise ValueError(f"triton: expected a version such as '3.6' or '3.9.0'; got {triton!r}")
    return f"{m.group(1)}.{m.group(2)}"


def lowering_for(triton: str | None = None) -> ScaledLowering:
    """The sm90 lowering of Triton ``triton`` (default: the installed one); 3.7/3.8 are taken as 3.6 (not compiled
    here), releases after 3.9 as 3.9. Raises ``NotImplementedError`` for releases before 3.6."""
    minor = _minor(triton)
    key = tuple(int(x) for x in minor.split("."))
    if key < (3, 6):
        raise NotImplementedError(f"harness.tensor_cores.dot_scaled: Triton {minor}'s lowering is not modelled "
                                  f"(read from: {sorted(LOWERINGS)})")
    return LOWERINGS["3.6" if key < (3, 9) else "3.9"]


# --- exact values (float64) -------------------------------------------------------------------------------------

def _round(x: torch.Tensor, kind: str) -> torch.Tensor:
    """x (float64) rounded to the compute type ``kind`` (bf16/fp16): nearest even, subnormals kept, overflow to
    ±inf, NaN kept; float64 out."""
    mbits, emin, fmax = _GRID[kind]
    fin = torch.isfinite(x) & (x != 0)
    e = (torch.frexp(torch.where(fin, x, torch.ones_like(x)))[1] - 1).clamp_min(emin)
    q = torch.ldexp(torch.ones_like(x), (e - mbits).to(torch.float64))
    r = torch.round(x / q) * q  # torch.round: half to even
    r = torch.where(r.abs() > fmax, torch.copysign(torch.full_like(r, float("inf")), x), r)
    return torch.where(fin, r, x)


def _e2m1_values(codes: torch.Tensor) -> torch.Tensor:
    c = codes.to(torch.int64)
    v = _E2M1[c & 7]
    return torch.where((c & 8) != 0, -v, v)


def _unpack_e2m1(x: torch.Tensor, axis: int) -> torch.Tensor:
    """Packed e2m1 bytes -> values, two per byte along ``axis`` (low nibble first)."""
    lo, hi = _e2m1_values(x & 0xF), _e2m1_values(x >> 4)
    out = torch.stack((lo, hi), dim=axis + 1 if axis >= 0 else axis)
    shape = list(x.shape)
    shape[axis] *= 2
    return out.reshape(shape)


def _bits(x: torch.Tensor, dt: torch.dtype) -> torch.Tensor:
    return x.contiguous().view(torch.uint8).view(dt) if x.dtype.itemsize == 1 else x.contiguous().view(dt)


def _operand(x: torch.Tensor, fmt: str, compute: str, k_pack: bool, rhs: bool) -> torch.Tensor:
    """The operand's values after Triton's upcast to the compute type (float64; K along the last axis for the lhs,
    the second to last for the rhs, as in ``tl.dot``)."""
    if fmt == "e2m1":
        axis = (-2 if k_pack else -1) if rhs else (-1 if k_pack else -2)
        return _unpack_e2m1(x.to(torch.uint8) if x.dtype != torch.uint8 else x, axis)
    if fmt == "e5m2" and compute == "bf16":
        # the bit trick of both versions: fp16 bits (byte << 8), magnitude >> 3 into bf16, times 2^112
        c = _bits(x, torch.uint8).to(torch.int64)
        mag = ((c & 0x7F) << 8) >> 3
        v = mag.to(torch.int16).view(torch.bfloat16).double() * 2.0 ** 112  # exact: no rounding, no overflow
        return torch.where((c & 0x80) != 0, -v, v)
    dt = names(fmt).torch_dtype
    v = _bits(x, dt).double()
    if fmt == "bf16" and compute == "fp16":
        v = _round(v, "fp16")  # cvt.rn.f16.bf16 (3.9)
    return v


def _scale(s: torch.Tensor, compute: str, low: ScaledLowering, fast_math: bool) -> torch.Tensor:
    """The scale values in the compute type (float64) before the multiply; NaN for what the lowering makes NaN."""
    if s.dtype == torch.float8_e4m3fn:
        return s.double()  # tt.fp_to_fp e4m3 -> bf16/fp16: exact; 0x7F/0xFF NaN
    c = s.to(torch.int64)
    v = torch.ldexp(torch.ones_like(c, dtype=torch.float64), (c - 127).double())
    if compute == "bf16":
        zero = torch.full_like(v, 2.0 ** -127) if low.zero_scale_bf16 == "2^-127" else torch.zeros_like(v)
    else:
        zero = torch.zeros_like(v)
        v = _round(v, "fp16")  # the fp32 2^(s-127) through cvt.rn.f16.f32
    v = torch.where(c == 0, zero, v)
    v = torch.where(c == 255, torch.full_like(v, float("inf")), v)
    if low.nan_255 == "fma" and not fast_math:
        v = torch.where(c == 255, torch.full_like(v, float("nan")), v)  # fma(s, 0, s): inf*0 + inf
    return v


def _scaled(x: torch.Tensor, s: torch.Tensor | None, fmt: str, compute: str, low: ScaledLowering,
            fast_math: bool, k_pack: bool, rhs: bool) -> torch.Tensor:
    v = _operand(x, fmt, compute, k_pack, rhs)
    if s is None:
        return v
    k = v.shape[-2] if rhs else v.shape[-1]
    group = k // s.shape[-1]
    sv = _scale(s, compute, low, fast_math).repeat_interleave(group, dim=-1)
    if rhs:
        sv = sv.transpose(-1, -2)
    out = _round(v * sv, compute)  # mul.bf16 / mul.f16
    if low.nan_255 == "select" and not fast_math and s.dtype == torch.uint8:
        hit = (s.to(torch.int64) == 255).repeat_interleave(group, dim=-1)
        out = torch.where(hit.transpose(-1, -2) if rhs else hit, torch.full_like(out, float("nan")), out)
    return out


# --- checks ------------------------------------------------------------------------------------------------------

def _check_format(fmt: object, arg: str) -> str:
    if fmt not in FORMATS:
        raise ValueError(f"{arg}: expected one of {', '.join(FORMATS)}; got {fmt!r}")
    return fmt  # type: ignore[return-value]


def _check_operand(x: object, fmt: str, arg: str) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{arg}: expected a torch.Tensor; got {type(x).__name__}")
    if x.dtype not in _OPERAND_DTYPES[fmt]:
        want = " or ".join(str(d) for d in _OPERAND_DTYPES[fmt])
        raise TypeError(f"{arg}: a {fmt} operand must be {want}" + (" (two codes a byte, low nibble first)"
                        if fmt == "e2m1" else "") + f"; got {x.dtype}")
    if x.dim() not in (2, 3):
        raise ValueError(f"{arg}: expected a 2-D or 3-D (batched) tensor; got shape {tuple(x.shape)}")
    return x.cpu()


def _check_scale(s: object, x: torch.Tensor, rows: int, k: int, arg: str, low: ScaledLowering) -> torch.Tensor | None:
    if s is None:
        return None
    if not isinstance(s, torch.Tensor) or s.dtype not in (torch.uint8, torch.float8_e4m3fn):
        got = s.dtype if isinstance(s, torch.Tensor) else type(s).__name__
        raise TypeError(f"{arg}: expected None, e8m0 codes as torch.uint8 or e4m3 scales as torch.float8_e4m3fn; "
                        f"got {got}")
    batch = tuple(x.shape[:-2])
    if s.dim() != x.dim() or tuple(s.shape[:-2]) != batch or s.shape[-2] != rows or s.shape[-1] == 0 \
            or k % s.shape[-1] or k // s.shape[-1] not in (16, 32):
        raise ValueError(f"{arg}: expected shape {(*batch, rows, k // 32)} (groups of 32) or "
                         f"{(*batch, rows, k // 16)} (groups of 16) for K = {k}; got {tuple(s.shape)}")
    group = k // s.shape[-1]
    if s.dtype == torch.uint8 and group == 16 and not low.e8m0_group16:
        raise DotScaledRefused(f"{arg}: e8m0 scales in groups of 16 do not compile with Triton {low.version} "
                               "(its dot_scaled takes groups of 32 for e8m0)")
    return s.cpu()


def _check_refusals(arch: Arch, fa: str, fb: str, scales: list[torch.Tensor | None], low: ScaledLowering,
                    installed: bool, k_packs: tuple[bool, bool]) -> None:
    """What the target's compiler refuses (:class:`DotScaledRefused`), what is not modelled (``NotImplementedError``);
    the facts are the module docstring's."""
    cc, name = arch.cc or 0, arch.name
    if cc >= 120:
        raise NotImplementedError(
            f"harness.tensor_cores.dot_scaled: {name} is not modelled: Triton 3.6/3.9 run e2m1 x e2m1 and FP8 pairs on "
            "native mma.sync ... block_scale, whose numerics no published source gives, and emulate mixed pairs and "
            "16-bit operands over mma.sync bf16/fp16 with upcasts (cvt.rn.bf16x2.e2m1x2 ...) not modelled here "
            "(compiled 2026-12-04)")
    if cc < 80:
        raise NotImplementedError(f"harness.tensor_cores.dot_scaled: {name} is not modelled (Triton's lowering was "
                                  "read for sm80, sm86, sm89 and sm90 only)")
    nvfp4 = any(s is not None and s.dtype == torch.float8_e4m3fn for s in scales)
    if cc < 89 and ("e4m3" in (fa, fb) or nvfp4):
        what = "e4m3 operands" if "e4m3" in (fa, fb) else "NVFP4's e4m3 scales"
        raise DotScaledRefused(f"tl.dot_scaled with {what} does not compile for {name}: Triton's front end says 'type "
                               "fp8e4nv not supported in this architecture' (Triton 3.6 and 3.9, compiled 2026-12-04)")
    if cc < 89 and {fa, fb} == {"e2m1", "fp16"}:
        raise DotScaledRefused(f"an e2m1 x fp16 tl.dot_scaled does not compile for {name}: its e2m1 to fp16 upcast "
                               "uses cvt .e4m3x2, which ptxas assembles from sm_89 on (Triton 3.6 and 3.9, compiled "
                               "2026-12-04)")
    if nvfp4:
        if installed and cc < 100:  # sm100 here is an emulated tile, which Triton 3.6 refuses as on sm90 (LOWERING)
            from harness.arch import supports_scaled_dot

            ok, why = supports_scaled_dot(arch, "e4m3")
        else:
            ok, why = low.e4m3_scales, f"NVFP4 tl.dot_scaled (e4m3 scales) does not compile for {name} with Triton " \
                                       f"{low.version} (PassManager::run failed, measured 2026-12-04)"
        if not ok:
            raise DotScaledRefused(why)
    if {fa, fb} == {"bf16", "fp16"} and not low.bf16_fp16:
        raise DotScaledRefused(f"a bf16 x fp16 tl.dot_scaled does not compile for {name} with Triton {low.version} "
                               "(PassManager::run failed, compiled 2026-12-04)")
    if not all(k_packs) and not low.mn_packed:
        raise DotScaledRefused(f"e2m1 packed along M/N (lhs_k_pack/rhs_k_pack=False) does not compile for {name} with "
                               f"Triton {low.version} (PassManager::run failed, compiled 2026-12-04)")


#: bit width of each operand format (e2m1 counts 4: two codes a byte), for the dot operand layout's kWidth
_BITS = {"e2m1": 4, "e4m3": 8, "e5m2": 8, "bf16": 16, "fp16": 16}


def _native(a: torch.Tensor, sa: torch.Tensor, fa: str, b: torch.Tensor, sb: torch.Tensor, fb: str,
            acc: torch.Tensor | None, low: ScaledLowering, a_k_pack: bool, b_k_pack: bool, k: int) -> torch.Tensor:
    """A native sm100 tile (both operands scaled): the operands as stored, the scales as read, on
    ``tcgen05.mma ... block_scale``
    (:mod:`.tcgen05`); refusals as the compiler's (:data:`harness.tensor_cores.tcgen05.LOWERING`)."""
    from harness.tensor_cores import tcgen05

    if "bf16" in (fa, fb) or "fp16" in (fa, fb):
        raise DotScaledRefused(f"a {fa} x {fb} tl.dot_scaled on a native sm100 tile (M a multiple of 128, N >= 16) "
                               "does not compile: Triton 3.6 and 3.9 fail (PassManager::run failed: 'Unsupported "
                               "type' in MMAv5 lowering for bf16 x bf16, 'LHS and RHS operand dtypes kinds don't "
                               "match' for e4m3 x bf16; compiled here)")
    if not (a_k_pack and b_k_pack):
        raise NotImplementedError("harness.tensor_cores.dot_scaled: e2m1 packed along M/N on a native sm100 tile was "
                                  "not compiled here")
    group = k // sa.shape[-1]
    row = tcgen05.scaled_row(fa, fb, sa.dtype, group)
    if k % row.k:
        raise DotScaledRefused(f"a {fa} x {fb} tl.dot_scaled with K={k} does not compile on a native sm100 tile: "
                               f"{row.kind} takes K in steps of {row.k} (Triton 3.9: 'K dimension must be at least 64 "
                               "for this scaled MMA'; 3.6 fails the same tile; compiled here)")
    if sa.dtype != sb.dtype:
        raise ValueError(f"b_scale: expected the type of a_scale ({sa.dtype}); got {sb.dtype}")
    A, RA = tcgen05.operand(_operand(a, fa, "bf16", a_k_pack, rhs=False).float() if fa == "e2m1" else
                            _bits(a, names(fa).torch_dtype), fa)
    B, RB = tcgen05.operand(_operand(b, fb, "bf16", b_k_pack, rhs=True).float() if fb == "e2m1" else
                            _bits(b, names(fb).torch_dtype), fb)
    (sav, sar), (sbv, sbr) = tcgen05.scale_operand(sa), tcgen05.scale_operand(sb)
    sav, sar = (x.repeat_interleave(group, dim=-1) for x in (sav, sar))
    sbv, sbr = (x.repeat_interleave(group, dim=-1).transpose(-1, -2) for x in (sbv, sbr))
    shape = (*A.shape[:-1], B.shape[-1])
    C = torch.zeros(shape, dtype=torch.float64) if acc is None else acc.double()
    return tcgen05.mma_chain(A, RA, B, RB, C, row, (sav, sar), (sbv, sbr))


def dot_scaled(a: torch.Tensor, a_scale: torch.Tensor | None, a_format: str, b: torch.Tensor,
               b_scale: torch.Tensor | None, b_format: str, acc: torch.Tensor | None = None, *, arch: str = "sm90",
               fast_math: bool = False, a_k_pack: bool = True, b_k_pack: bool = True, triton: str | None = None,
               instr: str = "wgmma") -> torch.Tensor:
    """``tl.dot_scaled(a, a_scale, a_format, b, b_scale, b_format, acc, fast_math, lhs_k_pack, rhs_k_pack)`` for
    one tile as ``arch`` computes it with Triton ``triton`` (default: the installed version); fp32 out, on the CPU.

    Operands as ``tl.dot_scaled`` takes them: ``a`` [M, K] and ``b`` [K, N] (or with a batch dim in front); e2m1
    packed two codes a uint8 (low nibble first) along K, or along M (N) with ``a_k_pack=False``
    (``b_k_pack=False``); e4m3/e5m2 as torch float8 or uint8 bytes; bf16/fp16 as such or 16-bit ints. Scales:
    ``a_scale`` [M, K/g], ``b_scale`` [N, K/g] (not transposed), e8m0 codes as uint8 or NVFP4 e4m3 scales as
    float8_e4m3fn, g = 32 or 16; None for an unscaled operand. ``acc``: fp32 [M, N] or None. ``instr``: the
    instruction of the dot after the upcast (:func:`harness.tensor_cores.dot`); before sm90 it is mma.sync whatever
    ``instr`` says.

    Raises :class:`DotScaledRefused` (a ``NotImplementedError``) where the target's compiler refuses the call,
    ``NotImplementedError`` for what is not modelled, ``TypeError``/``ValueError`` naming a bad argument.
    """
    fa, fb = _check_format(a_format, "a_format"), _check_format(b_format, "b_format")
    a, b = _check_operand(a, fa, "a"), _check_operand(b, fb, "b")
    for name, flag, fmt in (("a_k_pack", a_k_pack, fa), ("b_k_pack", b_k_pack, fb)):
        if not isinstance(flag, bool):
            raise TypeError(f"{name}: expected a bool; got {type(flag).__name__}")
        if not flag and fmt != "e2m1":
            raise ValueError(f"{name}: only e2m1 operands can be packed along M/N; {name}=False with {fmt}")
    if not isinstance(fast_math, bool):
        raise TypeError(f"fast_math: expected a bool; got {type(fast_math).__name__}")
    if a.dim() != b.dim() or a.shape[:-2] != b.shape[:-2]:
        raise ValueError(f"b: expected the batch dims of a {tuple(a.shape[:-2])}; got shape {tuple(b.shape)}")
    ka = a.shape[-1] * (2 if fa == "e2m1" and a_k_pack else 1)
    kb = b.shape[-2] * (2 if fb == "e2m1" and b_k_pack else 1)
    M = a.shape[-2] * (2 if fa == "e2m1" and not a_k_pack else 1)
    N = b.shape[-1] * (2 if fb == "e2m1" and not b_k_pack else 1)
    if ka != kb:
        raise ValueError(f"b: its K ({kb} values) differs from a's ({ka} values)")
    low = lowering_for(triton)
    installed = triton is None or _minor(triton) == _minor(None)
    sa = _check_scale(a_scale, a, M, ka, "a_scale", low)
    sb = _check_scale(b_scale, b, N, ka, "b_scale", low)
    from harness.arch import parse_arch

    try:
        a_arch = parse_arch(arch)
    except (TypeError, ValueError) as e:
        raise type(e)(f"arch: expected a CUDA arch such as 'sm90'; {e}") from None
    if a_arch.kind != "cuda":
        raise ValueError(f"arch: expected a CUDA arch such as 'sm90'; got {a_arch.name!r}")
    name = a_arch.family
    cc = a_arch.cc or 0
    batch = tuple(a.shape[:-2])
    if acc is not None:
        if not isinstance(acc, torch.Tensor) or acc.dtype != torch.float32 or tuple(acc.shape) != (*batch, M, N):
            got = f"{acc.dtype} {tuple(acc.shape)}" if isinstance(acc, torch.Tensor) else type(acc).__name__
            raise ValueError(f"acc: expected a float32 {(*batch, M, N)} tensor or None; got {got}")
        acc = acc.cpu()
    if 100 <= cc < 120:
        from harness.tensor_cores import tcgen05

        tcgen05.check_arch(a_arch.name)
        if instr == "tcgen05" and tcgen05.native_tile(M, N) and sa is not None and sb is not None:
            return _native(a, sa, fa, b, sb, fb, acc, low, a_k_pack, b_k_pack, ka)
        if instr == "tcgen05" and N < 16 and low.version == "3.6":
            instr = "mma"  # 3.6 emulates an N < 16 tile over mma.sync bf16 (LOWERING)
    _check_refusals(a_arch, fa, fb, [sa, sb], low, installed, (a_k_pack, b_k_pack))
    compute = "fp16" if "fp16" in (fa, fb) else "bf16"
    A = _scaled(a, sa, fa, compute, low, fast_math, a_k_pack, rhs=False)
    B = _scaled(b, sb, fb, compute, low, fast_math, b_k_pack, rhs=True)
    tdt = torch.bfloat16 if compute == "bf16" else torch.float16
    A, B = A.to(tdt), B.to(tdt)  # exact: the values are on the compute type's grid
    if cc < 90:
        instr = "mma"  # mma.sync for every tile
    if instr == "mma":  # on operands in the layout's k order (module docstring)
        kwidth = 32 // min([_BITS[fa], _BITS[fb]] + [8 for s in (sa, sb) if s is not None])
        if kwidth > 2:
            order = mma_k_order(ka, kwidth, "dot_scaled")
            A, B = A[..., order], B[..., order, :]
    return dot(A, B, acc, arch=name, instr=instr)  # a batch dim runs as one call: the tiles are independent
