"""The numeric checks behind the public asserts: tensors and FP8 codes against a Tolerance.

Shaped like ``torch.testing._comparison``: the ``check_*`` functions return a
:class:`~harness.compare.message.Mismatch` record (or None) and never raise on a numeric failure, so other
features (goldens) can wrap the record; only the public ``assert_*`` (``harness.compare``) raise. Every
check, passing or not, is reported to ``harness.summary.record``.

Which row judges: a check reports the op and dtype it was given, else the row's own (``tol.op`` /
``tol.dtype``, set when the row came from the table), else the compared dtype. The identity travels once,
on the row.

The rules (NaN, inf, ``max_mismatch``, which kind of row) are the public asserts' and are stated once, in
:mod:`harness.compare`.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from harness import fp8, summary, vacuity
from harness.compare.message import HIST_BINS, MAX_ROWS, Mismatch, Row
from harness.dtypes import short_name
from harness.session import current_arch
from harness.text import fmt_index, fmt_num
from harness.tolerances import Tolerance

__all__ = ["EXPLICIT", "check_close", "check_flag", "check_fp8", "check_fp8_mixed", "check_label", "check_tensor_arg",
           "check_tol", "row_identity"]

#: The key of a rule built from an assert's own arguments rather than read from the table.
EXPLICIT = "explicit arguments"


# ------------------------------------------------------------------------------------------ helpers


def _arch_name() -> str:
    return current_arch().name


def _record(
    *,
    op: str,
    dtype: str,
    arch: str,
    n: int,
    worst_ulp: int | None,
    worst_abs: float | None,
    tol: Any,
    passed: bool,
    worst_ratio: float | None = None,
) -> None:
    summary.record(
        op=op,
        dtype=dtype,
        arch=arch,
        n=n,
        worst_ulp=worst_ulp,
        worst_abs=worst_abs,
        tol=tol,
        passed=passed,
        worst_ratio=worst_ratio,
    )


def row_identity(tol: Tolerance, op: str, dtype: str, fallback_dtype: str) -> tuple[str, str]:
    """(op, dtype) a check reports: the caller's, else the table row's own (not its wildcards), else ``""``
    and the compared dtype."""
    row_op = tol.op if tol.op != "*" else ""
    row_dtype = tol.dtype if tol.dtype != "*" else ""
    return op or row_op, dtype or row_dtype or fallback_dtype


def _index(flat: int, shape: torch.Size) -> tuple[int, ...]:
    out = []
    for size in reversed(shape):
        out.append(flat % size)
        flat //= size
    return tuple(reversed(out)) if shape else ()


def check_tol(tol: Any, kind: str) -> Tolerance:
    if not isinstance(tol, Tolerance):
        raise TypeError(f"tol must be a harness.tolerances.Tolerance, got {type(tol).__name__}")
    if tol.kind != kind:
        what = "FP8 codes need" if kind == "codes" else "a float comparison needs"
        need = "a code rule (max_ulp set)" if kind == "codes" else "a float rule (rtol/atol, max_ulp unset)"
        raise ValueError(
            f"tol {tol!r} is a {tol.kind} rule, but {what} {need}; look the row up with "
            f"lookup(..., kind={kind!r}) or tolerance(..., kind={kind!r})"
        )
    return tol


def check_tensor_arg(t: Any, name: str) -> torch.Tensor:
    """``t`` if it is a tensor whose values can be read; else an error naming ``name`` (shared with topk)."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.device.type == "meta":
        raise ValueError(f"{name} is on the meta device: it has a shape and a dtype but no values to compare")
    if t.layout != torch.strided:
        raise TypeError(f"{name} has layout {t.layout}; pass a dense tensor ({name}.to_dense())")
    if t.is_complex():
        raise TypeError(f"{name} is complex ({t.dtype}); compare its .real and .imag separately")
    if t.dtype == torch.bool:
        raise TypeError(f"{name} is a bool tensor; compare masks with torch.equal")
    return t


def check_flag(v: Any, name: str) -> bool:
    if not isinstance(v, bool):
        raise TypeError(f"{name} must be True or False, got {v!r}")
    return v


def check_label(v: Any, name: str) -> str:
    """``v`` as a label (``op``, ``dtype``): a str, or None for "not given" (``""``). Checked before comparing,
    so a wrong type fails on a passing comparison too, not only when a report is built."""
    if v is None:
        return ""
    if not isinstance(v, str):
        raise TypeError(f"{name} must be a str (or None), got {type(v).__name__} {v!r}")
    return v


