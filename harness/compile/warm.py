"""The GPU lane's warm start: which kernel specializations a GPU run compiled (recorded through Triton's
compilation listener into a launch manifest), and compiling them again ahead of the next run, in parallel
processes that never touch the GPU, into Triton's own on-disk cache.

Why: on a fresh GPU machine most of the lane's time is first-launch compiles (H200 runs 4-7 and A-E,
docs/gpu-lane.md: warm-cache runs 45-50 s faster than cold ones with 4 workers; 99 of one worker's tests took
0.5-1 s, nearly all a first compile). The workers compile those while time-slicing one GPU; compiling them
before the lane, on every CPU core, leaves the workers to load cubins. Triton's cache key is the compiled
source, its specialization (signature, constexprs, attributes), the target and the options, so a compile of
the same four with ``triton.compile`` is the very entry a later JIT launch looks up (``JITFunction.preload``
relies on the same); nothing here changes what a test runs, only whether its compile already happened.

Recording: a :class:`Listener` on ``triton.knobs.compilation.listener`` sees every compile of the process,
cache hits included, with the ``ASTSource`` and the options; it counts them (the lane's compile line) and,
when asked, turns each into a manifest entry (:func:`entry_of`). Warming: :func:`warm` compiles each entry for
one target in a pool of processes (``spawn``: no CUDA state, no interpreter state inherited), each latched to
that target's own e5m2 lowering first on Triton < 3.7 (the lowering is process state that Triton's cache key
does not hold, :class:`harness.compile.cache.E5m2Latch`). An entry that no longer imports or no longer fits
its kernel is skipped and said so: the GPU run compiles it itself, as it would without a manifest.

Public API: :data:`FORMAT`, :class:`Listener`, :func:`install_listener`, :func:`entry_of`, :func:`write_manifest`,
:func:`read_manifest`, :class:`WarmResult`, :func:`warm`.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import datetime
import importlib
import inspect
import io
import json
import multiprocessing
import os
import sys
import threading
import time
import warnings
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.interp.patch import Patch

__all__ = [
    "FORMAT",
    "Listener",
    "WarmResult",
    "entry_of",
    "install_listener",
    "read_manifest",
    "warm",
    "write_manifest",
]

#: The manifest's format number; a file of another format is refused with this number in the message.
FORMAT = 1
_ENTRY_KEYS = ("module", "qualname", "file", "target", "signature", "constexprs", "attrs", "options")


# --- values as JSON ------------------------------------------------------------------------------------------


def _encode(v: Any) -> Any:
    """A constexpr value as JSON; ``TypeError`` for one a manifest cannot hold (it is then not recorded)."""
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return {"float": repr(v)}  # inf and nan as Python spells them: JSON has neither
    kind = type(v).__name__
    if kind == "dtype" and isinstance(getattr(v, "name", None), str):
        return {"dtype": v.name}
    if kind == "constexpr":
        return {"constexpr": _encode(v.value)}
    if isinstance(v, tuple):
        return {"tuple": [_encode(x) for x in v]}
    fn = getattr(v, "fn", None)
    if hasattr(v, "cache_key") and fn is not None and "<locals>" not in fn.__qualname__:
        return {"jit": [fn.__module__, fn.__qualname__]}
    raise TypeError(f"a constexpr of type {kind} has no manifest form")


def _decode(v: Any) -> Any:
    if not isinstance(v, dict):
        return v
    if "float" in v:
        return float(v["float"])
    if "tuple" in v:
        return tuple(_decode(x) for x in v["tuple"])
    import triton.language as tl  # only while warming

    if "dtype" in v:
        return tl.dtype(v["dtype"])
    if "constexpr" in v:
        return tl.constexpr(_decode(v["constexpr"]))
    if "jit" in v:
        module, qualname = v["jit"]
        return _unwrap(_resolve(module, qualname, None))
    raise ValueError(f"unknown value form {sorted(v)}")


def _tuples(v: Any) -> Any:
    """Lists back to tuples, recursively (JSON has no tuple; Triton's options and signatures use them)."""
    return tuple(_tuples(x) for x in v) if isinstance(v, (list, tuple)) else v


# --- recording ----------------------------------------------------------------------------------------------


def _target_name(target: Any) -> str | None:
    """``sm90`` / ``gfx942`` for a ``GPUTarget`` (or its dict form), ``None`` for another backend."""
    if isinstance(target, Mapping):
        backend, arch = target.get("backend"), target.get("arch")
    else:
        backend, arch = getattr(target, "backend", None), getattr(target, "arch", None)
    if backend == "cuda" and isinstance(arch, int):
        return f"sm{arch}"
    if backend == "hip" and isinstance(arch, str):
        return arch
    return None


_DEFAULT_OPTIONS: dict[str, dict[str, Any]] = {}


def _default_options(target: str) -> dict[str, Any]:
    """The options Triton's backend fills in for ``target`` when a launch asks for none."""
    if target not in _DEFAULT_OPTIONS:
        from triton.compiler.compiler import make_backend

        from harness.compile.targets import parse_target

        backend = make_backend(parse_target(target).gpu_target())
        _DEFAULT_OPTIONS[target] = {k: _tuples(v) for k, v in backend.parse_options({}).__dict__.items()}
    return _DEFAULT_OPTIONS[target]


def _rel(path: str, rootdir: Path | None) -> str:
    if rootdir is not None and path:
        try:
            return Path(path).resolve().relative_to(rootdir.resolve()).as_posix()
        except ValueError:
            pass
    return path


def entry_of(src: Any, metadata: Mapping[str, Any], rootdir: Path | None = None) -> dict[str, Any]:
    """The manifest entry of one compile: the kernel (module, qualname, file), the target, the specialization
    (signature, constexprs, attributes, keyed by argument path as Triton keys them) and the options that differ
    from the backend's defaults (so another machine's libdevice path is never written down).
    ``TypeError``/``ValueError`` when the compile cannot be recorded (say why)."""
    jit = getattr(src, "fn", None)
    pyfn = getattr(jit, "fn", None)
    if pyfn is None or not hasattr(src, "signature"):
        raise TypeError("not a @triton.jit source (an IR file or a generated kernel)")
    if "<locals>" in pyfn.__qualname__:
        raise ValueError(f"{pyfn.__qualname__} is defined inside a function: nothing can import it")
    target = _target_name(metadata.get("target"))
    if target is None:
        raise ValueError(f"target {metadata.get('target')!r} is neither CUDA nor ROCm")
    defaults = _default_options(target)
    options = {k: _tuples(metadata[k]) for k in defaults if k in metadata}
    options = {k: v for k, v in options.items() if v != defaults[k]}
    return {
        "module": pyfn.__module__,
        "qualname": pyfn.__qualname__,
        "file": _rel(inspect.getsourcefile(pyfn) or "", rootdir),
        "target": target,
        "signature": [[k, v] for k, v in src.signature.items()],  # in order: the kernel's name may follow it
        # In Triton's order: the cache key holds str(attrs), so the order is part of the key.
        "constexprs": [[list(k), _encode(v)] for k, v in src.constants.items()],
        "attrs": [[list(k), v] for k, v in src.attrs.items()],
        "options": options,
    }


def _entry_id(entry: Mapping[str, Any]) -> str:
    return json.dumps(entry, sort_keys=True)


@dataclass
class Listener:
    """Counts a process's Triton compiles (compiled, read from Triton's on-disk cache, seconds compiling) and,
    with ``record``, keeps each distinct compile as a manifest entry. Installed as
    ``triton.knobs.compilation.listener`` by :func:`install_listener`; never raises into a compile."""

    record: bool = False
    rootdir: Path | None = None
    compiled: int = 0
    cached: int = 0
    seconds: float = 0.0
    slowest: float = 0.0
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)
    not_recorded: dict[str, str] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __call__(self, *, src: Any, metadata: Mapping[str, Any], times: Any, cache_hit: bool, **_: Any) -> None:
        try:
            dt = float(getattr(times, "total", 0)) / 1e6  # Triton's CompileTimes are in microseconds
            entry = why = None
            if self.record:
                try:
                    entry = entry_of(src, metadata, self.rootdir)
                except (TypeError, ValueError) as e:
                    why = str(e)
            with self._lock:
                if cache_hit:
                    self.cached += 1
                else:
                    self.compiled += 1
                    self.seconds += dt
                    self.slowest = max(self.slowest, dt)
                if entry is not None:
                    self.entries.setdefault(_entry_id(entry), entry)
                elif why is not None:
                    name = getattr(getattr(getattr(src, "fn", None), "fn", None), "__qualname__", repr(src))
                    self.not_recorded[name] = why
        except Exception:  # noqa: BLE001 - a listener must never fail the compile it watches
            pass

    def counts(self) -> dict[str, float]:
        return {"compiled": self.compiled, "cached": self.cached, "seconds": round(self.seconds, 3),
                "slowest": round(self.slowest, 3)}


