"""Compiling one (kernel, signature, constexprs, target) through a per-process cache: the single place that
calls ``triton.compile``, the counters the session summary prints, and :class:`Compiled`, what a successful
compile gives.

Why a cache: the same kernel is compiled for the same target by several tests (and by launch capture), and
compiling is the slow part of the CPU lane. Compile errors are cached results, not crashes. (Launch capture
keeps outcomes on disk across processes on top of this one: :mod:`harness.compile.disk_cache`.)

Public API: :class:`Compiled`, :func:`compile_memoized`, :func:`stats`, :func:`clear_cache`,
:class:`E5m2Latch`, :func:`latch_e5m2`.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import gc
import io
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.arch import interpreting
from harness.compile.errors import BUDGET, InvalidIR, error_kind
from harness.compile.targets import Target, parse_target, target_supported
from harness.interp.jit import jit_class, language_patched
from harness.versions import triton_at_least

__all__ = ["FRESH_ENV", "FRESH_MARK", "Compiled", "E5m2Latch", "clear_cache", "compile_frontend", "compile_memoized",
           "compiles_in_fresh_process", "latch_e5m2", "specialized", "stats"]


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


def _freeze(value: Any) -> Any:
    """A hashable, value-based cache key for a constexpr value."""
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_freeze(v) for v in value))
    if isinstance(value, (bool, int, float, str, type(None))):
        return (type(value).__name__, value)
    return (type(value).__name__, repr(value))


@dataclass
class _Stats:
    compiles: int = 0
    frontend: int = 0
    failures: int = 0
    ptxas: int = 0
    hits: int = 0
    seconds: float = 0.0
    slowest: float = 0.0

    def as_dict(self) -> dict[str, float]:
        return {
            "compiles": self.compiles,
            "frontend": self.frontend,
            "failures": self.failures,
            "ptxas": self.ptxas,
            "hits": self.hits,
            "seconds": round(self.seconds, 4),
            "slowest": round(self.slowest, 4),
        }


_STATS = _Stats()
_CACHE: dict[tuple[Any, ...], Compiled | BaseException] = {}
_CACHE_LOCK = threading.Lock()


def _release_at_exit() -> None:
    """Drop the memo before the interpreter shuts down. Why: its compiled kernels and compile errors hold
    Triton's IR objects, and nanobind, finding them alive when its module is torn down, printed "nanobind: leaked
    N instances!" and a line per object at the end of every run that compiled."""
    with _CACHE_LOCK:
        _CACHE.clear()
    gc.collect()


atexit.register(_release_at_exit)


def stats() -> dict[str, float]:
    """Compiles done in this process (not cache hits), failures among them, cache hits, total and slowest
    seconds — what the compile-matrix summary line reports."""
    return _STATS.as_dict()


def clear_cache() -> None:
    """Forget cached results (and the counters), e.g. to time a cold compile."""
    with _CACHE_LOCK:
        _CACHE.clear()
        _STATS.__init__()  # type: ignore[misc]


