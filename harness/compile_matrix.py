"""Ahead-of-time compilation of a ``@triton.jit`` kernel for GPU targets this machine does not have.

Why: most low-precision bugs that matter are *compile-time* facts of a target (``fp8e4nv`` is refused
below sm89; a bf16 → e4b15 cast does not lower anywhere), and ``triton.compile(ASTSource(...),
target=GPUTarget(...))`` exposes them on a CPU-only box, including under ``TRITON_INTERPRET=1`` (the
interpreted kernel is rebuilt as a ``JITFunction`` first). Results are cached per process because the
matrix is the slow part of the CPU lane.

Public API: :data:`DEFAULT_TARGETS`, :func:`parse_target`, :func:`compile_kernel`, :func:`compile_matrix`,
:func:`assert_compiles`, :func:`assert_compile_error`, :func:`assert_ptx_contains`,
:func:`assert_ptx_lacks`, :func:`describe_error`, :func:`stats`.
"""

from __future__ import annotations

import contextlib
import functools
import io
import re
import threading
import time
import traceback
import types
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.arch import parse_arch

__all__ = [
    "DEFAULT_TARGETS",
    "ROCM_TARGETS",
    "Target",
    "Compiled",
    "parse_target",
    "target_available",
    "target_supported",
    "check_targets",
    "error_line",
    "error_kind",
    "TYPE_STRINGS",
    "compile_kernel",
    "compile_matrix",
    "assert_compiles",
    "assert_compile_error",
    "assert_ptx_contains",
    "assert_ptx_lacks",
    "describe_error",
    "fix_interpreter_leak",
    "stats",
    "clear_cache",
]

#: CUDA targets compiled by default: Turing through Blackwell consumer, one per FP8-relevant step.
DEFAULT_TARGETS: tuple[str, ...] = ("sm75", "sm80", "sm86", "sm89", "sm90", "sm100", "sm120")
#: ROCm targets that can be named explicitly (not in the default list: the AMD backend may be absent).
ROCM_TARGETS: tuple[str, ...] = ("gfx942",)


@dataclass(frozen=True)
class Target:
    """A target: ``sm90`` → ``GPUTarget("cuda", 90, 32)``, ``gfx942`` → ``GPUTarget("hip", "gfx942", 64)``."""

    name: str
    backend: str
    arch: int | str
    warp_size: int

    @property
    def cc(self) -> int | None:
        """CUDA capability as one number (90), ``None`` for ROCm."""
        return self.arch if self.backend == "cuda" else None  # type: ignore[return-value]

    def gpu_target(self) -> Any:
        from triton.backends.compiler import GPUTarget

        return GPUTarget(self.backend, self.arch, self.warp_size)

    def __str__(self) -> str:
        return self.name


def parse_target(spec: str | Target | Any) -> Target:
    """``"sm90"``, ``"sm_90"``, ``"90"``, ``"gfx942"``, an :class:`~harness.arch.Arch` or a Target."""
    if isinstance(spec, Target):
        return spec
    name = getattr(spec, "name", None) if not isinstance(spec, str) else spec
    if not isinstance(name, str):
        raise TypeError(f"target must be a str such as 'sm90' or 'gfx942', got {type(spec).__name__}")
    try:
        arch = parse_arch(name)
    except ValueError:
        raise ValueError(
            f"target {spec!r} is not understood; expected 'smXY' (e.g. 'sm90', 'sm_89', '120') or 'gfxNNN' "
            f"(e.g. 'gfx942')"
        ) from None
    if arch.kind == "cuda":
        return Target(arch.name, "cuda", arch.cc, 32)  # type: ignore[arg-type]
    if arch.kind == "rocm":
        return Target(arch.name, "hip", arch.name, 64)
    raise ValueError(f"target {spec!r}: {arch.name!r} is not a GPU target; expected 'smXY' or 'gfxNNN'")


def parse_targets(specs: str | Iterable[Any]) -> tuple[Target, ...]:
    """A comma-separated string or an iterable of target specs, duplicates dropped, order kept."""
    if isinstance(specs, str):
        specs = [s for s in (p.strip() for p in specs.split(",")) if s]
    out: dict[str, Target] = {}
    for s in specs:
        t = parse_target(s)
        out.setdefault(t.name, t)
    if not out:
        raise ValueError("targets: need at least one target, e.g. 'sm80,sm90'")
    return tuple(out.values())


