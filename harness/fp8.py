"""FP8 formats and codecs that reproduce what the hardware (or the Triton interpreter) actually produces.

Why not just ``x.to(torch.float8_e4m3fn)``: a kernel's FP8 cast saturates (torch's does not), Triton's
``e4b15`` has no torch dtype and rounds ties away from zero, and the Triton interpreter's casts differ from
every GPU's. ``encode(x, fmt, arch=...)`` is the one place that knows these rules; the H200 tables in
``golden/`` pin it bit for bit (docs/MEASUREMENTS.md).

Codes are ``torch.uint8`` tensors. :func:`ulp_distance` maps sign-magnitude codes onto ordered integers
(±0 are equal); NaN, and inf against anything but the same inf, are :data:`ULP_FAR` apart — never "close".
"""

from __future__ import annotations

import numbers
import re
import warnings
from dataclasses import dataclass
from typing import Any

import torch

from harness.arch import Arch, parse_arch, supports_format
from harness.names import NAMES, format_name
from harness.versions import triton_version

__all__ = [
    "FP8Format", "FORMATS", "ULP_FAR", "get_format", "encode", "decode", "ulp_distance", "is_nan_code",
    "is_inf_code", "as_codes", "upcast_fp32", "FORMAT_OF_DTYPE", "IMITATES_ATTR", "interpreter_imitates",
    "rz_f16_bits", "BF16_EXACT_ATTR", "interpreter_bf16_exact", "Lowering", "LOWERINGS", "KNOWN_LOWERING_VERSIONS",
    "lowering_for", "lowering_version",
]

#: Distance reported when either side is NaN (or an inf against anything else): beyond any finite distance.
ULP_FAR = 1 << 16


@dataclass(frozen=True)
class FP8Format:
    """An 8-bit float layout and how it treats the special codes.

    ``nan_style``: ``fn`` (only S.1111.111 is NaN, no inf), ``ieee`` (e5m2: inf and NaNs), ``fnuz`` (0x80 is
    the only NaN, no negative zero, no inf), ``none`` (every code finite: Triton's e4b15).
    ``sat_max`` is where a hardware cast saturates; it differs from ``max_finite`` for e4b15, whose top
    code 0x7f (1.875) a cast never produces.
    """

    name: str
    exp_bits: int
    man_bits: int
    bias: int
    nan_style: str
    max_finite: float
    sat_max: float
    torch_dtype: torch.dtype | None
    triton_name: str

    def __repr__(self) -> str:
        return f"FP8Format({self.name}: e{self.exp_bits}m{self.man_bits} bias {self.bias}, {self.nan_style})"


def _fp8(name: str, exp_bits: int, man_bits: int, bias: int, nan_style: str, max_finite: float,
         sat_max: float) -> FP8Format:
    row = NAMES[name]  # torch's and Triton's names come from the one naming table
    return FP8Format(name, exp_bits, man_bits, bias, nan_style, max_finite, sat_max, row.torch_dtype, row.triton)


#: Every FP8 format the harness models, by its name (:data:`harness.names.NAMES` has its other names).
FORMATS: dict[str, FP8Format] = {
    f.name: f
    for f in (
        _fp8("e4nv", 4, 3, 7, "fn", 448.0, 448.0),
        _fp8("e5m2", 5, 2, 15, "ieee", 57344.0, 57344.0),
        _fp8("e4b15", 4, 3, 15, "none", 1.875, 1.75),
        _fp8("e4m3fnuz", 4, 3, 8, "fnuz", 240.0, 240.0),
        _fp8("e5m2fnuz", 5, 2, 16, "fnuz", 57344.0, 57344.0),
    )
}


