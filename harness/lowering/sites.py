"""Source positions: where the op the interpreter is executing sits in the kernel's file, and the same position
for an op of the compiled kernel, so the two can be matched.

The interpreter (Triton 3.6 and 3.9, ``FunctionRewriter``) executes a rewritten copy of the kernel compiled from
its *dedented* source with line numbers shifted back to the file's (``ast.increment_lineno``), so a frame of it
has the file's line and the dedented column; CPython 3.11+ gives the column span of the instruction being
executed (``code.co_positions()`` at ``f_lasti``), which for a ``BINARY_OP`` is its ``BinOp`` / ``AugAssign`` node
and for a ``CALL`` its ``Call`` node. :func:`interpreter_position` returns it as an absolute column.

Triton writes an op's location differently per version (``CodeGenerator.visit``):

- 3.9: the node's own start, column ``begin_col + col_offset`` with ``begin_col`` = the ``def``'s indentation + 1:
  absolute column + 1;
- 3.6: ``visit`` restores the location to the *child's* after visiting it, so an op carries the position of the
  last child visited: a ``BinOp``'s right operand, an ``AugAssign``'s value, a ``Call``'s last positional argument
  (keywords are visited first); columns are the dedented ``col_offset`` (no ``begin_col``).

:func:`node_key` turns a compiled position into the interpreter's (line, absolute column) of the node by these
rules, reading the kernel file's AST.

Public API: :func:`interpreter_position`, :func:`node_key`.
"""

from __future__ import annotations

import ast
import functools
import linecache
import sys
from types import FrameType

__all__ = ["interpreter_position", "node_key"]


def _library(path: str) -> bool:
    p = path.replace("\\", "/")
    return ("/triton/" in p and ("/site-packages/" in p or "/triton/language/" in p or "/triton/runtime/" in p)) \
        or "/numpy/" in p or "/harness/" in p or p.startswith("<")


@functools.lru_cache(maxsize=256)
def _def_indent(path: str, first_line: int) -> int:
    """The indentation of the ``def`` line of the function whose code starts at ``first_line`` (decorators
    first). The interpreter dedents from there."""
    for ln in range(first_line, first_line + 200):
        text = linecache.getline(path, ln)
        if not text:
            break
        if text.lstrip().startswith("def "):
            return len(text) - len(text.lstrip())
    return 0


def interpreter_position(frame: FrameType | None = None) -> tuple[str, int, int] | None:
    """(file, line, absolute 0-based column) of the innermost user-code instruction on the stack (Triton,
    numpy and the harness are skipped), or ``None`` when the interpreter gives no column."""
    f = frame or sys._getframe(1)
    while f is not None:
        code = f.f_code
        if not _library(code.co_filename):
            try:
                pos = list(code.co_positions())[f.f_lasti // 2]
            except (AttributeError, IndexError):
                return None
            line, _end, col, _endcol = pos
            if line is None or col is None:
                return None
            return code.co_filename, line, col + _def_indent(code.co_filename, code.co_firstlineno)
        f = f.f_back
    return None


@functools.lru_cache(maxsize=64)
def _tree(path: str) -> ast.AST | None:
    try:
        with open(path, encoding="utf-8") as fh:
            return ast.parse(fh.read())
    except (OSError, SyntaxError, ValueError):
        return None


def _enclosing_indent(tree: ast.AST, line: int) -> int:
    best = 0
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.lineno <= line <= (n.end_lineno or n.lineno):
            best = n.col_offset  # the innermost wins: walk visits outer functions first
    return best


def node_key(path: str, line: int, col: int, kind: str, version: str) -> tuple[int, int] | None:
    """The interpreter's (line, absolute column) of the node a compiled op at ``(line, col)`` (Triton's raw
    location) belongs to. ``kind``: ``"mul"`` / ``"add"`` (a ``BinOp`` or ``AugAssign``), ``"call"`` (a
    ``tl.sum``-like call). ``None`` when no node matches."""
    if version.startswith("3.9") or not version.startswith("3.6"):
        return (line, col - 1)
    tree = _tree(path)
    if tree is None:
        return None
    abs_col = col + _enclosing_indent(tree, line)

    def at(n: ast.AST | None) -> bool:
        return n is not None and getattr(n, "lineno", None) == line and getattr(n, "col_offset", None) == abs_col

    for n in ast.walk(tree):
        if kind in ("mul", "add") and isinstance(n, ast.BinOp) and at(n.right):
            want = ast.Mult if kind == "mul" else (ast.Add, ast.Sub)
            if isinstance(n.op, want):
                return (n.lineno, n.col_offset)
        if kind == "add" and isinstance(n, ast.AugAssign) and isinstance(n.op, (ast.Add, ast.Sub)) and at(n.value):
            return (n.lineno, n.col_offset)
        if kind == "call" and isinstance(n, ast.Call) and n.args and at(n.args[-1]):
            return (n.lineno, n.col_offset)
    if kind == "add":  # the add inside a tl.sum's combine: the call's position
        return node_key(path, line, col, "call", version)
    return None
