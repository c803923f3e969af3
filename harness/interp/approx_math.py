"""Approximate fp32 math as an NVIDIA GPU computes it under Triton's lowering: data plus a small evaluator.

What Triton 3.6.0 and 3.9.0 emit for sm90 (compiler-derived: AOT-compiled on a CPU with
``harness.compile.matrix.compile_kernel``, PTX read and SASS read with the bundled ``cuobjdump``; both
versions emit the same instructions, :data:`LOWERING`):

=====================  ==========================================  ===========================================
Triton                 PTX                                         SASS (sm90)
=====================  ==========================================  ===========================================
fp32 ``x / y``         ``div.full.f32``                            ``|y| > 2^126``: x, y *= 1/4;
                                                                   ``!(|y| >= 2^-126)``: x, y *= 2^24;
                                                                   ``FMUL(MUFU.RCP(y), x)``
``1.0 / y``            ``div.full.f32`` (x = 1.0)                  the same sequence
``tl.sqrt``            ``sqrt.approx.ftz.f32``                     ``MUFU.SQRT``
``tl.math.rsqrt``      ``rsqrt.approx.ftz.f32``                    ``MUFU.RSQ``
``tl.exp2``            ``ex2.approx.ftz.f32``                      ``MUFU.EX2``
``tl.exp``             ``mul.f32 x, log2(e)``; ``ex2.approx.f32``  ``t = x * 0x3FB8AA3B``; ``t < -126``:
                                                                   ``EX2(t / 2)^2``; else ``EX2(t)``
``tl.log2``/``tl.log`` libdevice ``__nv_log2f``/``__nv_logf``:     the same (no MUFU): IEEE operations, so
                       range reduction and an ``fma.rn.ftz`` poly   derived bit for bit from the PTX alone
``div_rn``/``sqrt_rn`` ``div.rn.f32`` / ``sqrt.rn.f32``             IEEE: the interpreter's numpy is exact
=====================  ==========================================  ===========================================

The MUFU results depend on the input's mantissa only (and the exponent's parity for the square roots; the
input's fixed-point fraction for EX2), so each is one table, measured on an H200 over every mantissa
(``scripts/capture_approx_math.py``) and stored in ``approx_math_tables.npz`` beside this module as the
signed ulp difference from the correctly rounded result (int8): ``rcp`` over [1, 2), ``rsqrt`` and ``sqrt``
over [1, 4) (index ``parity * 2^23 + mantissa``), ``ex2`` over [0, 1) in steps of 2^-23. Everything around
the tables (range scaling, special values, flushing) is the SASS above, written out here. Each function
was checked against the H200 on all 2^32 inputs (``div_full`` on pairs; docs/MEASUREMENTS.md).

All functions take and return fp32 torch tensors on any device.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
from pathlib import Path

import numpy as np
import torch

from harness.interp import differences
from harness.interp.patch import Patch, lift
from harness.interp.patch import installed as patch_installed

__all__ = [
    "LOWERING", "TABLE_FILE", "div_full", "div_full_operands", "div_full_operands_numpy", "rcp_approx",
    "sqrt_approx", "rsqrt_approx", "ex2_approx", "exp_approx", "log2_libdevice", "log_libdevice", "table_meta",
    "use_tables", "install", "installed", "suspended", "TAG",
]

#: The tag of this shim's records in the patch layer (:mod:`harness.interp.patch`).
TAG = "approx_math"

#: What each op lowers to in Triton 3.6.0 and 3.9.0 for sm90 (PTX; read 2026-12, see the module docstring).
LOWERING = {
    "fdiv": "div.full.f32",
    "rcp": "div.full.f32 (1.0, y)",
    "sqrt": "sqrt.approx.ftz.f32",
    "rsqrt": "rsqrt.approx.ftz.f32",
    "exp2": "ex2.approx.ftz.f32",
    "exp": "mul.f32 x, 0f3FB8AA3B; ex2.approx.f32",
    "log2": "libdevice __nv_log2f",
    "log": "libdevice __nv_logf",
}

TABLE_FILE = Path(__file__).with_name("approx_math_tables.npz")
_table_path = TABLE_FILE

_M23 = 1 << 23
_MANT = _M23 - 1
_SIGN = -0x80000000  # int32 sign bit
_NAN = 0x7FFFFFFF  # the canonical NaN NVIDIA returns


def use_tables(path: str | Path | None) -> None:
    """Evaluate with the tables in ``path`` (the capture script validates a table it just measured); ``None``:
    the shipped file."""
    global _table_path
    _table_path = TABLE_FILE if path is None else Path(path)
    _raw.cache_clear()
    _values.cache_clear()
    _values_numpy.cache_clear()


@functools.cache
def _raw() -> dict[str, np.ndarray]:
    with np.load(_table_path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def table_meta() -> dict:
    """The tables' provenance (device, driver, Triton, date, checksums of the reconstructed values)."""
    return json.loads(str(_raw()["meta"]))