def get_format(fmt: str | FP8Format | torch.dtype) -> FP8Format:
    """Resolve a name, alias, torch float8 dtype or format object."""
    if isinstance(fmt, FP8Format):
        return fmt
    if isinstance(fmt, torch.dtype):
        for f in FORMATS.values():
            if f.torch_dtype == fmt:
                return f
        raise ValueError(f"fmt: torch dtype {fmt} is not an FP8 format")
    if isinstance(fmt, str):
        try:
            key = format_name(fmt)
        except ValueError:
            key = None
        if key in FORMATS:
            return FORMATS[key]
        raise ValueError(f"fmt {fmt!r} is not an FP8 format; expected one of {', '.join(FORMATS)} "
                         f"(or an alias such as e4m3fn, float8e5)")
    raise TypeError(f"fmt must be a str, FP8Format or torch float8 dtype, got {type(fmt).__name__}")


#: The FP8 format of each torch float8 dtype (tensors of these compare as codes).
FORMAT_OF_DTYPE: dict[torch.dtype, FP8Format] = {f.torch_dtype: f for f in FORMATS.values() if f.torch_dtype}


def as_codes(t: torch.Tensor, fmt: str | FP8Format | None = None, *, name: str = "codes") -> torch.Tensor:
    """uint8 codes from a uint8 or torch float8 tensor (viewed, not converted).

    With ``fmt``, a torch float8 tensor of another format is an error, not a silent reinterpretation.
    uint8 is taken as raw codes of any format. Other integer dtypes are refused: an int8 tensor is as likely
    to hold small integers as codes, and its values (-128..127) are not the codes' (0..255).
    """
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of uint8 codes or a float8 dtype, got {type(t).__name__}")
    if t.dtype == torch.uint8:
        return t
    if t.dtype in FORMAT_OF_DTYPE:
        if fmt is not None:
            f, own = get_format(fmt), FORMAT_OF_DTYPE[t.dtype]
            if own != f:
                want = f"{f.torch_dtype} or uint8" if f.torch_dtype is not None else "uint8"
                raise TypeError(f"{name} is {t.dtype} (format {own.name}) but fmt is {f.name}; pass {f.name} codes "
                                f"({want}), or fmt={own.name!r}")
        return t.view(torch.uint8)
    hint = f"; if it holds codes, pass {name}.view(torch.uint8)" if t.dtype == torch.int8 else ""
    raise TypeError(f"{name} must hold FP8 codes (uint8 or a torch float8 dtype), got {t.dtype}{hint}")


_SRC_OK = (torch.float16, torch.bfloat16, torch.float32)


def upcast_fp32(x: torch.Tensor, *, arch: str | Arch | None = None) -> torch.Tensor:
    """``x.to(tl.float32)`` as ``arch`` computes it, bit for bit (NaN payloads included).

    Hardware: exact. The interpreter: fp16 goes through numpy's cast (exact, a signalling NaN keeps its
    payload unquieted, unlike torch's CPU cast); bf16, which numpy lacks, exactly while ``harness.interp.arith``
    is installed (the plugin's default), else through Triton's own converter (wrong for bf16 subnormals).
    Both measured against an interpreted kernel on all 65,536 patterns (tests/test_fp8_interp.py).
    """
    if not isinstance(x, torch.Tensor) or x.dtype not in _SRC_OK:
        raise TypeError(f"x must be a float16, bfloat16 or float32 tensor, got {getattr(x, 'dtype', type(x))}")
    a = parse_arch("sm90") if arch is None else parse_arch(arch)
    if x.dtype == torch.float32:
        return x
    if a.kind != "interp":
        return x.float()
    if x.dtype == torch.float16:
        out = x.detach().cpu().numpy().astype("float32")
        return torch.from_numpy(out).to(x.device)
    if interpreter_bf16_exact():
        return x.float()
    import triton.language as tl

    out = _interp_convert(x, tl.float32)
    return torch.from_numpy(out.view("int32").reshape(x.shape).copy()).view(torch.float32).to(x.device)


