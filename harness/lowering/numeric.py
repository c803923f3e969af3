"""One GPU rounding per operation, in numpy, for the element types reductions, scans and fma run in.

Values travel as the interpreter holds them: fp32 as ``float32``, fp16 as ``float16``, bf16 as ``uint16`` bit
patterns (numpy has no bf16; :mod:`harness.interp.arith` keeps them so). ``add``/``mul`` are correctly rounded
(PTX ``add.f32``/``add.rn.bf16``/``add.f16``: one RNE rounding; for bf16 and fp16 the fp32 result rounded again
equals one rounding since 24 >= 2p + 2). ``fma`` is one rounding of the exact ``a * b + c`` (``fma.rn``): the
product is exact in float64, the sum is made round-to-odd in float64 (TwoSum), then in fp32, so the last RNE
rounding is the only one that counts.

NaN: an arithmetic result that is NaN is written as the canonical NaN (``0x7FFFFFFF`` / ``0x7FFF``), which is
what the GPU's ``cvt``/arith produce (the harness's bf16 casts already write ``0x7FFF``); payloads of inputs are
not propagated. Confirm against the H100 goldens (``scripts/capture_lowering_goldens.py`` has NaN rows).

Public API: :data:`DTYPES`, :func:`add`, :func:`mul`, :func:`fma`, :func:`maximum`, :func:`minimum`,
:func:`to_f32`, :func:`from_f32`.
"""

from __future__ import annotations

import numpy as np

__all__ = ["DTYPES", "add", "fma", "from_f32", "maximum", "minimum", "mul", "to_f32"]

DTYPES = ("fp32", "bf16", "fp16")


def _check(dtype: str) -> None:
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")


def to_f32(x: np.ndarray, dtype: str) -> np.ndarray:
    """The values as float32, exactly (fp32 input: the array itself, not a copy)."""
    _check(dtype)
    x = np.asarray(x)
    if dtype == "bf16":
        return (x.astype(np.uint32) << np.uint32(16)).view(np.float32)
    return x if x.dtype == np.float32 else x.astype(np.float32)  # fp32: no copy (read-only use)


