"""The failure text of a float or FP8 comparison, built from its :class:`Mismatch` record.

Beside the checks (``harness.compare.checks``) as torch's ``_make_mismatch_msg`` sits beside its pairs: the
check returns data, this module turns it into the lines a failing test shows, and only the public
``assert_*`` raises. Tests pin these lines (``tests/harness/compare/test_compare.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.text import Msg, columns, fmt_index, fmt_num, fmt_sci, with_msg

__all__ = ["HIST_BINS", "MAX_ROWS", "Mismatch", "Row", "format_mismatch"]

#: Cap on the worst-elements table (like pytest-regressions' THRESHOLD, much smaller: it is read in a log).
MAX_ROWS = 20


#: ULP histogram bins: (label, lo, hi) inclusive; the last bin is filled from ULP_FAR distances.
HIST_BINS: tuple[tuple[str, int, int], ...] = (
    ("0", 0, 0),
    ("1", 1, 1),
    ("2", 2, 2),
    ("3", 3, 3),
    ("4-7", 4, 7),
    ("8+", 8, 1 << 15),
    ("far/NaN", 1 << 16, 1 << 62),
)



@dataclass
class Row:
    """One element of the worst-elements table (values already on the CPU, as Python scalars)."""

    index: tuple[int, ...]
    actual: float
    expected: float
    abs_diff: float
    allowed: float | None = None  # float checks: atol + rtol*|expected| (or *scale); fp8 mixed: the floor
    actual_code: int | None = None  # fp8 only
    expected_code: int | None = None
    ulp: int | None = None
    scale: float | None = None  # float checks with scale= only



@dataclass
class Mismatch:
    """A failed ``harness.compare`` check, as data. Its public asserts turn it into an AssertionError."""

    kind: str  # "float" | "fp8" | "shape"
    n: int = 0
    k: int = 0  # elements breaking the rule
    allowed_k: int = 0  # from tol.max_mismatch
    op: str = ""
    dtype: str = ""
    arch: str = ""
    fmt: str = ""
    tol: Any = None
    worst_abs: float | None = None
    worst_abs_index: tuple[int, ...] | None = None
    worst_abs_allowed: float | None = None
    worst_rel: float | None = None  # relative to |expected|, or to the scale when ``scaled``
    worst_rel_index: tuple[int, ...] | None = None
    worst_rel_allowed: float | None = None
    worst_ulp: int | None = None
    worst_ulp_index: tuple[int, ...] | None = None
    max_ulp: int | None = None
    hist: dict[str, int] | None = None
    rows: list[Row] = field(default_factory=list)
    # what the rule line and the notes are made of
    scaled: bool = False  # float: allowed error atol + rtol*scale instead of atol + rtol*|expected|
    equal_nan: bool = False  # float: equal_nan; fp8: nan_equal
    floor: float = 0.0  # fp8: the value floor of the mixed rule
    nan_counts: tuple[int, int] | None = None  # float: NaNs in (actual, expected), when there are any
    nan_bad: int = 0  # mismatches involving NaN (named when max_mismatch would have covered them)
    dtypes: tuple[str, str] | None = None  # float: (actual, expected) dtypes when they differ
    shapes: tuple[tuple[int, ...], tuple[int, ...]] | None = None  # kind "shape": (actual, expected)
    notes: list[str] = field(default_factory=list)  # extra lines a caller adds
    msg: Msg = None  # caller's msg: str (first line) or callable(report) -> str


    def message(self) -> str:
        """The failure text (what ``assert_*`` raises)."""
        return format_mismatch(self)


def _context(m: Mismatch) -> str:
    parts = []
    for label, v in (("op", m.op), ("dtype", m.dtype), ("format", m.fmt), ("arch", m.arch)):
        if v:
            parts.append(f"{label}={v}")
    return ", ".join(parts)


def _header(m: Mismatch) -> str:
    what = {
        "fp8": "FP8 codes are not close!",
        "float": "Tensor-likes are not close!",
        "shape": "Tensor-likes cannot be compared!",
    }.get(m.kind, "Comparison failed!")
    ctx = _context(m)
    return f"{what} ({ctx})" if ctx else what


def _table(m: Mismatch) -> list[str]:
    if not m.rows:
        return []
    shown = len(m.rows)
    lines = [f"Worst elements ({shown} of {m.k} shown):" if m.k > shown else f"Worst elements ({shown}):"]
    if m.kind == "fp8":
        head: tuple[str, ...] = ("index", "actual", "expected", "actual value", "expected value", "abs diff", "ulp")
        body = [
            (
                fmt_index(r.index),
                f"0x{r.actual_code:02x}",
                f"0x{r.expected_code:02x}",
                fmt_num(r.actual),
                fmt_num(r.expected),
                fmt_num(r.abs_diff),
                "far" if (r.ulp or 0) >= (1 << 16) else str(r.ulp),
            )
            for r in m.rows
        ]
    else:  # float; a scale column when the rule used one
        cols = ("actual", "expected", "abs diff") + (("scale",) if m.scaled else ()) + ("allowed",)
        head = ("index", *cols)
        body = [
            (fmt_index(r.index), *(fmt_num(v) for v in (r.actual, r.expected, r.abs_diff)),
             *((fmt_num(r.scale),) if m.scaled else ()), fmt_num(r.allowed))
            for r in m.rows
        ]
    return lines + columns(head, body)


def _max_mismatch_clause(tol: Any) -> str:
    mm = getattr(tol, "max_mismatch", 0.0)
    return f"; up to {mm:.2%} of elements may break it, none of them by NaN" if mm else ""


def _rule(m: Mismatch) -> str:
    """The rule that was applied, in one line (kind "shape" has none: nothing was compared)."""
    tol = m.tol
    if m.kind == "float":
        against = "scale" if m.scaled else "|expected|"
        nan = "NaN must face NaN (equal_nan=True)" if m.equal_nan else "NaN never passes"
        return (
            f"|actual - expected| <= atol + rtol * {against} (atol={tol.atol:.1e}, rtol={tol.rtol:.1e}); "
            f"{nan}; inf must match exactly" + _max_mismatch_clause(tol)
        )
    if m.kind == "fp8":
        rule = f"code distance <= {m.max_ulp} ULP"
        if m.floor > 0:
            rule += f", or |decoded difference| <= {m.floor:.3e} with the same sign (a zero has either sign)"
        rule += "; NaN/inf codes never pass" + (" (NaN facing NaN does: nan_equal=True)" if m.equal_nan else "")
        return rule + _max_mismatch_clause(tol)
    return ""


def _notes(m: Mismatch) -> list[str]:
    out = []
    if m.dtypes is not None:
        out.append(f"Note: dtypes differ (actual {m.dtypes[0]}, expected {m.dtypes[1]}); compared in float64")
    if m.nan_counts is not None:
        out.append(f"NaN: {m.nan_counts[0]} in actual, {m.nan_counts[1]} in expected")
    if m.nan_bad and m.k <= m.allowed_k:
        what = "a NaN code" if m.kind == "fp8" else "NaN"
        out.append(f"{m.nan_bad} of the mismatches involve {what}, which max_mismatch never covers")
    return out + m.notes


def _tolerance_lines(tol: Any) -> list[str]:
    if tol is None:
        return []
    lines = [f"Tolerance: {tol!r}"]  # the repr ends with [op/dtype/arch]: the table row that applied
    origin = getattr(tol, "origin", "")
    if origin:
        lines.append(f"Tolerance row defined at: {origin}")
    note = getattr(tol, "note", "")
    if note:
        lines.append(f"Tolerance note: {note}")
    return lines


def _mismatch_body(m: Mismatch) -> list[str]:
    lines = [_header(m)]
    if m.kind == "shape":
        a, e = m.shapes if m.shapes is not None else ((), ())
        what = "FP8" if m.fmt else "tensor"
        lines.append(f"actual has shape {a}, expected has shape {e}; {what} checks never broadcast.")
    else:
        pct = 100.0 * m.k / m.n if m.n else 0.0
        allowed = f", up to {m.allowed_k} allowed" if m.allowed_k else ""
        lines.append(f"Mismatched elements: {m.k} / {m.n} ({pct:.1f}%){allowed}")
        if m.kind == "fp8" and m.worst_ulp is not None:
            wu = "far (NaN/inf)" if m.worst_ulp >= (1 << 16) else str(m.worst_ulp)
            lines.append(
                f"Greatest ULP distance: {wu} at index {fmt_index(m.worst_ulp_index)} (up to {m.max_ulp} allowed)"
            )
        if m.worst_abs is not None:
            up = f" (up to {fmt_sci(m.worst_abs_allowed)} allowed)" if m.worst_abs_allowed is not None else ""
            what = "Greatest absolute difference" + (" of a mismatch" if m.kind == "fp8" else "")
            lines.append(f"{what}: {fmt_sci(m.worst_abs)} at index {fmt_index(m.worst_abs_index)}{up}")
        if m.worst_rel is not None:
            up = f" (up to {fmt_sci(m.worst_rel_allowed)} allowed)" if m.worst_rel_allowed is not None else ""
            what = "Greatest difference relative to scale" if m.scaled else "Greatest relative difference"
            lines.append(f"{what}: {fmt_sci(m.worst_rel)} at index {fmt_index(m.worst_rel_index)}{up}")
        if m.hist is not None:
            lines.append("ULP histogram: " + " | ".join(f"{k}: {v}" for k, v in m.hist.items()))
        lines += _table(m)
    lines += _notes(m)
    rule = _rule(m)
    if rule:
        lines.append(f"Rule: {rule}")
    return lines + _tolerance_lines(m.tol)


def format_mismatch(m: Mismatch) -> str:
    """The full failure text: header, counts, worst errors, histogram, table, notes, rule, tolerance."""
    return with_msg("\n".join(_mismatch_body(m)), m.msg)