def encode(x: torch.Tensor, fmt: str | FP8Format, *, arch: str | Arch | None = None,
           via: torch.dtype | None = None, triton: str | None = None) -> torch.Tensor:
    """The codes a Triton ``x.to(<fmt>)`` produces on ``arch`` (default sm90), as uint8, same shape/device.

    CUDA arches: what the lowering of Triton ``triton`` (default: the installed one, :mod:`harness.versions`)
    for that target computes, from :data:`LOWERINGS` (data, one row per (Triton versions, capabilities, source,
    format), each with its source). In short: sm90+ (and sm89 on Triton 3.9): round to nearest even (e4b15:
    ties away from zero), saturate to ``sat_max`` (inf too), NaN → 0x7f for e4nv/e5m2, NaN → ±sat_max by its
    sign bit for e4b15 (it has no NaN). sm89 on Triton 3.6-3.8: fp32 sources go through ``cvt.rz.f16.f32``
    first (two roundings). Before sm89, e5m2 in software: Triton 3.6-3.8 ties away, no saturation; Triton 3.9
    RNE, saturating. A Triton the model has never seen gets one warning and the nearest known model
    (:func:`lowering_version`). Other kinds (ROCm): the sm90 rules.
    ``arch="interp"``: what this process's Triton interpreter computes: the imitated GPU's codes while
    :mod:`harness.interp.casts` is installed (the plugin's default on the interpreter lane), else the
    interpreter's own converter, applied to ``x`` in *its* dtype — which is not any hardware's result.
    ``via=torch.float32`` models a kernel that upcasts first (``x.to(tl.float32).to(fmt)``, the seed-1 fix):
    the upcast is done the arch's way (:func:`upcast_fp32`).
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in _SRC_OK:
        raise TypeError(f"x must be float16, bfloat16 or float32 (what a kernel casts from), got {x.dtype}")
    f = get_format(fmt)
    a = parse_arch("sm90") if arch is None else parse_arch(arch)
    if via is not None:
        if via != torch.float32:
            raise ValueError(f"via must be torch.float32 or None, got {via}")
        x = upcast_fp32(x, arch=a)
    if a.kind == "interp":
        imitated = interpreter_imitates()
        if imitated is None:
            return _encode_interp(x, f)
        a = imitated  # the interpreter runs with GPU-exact casts (harness.interp.casts): it computes these
    if a.kind == "cpu":
        raise ValueError("arch 'cpu' runs no kernels; pass the arch whose casts to model (e.g. 'sm90', 'interp')")
    ok, reason = supports_format(a, f)
    if not ok:
        raise ValueError(f"encode(fmt={f.name!r}, arch={a.name!r}): {reason}")
    if a.kind == "cuda":
        return _encode_nvidia(x, f, a.cc or 0, triton)
    return _encode_hw(x.float(), f)


def _encode_hw(xf: torch.Tensor, f: FP8Format) -> torch.Tensor:
    """One correct rounding of the exact value: RNE, saturating (``cvt.rn.satfinite``)."""
    if f.name == "e4b15":  # pragma: no cover - no target has a hardware e4b15 cvt; LOWERINGS says sw_e4b15
        raise AssertionError("e4b15 has no hardware conversion: every LOWERINGS row for it is sw_e4b15")
    sat = xf.clamp(-f.sat_max, f.sat_max)
    codes = sat.to(f.torch_dtype).view(torch.uint8)
    if f.nan_style in ("fn", "ieee"):
        codes = torch.where(torch.isnan(xf), torch.full_like(codes, 0x7F), codes)
    return codes


# --- NVIDIA: what each Triton version's lowering computes per target, as DATA (LOWERINGS) plus one evaluator
# (_encode_nvidia). Building blocks, named in each row's recipe:
#   to16 (how a non-fp16 source reaches the fp16 pattern a software or f16x2 step reads):
#     ``exact``      no fp16 step: the final step reads the exact value (bf16 -> f32 is exact);
#     ``rz``         ``cvt.rz.f16.f32`` (fp32, and bf16 via its exact f32);
#     ``rn``         ``cvt.rn.f16.f32`` (Triton 3.9, bf16 before Ada: one RNE rounding, overflow to inf);
#     ``rz_sticky``  Triton 3.9's fp32 -> e5m2 before Ada: ``lop3 x | ((x + 0xffff) & 0x10000)`` (bits 0-15
#                    folded into bit 16, a sticky bit) and then ``cvt.rz.f16x2.f32``;
#     ``bits``       no conversion: the software step reads the source's own bf16 pattern;
#   final:
#     ``hw``         ``cvt.rn.satfinite.{e4m3,e5m2}x2.{f32,f16x2}``: one RNE rounding, saturating, NaN -> 0x7f;
#     ``sw_e5m2_away``      Triton 3.6-3.8's software f16 -> e5m2: ties away, no saturation;
#     ``sw_e5m2_rne_sat``   Triton 3.9's software f16 -> e5m2: ``min.f16x2`` to 57344, RNE on the pattern, NaN
#                           -> 0x7f with the fp16 sign bit (``set.nan.f16x2`` gives 1.0 = 0x3c00, ORed in);
#     ``sw_bf16_e5m2``      Triton 3.6-3.8's software bf16 -> e5m2 (clamped on the pattern, wraps);
#     ``sw_e4b15``          the software f16 -> e4b15 of every version: ties away, saturating at 1.75.


@dataclass(frozen=True)
class Lowering:
    """One row of the cast-lowering model: what Triton versions ``triton`` (inclusive (major, minor) range)
    compile ``src -> fmt`` to for CUDA capabilities ``cc`` (inclusive range), as a recipe ``(to16, final)``
    (the building blocks above), and where that fact comes from."""

    triton: tuple[tuple[int, int], tuple[int, int]]
    cc: tuple[int, int]
    src: str  # "fp16", "bf16", "fp32" or "*"
    fmt: str  # "e4nv", "e5m2", "e4b15" or "*"
    to16: str
    final: str
    source: str


_PTX_36_38 = ("PTX of Triton 3.6.0, 3.7.1 and 3.8.0 (identical conversion bodies) for sm80/sm89/sm90, derived "
              "2026-12-04 (scripts/compile_fp8_target_ptx.py); 3.6 measured on an H200 (golden/test_fp8_targets)")
_PTX_39 = ("PTX of Triton 3.9.0 for sm80/sm89/sm90, derived 2026-12-04 (scripts/compile_fp8_target_ptx.py); "
           "H200 tables pending (scripts/capture_fp8_lowering_tables.sh)")
_V36_38 = ((3, 6), (3, 8))
_V39 = ((3, 9), (3, 9))
_ANY_CC = (0, 999)

#: The model, first matching row wins. Capabilities between and beyond the derived targets (sm75, sm86,
#: sm100, sm120) take their range's row: same lowering code path in Triton's NVIDIA backend (by ``>= 89`` /
#: ``>= 90`` capability checks), not separately derived.
LOWERINGS: tuple[Lowering, ...] = (
    # e4b15: software from fp16 on every target and version (bf16 only through fp32: refused directly)
    Lowering(_V36_38, _ANY_CC, "*", "e4b15", "rz", "sw_e4b15", _PTX_36_38),
    Lowering(_V39, _ANY_CC, "*", "e4b15", "rz", "sw_e4b15", _PTX_39),
    # Triton 3.6-3.8
    Lowering(_V36_38, (90, 999), "*", "*", "exact", "hw", _PTX_36_38),
    Lowering(_V36_38, (89, 89), "fp32", "*", "rz", "hw", _PTX_36_38),  # f16x2 cvt after cvt.rz.f16.f32
    Lowering(_V36_38, (89, 89), "*", "*", "exact", "hw", _PTX_36_38),
    Lowering(_V36_38, (0, 88), "bf16", "e5m2", "bits", "sw_bf16_e5m2", _PTX_36_38),
    Lowering(_V36_38, (0, 88), "*", "e5m2", "rz", "sw_e5m2_away", _PTX_36_38),
    # Triton 3.9: one cvt.rn.satfinite.*.f32 from sm89 (fp32 no longer through fp16); software RNE before Ada
    Lowering(_V39, (89, 999), "*", "*", "exact", "hw", _PTX_39),
    Lowering(_V39, (0, 88), "bf16", "e5m2", "rn", "sw_e5m2_rne_sat", _PTX_39),
    Lowering(_V39, (0, 88), "fp32", "e5m2", "rz_sticky", "sw_e5m2_rne_sat", _PTX_39),
    Lowering(_V39, (0, 88), "fp16", "e5m2", "rz", "sw_e5m2_rne_sat", _PTX_39),
)

#: The Triton versions the model knows, (first, last) (major, minor), with the name warnings use.
KNOWN_LOWERING_VERSIONS: tuple[tuple[tuple[int, int], tuple[int, int], str], ...] = (
    (_V36_38[0], _V36_38[1], "3.6-3.8"),
    (_V39[0], _V39[1], "3.9"),
)

_SRC_NAME = {NAMES[n].torch_dtype: n for n in ("fp16", "bf16", "fp32")}  # the sources a cast lowers from
_warned_versions: set[str] = set()


def lowering_version(triton: str | None = None) -> tuple[int, int]:
    """The (major, minor) whose lowering ``encode`` models for Triton ``triton`` (default: the installed one,
    from :mod:`harness.versions`). A version the model has never seen is mapped to the nearest known one,
    with one ``RuntimeWarning`` per version naming it."""
    text = triton_version() if triton is None else triton
    if not isinstance(text, str):
        raise TypeError(f"triton must be a version string such as '3.6.0', got {type(text).__name__}")
    m = re.match(r"(\d+)\.(\d+)(?:$|[.+a-z])", text)
    if m is None and triton is not None:
        raise ValueError(f"triton={triton!r} is not a Triton version; expected 'MAJOR.MINOR[.PATCH]' such as '3.6.0'")
    v = (int(m.group(1)), int(m.group(2))) if m else (0, 0)  # an installed Triton without one: warned below
    for lo, hi, _ in KNOWN_LOWERING_VERSIONS:
        if lo <= v <= hi:
            return v
    first, last = KNOWN_LOWERING_VERSIONS[0], KNOWN_LOWERING_VERSIONS[-1]
    lo, _, name = first if v < first[0] else last
    if text not in _warned_versions:
        _warned_versions.add(text)
        known = ", ".join(n for _, _, n in KNOWN_LOWERING_VERSIONS)
        warnings.warn(f"harness.fp8: no FP8 cast-lowering model for Triton {text} (models: Triton {known}); "
                      f"encode(arch=smXY) uses the nearest, Triton {name}'s, which may not be what this Triton "
                      f"compiles (derive it: scripts/compile_fp8_target_ptx.py)", RuntimeWarning, stacklevel=3)
    return lo


def lowering_for(src: str, fmt: str, cc: int, *, triton: str | None = None) -> Lowering:
    """The :data:`LOWERINGS` row for casting ``src`` (fp16/bf16/fp32) to ``fmt`` on capability ``cc`` with
    Triton ``triton`` (default: installed). ``LookupError`` when no row matches (e4nv below sm89).

    ``src`` may be any spelling of the three (``float16``, ``torch.float16``); another source is refused, not
    matched by a wildcard row: there is no row for it, so a row would be a guess. ``cc`` is the capability as
    an int (90 for sm90), as :class:`~harness.arch.Arch` holds it.
    """
    src = _lowering_src(src)
    if isinstance(cc, bool) or not isinstance(cc, numbers.Integral):
        raise TypeError(f"cc must be an int compute capability such as 90 (sm90), got {cc!r}")
    if cc < 0:
        raise ValueError(f"cc must be a compute capability >= 0 such as 90 (sm90), got {cc}")
    v = lowering_version(triton)
    f = get_format(fmt).name
    for row in LOWERINGS:
        if row.triton[0] <= v <= row.triton[1] and row.cc[0] <= cc <= row.cc[1] and row.src in ("*", src) \
                and row.fmt in ("*", f):
            return row
    raise LookupError(f"no FP8 cast lowering for {src} -> {f} on sm{cc} with Triton {v[0]}.{v[1]}")


def _lowering_src(src: Any) -> str:
    """The harness's name of a cast source, if it is one a cast lowers from."""
    if not isinstance(src, (str, torch.dtype)):
        raise TypeError(f"src must be a dtype name (fp16, bf16 or fp32) or a torch dtype, got {type(src).__name__}")
    try:
        name = format_name(src, "src")
    except ValueError:
        name = None
    if name not in _SRC_NAME.values():
        raise ValueError(f"src {src!r} is not a source an FP8 cast lowers from; expected fp16, bf16, fp32 "
                         f"(or another spelling of one: float16, torch.float16)")
    return name