@functools.cache
def target_available(target: Target) -> tuple[bool, str]:
    """Whether this Triton install has the backend for ``target``; the reason is a ready skip message."""
    from triton.backends import backends

    wanted = "nvidia" if target.backend == "cuda" else "amd"
    if wanted not in backends:
        return False, f"triton {_triton_version()} has no {wanted} backend here (needed for {target.name})"
    return True, ""


def _triton_version() -> str:
    import triton

    return triton.__version__


@functools.cache
def _ptxas_archs(path: str) -> frozenset[str] | None:
    """The ``--gpu-name`` values ptxas at ``path`` accepts (``sm_90a``...), read from its ``--help``; ``None``
    when it cannot be run (then nothing is refused up front)."""
    import subprocess

    try:
        out = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"--gpu-name\b(.*?)(?:\n\s*--[a-z])", out, re.S)
    names = re.findall(r"'(sm_\d+[a-z]?)'", m.group(1) if m else "")
    return frozenset(names) or None


def _cuda_supported(cc: int) -> tuple[bool, str]:
    try:
        from triton.backends.nvidia import compiler as nv

        tool = nv.get_ptxas(cc)
        name = nv.sm_arch_from_capability(cc)
        path = tool.path
    except Exception:  # pragma: no cover - a Triton whose NVIDIA backend looks different: do not guess
        return True, ""
    archs = _ptxas_archs(path)
    if archs is None or name in archs:
        return True, ""
    known = sorted({int(a[3:].rstrip("abcdef")) for a in archs})
    return False, (
        f"triton {_triton_version()} cannot compile for sm{cc}: the ptxas it uses for that target "
        f"({path.rsplit('/', 1)[-1]}) does not accept {name}; it accepts sm{', sm'.join(map(str, known))}"
    )


def _hip_supported(arch: str) -> tuple[bool, str]:
    from triton._C.libtriton import amd

    bad = f"triton {_triton_version()}'s LLVM does not know the AMD GPU {arch!r}"
    if hasattr(amd, "get_target_triple"):  # Triton 3.7+: LLVM's own parser, raises on an unknown processor
        try:
            amd.get_target_triple(arch)
        except Exception as e:
            return False, f"{bad} ({e})"
        return True, ""
    return _hip_supported_via_llvm(arch, bad)


def _hip_supported_via_llvm(arch: str, bad: str) -> tuple[bool, str]:
    """Older Triton: ask LLVM's AMDGPU target about the processor and read its complaint from stderr."""
    import os
    import tempfile

    try:
        from triton._C.libtriton import amd, llvm

        llvm.init_targets()
        probe = amd.has_architected_sgprs
    except Exception:  # pragma: no cover
        return True, ""
    with tempfile.TemporaryFile() as err:
        saved = os.dup(2)
        try:
            os.dup2(err.fileno(), 2)
            probe(arch)
        except Exception:
            pass
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        err.seek(0)
        text = err.read().decode(errors="replace")
    if "not a recognized processor" in text:
        return False, bad
    return True, ""


@functools.cache
def target_supported(target: Target) -> tuple[bool, str]:
    """Whether the installed Triton can compile for ``target`` at all (its backend is here and knows the
    processor). Why: an unknown target (``sm91``, ``gfx000``) otherwise reaches LLVM or ptxas, and LLVM may
    abort the whole Python process. Derived from the installed Triton: the ``--gpu-name`` list of the ptxas
    its NVIDIA backend picks for the capability, or the AMD backend's LLVM."""
    ok, reason = target_available(target)
    if not ok:
        return ok, reason
    if target.backend == "cuda":
        return _cuda_supported(int(target.arch))
    return _hip_supported(str(target.arch))


def check_targets(targets: Iterable[Target]) -> None:
    """``ValueError`` naming every target the installed Triton cannot compile for (before any compile)."""
    bad = [reason for t in targets for ok, reason in [target_supported(t)] if not ok and _backend_here(t)]
    if bad:
        raise ValueError("targets: " + "; ".join(bad))


def _backend_here(t: Target) -> bool:
    return target_available(t)[0]


