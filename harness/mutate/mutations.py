"""Source-level mutants of one ``@triton.jit`` function: the bugs low-precision kernels actually ship.

Why source level: a mutant is then a diff a kernel author reads, and the mutated kernel goes through the same
interpreter, shims and compile capture as the real one. Each rule finds its sites with :mod:`ast` (inside the
named function only) and rewrites the exact source span of one node, so the rest of the file (comments, layout)
is untouched and a mutant's line and column are the node's. A rule's replacement reuses its operands' own text.

An equivalent mutant (one no test can kill because the program computes the same thing) is declared on the
mutated line, with the kind and a reason::

    x = tl.maximum(x, 0.0)  # harness: equivalent-mutant(min-max): x >= 0 here, both give x

or, where the line has no room, in comment lines of their own right above it (the reason may go on over them).
It declares every mutant of that kind whose node starts on that line; ``min-max@12`` declares only the one at
column 12 (the column in the mutant's id, ``file:line:col:kind``), for a line with several sites of a kind of
which only some are equivalent. Several declarations are separated by commas and share the reason.
"""

from __future__ import annotations

import ast
import difflib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

__all__ = ["KINDS", "EQUIVALENT", "Mutant", "Target", "MutateError", "find_function", "jit_functions", "mutants",
           "equivalences"]

#: The mutation kinds, in the order they are generated, and what each does.
KINDS: dict[str, str] = {
    "drop-f32": "X.to(tl.float32) -> X (a low-precision value reaches the next cast or op unwidened)",
    "fp8-format": "tl.float8e4nv -> tl.float8e5 / tl.float8e4b15, tl.float8e5 -> tl.float8e4nv, "
                  "tl.float8e4b15 -> tl.float8e4nv",
    "rint": "rint(x) (libdevice / tl.math) -> tl.floor(x + 0.5): half-up instead of half-even",
    "mask-compare": "< <-> <=, > <-> >= in a mask expression",
    "other": "other=0 -> other=1, other=c -> other=0",
    "min-max": "tl.maximum <-> tl.minimum",
    "saturation": "a saturation constant -> another format's (448 <-> 240, 57344 -> 448, 65504 -> 57344, "
                  "1.75 <-> 1.875)",
    "clamp": "tl.clamp(x, lo, hi) -> x; tl.minimum(tl.maximum(x, lo), hi) -> tl.maximum(x, lo) (and the converse)",
    "off-by-one": "tl.arange(..) -> (tl.arange(..) + 1); an offs name in a load/store pointer -> (offs + 1)",
    "axis": "axis=a of a reduction or scan -> another axis (not where a nested reduction reduces the same axes)",
    "nibble": "x >> 4 <-> x & 0xF; a | (b << 4) -> (a << 4) | b",
    "ceil-floor": "ceil <-> floor (a scale rule or rounding)",
}

#: The in-place declaration of an equivalent mutant.
EQUIVALENT = re.compile(r"#\s*harness:\s*equivalent-mutant\(([^)]*)\)\s*:?\s*(.*)$")

_FP8_SWAPS = {"float8e4nv": ("float8e5", "float8e4b15"), "float8e5": ("float8e4nv",),
              "float8e4b15": ("float8e4nv",)}
_SATURATION: dict[float, float] = {448: 240, 240: 448, 57344: 448, 65504: 57344, 1.75: 1.875, 1.875: 1.75}
_REDUCTIONS = {"sum", "max", "min", "argmax", "argmin", "reduce", "xor_sum", "cumsum", "cumprod",
               "associative_scan", "sort", "flip", "reduce_or"}
_LOW_CASTS = re.compile(r"float8\w*|float16|bfloat16|fp8\w*|fp16|bf16")
_OFFS = re.compile(r"^(offs?|\w*_offs?|offs?_\w*|\w*off)$")


class MutateError(ValueError):
    """A target or a declaration that cannot be used, said with the argument or the line at fault."""


