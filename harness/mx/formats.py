"""Element and scale formats of OCP MX v1.0 and NVFP4, with exact codecs and the e8m0 scale rules.

Why our own codec: torch has no FP4/FP6 dtype, its e8m0 cast differs from ml_dtypes (0 becomes 2^-127; fp32
subnormals round differently), and a kernel test needs the hardware's saturating conversion and PTX stochastic
rounding, which no library models. Codes are ``torch.uint8`` tensors, one code per byte in the low bits; everything
is vectorized torch and runs on CPU and CUDA tensors alike.

Overflow and NaN policies (the formats leave them to the implementation, OCP MX v1.0 §5.3):

* ``saturate=True`` is **satfinite**, PTX ``cvt ... .satfinite``: finite overflow and ±inf become ±max; NaN stays
  NaN where the format has one (e8m0, ue4m3), else becomes +max (PTX's "positive MAX_NORM"; e2m1 NaN -> 0x7 is
  also what a public sm_103 probe of ``cvt.rs.satfinite.e2m1x4`` reports).
* ``saturate=False`` is **ml_dtypes**, bit for bit (the tests check every case): e2m1/e2m3/e3m2 clamp overflow and
  ±inf to ±max too (ml_dtypes' ``infinity()`` is max), and NaN becomes a zero of the *opposite* sign (its
  ``quiet_NaN()`` is the -0 code, negated for a negative NaN); e8m0 and ue4m3 (as ``float8_e4m3fn``) overflow to
  NaN, and e8m0 of 0 is NaN.

Unsigned formats (e8m0, ue4m3) encode negative inputs as NaN under both policies.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch

__all__ = [
    "MXFormat", "FORMATS", "RNE", "RZ", "RS", "ROUNDINGS", "RS_BITS", "SCALE_RULES", "ULP_FAR", "get_mx_format",
    "encode", "decode", "ulp_distance", "e8m0_scale",
]

#: Round to nearest, ties to even (e8m0's ties, 1.5 * 2^e, go up: the even significand of 1 and 2 is 2).
RNE = "rne"
#: Round toward zero (PTX ``.rz``).
RZ = "rz"
#: Stochastic rounding as PTX ``cvt.rs`` does it, from explicit random bits (see :func:`encode`).
RS = "rs"
#: Every rounding :func:`encode` takes.
ROUNDINGS = (RNE, RZ, RS)
#: Random bits ``cvt.rs`` spends per FP8/FP6/FP4 value (PTX: 16 bits per pair of e4m3/e5m2/e2m3/e3m2, 8 per e2m1).
RS_BITS = 8
#: How a block's e8m0 scale is chosen from its amax (:func:`e8m0_scale` says what each rule computes).
SCALE_RULES = ("floor", "ceil", "even", "rceil")
#: Distance reported when either side is NaN: beyond any finite distance.
ULP_FAR = 1 << 16


@dataclass(frozen=True)
class MXFormat:
    """A small float layout: ``bits`` = sign (if ``signed``) + exponent + mantissa, in the low bits of a byte.

    ``ml_dtypes_name`` is the ml_dtypes type the tests check this codec against (ue4m3 against
    ``float8_e4m3fn`` on non-negative inputs).
    """

    name: str
    exp_bits: int
    man_bits: int
    bias: int
    max_finite: float
    has_nan: bool
    signed: bool
    ml_dtypes_name: str

    @property
    def bits(self) -> int:
        return int(self.signed) + self.exp_bits + self.man_bits

    @property
    def emax(self) -> int:
        """Exponent of the largest power of two <= max_finite: OCP's ``emax_elem`` in the scale rules."""
        return math.frexp(self.max_finite)[1] - 1

    @property
    def nan_code(self) -> int | None:
        return (1 << self.bits) - 1 if self.has_nan else None


#: The MX element and scale formats by name (MXFP8's elements are torch's own float8 dtypes).
FORMATS: dict[str, MXFormat] = {
    f.name: f
    for f in (
        MXFormat("e2m1", 2, 1, 1, 6.0, False, True, "float4_e2m1fn"),
        MXFormat("e2m3", 2, 3, 1, 7.5, False, True, "float6_e2m3fn"),
        MXFormat("e3m2", 3, 2, 3, 28.0, False, True, "float6_e3m2fn"),
        MXFormat("e8m0", 8, 0, 127, 2.0**127, True, False, "float8_e8m0fnu"),
        MXFormat("ue4m3", 4, 3, 7, 448.0, True, False, "float8_e4m3fn"),
    )
}
# MXFP8 elements are torch's own dtypes; these entries only feed the scale rules and the block quantizer.
_FP8_ELEMENTS = {
    torch.float8_e4m3fn: MXFormat("e4m3", 4, 3, 7, 448.0, True, True, "float8_e4m3fn"),
    torch.float8_e5m2: MXFormat("e5m2", 5, 2, 15, 57344.0, True, True, "float8_e5m2"),
}
_ELEMENT_NAMES = ("e2m1", "e2m3", "e3m2")


