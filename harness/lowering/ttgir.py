"""The reduce and scan ops of a TTGIR module: axis, operand shapes, element types, layout and source position.

Why TTGIR: it is the last IR where a ``tt.reduce`` / ``tt.scan`` is still one op, with the layout its operands
live in (``#ttg.blocked<{sizePerThread, threadsPerWarp, warpsPerCTA, order}>``, a ``#ttg.slice`` of one, or a
``#ttg.linear`` in Triton 3.9), and that layout decides the order the lowering combines elements in
(:mod:`harness.lowering.reduce_order`, :mod:`harness.lowering.scan_order`). Its ``loc`` is a callsite chain
ending at the user's ``tl.sum(...)`` call: :func:`parse` resolves it to that call's line and column in the
kernel's file, in the interpreter's coordinates (see :class:`Position`).

Public API: :class:`Position`, :class:`TensorType`, :class:`Op`, :class:`Module`, :func:`parse`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from harness.lowering.sites import triton_library

__all__ = ["Module", "Op", "Position", "TensorType", "parse"]


@dataclass(frozen=True)
class Position:
    """A source position as the interpreter sees it: the file, the line, and the 0-based column of the node in the
    function's dedented source (what ``ast`` gives the interpreter's rewritten function, whose lines Triton
    shifts back to the file's but whose columns it leaves dedented).

    Triton writes locations as ``line:col`` with col = ``begin_col + col_offset`` of the dedented node, where
    ``begin_col`` is the function's own ``loc`` column (Triton 3.9: 1-based, ``def`` at column 0 gives 1;
    Triton 3.6: 0), so ``col_offset = col - func_col`` in both."""

    file: str
    line: int
    col: int

    def key(self) -> tuple[int, int]:
        return (self.line, self.col)


@dataclass(frozen=True)
class TensorType:
    shape: tuple[int, ...]
    elem: str  # "f32", "bf16", "f16", "i32", ...
    layout: str  # the layout alias ("#blocked1") or inline text


@dataclass(frozen=True)
class Op:
    """One ``tt.reduce`` or ``tt.scan``: ``kind`` is ``"reduce"`` or ``"scan"``; ``combine`` the arith op names
    of its combine region in order (``("arith.addf",)``; argmax is a ``cmpf``/``select`` chain)."""

    kind: str
    axis: int
    operands: tuple[TensorType, ...]
    combine: tuple[str, ...]
    position: Position | None
    reverse: bool = False
    #: the layout the operand had before a ``tt.reshape ... allow_reorder`` into the op's layout (``tl.sum(x)``
    #: with no axis reshapes to 1-D that way): the lowering keeps each thread's registers, so the op combines
    #: them in that layout's element order, not its own. ``None``: no such reshape, or the same layout.
    reordered_from: str | None = None


@dataclass
class Module:
    """What :func:`parse` reads: the layouts by alias (their attribute text), the ops, ``num_warps`` and the
    kernel function's own position (``def`` line and ``loc`` column)."""

    layouts: dict[str, str]
    ops: list[Op]
    num_warps: int
    threads_per_warp: int
    func_loc: tuple[str, int, int] | None = None
    locs: dict[str, str] = field(default_factory=dict, repr=False)

    def layout_text(self, layout: str) -> str:
        return self.layouts.get(layout, layout)


_ALIAS = re.compile(r"^(#[\w.$-]+)\s*=\s*(#ttg\.\w+<.*>)\s*$")
_LOC = re.compile(r"^(#loc\d*)\s*=\s*loc\((.*)\)\s*$")
_FILELOC = re.compile(r'^"([^"]*)":(\d+):(\d+)$')
_CALLSITE = re.compile(r"^callsite\((#loc\d*|.+?)\s+at\s+(#loc\d*|.+)\)$")
_NAMED = re.compile(r'^"[^"]*"\((#loc\d*|.*)\)$')
_TENSOR_BODY = re.compile(r"([0-9x]+)x(\w+),\s*(#[\w.]+.*)", re.S)
_OPLOC = re.compile(r"loc\((#loc\d*|\"[^\"]*\":\d+:\d+)\)\s*$")
_AXIS = re.compile(r"axis\s*=\s*(-?\d+)")
_RESHAPE = re.compile(r"^\s*(%[\w.$-]+)\s*=\s*tt\.reshape\s+(%[\w.$-]+)\s+allow_reorder\b[^:]*:\s*(.*)$")
_OPERAND = re.compile(r'"tt\.(?:reduce|scan)"\((%[\w.$-]+)\)')
_REVERSE = re.compile(r"reverse\s*=\s*(true|false)")
_BODY_OP = re.compile(r"=\s*((?:arith|math|tt)\.\w+(?: (?:oeq|ogt|olt|oge|ole|une|slt|sgt|ult|ugt)\b)?)")