def _f32_bits(x: torch.Tensor) -> torch.Tensor:
    return x.contiguous().view(torch.int32)


def _from_bits(b: torch.Tensor) -> torch.Tensor:
    return b.to(torch.int32).view(torch.float32)


def reference_inputs(name: str) -> torch.Tensor:
    """The fp64 inputs whose correctly rounded results the table ``name`` is relative to."""
    k = torch.arange(_M23, dtype=torch.float64)
    if name == "rcp":
        return 1.0 + k / _M23
    if name in ("rsqrt", "sqrt"):
        m = 1.0 + k / _M23
        return torch.cat([m, 2.0 * m])
    if name == "ex2":
        return k / _M23
    raise KeyError(name)


def reference(name: str, x64: torch.Tensor) -> torch.Tensor:
    """The correctly rounded fp32 result of table ``name``'s function at ``x64`` (fp64 math, then one rounding:
    exact for rcp and sqrt, and for rsqrt and ex2 up to an fp64 error the checksum test guards)."""
    if name == "rcp":
        return (1.0 / x64).float()
    if name == "rsqrt":
        return (1.0 / torch.sqrt(x64)).float()
    if name == "sqrt":
        return torch.sqrt(x64).float()
    if name == "ex2":
        return torch.exp2(x64).float()
    raise KeyError(name)


def values_checksum(bits: torch.Tensor) -> str:
    return hashlib.sha256(bits.cpu().numpy().astype("<i4").tobytes()).hexdigest()[:16]


@functools.cache
def _values(name: str, device: str) -> torch.Tensor:
    """The table's results as int32 bit patterns on ``device``: reference bits + stored ulp difference."""
    ref = _f32_bits(reference(name, reference_inputs(name)))
    diff = torch.from_numpy(_raw()[name].astype(np.int32))
    return (ref + diff).to(device)


def _lookup(name: str, idx: torch.Tensor) -> torch.Tensor:
    t = _values(name, str(idx.device))
    return t[idx.clamp(0, t.numel() - 1).long()]


