"""Make the Triton interpreter's bf16 arithmetic compute what a GPU computes.

Why: the interpreter stores bf16 as raw ``uint16`` (numpy has no bf16) and then does numpy arithmetic on the bit
patterns: ``1.5 * 2`` gives 0 and ``3 * -1`` gives -3.7e19, comparisons order negative numbers after positive
ones, ``-x`` is an integer negation, ``tl.sum`` adds integers, fp32 -> bf16 truncates. The GPU (Triton 3.6-3.9
PTX for sm80/sm90, derived 2026-12-04 with ``scripts/probe_bf16_lowering.py``) computes bf16 ``+ - *`` as one
correctly rounded operation (``fma.rn.bf16`` on sm80, ``add/sub/mul.bf16`` on sm90), ``tl.fma`` as
``fma.rn.bf16`` (one rounding), ``tl.maximum/minimum`` as ``max/min.bf16``, comparisons exactly (``setp``),
``tl.max/min`` reductions in fp32 (exact), ``tl.sum``/``tl.cumsum`` as bf16 adds (each rounded), ``/`` in fp32
(Triton promotes bf16 division: ``cvt.f32.bf16``, ``div.full.f32``, ``cvt.rn.bf16.f32``), conversions with
``cvt.rn`` (RNE), ``atomic_add`` as one rounding per update. :func:`install` wraps the interpreter's builder
methods that see bf16 operands (``binary_op``, ``ternary_op``'s clamp, ``create_fma``, ``create_fneg``,
``cast_impl``, ``create_fp_to_fp``, ``create_atomic_rmw``) and its ``sum``/``min_max``/``cumsum``/``cumprod``
reductions, so that every bf16 value is computed in fp32 (exact for these operands) and rounded back once,
with RNE. For ``+ - *`` an fp32 result rounded again to bf16 equals one rounding of the exact value (24 >= 2*8+2
bits: double rounding is innocuous); ``fma`` is rounded to odd in fp32 first, which makes its second rounding
exact too. Kernels the GPU runs and the interpreter refuses run here as the GPU runs them (Triton 3.6/3.9 PTX for
sm90): float-to-integer conversions that saturate and send NaN to 0 (:func:`fp_to_int`, every float type, not only
bf16), ``max``/``argmax``/``min``/``argmin`` over an all-NaN slice, fp16 ``atomic_add`` past the largest
finite, fp32 ``atomic_xchg``, an int32 ``tl.sum`` that wraps.

What stays different is reported, never silent, by :mod:`harness.interp.differences`. An interpreter whose
builder the shim does not recognize gets one warning and no patch.
"""

from __future__ import annotations

import contextlib
import warnings
from typing import Any

import numpy as np

from harness.arch import Arch, parse_arch
from harness.fp8 import BF16_EXACT_ATTR
from harness.interp import differences
from harness.interp.patch import Patch, installed, lift
from harness.interp.shims import missing_methods

__all__ = ["install", "suspended", "active", "BF16_EXACT_ATTR", "TAG", "bf16_to_f32", "f32_to_bf16", "f64_to_bf16",
           "fp_to_int"]

#: The tag of this shim's records in the patch layer (:mod:`harness.interp.patch`).
TAG = "arith"

_TARGET_ATTR = "harness_arith_target"  # set on the installed binary_op: the arch it computes as


def bf16_to_f32(u: np.ndarray) -> np.ndarray:
    """bf16 bit patterns (uint16) -> float32, exactly (NaN payloads kept)."""
    return (np.asarray(u).astype(np.uint32) << np.uint32(16)).view(np.float32)