def _encode_nvidia(x: torch.Tensor, f: FP8Format, cc: int, triton: str | None) -> torch.Tensor:
    src = _SRC_NAME[x.dtype]
    row = lowering_for(src, f.name, cc, triton=triton)
    if row.final == "hw" and row.to16 == "exact":  # bf16 -> f32 exactly, then the f32 cvt
        return _encode_hw(x.float(), f)
    if row.to16 == "bits":
        h = _bits16(x)
    elif x.dtype == torch.float16:
        h = _bits16(x)
    elif row.to16 == "rz":
        h = rz_f16_bits(x.float())
    elif row.to16 == "rn":
        h = _rn_f16_bits(x.float())
    elif row.to16 == "rz_sticky":
        b = x.float().contiguous().view(torch.int32).to(torch.int64) & 0xFFFFFFFF
        b = b | ((b + 0xFFFF) & 0x10000)
        h = rz_f16_bits(_u32_as_f32(b))
    else:  # pragma: no cover - a row naming an unknown step is a bug in LOWERINGS
        raise AssertionError(f"LOWERINGS row {row}: unknown to16 {row.to16!r}")
    if row.final == "hw":
        return _encode_hw(h.to(torch.int16).view(torch.float16).float(), f)
    if row.final == "sw_e5m2_away":
        return _sw_f16_to_e5m2(h)
    if row.final == "sw_e5m2_rne_sat":
        return _sw_f16_to_e5m2_rne_sat(h)
    if row.final == "sw_bf16_e5m2":
        return _sw_bf16_to_e5m2(h)
    if row.final == "sw_e4b15":
        return _sw_f16_to_e4b15(h)
    raise AssertionError(f"LOWERINGS row {row}: unknown final step {row.final!r}")  # pragma: no cover