def compile_memoized(
    jit: Any, sig: dict[str, str], consts: dict[str, Any], target: Target, options: Mapping[str, Any] | None = None,
    divisible: frozenset[str] = frozenset(),
) -> Compiled | BaseException:
    """The :class:`Compiled` result, or the exception the compiler raised, for arguments already checked by
    :func:`harness.compile.signature.prepare` and a target by :func:`harness.compile.targets.check_targets`.
    ``divisible``: arguments Triton's JIT would specialize as divisible by 16 (``tt.divisibility``), which
    changes load vectorization and so layouts (:func:`harness.lowering.compiled.specialize`)."""
    opts = dict(options or {})
    key = (jit, tuple(sig.items()), tuple((k, _freeze(v)) for k, v in sorted(consts.items())), target,
           tuple(sorted(opts.items())), tuple(sorted(divisible)))
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
        if hit is not None:
            _STATS.hits += 1
            return hit
    import triton  # on the first compile: loading the plugin imports no triton
    from triton.compiler import ASTSource

    _E5M2_LATCH.apply(target)
    if language_patched():
        raise RuntimeError(
            "triton.language is still patched by the Triton interpreter (an interpreted device-function call "
            "ran without the leak fix); call harness.interp.jit.fix_interpreter_leak() before running "
            "interpreted kernels (the harness pytest plugin does it on the interpreter lane)"
        )
    compile_opts = _with_fp_fusion(opts)
    t0 = time.perf_counter()
    try:
        # On a ptxas failure Triton prints the whole PTX to stdout; the error itself keeps the ptxas lines.
        with contextlib.redirect_stdout(io.StringIO()), _verifier_reason():
            names = list(jit.arg_names)
            attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in sorted(divisible)}
            src = ASTSource(jit, sig, consts, attrs) if attrs else ASTSource(jit, sig, consts)
            ck = triton.compile(src, target=target.gpu_target(), options=compile_opts or None)
        result: Compiled | BaseException = Compiled(
            target=target.name,
            name=jit.__name__,
            asm=dict(ck.asm),
            seconds=time.perf_counter() - t0,
            kernel=ck,
        )
    except Exception as e:  # compile errors are results here, not crashes
        result = e
    if isinstance(result, BaseException) and _latched(result, target) and not divisible:
        result = _recompiled_fresh(jit, sig, consts, target, opts, compile_opts, result)
    dt = time.perf_counter() - t0
    with _CACHE_LOCK:
        _STATS.compiles += 1
        _STATS.failures += isinstance(result, BaseException) and error_kind(result) not in ("ptxas", BUDGET)
        _STATS.ptxas += isinstance(result, BaseException) and error_kind(result) == "ptxas"
        _STATS.seconds += dt
        _STATS.slowest = max(_STATS.slowest, dt)
        if not (isinstance(result, BaseException) and error_kind(result) == BUDGET):
            _CACHE[key] = result  # not an over-budget one: a later call may give ptxas a bigger budget
    return result


#: Set in the process :func:`_recompiled_fresh` (and capture's confirmation) starts: that process *is* the fresh
#: one, so its own ptxas failure stands (asking yet another process made an endless chain of them on Triton 3.6,
#: 2026-12-04).
FRESH_ENV = "HARNESS_FRESH_PROCESS"
#: Set on a failure a fresh process repeated already (:func:`_recompiled_fresh`): not asked again.
FRESH_MARK = "harness_failed_in_fresh_process"
#: ptxas refusing an instruction of a later target than the one compiled for (``Feature 'cvt with .bf16.f16'
#: requires .target sm_90 or higher`` in an sm89 compile).
_LATER_TARGET = re.compile(r"requires \.target sm_(\d+)")
#: The launch options ``python -m harness compile`` takes: a compile with others cannot be repeated there.
_CLI_OPTIONS = frozenset({"num_warps", "num_stages", "num_ctas", "maxnreg"})


def _latched(result: BaseException, target: Target) -> bool:
    """Whether ``result`` may be Triton 3.6's FP8 lowering latched by an earlier compile of this process: ptxas
    refusing an instruction of a later target. Measured on Triton 3.6.0 (2026-12-06, this box): after one
    ``triton.compile`` of an FP8 round trip for sm90 that did not go through :func:`compile_memoized` (so before
    :class:`E5m2Latch`), the same kernel for sm75-sm86 emits e5m2 ``cvt ... e5m2x2`` and for sm89 ``cvt.bf16.f16``
    and ``mul.bf16x2``, all refused by ptxas, where a fresh process compiles each; fixed by 3.9."""
    if triton_at_least(3, 7) or target.cc is None or os.environ.get(FRESH_ENV) or error_kind(result) != "ptxas":
        return False
    m = _LATER_TARGET.search(str(result))
    return m is not None and int(m.group(1)) > target.cc


def compiles_in_fresh_process(path: str, qualname: str, signature: Mapping[str, str], constexprs: Mapping[str, Any],
                              options: Mapping[str, Any], target: str) -> bool | None:
    """Whether ``python -m harness compile PATH::QUALNAME`` compiles the kernel for ``target`` in a new Python
    process (``None``: the process could not be run or timed out). That process is told it is the fresh one
    (:data:`FRESH_ENV`) and gets a compile cache of its own; Triton's cache stays shared, so what it compiles can be
    read back here. Why: Triton 3.6 keeps some FP8 lowering choices as process state (:func:`_latched`)."""
    from harness.compile.launches import constexpr_text  # the launch records import this module

    args = [sys.executable, "-m", "harness", "compile", f"{path}::{qualname}",
            "--sig", ",".join(f"{k}={v}" for k, v in signature.items()), "--targets", target, "--no-widen"]
    for k, v in constexprs.items():
        args += ["--const", f"{k}={constexpr_text(v)}"]
    for k, v in options.items():
        args += [f"--{k.replace('_', '-')}", str(v)]
    # TRITON_INTERPRET as this process has it: the kernel's module is imported as the test process imported it
    # (Triton's test_core.py asks the active driver at import unless the interpreter runs; a CPU box has none);
    # the compile is triton.compile for the target either way.
    env = {**os.environ, FRESH_ENV: "1"}
    # A compile cache of its own: a caller may hold this launch's lock in the shared one (launch_outcome), so a
    # child reading it would wait for it forever, and a clean process must not read back anyway.
    with tempfile.TemporaryDirectory(prefix="harness-fresh-") as own_cache:
        env["HARNESS_COMPILE_CACHE"] = own_cache
        try:
            done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=600)
        except (OSError, subprocess.TimeoutExpired):
            return None
    return done.returncode == 0