def _format(fmt: str | MXFormat, arg: str) -> MXFormat:
    if isinstance(fmt, MXFormat) and fmt in FORMATS.values():
        return fmt
    if isinstance(fmt, str) and fmt in FORMATS:
        return FORMATS[fmt]
    raise ValueError(f"{arg}: expected one of {', '.join(FORMATS)}; got {fmt!r}")


def get_mx_format(name: str | MXFormat) -> MXFormat:
    """The format named ``name`` (e2m1, e2m3, e3m2, e8m0, ue4m3)."""
    return _format(name, "name")


def element_format(fmt: str | MXFormat | torch.dtype, arg: str = "fmt") -> MXFormat:
    """An MX element format: e2m1/e2m3/e3m2 by name, or MXFP8's torch dtypes."""
    if isinstance(fmt, torch.dtype) and fmt in _FP8_ELEMENTS:
        return _FP8_ELEMENTS[fmt]
    if isinstance(fmt, MXFormat) and fmt in _FP8_ELEMENTS.values():
        return fmt
    if (isinstance(fmt, str) and fmt in _ELEMENT_NAMES) or (isinstance(fmt, MXFormat) and fmt.name in _ELEMENT_NAMES):
        return _format(fmt, arg)
    raise ValueError(f"{arg}: expected an element format, one of {', '.join(_ELEMENT_NAMES)}, torch.float8_e4m3fn, "
                     f"torch.float8_e5m2; got {fmt!r}")


@functools.cache
def _values_cpu(f: MXFormat) -> torch.Tensor:
    """The value of every code (float64, NaN at the NaN code), straight from the bit layout."""
    out = []
    for c in range(1 << f.bits):
        e, m = (c >> f.man_bits) & ((1 << f.exp_bits) - 1), c & ((1 << f.man_bits) - 1)
        if c == f.nan_code:
            v = math.nan
        elif f.man_bits == 0:
            v = 2.0 ** (e - f.bias)  # e8m0: every code is a power of two, code 0 included
        elif e == 0:
            v = m * 2.0 ** (1 - f.bias - f.man_bits)
        else:
            v = (1 + m / (1 << f.man_bits)) * 2.0 ** (e - f.bias)
        out.append(-v if f.signed and c >> (f.bits - 1) else v)
    return torch.tensor(out, dtype=torch.float64)


def _values(f: MXFormat, device: torch.device) -> torch.Tensor:
    return _values_cpu(f).to(device)


def check_dense(t: torch.Tensor, arg: str) -> None:
    """Values to read: not on the meta device (a shape without values), not sparse."""
    if t.device.type == "meta":
        raise ValueError(f"{arg}: is on the meta device: it has a shape and a dtype but no values")
    if t.layout != torch.strided:
        raise ValueError(f"{arg}: has layout {t.layout}; pass a dense tensor ({arg}.to_dense())")


_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def check_float(x: object, arg: str) -> None:
    """``ValueError`` naming ``arg`` unless ``x`` is a float tensor the codecs take."""
    if not isinstance(x, torch.Tensor) or x.dtype not in _FLOATS:
        got = x.dtype if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"{arg}: expected a floating-point torch.Tensor (float16, bfloat16, float32 or float64; "
                         f"FP8 values: upcast them first); got {got}")
    check_dense(x, arg)


def check_flag(v: object, arg: str) -> bool:
    """``v`` if it is a bool: a truthy string such as ``'no'`` or an int must not quietly switch a mode on."""
    if not isinstance(v, bool):
        raise TypeError(f"{arg}: expected True or False; got {v!r}")
    return v


def check_codes(codes: object, f: MXFormat, arg: str = "codes") -> torch.Tensor:
    """``codes`` as uint8 codes of ``f``, or an error naming ``arg`` and what was expected."""
    if not isinstance(codes, torch.Tensor) or codes.dtype != torch.uint8:
        got = codes.dtype if isinstance(codes, torch.Tensor) else type(codes).__name__
        raise ValueError(f"{arg}: expected a torch.uint8 tensor of {f.name} codes; got {got}")
    check_dense(codes, arg)
    if codes.numel() and int(codes.max()) >= 1 << f.bits:
        raise ValueError(f"{arg}: {f.name} codes are {f.bits}-bit (< {1 << f.bits:#x}); got {int(codes.max()):#x}")
    return codes.long()


