"""Tensor and FP8-code assertions against a :class:`~harness.tolerances.Tolerance`: the public boundary.

The checks (:mod:`harness.compare.checks`) return a :class:`~harness.compare.message.Mismatch` record and
never raise on a numeric failure; the asserts here turn a record into one ``AssertionError`` whose text
:mod:`harness.compare.message` builds, with ``__tracebackhide__`` so pytest shows the caller's line.

NaN never passes unless the caller says so (``equal_nan=True`` / ``nan_equal=True``, and then only NaN
facing NaN at the same index; as in ``torch.testing``, every NaN equals every NaN, so two NaN codes of one FP8
format, e4nv's 0x7f and 0xff, are equal NaN), and ``max_mismatch`` never covers a NaN mismatch: it is meant for rounding
outliers, and a NaN is not one. Inf must match exactly; FP8 NaN/inf codes never pass a ULP rule (hardware
casts saturate, so a special code in a kernel's output is a bug, not rounding).

A float comparison takes a float rule (rtol/atol), an FP8 one a code rule (max_ulp): a row of the other kind
is refused rather than read as "exact" (see ``Tolerance.kind``). Inputs that cannot be compared (not a
tensor, on the meta device, sparse, complex, bool, the wrong dtype) raise a TypeError/ValueError naming the
argument; a shape mismatch is a failed comparison (an AssertionError), as in ``torch.testing``. ``op`` and
``dtype`` default to the row's own (a row from the table knows which it is).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from harness.compare.checks import EXPLICIT, check_close, check_fp8, check_fp8_mixed, check_tol
from harness.compare.message import Mismatch, format_mismatch
from harness.text import Msg, check_msg
from harness.tolerances import Tolerance

__all__ = ["assert_close_tol", "assert_fp8_close", "assert_fp8_within_one_ulp"]


def _raise(m: Mismatch | None, msg: Msg) -> None:
    """The one place a failed comparison becomes an AssertionError (``msg`` replaces the record's own)."""
    __tracebackhide__ = True
    if m is not None:
        if msg is not None:
            m.msg = msg
        raise AssertionError(format_mismatch(m))


def assert_close_tol(
    actual: torch.Tensor,
    expected: torch.Tensor,
    tol: Tolerance,
    *,
    op: str | None = "",
    dtype: str | None = "",
    msg: Msg = None,
    equal_nan: bool = False,
    scale: Any = None,
) -> None:
    """Assert :func:`check_close`. ``msg``: a str becomes the first line; a callable gets the report."""
    __tracebackhide__ = True
    check_msg(msg)
    _raise(check_close(actual, expected, tol, scale=scale, op=op, dtype=dtype, equal_nan=equal_nan), msg)


def assert_fp8_close(
    actual: Any,
    expected: Any,
    fmt: Any,
    *,
    max_ulp: int = 0,
    max_mismatch: float = 0.0,
    tol: Tolerance | None = None,
    op: str | None = "",
    dtype: str | None = "",
    msg: Msg = None,
    nan_equal: bool = False,
) -> None:
    """Codes within ``max_ulp`` of each other, except at most a ``max_mismatch`` FRACTION of the elements
    (``floor(max_mismatch * n)`` of them). With ``tol`` the table row supplies max_ulp, max_mismatch and
    ulp_floor instead; passing both is ambiguous and refused."""
    __tracebackhide__ = True
    check_msg(msg)
    if tol is not None:
        if max_ulp != 0 or max_mismatch != 0.0:
            raise ValueError("assert_fp8_close: pass either tol= or max_ulp=/max_mismatch=, not both")
        t = check_tol(tol, "codes")
    else:
        t = Tolerance(max_ulp=max_ulp, max_mismatch=max_mismatch, key=EXPLICIT)  # validates both
    _raise(check_fp8(actual, expected, fmt, t, op=op, dtype=dtype, nan_equal=nan_equal), msg)


def assert_fp8_within_one_ulp(
    actual: Any,
    expected: Any,
    fmt: Any,
    *,
    floor: float | None = None,
    tol: Tolerance | None = None,
    op: str | None = "",
    dtype: str | None = "",
    msg: Msg = None,
    nan_equal: bool = False,
) -> None:
    """The mixed check: an element passes when its codes are at most 1 apart, or its decoded values differ
    by at most ``floor`` with the same sign. ``floor`` comes from the argument, else ``tol.ulp_floor``,
    else 0; ``tol.max_mismatch`` (if any) still applies. A tol whose max_ulp is not 1 is refused (a float
    row too: it has no max_ulp)."""
    __tracebackhide__ = True
    check_msg(msg)
    if floor is not None and not (
        isinstance(floor, (int, float))
        and not isinstance(floor, bool)
        and math.isfinite(floor)
        and floor >= 0
    ):
        raise ValueError(f"floor must be a finite number >= 0, got {floor!r}")
    if tol is not None:
        check_tol(tol, "codes")
        if tol.max_ulp != 1:
            raise ValueError(
                f"assert_fp8_within_one_ulp: tol.max_ulp={tol.max_ulp} contradicts the 1-ULP rule; "
                f"use assert_fp8_close(tol=...) for other bounds"
            )
    t = tol if tol is not None else Tolerance(max_ulp=1, ulp_floor=floor or 0.0, key=EXPLICIT)
    fl = floor if floor is not None else t.ulp_floor
    _raise(
        check_fp8_mixed(
            actual,
            expected,
            fmt,
            max_ulp=1,
            floor=fl,
            tol=t,
            op=op,
            dtype=dtype,
            nan_equal=nan_equal,
        ),
        msg,
    )
