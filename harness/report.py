"""Every failure message of ``harness.compare``, built from its ``Mismatch`` record in one place.

Why one module: a failure must say the same things in the same order wherever it comes from (an assert in
a test, a golden check): what was compared, how many elements failed, the worst error and where, what the
tolerance allowed and which table row it came from, and a short table of the worst elements. Tests pin
these lines (``tests/test_compare_report.py``), so changing a line here is a deliberate act.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Mismatch", "Row", "format_mismatch", "ulp_histogram", "HIST_BINS", "MAX_ROWS", "fmt_index"]

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
    allowed: float | None = None  # float checks: atol + rtol*|expected|; fp8 mixed: the floor
    actual_code: int | None = None  # fp8 only
    expected_code: int | None = None
    ulp: int | None = None


@dataclass
class Mismatch:
    """A failed check, as data. ``harness.compare``'s public asserts turn it into an AssertionError."""

    kind: str  # "float" | "fp8" | "shape"
    n: int = 0
    k: int = 0  # elements breaking the rule
    allowed_k: int = 0  # from tol.max_mismatch
    op: str = ""
    dtype: str = ""
    arch: str = ""
    fmt: str = ""
    tol: Any = None
    rule: str = ""
    worst_abs: float | None = None
    worst_abs_index: tuple[int, ...] | None = None
    worst_abs_allowed: float | None = None
    worst_rel: float | None = None
    worst_rel_index: tuple[int, ...] | None = None
    worst_rel_allowed: float | None = None
    worst_ulp: int | None = None
    worst_ulp_index: tuple[int, ...] | None = None
    max_ulp: int | None = None
    hist: dict[str, int] | None = None
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    detail: str = ""  # shape/dtype problems: the whole story in one line
    msg: Any = None  # caller's msg: str (first line) or callable(report) -> str

    def message(self) -> str:
        return format_mismatch(self)

    def to_error(self) -> AssertionError:
        return AssertionError(format_mismatch(self))


def fmt_index(index: Sequence[int] | None) -> str:
    if index is None:
        return "-"
    return "(" + ", ".join(str(i) for i in index) + (",)" if len(index) == 1 else ")")


def _g(v: float | None) -> str:
    if v is None:
        return "-"
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return str(v)
    return f"{v:.6g}"


def _e(v: float | None) -> str:
    return "-" if v is None else f"{v:.3e}" if math.isfinite(v) else str(v)


def ulp_histogram(ulps: Sequence[int]) -> dict[str, int]:
    """Counts per :data:`HIST_BINS` label (pure Python; compare builds the same from tensors)."""
    out = {label: 0 for label, _, _ in HIST_BINS}
    for u in ulps:
        for label, lo, hi in HIST_BINS:
            if lo <= u <= hi:
                out[label] += 1
                break
    return out


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
        head = ("index", "actual", "expected", "actual value", "expected value", "abs diff", "ulp")
        body = [
            (
                fmt_index(r.index),
                f"0x{r.actual_code:02x}",
                f"0x{r.expected_code:02x}",
                _g(r.actual),
                _g(r.expected),
                _g(r.abs_diff),
                "far" if (r.ulp or 0) >= (1 << 16) else str(r.ulp),
            )
            for r in m.rows
        ]
    else:
        head = ("index", "actual", "expected", "abs diff", "allowed")
        body = [
            (fmt_index(r.index), _g(r.actual), _g(r.expected), _g(r.abs_diff), _g(r.allowed)) for r in m.rows
        ]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]
    lines.append("  " + "  ".join(h.rjust(w) for h, w in zip(head, widths, strict=True)).rstrip())
    lines += ["  " + "  ".join(c.rjust(w) for c, w in zip(b, widths, strict=True)).rstrip() for b in body]
    return lines


