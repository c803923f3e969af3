"""The outcome of compiling one captured launch for one target, kept on disk across processes and runs.

Why on disk: launch capture compiles every distinct launch and its widened variants for seven targets, and a
suite launches the same kernels run after run and in every xdist worker. The key is the kernel module's source
hash, the signature, constexprs, options, target and Triton version, and a file lock per key keeps concurrent
workers from compiling the same thing twice. (Within one process, :mod:`harness.compile.cache` also memoizes
the compile itself.)

The cache is an optimisation, never an authority: an entry is used only when it has the schema below and names the
launch and target it is read for; anything else is recompiled and rewritten. A cache that cannot be written (read
only, a path under a regular file, a full disk) is compiled around. Either problem is warned about once per
process (``RuntimeWarning``) and never fails a test.

Public API: :func:`cache_dir`, :class:`Outcome`, :func:`launch_outcome`, :func:`compile_launch`,
:func:`fresh_process_compiles`, :func:`cache_key`, :func:`helper_files`, :func:`source_hash`.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import os
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.compile.budget import ptxas_budget
from harness.compile.cache import FRESH_ENV, FRESH_MARK, compiles_in_fresh_process, specialized
from harness.compile.errors import BUDGET, NOT_APPLICABLE, error_kind, error_line
from harness.compile.launches import Launch, calls_dot_scaled, constexpr_text
from harness.compile.lowering import ptx_lowering
from harness.compile.matrix import compile_matrix
from harness.compile.signature import prepare
from harness.compile.targets import frontend_class, parse_target
from harness.versions import triton_at_least, triton_version

__all__ = ["BACKEND_OPTIONS", "Outcome", "cache_dir", "cache_key", "compile_launch", "fresh_process_compiles",
           "helper_files", "launch_outcome", "outcome_target", "representative", "source_hash"]

#: Bumped when what a cache entry holds (or how its error line is written) changes.
CACHE_FORMAT = "harness-launch-6"  # 4: the tl.dot_scaled lowering; 5: guard / type-rule kinds; 6: ptxas budget


def cache_dir() -> Path:
    """``$HARNESS_COMPILE_CACHE``, else ``$XDG_CACHE_HOME/lowp-harness/compile`` (``~/.cache/...``)."""
    env = os.environ.get("HARNESS_COMPILE_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "lowp-harness" / "compile"


_SRC_HASH: dict[str, str] = {}  # a module's source is read once per process


def source_hash(path: str) -> str:
    """sha256 of a module's source as this process runs it (a mutant's text in a mutant's process), ``"?"`` when
    the file cannot be read; read once per path per process."""
    hit = _SRC_HASH.get(path)
    if hit is None:
        from harness.mutate.hook import mutated_source  # a mutant's process: its module is not the file on disk

        text = mutated_source(path)
        try:
            hit = hashlib.sha256(Path(path).read_bytes() if text is None else text.encode()).hexdigest()
        except OSError:
            hit = "?"
        _SRC_HASH[path] = hit
    return hit


#: Launch options only the backend reads (warps and pipelining stages shape TTGIR and what follows, a register cap
#: ptxas): a frontend outcome is shared by launches differing in them only (autotune configs that change only these).
BACKEND_OPTIONS = frozenset({"num_warps", "num_stages", "maxnreg"})


def outcome_target(target: str, frontend: bool = False) -> str:
    """What an outcome is of: ``target`` for a full compile; for a frontend-only one, the target's
    :func:`~harness.compile.targets.frontend_class` (``frontend:`` and a short hash), which the targets of one class
    share."""
    if not frontend:
        return target
    cls = frontend_class(parse_target(target))
    return "frontend:" + hashlib.sha256(cls.encode()).hexdigest()[:12]


_HELPER_FILES: dict[int, tuple[Any, tuple[str, ...]]] = {}  # id(python function) -> (function, files)


def _jit_python_function(value: Any) -> Any:
    """The Python function of a ``@triton.jit`` (compiled or interpreted) value, else ``None``."""
    fn = getattr(value, "fn", None)
    if fn is None or not inspect.isfunction(fn) or not hasattr(value, "arg_names"):
        return None
    return fn


def _code_names(code: Any) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if inspect.iscode(const):
            names |= _code_names(const)
    return names


def helper_files(fn: Any) -> tuple[str, ...]:
    """The source files, other than the kernel's own and Triton's, of the ``@triton.jit`` helpers ``fn`` reaches
    through module globals (``helper(...)`` or ``module.helper(...)``), transitively, sorted. Why: a compile
    outcome depends on them as much as on the kernel's module (Triton's own cache hashes its callees too)."""
    pyfn = _jit_python_function(fn) or fn
    if not inspect.isfunction(pyfn):
        return ()
    hit = _HELPER_FILES.get(id(pyfn))
    if hit is not None and hit[0] is pyfn:
        return hit[1]
    import triton

    triton_dir = os.path.dirname(os.path.abspath(triton.__file__)) + os.sep
    own = inspect.getsourcefile(pyfn) or ""
    seen: set[int] = set()
    files: set[str] = set()
    todo = [pyfn]
    while todo:
        f = todo.pop()
        if id(f) in seen:
            continue
        seen.add(id(f))
        src = inspect.getsourcefile(f) or ""
        if src and src != own and not os.path.abspath(src).startswith(triton_dir):
            files.add(src)
        g = f.__globals__
        names = _code_names(f.__code__)
        for name in names:
            value = g.get(name)
            if inspect.ismodule(value):
                found = [getattr(value, n, None) for n in names]
            else:
                found = [value]
            for v in found:
                callee = _jit_python_function(v)
                if callee is not None:
                    todo.append(callee)
    out = tuple(sorted(files))
    _HELPER_FILES[id(pyfn)] = (pyfn, out)
    return out


def cache_key(launch: Launch, target: str, frontend: bool = False) -> str:
    """Source of the kernel's module and of its helpers' (:func:`helper_files`), signature, constexprs, options,
    target, Triton. A frontend-only outcome (``frontend``) is keyed by the target's frontend class instead of the
    target, and without the options only the backend reads (:data:`BACKEND_OPTIONS`)."""
    opts = tuple(o for o in launch.options if not (frontend and o[0] in BACKEND_OPTIONS))
    h = hashlib.sha256()
    for path in helper_files(launch.fn) if launch.fn is not None else ():
        h.update(source_hash(path).encode())
        h.update(b"\0")
    for part in (CACHE_FORMAT, source_hash(launch.file), launch.kernel, repr(launch.signature),
                 repr([(k, constexpr_text(v)) for k, v in launch.constexprs]), repr(opts),
                 outcome_target(target, frontend), triton_version()):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


@dataclass(frozen=True)
class Outcome:
    """One (launch, target) compile: ``ok``, else the kind (``refused``/``ptxas``/``guard``/``type-rule``,
    :func:`harness.compile.errors.error_kind`) and the compiler's line.
    ``lowering``: for a kernel that calls ``tl.dot_scaled`` and compiled, ``"native"`` (block-scaled MMA in the
    PTX) or ``"emulated"`` (:func:`harness.compile.lowering.ptx_lowering`); else empty. ``budget``: for kind
    ``budget`` (ptxas killed, not judged: :mod:`harness.compile.budget`), the seconds ptxas was given."""

    ok: bool
    kind: str = ""
    line: str = ""
    cached: bool = False
    lowering: str = ""
    budget: float = 0.0

    def retry_under(self, budget: float | None) -> bool:
        """Whether this over-budget outcome says nothing under ``budget`` (a bigger one, or none): ptxas may
        finish in the extra time."""
        return self.kind == BUDGET and (not budget or budget > self.budget)


def compile_launch(launch: Launch, target: str, frontend: bool = False, budget: float | None = None) -> Outcome:
    """Compile ``launch`` for ``target`` in this process (no disk cache); a Triton 3.6 ptxas failure stands
    only if a fresh process repeats it (:func:`fresh_process_compiles`). ``frontend``: Triton's frontend only
    (:func:`harness.compile.cache.compile_frontend`). ``budget``: ptxas's wall-clock seconds
    (:func:`harness.compile.budget.ptxas_budget`); past it the outcome is of kind ``budget``, not judged."""
    res = None if frontend else _specialized(launch, target)
    if res is None:
        with ptxas_budget(None if frontend else budget):
            res = compile_matrix(launch.fn, signature=launch.sig, constexprs=dict(launch.constexprs),
                                 targets=[target], options=dict(launch.options), frontend=frontend)[target]
    if frontend:
        return Outcome(True) if not isinstance(res, BaseException) else Outcome(False, error_kind(res),
                                                                               error_line(res, launch.fn))
    if isinstance(res, BaseException):
        out = Outcome(False, error_kind(res), error_line(res, launch.fn))
        if out.kind == BUDGET:
            return Outcome(False, BUDGET, out.line, budget=float(budget or 0.0))
        if (out.kind == "ptxas" and not triton_at_least(3, 7) and not os.environ.get(FRESH_ENV)
                and not getattr(res, FRESH_MARK, False) and fresh_process_compiles(launch, target)):
            return Outcome(True, lowering=_lowering(launch, None))
        return out
    return Outcome(True, lowering=_lowering(launch, res))


def _specialized(launch: Launch, target: str) -> object:
    """The lowering shim's compile of this launch for ``target`` in this process, specialized as the GPU's JIT
    compiles it (:func:`harness.compile.cache.specialized`), or ``None``. One over its ptxas budget says nothing
    about capture's budget: ``None`` then too."""
    try:
        jit, sig, consts = prepare(launch.fn, launch.sig, dict(launch.constexprs))
    except (TypeError, ValueError):
        return None  # compile_matrix says why, as for any launch
    res = specialized(jit, sig, consts, parse_target(target), dict(launch.options))
    return None if isinstance(res, BaseException) and error_kind(res) == BUDGET else res