@dataclass(frozen=True)
class Target:
    """A function to mutate: ``PATH::NAME``."""

    path: str
    name: str

    def __str__(self) -> str:
        return f"{self.path}::{self.name}"


@dataclass(frozen=True)
class Mutant:
    """One mutation: where (file, kernel, line, col of the mutated node), what (kind), and the mutated file's
    full text (``source``) with the unified diff a reader sees."""

    file: str
    kernel: str
    line: int
    col: int
    kind: str
    diff: str
    source: str
    declared: str | None = None  # the reason, when declared equivalent in place

    @property
    def id(self) -> str:
        return f"{self.file}:{self.line}:{self.col}:{self.kind}"


def _is_jit(dec: ast.expr) -> bool:
    node = dec.func if isinstance(dec, ast.Call) else dec
    return (node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")) == "jit"


def jit_functions(tree: ast.Module) -> list[ast.FunctionDef]:
    """The module-level ``@triton.jit`` functions (decorated with ``jit`` under any other decorators)."""
    return [n for n in tree.body if isinstance(n, ast.FunctionDef) and any(_is_jit(d) for d in n.decorator_list)]


def find_function(tree: ast.Module, name: str, where: str) -> ast.FunctionDef:
    fns = jit_functions(tree)
    for fn in fns:
        if fn.name == name:
            return fn
    have = ", ".join(f.name for f in fns) or "none"
    raise MutateError(f"{where}: no @triton.jit function {name!r} in the file (its @triton.jit functions: {have})")


def _tl_alias(tree: ast.Module) -> str:
    """The module's name for ``triton.language`` (``tl`` when it imports none)."""
    for n in tree.body:
        if isinstance(n, ast.Import):
            for a in n.names:
                if a.name == "triton.language":
                    return a.asname or "triton.language"
        if isinstance(n, ast.ImportFrom) and n.module == "triton":
            for a in n.names:
                if a.name == "language":
                    return a.asname or "language"
    return "tl"


def _attr(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _call_name(node: ast.AST) -> str:
    return _attr(node.func) if isinstance(node, ast.Call) else ""


class _Source:
    """The file's text addressed by AST positions (``col_offset`` counts UTF-8 bytes)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = text.splitlines(keepends=True)
        starts, pos = [], 0
        for ln in self.lines:
            starts.append(pos)
            pos += len(ln)
        self._starts = starts

    def offset(self, line: int, col: int) -> int:
        return self._starts[line - 1] + len(self.lines[line - 1].encode()[:col].decode(errors="replace"))

    def span(self, node: ast.AST) -> tuple[int, int]:
        return (self.offset(node.lineno, node.col_offset),  # type: ignore[attr-defined]
                self.offset(node.end_lineno, node.end_col_offset))  # type: ignore[attr-defined]

    def seg(self, node: ast.AST) -> str:
        a, b = self.span(node)
        return self.text[a:b]


@dataclass(frozen=True)
class _Edit:
    node: ast.AST  # where the mutant is reported (line, col)
    start: int
    end: int
    new: str
    kind: str


def _mask_names(fn: ast.FunctionDef) -> set[str]:
    """Names that flow into a ``mask=`` argument (the mask variables and the ones they are built from)."""
    deps: dict[str, set[str]] = {}
    for n in ast.walk(fn):
        if isinstance(n, ast.Assign):
            used = {x.id for x in ast.walk(n.value) if isinstance(x, ast.Name)}
            for t in n.targets:
                for x in ast.walk(t):
                    if isinstance(x, ast.Name):
                        deps.setdefault(x.id, set()).update(used)
    todo = [x.id for n in ast.walk(fn) if isinstance(n, ast.keyword) and n.arg == "mask"
            for x in ast.walk(n.value) if isinstance(x, ast.Name)]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(deps.get(name, ()))
    return seen


def _mask_exprs(fn: ast.FunctionDef) -> list[ast.AST]:
    names = _mask_names(fn)
    out: list[ast.AST] = [n.value for n in ast.walk(fn) if isinstance(n, ast.keyword) and n.arg == "mask"]
    out += [n.value for n in ast.walk(fn) if isinstance(n, ast.Assign)
            and any(isinstance(x, ast.Name) and x.id in names for t in n.targets for x in ast.walk(t))]
    return out


def _num(node: ast.AST) -> float | None:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    return None


def _literal(value: float, like: ast.Constant) -> str:
    return repr(float(value)) if isinstance(like.value, float) else str(int(value))


_PRIMARY = (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.Constant)
_ANY_EXPR = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return, ast.Expr, ast.keyword, ast.Tuple, ast.List)


def _grouped(new: str, node: ast.AST, parent: ast.AST | None) -> str:
    """``new`` as the text that replaces ``node``, parenthesized where it would otherwise bind differently: the
    clamp dropped from ``tl.clamp(y * s, lo, hi).to(T)`` is ``(y * s).to(T)``, not ``y * s.to(T)``."""
    try:
        expr = ast.parse(new, mode="eval").body
    except SyntaxError:
        return new
    if isinstance(expr, _PRIMARY) or isinstance(parent, _ANY_EXPR) \
            or (isinstance(parent, ast.Call) and any(a is node for a in parent.args)):
        return new
    if new.startswith("(") and new.endswith(")"):
        try:
            ast.parse(new[1:-1], mode="eval")
            return new  # one parenthesized group already
        except SyntaxError:
            pass
    return f"({new})"


def _edits(fn: ast.FunctionDef, src: _Source, tl: str) -> Iterator[_Edit]:
    body = [n for stmt in fn.body for n in ast.walk(stmt)]
    calls = [n for n in body if isinstance(n, ast.Call)]
    parent = {id(c): p for p in ast.walk(fn) for c in ast.iter_child_nodes(p)}

    def whole(node: ast.AST, new: str, kind: str) -> _Edit:
        a, b = src.span(node)
        enclosed = src.text[:a].rstrip().endswith("(") and src.text[b:].lstrip().startswith(")")
        return _Edit(node, a, b, new if enclosed else _grouped(new, node, parent.get(id(node))), kind)

    # drop-f32: in a function that casts to a low-precision type somewhere
    lowp = any(_call_name(c) == "to" and c.args and _LOW_CASTS.fullmatch(_attr(c.args[0])) for c in calls)
    if lowp:
        for c in calls:
            if (_call_name(c) == "to" and isinstance(c.func, ast.Attribute) and c.args
                    and _attr(c.args[0]) == "float32" and not any(k.arg == "bitcast" for k in c.keywords)):
                yield whole(c, src.seg(c.func.value), "drop-f32")
    # fp8-format
    for n in body:
        if isinstance(n, ast.Attribute) and n.attr in _FP8_SWAPS:
            for new in _FP8_SWAPS[n.attr]:
                yield whole(n, f"{src.seg(n.value)}.{new}", "fp8-format")
    # rint -> floor(x + 0.5)
    for c in calls:
        if _call_name(c) == "rint" and len(c.args) == 1 and not c.keywords:
            yield whole(c, f"{tl}.floor({src.seg(c.args[0])} + 0.5)", "rint")
    # mask-compare
    swap = {ast.Lt: ("<", "<="), ast.LtE: ("<=", "<"), ast.Gt: (">", ">="), ast.GtE: (">=", ">")}
    seen: set[int] = set()
    for expr in _mask_exprs(fn):
        for n in ast.walk(expr):
            if not isinstance(n, ast.Compare) or id(n) in seen:
                continue
            seen.add(id(n))
            left = n.left
            for op, right in zip(n.ops, n.comparators, strict=True):
                if type(op) in swap:
                    old, new = swap[type(op)]
                    a, b = src.span(left)[1], src.span(right)[0]
                    gap = src.text[a:b]
                    m = re.search(r"(?<![<>=!])" + re.escape(old) + r"(?![<>=])", gap)
                    if m is not None:
                        yield _Edit(n, a + m.start(), a + m.end(), new, "mask-compare")
                left = right
    # other=
    for c in calls:
        for k in c.keywords:
            if k.arg == "other":
                v = _num(k.value)
                if v is None and isinstance(k.value, ast.UnaryOp) and isinstance(k.value.op, ast.USub):
                    v = _num(k.value.operand)
                    v = None if v is None else -v
                like = k.value if isinstance(k.value, ast.Constant) else None
                if v == 0:
                    new = "1.0" if like is not None and isinstance(like.value, float) else "1"
                else:
                    new = "0.0" if isinstance(v, float) else "0"
                yield whole(k.value, new, "other")
    # min-max
    for c in calls:
        if isinstance(c.func, ast.Attribute) and c.func.attr in ("maximum", "minimum"):
            other = "minimum" if c.func.attr == "maximum" else "maximum"
            yield whole(c.func, f"{src.seg(c.func.value)}.{other}", "min-max")
    # saturation constants
    for n in body:
        v = _num(n)
        if v is not None and not isinstance(n.value, bool) and v in _SATURATION:  # type: ignore[attr-defined]
            yield whole(n, _literal(_SATURATION[v], n), "saturation")  # type: ignore[arg-type]
    # clamp dropped
    for c in calls:
        name = _call_name(c)
        if name == "clamp" and c.args:
            yield whole(c, src.seg(c.args[0]), "clamp")
        elif name in ("maximum", "minimum") and c.args and _call_name(c.args[0]) in ("maximum", "minimum") \
                and _call_name(c.args[0]) != name:
            yield whole(c, src.seg(c.args[0]), "clamp")
    # off-by-one
    for c in calls:
        if _call_name(c) == "arange":
            yield whole(c, f"({src.seg(c)} + 1)", "off-by-one")
    offs = {id(x): x for c in calls if _call_name(c) in ("load", "store") and c.args
            for x in ast.walk(c.args[0]) if isinstance(x, ast.Name) and _OFFS.match(x.id)}
    for x in offs.values():
        yield whole(x, f"({x.id} + 1)", "off-by-one")
    # axis
    def axis_of(c: ast.Call) -> ast.AST | None:
        node = next((k.value for k in c.keywords if k.arg == "axis"), None)
        if node is None and len(c.args) >= 2 and _call_name(c) not in ("reduce", "associative_scan"):
            node = c.args[1]
        return node if isinstance(node, ast.Constant) and type(node.value) is int else None

    # tl.sum(tl.sum(x, axis=2), axis=1) reduces axes {1, 2}: an inner axis that makes the pair reduce the same
    # axes (axis=1 then 1) only reorders the reduction, so it is not generated
    outer_of = {id(c.args[0]): c for c in calls if _call_name(c) in _REDUCTIONS and c.args}

    def reduced(inner: int, outer: int) -> set[int]:
        return {inner, outer if outer < inner else outer + 1}

    for c in calls:
        node = axis_of(c) if _call_name(c) in _REDUCTIONS else None
        if node is None:
            continue
        a = node.value  # type: ignore[attr-defined]
        new = 1 if a == 0 else a - 1
        up = outer_of.get(id(c))
        b = axis_of(up) if up is not None and _call_name(up) == _call_name(c) else None
        if b is not None and reduced(a, b.value) == reduced(new, b.value):  # type: ignore[attr-defined]
            continue
        yield whole(node, str(new), "axis")
    # nibble order
    for n in body:
        if not isinstance(n, ast.BinOp):
            continue
        r = _num(n.right)
        if isinstance(n.op, ast.RShift) and r == 4:
            yield whole(n, f"{src.seg(n.left)} & 0xF", "nibble")
        elif isinstance(n.op, ast.BitAnd) and r == 15:
            yield whole(n, f"{src.seg(n.left)} >> 4", "nibble")
        elif isinstance(n.op, ast.BitOr):
            for shifted, plain, right in ((n.right, n.left, True), (n.left, n.right, False)):
                if isinstance(shifted, ast.BinOp) and isinstance(shifted.op, ast.LShift) and _num(shifted.right) == 4:
                    a, b = f"({src.seg(plain)} << 4)", src.seg(shifted.left)
                    yield whole(n, f"{a} | {b}" if right else f"{b} | {a}", "nibble")
                    break
    # ceil <-> floor
    for c in calls:
        if isinstance(c.func, ast.Attribute) and c.func.attr in ("ceil", "floor"):
            other = "floor" if c.func.attr == "ceil" else "ceil"
            yield whole(c.func, f"{src.seg(c.func.value)}.{other}", "ceil-floor")


def _declared_kind(text: str) -> bool:
    kind, at, col = text.partition("@")
    return kind in KINDS and (not at or col.isdigit())


def equivalences(text: str, where: str) -> dict[int, dict[str, str]]:
    """line -> {kind: reason} of the file's in-place equivalent-mutant declarations."""
    out: dict[int, dict[str, str]] = {}
    lines = text.splitlines()
    for i, line in enumerate(lines, 1):
        m = EQUIVALENT.search(line)
        if m is None:
            continue
        kinds = [k.strip() for k in m.group(1).split(",") if k.strip()]
        reason = m.group(2).strip()
        at = i
        if line.lstrip().startswith("#"):  # a comment line of its own declares the next code line; the comment
            at = next((j for j in range(i + 1, len(lines) + 1) if not lines[j - 1].lstrip().startswith("#")), i)
            more = [ln.strip().lstrip("#").strip() for ln in lines[i:at - 1]]  # lines between continue its reason
            if not any(EQUIVALENT.search(ln) for ln in lines[i:at - 1]):
                reason = " ".join([reason, *more]).strip()
        bad = [k for k in kinds if not _declared_kind(k)]
        if not kinds or bad:
            raise MutateError(f"{where}:{i}: equivalent-mutant({m.group(1)}): expected kinds among "
                              f"{', '.join(KINDS)} (each optionally @COLUMN), got {bad[0] if bad else 'none'!r}")
        if not reason:
            raise MutateError(f"{where}:{i}: equivalent-mutant({m.group(1)}) needs a reason after the colon")
        for k in kinds:
            out.setdefault(at, {})[k] = reason
    return out


def mutants(text: str, path: str, name: str, kinds: Callable[[str], bool] = lambda k: True) -> list[Mutant]:
    """Every mutant of the ``@triton.jit`` function ``name`` in ``text`` (the file at ``path``), in kind order
    then source order; duplicates (two rules giving the same text) once, the first kept."""
    where = f"{path}::{name}"
    try:
        tree = ast.parse(text, filename=path)
    except (SyntaxError, ValueError) as e:  # ValueError: null bytes, before Python 3.12
        raise MutateError(f"{where}: the file does not parse: {e}") from None
    fn = find_function(tree, name, where)
    src = _Source(text)
    declared = equivalences(text, path)
    out: list[Mutant] = []
    texts: set[str] = set()
    for e in _edits(fn, src, _tl_alias(tree)):
        if not kinds(e.kind):
            continue
        new = text[:e.start] + e.new + text[e.end:]
        if new in texts or new == text:
            continue
        ast.parse(new, filename=path)  # every rule's output is an expression in an expression's place
        texts.add(new)
        line, col = e.node.lineno, e.node.col_offset  # type: ignore[attr-defined]
        diff = "".join(difflib.unified_diff(text.splitlines(keepends=True), new.splitlines(keepends=True),
                                            f"a/{path}", f"b/{path}", n=0))
        here = declared.get(line, {})
        out.append(Mutant(path, name, line, col, e.kind, diff, new, here.get(f"{e.kind}@{col}", here.get(e.kind))))
    order = {k: i for i, k in enumerate(KINDS)}
    return sorted(out, key=lambda m: (order[m.kind], m.line, m.col))