def _split(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    b = _f32_bits(x)
    return b & _SIGN, (b >> 23) & 0xFF, b & _MANT


def _with_exp(tbits: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    """Table value bits scaled by 2^shift; results below 2^-126 flush to +0 (MUFU is FTZ)."""
    e = ((tbits >> 23) & 0xFF) + shift
    out = (tbits & _MANT) | (e.clamp(1, 254) << 23)
    return torch.where(e < 1, torch.zeros_like(out), out)


def rcp_approx(y: torch.Tensor) -> torch.Tensor:
    """``MUFU.RCP`` (``rcp.approx.ftz.f32``): subnormal inputs are zeros, results below 2^-126 flush to zero."""
    s, e, m = _split(y)
    v = _with_exp(_lookup("rcp", m), 127 - e)
    v = torch.where(e == 0, torch.full_like(v, 0x7F800000), v)  # +-0 and subnormals -> inf
    v = torch.where(e == 255, torch.where(m == 0, torch.zeros_like(v), torch.full_like(v, _NAN)), v)
    return _from_bits(torch.where(v == _NAN, v, v | s))


def div_full_operands(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The two factors of ``div.full.f32``'s closing multiply on sm90: the numerator after the range scaling and
    ``MUFU.RCP`` of the scaled denominator. Apart from :func:`div_full` because ptxas may contract that multiply
    into a following add (:func:`harness.lowering.fma.ptxas_quotient_lines`)."""
    x, y = torch.broadcast_tensors(x.float(), y.float())
    ay = y.abs()
    big = ay > 2.0**126
    small = ~(ay >= 2.0**-126)  # NaN too
    x = torch.where(big, x * 0.25, torch.where(small, x * 16777216.0, x))
    y = torch.where(big, y * 0.25, torch.where(small, y * 16777216.0, y))
    return x, rcp_approx(y)


def div_full_operands_numpy(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`div_full_operands` on float32 numpy arrays, bit for bit. Why: the lowering shim asks for the factors
    of a kernel's scalar quotients once per program, where torch's per-op overhead (a few hundred microseconds per
    quotient) was a fifth of a layernorm's interpretation."""
    with np.errstate(over="ignore", invalid="ignore"):
        x, y = np.broadcast_arrays(np.asarray(x, np.float32), np.asarray(y, np.float32))
        ay = np.abs(y)
        big = ay > np.float32(2.0**126)
        small = ~(ay >= np.float32(2.0**-126))  # NaN too
        x = np.where(big, x * np.float32(0.25), np.where(small, x * np.float32(16777216.0), x))
        y = np.where(big, y * np.float32(0.25), np.where(small, y * np.float32(16777216.0), y))
        b = y.view(np.int32)  # a fresh np.where result: contiguous, any ndim
        s, e, m = b & np.int32(_SIGN), (b >> 23) & 0xFF, b & _MANT
        t = _values_numpy("rcp")
        tb = t[np.clip(m, 0, t.size - 1)]
        e2 = ((tb >> 23) & 0xFF) + (127 - e)
        v = (tb & _MANT) | (np.clip(e2, 1, 254) << 23)
        v = np.where(e2 < 1, 0, v)
        v = np.where(e == 0, 0x7F800000, v)
        v = np.where(e == 255, np.where(m == 0, 0, _NAN), v)
        r = np.where(v == _NAN, v, v | s).astype(np.int32).view(np.float32)
    return x.astype(np.float32), r


@functools.cache
def _values_numpy(name: str) -> np.ndarray:
    t = _values(name, "cpu").numpy()
    t.flags.writeable = False
    return t


def div_full(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``div.full.f32`` as sm90 runs it: range scaling, ``MUFU.RCP``, one IEEE multiply (up to 2 ulp off)."""
    xs, r = div_full_operands(x, y)
    return r * xs


def _parity_split(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    s, e, m = _split(x)
    u = e - 127
    p = u & 1
    return s, e, m + p * _M23, (u - p) >> 1  # index into [1, 4), half exponent


def rsqrt_approx(x: torch.Tensor) -> torch.Tensor:
    """``MUFU.RSQ`` (``rsqrt.approx.ftz.f32``)."""
    s, e, idx, h = _parity_split(x)
    v = _with_exp(_lookup("rsqrt", idx), -h)
    zero = e == 0  # +-0 and subnormals (flushed): +-inf
    v = torch.where(zero, torch.full_like(v, 0x7F800000) | s, v)
    v = torch.where((s != 0) & ~zero, torch.full_like(v, _NAN), v)
    top = torch.where((idx & _MANT) == 0, torch.zeros_like(v), torch.full_like(v, _NAN))  # +inf, +NaN
    v = torch.where((e == 255) & (s == 0), top, v)
    return _from_bits(v)


def sqrt_approx(x: torch.Tensor) -> torch.Tensor:
    """``MUFU.SQRT`` (``sqrt.approx.ftz.f32``)."""
    s, e, idx, h = _parity_split(x)
    v = _with_exp(_lookup("sqrt", idx), h)
    zero = e == 0
    v = torch.where(zero, s, v)  # +-0 and subnormals: signed zero
    v = torch.where((s != 0) & ~zero, torch.full_like(v, _NAN), v)
    top = torch.where((idx & _MANT) == 0, torch.full_like(v, 0x7F800000), torch.full_like(v, _NAN))
    v = torch.where((e == 255) & (s == 0), top, v)
    return _from_bits(v)


def _fixed_point(xs: torch.Tensor) -> torch.Tensor:
    """EX2's input as an integer count of 2^-23 (``xs`` = x * 2^23, fp64): the magnitude ``q`` truncated; a
    negative one with a fraction is negated by complementing the fraction's bits (``-q - 1``), one without
    (an integer, or a magnitude below 2^-23) exactly. Measured on the H200 over all 2^32 inputs: a two's
    complement floor misses the negative grid points by 1-2 ulp and gives 0.99999994 for tiny negatives
    (the H200: 1.0); complementing every negative misses the negative integers (the H200: exact powers of 2)."""
    q = torch.trunc(xs.abs())
    return torch.where((xs < 0) & (torch.remainder(q, _M23) != 0), -q - 1, torch.where(xs < 0, -q, q))


def ex2_approx(x: torch.Tensor, _quantize=_fixed_point) -> torch.Tensor:
    """``MUFU.EX2`` (``ex2.approx.ftz.f32``): the input in fixed point with 23 fraction bits
    (:func:`_fixed_point`), ``2^int * table[fraction]``; subnormal inputs are zeros, results below 2^-126
    flush to zero."""
    x = x.float()
    _, e, m = _split(x)
    xd = torch.where(e == 0, torch.zeros_like(x), x).double()
    xd = xd.clamp(-200.0, 200.0).nan_to_num(0.0)
    q = _quantize(xd * _M23).long()
    n, k = q >> 23, q & _MANT
    t = _lookup("ex2", k)
    v = _with_exp(t, n.to(torch.int32)).to(torch.int32)
    v = torch.where(n > 127, torch.full_like(v, 0x7F800000), v)
    v = torch.where(torch.isnan(x), torch.full_like(v, _NAN), v)
    return _from_bits(v)


def exp_approx(x: torch.Tensor) -> torch.Tensor:
    """``tl.exp``: ``t = x * log2(e)`` (fp32), then ``ex2.approx.f32``, whose non-FTZ SASS halves ``t < -126``
    and squares the result (subnormal results)."""
    t = x.float() * torch.tensor(1.4426950216293334961, dtype=torch.float32)
    low = t < -126.0
    r = ex2_approx(torch.where(low, t * 0.5, t))
    return torch.where(low, r * r, r)


# --- libdevice logarithms (IEEE operations only) -------------------------------------------------------------

def _ftz(x: torch.Tensor) -> torch.Tensor:
    return torch.where(x.abs() < 2.0**-126, torch.copysign(torch.zeros_like(x), x), x)


def fma_ftz(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """``fma.rn.ftz.f32``: one rounding (fp64 sum rounded to odd, then to fp32), subnormals flushed in and out."""
    a64, b64, c64 = (_ftz(t.float()).double() for t in (a, b, c))
    p = a64 * b64  # exact: 24 + 24 bits
    s = p + c64
    bb = s - p
    err = (p - (s - bb)) + (c64 - bb)  # TwoSum: the exact sum is s + err
    sb = s.view(torch.int64)
    inexact = (err != 0) & torch.isfinite(s) & torch.isfinite(err)
    outward = (err > 0) == (s > 0)  # the exact sum lies farther from zero than s
    tb = torch.where(inexact & ~outward, sb - 1, sb)  # toward zero
    odd = torch.where(inexact, tb | 1, sb).view(torch.float64)
    return _ftz(odd.float())


def _c(bits: int) -> torch.Tensor:
    return torch.from_numpy(np.array([bits], dtype=np.uint32).view(np.float32))[0]


def _libdevice_log(x: torch.Tensor, offset: int, poly: list[int], log2: bool) -> torch.Tensor:
    x = x.float()
    dev = x.device
    c = lambda b: _c(b).to(dev)  # noqa: E731
    sub = x < 2.0**-126
    r1 = torch.where(sub, x * 8388608.0, x)  # mul.f32 (not ftz)
    r10 = torch.where(sub, torch.full_like(x, -23.0), torch.zeros_like(x))
    b1 = _f32_bits(r1)
    r12 = (b1 - offset) & -8388608
    r13 = _from_bits(b1 - r12)
    r16 = fma_ftz(r12.float(), c(0x34000000).expand_as(x), r10)
    r17 = r13 + c(0xBF800000)
    acc = fma_ftz(c(poly[0]).expand_as(x), r17, c(poly[1]).expand_as(x))
    for k in poly[2:]:
        acc = fma_ftz(acc, r17, c(k).expand_as(x))
    if log2:
        r38 = r17 * (r17 * acc)
        res = r16 + fma_ftz(r17, c(0x3FB8AA3B).expand_as(x), r38)
    else:
        res = fma_ftz(r16, c(0x3F317218).expand_as(x), fma_ftz(r17 * acc, r17, r17))
    inf = torch.full_like(x, float("inf"))
    res = torch.where((b1 >= 0) & (b1 < 0x7F800000), res, fma_ftz(r1, inf, inf))
    return torch.where(r1 == 0, -inf, res)


def log2_libdevice(x: torch.Tensor) -> torch.Tensor:
    """``tl.log2``: libdevice ``__nv_log2f`` as Triton 3.6/3.9 inline it (PTX constants below)."""
    return _libdevice_log(x, 0x3F3504F3, [0x3DC6B27F, 0xBE2C7F30, 0x3E2FCF2A, 0xBE374E43, 0x3E520BF4, 0xBE763C8B,
                                         0x3E93BF99, 0xBEB8AA49, 0x3EF6384A, 0xBF38AA3B], log2=True)


def log_libdevice(x: torch.Tensor) -> torch.Tensor:
    """``tl.log``: libdevice ``__nv_logf``."""
    return _libdevice_log(x, 0x3F2AAAAB, [0xBE055027, 0x3E1039F6, 0xBDF8CDCC, 0x3E0F2955, 0xBE2AD8B9, 0x3E4CED0B,
                                         0xBE7FFF22, 0x3EAAAA78, 0xBF000000], log2=False)


# --- the interpreter shim ---------------------------------------------------------------------------------------

#: InterpreterBuilder methods routed through the model for fp32 operands (Triton 3.6 and 3.9 both define
#: them; ``div_rn``/``sqrt_rn`` are ``create_precise_divf``/``create_precise_sqrt``, left to numpy: IEEE).
SHIMMED = {
    "create_fdiv": div_full, "create_sqrt": sqrt_approx, "create_rsqrt": rsqrt_approx, "create_exp": exp_approx,
    "create_exp2": ex2_approx, "create_log": log_libdevice, "create_log2": log2_libdevice,
}


def applies_to(arch) -> bool:
    """Whether the shim models ``arch``'s math: NVIDIA targets and the interpreter's own arch (judged as the
    H200 the tables come from); AMD lowers these ops differently."""
    return getattr(arch, "kind", None) != "rocm"


def _is_f32(h) -> bool:
    return getattr(h.data, "dtype", None) == np.float32 and str(h.dtype.scalar) == "fp32"


def _wrap(name: str, original, fn):
    def unary(self, arg):
        if not _is_f32(arg):
            return original(self, arg)
        out = fn(torch.from_numpy(np.ascontiguousarray(arg.data, dtype=np.float32)))
        return type(arg)(out.numpy().reshape(np.shape(arg.data)), arg.dtype.scalar)

    def binary(self, lhs, rhs):
        if not (_is_f32(lhs) and _is_f32(rhs)):
            return original(self, lhs, rhs)
        a, b = np.broadcast_arrays(np.asarray(lhs.data, dtype=np.float32), np.asarray(rhs.data, dtype=np.float32))
        out = fn(torch.from_numpy(np.ascontiguousarray(a)), torch.from_numpy(np.ascontiguousarray(b)))
        return type(lhs)(out.numpy().reshape(a.shape), lhs.dtype.scalar)

    w = binary if name == "create_fdiv" else unary
    w.__name__ = w.__qualname__ = name
    w.__wrapped__ = original
    return w


def install(patch: Patch) -> bool:
    """Route the interpreter's fp32 ``/``, ``sqrt``, ``rsqrt``, ``exp``, ``exp2``, ``log``, ``log2`` through the
    model, via ``patch``. A Triton whose interpreter lacks one of the methods gets one warning and no patch at
    all (``False``)."""
    import warnings

    from triton.runtime import interpreter as itp

    cls = getattr(itp, "InterpreterBuilder", None)
    missing = [n for n in SHIMMED if cls is None or not callable(getattr(cls, n, None))]
    if missing:
        warnings.warn(f"harness.interp.approx_math: this Triton's interpreter has no {', '.join(missing)}; fp32 "
                      "division and math keep the interpreter's IEEE results (the GPU's are approximate)",
                      stacklevel=2)
        return False
    for n, fn in SHIMMED.items():
        patch.setattr(cls, n, _wrap(n, getattr(cls, n), fn), tag=TAG)
        differences.mark_modelled(patch, TAG, n, ("fp32",))
    return True


def installed() -> bool:
    """Whether the interpreter's fp32 math is routed through the model now."""
    from triton.runtime import interpreter as itp

    return patch_installed(itp.InterpreterBuilder, "create_fdiv", TAG)


def suspended() -> contextlib.AbstractContextManager[None]:
    """The interpreter's own IEEE fp32 math inside the block, the shim (if any) again after."""
    return lift(TAG)
