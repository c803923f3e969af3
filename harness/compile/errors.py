"""A compile error as text: the whole chain (:func:`describe_error`), its kind (:func:`error_kind`: a
refusal by the frontend or a ptxas failure) and the compiler's own reason in one line (:func:`error_line`).

Why: Triton's ``CompilationError`` for a failed ``assert`` inside a lowering helper carries only the source
location, and a ptxas failure carries the whole PTX; the asserts, launch capture and the compile CLI all
need the one line a human reads, extracted the same way.
"""

from __future__ import annotations

import inspect
import os
import re
import traceback
from typing import Any

__all__ = ["BUDGET", "NOT_APPLICABLE", "InvalidIR", "describe_error", "error_kind", "error_line", "error_summary",
           "source_location"]

#: The kinds :func:`error_kind` gives a refusal that says the kernel cannot take the launch at all, on any target:
#: its own guard (``tl.static_assert``) or an op's type rule in Triton's frontend (``tl.math.div_rn`` takes fp32
#: only, ``tl.dot`` needs matching operand types, ``tl.arange`` an end above its start).
NOT_APPLICABLE = ("guard", "type-rule")

class InvalidIR(RuntimeError):
    """Triton's frontend built a module that fails MLIR verification (it raises a bare "error encountered during
    parsing" and the verifier's reason goes to the process's stderr): ``diagnostic`` is the verifier's first error
    line, read from there (:func:`harness.compile.cache.compile_memoized`)."""

    def __init__(self, diagnostic: str) -> None:
        self.diagnostic = diagnostic
        super().__init__(f"Triton's frontend made IR that fails verification: {diagnostic}")


#: A verifier refusal of an op's operand types among themselves (``'arith.divf' op requires the same type for all
#: operands and results``: ``tl.math.fdiv`` of fp16 and fp32 builds it without promoting): an op's type rule that the
#: frontend leaves to the verifier. Not ``tt.store``'s value-vs-pointer check, which a conversion helper that returns
#: the wrong type fails (e4b15 → bf16): that is a missing lowering.
_VERIFIER_TYPE_RULE = re.compile(r"error: '(arith|math)\.\w+' op (requires the same (element )?type for all operands"
                                 r"|failed to verify that all of \{[^}]*\} have same type)")

#: The kind :func:`error_kind` gives a compile whose ptxas ran past its budget (:mod:`harness.compile.budget`):
#: not judged, neither a failure nor a pass.
BUDGET = "budget"


def describe_error(exc: BaseException) -> str:
    """The compiler error as one searchable text: type and message, then each chained cause.

    Triton's ``CompilationError`` for a failed ``assert`` inside a lowering helper carries only the source
    location; the reason is the failing ``assert`` line of the cause, so that line is included
    (e.g. ``bf16 → e4b15``: ``assert arg.type.scalar.is_fp16() or arg.type.scalar.is_fp32()``).
    """
    parts = []
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        msg = str(e).strip()
        head = type(e).__name__ + (f": {msg}" if msg else "")
        if not msg and e.__traceback__ is not None:
            frames = traceback.extract_tb(e.__traceback__)
            if frames:
                f = frames[-1]
                head += f" (at {f.filename.rsplit('/', 1)[-1]}:{f.lineno}: {(f.line or '').strip()})"
        parts.append(head)
        e = e.__cause__ or e.__context__
    return "\ncaused by ".join(parts)


def error_kind(exc: BaseException) -> str:
    """``"budget"`` when ptxas ran past its wall-clock budget and was killed (:mod:`harness.compile.budget`: not
    judged); ``"ptxas"`` when ptxas rejected the PTX Triton generated (a codegen fault, not a refusal by the
    frontend); ``"guard"`` when the kernel's own ``tl.static_assert`` failed; ``"type-rule"`` when the innermost
    error was raised by Triton's language frontend (``triton/language/``, not its per-target lowering helpers in
    ``triton/language/extra/``) and names no architecture: an op's documented type rule; ``"refused"`` for
    every other compile error (a missing lowering, as bf16 → e4b15 is in ``language/extra/cuda``)."""
    e: BaseException | None = exc
    seen: set[int] = set()
    inner: BaseException = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if type(e).__name__ == "PtxasOverBudget":
            return BUDGET
        if isinstance(e, InvalidIR):
            return "type-rule" if _VERIFIER_TYPE_RULE.search(e.diagnostic) else "refused"
        if type(e).__name__ == "PTXASError" or "`ptxas` stderr" in str(e):
            return "ptxas"
        if type(e).__name__ == "CompileTimeAssertionFailure":
            return "guard"
        inner = e
        e = e.__cause__ or e.__context__
    frames = traceback.extract_tb(inner.__traceback__) if inner.__traceback__ is not None else []
    where = frames[-1].filename.replace(os.sep, "/") if frames else ""
    if ("/triton/language/" in where and "/triton/language/extra/" not in where
            and not _TARGET_WORDS.search(str(inner))):
        return "type-rule"
    return "refused"


