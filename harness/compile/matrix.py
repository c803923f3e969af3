"""Ahead-of-time compilation of a ``@triton.jit`` kernel for GPU targets this machine does not have, and the
assertions on the result.

Why: most low-precision bugs that matter are *compile-time* facts of a target (``fp8e4nv`` is refused
below sm89; a bf16 → e4b15 cast does not lower anywhere), and ``triton.compile(ASTSource(...),
target=GPUTarget(...))`` exposes them on a CPU-only box, including under ``TRITON_INTERPRET=1``.

This module is the public face: the matrix runner and the assertions. The parts live where their concern is:

- :mod:`harness.compile.targets`: target names and what the installed Triton can compile for;
- :mod:`harness.compile.signature`: the signature and constexprs checked before compiling;
- :mod:`harness.interp.jit`: interpreted kernels rebuilt as ``JITFunction`` (and the leak fix the plugin
  applies);
- :mod:`harness.compile.cache`: the one ``triton.compile`` call, its per-process cache and counters;
- :mod:`harness.compile.errors`: a compile error as text;
- :mod:`harness.compile.message`: every failure text of the assertions below, from their records.

Public API: :data:`DEFAULT_TARGETS`, :data:`COMPILE_LISTENERS`, :class:`Compiled`, :func:`parse_target`,
:func:`compile_kernel`, :func:`compile_matrix`, :func:`assert_compiles`, :func:`assert_compile_error`,
:func:`assert_ptx_contains`, :func:`assert_ptx_lacks`, :func:`describe_error`, :func:`error_line`, :func:`stats`
(``Compiled`` is what a compile gives; ``describe_error`` / ``error_line`` read the exception an entry of
:func:`compile_matrix` holds).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from harness.compile import message
from harness.compile.cache import Compiled, compile_frontend, compile_memoized, stats
from harness.compile.errors import describe_error, error_line, error_summary
from harness.compile.signature import prepare
from harness.compile.targets import (
    DEFAULT_TARGETS,
    Target,
    check_targets,
    parse_target,
    parse_targets,
    target_available,
)

__all__ = [
    "COMPILE_LISTENERS",
    "DEFAULT_TARGETS",
    "Compiled",
    "assert_compile_error",
    "assert_compiles",
    "assert_ptx_contains",
    "assert_ptx_lacks",
    "compile_kernel",
    "compile_matrix",
    "describe_error",
    "error_line",
    "parse_target",
    "stats",
]


# --- compiling ----------------------------------------------------------------------------------------------

#: Called with the ``JITFunction`` of each :func:`compile_kernel` / :func:`compile_matrix` call, before it compiles.
#: Why: a test that compiles a kernel ahead of time tests it as a launch does (a target's compile error), and
#: mutation testing runs a kernel's mutants over the tests that launched *or compiled* it (harness.mutate.plugin).
COMPILE_LISTENERS: list[Callable[[Any], None]] = []


def _heard(jit: Any) -> None:
    for listen in COMPILE_LISTENERS:
        listen(jit)


def compile_kernel(
    fn: Any,
    *,
    signature: Mapping[str, str],
    constexprs: Mapping[str, Any] | None = None,
    target: str | Target = "sm90",
) -> Compiled:
    """Compile ``fn`` for one target; raises the compiler's exception (``CompilationError``...) on failure.

    ``signature`` maps each runtime argument to a Triton type string (``*fp16``, ``*u8``, ``i32``, ``fp32``);
    constexpr arguments take their value from ``constexprs`` and may be left out of ``signature``.
    """
    jit, sig, consts = prepare(fn, signature, constexprs)
    _heard(jit)
    t = parse_target(target)
    ok, reason = target_available(t)
    if not ok:
        raise RuntimeError(reason)
    check_targets([t])
    r = compile_memoized(jit, sig, consts, t)
    if isinstance(r, BaseException):
        raise r
    return r


def compile_matrix(
    fn: Any,
    *,
    signature: Mapping[str, str],
    constexprs: Mapping[str, Any] | None = None,
    targets: str | Iterable[Any] = DEFAULT_TARGETS,
    options: Mapping[str, Any] | None = None,
    divisible: Iterable[str] = (),
    frontend: bool = False,
) -> dict[str, Compiled | Exception]:
    """Compile for every target; each entry is the :class:`Compiled` result or the exception it raised.
    ``frontend=True`` runs Triton's frontend only (to TTIR, :func:`harness.compile.cache.compile_frontend`): what
    only the target's lowering or ptxas refuses is not seen then.

    Bad arguments (unknown target, wrong signature) raise ``ValueError`` up front, before any compile.
    ``options`` are Triton compile options (``num_warps``, ``num_stages``); ``divisible`` names the runtime
    arguments to compile as divisible by 16, as Triton's JIT specializes aligned pointers and integers.
    """
    jit, sig, consts = prepare(fn, signature, constexprs)
    _heard(jit)
    div = frozenset(divisible)
    bad = sorted(n for n in div if sig.get(n, "constexpr") == "constexpr")
    if bad:
        raise ValueError(f"{getattr(fn, '__name__', 'kernel')}: divisible= names {bad}, which are not runtime "
                         f"arguments (pointers or integers) of the kernel")
    if frontend and div:
        raise ValueError("divisible= changes the lowering only; it has no meaning with frontend=True")
    ts = parse_targets(targets)
    check_targets(ts)
    out: dict[str, Compiled | Exception] = {}
    for t in ts:
        ok, reason = target_available(t)
        if not ok:
            out[t.name] = RuntimeError(reason)
        elif frontend:
            out[t.name] = compile_frontend(jit, sig, consts, t, options)  # type: ignore[assignment]
        else:
            out[t.name] = compile_memoized(jit, sig, consts, t, options, div)  # type: ignore[assignment]
    return out


# --- assertions: internals return records (harness.compile.message formats them), the assert_* raise -----


def _targets_arg(target: Any, targets: Any) -> Any:
    __tracebackhide__ = True
    if target is not None and targets is not None:
        raise ValueError("give target= or targets=, not both")
    if target is not None:
        return [target]
    return DEFAULT_TARGETS if targets is None else targets


def _kernel_name(fn: Any) -> str:
    return getattr(fn, "__name__", "kernel")


def _not_compiled(kernel: str, res: Mapping[str, Any]) -> message.CompileFailure | None:
    """The targets of ``res`` whose compile failed, or ``None`` when all compiled."""
    problems = tuple(
        message.CompileProblem(t, "failed", error_summary(r)) for t, r in res.items() if isinstance(r, BaseException)
    )
    return message.CompileFailure(kernel, "compiles", len(res), problems) if problems else None


def _not_refused(
    kernel: str, res: Mapping[str, Any], match: str, exc_type: type[BaseException] | tuple[type[BaseException], ...]
) -> message.CompileFailure | None:
    """The targets of ``res`` that compiled, or refused with another exception type or another error."""
    problems = []
    for t, r in res.items():
        if not isinstance(r, BaseException):
            problems.append(message.CompileProblem(t, "compiled"))
        elif not isinstance(r, exc_type):
            problems.append(message.CompileProblem(t, "wrong type", error_summary(r), type(r).__name__))
        elif not re.search(match, describe_error(r)):
            problems.append(message.CompileProblem(t, "no match", error_summary(r)))
    if not problems:
        return None
    return message.CompileFailure(kernel, "refusal", len(res), tuple(problems), match=match,
                                 exc_type=str(getattr(exc_type, "__name__", exc_type)))


def assert_compiles(
    fn: Any,
    *,
    signature: Mapping[str, str],
    constexprs: Mapping[str, Any] | None = None,
    target: Any = None,
    targets: Any = None,
) -> dict[str, Compiled]:
    """Compile for each target (default :data:`DEFAULT_TARGETS`); fail listing every target that did not."""
    __tracebackhide__ = True
    res = compile_matrix(fn, signature=signature, constexprs=constexprs, targets=_targets_arg(target, targets))
    failure = _not_compiled(_kernel_name(fn), res)
    if failure is not None:
        raise AssertionError(message.format_compile_failure(failure))
    return res  # type: ignore[return-value]


def assert_compile_error(
    fn: Any,
    *,
    signature: Mapping[str, str],
    constexprs: Mapping[str, Any] | None = None,
    match: str,
    target: Any = None,
    targets: Any = None,
    exc_type: type[BaseException] | tuple[type[BaseException], ...] | None = None,
) -> dict[str, BaseException]:
    """Every target must *refuse* the kernel with an error whose :func:`describe_error` text matches the
    regex ``match`` (and is an ``exc_type``, default Triton's ``CompilationError``)."""
    __tracebackhide__ = True
    if not isinstance(match, str) or not match:
        raise ValueError("assert_compile_error: match= must be a non-empty regex string")
    if exc_type is None:
        from triton.compiler.errors import CompilationError  # here: importing this module imports no triton

        exc_type = CompilationError
    res = compile_matrix(fn, signature=signature, constexprs=constexprs, targets=_targets_arg(target, targets))
    failure = _not_refused(_kernel_name(fn), res, match, exc_type)
    if failure is not None:
        raise AssertionError(message.format_compile_failure(failure))
    return res  # type: ignore[return-value]


def _isa(compiled: Compiled, asm: str | None) -> tuple[str, str]:
    __tracebackhide__ = True
    if not isinstance(compiled, Compiled):
        raise TypeError(f"expected a Compiled result (from compile_kernel), got {type(compiled).__name__}")
    key = asm or compiled.isa_key
    if key not in compiled.asm:
        raise ValueError(
            f"{compiled.name}@{compiled.target} has no {key!r} stage; it has {sorted(compiled.asm)}"
        )
    return key, str(compiled.asm[key])


def _related(text: str, pattern: str) -> tuple[str, ...]:
    """Instruction lines sharing the pattern's leading opcode word (e.g. every ``cvt`` line)."""
    m = re.match(r"\\?\.?([A-Za-z_][A-Za-z0-9_]*)", pattern)
    word = m.group(1) if m else ""
    return tuple(ln.strip() for ln in text.splitlines() if word and word in ln)


def assert_ptx_contains(compiled: Compiled, pattern: str, *, asm: str | None = None) -> None:
    """The assembly (PTX by default; ``asm="ttgir"``, ``"llir"``...) has a match for regex ``pattern``."""
    __tracebackhide__ = True
    key, text = _isa(compiled, asm)
    if re.search(pattern, text):
        return
    miss = message.AsmMismatch(compiled.name, compiled.target, key, pattern, "match", _related(text, pattern),
                              len(text.splitlines()))
    raise AssertionError(message.format_asm_mismatch(miss))


def assert_ptx_lacks(compiled: Compiled, pattern: str, *, asm: str | None = None) -> None:
    """The assembly has no match for regex ``pattern``; on failure the matching lines are shown."""
    __tracebackhide__ = True
    key, text = _isa(compiled, asm)
    hits = tuple(ln.strip() for ln in text.splitlines() if re.search(pattern, ln))
    if not hits:
        return
    extra = message.AsmMismatch(compiled.name, compiled.target, key, pattern, "none", hits, len(text.splitlines()))
    raise AssertionError(message.format_asm_mismatch(extra))