def _lowering(launch: Launch, compiled: object) -> str:
    """The ``tl.dot_scaled`` lowering read from ``compiled``'s PTX; empty when the kernel calls no dot_scaled
    or there is no PTX (a compile confirmed only in a fresh process)."""
    if not calls_dot_scaled(launch):
        return ""
    asm = getattr(compiled, "asm", None)
    ptx = asm.get("ptx") if isinstance(asm, Mapping) else None
    return ptx_lowering(ptx) if isinstance(ptx, str) else ""


def fresh_process_compiles(launch: Launch, target: str) -> bool:
    """Compile ``launch`` for ``target`` again in a new Python process (``python -m harness compile``).

    Why: Triton 3.6 keeps some FP8 lowering choices as process state, so after other compiles in this process
    (an xdist worker's earlier tests) a cast that sm80 supports can come out as sm89 instructions and fail in
    ptxas: a false finding. A failure there is confirmed in a clean process before it is reported; findings
    are rare, so the extra process costs little."""
    return bool(compiles_in_fresh_process(launch.file, _qualname(launch), dict(launch.signature),
                                          dict(launch.constexprs), dict(launch.options), target))


def _qualname(launch: Launch) -> str:
    """The kernel's qualified name in its file: ``kernel``, or ``test_cast.<locals>.kernel`` for one defined
    inside a function (which ``python -m harness compile`` finds by its source)."""
    parts = launch.kernel.split(".")
    if "<locals>" in parts:
        return ".".join(parts[max(parts.index("<locals>") - 1, 0):])
    return parts[-1]