#: Words of a frontend refusal that depends on the target (``type fp8e4nv not supported in this architecture``):
#: such a refusal is the arch model's to predict, not a type rule.
_TARGET_WORDS = re.compile(r"architecture|capability|\bsm_?\d|\bgfx\d|cuda|hip|target", re.I)


_PTXAS_ERR = re.compile(r"^ptxas\s+(?:\S+?\.ptx)?,?\s*(line \d+);?\s*error\s*:\s*(.*)$", re.M)


def source_location(exc: BaseException, fn: Any) -> str | None:
    """Where a ``CompilationError`` points, as ``file.py:LINE:COL`` of the kernel's source file: Triton
    counts lines from the ``def`` of the function it was compiling (``at 5:27``), which may be ``fn`` or a
    ``@triton.jit`` helper in its module. ``None`` when the error has no location or the function is not found."""
    e: BaseException | None = exc
    seen: set[int] = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        src, node = getattr(e, "src", None), getattr(e, "node", None)
        if isinstance(src, str) and hasattr(node, "lineno"):
            break
        e = e.__cause__ or e.__context__
    else:
        return None
    if e is None:
        return None
    m = re.search(r"^def\s+(\w+)", src, re.M)
    from harness.interp.exec_source import with_file  # a kernel built by exec: located in its text's file

    pyfn = with_file(getattr(fn, "fn", fn))
    if m is None or pyfn is None:
        return None
    cands = [pyfn] + [getattr(v, "fn", None) for v in getattr(pyfn, "__globals__", {}).values()]
    target = next((c for c in cands if inspect.isfunction(c) and c.__name__ == m.group(1)), None)
    if target is None:
        return None
    try:
        lines, start = inspect.getsourcelines(target)
        path = inspect.getsourcefile(target) or ""
    except (OSError, TypeError):
        return None
    first = next((i for i, ln in enumerate(lines) if ln.lstrip().startswith("def ")), 0)
    return f"{os.path.basename(path)}:{start + first + node.lineno - 1}:{node.col_offset}"


def error_line(exc: BaseException, fn: Any = None) -> str:
    """The compiler's own reason in one line: ptxas's first ``error`` line (temp file name dropped), the
    frontend's "... not supported ..." message, or the failing assert of a lowering helper. With ``fn`` (the
    kernel), a frontend error's location is ``file.py:LINE:COL`` of the source file (:func:`source_location`),
    not Triton's line count from the ``def``."""
    if isinstance(exc, InvalidIR):
        m = re.match(r"(.*?):(\d+):(\d+): error: (.*)", exc.diagnostic)
        if m:
            return f"at {os.path.basename(m.group(1))}:{m.group(2)}:{m.group(3)}: {m.group(4)} (IR verification)"
        return str(exc)
    if error_kind(exc) == "ptxas":
        text = describe_error(exc)
        m = _PTXAS_ERR.search(text)
        if m:
            more = len(_PTXAS_ERR.findall(text)) - 1
            return f"ptxas {m.group(1)}: {m.group(2).strip()}" + (f" (+{more} more)" if more > 0 else "")
        fatal = [ln for ln in text.splitlines() if ln.startswith("ptxas")]
        if fatal:
            return fatal[0].strip()
    lines = describe_error(exc).splitlines()
    at = next((i for i, ln in enumerate(lines) if ln.strip() == "^"), None)
    if at is not None and at > 0:  # a CompilationError: name the kernel line the caret points at
        where = lines[0].split(":", 1)[-1].strip().rstrip(":")
        loc = source_location(exc, fn) if fn is not None else None
        if loc is not None:
            where = f"at {loc}"
        why = [ln.removeprefix("caused by ").strip() for ln in lines[at + 1:] if ln.strip()]
        head = next((ln for ln in lines[:at] if "not supported" in ln or "Error" in ln and ln is not lines[0]), "")
        reason = " | ".join(x for x in [head.strip(), *why[-1:]] if x)
        return f"{where} `{lines[at - 1].strip()}`" + (f": {reason}" if reason else "")
    return error_summary(exc)


def error_summary(exc: BaseException) -> str:
    """At most two key lines of :func:`describe_error` (300 characters), or the ptxas line: what a failed
    compile assertion prints per target."""
    if error_kind(exc) == "ptxas":
        m = _PTXAS_ERR.search(describe_error(exc))
        if m:
            return error_line(exc)
    text = describe_error(exc)
    lines = [ln for ln in text.splitlines() if ln.strip() and ln.strip() != "^"]
    key = [ln for ln in lines if "not supported" in ln or ln.startswith("caused by") or "Error" in ln]
    return " | ".join((key or lines)[-2:])[:300]