def _u32_as_f32(b: torch.Tensor) -> torch.Tensor:
    """int64 tensor of uint32 patterns -> float32 with those bits."""
    return torch.where(b >= 1 << 31, b - (1 << 32), b).to(torch.int32).view(torch.float32)


def _bits16(x: torch.Tensor) -> torch.Tensor:
    """fp16/bf16 bit patterns as int32 in [0, 65535]."""
    return x.contiguous().view(torch.int16).to(torch.int32) & 0xFFFF


def rz_f16_bits(x: torch.Tensor) -> torch.Tensor:
    """``cvt.rz.f16.f32``: truncate toward zero (finite values never become inf); NaN → canonical 0x7fff."""
    xf = x.float()
    h = xf.to(torch.float16)  # round to nearest even, then step back toward zero where it rounded away
    bits = _bits16(h)
    away = h.float().abs() > xf.abs()
    bits = torch.where(away & torch.isfinite(xf), bits - 1, bits)
    return torch.where(torch.isnan(xf), torch.full_like(bits, 0x7FFF), bits)


def _rn_f16_bits(xf: torch.Tensor) -> torch.Tensor:
    """``cvt.rn.f16.f32``: round to nearest even (beyond 65520 -> inf); NaN -> canonical 0x7fff."""
    bits = _bits16(xf.to(torch.float16))
    return torch.where(torch.isnan(xf), torch.full_like(bits, 0x7FFF), bits)