def f32_to_bf16(f: np.ndarray) -> np.ndarray:
    """float32 -> bf16 bit patterns (uint16): ``cvt.rn.bf16.f32``, RNE, overflow to inf, NaN -> 0x7fff."""
    b = np.ascontiguousarray(f, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = ((b + np.uint64(0x7FFF) + ((b >> np.uint64(16)) & np.uint64(1))) >> np.uint64(16)).astype(np.uint16)
    return np.where(np.isnan(f), np.uint16(0x7FFF), r).astype(np.uint16)


def _odd_f32(x: np.ndarray) -> np.ndarray:
    """float64 -> float32 rounded to odd (a second RNE rounding to bf16 is then the correct one)."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        r = x.astype(np.float32)
        inexact = np.isfinite(r) & (r.astype(np.float64) != x)
        even = (r.view(np.uint32) & np.uint32(1)) == 0
        fix = inexact & even
        toward = np.where(x > r.astype(np.float64), np.float32(np.inf), np.float32(-np.inf))
        return np.where(fix, np.nextafter(r, toward), r).astype(np.float32)


def f64_to_bf16(x: np.ndarray) -> np.ndarray:
    """float64 -> bf16 patterns with one RNE rounding of the float64 value."""
    return f32_to_bf16(_odd_f32(x))


def _fma_bf16(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    # fma.rn.bf16: a*b is exact in float64 (16 significant bits); a*b + c once, exactly or rounded to odd
    # via TwoSum, then rounded to odd in fp32, then RNE to bf16.
    p = bf16_to_f32(a).astype(np.float64) * bf16_to_f32(b).astype(np.float64)
    cc = bf16_to_f32(c).astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        s = p + cc
        bb = s - p
        err = (p - (s - bb)) + (cc - bb)
        finite = np.isfinite(s) & np.isfinite(err)
        even = (s.view(np.uint64) & np.uint64(1)) == 0
        nudge = finite & (err != 0) & even
        s = np.where(nudge, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
    return f64_to_bf16(s)


# --- the builder wrappers -----------------------------------------------------------------------------------

_BINARY_F32 = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
               "fmod": np.fmod}
_SELECT_OPS = {"maximum", "minimum", "fmax", "fmin"}  # the result is one operand: no rounding

#: The NaN an arithmetic op writes on the GPU, by result type, whatever NaNs went in: measured on an H100
#: (Triton 3.6.0, sm90; ``python -m harness fuzz --gpu``): the NaNs of the element-wise, loop, scan and cast
#: kernels of seeds 47000-47599 whose bits differed from the interpreter's (the first three per output, 99
#: elements) were all these words. numpy keeps an operand's payload and sign instead. Float-to-float conversions
#: do not follow this rule (a negative NaN to bf16 gave 0xffff): they are not modelled (docs/fuzz.md).
#: bf16 results get 0x7fff from :func:`f32_to_bf16` / :func:`f64_to_bf16` already.
CANONICAL_NAN = {np.dtype(np.float32): np.uint32(0x7FFFFFFF).view(np.float32),
                 np.dtype(np.float16): np.uint16(0x7FFF).view(np.float16)}


def canonical_nan(r: np.ndarray) -> np.ndarray:
    """``r`` with each NaN replaced by the GPU's canonical NaN of its type (fp32, fp16; others unchanged)."""
    word = CANONICAL_NAN.get(r.dtype)
    if word is None:
        return r
    nan = np.isnan(r)
    return np.where(nan, word, r) if nan.any() else r


def _select_zero_sign(op: str, a: np.ndarray, b: np.ndarray, r: np.ndarray) -> np.ndarray:
    # max(+0, -0) = +0 and min(+0, -0) = -0, whichever order (PTX max/min.bf16; not H200-measured)
    both_zero = (a == 0) & (b == 0)
    if op in ("maximum", "fmax"):
        z = np.where(np.signbit(a) & np.signbit(b), np.float32(-0.0), np.float32(0.0))
    else:
        z = np.where(np.signbit(a) | np.signbit(b), np.float32(-0.0), np.float32(0.0))
    return np.where(both_zero, z, r)


def fp_to_int(values: np.ndarray, dst: np.dtype) -> np.ndarray:
    """Float values converted to the integer type ``dst`` as the GPU converts them: toward zero, saturated to the
    range, NaN to 0 (PTX ``cvt.rzi.{s,u}{16,32,64}.{f32,f16,bf16}``: float-to-integer conversions clamp to the
    destination range and turn NaN into 0, PTX ISA ``cvt``; NaN to 0 and inf to INT32_MAX measured on an H100
    by ``python -m harness fuzz --gpu``). An 8-bit result is a 16-bit conversion whose low byte is stored
    (``cvt.rzi.s16.f32`` then ``st.global.b8``: Triton 3.6.0 and 3.9.0 PTX for sm90, every source type), so it
    saturates to the 16-bit range and wraps. numpy's cast is undefined out of range and gives INT_MIN for NaN."""
    dst = np.dtype(dst)
    info = np.iinfo(dst)
    wide = np.dtype(np.int16 if info.min < 0 else np.uint16) if info.bits == 8 else dst
    lo, hi = np.iinfo(wide).min, np.iinfo(wide).max
    with np.errstate(invalid="ignore"):
        f = np.asarray(values, dtype=np.float64)
        t = np.trunc(np.where(np.isnan(f), 0.0, f))
        over, under = t >= float(hi), t <= float(lo)  # float(hi) rounds up for 64 bits: >= catches 2**63 too
        big = np.int64 if info.min < 0 else np.uint64
        out = np.where(over | under, 0.0, t).astype(big)
    out = np.where(over, big(hi), np.where(under, big(lo), out))
    return out.astype(wide).astype(dst)


def _make_wrappers(itp: Any, tl: Any, target: Arch) -> dict[tuple[Any, str], Any]:
    B = itp.InterpreterBuilder
    TH = itp.TensorHandle
    bf16 = tl.bfloat16
    orig_binary = B.binary_op
    orig_ternary = B.ternary_op
    orig_fma = B.create_fma
    orig_cast = B.cast_impl
    orig_fp_to_fp = B.create_fp_to_fp
    orig_rmw = B.create_atomic_rmw
    RTZ = getattr(getattr(itp, "_ir", None), "ROUNDING_MODE", None)
    RTZ = getattr(RTZ, "RTZ", None)

    def is_bf16(h: Any) -> bool:
        return getattr(h.dtype, "scalar", h.dtype) == bf16

    def binary_op(self: Any, lhs: Any, rhs: Any, op: Any) -> Any:
        name = getattr(op, "__name__", "")
        if not (is_bf16(lhs) and is_bf16(rhs)):
            out = orig_binary(self, lhs, rhs, op)
            if name in _BINARY_F32 and np.asarray(out.data).dtype.kind == "f":
                return TH(canonical_nan(np.asarray(out.data)), out.dtype)
            return out
        a, b = bf16_to_f32(lhs.data), bf16_to_f32(rhs.data)
        with np.errstate(all="ignore"):
            r = op(a, b)
        if r.dtype == np.bool_:  # comparisons: exact on fp32 values
            return TH(r, tl.int1)
        if name in _SELECT_OPS:
            return TH(f32_to_bf16(_select_zero_sign(name, a, b, r)), bf16)
        if name not in _BINARY_F32:
            raise NotImplementedError(f"harness.interp.arith: bf16 {name} is not modelled")
        return TH(f32_to_bf16(r), bf16)

    def ternary_op(self: Any, lhs: Any, rhs: Any, other: Any, op: Any) -> Any:
        # clamp (np.clip) on bf16: the result is one of the operands; tl.where (np.where) selects bit patterns
        if op is np.clip and is_bf16(other):
            with np.errstate(all="ignore"):
                r = np.clip(bf16_to_f32(lhs.data), bf16_to_f32(rhs.data), bf16_to_f32(other.data))
            return TH(f32_to_bf16(r), bf16)
        return orig_ternary(self, lhs, rhs, other, op)

    orig_clampf = B.create_clampf

    def create_clampf(self: Any, arg: Any, lo: Any, hi: Any, propagate_nans: Any) -> Any:
        # tt.clampf: max then min (max/min.{f32,bf16}: a NaN operand gives the other), or the .NaN forms when
        # propagating. Triton 3.6's interpreter clips, propagating NaN whatever the mode, for every dtype (and
        # 3.6 clamps bf16 in fp32); 3.9's does this for every dtype already.
        if not str(getattr(propagate_nans, "name", propagate_nans)).endswith("NONE"):
            return orig_clampf(self, arg, lo, hi, propagate_nans)
        return self.binary_op(self.binary_op(arg, lo, np.fmax), hi, np.fmin)

    def create_fma(self: Any, x: Any, y: Any, z: Any) -> Any:
        if is_bf16(z):
            return TH(_fma_bf16(*np.broadcast_arrays(x.data, y.data, z.data)), bf16)
        out = orig_fma(self, x, y, z)
        return TH(canonical_nan(np.asarray(out.data)), out.dtype) if np.asarray(out.data).dtype.kind == "f" else out

    def create_fneg(self: Any, arg: Any) -> Any:
        if is_bf16(arg):
            return TH((arg.data ^ np.uint16(0x8000)).astype(np.uint16), bf16)
        return orig_fneg(self, arg)

    orig_fneg = getattr(B, "create_fneg", None)

    def to_f32_handle(src: Any) -> Any:
        return TH(bf16_to_f32(src.data), tl.float32)

    def cast_impl(self: Any, src: Any, dst_type: Any) -> Any:
        s, d = src.dtype.scalar, dst_type.scalar
        if s == bf16 and d == bf16:
            return TH(src.data, bf16)
        if s.is_floating() and d.is_int() and not d.is_bool():
            data = bf16_to_f32(src.data) if s == bf16 else src.data
            return TH(fp_to_int(data, itp._get_np_dtype(d)), d)
        if s == bf16:  # bf16 -> anything: through its exact fp32 value
            return to_f32_handle(src) if d == tl.float32 else orig_cast(self, to_f32_handle(src), dst_type)
        if d == bf16:
            data = np.asarray(src.data)
            if s == tl.float32:
                return TH(f32_to_bf16(data), bf16)
            if s in (tl.float16, tl.float64):
                return TH(f64_to_bf16(data.astype(np.float64)), bf16)
            if data.dtype.kind in "iub":
                # sm90+: cvt.rn.bf16.s32, one rounding; before sm90: cvt.rn.f32.s32 then cvt.rn.bf16.f32
                one = (target.cc or 0) >= 90
                return TH(f64_to_bf16(data.astype(np.float64)) if one else f32_to_bf16(data.astype(np.float32)),
                          bf16)
        return orig_cast(self, src, dst_type)

    def create_fp_to_fp(self: Any, src: Any, dst_type: Any, rounding_mode: Any) -> Any:
        s, d = src.dtype.scalar, dst_type.scalar
        if s == bf16 and d == tl.float32:
            return to_f32_handle(src)
        if s == tl.float32 and d == bf16:
            if RTZ is not None and rounding_mode == RTZ:  # cvt.rz.bf16.f32: truncate; NaN canonical
                bits = (np.ascontiguousarray(src.data, np.float32).view(np.uint32) >> np.uint32(16))
                return TH(np.where(np.isnan(src.data), np.uint16(0x7FFF), bits.astype(np.uint16)), bf16)
            return TH(f32_to_bf16(src.data), bf16)
        return orig_fp_to_fp(self, src, dst_type, rounding_mode)

    def create_atomic_rmw(self: Any, rmwOp: Any, ptr: Any, val: Any, mask: Any, sem: Any, scope: Any) -> Any:
        if rmwOp == itp._ir.ATOMIC_OP.XCHG and getattr(val.dtype, "scalar", val.dtype) == tl.float32:
            # the interpreter's runtime has no float xchg; the GPU exchanges the 32-bit pattern
            # (atom.global.gpu.acq_rel.exch.b32, derived from Triton 3.6's and 3.9's PTX for sm90): an int32
            # xchg of the same bits
            bits = TH(np.ascontiguousarray(val.data, np.float32).view(np.int32), tl.int32)
            old = orig_rmw(self, rmwOp, ptr, bits, mask, sem, scope)
            return TH(np.ascontiguousarray(old.data, np.int32).view(np.float32), tl.float32)
        f16 = getattr(val.dtype, "scalar", val.dtype) == tl.float16
        if not ((is_bf16(val) or f16) and rmwOp == itp._ir.ATOMIC_OP.FADD):
            return orig_rmw(self, rmwOp, ptr, val, mask, sem, scope)
        # one correctly rounded add per update, in element order (atom.add.noftz.bf16 / .f16, or a CAS loop),
        # past the largest finite to inf (the interpreter's own fp16 add raises OverflowError there)
        ptrs, vals, msk = np.broadcast_arrays(ptr.data, val.data, mask.data)
        store_dt = np.dtype(np.float16 if f16 else np.uint16)
        old = np.zeros(ptrs.shape, dtype=store_dt)
        one = np.ones((1,), dtype=bool)
        for idx in np.ndindex(ptrs.shape):
            if not msk[idx]:
                continue
            p = np.asarray([ptrs[idx]], dtype=np.uint64)
            cur = itp._interpreter.load(p, one, np.zeros((1,), store_dt), store_dt)
            old[idx] = cur[0]
            add = np.asarray([vals[idx]], store_dt)
            if f16:  # the fp16 sum is exact in float64: one rounding
                with np.errstate(over="ignore", invalid="ignore"):
                    new = (cur.astype(np.float64) + add.astype(np.float64)).astype(np.float16)
            else:
                new = f32_to_bf16(bf16_to_f32(cur) + bf16_to_f32(add))
            itp._interpreter.store(p, new, one)
        return TH(old, tl.float16 if f16 else bf16)

    cast_impl.__dict__[BF16_EXACT_ATTR] = True
    out: dict[tuple[Any, str], Any] = {
        (B, "binary_op"): binary_op, (B, "ternary_op"): ternary_op, (B, "create_fma"): create_fma,
        (B, "create_clampf"): create_clampf,
        (B, "cast_impl"): cast_impl, (B, "create_fp_to_fp"): create_fp_to_fp,
        (B, "create_atomic_rmw"): create_atomic_rmw,
    }
    if orig_fneg is not None:
        out[(B, "create_fneg")] = create_fneg
    # Triton 3.6's interpreter maps maxnumf/minnumf (tl.maximum/minimum's default, max.f32/max.bf16 on the GPU:
    # a NaN operand gives the other) to NaN-propagating np.maximum/minimum, for every dtype; 3.9 uses fmax/fmin
    out[(B, "create_maxnumf")] = lambda self, lhs, rhs: self.binary_op(lhs, rhs, np.fmax)
    out[(B, "create_minnumf")] = lambda self, lhs, rhs: self.binary_op(lhs, rhs, np.fmin)
    if not hasattr(B, "get_bf16"):  # Triton 3.6: bf16 scalar constants (x * 0.1) fail without it
        out[(B, "get_bf16")] = lambda self, value: self.cast_impl(self.get_fp32(value), tl.bfloat16)
    out.update(_reduce_wrappers(itp, tl))
    return out


def _reduce_wrappers(itp: Any, tl: Any) -> dict[tuple[Any, str], Any]:
    R, S = itp.ReduceOps, itp.ScanOps
    bf16 = tl.bfloat16
    orig_sum, orig_min_max = R.sum, R.min_max
    orig_cumsum, orig_cumprod = S.cumsum, S.cumprod

    def seq(data: np.ndarray, axis: int, op: Any, keep: bool, scan: bool) -> np.ndarray:
        x = np.moveaxis(bf16_to_f32(data), axis, 0)
        acc = np.asarray(x[0], dtype=np.float32)
        shape = acc.shape  # () for a 1-D block: f32_to_bf16 returns at least 1-D
        steps = [f32_to_bf16(acc).reshape(shape)]
        for k in range(1, x.shape[0]):
            with np.errstate(all="ignore"):
                acc = bf16_to_f32(f32_to_bf16(op(acc, x[k])).reshape(shape))
            steps.append(f32_to_bf16(acc).reshape(shape))
        if scan:
            return np.moveaxis(np.stack(steps), 0, axis)
        r = steps[-1]
        return np.expand_dims(r, axis) if keep else r

    def r_sum(self: Any, input: Any) -> Any:  # noqa: A002 - Triton's own name
        data = input.handle.data
        if input.dtype.scalar.is_int() and data.dtype.kind in "iu":  # not int1 (numpy bool)
            # add.s32 wraps on the GPU; numpy sums small ints in int64, whose scalar Triton 3.6's interpreter
            # then refuses out of int32's range (NumPy 2). Summed in the input's own width: wrapped.
            return self.to_tensor(np.sum(data, axis=self.axis, keepdims=self.keep_dims, dtype=data.dtype),
                                  input.dtype)
        if input.dtype.scalar != bf16:
            return orig_sum(self, input)
        differences.warn("sum", "bf16")
        if self.axis is None:
            out = seq(data.reshape(-1), 0, np.add, False, scan=False)
            out = out.reshape((1,) * data.ndim) if self.keep_dims else out.reshape(())
        else:
            out = seq(data, self.axis, np.add, self.keep_dims, scan=False)
        return self.to_tensor(out, input.dtype)

    def r_min_max(self: Any, input: Any, val_reduce_op: Any, idx_reduce_op: Any = None) -> Any:
        # Over an all-NaN slice the GPU (derived from Triton 3.6's and 3.9's PTX for sm90) gives: for tl.max/min,
        # max.f32/min.f32 of NaNs, the canonical NaN (0x7fffffff / 0x7fff: measured on an H100, Triton 3.6,
        # tests/lowering row_max_argmax); for argmax/argmin, whose combine selp's the first (value, index) pair
        # only when setp.gt/lt (or setp.eq and a lower index) holds, the second pair at every step; the storing
        # thread pairs each element with higher-indexed ones (registers in order, then shfl.bfly and the warps
        # above it), so the slice's last element and index n - 1. Triton 3.9's interpreter raises there
        # (np.nanargmax), 3.6's returns index 0 (np.argmax).
        inp = input[0] if isinstance(input, tuple) else input
        is_bf16 = inp.dtype.scalar == bf16
        f = bf16_to_f32(inp.handle.data) if is_bf16 else np.asarray(inp.handle.data)
        axis, keep = self.axis, self.keep_dims
        all_nan = np.isnan(f).all(axis=axis, keepdims=True) if f.dtype.kind == "f" else np.zeros((), bool)
        if not is_bf16 and not all_nan.any():
            return orig_min_max(self, input, val_reduce_op, idx_reduce_op)
        safe = np.where(all_nan, np.float32(0), f).astype(f.dtype)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices
            v = np.asarray(val_reduce_op(f, axis=axis, keepdims=keep)) if val_reduce_op else None
            i = np.asarray(idx_reduce_op(safe, axis=axis, keepdims=keep)) if idx_reduce_op else None
        if i is not None:
            flat = f.reshape(-1) if axis is None else f
            last = np.take(flat, [-1], axis=0 if axis is None else axis)
            nan = all_nan
            if not keep:
                nan = nan.reshape(()) if axis is None else np.squeeze(nan, axis)
                last = last.reshape(()) if axis is None else np.squeeze(last, axis)
            elif axis is None:
                last = last.reshape(nan.shape)
            i = np.where(nan, flat.shape[0 if axis is None else axis] - 1, i).astype(np.int32)
            if v is not None:
                v = np.where(nan, last, v)
        elif v is not None and v.dtype in CANONICAL_NAN:
            v = np.where(all_nan if keep else (all_nan.reshape(()) if axis is None else np.squeeze(all_nan, axis)),
                         CANONICAL_NAN[v.dtype], v)
        val = idx = None
        if v is not None:
            val = self.to_tensor(f32_to_bf16(v.astype(np.float32)).reshape(v.shape) if is_bf16 else v, inp.dtype)
        if i is not None:
            idx = self.to_tensor(i, tl.int32)
        if val is not None and idx is not None:
            return val, idx
        return val if val is not None else idx

    def scan(orig: Any, op: Any) -> Any:
        def fn(self: Any, input: Any) -> Any:  # noqa: A002
            if input.dtype.scalar != bf16:
                return orig(self, input)
            differences.warn("scan", "bf16")
            return [self.to_tensor(seq(input.handle.data, self.axis, op, False, scan=True), input.dtype)]

        return fn

    return {(R, "sum"): r_sum, (R, "min_max"): r_min_max, (S, "cumsum"): scan(orig_cumsum, np.add),
            (S, "cumprod"): scan(orig_cumprod, np.multiply)}


# --- install ---------------------------------------------------------------------------------------------

_REQUIRED = {
    "InterpreterBuilder": ("binary_op", "ternary_op", "create_fma", "cast_impl", "create_fp_to_fp", "create_maxnumf",
                           "create_minnumf", "get_fp32", "create_clampf",
                           "create_atomic_rmw", "create_fmul", "create_fadd", "create_fsub", "create_fdiv",
                           "create_dot"),
    "ReduceOps": ("sum", "min_max", "to_tensor"),
    "ScanOps": ("cumsum", "cumprod"),
    "GridExecutor": ("__call__",),
}


def _layout_problem(itp: Any, tl: Any) -> str | None:
    problem = missing_methods(itp, _REQUIRED)
    if problem:
        return problem
    if not hasattr(tl, "bfloat16") or not hasattr(itp, "_interpreter") or not hasattr(itp, "_ir"):
        return "no tl.bfloat16 / interpreter runtime"
    if itp._get_np_dtype(tl.bfloat16) != np.dtype(np.uint16):
        return "bf16 is not stored as uint16"
    return None


def install(patch: Patch, target: str | Arch | None = None) -> bool:
    """Make the interpreter's bf16 arithmetic the GPU's, through ``patch`` (integer -> bf16 conversions as
    ``target`` lowers them; default sm90). ``False`` after one warning when this Triton's interpreter is not
    understood: nothing is patched then."""
    t = parse_arch("sm90" if target is None else target)
    try:
        import triton.language as tl
        from triton.runtime import interpreter as itp
    except ImportError as e:
        warnings.warn(f"harness: Triton's interpreter is not importable ({e}); its bf16 arithmetic stays as is",
                      RuntimeWarning, stacklevel=2)
        return False
    problem = _layout_problem(itp, tl)
    if problem:
        warnings.warn(f"harness: cannot make the interpreter's bf16 arithmetic GPU-exact on this Triton "
                      f"({problem}); its own (bf16 computed on bit patterns) stays in use", RuntimeWarning,
                      stacklevel=2)
        return False
    wrappers = _make_wrappers(itp, tl, t)
    wrappers[(itp.InterpreterBuilder, "binary_op")].__dict__[_TARGET_ATTR] = t
    for (obj, name), fn in wrappers.items():
        patch.setattr(obj, name, fn, tag=TAG)
    return True


def active() -> Arch | None:
    """The arch whose bf16 arithmetic the interpreter computes now, or ``None`` when the shim is off."""
    try:
        from triton.runtime import interpreter as itp
    except ImportError:  # pragma: no cover
        return None
    B = itp.InterpreterBuilder
    return B.binary_op.__dict__.get(_TARGET_ATTR) if installed(B, "binary_op", TAG) else None


def suspended() -> contextlib.AbstractContextManager[None]:
    """The interpreter's own bf16 arithmetic inside the block (every layer of this shim lifted: to measure or
    model it), the shim's after."""
    return lift(TAG)