@dataclass(frozen=True)
class Compiled:
    """One successful compile: the assembly stages by name (``ptx``, ``cubin``, ``amdgcn``...)."""

    target: str
    name: str
    asm: Mapping[str, Any] = field(repr=False)
    seconds: float = 0.0
    kernel: Any = field(repr=False, compare=False, default=None)

    @property
    def isa_key(self) -> str:
        """The readable assembly stage for this target: ``ptx`` (CUDA) or ``amdgcn`` (ROCm)."""
        return "ptx" if "ptx" in self.asm else "amdgcn"

    @property
    def ptx(self) -> str:
        """The PTX text (or AMDGCN on ROCm)."""
        return str(self.asm[self.isa_key])


# --- the interpreter's leaked language patch -------------------------------------------------------------

_LEAK_FIX_LOCK = threading.Lock()


def fix_interpreter_leak() -> None:
    """Make interpreted device-function calls undo their patch of ``triton.language``.

    Triton 3.6–3.9: ``InterpretedFunction.__call__`` (the interpreter calling a ``@jit`` helper, e.g.
    ``tl.sum`` or ``tl.zeros_like``) patches ``tl`` builtins for the interpreter and never restores them, so
    every later ``triton.compile`` in the process fails ("'value' object has no attribute 'dtype'"). The
    wrapper below restores that call's own patch on return (inside a running grid that is the grid's patch,
    so interpretation is unchanged). Installed when this module is imported and by the pytest hooks at
    session start; idempotent."""
    with _LEAK_FIX_LOCK:
        try:
            from triton.runtime import interpreter as itp
        except ImportError:  # pragma: no cover
            return
        cls = itp.InterpretedFunction
        orig = cls.__call__
        patch = getattr(itp, "_patch_lang", None)
        if getattr(orig, "_harness_restores", False) or patch is None:
            return
        try:
            import inspect

            body = inspect.getsource(orig)
        except (OSError, TypeError):  # pragma: no cover
            return
        if "_patch_lang(self.fn)" not in body or "self.rewrite()" not in body:
            return  # a Triton whose device call looks different: leave it alone

        def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
            scope = patch(self.fn)
            try:
                return self.rewrite()(*args, **kwargs)
            except Exception as e:
                raise itp.InterpreterError(repr(e)) from e
            finally:
                restore = getattr(scope, "restore", None)
                if restore is not None:
                    restore()

        __call__._harness_restores = True  # type: ignore[attr-defined]
        cls.__call__ = __call__


def _language_patched() -> bool:
    """Whether ``triton.language`` still holds the interpreter's builtins (a leak from before the fix)."""
    try:
        import triton.language as tl
        from triton.runtime import interpreter as itp
    except ImportError:  # pragma: no cover
        return False
    code = getattr(tl.load, "__code__", None)
    return code is not None and code.co_filename == itp.__file__


fix_interpreter_leak()


# --- kernel normalisation ---------------------------------------------------------------------------------


def _jit_class() -> Any:
    from triton.runtime.jit import JITFunction

    return JITFunction


def _interp_class() -> Any:
    try:
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:  # pragma: no cover - every supported triton has it
        return ()
    return InterpretedFunction


_CONVERT_LOCK = threading.RLock()
_CONVERTED: dict[int, tuple[Any, Any]] = {}  # id(python function) -> (function, JITFunction)
_GLOBALS: dict[int, tuple[dict[str, Any], dict[str, Any]]] = {}  # id(module globals) -> (original, rebuilt)


def _as_jit(fn: Any) -> Any:
    """A ``JITFunction`` for ``fn``. An ``InterpretedFunction`` (``TRITON_INTERPRET=1``) is rebuilt from its
    Python function, and so are the ``@triton.jit`` helpers it calls through module globals: the code
    generator rejects interpreted callees ("Unsupported function referenced"). Helpers reached any other way
    (a closure, ``module.helper``) are not rebuilt."""
    JIT = _jit_class()
    if isinstance(fn, JIT):
        return fn
    if isinstance(fn, _interp_class()):
        with _CONVERT_LOCK:
            return _jit_for(fn)
    raise TypeError(
        f"fn must be a @triton.jit kernel (JITFunction or InterpretedFunction), got {type(fn).__name__}"
    )


