"""Every failure message of the harness, built from a record in one place.

Why one module: a failure must say the same things in the same order wherever it comes from (an assert in
a test, a golden check, a top-k comparison): what was compared, how many elements failed, the worst error
and where, what the tolerance allowed and which table row it came from, and a short table of the worst
elements. The checks (``harness.compare``, ``harness.topk``, ``harness.golden``) return records and never
build text; this module turns a record into text (:func:`message`) and the public asserts raise it
(:func:`fail`). Tests pin these lines (``tests/test_compare.py``, ``tests/test_topk.py``,
``tests/test_golden.py``), so changing a line here is a deliberate act.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

__all__ = [
    "Mismatch",
    "Row",
    "TopkMismatch",
    "GoldenMismatch",
    "message",
    "fail",
    "format_mismatch",
    "format_topk",
    "format_golden",
    "ulp_histogram",
    "HIST_BINS",
    "MAX_ROWS",
    "MAX_SHOWN",
    "fmt_index",
    "fmt_num",
]

#: Cap on the worst-elements table (like pytest-regressions' THRESHOLD, much smaller: it is read in a log).
MAX_ROWS = 20

#: Rows of the offending-index table of a top-k failure.
MAX_SHOWN = 20

#: Rows of the differing-elements table of an integer golden.
INT_ROWS = 10

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

#: A caller's ``msg``: a str becomes the first line; a callable gets the report and returns the message.
Msg = str | Callable[[str], str] | None


class _Record:
    """What every failure record offers: its text and the AssertionError a public assert raises."""

    def message(self) -> str:
        return message(self)

    def to_error(self) -> AssertionError:
        return AssertionError(message(self))


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
class Mismatch(_Record):
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


@dataclass
class TopkMismatch(_Record):
    """A failed ``harness.topk`` comparison: the first failing row and what is needed to show it."""

    row: int
    rows: int
    rows_failed: int
    check: str  # a key of _TOPK_CHECK
    entries: list[tuple[int, float | None, float | None]] = field(default_factory=list)  # (index, score, want)
    k: int = 0
    visible: int = 0
    kth: float | None = None
    allowed: float | None = None  # tolerance at the k-th score
    tol: str = ""
    selection: list[int] | None = None  # the failing row of the selection
    got_shape: tuple[int, ...] | None = None  # check "shape"
    real: int = 0  # check "count": real entries found, and min(k, visible) wanted
    want_real: int = 0
    # check "values": how many sorted scores differ, the worst |diff|, and the first differing rank
    differ: int = 0
    worst_diff: float | None = None
    rank: int = 0
    rank_got: float | None = None
    rank_want: float | None = None
    rank_allowed: float | None = None
    msg: Msg = None


@dataclass
class GoldenMismatch(_Record):
    """A tensor that does not match its golden file. ``harness.golden`` adds the what-to-do advice."""

    name: str
    path: str  # as reports name it (relative to the rootdir)
    generated_on: Any
    device: Any
    torch_version: Any
    triton_version: Any
    running_on: Any
    layout: str = ""  # dtype/shape difference: then nothing else is compared
    tol: Any = None  # None: integer/bool tensors, which compare exactly
    why: str = ""  # why that tolerance ("same arch: bit-exact", "cross-arch (a -> b)", "explicit tol=")
    mismatch: Mismatch | None = None  # the float/FP8 comparison, when it failed
    bits_differ: int = 0  # equal in value, different in bits, where bit-exact is required
    n: int = 0
    int_k: int = 0  # integer/bool: elements that differ, and the first INT_ROWS of them
    int_rows: list[tuple[tuple[int, ...], Any, Any]] = field(default_factory=list)
    msg: Msg = None


# ------------------------------------------------------------------------------------------ numbers


def fmt_index(index: Sequence[int] | None) -> str:
    if index is None:
        return "-"
    return "(" + ", ".join(str(i) for i in index) + (",)" if len(index) == 1 else ")")


def fmt_num(v: float | None) -> str:
    """A value in a table: 6 significant digits, ``nan``/``inf`` as such, ``-`` for none."""
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


def _columns(head: Sequence[str], body: Sequence[Sequence[str]], indent: str = "  ") -> list[str]:
    """``head`` and ``body`` right-aligned in columns as wide as their widest cell."""
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]
    return [indent + "  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in [head, *body]]


def _with_msg(text: str, msg: Msg) -> str:
    if callable(msg):
        return str(msg(text))
    if isinstance(msg, str) and msg:
        return f"{msg}\n{text}"
    return text


# ------------------------------------------------------------------------------------------ compare


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
    return lines + _columns(head, body)


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
        rule += "; NaN/inf codes never pass" + (" (identical NaN codes do: nan_equal=True)" if m.equal_nan else "")
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
            up = f" (up to {_e(m.worst_abs_allowed)} allowed)" if m.worst_abs_allowed is not None else ""
            what = "Greatest absolute difference" + (" of a mismatch" if m.kind == "fp8" else "")
            lines.append(f"{what}: {_e(m.worst_abs)} at index {fmt_index(m.worst_abs_index)}{up}")
        if m.worst_rel is not None:
            up = f" (up to {_e(m.worst_rel_allowed)} allowed)" if m.worst_rel_allowed is not None else ""
            what = "Greatest difference relative to scale" if m.scaled else "Greatest relative difference"
            lines.append(f"{what}: {_e(m.worst_rel)} at index {fmt_index(m.worst_rel_index)}{up}")
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
    return _with_msg("\n".join(_mismatch_body(m)), m.msg)


# ------------------------------------------------------------------------------------------ topk

_TOPK_CHECK = {
    "shape": "selection has the wrong shape",
    "range": "index outside [0, visible)",
    "duplicate": "index selected more than once",
    "padding": "pad entry before a real entry (padding must trail)",
    "count": "wrong number of real entries (expected min(k, visible))",
    "nan": "NaN reference score among the visible columns (NaN never passes)",
    "values": "selected reference scores differ from the reference top-k beyond the tolerance",
    "missing": "column clear of the k-th reference score by more than the tolerance is not selected",
}


def _topk_detail(m: TopkMismatch) -> str:
    if m.check == "shape":
        return f"got {m.got_shape}, expected ({m.rows}, {m.k})"
    if m.check in ("range", "duplicate", "padding"):
        return f"selection row: {m.selection}"
    if m.check == "count":
        return (
            f"{m.real} real entries, expected {m.want_real} = min(k={m.k}, visible={m.visible}); "
            f"selection row: {m.selection}"
        )
    if m.check == "values":
        return (
            f"{m.differ} of {m.want_real} sorted scores differ; worst |diff| {fmt_num(m.worst_diff)} (first at "
            f"rank {m.rank}: got {fmt_num(m.rank_got)}, expected {fmt_num(m.rank_want)}, allowed "
            f"{fmt_num(m.rank_allowed)}). "
            "Selected indices with their reference scores:"
        )
    if m.check == "missing":
        return f"selection row: {m.selection}; not selected but required:"
    return ""


def format_topk(m: TopkMismatch) -> str:
    """The first failing row of a top-k comparison: which check, the offending indices, the tolerance."""
    pct = 100.0 * m.rows_failed / max(m.rows, 1)
    lines = [
        "Top-k selections are not equivalent!",
        f"Rows failing: {m.rows_failed} / {m.rows} ({pct:.1f}%); first: row {m.row}.",
        f"Row {m.row} failed check '{m.check}': {_TOPK_CHECK[m.check]}.",
    ]
    detail = _topk_detail(m)
    if detail:
        lines.append(detail)
    if m.entries:
        has_want = any(w is not None for _, _, w in m.entries)
        lines.append(f"{'index':>8}  {'ref score':>12}" + (f"  {'expected':>12}" if has_want else ""))
        for idx, s, w in m.entries[:MAX_SHOWN]:
            lines.append(f"{idx:>8}  {fmt_num(s):>12}" + (f"  {fmt_num(w):>12}" if has_want else ""))
        if len(m.entries) > MAX_SHOWN:
            lines.append(f"... {len(m.entries) - MAX_SHOWN} more")
    lines.append(f"k={m.k}, visible={m.visible}, k-th reference score: {fmt_num(m.kth)}")
    allowed = f", allowed {fmt_num(m.allowed)} at the k-th score" if m.allowed is not None else ""
    lines.append(f"tolerance: {m.tol}{allowed}")
    return _with_msg("\n".join(lines), m.msg)


# ------------------------------------------------------------------------------------------ golden


def format_golden(m: GoldenMismatch) -> str:
    """Which golden, where and how it was captured, the tolerance, then what differs."""
    lines = [
        f"golden {m.name!r} does not match {m.path}",
        f"  golden: generated on {m.generated_on} ({m.device}), torch {m.torch_version}, triton "
        f"{m.triton_version}; running on {m.running_on}",
    ]
    if m.layout:
        lines.append(f"  {m.layout}")
    elif m.tol is None:
        lines.append("  tolerance: exact (integer/bool tensors)")
        lines.append(f"  Mismatched elements: {m.int_k} / {m.n} ({m.int_k / max(m.n, 1):.1%})")
        lines.append("  index  obtained  expected")
        lines += [f"  {fmt_index(at)}  {a}  {b}" for at, a, b in m.int_rows]
        if m.int_k > len(m.int_rows):
            lines.append(f"  ... {m.int_k - len(m.int_rows)} more")
    else:
        lines.append(f"  tolerance: {m.tol!r} ({m.why})")
        if m.mismatch is not None:
            lines.append(format_mismatch(m.mismatch))
        elif m.bits_differ:
            lines.append(
                f"  {m.bits_differ} / {m.n} elements are equal in value but differ in bits (signed zero or NaN "
                f"payload); bit-exact is required on the generating arch"
            )
    return _with_msg("\n".join(lines), m.msg)


# ------------------------------------------------------------------------------------------ boundary

_FORMATTERS: dict[type, Callable[[Any], str]] = {
    Mismatch: format_mismatch,
    TopkMismatch: format_topk,
    GoldenMismatch: format_golden,
}


def message(record: Any) -> str:
    """The failure text of any record of this module."""
    fmt = _FORMATTERS.get(type(record))
    if fmt is None:
        raise TypeError(f"record must be one of {', '.join(t.__name__ for t in _FORMATTERS)}, got "
                        f"{type(record).__name__}")
    return fmt(record)


def fail(record: Any, msg: Msg = None) -> NoReturn:
    """Raise the AssertionError of ``record``; ``msg`` (if given) replaces the record's own. Every public
    assert of the harness ends here, hidden from pytest's traceback like the assert itself."""
    __tracebackhide__ = True
    if msg is not None:
        record.msg = msg
    raise AssertionError(message(record))


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