def _sw_f16_to_e5m2_rne_sat(h: torch.Tensor) -> torch.Tensor:
    # Triton 3.9 (sm < 89): a = |h| min.f16x2 0x7b00 (NaN -> 0x7b00, inf -> 57344); a += 0x7f + bit 8 (RNE on
    # the pattern); a |= 0x3c00 for NaN (set.nan.f16x2 writes 1.0); OR the sign of h; the high byte.
    a = h & 0x7FFF
    nan = a > 0x7C00
    a = torch.where(nan | (a > 0x7B00), torch.full_like(a, 0x7B00), a)
    a = a + 0x7F + ((a >> 8) & 1)
    a = torch.where(nan, a | 0x3C00, a)
    return (((a | (h & 0x8000)) >> 8) & 0xFF).to(torch.uint8)


def _sw_f16_to_e5m2(h: torch.Tensor) -> torch.Tensor:
    # and.b32 0xfffe; add.u32 0x0080; take the high byte: ties away from zero, no saturation (overflow → inf),
    # NaN payloads below 0x80 become inf, and a negative NaN with the top payload wraps to +0.
    return ((((h & 0xFFFE) + 0x80) >> 8) & 0xFF).to(torch.uint8)


def _sw_bf16_to_e5m2(b: torch.Tensor) -> torch.Tensor:
    # clamp |b| to [0x3800, 0x57e0] on the bit pattern, add 0x10, subtract 0x3800, shift left 3, high byte,
    # OR the sign: subnormal results are wrong (read as normals) and large values wrap past the NaN codes.
    sign = (b >> 8) & 0x80
    mag = (b & 0x7FFF).clamp(0x3800, 0x57E0)
    return (((((mag + 0x10 - 0x3800) << 3) >> 8) & 0xFF) | sign).to(torch.uint8)