def _jit_for(interp: Any) -> Any:
    pyfn = interp.fn
    hit = _CONVERTED.get(id(pyfn))
    if hit is not None:
        return hit[1]
    g = pyfn.__globals__
    new_fn = pyfn
    if any(
        isinstance(v, _interp_class()) or (isinstance(v, types.ModuleType) and _proxy_module(v) is not v)
        for v in g.values()
    ):
        g2 = _rebuilt_globals(g)
        hit = _CONVERTED.get(id(pyfn))  # converting the module may have reached this very function
        if hit is not None:
            return hit[1]
        new_fn = types.FunctionType(pyfn.__code__, g2, pyfn.__name__, pyfn.__defaults__, pyfn.__closure__)
        new_fn.__kwdefaults__ = pyfn.__kwdefaults__
        new_fn.__annotations__ = pyfn.__annotations__  # tl.constexpr lives here
        new_fn.__dict__.update(pyfn.__dict__)
        new_fn.__qualname__, new_fn.__module__, new_fn.__doc__ = (
            pyfn.__qualname__,
            pyfn.__module__,
            pyfn.__doc__,
        )
    JIT = _jit_class()
    kwargs = getattr(interp, "kwargs", None) or {}
    try:
        jit = JIT(new_fn, **kwargs)
    except TypeError:  # a jit option this triton's JITFunction does not take
        jit = JIT(new_fn)
    _CONVERTED[id(pyfn)] = (pyfn, jit)
    return jit


def _rebuilt_globals(g: dict[str, Any]) -> dict[str, Any]:
    """A copy of a module's globals with every interpreted kernel replaced by its JITFunction, and every
    module that holds interpreted kernels (``tl``: ``tl.sum``, ``tl.zeros_like`` are ``@jit`` functions of
    triton.language.standard) replaced by a proxy that holds JITFunctions. Registered before filling, so
    mutually referring helpers terminate."""
    hit = _GLOBALS.get(id(g))
    if hit is not None:
        return hit[1]
    g2 = dict(g)
    _GLOBALS[id(g)] = (g, g2)
    for k, v in g.items():
        if isinstance(v, _interp_class()):
            g2[k] = _jit_for(v)
        elif isinstance(v, types.ModuleType):
            g2[k] = _proxy_module(v)
    return g2


_MODULES: dict[int, tuple[types.ModuleType, types.ModuleType]] = {}


def _proxy_module(m: types.ModuleType) -> types.ModuleType:
    """``m`` itself when it holds no interpreted kernels (directly or in its triton.language submodules),
    else a module object with the same attributes but JITFunctions in their place."""
    hit = _MODULES.get(id(m))
    if hit is not None:
        return hit[1]
    Interp = _interp_class()
    attrs = vars(m)
    name = getattr(m, "__name__", "")
    deep = name.startswith("triton.language")  # recurse only through Triton's own language package
    subs = {
        k: v
        for k, v in attrs.items()
        if deep and isinstance(v, types.ModuleType) and getattr(v, "__name__", "").startswith(name + ".")
    }
    interp = {k: v for k, v in attrs.items() if isinstance(v, Interp)}
    if not interp and not subs:
        _MODULES[id(m)] = (m, m)
        return m
    proxy = types.ModuleType(name, getattr(m, "__doc__", None))
    proxy.__dict__.update(attrs)
    _MODULES[id(m)] = (m, proxy)
    for k, v in interp.items():
        setattr(proxy, k, _jit_for(v))
    for k, v in subs.items():
        setattr(proxy, k, _proxy_module(v))
    if not interp and all(getattr(proxy, k) is v for k, v in subs.items()):
        _MODULES[id(m)] = (m, m)
        return m
    return proxy


# --- signature / constexpr checking -----------------------------------------------------------------------

#: The element type names Triton's signature strings use. A pointer is ``*`` + a name (``*fp16``; ``*k`` +
#: name for a const pointer); a scalar argument is a name (``i32``, ``fp32``). FP8 is spelled Triton's way:
#: ``fp8e4nv`` (= float8_e4m3fn), ``fp8e5`` (= float8_e5m2), ``fp8e4b15`` (Triton's bias-15 e4m3),
#: ``fp8e4b8`` / ``fp8e5b16`` (ROCm's fnuz pair).
TYPE_STRINGS: tuple[str, ...] = (
    "i1", "i8", "i16", "i32", "i64", "u1", "u8", "u16", "u32", "u64",
    "fp16", "bf16", "fp32", "fp64", "fp8e4nv", "fp8e5", "fp8e4b15", "fp8e4b8", "fp8e5b16",
)