def _recompiled_fresh(jit: Any, sig: dict[str, str], consts: dict[str, Any], target: Target,
                      opts: Mapping[str, Any], compile_opts: Mapping[str, Any],
                      failed: BaseException) -> Compiled | BaseException:
    """The compile a fresh process makes of this kernel for ``target``, which stores it in Triton's cache, read
    back by compiling again here (a cache hit: no lowering in this process); ``failed`` when the fresh process
    fails too, or the compile cannot be repeated there (options it does not take, a kernel without a source
    file), or the result is not found. Why: a false failure is the worst defect a harness can have, and
    ``assert_compiles`` over several targets after a user's own compile would give one
    (:func:`_latched`)."""
    import inspect

    import triton
    from triton.compiler import ASTSource

    fn = getattr(jit, "fn", None)
    path = inspect.getsourcefile(fn) if fn is not None else None
    if not path or any(k not in _CLI_OPTIONS for k in opts):
        return failed
    runtime = {k: v for k, v in sig.items() if v != "constexpr"}
    done = compiles_in_fresh_process(path, fn.__qualname__, runtime, consts, opts, target.name)
    if done is None:
        return failed
    if not done:
        setattr(failed, FRESH_MARK, True)
        return failed
    t0 = time.perf_counter()
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            ck = triton.compile(ASTSource(jit, sig, consts), target=target.gpu_target(),
                                options=dict(compile_opts) or None)
    except Exception:  # not a cache hit after all (another key): the failure stands
        return failed
    return Compiled(target=target.name, name=jit.__name__, asm=dict(ck.asm), seconds=time.perf_counter() - t0,
                    kernel=ck)


#: Triton's own defaults of the launch options for CUDA (``CUDAOptions``, Triton 3.6 and 3.9): a compile that names
#: one and one that leaves it out are the same compile.
_DEFAULT_OPTIONS = {"num_warps": 4, "num_ctas": 1, "num_stages": 3}


def specialized(jit: Any, sig: dict[str, str], consts: dict[str, Any], target: Target,
                options: Mapping[str, Any] | None = None) -> Compiled | BaseException | None:
    """A compile this process already made of the same kernel, signature, constexprs, target and options, with
    some arguments specialized as divisible by 16 (``tt.divisibility``), as Triton's JIT compiles the launch on a
    GPU; ``None`` if there is none. Why: the lowering shim compiles each interpreted launch for sm90 so
    specialized (:func:`harness.lowering.compiled.lowering_for`) before launch capture compiles the same launch for
    sm90 unspecialized; that compile *is* the launch's as a GPU makes it, so capture takes its outcome instead of
    compiling again. Only for capture's question (does the launch compile, and how does it lower its
    ``tl.dot_scaled``): a user's :func:`compile_memoized` keeps its own exact key (specialization changes the
    PTX)."""
    opts = {**_DEFAULT_OPTIONS, **dict(options or {})}
    want = (jit, tuple(sig.items()), tuple((k, _freeze(v)) for k, v in sorted(consts.items())), target)
    with _CACHE_LOCK:
        for key, hit in _CACHE.items():
            if key[0] == "frontend" or key[:4] != want or not key[5]:
                continue
            if {**_DEFAULT_OPTIONS, **dict(key[4])} == opts:
                _STATS.hits += 1
                return hit
    return None


