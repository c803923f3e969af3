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

Public API: :func:`interpreter_position`, :func:`loop_iteration`, :func:`node_key`.
"""

from __future__ import annotations

import ast
import functools
import linecache
import operator
import os
import sys
from types import CodeType, FrameType
from typing import Any

__all__ = ["interpreter_position", "loop_iteration", "node_key", "triton_library"]


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
#: (code, its file, instruction) -> its position. The file is part of the key because code objects compare equal
#: without it (CPython's ``code_richcompare``): two checkouts of one kernel run equal code from two files
_WHERE: dict[tuple[CodeType, str, int], tuple[str, int, int] | None] = {}
_INTERPRETED: list[Any] = []  # InterpretedFunction, once imported: a shim asks at every op of a launch
#: (frame id, file, line) -> (a loop's range arguments as objects, its range): read again when any is another object
_RANGES: dict[tuple[int, str, int], tuple[tuple[Any, ...], range]] = {}


def _interpreted_codes() -> dict[CodeType, bool]:
    """The code objects the interpreter runs for ``@jit`` functions (``InterpretedFunction.rewritten_fn``, Triton
    3.6 and 3.9), each with whether it was compiled from the dedented source (a function whose source Triton
    could not read runs as it is)."""
    if not _INTERPRETED:
        try:
            from triton.runtime.interpreter import InterpretedFunction
        except ImportError:
            return _CODES
        _INTERPRETED.append(InterpretedFunction)
    fns = getattr(_INTERPRETED[0], "rewritten_fn", {})
    if len(fns) != _SEEN[0]:
        # Triton only adds to the dict, and a dict keeps insertion order: read the entries added since the last
        # call (a run of generated kernels adds one a launch; rereading all of them was quadratic). A dict that
        # shrank was cleared by someone: read it whole.
        start = _SEEN[0] if len(fns) > _SEEN[0] else 0
        for orig, new in list(fns.items())[start:]:
            code = getattr(new, "__code__", None)
            if code is not None:
                _CODES[code] = new is not orig
        _SEEN[0] = len(fns)
    return _CODES


def _kernel_frame(f: FrameType | None) -> tuple[FrameType, tuple[str, int, int] | None] | None:
    """The innermost interpreted ``@jit`` frame outside Triton's library from ``f`` outwards, with the position of
    the instruction it is executing (``None`` where CPython gives none)."""
    codes = _interpreted_codes()
    while f is not None:
        code = f.f_code
        dedented = codes.get(code)
        if dedented is not None and not _library(code.co_filename):
            key = (code, code.co_filename, f.f_lasti)
            if key in _WHERE:
                return f, _WHERE[key]
            _WHERE[key] = where = _position(code, f.f_lasti, dedented)
            return f, where
        f = f.f_back
    return None


def _position(code: CodeType, lasti: int, dedented: bool) -> tuple[str, int, int] | None:
    """The (file, line, absolute column) of ``code``'s instruction at ``lasti``."""
    positions = _POSITIONS.get(code)
    if positions is None:  # one list per code object
        try:
            positions = _POSITIONS[code] = tuple(code.co_positions())
        except AttributeError:
            return None
    try:
        pos = positions[lasti // 2]
    except IndexError:
        return None
    line, _end, col, _endcol = pos
    if line is None or col is None:
        return None
    return code.co_filename, line, col + (_def_indent(code.co_filename, code.co_firstlineno) if dedented else 0)


def interpreter_position(frame: FrameType | None = None) -> tuple[str, int, int] | None:
    """(file, line, absolute 0-based column) of the instruction the innermost interpreted ``@jit`` function
    outside Triton's own library is executing (the user's kernel or helper; ``tl.sum``'s own body is skipped),
    or ``None`` when no such frame is on the stack. Frames of shims and wrappers are never taken: only code the
    interpreter compiled for a ``@jit`` function counts."""
    found = _kernel_frame(frame or sys._getframe(1))
    return None if found is None else found[1]


@functools.lru_cache(maxsize=256)
def _enclosing_range(path: str, line: int, col: int) -> tuple[str, tuple[tuple[str, object], ...]] | str:
    """The innermost ``for NAME in range(...)`` whose body holds the node at (line, col), as (loop variable, the
    range's arguments as ``("name", id)`` / ``("const", value)``), or why it cannot be read."""
    tree = _tree(path)
    if tree is None:
        return "the kernel's source cannot be parsed"
    func = None
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.lineno <= line <= (n.end_lineno or n.lineno):
            func = n  # the innermost wins: walk visits outer functions first
    if func is None:
        return "no function encloses it"

    def inside(n: ast.AST) -> bool:
        return any(b.lineno <= line <= (b.end_lineno or b.lineno) for b in n.body)  # type: ignore[attr-defined]

    loops = [n for n in ast.walk(func) if isinstance(n, ast.For) and inside(n)]
    if not loops:
        return "no for loop encloses it in its function"
    loop = max(loops, key=lambda n: (n.lineno, n.col_offset))
    it = loop.iter
    if not (isinstance(loop.target, ast.Name) and isinstance(it, ast.Call) and isinstance(it.func, ast.Name)
            and it.func.id == "range" and not it.keywords and 1 <= len(it.args) <= 3):
        return f"the loop at line {loop.lineno} is no `for name in range(...)`"
    args: list[tuple[str, object]] = []
    for a in it.args:
        if isinstance(a, ast.Name):
            args.append(("name", a.id))
        elif isinstance(a, ast.Constant) and isinstance(a.value, int):
            args.append(("const", a.value))
        else:
            return f"the range of the loop at line {loop.lineno} has an argument that is no name or integer"
    names = {loop.target.id} | {str(v) for k, v in args if k == "name"}
    for n in ast.walk(loop):
        targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(
            n, (ast.AugAssign, ast.AnnAssign, ast.For)) and n is not loop else []
        if any(isinstance(t, ast.Name) and t.id in names for t in targets):
            return f"the loop at line {loop.lineno} assigns its variable or its range's arguments"
    return loop.target.id, tuple(args)


def _integer(v: object) -> int:
    """A range argument as the interpreter holds it (a Python int, or a scalar ``tl.tensor``) as an int."""
    if type(v) is int:
        return v
    handle = getattr(v, "handle", None)
    if handle is not None:
        import numpy as np

        data = np.asarray(handle.data)
        if data.size != 1 or data.dtype.kind not in "iu":
            raise TypeError(f"a range argument of shape {data.shape} and dtype {data.dtype}")
        return int(data.item())
    return operator.index(v)  # type: ignore[arg-type]


def loop_iteration(frame: FrameType | None = None) -> tuple[tuple[str, int, int], int, int] | str:
    """(the instruction's :func:`interpreter_position`, iteration index from 0, trip count) of the innermost
    ``for name in range(...)`` around the instruction the interpreted kernel is executing, or why it cannot be
    read.

    Why: the interpreter runs a kernel's loop as a Python ``for``, while ptxas unrolls the compiled one and rounds
    differently at each place of an unrolled block (:func:`harness.lowering.fma.unrolled_position`), which needs
    both the iteration and the trip count. They are read from the frame: the loop variable and the ``range``'s
    arguments (names or integer literals, none assigned in the loop; code around the loop may reassign them
    between two runs of it, which makes them other objects)."""
    found = _kernel_frame(frame or sys._getframe(1))
    if found is None or found[1] is None:
        return "no interpreted kernel frame"
    f, where = found
    loop = _enclosing_range(*where)
    if isinstance(loop, str):
        return loop
    var, args = loop
    scope = f.f_locals
    try:
        objs = tuple(v if k == "const" else scope[v] if v in scope else f.f_globals[v] for k, v in args)
        key = (id(f), where[0], where[1])
        hit = _RANGES.get(key)
        if hit is not None and len(hit[0]) == len(objs) and all(a is b for a, b in zip(hit[0], objs, strict=True)):
            rng = hit[1]  # the same argument objects (kept alive here, so no other object has their ids)
        else:
            rng = range(*map(_integer, objs))
            if len(_RANGES) > 64:
                _RANGES.clear()
            _RANGES[key] = (objs, rng)
        i = (_integer(scope[var]) - rng.start) // rng.step
    except (KeyError, TypeError, ValueError) as e:
        return f"the loop's range or variable cannot be read ({type(e).__name__}: {e})"
    if not 0 <= i < len(rng):
        return f"the loop variable {var} is not an iteration of {rng}"
    return where, i, len(rng)


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