def _f32_to_bf16(f: np.ndarray) -> np.ndarray:
    b = np.ascontiguousarray(f, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = ((b + np.uint64(0x7FFF) + ((b >> np.uint64(16)) & np.uint64(1))) >> np.uint64(16)).astype(np.uint16)
    return np.where(np.isnan(f), np.uint16(0x7FFF), r).astype(np.uint16).reshape(np.shape(f))


def from_f32(f: np.ndarray, dtype: str) -> np.ndarray:
    """float32 → the dtype with one RNE rounding, NaN canonical."""
    _check(dtype)
    f = np.asarray(f, dtype=np.float32)
    if dtype == "bf16":
        return _f32_to_bf16(f)
    if dtype == "fp16":
        with np.errstate(over="ignore", invalid="ignore"):
            h = f.astype(np.float16)
        return np.where(np.isnan(h), np.float16(np.nan), h).astype(np.float16)
    return np.where(np.isnan(f), np.uint32(0x7FFFFFFF).view(np.float32), f).astype(np.float32)


_CANONICAL_F32 = np.uint32(0x7FFFFFFF).view(np.float32)


def _canonical_f32(f: np.ndarray) -> np.ndarray:
    """:func:`from_f32` to fp32 of a fresh float32 result (no copy): shims call these per program on small blocks,
    where each numpy call's overhead is the cost, and a NaN is rare."""
    nan = np.isnan(f)
    if np.count_nonzero(nan):  # the cheapest "any" numpy has for a small block
        return np.where(nan, _CANONICAL_F32, f).astype(np.float32)
    return np.asarray(f, dtype=np.float32)


def add(a: np.ndarray, b: np.ndarray, dtype: str, *, checked: bool = True) -> np.ndarray:
    """``add``: one rounding. ``checked=False``: the caller already holds ``np.errstate(over="ignore",
    invalid="ignore")`` (a reduction's loop), which saves numpy's error-state switch per call."""
    if not checked:
        return _add(a, b, dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        return _add(a, b, dtype)


def _add(a: np.ndarray, b: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "fp32":
        return _canonical_f32(np.asarray(a, dtype=np.float32) + np.asarray(b, dtype=np.float32))
    return from_f32(to_f32(a, dtype) + to_f32(b, dtype), dtype)


def mul(a: np.ndarray, b: np.ndarray, dtype: str, *, checked: bool = True) -> np.ndarray:
    """``mul``: one rounding; ``checked`` as for :func:`add`."""
    if not checked:
        return _mul(a, b, dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        return _mul(a, b, dtype)


def _mul(a: np.ndarray, b: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "fp32":
        return _canonical_f32(np.asarray(a, dtype=np.float32) * np.asarray(b, dtype=np.float32))
    return from_f32(to_f32(a, dtype) * to_f32(b, dtype), dtype)


def _odd(s: np.ndarray, err: np.ndarray) -> np.ndarray:
    """``s`` (float64) nudged to round-to-odd of ``s + err`` when ``err`` is the exact remainder."""
    if not np.count_nonzero(err):  # exact sums (the common case of like magnitudes): nothing to nudge
        return s
    finite = np.isfinite(s) & np.isfinite(err)
    even = (s.view(np.uint64) & np.uint64(1)) == 0
    nudge = finite & (err != 0) & even
    return np.where(nudge, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)


def _odd_f32(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        r = x.astype(np.float32)
        inexact = np.isfinite(r) & (r.astype(np.float64) != x)
        even = (r.view(np.uint32) & np.uint32(1)) == 0
        toward = np.where(x > r.astype(np.float64), np.float32(np.inf), np.float32(-np.inf))
        return np.where(inexact & even, np.nextafter(r, toward), r).astype(np.float32)


def _maybe_double_rounded(s: np.ndarray) -> np.ndarray:
    """Where rounding the float64 sum ``s`` to fp32 may differ from rounding the exact sum: where ``s`` is an fp32
    midpoint (its 29 bits below fp32's last are 1000...0; the overflow threshold is one) or in fp32's subnormal
    range, whose midpoints sit lower; there only if ``s`` is inexact. Why: every fp32 midpoint is a float64, so the
    float64 rounding of an exact sum on one side of a midpoint stays on that side or lands on it; elsewhere the
    round-to-odd repair (a dozen numpy calls per fma on a shim's small blocks) changes nothing and is skipped."""
    bits = (s if s.flags.c_contiguous else np.ascontiguousarray(s)).view(np.uint64)
    return ((bits & _BELOW_F32) == _F32_MIDPOINT) | (np.abs(s) < 2.0**-126)


_BELOW_F32, _F32_MIDPOINT = np.uint64(0x1FFFFFFF), np.uint64(0x10000000)  # a float64's 29 bits under fp32's last


def fma(a: np.ndarray, b: np.ndarray, c: np.ndarray, dtype: str, *, checked: bool = True) -> np.ndarray:
    """``fma.rn``: ``a * b + c`` with one rounding to ``dtype``; ``checked`` as for :func:`add`."""
    if not checked:
        return _fma(a, b, c, dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        return _fma(a, b, c, dtype)


def _fma(a: np.ndarray, b: np.ndarray, c: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "fp32":
        a, b, c = (x if type(x) is np.ndarray and x.dtype == np.float32 else np.asarray(x, dtype=np.float32)
                   for x in (a, b, c))
        p = np.multiply(a, b, dtype=np.float64)  # exact: 48 significant bits
        s = p + c  # c promoted to float64, exactly
        maybe = _maybe_double_rounded(s)
        if not np.count_nonzero(maybe):
            return _canonical_f32(s.astype(np.float32))
        cc = c.astype(np.float64)
    else:
        p = to_f32(a, dtype).astype(np.float64) * to_f32(b, dtype).astype(np.float64)
        cc = to_f32(c, dtype).astype(np.float64)
        s = p + cc
        maybe = None
    bb = s - p
    err = (p - (s - bb)) + (cc - bb)
    if maybe is not None and not np.count_nonzero(maybe & (err != 0)):  # the sums at risk are exact
        return _canonical_f32(s.astype(np.float32))
    s = _odd(s, err)
    if dtype == "fp32":
        return _canonical_f32(s.astype(np.float32))
    return from_f32(_odd_f32(s), dtype)


def _pick(a: np.ndarray, b: np.ndarray, dtype: str, larger: bool) -> np.ndarray:
    """PTX ``max``/``min`` (``arith.maxnumf``/``minnumf``): a NaN operand loses to a number; -0 < +0. Equal values
    other than zeros have equal bits, so only ties read the signs, and only NaN operands the NaN selects."""
    fa, fb = to_f32(a, dtype), to_f32(b, dtype)
    take_a = (fa > fb) if larger else (fa < fb)
    eq = fa == fb
    if np.count_nonzero(eq):
        sa, sb = np.signbit(fa), np.signbit(fb)
        take_a |= eq & ((~sa | sb) if larger else (sa | ~sb))
    na, nb = np.isnan(fa), np.isnan(fb)
    dt = np.asarray(a).dtype
    if not (np.count_nonzero(na) or np.count_nonzero(nb)):
        return np.asarray(np.where(take_a, a, b), dtype=dt)
    take_a = np.where(nb, True, np.where(na, False, take_a))
    out = np.where(take_a, a, b)
    return np.where(na & nb, from_f32(np.float32(np.nan), dtype), out).astype(dt)


def maximum(a: np.ndarray, b: np.ndarray, dtype: str) -> np.ndarray:
    return _pick(a, b, dtype, True)


def minimum(a: np.ndarray, b: np.ndarray, dtype: str) -> np.ndarray:
    return _pick(a, b, dtype, False)