def compile_frontend(
    jit: Any, sig: dict[str, str], consts: dict[str, Any], target: Target, options: Mapping[str, Any] | None = None,
) -> Compiled | BaseException:
    """Triton's frontend only, for ``target``: the kernel's AST to TTIR (``ASTSource.make_ir``, with the codegen
    helpers and options the target's backend gives it); no TTIR passes, TTGIR, LLVM, PTX or ptxas. The
    :class:`Compiled` holds no assembly (``asm`` is empty). Why: what the frontend refuses (a cast with no conversion
    helper, ``tl.static_assert``, an op's type rule, an FP8 type the target lacks) is most of what widening and
    branches find, at a tenth of a full compile's time (measured on this box, Triton 3.9, the per-token group FP8
    quant of ``benchmarks/bench_capture.py``: ``make_ir`` 0.01-0.03 s, a full compile 0.14-0.19 s, sm80-sm120)."""
    opts = dict(options or {})
    key = ("frontend", jit, tuple(sig.items()), tuple((k, _freeze(v)) for k, v in sorted(consts.items())), target,
           tuple(sorted(opts.items())))
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
        if hit is not None:
            _STATS.hits += 1
            return hit
    from triton._C.libtriton import ir  # on the first compile: loading the plugin imports no triton
    from triton.compiler import ASTSource
    from triton.compiler.compiler import make_backend

    if language_patched():
        raise RuntimeError(
            "triton.language is still patched by the Triton interpreter (an interpreted device-function call "
            "ran without the leak fix); call harness.interp.jit.fix_interpreter_leak() before running "
            "interpreted kernels (the harness pytest plugin does it on the interpreter lane)"
        )
    t0 = time.perf_counter()
    try:
        with contextlib.redirect_stdout(io.StringIO()), _verifier_reason():
            gpu = target.gpu_target()
            backend = make_backend(gpu)
            src = ASTSource(jit, sig, consts)
            parsed = backend.parse_options(dict(_with_fp_fusion(opts), **src.parse_options()))
            context = ir.context()
            ir.load_dialects(context)
            backend.load_dialects(context)
            src.make_ir(gpu, parsed, backend.get_codegen_implementation(parsed), backend.get_module_map(), context)
        result: Compiled | BaseException = Compiled(target=target.name, name=jit.__name__, asm={},
                                                     seconds=time.perf_counter() - t0)
    except Exception as e:  # compile errors are results here, not crashes
        result = e
    dt = time.perf_counter() - t0
    with _CACHE_LOCK:
        _STATS.frontend += 1
        _STATS.failures += isinstance(result, BaseException)
        _STATS.seconds += dt
        _STATS.slowest = max(_STATS.slowest, dt)
        _CACHE[key] = result
    return result


