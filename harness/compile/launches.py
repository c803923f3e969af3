"""Launch capture's record of a launch: what one interpreted kernel launch was (:class:`Launch`, built from the
real call), its widened dtype variants (:func:`variants`), the capture of the launches a block of code makes
(:func:`capture`), and the failures a user declares expected (:func:`expect_compile_failure`).

Why: a kernel test on the CPU lane runs the Triton interpreter, which accepts casts no GPU compiler lowers (the
seed bug: a bf16 load cast straight to ``tl.float8e4b15``). Writing compile-matrix tests by hand for every
kernel took 63 of them and undocumented signature strings. Instead, every distinct launch (kernel, argument
types from the actual tensors and scalars, constexpr values, ``num_warps``/``num_stages``) is compiled for the
matrix targets, and so are its *widened* variants: the floating-point tensor arguments in the other source
dtypes (fp16/bf16/fp32, each pointer alone and all together), because the bug is usually in the dtype the test
did not run. Compiling them, with the on-disk cache, is :mod:`harness.compile.disk_cache`; which outcomes are
findings is :mod:`harness.compile.findings`; their text is :mod:`harness.compile.message`.

Capture state (the open capture blocks, the launches that could not be typed, the declarations) belongs to the
running pytest session: it is the session's ``compile_launches`` section, a :class:`CaptureState`. A pytester
session nested in a captured test is current while it runs, so its launches reach none of the outer test's
blocks and its declarations end with it. Outside pytest (``python -m harness compile``, a script) one
process-wide state is used.

Public API: :class:`Launch`, :func:`launch_from_args`, :func:`variants`, :func:`constexpr_text`,
:class:`CaptureState`, :func:`state`, :func:`capture`, :func:`expect_compile_failure`.
"""

from __future__ import annotations

import contextlib
import inspect
import re
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.compile.targets import parse_targets
from harness.interp.jit import as_jit
from harness.session import current

__all__ = [
    "FP8_FORMAT_OF_TYPE",
    "SECTION",
    "WIDEN_DTYPES",
    "CaptureState",
    "Declarations",
    "Launch",
    "capture",
    "constexpr_text",
    "expect_compile_failure",
    "launch_from_args",
    "state",
    "variants",
]

#: The source dtypes a floating-point tensor argument is widened to.
WIDEN_DTYPES: tuple[str, ...] = ("fp16", "bf16", "fp32")
_LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")
#: Triton's FP8 type names (``fp8e4nv``) → the harness's format names (``e4nv``), which the arch model takes.
FP8_FORMAT_OF_TYPE: dict[str, str] = {"fp8e4nv": "e4nv", "fp8e5": "e5m2", "fp8e4b15": "e4b15",
                                      "fp8e4b8": "e4m3fnuz", "fp8e5b16": "e5m2fnuz"}


def _torch_types() -> dict[Any, str]:
    import torch  # on the first typed launch: loading the plugin imports no torch

    out = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32", torch.float64: "fp64",
           torch.int8: "i8", torch.int16: "i16", torch.int32: "i32", torch.int64: "i64", torch.uint8: "u8",
           torch.bool: "i1"}
    for name, ty in (("float8_e4m3fn", "fp8e4nv"), ("float8_e5m2", "fp8e5"), ("float8_e4m3fnuz", "fp8e4b8"),
                     ("float8_e5m2fnuz", "fp8e5b16"), ("uint16", "u16"), ("uint32", "u32"), ("uint64", "u64")):
        if hasattr(torch, name):
            out[getattr(torch, name)] = ty
    return out