def _sw_f16_to_e4b15(h: torch.Tensor) -> torch.Tensor:
    # |h| min 1.75 (min.f16x2: NaN → 1.75), times 2 plus 0x80 (ties away), high byte, OR the sign bit.
    mag = h & 0x7FFF
    is_nan = mag > 0x7C00
    mag = torch.where(is_nan | (mag > 0x3F00), torch.full_like(mag, 0x3F00), mag)
    return ((((mag * 2 + 0x80) >> 8) & 0x7F) | ((h >> 8) & 0x80)).to(torch.uint8)


_E4M3_MAG = torch.arange(128, dtype=torch.int32).to(torch.uint8).view(torch.float8_e4m3fn).float()


_TL_SRC = {NAMES[n].torch_dtype: NAMES[n].triton for n in ("fp16", "bf16", "fp32")}
_INT_VIEW = {torch.float16: torch.int16, torch.bfloat16: torch.int16, torch.float32: torch.int32}


def _encode_interp(x: torch.Tensor, f: FP8Format) -> torch.Tensor:
    import triton.language as tl

    out = _interp_convert(x, getattr(tl, f.triton_name))
    return torch.from_numpy(out.view("uint8").reshape(x.shape).copy()).to(x.device)


#: The attribute by which a converter that replaced the interpreter's own names the arch whose casts it computes
#: (``harness.interp.casts`` sets it on its wrapper); read here, so the codec never imports the shim.
IMITATES_ATTR = "harness_imitates"


#: The attribute by which the interpreter builder's ``cast_impl`` says bf16 -> fp32 is exact
#: (``harness.interp.arith`` sets it on its wrapper); read here, so the codec never imports the shim.
BF16_EXACT_ATTR = "harness_bf16_exact"


def interpreter_bf16_exact() -> bool:
    """Whether this process's Triton interpreter converts bf16 exactly now (``harness.interp.arith`` installed)."""
    try:
        from triton.runtime import interpreter
    except ImportError:
        return False
    builder = getattr(interpreter, "InterpreterBuilder", None)
    return bool(getattr(getattr(builder, "cast_impl", None), BF16_EXACT_ATTR, False))


def interpreter_imitates() -> Arch | None:
    """The arch whose casts this process's Triton interpreter computes now (``harness.interp.casts`` installed),
    or ``None`` while it uses its own converter."""
    try:
        from triton.runtime import interpreter
    except ImportError:
        return None
    return getattr(getattr(interpreter, "_convert_float", None), IMITATES_ATTR, None)