def _type_hint(name: str) -> str:
    """``fp8_e4m3`` → `` (did you mean '*fp8e4nv'?)``: common spellings of FP8 formats and torch dtypes."""
    bare = name.lstrip("*").removeprefix("k")
    guess = None
    try:
        from harness.fp8 import get_format

        fmt = get_format(bare.removeprefix("fp8").removeprefix("float8").lstrip("_"))
        guess = fmt.triton_name.replace("float8", "fp8")
    except (ValueError, TypeError, ImportError):
        aliases = {"float16": "fp16", "half": "fp16", "bfloat16": "bf16", "float32": "fp32", "float": "fp32",
                   "float64": "fp64", "int32": "i32", "int64": "i64", "int8": "i8", "uint8": "u8", "bool": "i1",
                   "int16": "i16"}
        guess = aliases.get(bare.removeprefix("torch.").removeprefix("tl."))
    if guess is None:
        return ""
    return f" (did you mean {('*' if name.startswith('*') else '') + guess!r}?)"


_TYPE_RE = re.compile(r"(\*k?)?([a-z0-9]+)")


def _check_type(kernel: str, arg: str, ty: str) -> None:
    """One pointer level at most (``**fp16`` passes Triton's parser and then aborts the process in LLVM)."""
    from triton.language import str_to_ty

    m = _TYPE_RE.fullmatch(ty)
    ok = ty.lstrip("*").startswith("tensordesc") or (m is not None and m.group(2) in TYPE_STRINGS)
    if ok:
        try:
            str_to_ty(ty, None)
        except (KeyError, IndexError, ValueError, AssertionError, AttributeError):
            ok = False
    if not ok:
        raise ValueError(
            f"{kernel}: signature[{arg!r}] = {ty!r} is not a Triton type string{_type_hint(ty)}; expected a "
            f"pointer '*' + element type or a scalar type, one of {', '.join(TYPE_STRINGS)} (e.g. '*fp16', "
            f"'*fp8e4nv', 'i32')"
        )


_CONSTEXPR_TYPES = (bool, int, float, str, type(None))


def _check_constexpr(kernel: str, arg: str, value: Any) -> None:
    """A constexpr value the code generator can take: a Python scalar, a string, ``None``, a ``tl.dtype``,
    a ``@triton.jit`` function or a tuple of these. A torch dtype or a tensor is the usual slip."""
    import triton.language as tl

    if isinstance(value, (list, tuple)):
        for v in value:
            _check_constexpr(kernel, arg, v)
        return
    if isinstance(value, _CONSTEXPR_TYPES) or isinstance(value, (tl.dtype, tl.constexpr)):
        return
    if isinstance(value, (_jit_class(), _interp_class())) or callable(getattr(value, "fn", None)):
        return
    hint = ""
    if type(value).__module__ == "torch" and type(value).__name__ == "dtype":
        hint = f" (a torch dtype: pass the Triton one, e.g. tl.{str(value).removeprefix('torch.')} or tl.float8e4nv)"
    raise ValueError(
        f"{kernel}: constexprs[{arg!r}] = {value!r} ({type(value).__name__}) is not a constexpr value{hint}; "
        f"expected bool, int, float, str, None, a tl.dtype, a @triton.jit function or a tuple of these"
    )


def _normalise(
    jit: Any, signature: Mapping[str, str], constexprs: Mapping[str, Any] | None
) -> tuple[dict[str, str], dict[str, Any]]:
    if not isinstance(signature, Mapping):
        raise TypeError(
            f"signature must be a dict of argument name -> type string, got {type(signature).__name__}"
        )
    constexprs = dict(constexprs or {})
    names = list(jit.arg_names)
    is_cexpr = {p.name: bool(p.is_constexpr) for p in jit.params}
    kernel = jit.__name__
    unknown = [k for k in list(signature) + list(constexprs) if k not in names]
    if unknown:
        raise ValueError(f"{kernel}: unknown argument(s) {sorted(set(unknown))}; the kernel takes {names}")
    for k, v in signature.items():
        if not isinstance(v, str) or not v:
            raise ValueError(
                f"{kernel}: signature[{k!r}] must be a type string like '*fp16' or 'i32', got {v!r}"
            )
        if v == "constexpr" and k not in constexprs:
            raise ValueError(f"{kernel}: signature[{k!r}] is 'constexpr' but constexprs has no value for it")
        if v != "constexpr":
            _check_type(kernel, k, v)
    for k, v in constexprs.items():
        _check_constexpr(kernel, k, v)
    sig: dict[str, str] = {}
    missing = []
    for n in names:
        if n in constexprs:
            sig[n] = "constexpr"
        elif n in signature:
            if is_cexpr.get(n):
                raise ValueError(
                    f"{kernel}: {n!r} is tl.constexpr; give its value in constexprs=, not a type"
                )
            sig[n] = signature[n]
        else:
            missing.append(n)
    if missing:
        raise ValueError(f"{kernel}: no type (signature=) or value (constexprs=) for argument(s) {missing}")
    return sig, constexprs