@dataclass(frozen=True)
class Launch:
    """One distinct launch: what :func:`harness.compile.matrix.compile_matrix` needs to compile it again."""

    kernel: str  # "module.qualname"
    file: str
    signature: tuple[tuple[str, str], ...]
    constexprs: tuple[tuple[str, Any], ...]
    options: tuple[tuple[str, int], ...] = ()
    fn: Any = field(default=None, compare=False, hash=False, repr=False)

    @property
    def sig(self) -> dict[str, str]:
        return dict(self.signature)

    def sig_text(self) -> str:
        """``x_ptr=*bf16, n=i32`` — the form ``python -m harness compile --sig`` takes."""
        return ", ".join(f"{k}={v}" for k, v in self.signature)

    def float_pointers(self) -> list[str]:
        return [k for k, v in self.signature if v.lstrip("*") in WIDEN_DTYPES and v.startswith("*")]

    def fp8_formats(self) -> set[str]:
        """FP8 formats this launch names through pointer types or ``tl.dtype`` constexprs."""
        out = {FP8_FORMAT_OF_TYPE[v.lstrip("*")] for _, v in self.signature if v.lstrip("*") in FP8_FORMAT_OF_TYPE}
        for _, v in self.constexprs:
            name = getattr(v, "name", None)
            if isinstance(name, str) and name in FP8_FORMAT_OF_TYPE:
                out.add(FP8_FORMAT_OF_TYPE[name])
        return out

    def config_key(self) -> tuple[Any, ...]:
        """What makes two launches the same configuration for capture: kernel, argument types, options and
        every constexpr except integers other than 0 and 1. Why: integer constexprs are overwhelmingly sizes
        (``BLOCK``, ``HEAD_DIM``, ``PAGE``) that a suite sweeps over and that never change how a dtype lowers,
        while 0/1 flags and every other value (``tl.dtype``, floats, bools, strings) select code paths. An
        enum constexpr with values above 1 is collapsed too: ``--harness-compile-all-configs`` keeps every one.
        """
        consts = tuple((k, "<int>" if _is_size(v) else constexpr_text(v)) for k, v in self.constexprs)
        return (self.kernel, self.file, self.signature, consts, self.options)

    def with_types(self, changes: Mapping[str, str]) -> Launch:
        sig = tuple((k, changes.get(k, v)) for k, v in self.signature)
        return Launch(self.kernel, self.file, sig, self.constexprs, self.options, self.fn)