def _random_byte(random_bits: object, x: torch.Tensor) -> torch.Tensor:
    if not isinstance(random_bits, torch.Tensor) or random_bits.dtype != torch.uint32:
        got = random_bits.dtype if isinstance(random_bits, torch.Tensor) else random_bits
        raise ValueError(f"random_bits: rounding='rs' needs a torch.uint32 tensor, one value per element; got {got}")
    check_dense(random_bits, "random_bits")
    try:
        ok = torch.broadcast_shapes(random_bits.shape, x.shape) == x.shape
    except RuntimeError:
        ok = False
    if not ok:
        raise ValueError(f"random_bits: shape {tuple(random_bits.shape)} does not broadcast to x's {tuple(x.shape)}")
    return random_bits.to(device=x.device, dtype=torch.int64) & ((1 << RS_BITS) - 1)


def encode(x: torch.Tensor, fmt: str | MXFormat, *, rounding: str = RNE, saturate: bool = True,
           random_bits: torch.Tensor | None = None) -> torch.Tensor:
    """``x`` (any float dtype, rounded once) as ``fmt`` codes (uint8).

    ``rounding``: :data:`RNE`, :data:`RZ` or :data:`RS`. ``saturate``: the satfinite (True) or ml_dtypes (False)
    policy of the module docstring. :data:`RS` is PTX ``cvt.rs``: with ``D`` the top :data:`RS_BITS` bits that
    rounding toward zero drops (counted in units of the result's last place, on the fixed-point grid below the
    smallest normal) and ``r`` the low :data:`RS_BITS` bits of ``random_bits`` (uint32, broadcast to ``x``), the
    magnitude rounds away from zero iff ``D + r >= 2**RS_BITS``; dropped bits below ``D`` never matter. How a kernel
    hands those bytes to ``cvt.rs`` (several values share one b32 operand, in an arch-specific byte order) is the
    kernel's business: give each element the byte its value consumed.
    """
    f = _format(fmt, "fmt")
    check_float(x, "x")
    check_flag(saturate, "saturate")
    if rounding not in ROUNDINGS:
        raise ValueError(f"rounding: expected one of {', '.join(ROUNDINGS)}; got {rounding!r}")
    if rounding == RS:
        r = _random_byte(random_bits, x)
    elif random_bits is not None:
        raise ValueError(f"random_bits: only rounding='rs' uses them; got rounding={rounding!r}")
    x64 = x.to(torch.float64)  # exact for every float dtype
    neg, nan, inf = torch.signbit(x64), torch.isnan(x64), torch.isinf(x64)
    a = torch.where(nan | inf, 0.0, x64.abs())
    # The result's last place: 2^(e - man_bits) with e = floor(log2 a), and below the smallest normal the fixed
    # subnormal grid (e8m0 has no subnormals: its code 0 is 2^-bias).
    emin = 1 - f.bias if f.man_bits else -f.bias
    e = (torch.frexp(a).exponent - 1).clamp_min(emin)
    q = torch.ldexp(torch.ones_like(a), e - f.man_bits)
    t = a / q  # exact: a scaled by a power of two
    n = t.floor()
    if rounding == RNE:
        n = t.round()  # half to even; for e8m0 (t in [1, 2)) the even neighbour of a tie is 2, so ties round up
    elif rounding == RS:
        n = n + (((t - n) * (1 << RS_BITS)).floor() + r >= 1 << RS_BITS)
    v = n * q
    mags = _values(f, x.device)[: (1 << (f.bits - f.signed)) - f.has_nan]  # non-negative finite values, ascending
    max_code = len(mags) - 1
    over_code = max_code if saturate or not f.has_nan else f.nan_code
    codes = torch.searchsorted(mags, v.contiguous())  # v is one of mags unless it overflows
    codes = torch.where((v > f.max_finite) | inf, over_code, codes)
    if f.signed:
        codes = torch.where(nan, max_code if saturate else 0, codes)
        sign = torch.where(nan, torch.zeros_like(neg) if saturate else ~neg, neg)
        codes = codes | (sign.long() << (f.bits - 1))
    else:
        bad = nan | (neg & (x64 != 0))
        if f.man_bits == 0 and not saturate:
            bad = bad | (x64 == 0)  # ml_dtypes: e8m0 has no zero, 0 is NaN
        codes = torch.where(bad, f.nan_code, codes)
    return codes.to(torch.uint8)


