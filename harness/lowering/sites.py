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
  (keywords are visited first; with none, the last keyword); columns are the dedented ``col_offset`` (no
  ``begin_col``).

:func:`node_key` turns a compiled position into the interpreter's (line, absolute column) of the node by these
rules, reading the kernel file's AST.

Public API: :func:`interpreter_position`, :func:`node_key`.
"""

from __future__ import annotations

import ast
import functools
import linecache
import os
import sys
from types import CodeType, FrameType

__all__ = ["interpreter_position", "node_key", "triton_library"]


#: the harness package's own directory: its shims' frames are never the kernel's
_HARNESS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


@functools.lru_cache(maxsize=1024)
def triton_library(path: str) -> bool:
    """Whether a compiled kernel's debug location is in Triton's own library (``tl.sum``'s body in
    ``triton/language/standard.py``): the compiled code's positions skip those, as the interpreter's do."""
    p = path.replace("\\", "/")
    return "/triton/language/" in p or "/triton/runtime/" in p or "site-packages/triton/" in p


def _library(path: str) -> bool:
    """Frames of Triton, numpy, torch and the harness package (by their install directories), and code without
    a file, are skipped: the first other frame is the kernel's (or its ``@jit`` helper's)."""
    if path.startswith("<"):
        return True
    p = os.path.abspath(path)
    if p.startswith(_HARNESS_DIR):
        return True
    for name in ("triton", "numpy", "torch"):
        mod = sys.modules.get(name)
        f = getattr(mod, "__file__", None)
        if f and p.startswith(os.path.dirname(os.path.abspath(f)) + os.sep):
            return True
    return False


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


_CODES: dict[CodeType, bool] = {}  # code of an interpreted function -> compiled from dedented source
_SEEN = [0]
_POSITIONS: dict[CodeType, tuple[tuple[int | None, int | None, int | None, int | None], ...]] = {}


def _interpreted_codes() -> dict[CodeType, bool]:
    """The code objects the interpreter runs for ``@jit`` functions (``InterpretedFunction.rewritten_fn``, Triton
    3.6 and 3.9), each with whether it was compiled from the dedented source (a function whose source Triton
    could not read runs as it is)."""
    try:
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:
        return _CODES
    fns = getattr(InterpretedFunction, "rewritten_fn", {})
    if len(fns) != _SEEN[0]:
        for orig, new in list(fns.items()):
            code = getattr(new, "__code__", None)
            if code is not None:
                _CODES[code] = new is not orig
        _SEEN[0] = len(fns)
    return _CODES


def interpreter_position(frame: FrameType | None = None) -> tuple[str, int, int] | None:
    """(file, line, absolute 0-based column) of the instruction the innermost interpreted ``@jit`` function
    outside Triton's own library is executing (the user's kernel or helper; ``tl.sum``'s own body is skipped),
    or ``None`` when no such frame is on the stack. Frames of shims and wrappers are never taken: only code the
    interpreter compiled for a ``@jit`` function counts."""
    codes = _interpreted_codes()
    f = frame or sys._getframe(1)
    while f is not None:
        code = f.f_code
        dedented = codes.get(code)
        if dedented is not None and not _library(code.co_filename):
            positions = _POSITIONS.get(code)
            if positions is None:  # one list per code object: a shim asks at every op of a launch
                try:
                    positions = _POSITIONS[code] = tuple(code.co_positions())
                except AttributeError:
                    return None
            try:
                pos = positions[f.f_lasti // 2]
            except IndexError:
                return None
            line, _end, col, _endcol = pos
            if line is None or col is None:
                return None
            return code.co_filename, line, col + (_def_indent(code.co_filename, code.co_firstlineno) if dedented else 0)
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
        if kind == "call" and isinstance(n, ast.Call):
            # visit_Call visits func, then keywords, then positional args: the last one visited holds the loc
            last = n.args[-1] if n.args else (n.keywords[-1] if n.keywords else n.func)
            if at(last):
                return (n.lineno, n.col_offset)
    if kind == "add":  # the add inside a tl.sum's combine: the call's position
        return node_key(path, line, col, "call", version)
    return None