@contextlib.contextmanager
def _verifier_reason() -> Any:
    """Turn Triton's "error encountered during parsing" (its frontend's module failed MLIR verification) into
    :class:`~harness.compile.errors.InvalidIR` with the verifier's reason, which MLIR writes to file descriptor 2:
    the block's stderr goes to a temporary file and is written back to stderr afterwards, unchanged. Why: the bare
    message says neither which op nor why, so a made-up variant an op's types refuse (``tl.math.fdiv`` of fp16 and
    fp32) could not be told from a missing conversion."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):  # no file descriptor 2 to read: the bare message stands
        yield
        return
    with tempfile.TemporaryFile() as err:
        os.dup2(err.fileno(), 2)
        try:
            yield
        except RuntimeError as e:
            if str(e) != "error encountered during parsing":
                raise
            err.seek(0)
            text = err.read().decode(errors="replace")
            line = next((ln.strip() for ln in text.splitlines() if ": error: " in ln), "")
            if not line:
                raise
            raise InvalidIR(line) from e
        finally:
            os.dup2(saved, 2)
            err.seek(0)
            text = err.read().decode(errors="replace")
            os.close(saved)
            if text:
                os.write(2, text.encode())


def _with_fp_fusion(opts: dict[str, Any]) -> dict[str, Any]:
    """``opts`` with ``enable_fp_fusion`` set to the default Triton would take. Why: Triton 3.9 warns
    ("TRITON_DEFAULT_FP_FUSION is unset") on every compile that leaves it unset, and the harness's AOT compiles
    made every adopter's run print it though their own code asked nothing; passing Triton's own default compiles
    the same kernel without the warning (a user's ``TRITON_DEFAULT_FP_FUSION`` / option still decides)."""
    if "enable_fp_fusion" in opts:
        return opts
    try:
        from triton import knobs  # Triton 3.4+
    except ImportError:  # pragma: no cover - an older Triton has neither the knob nor the warning
        return opts
    lang = getattr(knobs, "language", None)
    if lang is None or not hasattr(lang, "fp_fusion_enabled") or getattr(lang, "force_disable_fp_fusion", False):
        return opts
    return {**opts, "enable_fp_fusion": bool(lang.default_fp_fusion)}


class E5m2Latch:
    """Triton 3.6 (measured; fixed by 3.9): the fp16/fp32 → e5m2 lowering is chosen by the capability of the
    *first* e5m2 compile in the process and kept for every later target, so after any sm89+ compile an sm80
    compile emits ``cvt ... e5m2x2`` and ptxas refuses it ("requires .target sm_89"), a false failure. The
    lowest choice (the software path) is valid on every target, so :meth:`apply` compiles one e5m2 cast for
    sm75 first, once per latch (the process has one: Triton's choice is process state).

    Except in a process that runs real kernels on an NVIDIA GPU (a GPU-lane worker): there the latch would
    also give the *real* kernels the software e5m2 path, whose codes differ from the hardware's (seen on the
    H200, 2026-12-03: ``test_cast_table_matches_h200[fp16-e5m2]`` failed in a one-worker GPU lane after an
    earlier test's AOT compile). There the latch is the device's own target, so real kernels keep their
    hardware lowering; an AOT e5m2 compile for a pre-sm89 target in that process may then fail in ptxas
    falsely (loud, never silently wrong numbers)."""

    def __init__(self) -> None:
        self.applied = False
        self.runs_kernels = True  # False: declared by a process that only compiles (compile_only_process)

    def apply(self, first: Target) -> None:
        """Before the first CUDA compile of this latch: compile the e5m2 cast for :meth:`target`."""
        if self.applied or first.backend != "cuda":
            return
        self.applied = True
        if triton_at_least(3, 7):
            return
        latch = self.target() if self.runs_kernels else parse_target("sm75")
        if latch is not None:
            latch_e5m2(latch)

    @staticmethod
    def target() -> Target | None:
        """sm75 (the software e5m2 path, valid everywhere) unless this process runs kernels on an NVIDIA GPU,
        then that GPU's own target (None if the harness does not know it: no latch)."""
        try:
            import torch  # only when latching: loading the plugin imports no torch
        except ImportError:  # pragma: no cover - the harness needs torch
            torch = None
        if interpreting() or torch is None or getattr(torch.version, "hip", None) or not torch.cuda.is_available():
            return parse_target("sm75")
        major, minor = torch.cuda.get_device_capability()
        try:
            return parse_target(f"sm{major}{minor}")
        except ValueError:
            return None


_E5M2_LATCH = E5m2Latch()


def compile_only_process() -> None:
    """Declare that this process compiles kernels and never launches one (``python -m harness compile``, the
    fresh process that confirms a compile failure): its e5m2 latch is then sm75 without asking torch whether a
    GPU is there, an import of ~1 CPU-s a process."""
    _E5M2_LATCH.runs_kernels = False


def latch_e5m2(target: Target) -> None:
    """On Triton < 3.7, fix this process's fp16/fp32 → e5m2 lowering to ``target``'s by compiling one e5m2
    cast for it (a no-op on a later Triton, a ROCm target or one this Triton cannot compile for). Why public:
    ``harness.compile.warm`` fills Triton's cache for the GPU lane, and that cache's key does not hold the
    latched lowering, so a warming process must latch the GPU's own target before its first compile."""
    if triton_at_least(3, 7) or target.backend != "cuda" or not target_supported(target)[0]:
        return
    import triton  # only after a compile was asked for
    from triton.compiler import ASTSource

    try:
        with contextlib.redirect_stdout(io.StringIO()):
            triton.compile(ASTSource(_e5m2_latch_kernel(), {"x": "*fp32", "y": "*u8"}, {}),
                           target=target.gpu_target())
    except Exception:  # pragma: no cover - the workaround is best effort; the real compile reports itself
        pass


@functools.cache
def _e5m2_latch_kernel() -> Any:
    import triton.language as tl  # only when latching

    def latch_e5m2(x, y):
        o = tl.arange(0, 32)
        tl.store(y + o, tl.load(x + o).to(tl.float8e5).to(tl.uint8, bitcast=True))

    return jit_class()(latch_e5m2)