def _freeze(value: Any) -> Any:
    """A hashable, value-based cache key for a constexpr value."""
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_freeze(v) for v in value))
    if isinstance(value, (bool, int, float, str, type(None))):
        return (type(value).__name__, value)
    return (type(value).__name__, repr(value))


# --- compiling ----------------------------------------------------------------------------------------------


@dataclass
class _Stats:
    compiles: int = 0
    failures: int = 0
    ptxas: int = 0
    hits: int = 0
    seconds: float = 0.0
    slowest: float = 0.0

    def as_dict(self) -> dict[str, float]:
        return {
            "compiles": self.compiles,
            "failures": self.failures,
            "ptxas": self.ptxas,
            "hits": self.hits,
            "seconds": round(self.seconds, 4),
            "slowest": round(self.slowest, 4),
        }


_STATS = _Stats()
_CACHE: dict[tuple[Any, ...], Compiled | BaseException] = {}
_CACHE_LOCK = threading.Lock()


def stats() -> dict[str, float]:
    """Compiles done in this process (not cache hits), failures among them, cache hits, total and slowest
    seconds — what the compile-matrix summary line reports."""
    return _STATS.as_dict()


def clear_cache() -> None:
    """Forget cached results (and the counters), e.g. to time a cold compile."""
    with _CACHE_LOCK:
        _CACHE.clear()
        _STATS.__init__()  # type: ignore[misc]


def _compile_cached(
    jit: Any, sig: dict[str, str], consts: dict[str, Any], target: Target, options: Mapping[str, Any] | None = None
) -> Compiled | BaseException:
    opts = dict(options or {})
    key = (jit, tuple(sig.items()), tuple((k, _freeze(v)) for k, v in sorted(consts.items())), target,
           tuple(sorted(opts.items())))
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
        if hit is not None:
            _STATS.hits += 1
            return hit
    import triton
    from triton.compiler import ASTSource

    _latch_fp8_lowering_low(target)
    if _language_patched():
        raise RuntimeError(
            "triton.language is still patched by the Triton interpreter (an interpreted device-function call "
            "ran before harness.compile_matrix was imported); import harness.compile_matrix (or run under "
            "the "
            "harness pytest plugin) before running interpreted kernels"
        )
    t0 = time.perf_counter()
    try:
        # On a ptxas failure Triton prints the whole PTX to stdout; the error itself keeps the ptxas lines.
        with contextlib.redirect_stdout(io.StringIO()):
            ck = triton.compile(ASTSource(jit, sig, consts), target=target.gpu_target(), options=opts or None)
        result: Compiled | BaseException = Compiled(
            target=target.name,
            name=jit.__name__,
            asm=dict(ck.asm),
            seconds=time.perf_counter() - t0,
            kernel=ck,
        )
    except Exception as e:  # compile errors are results here, not crashes
        result = e
    dt = time.perf_counter() - t0
    with _CACHE_LOCK:
        _STATS.compiles += 1
        _STATS.failures += isinstance(result, BaseException) and error_kind(result) != "ptxas"
        _STATS.ptxas += isinstance(result, BaseException) and error_kind(result) == "ptxas"
        _STATS.seconds += dt
        _STATS.slowest = max(_STATS.slowest, dt)
        _CACHE[key] = result
    return result


_LATCHED = False