def _chain(text: str, locs: dict[str, str], depth: int = 0) -> list[tuple[str, int, int]]:
    """The file locations of a location text, innermost first: for ``callsite(callee at caller)`` the callee's
    chain, then the caller's."""
    if depth > 64:
        return []
    text = text.strip()
    if text.startswith("#loc"):
        inner = locs.get(text)
        return [] if inner is None else _chain(inner, locs, depth + 1)
    m = _FILELOC.match(text)
    if m:
        return [(m.group(1), int(m.group(2)), int(m.group(3)))]
    m = _CALLSITE.match(text)
    if m:
        return _chain(m.group(1), locs, depth + 1) + _chain(m.group(2), locs, depth + 1)
    m = _NAMED.match(text)
    if m:
        return _chain(m.group(1), locs, depth + 1)
    return []


def _resolve(text: str, locs: dict[str, str]) -> tuple[str, int, int] | None:
    """A location text → (file, line, col) of the innermost user code in it: in ``callsite(callee at caller)``
    chains, the first location outside Triton's own library (``tl.sum``'s body is skipped; a ``@jit`` helper's own
    line is kept, not the line that called it), as :func:`harness.lowering.sites.interpreter_position` finds the
    interpreter's. The outermost location when every one is Triton's."""
    chain = _chain(text, locs)
    for where in chain:
        if not triton_library(where[0]):
            return where
    return chain[-1] if chain else None


def _tensors(text: str) -> tuple[TensorType, ...]:
    """The ``tensor<SHAPExELEM, LAYOUT>`` types in ``text``, in order; a layout may nest to any depth (a reduction
    of a reduction's result has ``#ttg.slice<{..., parent = #ttg.slice<{...}>}>``), so each type ends at its own
    closing bracket. Tensors of pointers are left out (no reduction or scan takes one)."""
    out = []
    at = text.find("tensor<")
    while at >= 0:
        start = at + len("tensor<")
        depth, end = 1, start
        while end < len(text) and depth:
            depth += {"<": 1, ">": -1}.get(text[end], 0)
            end += 1
        m = _TENSOR_BODY.fullmatch(text[start:end - 1]) if depth == 0 else None
        if m:
            out.append(TensorType(tuple(int(s) for s in m.group(1).split("x")), m.group(2), m.group(3).strip()))
        at = text.find("tensor<", end)
    return tuple(out)


def parse(ttgir: str) -> Module:
    """Read the reduce / scan ops of a TTGIR module (``compiled.asm["ttgir"]``)."""
    if not isinstance(ttgir, str):
        raise TypeError(f"parse: ttgir must be the TTGIR text (str), got {type(ttgir).__name__}")
    lines = ttgir.splitlines()
    layouts: dict[str, str] = {}
    locs: dict[str, str] = {}
    for ln in lines:
        m = _ALIAS.match(ln)
        if m:
            layouts[m.group(1)] = m.group(2)
            continue
        m = _LOC.match(ln)
        if m:
            locs[m.group(1)] = m.group(2)
    nw = re.search(r'"ttg\.num-warps"\s*=\s*(\d+)', ttgir)
    tpw = re.search(r'"ttg\.threads-per-warp"\s*=\s*(\d+)', ttgir)
    func_loc = _resolve("#loc", locs) if "#loc" in locs else None
    func_col = func_loc[2] if func_loc else 0
    reshaped: dict[str, str] = {}  # result of a reordering reshape -> the source's layout, where it differs
    for ln in lines:
        m = _RESHAPE.match(ln)
        if m:
            before, _, after = m.group(3).partition("->")
            src, dst = _tensors(before), _tensors(after)
            if src and dst and src[0].layout != dst[0].layout:
                reshaped[m.group(1)] = src[0].layout
    ops: list[Op] = []
    i = 0
    while i < len(lines):
        ln = lines[i]
        kind = "reduce" if '"tt.reduce"(' in ln else "scan" if '"tt.scan"(' in ln else None
        if kind is None:
            i += 1
            continue
        head = ln
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not lines[j].lstrip().startswith("})"):
            body.append(lines[j])
            j += 1
        tail = lines[j] if j < len(lines) else ""
        axis_m = _AXIS.search(head)
        rev_m = _REVERSE.search(head)
        operand_types = tail.split("->")[0]
        pos = None
        lm = _OPLOC.search(tail)
        if lm:
            where = _resolve(lm.group(1), locs)
            if where is not None:
                pos = Position(where[0], where[1], where[2] - func_col)
        combine = tuple(m.group(1) for b in body for m in [_BODY_OP.search(b)] if m and "return" not in m.group(1))
        om = _OPERAND.search(head)
        ops.append(Op(kind, int(axis_m.group(1)) if axis_m else 0, _tensors(operand_types), combine, pos,
                      bool(rev_m and rev_m.group(1) == "true"), reshaped.get(om.group(1)) if om else None))
        i = j + 1
    return Module(layouts, ops, int(nw.group(1)) if nw else 4, int(tpw.group(1)) if tpw else 32, func_loc, locs)