def install_listener(patch: Patch, listener: Listener) -> None:
    """Make ``listener`` Triton's compilation listener, through ``patch`` (a listener already there is called
    after it). ``RuntimeError`` on a Triton without ``knobs.compilation.listener`` (before 3.4)."""
    try:
        from triton import knobs
    except ImportError:
        raise RuntimeError("recording compiles needs Triton >= 3.4 (triton.knobs.compilation.listener)") from None
    before = knobs.compilation.listener

    def chained(**kw: Any) -> None:
        listener(**kw)
        if before is not None:
            before(**kw)

    patch.setattr(knobs.compilation, "listener", chained, tag="compile-listener")


# --- the manifest -------------------------------------------------------------------------------------------


def write_manifest(path: str | os.PathLike[str], entries: Iterable[Mapping[str, Any]]) -> int:
    """Write the manifest (entries sorted, duplicates dropped: a stable file to commit); the entry count."""
    from harness.versions import triton_version

    unique = {_entry_id(e): dict(e) for e in entries}
    rows = [unique[k] for k in sorted(unique)]
    targets = Counter(e["target"] for e in rows)
    head = {
        "format": FORMAT,
        "about": "kernel specializations a GPU run of this suite compiled (--harness-record-launches); "
                 "`python -m harness compile --warm FILE` compiles them into Triton's cache before the next run",
        "triton": triton_version(),
        "recorded": datetime.date.today().isoformat(),
        "target": targets.most_common(1)[0][0] if targets else None,
    }
    # One launch a line: a re-recorded manifest diffs by launch.
    lines = [f" {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()]
    body = ",\n".join(f"  {json.dumps(e)}" for e in rows)
    text = "{\n" + "\n".join(lines) + '\n "launches": [\n' + body + ("\n" if rows else "") + " ]\n}\n"
    Path(path).write_text(text, encoding="utf-8")
    return len(rows)


def read_manifest(path: str | os.PathLike[str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(header, entries) of a manifest; ``ValueError`` naming the file and what was expected."""
    p = Path(path)
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{p}: no such manifest (record one with `tox -e gpu -- --harness-record-launches={p}` "
                         f"on the GPU machine)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{p}: not a launch manifest (expected JSON written by --harness-record-launches): "
                         f"{e}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        got = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
        raise ValueError(f"{p}: manifest format {got!r}, expected {FORMAT} (record it again)")
    rows = doc.get("launches")
    if not isinstance(rows, list):
        raise ValueError(f"{p}: 'launches' must be a list of entries, got {type(rows).__name__}")
    for i, e in enumerate(rows):
        missing = [k for k in _ENTRY_KEYS if not isinstance(e, dict) or k not in e]
        if missing:
            raise ValueError(f"{p}: launches[{i}] lacks {', '.join(missing)} (expected the keys "
                             f"{', '.join(_ENTRY_KEYS)})")
    return {k: v for k, v in doc.items() if k != "launches"}, rows


# --- warming ------------------------------------------------------------------------------------------------


@dataclass
class WarmResult:
    """What :func:`warm` did: per entry an outcome (``compiled``, ``cached`` = already in Triton's cache,
    ``failed`` = the compiler refused it, as the GPU run will; ``skipped`` = not compilable from the manifest),
    the seconds of compiling summed over processes, and the wall time."""

    target: str
    jobs: int
    outcomes: Counter[str] = field(default_factory=Counter)
    cpu_seconds: float = 0.0
    wall_seconds: float = 0.0
    details: list[tuple[str, str, str]] = field(default_factory=list)  # (outcome, kernel, why) not compiled

    def summary(self, manifest: str, cache: str) -> str:
        o = self.outcomes
        parts = [f"{o['compiled']} compiled", f"{o['cached']} already cached"]
        parts += [f"{o[k]} {k}" for k in ("failed", "skipped", "other target") if o[k]]
        return (f"harness compile --warm: {sum(o.values())} launches from {manifest} for {self.target}: "
                f"{', '.join(parts)}; {self.wall_seconds:.1f}s wall, {self.cpu_seconds:.1f}s compiling in "
                f"{self.jobs} processes; Triton cache {cache}")


def _resolve(module: str, qualname: str, file: str | None, rootdir: Path | None = None) -> Any:
    """The object ``module.qualname``; a test module that pytest imported by file is found from ``file``."""
    try:
        mod = importlib.import_module(module)
    except ImportError:
        if not file:
            raise
        path = Path(file)
        if not path.is_absolute() and rootdir is not None:
            path = rootdir / path
        base = path.resolve().parent
        for _ in range(module.count(".")):
            base = base.parent
        if str(base) not in sys.path:
            sys.path.insert(0, str(base))
        mod = importlib.import_module(module)
    obj: Any = mod
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def _unwrap(obj: Any) -> Any:
    """The ``JITFunction`` under ``@triton.autotune`` / ``@triton.heuristics``."""
    while not hasattr(obj, "cache_key") and hasattr(obj, "fn"):
        obj = obj.fn
    if not hasattr(obj, "cache_key"):
        raise TypeError(f"{type(obj).__name__} is not a @triton.jit kernel")
    return obj


_LATCHED: set[str] = set()


def _compile_one(entry: Mapping[str, Any], target: str, rootdir: str) -> tuple[str, float, str]:
    """In a pool process: compile one entry for ``target``; (outcome, seconds, why)."""
    try:
        jit = _unwrap(_resolve(entry["module"], entry["qualname"], entry["file"], Path(rootdir)))
        signature = {k: _tuples(v) for k, v in entry["signature"]}
        constexprs = {tuple(k): _decode(v) for k, v in entry["constexprs"]}
        attrs = {tuple(k): v for k, v in entry["attrs"]}
        missing = [k for k in signature if k not in jit.arg_names]
        if missing or len(signature) != len(jit.arg_names):
            raise ValueError(f"the manifest's arguments ({', '.join(signature)}) no longer match the kernel's "
                             f"({', '.join(jit.arg_names)})")
    except BaseException as e:  # noqa: BLE001 - an import may raise pytest's Skipped, a BaseException
        if isinstance(e, KeyboardInterrupt):
            raise
        return "skipped", 0.0, f"{type(e).__name__}: {e}"[:300]
    import triton
    from triton import knobs
    from triton.compiler import ASTSource

    from harness.compile.cache import latch_e5m2
    from harness.compile.targets import parse_target

    tgt = parse_target(target)
    if target not in _LATCHED:  # the e5m2 lowering is process state Triton's cache key does not hold
        _LATCHED.add(target)
        latch_e5m2(tgt)
    hit: list[bool] = []
    before = knobs.compilation.listener
    knobs.compilation.listener = lambda **kw: hit.append(bool(kw.get("cache_hit")))
    options = {k: _tuples(v) for k, v in entry["options"].items()}
    t0 = time.perf_counter()
    try:
        # On a ptxas failure Triton prints the whole PTX to stdout; the error keeps the ptxas lines.
        with contextlib.redirect_stdout(io.StringIO()):
            triton.compile(ASTSource(jit, signature, constexprs, attrs), target=tgt.gpu_target(),
                           options=options or None)
    except Exception as e:  # noqa: BLE001 - the compiler's refusal is an outcome: the GPU run will meet it too
        first = (str(e).strip().splitlines() or [""])[0][:200]
        return "failed", time.perf_counter() - t0, f"{type(e).__name__}: {first}"
    finally:
        knobs.compilation.listener = before
    return ("cached" if hit and hit[-1] else "compiled"), time.perf_counter() - t0, ""


def _init_worker(path: Sequence[str]) -> None:
    # A kernel module decides interpreter or compiler when it is imported: this process compiles.
    os.environ["TRITON_INTERPRET"] = "0"
    # Triton 3.9 warns on every compile that leaves fp fusion to its default; the GPU run says it once itself.
    warnings.filterwarnings("ignore", message="TRITON_DEFAULT_FP_FUSION is unset")
    for p in reversed(path):
        if p not in sys.path:
            sys.path.insert(0, p)


def warm(entries: Sequence[Mapping[str, Any]], *, target: str, jobs: int, rootdir: str | os.PathLike[str]) -> \
        WarmResult:
    """Compile every entry recorded for ``target`` into Triton's on-disk cache, ``jobs`` processes at a time
    (``spawn``ed: they import the kernels afresh, compiling, never interpreting, and never initialize CUDA).
    Entries of another target are counted, not compiled."""
    from harness.compile.targets import check_targets, parse_target

    tgt = parse_target(target)
    check_targets((tgt,))
    result = WarmResult(tgt.name, jobs)
    todo = []
    for e in entries:
        if e["target"] != tgt.name:
            result.outcomes["other target"] += 1
        else:
            todo.append(e)
    t0 = time.perf_counter()
    root = str(Path(rootdir).resolve())
    if todo:
        ctx = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_init_worker,
                                                    initargs=([root, *sys.path],)) as pool:
            futures = {pool.submit(_compile_one, e, tgt.name, root): e for e in todo}
            for fut in concurrent.futures.as_completed(futures):
                e = futures[fut]
                try:
                    outcome, seconds, why = fut.result()
                except Exception as exc:  # noqa: BLE001 - a crashed process loses its entry, not the run
                    outcome, seconds, why = "skipped", 0.0, f"the compiling process died: {exc}"
                result.outcomes[outcome] += 1
                result.cpu_seconds += seconds
                if why:
                    result.details.append((outcome, f"{e['module']}.{e['qualname']}", why))
    result.wall_seconds = time.perf_counter() - t0
    result.details.sort()
    return result