def _latch_fp8_lowering_low(first: Target) -> None:
    """Triton 3.6 (measured; fixed by 3.9): the fp16/fp32 → e5m2 lowering is chosen by the capability of the
    *first* e5m2 compile in the process and kept for every later target, so after any sm89+ compile an sm80
    compile emits ``cvt ... e5m2x2`` and ptxas refuses it ("requires .target sm_89"), a false failure. The
    lowest choice (the software path) is valid on every target, so compile one e5m2 cast for sm75 first."""
    global _LATCHED
    if _LATCHED or first.backend != "cuda":
        return
    _LATCHED = True
    from harness.arch import _triton_at_least

    if _triton_at_least(3, 7):
        return
    import triton
    from triton.compiler import ASTSource

    low = parse_target("sm75")
    if not target_supported(low)[0]:  # pragma: no cover
        return
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            triton.compile(ASTSource(_e5m2_latch_kernel(), {"x": "*fp32", "y": "*u8"}, {}),
                           target=low.gpu_target())
    except Exception:  # pragma: no cover - the workaround is best effort; the real compile reports itself
        pass


@functools.cache
def _e5m2_latch_kernel() -> Any:
    import triton.language as tl

    def latch_e5m2(x, y):
        o = tl.arange(0, 32)
        tl.store(y + o, tl.load(x + o).to(tl.float8e5).to(tl.uint8, bitcast=True))

    return _jit_class()(latch_e5m2)


def _prepare(
    fn: Any, signature: Mapping[str, str], constexprs: Mapping[str, Any] | None
) -> tuple[Any, dict[str, str], dict[str, Any]]:
    jit = _as_jit(fn)
    sig, consts = _normalise(jit, signature, constexprs)
    return jit, sig, consts


def _check_available(t: Target) -> None:
    ok, reason = target_available(t)
    if not ok:
        raise RuntimeError(reason)


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
    jit, sig, consts = _prepare(fn, signature, constexprs)
    t = parse_target(target)
    _check_available(t)
    check_targets([t])
    r = _compile_cached(jit, sig, consts, t)
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
) -> dict[str, Compiled | Exception]:
    """Compile for every target; each entry is the :class:`Compiled` result or the exception it raised.

    Bad arguments (unknown target, wrong signature) raise ``ValueError`` up front, before any compile.
    ``options`` are Triton compile options (``num_warps``, ``num_stages``).
    """
    jit, sig, consts = _prepare(fn, signature, constexprs)
    ts = parse_targets(targets)
    check_targets(ts)
    out: dict[str, Compiled | Exception] = {}
    for t in ts:
        ok, reason = target_available(t)
        out[t.name] = _compile_cached(jit, sig, consts, t, options) if ok else RuntimeError(reason)  # type: ignore[assignment]
    return out


# --- describing and asserting -----------------------------------------------------------------------------


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
    """``"ptxas"`` when ptxas rejected the PTX Triton generated (a codegen fault, not a refusal by the
    frontend), ``"refused"`` for every other compile error."""
    e: BaseException | None = exc
    seen: set[int] = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if type(e).__name__ == "PTXASError" or "`ptxas` stderr" in str(e):
            return "ptxas"
        e = e.__cause__ or e.__context__
    return "refused"


_PTXAS_ERR = re.compile(r"^ptxas\s+(?:\S+?\.ptx)?,?\s*(line \d+);?\s*error\s*:\s*(.*)$", re.M)


def error_line(exc: BaseException) -> str:
    """The compiler's own reason in one line: ptxas's first ``error`` line (temp file name dropped), the
    frontend's "... not supported ..." message, or the failing assert of a lowering helper."""
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
        why = [ln.removeprefix("caused by ").strip() for ln in lines[at + 1:] if ln.strip()]
        head = next((ln for ln in lines[:at] if "not supported" in ln or "Error" in ln and ln is not lines[0]), "")
        reason = " | ".join(x for x in [head.strip(), *why[-1:]] if x)
        return f"{where} `{lines[at - 1].strip()}`" + (f": {reason}" if reason else "")
    return _one_line(exc)


def _one_line(exc: BaseException) -> str:
    if error_kind(exc) == "ptxas":
        m = _PTXAS_ERR.search(describe_error(exc))
        if m:
            return error_line(exc)
    text = describe_error(exc)
    lines = [ln for ln in text.splitlines() if ln.strip() and ln.strip() != "^"]
    key = [ln for ln in lines if "not supported" in ln or ln.startswith("caused by") or "Error" in ln]
    return " | ".join((key or lines)[-2:])[:300]