_warned: set[str] = set()


def _warn_once(what: str, text: str) -> None:
    if what in _warned:
        return
    _warned.add(what)
    warnings.warn(f"harness.compile: {text}", RuntimeWarning, stacklevel=4)


def _unwritable(d: Path, e: OSError) -> None:
    _warn_once("unwritable", f"the launch-outcome cache {d} cannot be written ({e.strerror or e}); launches are "
               f"compiled without it in this process (set HARNESS_COMPILE_CACHE to a writable directory)")


def _write_json(path: Path, data: object) -> None:
    """``data`` as ``path``, atomically (a temp file of this process, then ``os.replace``); the temp file never
    outlives a failed write."""
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    try:
        tmp.write_text(json.dumps(data))
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


def launch_outcome(launch: Launch, target: str, directory: Path | None = None, frontend: bool = False,
                   budget: float | None = None) -> Outcome:
    """The outcome of one launch on one target: read back from the disk cache (``directory``, default
    :func:`cache_dir`), else compiled (:func:`compile_launch`) and stored (see the module docstring for what a
    damaged or unwritable cache does). ``frontend``: Triton's frontend only, one outcome for the targets of a
    :func:`~harness.compile.targets.frontend_class`. ``budget``: ptxas's wall-clock seconds; a stored
    over-budget outcome is read back only under a budget no bigger than the one it ran under (a bigger budget,
    or none, compiles again)."""
    d = directory or cache_dir()
    key = cache_key(launch, target, frontend)
    path = d / key[:2] / f"{key}.json"
    stored = outcome_target(target, frontend)
    hit = _read(path, launch, stored)
    if hit is not None and not hit.retry_under(budget):
        return hit
    with contextlib.ExitStack() as stack:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            stack.enter_context(_file_lock(path.with_suffix(".lock")))
        except OSError as e:
            _unwritable(d, e)
            return _compile(launch, target, frontend, budget)
        hit = _read(path, launch, stored)
        if hit is not None and not hit.retry_under(budget):
            return hit
        # A ptxas failure is kept too: on Triton 3.6 compile_launch has confirmed it in a fresh process (the
        # e5m2 lowering latch, harness.compile.cache.E5m2Latch, cannot have caused it), on 3.7+ it stands.
        out = _compile(launch, target, frontend, budget)
        try:
            _write_json(path, {"ok": out.ok, "kind": out.kind, "line": out.line, "lowering": out.lowering,
                               "kernel": launch.kernel, "sig": launch.sig_text(), "target": stored,
                               "budget": out.budget})
        except OSError as e:
            _unwritable(d, e)
        return out