def _interp_convert(x: torch.Tensor, dst: Any) -> Any:
    try:
        import triton.language as tl
        from triton._C.libtriton import ir
        from triton.runtime.interpreter import _convert_float
    except ImportError as e:  # private API: say exactly what is missing
        raise RuntimeError(f"encode(arch='interp') needs Triton's interpreter converter "
                           f"(triton.runtime.interpreter._convert_float): {e}") from None
    bits = x.detach().contiguous().view(_INT_VIEW[x.dtype]).cpu().numpy()
    try:
        own = getattr(_convert_float, "__wrapped__", _convert_float)  # never the harness.interp.casts wrapper
        return own(bits, getattr(tl, _TL_SRC[x.dtype]), dst, ir.ROUNDING_MODE.RTNE)
    except Exception as e:
        raise RuntimeError(f"arch='interp': Triton {triton_version()}'s interpreter converter "
                           f"failed for {x.dtype} -> {dst}: {e}") from None


def decode(codes: torch.Tensor, fmt: str | FP8Format) -> torch.Tensor:
    """float32 values of the codes (NaN codes → NaN, e5m2 inf codes → ±inf)."""
    f = get_format(fmt)
    c = as_codes(codes, f)
    if f.torch_dtype is not None:
        return c.view(f.torch_dtype).float()
    # e4b15: the e4m3fn magnitudes / 256, with 0x7f (NaN in e4m3fn) a plain 1.875.
    mag = (c & 0x7F).long()
    table = _E4M3_MAG.clone()
    table[0x7F] = 480.0
    v = table.to(c.device)[mag] / 256.0
    return torch.where((c & 0x80) != 0, -v, v)


def is_nan_code(codes: torch.Tensor, fmt: str | FP8Format) -> torch.Tensor:
    """Which codes are NaN in ``fmt``: 0x7f with either sign (e4nv), 0x7d-0x7f with either sign (e5m2), 0x80
    (the fnuz formats), none (e4b15)."""
    f = get_format(fmt)
    c = as_codes(codes, f)
    if f.nan_style == "fn":
        return (c & 0x7F) == 0x7F
    if f.nan_style == "ieee":
        return (c & 0x7F) > 0x7C
    if f.nan_style == "fnuz":
        return c == 0x80
    return torch.zeros_like(c, dtype=torch.bool)


def is_inf_code(codes: torch.Tensor, fmt: str | FP8Format) -> torch.Tensor:
    """Which codes are +-inf in ``fmt`` (only e5m2 has them)."""
    f = get_format(fmt)
    c = as_codes(codes, f)
    if f.nan_style == "ieee":
        return (c & 0x7F) == 0x7C
    return torch.zeros_like(c, dtype=torch.bool)


def _ordered(c: torch.Tensor, f: FP8Format) -> torch.Tensor:
    mag = (c & 0x7F).to(torch.int32)
    neg = (c & 0x80) != 0
    return torch.where(neg, -mag, mag)


def ulp_distance(a_codes: torch.Tensor, b_codes: torch.Tensor, fmt: str | FP8Format) -> torch.Tensor:
    """|ordered(a) − ordered(b)| as int32; ±0 are 0 apart; NaN (and inf vs a different code) → ULP_FAR."""
    f = get_format(fmt)
    a = as_codes(a_codes, f, name="a_codes")
    b = as_codes(b_codes, f, name="b_codes")
    if a.shape != b.shape:
        raise ValueError(f"a_codes and b_codes must have the same shape, got {tuple(a.shape)} and {tuple(b.shape)}")
    d = (_ordered(a, f) - _ordered(b, f)).abs()
    far = is_nan_code(a, f) | is_nan_code(b, f) | ((is_inf_code(a, f) | is_inf_code(b, f)) & (a != b))
    return torch.where(far, torch.full_like(d, ULP_FAR), d)