def format_mismatch(m: Mismatch) -> str:
    """The full failure text: header, counts, worst errors, histogram, table, rule, tolerance."""
    lines = [_header(m)]
    if m.kind == "shape":
        lines.append(m.detail)
    else:
        pct = 100.0 * m.k / m.n if m.n else 0.0
        allowed = f", up to {m.allowed_k} allowed" if m.allowed_k else ""
        lines.append(f"Mismatched elements: {m.k} / {m.n} ({pct:.1f}%){allowed}")
        if m.kind == "fp8" and m.worst_ulp is not None:
            wu = "far (NaN/inf)" if m.worst_ulp >= (1 << 16) else str(m.worst_ulp)
            lines.append(
                f"Greatest ULP distance: {wu} at index {fmt_index(m.worst_ulp_index)} "
                f"(up to {m.max_ulp} allowed)"
            )
        if m.worst_abs is not None:
            up = f" (up to {_e(m.worst_abs_allowed)} allowed)" if m.worst_abs_allowed is not None else ""
            what = "Greatest absolute difference" + (" of a mismatch" if m.kind == "fp8" else "")
            lines.append(f"{what}: {_e(m.worst_abs)} at index {fmt_index(m.worst_abs_index)}{up}")
        if m.worst_rel is not None:
            up = f" (up to {_e(m.worst_rel_allowed)} allowed)" if m.worst_rel_allowed is not None else ""
            lines.append(
                f"Greatest relative difference: {_e(m.worst_rel)} at index {fmt_index(m.worst_rel_index)}{up}"
            )
        if m.hist is not None:
            lines.append("ULP histogram: " + " | ".join(f"{k}: {v}" for k, v in m.hist.items()))
        lines += _table(m)
    lines += m.notes
    if m.rule:
        lines.append(f"Rule: {m.rule}")
    if m.tol is not None:
        lines.append(
            f"Tolerance: {m.tol!r}"
        )  # the repr ends with [op/dtype/arch]: the table row that applied
        origin = getattr(m.tol, "origin", "")
        if origin:
            lines.append(f"Tolerance row defined at: {origin}")
        note = getattr(m.tol, "note", "")
        if note:
            lines.append(f"Tolerance note: {note}")
    text = "\n".join(lines)
    if callable(m.msg):
        return str(m.msg(text))
    if isinstance(m.msg, str) and m.msg:
        return f"{m.msg}\n{text}"
    return text


# --- compile assertions (harness.compile_matrix) ----------------------------------------------------------
# The records that compile_matrix's assert_* build, and their texts. Kept as a section of its own: it shares
# nothing with the tensor comparisons above but the rule that every failure text is written here.

__all__ += ["CompileProblem", "CompileFailure", "AsmMismatch", "format_compile_failure", "format_asm_mismatch",
            "MAX_ASM_LINES"]

#: Cap on the assembly lines a failed ``assert_ptx_contains`` / ``assert_ptx_lacks`` shows.
MAX_ASM_LINES = 20


@dataclass(frozen=True)
class CompileProblem:
    """One target that did not do what a compile assertion expected.

    ``outcome``: ``"failed"`` (expected to compile), ``"compiled"`` (expected a refusal), ``"wrong type"``
    (refused with another exception type, named in ``raised``) or ``"no match"`` (refused, but the error
    does not match). ``line`` is the compiler's reason in one line (``compile_errors.error_summary``)."""

    target: str
    outcome: str
    line: str = ""
    raised: str = ""


@dataclass(frozen=True)
class CompileFailure:
    """A failed ``assert_compiles`` (``expected="compiles"``) or ``assert_compile_error``
    (``expected="refusal"``, with the regex ``match`` and the exception type name it wanted)."""

    kernel: str
    expected: str
    n_targets: int
    problems: tuple[CompileProblem, ...]
    match: str = ""
    exc_type: str = ""


def _problem_line(f: CompileFailure, p: CompileProblem) -> str:
    if p.outcome == "failed":
        return f"  {p.target}: {p.line}"
    if p.outcome == "compiled":
        return f"  {p.target}: compiled, but a compile error matching {f.match!r} was expected"
    if p.outcome == "wrong type":
        return f"  {p.target}: raised {p.raised}, expected {f.exc_type}: {p.line}"
    return f"  {p.target}: error does not match {f.match!r}: {p.line}"


def format_compile_failure(f: CompileFailure) -> str:
    """A header counting the targets that did not comply, then one line per target with the compiler's
    reason."""
    if f.expected == "compiles":
        head = f"{f.kernel} failed to compile for {len(f.problems)} / {f.n_targets} target(s):"
    else:
        head = (f"{f.kernel}: expected compile error on {f.n_targets} target(s), {len(f.problems)} did not "
                f"comply:")
    return "\n".join([head] + [_problem_line(f, p) for p in f.problems])


@dataclass(frozen=True)
class AsmMismatch:
    """A failed ``assert_ptx_contains`` (``wanted="match"``: ``lines`` are the related lines, those sharing
    the pattern's leading opcode word) or ``assert_ptx_lacks`` (``wanted="none"``: ``lines`` match)."""

    kernel: str
    target: str
    stage: str
    pattern: str
    wanted: str
    lines: tuple[str, ...]
    total_lines: int


def format_asm_mismatch(m: AsmMismatch) -> str:
    """Which kernel, target and stage; what was wanted; at most :data:`MAX_ASM_LINES` assembly lines."""
    shown = m.lines[:MAX_ASM_LINES]
    if m.wanted == "match":
        more = f" (showing {MAX_ASM_LINES} of {len(m.lines)})" if len(m.lines) > MAX_ASM_LINES else ""
        body = "\n".join(f"    {ln}" for ln in shown) or "    (none)"
        return (f"{m.kernel}@{m.target}: no match for {m.pattern!r} in {m.stage} ({m.total_lines} lines); "
                f"related lines{more}:\n{body}")
    body = "\n".join(f"    {ln}" for ln in shown)
    return (f"{m.kernel}@{m.target}: {len(m.lines)} line(s) of {m.stage} match {m.pattern!r}, expected "
            f"none:\n{body}")
