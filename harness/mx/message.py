"""The failure text of a block-scaled comparison (``assert_mx_close``), built from its :class:`MxMismatch` record.

Beside the check (:mod:`harness.mx.compare`) as ``harness/compare/message.py`` sits beside the FP8 checks: the
check returns data, this module turns it into the lines a failing test shows, and only the public assert raises.
Same shape as every harness report: a header with the context, "k / n (p%)" counts with the worst error and its
index, a capped table, the rule, the tolerance row that applied, and here a diagnosis line (which known
convention the codes are) when the caller passed ``source=``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.text import Msg, columns, fmt_index, fmt_num, fmt_sci, with_msg

__all__ = ["MAX_ROWS", "MxMismatch", "BlockRow", "ElemRow", "format_mx_mismatch"]

#: Cap on each table (blocks, elements).
MAX_ROWS = 12


@dataclass
class BlockRow:
    index: tuple[int, ...]
    actual_code: int
    expected_code: int
    actual: float
    expected: float
    ulp: int


@dataclass
class ElemRow:
    index: tuple[int, ...]
    actual_code: int
    expected_code: int
    actual: float  # dequantized (element x scale)
    expected: float
    ulp: int


@dataclass
class MxMismatch:
    """A failed block-scaled comparison, as data."""

    scheme: str
    op: str = ""
    dtype: str = ""
    arch: str = ""
    tol: Any = None
    shapes: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = field(default_factory=dict)  # what -> (a, e)
    # block scales
    n_blocks: int = 0
    k_blocks: int = 0  # scales further apart than scale_ulp, or NaN where NaN is not accepted
    nan_blocks: int = 0  # NaN scales not accepted (no nan_equal, or facing a number)
    n_diff_blocks: int = 0  # scales that differ at all (elements of these blocks are not compared code by code)
    scale_ulp: int = 0
    worst_scale_ulp: int = 0
    worst_scale_index: tuple[int, ...] | None = None
    global_scales: tuple[float, float] | None = None  # NVFP4 (actual, expected) when they differ
    # elements (in blocks whose scales are equal)
    n_elems: int = 0
    n_compared: int = 0
    k_elems: int = 0
    nan_elems: int = 0  # NaN / inf element codes not accepted (anywhere, whatever the scales)
    allowed_k: int = 0
    max_ulp: int = 0
    worst_ulp: int = 0
    worst_ulp_index: tuple[int, ...] | None = None
    hist: dict[str, int] | None = None
    # global error
    rel_l2: float | None = None
    max_rel_l2: float | None = None
    sqnr_db: float | None = None  # actual vs source
    sqnr_expected_db: float | None = None  # expected vs source, for comparison
    min_sqnr_db: float | None = None
    nan_counts: tuple[int, int] | None = None  # NaN values after dequantization (actual, expected), when unequal
    block_rows: list[BlockRow] = field(default_factory=list)
    elem_rows: list[ElemRow] = field(default_factory=list)
    diagnosis: list[str] = field(default_factory=list)
    msg: Msg = None

    def message(self) -> str:
        return format_mx_mismatch(self)


def _pct(k: int, n: int) -> str:
    return f"{k} / {n} ({100.0 * k / n if n else 0.0:.1f}%)"


def _header(m: MxMismatch) -> str:
    ctx = ", ".join(f"{k}={v}" for k, v in (("op", m.op), ("dtype", m.dtype), ("format", m.scheme),
                                            ("arch", m.arch)) if v)
    what = "Block-scaled tensors cannot be compared!" if m.shapes else "Block-scaled tensors are not close!"
    return f"{what} ({ctx})" if ctx else what


def _ulp(u: int) -> str:
    return "far (NaN)" if u >= 1 << 16 else str(u)


def _tables(m: MxMismatch) -> list[str]:
    lines: list[str] = []
    if m.block_rows:
        lines.append(f"Worst blocks ({len(m.block_rows)} of {m.k_blocks} shown):" if m.k_blocks > len(m.block_rows)
                     else f"Worst blocks ({len(m.block_rows)}):")
        lines += columns(("block", "actual", "expected", "actual scale", "expected scale", "ulp"),
                         [(fmt_index(r.index), f"0x{r.actual_code:02x}", f"0x{r.expected_code:02x}",
                           fmt_num(r.actual), fmt_num(r.expected), _ulp(r.ulp)) for r in m.block_rows])
    if m.elem_rows:
        lines.append(f"Worst elements ({len(m.elem_rows)} of {m.k_elems} shown):" if m.k_elems > len(m.elem_rows)
                     else f"Worst elements ({len(m.elem_rows)}):")
        lines += columns(("index", "actual", "expected", "actual value", "expected value", "ulp"),
                         [(fmt_index(r.index), f"0x{r.actual_code:02x}", f"0x{r.expected_code:02x}",
                           fmt_num(r.actual), fmt_num(r.expected), _ulp(r.ulp)) for r in m.elem_rows])
    return lines


def _rule(m: MxMismatch) -> str:
    parts = [f"block scales within {m.scale_ulp} code(s)",
             f"element codes within {m.max_ulp} ULP in blocks whose scales are equal"
             + (f" (up to {m.tol.max_mismatch:.2%} of them may break it)" if getattr(m.tol, "max_mismatch", 0) else "")]
    if m.max_rel_l2 is not None:
        parts.append(f"rel-L2 of the dequantized tensors <= {fmt_sci(m.max_rel_l2)}")
    if m.min_sqnr_db is not None:
        parts.append(f"SQNR vs source >= {m.min_sqnr_db:.2f} dB")
    return "; ".join(parts) + "; NaN never passes unless nan_equal=True and both sides are NaN; inf never"


def _tolerance_lines(tol: Any) -> list[str]:
    if tol is None:
        return []
    lines = [f"Tolerance: {tol!r}"]
    if getattr(tol, "origin", ""):
        lines.append(f"Tolerance row defined at: {tol.origin}")
    if getattr(tol, "note", ""):
        lines.append(f"Tolerance note: {tol.note}")
    return lines


def format_mx_mismatch(m: MxMismatch) -> str:
    """The full failure text: header, scale and element counts, global error, tables, diagnosis, rule, tolerance."""
    lines = [_header(m)]
    if m.shapes:
        for what, (a, e) in m.shapes.items():
            lines.append(f"{what}: actual has shape {a}, expected has shape {e}; block checks never broadcast.")
        return with_msg("\n".join(lines), m.msg)
    lines.append(f"Block scales: {_pct(m.k_blocks, m.n_blocks)} beyond {m.scale_ulp} code(s)"
                 + (f"; {m.n_diff_blocks} differ at all" if m.n_diff_blocks != m.k_blocks else "")
                 + (f"; greatest distance {_ulp(m.worst_scale_ulp)} at block {fmt_index(m.worst_scale_index)}"
                    if m.worst_scale_index is not None else ""))
    if m.nan_blocks:
        lines.append(f"NaN block scales: {m.nan_blocks} not accepted (pass nan_equal=True to accept NaN facing NaN)")
    if m.global_scales is not None:
        lines.append(f"Global scale: actual {m.global_scales[0]!r}, expected {m.global_scales[1]!r} (must be equal, "
                     f"finite and > 0; NaN facing NaN only with nan_equal=True)")
    if m.nan_elems:
        lines.append(f"NaN/inf element codes: {m.nan_elems} not accepted (inf never; NaN only facing NaN with "
                     f"nan_equal=True)")
    allowed = f", up to {m.allowed_k} allowed" if m.allowed_k else ""
    lines.append(f"Mismatched elements: {_pct(m.k_elems, m.n_compared)}{allowed}, of {m.n_elems} "
                 f"({m.n_elems - m.n_compared} in blocks with other scales, judged by the global error only)")
    if m.worst_ulp_index is not None:
        lines.append(f"Greatest ULP distance: {_ulp(m.worst_ulp)} at index {fmt_index(m.worst_ulp_index)} "
                     f"(up to {m.max_ulp} allowed)")
    glob = []
    if m.rel_l2 is not None:
        up = f" (up to {fmt_sci(m.max_rel_l2)} allowed)" if m.max_rel_l2 is not None else ""
        glob.append(f"rel-L2 {fmt_sci(m.rel_l2)}{up}")
    if m.sqnr_db is not None:
        req = f"at least {m.min_sqnr_db:.2f} dB required" if m.min_sqnr_db is not None else "no floor set"
        exp = f"expected's: {m.sqnr_expected_db:.2f} dB; " if m.sqnr_expected_db is not None else ""
        glob.append(f"SQNR vs source {m.sqnr_db:.2f} dB ({exp}{req})")
    if glob:
        lines.append("Global error: " + "; ".join(glob))
    if m.nan_counts is not None:
        lines.append(f"NaN after dequantization: {m.nan_counts[0]} in actual, {m.nan_counts[1]} in expected")
    if m.hist is not None:
        lines.append("ULP histogram: " + " | ".join(f"{k}: {v}" for k, v in m.hist.items()))
    lines += _tables(m)
    lines += [f"Diagnosis: {d}" for d in m.diagnosis]
    lines.append(f"Rule: {_rule(m)}")
    lines += _tolerance_lines(m.tol)
    return with_msg("\n".join(lines), m.msg)