def _is_size(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v not in (0, 1)


def constexpr_text(v: Any) -> str:
    """A constexpr as ``python -m harness compile --const`` reads it back: a ``tl.<attribute>`` for dtypes (the
    attribute, ``tl.float8e5``, not the dtype's own name ``fp8e5``, which ``triton.language`` lacks)."""
    name = getattr(v, "name", None)
    if not (isinstance(name, str) and type(v).__name__ == "dtype"):
        return repr(v)
    import triton.language as tl  # only for a tl.dtype value, which means triton is loaded already

    attrs = sorted(a for a in dir(tl) if not a.startswith("_") and type(getattr(tl, a, None)) is type(v)
                   and getattr(tl, a) == v)
    return f"tl.{name if name in attrs else (attrs[0] if attrs else name)}"


# --- building a Launch from a real call --------------------------------------------------------------------


def launch_from_args(fn: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Launch:
    """The :class:`Launch` for ``fn[grid](*args, **kwargs)``; ``ValueError`` for an argument it cannot type."""
    jit = as_jit(fn)
    pyfn = jit.fn
    opts = tuple(sorted((k, int(kwargs[k])) for k in _LAUNCH_OPTIONS if kwargs.get(k) is not None))
    call_kwargs = {k: v for k, v in kwargs.items() if k not in _LAUNCH_OPTIONS}
    bound = inspect.signature(pyfn).bind(*args, **call_kwargs)
    bound.apply_defaults()
    is_cexpr = {p.name: bool(p.is_constexpr) for p in jit.params}
    types = _torch_types()
    sig: list[tuple[str, str]] = []
    consts: list[tuple[str, Any]] = []
    for name in jit.arg_names:
        v = bound.arguments.get(name)
        if is_cexpr.get(name) or v is None:
            consts.append((name, v))
        elif hasattr(v, "dtype") and hasattr(v, "data_ptr"):
            ty = types.get(v.dtype)
            if ty is None:
                raise ValueError(f"{jit.__name__}: argument {name!r} has dtype {v.dtype}, which has no Triton type")
            sig.append((name, "*" + ty))
        elif isinstance(v, bool):
            sig.append((name, "i1"))
        elif isinstance(v, int):
            sig.append((name, "i32" if -(2**31) <= v < 2**31 else "i64"))
        elif isinstance(v, float):
            sig.append((name, "fp32"))
        else:
            raise ValueError(f"{jit.__name__}: argument {name!r} is a {type(v).__name__}, which has no Triton type")
    module = getattr(pyfn, "__module__", "") or ""
    kernel = f"{module}.{pyfn.__qualname__}" if module else pyfn.__qualname__
    return Launch(kernel, inspect.getsourcefile(pyfn) or "", tuple(sig), tuple(consts), opts, fn)


def variants(launch: Launch) -> list[tuple[str, Launch]]:
    """Widened variants: each floating-point tensor argument alone in each other source dtype, then all of
    them together in each source dtype; ``(label, launch)`` with labels like ``key_ptr=bf16`` / ``all=bf16``;
    duplicates of the launch or of each other dropped."""
    ptrs = launch.float_pointers()
    out: list[tuple[str, Launch]] = []
    seen = {launch.signature}
    for p in ptrs:
        for d in WIDEN_DTYPES:
            v = launch.with_types({p: "*" + d})
            if v.signature not in seen:
                seen.add(v.signature)
                out.append((f"{p}={d}", v))
    if len(ptrs) > 1:
        for d in WIDEN_DTYPES:
            v = launch.with_types({p: "*" + d for p in ptrs})
            if v.signature not in seen:
                seen.add(v.signature)
                out.append((f"all={d}", v))
    return out




# --- capture and declarations: per session -----------------------------------------------------------------

#: The name of the session section that holds a session's :class:`CaptureState` (and capture's report).
SECTION = "compile_launches"


@dataclass(frozen=True)
class _Declared:
    kernel: str
    targets: tuple[str, ...]  # empty: every target
    match: re.Pattern[str]
    reason: str


class Declarations:
    """The failures declared with :func:`expect_compile_failure`: skipped in the capture report, not failed."""

    def __init__(self) -> None:
        self._items: list[_Declared] = []

    def add(self, kernel: str, targets: tuple[str, ...], match: str, reason: str) -> None:
        self._items.append(_Declared(kernel, targets, re.compile(match), reason))

    def reason(self, launch: Launch, target: str, error_line: str) -> str | None:
        """Why this failure was declared expected (a declaration names the kernel in full or by its short name),
        or ``None``."""
        short = launch.kernel.rsplit(".", 1)[-1]
        for d in self._items:
            if d.kernel in (launch.kernel, short) and (not d.targets or target in d.targets) \
                    and d.match.search(error_line):
                return d.reason
        return None


class CaptureState:
    """What launch capture keeps for one session: the open :func:`capture` blocks (the innermost one takes a
    launch), the launches that could not be typed (kernel → why; the summary lists them) and the
    :class:`Declarations`. The harness plugin registers one per pytest session as its ``compile_launches``
    section."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sinks: list[list[Launch]] = []
        self.skipped: dict[str, str] = {}
        self.declarations = Declarations()

    @contextlib.contextmanager
    def capture(self) -> Iterator[list[Launch]]:
        """Record every interpreted kernel launch inside the block (in order, duplicates included); a nested
        block takes the launches made inside it, the outer one does not see them."""
        _install()
        got: list[Launch] = []
        with self._lock:
            self._sinks.append(got)
        try:
            yield got
        finally:
            with self._lock:  # by identity: two blocks' lists may be equal
                del self._sinks[next(i for i, x in enumerate(self._sinks) if x is got)]

    def _sink(self) -> list[Launch] | None:
        with self._lock:
            return self._sinks[-1] if self._sinks else None


_PROCESS = CaptureState()  # outside any pytest session: python -m harness compile, a script


def state() -> CaptureState:
    """The running session's capture state (its ``compile_launches`` section), else the process's own."""
    s = current()
    section = s.sections.get(SECTION) if s is not None else None
    return section if isinstance(section, CaptureState) else _PROCESS


def capture() -> contextlib.AbstractContextManager[list[Launch]]:
    """:meth:`CaptureState.capture` of the running session's state."""
    return state().capture()


def expect_compile_failure(kernel: Any, *targets: str, match: str = "", reason: str = "") -> None:
    """Declare that ``kernel`` (the ``@triton.jit`` object or its name) is known not to compile for
    ``targets`` (all targets when none are given) with an error matching ``match``: those results are skipped
    in the capture report, not failed. Call it next to the kernel or in a conftest; a declaration made in a
    pytest session ends with it."""
    if not reason:
        raise ValueError("expect_compile_failure: reason= must say why the failure is expected")
    name = kernel if isinstance(kernel, str) else getattr(getattr(kernel, "fn", kernel), "__qualname__", None)
    if not isinstance(name, str) or not name:
        raise TypeError(f"expect_compile_failure: kernel must be a @triton.jit kernel or its name, got {kernel!r}")
    names = tuple(t.name for t in parse_targets(targets)) if targets else ()
    state().declarations.add(name, names, match, reason)


def _install() -> None:
    """Wrap the interpreter's launch once per process; the wrapper hands each launch to the current session's
    innermost capture block, if any. Why wrap ``run``: it is the one call every interpreted launch makes, with
    the arguments as given."""
    from triton.runtime import interpreter as itp  # on first capture only: loading the plugin imports no triton

    cls = itp.InterpretedFunction
    orig = cls.run
    if getattr(orig, "_harness_capture", False):
        return

    def run(self: Any, *args: Any, grid: Any, warmup: Any, **kwargs: Any) -> Any:
        st = state()
        sink = st._sink()
        if sink is not None and not warmup:
            try:
                launch = launch_from_args(self, args, kwargs)
            except Exception as e:  # never break the test over capture; say so in the summary
                st.skipped[getattr(self, "__name__", "?")] = f"{type(e).__name__}: {e}"
            else:
                sink.append(launch)
        return orig(self, *args, grid=grid, warmup=warmup, **kwargs)

    run._harness_capture = True  # type: ignore[attr-defined]
    cls.run = run