def decode(codes: torch.Tensor, fmt: str | MXFormat) -> torch.Tensor:
    """``fmt`` codes (uint8) as float32 values; every value is exact in float32 (e8m0's 2^-127 as a subnormal)."""
    return decode_codes(codes, _format(fmt, "fmt"), "codes")


def decode_codes(codes: object, f: MXFormat, arg: str) -> torch.Tensor:
    """:func:`decode`, its errors naming the caller's argument ``arg`` (``scales`` for block scales)."""
    c = check_codes(codes, f, arg)
    return _values(f, c.device)[c].float()


def _ordered(codes: torch.Tensor, f: MXFormat) -> torch.Tensor:
    if not f.signed:
        return codes
    half = 1 << (f.bits - 1)
    return torch.where(codes >= half, half - codes, codes)  # sign-magnitude onto integers; -0 -> 0


def ulp_distance(a: torch.Tensor, b: torch.Tensor, fmt: str | MXFormat) -> torch.Tensor:
    """Steps between ``a`` and ``b`` codes (int64) on the format's grid: ±0 are equal, NaN is :data:`ULP_FAR`."""
    f = _format(fmt, "fmt")
    ca, cb = check_codes(a, f, "a"), check_codes(b, f, "b")
    if ca.shape != cb.shape:  # broadcasting would pair codes that are not the same element
        raise ValueError(f"a and b must have the same shape, got {tuple(ca.shape)} and {tuple(cb.shape)}")
    d = (_ordered(ca, f) - _ordered(cb, f)).abs()
    if f.has_nan:
        d = torch.where((ca == f.nan_code) | (cb == f.nan_code), ULP_FAR, d)
    return d


def e8m0_scale(amax: torch.Tensor, elem_fmt: str | MXFormat | torch.dtype, rule: str = "floor") -> torch.Tensor:
    """The e8m0 block-scale code (uint8) for blocks of absolute maximum ``amax`` and elements of ``elem_fmt``.

    A scale rule is not a rounding of a value (:func:`encode` with e8m0 is ml_dtypes' nearest power of two); each
    rule picks the power of two differently, trading clipping against lost resolution:

    * ``floor`` — OCP MX v1.0 §6.3: 2^(floor(log2 amax) - emax_elem); amax may exceed the element max and clip.
    * ``ceil`` — torchao ``ScaleCalculationMode.CEIL``: 2^(ceil(log2 amax) - emax_elem).
    * ``even`` — torchao ``ScaleCalculationMode.EVEN``: as floor, after rounding amax to the element's mantissa
      width (half up), so an amax that the element grid would round up to the next binade moves the scale up.
      Not "nearest power of two". Unlike torchao, an amax near FLT_MAX keeps a finite scale (torchao's rounded
      amax overflows to inf and it returns NaN).
    * ``rceil`` — NVIDIA (cuBLAS/cuDNN "quantize_round_up(amax / max_elem)", TransformerEngine, torchao RCEIL):
      2^ceil(log2(amax / max_elem)), the quotient rounded to fp32 first. torchao and TransformerEngine multiply by
      an fp32 reciprocal instead; for these five element maxima a brute-force search near every power-of-two
      boundary found no amax where that picks another scale.

    Codes clamp to 0..254 (2^-127..2^127). amax 0 gives code 0 (any scale reproduces zeros; torchao and
    ``cvt.rp.ue8m0x2`` agree); inf or NaN gives 0xFF, the NaN scale that makes its whole block NaN (OCP §5.4.1).
    The sign of ``amax`` is ignored.
    """
    ef = element_format(elem_fmt, "elem_fmt")
    check_float(amax, "amax")
    if rule not in SCALE_RULES:
        raise ValueError(f"rule: expected one of {', '.join(SCALE_RULES)}; got {rule!r}")
    a32 = amax.float().abs()
    finite = torch.isfinite(a32)
    a32 = torch.where(finite, a32, 0.0)
    if rule == "rceil":
        a32 = a32 / ef.max_finite
    mant, ex = torch.frexp(a32.double())  # a = mant * 2^ex, mant in [0.5, 1): floor(log2 a) = ex - 1
    e = ex.long() - 1
    if rule == "ceil" or rule == "rceil":
        e = e + (mant != 0.5)
    elif rule == "even":
        e = e + (mant >= 1 - 2.0 ** -(ef.man_bits + 2))  # significand >= 2 - 2^-(man_bits + 1) rounds up
    if rule != "rceil":
        e = e - ef.emax
    e = torch.where(a32 == 0, -127, e).clamp(-127, 127)
    return torch.where(finite, e + 127, 0xFF).to(torch.uint8)
