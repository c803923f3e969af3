"""Launch capture: compile every kernel launch the interpreter lane runs, for real GPU targets, with no test code.

Why: a kernel test on the CPU lane runs the Triton interpreter, which accepts casts no GPU compiler lowers (the
seed bug: a bf16 load cast straight to ``tl.float8e4b15``). Writing compile-matrix tests by hand for every
kernel took 63 of them and undocumented signature strings. Instead, every distinct launch (kernel, argument
types from the actual tensors and scalars, constexpr values, ``num_warps``/``num_stages``) is compiled for the
matrix targets, and so are its *widened* variants — the floating-point tensor arguments in the other source
dtypes (fp16/bf16/fp32, each pointer alone and all together), because the bug is usually in the dtype the test
did not run. A variant that fails where the launched dtypes compile is a finding.

Results are cached on disk (key: module source hash + signature + constexprs + options + target + Triton
version) under a file lock, so xdist workers and later runs compile each configuration once.

Public API: :class:`Launch`, :func:`capture`, :func:`launch_from_args`, :func:`variants`, :func:`check`,
:class:`Finding`, :func:`expect_compile_failure`, :func:`render_matrix`.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import os
import re
import sys
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.arch import _triton_at_least  # stdlib-only module; a name here so tests can stand in for it

__all__ = [
    "Launch",
    "Finding",
    "Outcome",
    "WIDEN_DTYPES",
    "capture",
    "launch_from_args",
    "variants",
    "check",
    "expect_compile_failure",
    "render_matrix",
    "group",
    "describe_group",
    "cache_dir",
]

#: The source dtypes a floating-point tensor argument is widened to.
WIDEN_DTYPES: tuple[str, ...] = ("fp16", "bf16", "fp32")
_LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")
_FP8_OF_TYPE = {"fp8e4nv": "e4nv", "fp8e5": "e5m2", "fp8e4b15": "e4b15", "fp8e4b8": "e4m3fnuz",
                "fp8e5b16": "e5m2fnuz"}


def _torch_types() -> dict[Any, str]:
    import torch

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
    """One distinct launch: what :func:`harness.compile_matrix.compile_matrix` needs to compile it again."""

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
        out = {_FP8_OF_TYPE[v.lstrip("*")] for _, v in self.signature if v.lstrip("*") in _FP8_OF_TYPE}
        for _, v in self.constexprs:
            name = getattr(v, "name", None)
            if isinstance(name, str) and name in _FP8_OF_TYPE:
                out.add(_FP8_OF_TYPE[name])
        return out

    def config_key(self) -> tuple[Any, ...]:
        """What makes two launches the same configuration for capture: kernel, argument types, options and
        every constexpr except integers other than 0 and 1. Why: integer constexprs are overwhelmingly sizes
        (``BLOCK``, ``HEAD_DIM``, ``PAGE``) that a suite sweeps over and that never change how a dtype lowers,
        while 0/1 flags and every other value (``tl.dtype``, floats, bools, strings) select code paths. An
        enum constexpr with values above 1 is collapsed too: ``--harness-compile-all-configs`` keeps every one.
        """
        consts = tuple((k, "<int>" if _is_size(v) else _const_repr(v)) for k, v in self.constexprs)
        return (self.kernel, self.file, self.signature, consts, self.options)

    def key(self, target: str) -> str:
        """Disk-cache key: source of the kernel's module, signature, constexprs, options, target, Triton. A
        helper imported from another module is not part of the key: after editing one, clear the cache."""
        import triton

        h = hashlib.sha256()
        for part in (_CACHE_FORMAT, _source_hash(self.file), self.kernel, repr(self.signature),
                     repr([(k, _const_repr(v)) for k, v in self.constexprs]), repr(self.options), target,
                     triton.__version__):
            h.update(part.encode())
            h.update(b"\0")
        return h.hexdigest()[:32]

    def with_types(self, changes: Mapping[str, str]) -> Launch:
        sig = tuple((k, changes.get(k, v)) for k, v in self.signature)
        return Launch(self.kernel, self.file, sig, self.constexprs, self.options, self.fn)


def _is_size(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v not in (0, 1)


def _const_repr(v: Any) -> str:
    """A constexpr as ``python -m harness compile --const`` reads it back: a ``tl.<attribute>`` for dtypes (the
    attribute, ``tl.float8e5``, not the dtype's own name ``fp8e5``, which ``triton.language`` lacks)."""
    name = getattr(v, "name", None)
    if not (isinstance(name, str) and type(v).__name__ == "dtype"):
        return repr(v)
    import triton.language as tl

    attrs = sorted(a for a in dir(tl) if not a.startswith("_") and type(getattr(tl, a, None)) is type(v)
                   and getattr(tl, a) == v)
    return f"tl.{name if name in attrs else (attrs[0] if attrs else name)}"


#: Bumped when what a cache entry holds (or how its error line is written) changes.
_CACHE_FORMAT = "harness-launch-2"
_SRC_HASH: dict[str, str] = {}


def _source_hash(path: str) -> str:
    hit = _SRC_HASH.get(path)
    if hit is None:
        try:
            hit = hashlib.sha256(Path(path).read_bytes()).hexdigest()
        except OSError:
            hit = "?"
        _SRC_HASH[path] = hit
    return hit


# --- building a Launch from a real call --------------------------------------------------------------------


def launch_from_args(fn: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Launch:
    """The :class:`Launch` for ``fn[grid](*args, **kwargs)``; ``ValueError`` for an argument it cannot type."""
    from harness.interp_shims import as_jit

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


# --- capture ----------------------------------------------------------------------------------------------

_LOCK = threading.Lock()
_SINK: list[Any] = []  # callables receiving (launch) while capture is on; None blocks outer ones
_SKIPPED: dict[str, str] = {}  # kernel -> why its launch could not be typed


def _install() -> None:
    from triton.runtime import interpreter as itp

    cls = itp.InterpretedFunction
    orig = cls.run
    if getattr(orig, "_harness_capture", False):
        return

    def run(self: Any, *args: Any, grid: Any, warmup: Any, **kwargs: Any) -> Any:
        with _LOCK:
            sink = _SINK[-1] if _SINK else None  # the innermost capture only (None: a barrier)
        if sink is not None and not warmup:
            try:
                launch = launch_from_args(self, args, kwargs)
            except Exception as e:  # never break the test over capture; say so in the summary
                _SKIPPED[getattr(self, "__name__", "?")] = f"{type(e).__name__}: {e}"
            else:
                sink(launch)
        return orig(self, *args, grid=grid, warmup=warmup, **kwargs)

    run._harness_capture = True  # type: ignore[attr-defined]
    cls.run = run


@contextlib.contextmanager
def capture() -> Iterator[list[Launch]]:
    """Record every interpreted kernel launch inside the block (in order, duplicates included). Nested blocks
    (a pytester session inside a captured test) take the launches made inside them; the outer one does not
    see them."""
    _install()
    got: list[Launch] = []
    with _LOCK:
        _SINK.append(got.append)
    try:
        yield got
    finally:
        with _LOCK:
            _SINK.remove(got.append)


@contextlib.contextmanager
def barrier() -> Iterator[None]:
    """Launches inside the block reach no enclosing :func:`capture` (a pytest session nested in a captured test,
    with capture off, must not hand its launches to the outer test)."""
    with _LOCK:
        _SINK.append(None)
    try:
        yield
    finally:
        with _LOCK:
            _SINK.remove(None)


def skipped_launches() -> dict[str, str]:
    return dict(_SKIPPED)


# --- compiling with a disk cache ---------------------------------------------------------------------------


def cache_dir() -> Path:
    """``$HARNESS_COMPILE_CACHE``, else ``$XDG_CACHE_HOME/lowp-harness/compile`` (``~/.cache/...``)."""
    env = os.environ.get("HARNESS_COMPILE_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "lowp-harness" / "compile"


@dataclass(frozen=True)
class Outcome:
    """One (launch, target) compile: ``ok``, else the kind (``refused``/``ptxas``) and the compiler's line."""

    ok: bool
    kind: str = ""
    line: str = ""
    cached: bool = False


def _compile_one(launch: Launch, target: str) -> Outcome:
    from harness import compile_matrix as cm

    consts = dict(launch.constexprs)
    res = cm.compile_matrix(launch.fn, signature=launch.sig, constexprs=consts, targets=[target],
                            options=dict(launch.options))[target]
    if isinstance(res, BaseException):
        out = Outcome(False, cm.error_kind(res), cm.error_line(res))
        if out.kind == "ptxas" and not _triton_at_least(3, 7) and fresh_process_compiles(launch, target):
            return Outcome(True)
        return out
    return Outcome(True)


def fresh_process_compiles(launch: Launch, target: str) -> bool:
    """Compile ``launch`` for ``target`` again in a new Python process (``python -m harness compile``).

    Why: Triton 3.6 keeps some FP8 lowering choices as process state, so after other compiles in this process
    (an xdist worker's earlier tests) a cast that sm80 supports can come out as sm89 instructions and fail in
    ptxas: a false finding. A failure there is confirmed in a clean process before it is reported; findings
    are rare, so the extra process costs little."""
    import subprocess

    args = [sys.executable, "-m", "harness", "compile", f"{launch.file}::{launch.kernel.rsplit('.', 1)[-1]}",
            "--sig", ",".join(f"{k}={v}" for k, v in launch.signature), "--targets", target, "--no-widen"]
    for k, v in launch.constexprs:
        args += ["--const", f"{k}={_const_repr(v)}"]
    for k, v in launch.options:
        args += [f"--{k.replace('_', '-')}", str(v)]
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    try:
        r = subprocess.run(args, capture_output=True, text=True, env=env, timeout=600)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


def compile_cached(launch: Launch, target: str, directory: Path | None = None) -> Outcome:
    """Compile (or read back) one launch for one target; a file lock per key keeps xdist workers from
    compiling the same thing twice."""
    d = directory or cache_dir()
    key = launch.key(target)
    path = d / key[:2] / f"{key}.json"
    hit = _read(path)
    if hit is not None:
        return hit
    path.parent.mkdir(parents=True, exist_ok=True)
    with _file_lock(path.with_suffix(".lock")):
        hit = _read(path)
        if hit is not None:
            return hit
        out = _compile_one(launch, target)
        if out.kind == "ptxas":
            # Not kept: on Triton 3.6 a ptxas failure can come from the process's state (the e5m2 lowering is
            # latched by the first compile, compile_cache._latch_e5m2_lowering), so a cached one could
            # report a false finding in every later session. Findings are rare; compiling them again is cheap.
            return out
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps({"ok": out.ok, "kind": out.kind, "line": out.line, "kernel": launch.kernel,
                                   "sig": launch.sig_text(), "target": target}))
        os.replace(tmp, path)
    return out


def _read(path: Path) -> Outcome | None:
    try:
        d = json.loads(path.read_text())
        return Outcome(bool(d["ok"]), str(d.get("kind", "")), str(d.get("line", "")), cached=True)
    except (OSError, ValueError, KeyError):
        return None


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: no cross-process dedupe, still correct
        yield
        return
    with open(path, "a+") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


# --- expected failures and findings ------------------------------------------------------------------------

_EXPECTED: list[tuple[str, tuple[str, ...], re.Pattern[str], str]] = []


def expect_compile_failure(kernel: Any, *targets: str, match: str = "", reason: str = "") -> None:
    """Declare that ``kernel`` (the ``@triton.jit`` object or its name) is known not to compile for
    ``targets`` (all targets when none are given) with an error matching ``match``: those results are skipped
    in the capture report, not failed. Call it next to the kernel or in a conftest."""
    if not reason:
        raise ValueError("expect_compile_failure: reason= must say why the failure is expected")
    name = kernel if isinstance(kernel, str) else getattr(getattr(kernel, "fn", kernel), "__qualname__", None)
    if not isinstance(name, str) or not name:
        raise TypeError(f"expect_compile_failure: kernel must be a @triton.jit kernel or its name, got {kernel!r}")
    from harness.targets import parse_targets

    names = tuple(t.name for t in parse_targets(targets)) if targets else ()
    _EXPECTED.append((name, names, re.compile(match), reason))


def _expected_by_user(launch: Launch, target: str, out: Outcome) -> str | None:
    short = launch.kernel.rsplit(".", 1)[-1]
    for name, targets, pat, reason in _EXPECTED:
        if name in (launch.kernel, short) and (not targets or target in targets) and pat.search(out.line):
            return reason
    return None


_TYPE_REFUSED = re.compile(r"type (fp8\w+) not supported in this architecture")


def expected_reason(launch: Launch, target: str, out: Outcome) -> str | None:
    """Why a failure is expected: the arch model refuses an FP8 format the launch uses on ``target``
    (``e4nv`` below sm89...), Triton itself refused the type for the arch, or the kernel was declared with
    :func:`expect_compile_failure`."""
    if out.ok:
        return None
    from harness.arch import supports_format

    fmts = set(launch.fp8_formats())
    m = _TYPE_REFUSED.search(out.line)
    if m and m.group(1) in _FP8_OF_TYPE:
        fmts.add(_FP8_OF_TYPE[m.group(1)])
    for f in sorted(fmts):
        ok, why = supports_format(target, f)
        if not ok:
            return why
    return _expected_by_user(launch, target, out)


@dataclass(frozen=True)
class Finding:
    """A compile failure the launching test is answerable for."""

    kernel: str
    target: str
    signature: str
    variant: str  # "" for the launch as run, else e.g. "key_ptr=bf16"
    error: str
    kind: str
    test: str = ""

    def describe(self) -> str:
        what = f"variant {self.variant} (the launch as run compiles)" if self.variant else "the launch as run"
        return (f"{self.kernel} @ {self.target}: {what} fails to compile [{self.kind}]\n"
                f"    signature: {self.signature}\n    error: {self.error}"
                + (f"\n    launched by: {self.test}" if self.test else ""))


@dataclass
class Report:
    """What :func:`check` found for a set of launches: per (kernel, target) cell counts and findings."""

    cells: dict[tuple[str, str], dict[str, int]] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    compiles: int = 0
    cached: int = 0

    def bump(self, kernel: str, target: str, what: str) -> None:
        c = self.cells.setdefault((kernel, target), {"ok": 0, "expected": 0, "failed": 0})
        c[what] += 1

    def to_dict(self) -> dict[str, Any]:
        return {"cells": [{"kernel": k, "target": t, **v} for (k, t), v in sorted(self.cells.items())],
                "findings": [f.__dict__ for f in self.findings], "compiles": self.compiles, "cached": self.cached}

    def merge(self, d: Mapping[str, Any]) -> None:
        for c in d.get("cells", []):
            cell = self.cells.setdefault((c["kernel"], c["target"]), {"ok": 0, "expected": 0, "failed": 0})
            for k in cell:
                cell[k] += int(c.get(k, 0))
        self.findings.extend(Finding(**f) for f in d.get("findings", []))
        self.compiles += int(d.get("compiles", 0))
        self.cached += int(d.get("cached", 0))


def check(launch: Launch, targets: Iterable[str], *, widen: bool = True, test: str = "",
          report: Report | None = None, directory: Path | None = None,
          widen_targets: Iterable[str] | None = None) -> list[Finding]:
    """Compile ``launch`` (and, with ``widen``, its :func:`variants`) for ``targets``; the findings:
    the launch itself failing unexpectedly, or a variant failing where the launch compiles. Variants are
    compiled for ``widen_targets`` only when given (a subset, to bound the cost)."""
    wt = None if widen_targets is None else set(widen_targets)
    rep = report if report is not None else Report()
    found: list[Finding] = []
    vs = variants(launch) if widen else []
    for t in targets:
        base = compile_cached(launch, t, directory)
        rep.compiles += 1
        rep.cached += base.cached
        if base.ok:
            rep.bump(launch.kernel, t, "ok")
        elif expected_reason(launch, t, base):
            rep.bump(launch.kernel, t, "expected")
            continue
        else:
            rep.bump(launch.kernel, t, "failed")
            found.append(Finding(launch.kernel, t, launch.sig_text(), "", base.line, base.kind, test))
            continue
        for label, v in vs if wt is None or t in wt else ():
            out = compile_cached(v, t, directory)
            rep.compiles += 1
            rep.cached += out.cached
            if out.ok or expected_reason(v, t, out):
                continue
            rep.bump(launch.kernel, t, "failed")
            found.append(Finding(launch.kernel, t, v.sig_text(), label, out.line, out.kind, test))
    rep.findings.extend(found)
    return found


def group(findings: Iterable[Finding]) -> list[tuple[Finding, list[str]]]:
    """Findings that differ only in target, as ``(first finding, [targets])`` — one entry per bug."""
    out: dict[tuple[str, ...], tuple[Finding, list[str]]] = {}
    for f in findings:
        k = (f.kernel, f.variant, f.signature, f.error, f.kind, f.test)
        if k in out:
            out[k][1].append(f.target)
        else:
            out[k] = (f, [f.target])
    return list(out.values())


def describe_group(f: Finding, targets: list[str]) -> str:
    what = f"variant {f.variant} (the launch as run compiles)" if f.variant else "the launch as run"
    return (f"{f.kernel} @ {','.join(targets)}: {what} fails to compile [{f.kind}]\n"
            f"    signature: {f.signature}\n    error: {f.error}"
            + (f"\n    launched by: {f.test}" if f.test else ""))


def render_matrix(rep: Report, targets: Iterable[str]) -> list[str]:
    """Kernel × target table: ``ok`` / ``expected`` (refusals the arch model predicts) / ``FAIL n``."""
    ts = list(targets)
    kernels = sorted({k for k, _ in rep.cells})
    if not kernels:
        return []

    def cell(k: str, t: str) -> str:
        c = rep.cells.get((k, t))
        if c is None:
            return "-"
        if c["failed"]:
            return f"FAIL {c['failed']}"
        if c["ok"]:
            return "ok" + ("*" if c["expected"] else "")
        return "expected"

    names = [k.rsplit(".", 2)[-2] + "." + k.rsplit(".", 1)[-1] if k.count(".") else k for k in kernels]
    w0 = max(len("kernel"), *(len(n) for n in names))
    widths = [max(len(t), 8) for t in ts]
    lines = ["  ".join(["kernel".ljust(w0)] + [t.ljust(w) for t, w in zip(ts, widths, strict=True)])]
    for k, n in zip(kernels, names, strict=True):
        lines.append("  ".join([n.ljust(w0)] + [cell(k, t).ljust(w) for t, w in zip(ts, widths, strict=True)]))
    return [ln.rstrip() for ln in lines]