def _shape_mismatch(a: torch.Tensor, e: torch.Tensor, **ctx: Any) -> Mismatch | None:
    if a.shape == e.shape:
        return None
    return Mismatch(kind="shape", n=e.numel(), k=e.numel(), shapes=(tuple(a.shape), tuple(e.shape)), **ctx)


def _allowed_k(tol: Tolerance, n: int) -> int:
    """Elements allowed to break the rule: floor(max_mismatch * n) (so 0.1% of 999 elements is 0)."""
    return math.floor(tol.max_mismatch * n + 1e-9)


def _worst_order(primary: torch.Tensor, secondary: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """``idx`` reordered by (primary desc, secondary desc), first MAX_ROWS (report order only)."""
    o2 = torch.sort(secondary[idx], descending=True, stable=True).indices
    idx = idx[o2]
    o1 = torch.sort(primary[idx], descending=True, stable=True).indices
    return idx[o1][:MAX_ROWS]


# ------------------------------------------------------------------------------------------ float


def _check_scale(scale: Any, shape: torch.Size) -> torch.Tensor:
    """``scale`` as float64 on the CPU, broadcast to ``shape``; an error naming ``scale`` unless it is a real
    number or tensor that broadcasts to the compared shape and is finite and >= 0 everywhere."""
    if isinstance(scale, (int, float)) and not isinstance(scale, bool):
        s = torch.tensor(float(scale), dtype=torch.float64)
    elif isinstance(scale, torch.Tensor):
        check_tensor_arg(scale, "scale")
        s = scale.detach().to("cpu", torch.float64)
    else:
        raise TypeError(f"scale must be a torch.Tensor or a real number, got {type(scale).__name__}")
    try:
        s = s.broadcast_to(shape)
    except RuntimeError:
        raise ValueError(
            f"scale has shape {tuple(s.shape)}, which does not broadcast to actual's shape {tuple(shape)}"
        ) from None
    bad = ~torch.isfinite(s) | (s < 0)
    if bool(bad.any()):
        i = int(bad.reshape(-1).nonzero()[0])
        v = float(s.reshape(-1)[i])
        raise ValueError(
            f"scale must be finite and >= 0 everywhere: {int(bad.sum())} element(s) are not, first "
            f"{fmt_num(v)} at index {fmt_index(_index(i, shape))}"
        )
    return s


def check_close(
    actual: torch.Tensor,
    expected: torch.Tensor,
    tol: Tolerance,
    *,
    scale: Any = None,
    op: str | None = "",
    dtype: str | None = "",
    equal_nan: bool = False,
) -> Mismatch | None:
    """Elementwise ``|actual - expected| <= tol.atol + tol.rtol * |expected|``; None when it holds.

    With ``scale`` (a tensor broadcastable to ``actual``, or a number; finite and >= 0) the allowed error is
    ``tol.atol + tol.rtol * scale`` instead: for results whose rounding error follows another magnitude
    than their own, e.g. a dot product's error follows the sum of its products' magnitudes, not the sum.
    Both are compared in float64 (a dtype difference is allowed but named in the report). NaN fails unless
    ``equal_nan`` (then NaN must face NaN), whatever the scale; ±inf must face the identical inf. Up to
    ``floor(tol.max_mismatch * n)`` elements may break the rule.
    """
    tol = check_tol(tol, "float")
    check_flag(equal_nan, "equal_nan")
    op, dtype = check_label(op, "op"), check_label(dtype, "dtype")
    for name, t in (("actual", actual), ("expected", expected)):
        check_tensor_arg(t, name)
        if t.dtype in fp8.FORMAT_OF_DTYPE or t.dtype == torch.uint8:
            raise TypeError(
                f"{name} has dtype {t.dtype}: compare FP8 codes with assert_fp8_close / "
                f"assert_fp8_within_one_ulp"
            )
        if not t.dtype.is_floating_point:
            raise TypeError(f"{name} must be a floating-point tensor, got dtype {t.dtype}")
    s = None if scale is None else _check_scale(scale, actual.shape)
    op, dtype = row_identity(tol, op, dtype, short_name(expected.dtype) or str(expected.dtype))
    arch = _arch_name()
    ctx = dict(op=op, dtype=dtype, arch=arch, tol=tol)
    bad_shape = _shape_mismatch(actual, expected, **ctx)
    if bad_shape is not None:
        _record(
            op=op,
            dtype=dtype,
            arch=arch,
            n=expected.numel(),
            worst_ulp=None,
            worst_abs=None,
            tol=tol,
            passed=False,
        )
        return bad_shape
    a = actual.detach().to("cpu", torch.float64).reshape(-1)
    e = expected.detach().to("cpu", torch.float64).reshape(-1)
    # what the relative error is relative to: |expected|, or the caller's scale
    base = e.abs() if s is None else s.reshape(-1)
    n = e.numel()
    nan = torch.isnan(a) | torch.isnan(e)
    inf = (torch.isinf(a) | torch.isinf(e)) & ~nan
    fin = ~(nan | inf)
    diff = (a - e).abs()
    allowed = tol.atol + tol.rtol * base
    ok = torch.where(
        nan, torch.isnan(a) & torch.isnan(e) & equal_nan, torch.where(inf, a == e, diff <= allowed)
    )
    k = int((~ok).sum())
    allowed_k = _allowed_k(tol, n)
    nan_bad = int((nan & ~ok).sum())
    passed = k <= allowed_k and nan_bad == 0

    worst_abs = worst_ratio = None
    m = Mismatch(kind="float", n=n, k=k, allowed_k=allowed_k, scaled=s is not None, equal_nan=equal_nan,
                 nan_bad=nan_bad, **ctx)
    if bool(fin.any()):
        d = torch.where(fin, diff, -1.0)
        i = int(d.argmax())
        worst_abs = float(diff[i])
        m.worst_abs, m.worst_abs_index, m.worst_abs_allowed = (
            worst_abs,
            _index(i, expected.shape),
            float(allowed[i]),
        )
        rel = torch.where(base > 0, diff / base, torch.where(diff > 0, math.inf, 0.0))
        rel = torch.where(fin, rel, -1.0)
        j = int(rel.argmax())
        m.worst_rel, m.worst_rel_index, m.worst_rel_allowed = (
            float(rel[j]),
            _index(j, expected.shape),
            tol.rtol,
        )
        ratio = torch.where(allowed > 0, diff / allowed, torch.where(diff > 0, math.inf, 0.0))
        worst_ratio = float(ratio[fin].max())
    if bool(((nan | inf) & ~ok).any()):
        worst_ratio = math.inf  # a NaN/inf mismatch has no finite error: no headroom
    _record(
        op=op,
        dtype=dtype,
        arch=arch,
        n=n,
        worst_ulp=None,
        worst_abs=worst_abs,
        tol=tol,
        passed=passed,
        worst_ratio=worst_ratio,
    )
    if passed:
        vacuity.probe(
            "golden.check" if op.startswith("golden/") else "assert_close_tol",
            lambda c: check_close(c, expected, tol, scale=scale, op=op, dtype=dtype, equal_nan=equal_nan) is None,
            lambda: vacuity.float_corruptions(actual, expected, tol, scale=s, equal_nan=equal_nan),
            op=op, dtype=dtype, tol=tol)
        return None
    bad = (~ok).nonzero().reshape(-1)
    special = (nan | inf).to(torch.float64)
    score = torch.where(allowed > 0, diff / allowed, torch.where(diff > 0, math.inf, 0.0))
    score = torch.nan_to_num(score, nan=math.inf)
    for i in _worst_order(special, score, bad).tolist():
        m.rows.append(
            Row(
                _index(i, expected.shape),
                float(a[i]),
                float(e[i]),
                float(diff[i]),
                float(allowed[i]),
                scale=None if s is None else float(base[i]),
            )
        )
    if actual.dtype != expected.dtype:
        m.dtypes = (str(actual.dtype), str(expected.dtype))
    if nan.any():
        m.nan_counts = (int(torch.isnan(a).sum()), int(torch.isnan(e).sum()))
    return m


# ------------------------------------------------------------------------------------------ fp8


def check_fp8_mixed(
    actual: Any,
    expected: Any,
    fmt: Any,
    *,
    max_ulp: int,
    floor: float,
    tol: Tolerance,
    op: str | None,
    dtype: str | None,
    nan_equal: bool,
) -> Mismatch | None:
    f = fp8.get_format(fmt)
    check_flag(nan_equal, "nan_equal")
    op, dtype = check_label(op, "op"), check_label(dtype, "dtype")
    a = fp8.as_codes(check_tensor_arg(actual, "actual"), f, name="actual")
    e = fp8.as_codes(check_tensor_arg(expected, "expected"), f, name="expected")
    op, dtype = row_identity(tol, op, dtype, f.name)
    arch = _arch_name()
    ctx = dict(op=op, dtype=dtype, arch=arch, fmt=f.name, tol=tol)
    bad_shape = _shape_mismatch(a, e, **ctx)
    if bad_shape is not None:
        _record(
            op=op, dtype=dtype, arch=arch, n=e.numel(), worst_ulp=None, worst_abs=None, tol=tol, passed=False
        )
        return bad_shape
    shape = e.shape
    a = a.detach().to("cpu").reshape(-1)
    e = e.detach().to("cpu").reshape(-1)
    n = e.numel()
    ulp = fp8.ulp_distance(a, e, f)
    va, ve = fp8.decode(a, f).double(), fp8.decode(e, f).double()
    nan = fp8.is_nan_code(a, f) | fp8.is_nan_code(e, f)
    special = nan | fp8.is_inf_code(a, f) | fp8.is_inf_code(e, f)
    diff = (va - ve).abs()
    same_sign = (va * ve) >= 0  # a zero counts as either sign
    ok = ((ulp <= max_ulp) | ((diff <= floor) & same_sign)) & ~special
    if nan_equal:
        # NaN facing NaN, any two NaN codes of the format (torch's equal_nan: every NaN is one NaN), is 0 apart:
        # in the worst-ULP figure, the histogram and the session report it must not read as ULP_FAR
        same_nan = fp8.is_nan_code(a, f) & fp8.is_nan_code(e, f)
        ok |= same_nan
        ulp = torch.where(same_nan, torch.zeros_like(ulp), ulp)
    k = int((~ok).sum())
    allowed_k = _allowed_k(tol, n)
    nan_bad = int((nan & ~ok).sum())
    passed = k <= allowed_k and nan_bad == 0

    m = Mismatch(kind="fp8", n=n, k=k, allowed_k=allowed_k, max_ulp=max_ulp, floor=float(floor), equal_nan=nan_equal,
                 nan_bad=nan_bad, **ctx)
    worst_ulp = worst_abs = None
    if n:
        i = int(ulp.argmax())
        worst_ulp, m.worst_ulp, m.worst_ulp_index = int(ulp[i]), int(ulp[i]), _index(i, shape)
        fin = ~special
        if bool(fin.any()):
            worst_abs = float(diff[fin].max())  # for the summary: over every element
        # for the report: over the elements that break the rule (a 1-ULP step may exceed the floor and pass)
        fin_bad = fin & ~ok
        if bool(fin_bad.any()):
            j = int(torch.where(fin_bad, diff, -1.0).argmax())
            m.worst_abs, m.worst_abs_index = float(diff[j]), _index(j, shape)
            m.worst_abs_allowed = float(floor) if floor > 0 else None
    _record(
        op=op, dtype=dtype, arch=arch, n=n, worst_ulp=worst_ulp, worst_abs=worst_abs, tol=tol, passed=passed
    )
    if passed:
        vacuity.probe(
            "golden.check" if op.startswith("golden/") else "assert_fp8_close/assert_fp8_within_one_ulp",
            lambda c: check_fp8_mixed(c, expected, f, max_ulp=max_ulp, floor=floor, tol=tol, op=op, dtype=dtype,
                                      nan_equal=nan_equal) is None,
            lambda: vacuity.fp8_corruptions(expected, f, max_ulp=max_ulp, floor=float(floor),
                                            max_mismatch=tol.max_mismatch),
            op=op, dtype=dtype, tol=tol,
            row={"max_ulp": max_ulp, "ulp_floor": float(floor), "max_mismatch": tol.max_mismatch})
        return None
    m.hist = {}
    for label, lo, hi in HIST_BINS:
        m.hist[label] = int(((ulp >= lo) & (ulp <= min(hi, 2**31 - 1))).sum())
    bad = (~ok).nonzero().reshape(-1)
    for i in _worst_order(ulp.to(torch.float64), torch.nan_to_num(diff, nan=math.inf), bad).tolist():
        m.rows.append(
            Row(
                _index(i, shape),
                float(va[i]),
                float(ve[i]),
                float(diff[i]),
                float(floor) if floor > 0 else None,
                int(a[i]),
                int(e[i]),
                int(ulp[i]),
            )
        )
    return m


def check_fp8(
    actual_codes: Any,
    expected_codes: Any,
    fmt: Any,
    tol: Tolerance,
    *,
    op: str | None = "",
    dtype: str | None = "",
    nan_equal: bool = False,
) -> Mismatch | None:
    """FP8 codes within ``tol.max_ulp`` codes (a code rule: a float row is refused), or within
    ``tol.ulp_floor`` in value with the same sign; up to ``floor(tol.max_mismatch * n)`` elements may break
    that, never a NaN. None when it holds."""
    tol = check_tol(tol, "codes")
    max_ulp = tol.max_ulp
    return check_fp8_mixed(
        actual_codes,
        expected_codes,
        fmt,
        max_ulp=max_ulp,
        floor=tol.ulp_floor,
        tol=tol,
        op=op,
        dtype=dtype,
        nan_equal=nan_equal,
    )