def _targets_arg(target: Any, targets: Any) -> Any:
    if target is not None and targets is not None:
        raise ValueError("give target= or targets=, not both")
    if target is not None:
        return [target]
    return DEFAULT_TARGETS if targets is None else targets


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
    res = compile_matrix(
        fn, signature=signature, constexprs=constexprs, targets=_targets_arg(target, targets)
    )
    bad = {t: r for t, r in res.items() if isinstance(r, BaseException)}
    if bad:
        name = getattr(fn, "__name__", "kernel")
        lines = [f"{name} failed to compile for {len(bad)} / {len(res)} target(s):"]
        lines += [f"  {t}: {_one_line(e)}" for t, e in bad.items()]
        raise AssertionError("\n".join(lines))
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
        from triton.compiler.errors import CompilationError

        exc_type = CompilationError
    res = compile_matrix(
        fn, signature=signature, constexprs=constexprs, targets=_targets_arg(target, targets)
    )
    name = getattr(fn, "__name__", "kernel")
    problems = []
    for t, r in res.items():
        if not isinstance(r, BaseException):
            problems.append(f"  {t}: compiled, but a compile error matching {match!r} was expected")
        elif not isinstance(r, exc_type):
            problems.append(
                f"  {t}: raised {type(r).__name__}, expected {getattr(exc_type, '__name__', exc_type)}:"
                f" {_one_line(r)}"
            )
        elif not re.search(match, describe_error(r)):
            problems.append(f"  {t}: error does not match {match!r}: {_one_line(r)}")
    if problems:
        raise AssertionError(
            "\n".join(
                [f"{name}: expected compile error on {len(res)} target(s), {len(problems)} did not comply:"]
                + problems
            )
        )
    return res  # type: ignore[return-value]


_EXCERPT = 20


def _excerpt(text: str, pattern: str) -> list[str]:
    """Instruction lines sharing the pattern's leading opcode word (e.g. every ``cvt`` line)."""
    m = re.match(r"\\?\.?([A-Za-z_][A-Za-z0-9_]*)", pattern)
    word = m.group(1) if m else ""
    lines = [ln.strip() for ln in text.splitlines() if word and word in ln]
    return lines


def _isa(compiled: Compiled, asm: str | None) -> tuple[str, str]:
    if not isinstance(compiled, Compiled):
        raise TypeError(f"expected a Compiled result (from compile_kernel), got {type(compiled).__name__}")
    key = asm or compiled.isa_key
    if key not in compiled.asm:
        raise ValueError(
            f"{compiled.name}@{compiled.target} has no {key!r} stage; it has {sorted(compiled.asm)}"
        )
    return key, str(compiled.asm[key])


def assert_ptx_contains(compiled: Compiled, pattern: str, *, asm: str | None = None) -> None:
    """The assembly (PTX by default; ``asm="ttgir"``, ``"llir"``...) has a match for regex ``pattern``."""
    __tracebackhide__ = True
    key, text = _isa(compiled, asm)
    if re.search(pattern, text):
        return
    ex = _excerpt(text, pattern)
    more = f" (showing {_EXCERPT} of {len(ex)})" if len(ex) > _EXCERPT else ""
    body = "\n".join(f"    {ln}" for ln in ex[:_EXCERPT]) or "    (none)"
    raise AssertionError(
        f"{compiled.name}@{compiled.target}: no match for {pattern!r} in {key} "
        f"({len(text.splitlines())} lines);"
        f" related lines{more}:\n{body}"
    )


def assert_ptx_lacks(compiled: Compiled, pattern: str, *, asm: str | None = None) -> None:
    """The assembly has no match for regex ``pattern``; on failure the matching lines are shown."""
    __tracebackhide__ = True
    key, text = _isa(compiled, asm)
    hits = [ln.strip() for ln in text.splitlines() if re.search(pattern, ln)]
    if not hits:
        return
    body = "\n".join(f"    {ln}" for ln in hits[:_EXCERPT])
    raise AssertionError(
        f"{compiled.name}@{compiled.target}: {len(hits)} line(s) of {key} match {pattern!r}, "
        f"expected none:\n{body}"
    )