def _compile(launch: Launch, target: str, frontend: bool, budget: float | None) -> Outcome:
    return compile_launch(launch, target, frontend=True) if frontend else compile_launch(launch, target,
                                                                                         budget=budget)


def representative(launch: Launch, directory: Path | None = None) -> Launch:
    """The launch that stands for every launch of its configuration (:meth:`Launch.config_key`: the same but for
    integer sizes): the first one any process recorded for the configuration, kept on disk beside the outcomes.
    Why: which launch of a configuration an xdist worker meets first changes from run to run, and compiling
    whichever it was made warm reruns compile again; reading the recorded one back makes every run and every
    worker compile the same launch, whose outcome is then in the cache."""
    sizes = launch.sizes()
    if not sizes:
        return launch
    d = directory or cache_dir()
    h = hashlib.sha256()
    for part in (CACHE_FORMAT, "group", source_hash(launch.file), repr(launch.config_key()), triton_version()):
        h.update(part.encode())
        h.update(b"\0")
    key = h.hexdigest()[:32]
    path = d / "groups" / key[:2] / f"{key}.json"

    def recorded() -> Launch | None:
        try:
            got = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(got, dict) or set(got) != set(sizes) or not all(isinstance(v, int) for v in got.values()):
            return None
        return launch.with_types({}, got)

    hit = recorded()
    if hit is not None:
        return hit
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with _file_lock(path.with_suffix(".lock")):
            hit = recorded()
            if hit is not None:
                return hit
            _write_json(path, sizes)
    except OSError as e:
        _unwritable(d, e)
    return launch


#: An entry's fields and their types; ``kind`` of a failure is one of error_kind's, ``lowering`` one of
#: ptx_lowering's or empty.
_SCHEMA = {"ok": bool, "kind": str, "line": str, "lowering": str, "kernel": str, "sig": str, "target": str,
           "budget": float}
_KINDS = ("refused", "ptxas", BUDGET, *NOT_APPLICABLE)
_LOWERINGS = ("", "native", "emulated")


def _read(path: Path, launch: Launch, target: str) -> Outcome | None:
    """The entry at ``path`` if it is a valid outcome of ``launch`` on ``target``; None for a miss, and for a damaged
    entry too (warned once: it is recompiled and rewritten)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, ValueError):
        return None  # a miss (or unreadable: the write that follows says so if it fails too)
    try:
        d = json.loads(text)
    except ValueError:
        d = None
    problem = _invalid(d, launch, target)
    if problem:
        _warn_once("damaged", f"ignored a damaged launch-outcome cache entry {path} ({problem}); recompiled")
        return None
    return Outcome(d["ok"], d["kind"], d["line"], cached=True, lowering=d["lowering"], budget=float(d["budget"]))


def _invalid(d: object, launch: Launch, target: str) -> str:
    """Why ``d`` is no outcome of ``launch`` on ``target`` (empty when it is one)."""
    if not isinstance(d, dict):
        return f"not a JSON object but {type(d).__name__}"
    for k, t in _SCHEMA.items():
        if not isinstance(d.get(k), t):
            return f"{k!r} is {d.get(k)!r}, expected a {t.__name__}"
    if (d["kernel"], d["sig"], d["target"]) != (launch.kernel, launch.sig_text(), target):
        return f"it is the entry of {d['kernel']} ({d['sig']}) on {d['target']}"
    if not d["ok"] and d["kind"] not in _KINDS:
        return f"a failure of kind {d['kind']!r}"
    if d["lowering"] not in _LOWERINGS:
        return f"lowering {d['lowering']!r}"
    return ""


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
