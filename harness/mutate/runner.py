"""Running mutants: one record run of the user's tests (which test launched which kernel, and that they pass
unmutated), then one child pytest per mutant over the tests that launched its kernel, and the report.

Why a child process per mutant: Triton, the interpreter and the harness keep per-process caches keyed by a
kernel's function object and file; a fresh process is the one copy of the module that cannot leak into the next
mutant. Children run with ``-x`` (a mutant is killed by its first failing test), ``-p no:cacheprovider`` (no
``.pytest_cache`` of the user's rewritten by mutants) and ``-p harness.mutate.plugin``. Each is forked from a
server process that imported torch once (multiprocessing's fork server: about a second of every child's start), and
then runs as ``python -m pytest`` would, in its own session; ``HARNESS_MUTATE_FRESH=1`` starts fresh interpreters.

Outcomes: ``killed`` (a test failed, or collection failed on the mutant), ``timeout`` (counted killed: the
mutant hangs a test), ``survived`` (every test passed, or no test launched the kernel), ``declared`` (an
equivalent mutant declared in place; not run), ``error`` (the child could not run the tests: pytest's usage or
internal error, no test collected, or the mutated module was never imported).
"""

from __future__ import annotations

import ast
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.mutate.hook import ENV as MUTANT_ENV
from harness.mutate.mutations import Mutant, Target, find_function, jit_functions

__all__ = ["Outcome", "Record", "Report", "record", "tests_for", "run_mutant", "run_all"]

KILLED = ("killed", "timeout")


@dataclass
class Outcome:
    mutant: Mutant
    status: str
    tests: int = 0
    seconds: float = 0.0
    detail: str = ""
    killed_by: str = ""  # the node id of the test that failed

    def to_json(self) -> dict[str, Any]:
        m = self.mutant
        return {"id": m.id, "file": m.file, "kernel": m.kernel, "line": m.line, "col": m.col, "kind": m.kind,
                "status": self.status, "tests": self.tests, "seconds": round(self.seconds, 2),
                "detail": self.detail, "killed_by": self.killed_by, "declared": m.declared, "diff": m.diff}


@dataclass
class Report:
    outcomes: list[Outcome]
    record_seconds: float = 0.0
    wall_seconds: float = 0.0
    pytest_args: list[str] = field(default_factory=list)

    def count(self, *status: str) -> int:
        return sum(o.status in status for o in self.outcomes)

    @property
    def kill_rate(self) -> float | None:
        n = len(self.outcomes) - self.count("declared")
        return self.count(*KILLED) / n if n else None

    def exit_code(self) -> int:
        return 0 if self.count("survived", "error") == 0 else 1

    def to_json(self) -> dict[str, Any]:
        return {"kill_rate": self.kill_rate, "mutants": len(self.outcomes),
                **{s: self.count(s) for s in ("killed", "timeout", "survived", "declared", "error")},
                "record_seconds": round(self.record_seconds, 1), "wall_seconds": round(self.wall_seconds, 1),
                "pytest_args": self.pytest_args, "outcomes": [o.to_json() for o in self.outcomes]}

    def lines(self) -> list[str]:
        rows: dict[str, dict[str, int]] = {}
        for o in self.outcomes:
            r = rows.setdefault(f"{o.mutant.file}::{o.mutant.kernel}", {})
            r[o.status] = r.get(o.status, 0) + 1
        head = ("kernel", "mutants", "killed", "survived", "declared", "error", "kill rate")
        table = []
        for k, r in rows.items():
            n, killed = sum(r.values()), r.get("killed", 0) + r.get("timeout", 0)
            live = n - r.get("declared", 0)
            table.append((k, str(n), str(killed), str(r.get("survived", 0)), str(r.get("declared", 0)),
                          str(r.get("error", 0)), f"{killed / live:.0%}" if live else "-"))
        w = [max(len(h), *(len(t[i]) for t in table)) if table else len(h) for i, h in enumerate(head)]
        out = ["  ".join(h.ljust(x) for h, x in zip(head, w, strict=True)).rstrip(), "  ".join("-" * x for x in w)]
        out += ["  ".join(c.ljust(x) for c, x in zip(t, w, strict=True)).rstrip() for t in table]
        rate = self.kill_rate
        out.append(f"{len(self.outcomes)} mutants: {self.count(*KILLED)} killed ({self.count('timeout')} by timeout), "
                   f"{self.count('survived')} survived, {self.count('declared')} declared equivalent, "
                   f"{self.count('error')} errors; kill rate {'-' if rate is None else f'{rate:.1%}'}; "
                   f"{self.wall_seconds:.0f} s")
        for o in self.outcomes:
            if o.status in ("survived", "error"):
                m = o.mutant
                out += ["", f"{o.status.upper()}: {m.file}:{m.line}:{m.col} {m.kind} in {m.kernel}"
                        + (f" ({o.detail})" if o.detail else ""), m.diff.rstrip("\n")]
        return out


def _child_env(extra: dict[str, str]) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTEST_XDIST_WORKER", None)
    env.update(extra)
    return env


def _pytest_cmd(pytest_args: Sequence[str], *extra: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "-p", "harness.mutate.plugin", "-p", "no:cacheprovider", *extra,
            *pytest_args]


#: Set to 1 to start every child as a fresh interpreter (``python -m pytest``) instead of forking it from a
#: process that has imported torch once.
FRESH_ENV = "HARNESS_MUTATE_FRESH"
#: what the fork server imports before it forks: torch alone (about a second of each child's start). Not Triton:
#: ``triton.language``'s own ``@jit`` functions are made interpreted or compiled by ``TRITON_INTERPRET`` at import
_PRELOAD = ["torch"]
_FORK_LOCK = threading.Lock()
_FORK: list[Any] = []


def _fork_context() -> Any:
    """multiprocessing's fork server, preloading :data:`_PRELOAD`; ``None`` where there is none (not POSIX) or
    :data:`FRESH_ENV` asks for fresh interpreters."""
    if os.environ.get(FRESH_ENV, "") not in ("", "0"):
        return None
    import multiprocessing

    with _FORK_LOCK:
        if not _FORK:
            if "forkserver" not in multiprocessing.get_all_start_methods():
                _FORK.append(None)
            else:
                ctx = multiprocessing.get_context("forkserver")
                ctx.set_forkserver_preload(_PRELOAD)
                _FORK.append(ctx)
        return _FORK[0]


def _pytest_child(argv: list[str], env: dict[str, str], cwd: str, out: str) -> None:
    """A child's body in a process forked from the server: a session of its own (its xdist workers die with it),
    the child's environment and directory, its output to ``out``, then ``python -m pytest argv`` as a fresh
    interpreter would run it (the directory first on ``sys.path``), exiting with pytest's code."""
    os.setsid()
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.path.insert(0, cwd)
    code = 3
    try:
        import pytest

        code = int(pytest.main(argv))
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 - a closed stream: nothing more to write
                pass
        os._exit(code)


def _run_pytest(cmd: list[str], env: dict[str, str], timeout: float | None) -> tuple[int | None, str]:
    """Run ``cmd`` (a :func:`_pytest_cmd`): pytest's exit code (``None`` if killed after ``timeout`` seconds, with
    the children it started) and its output, stdout and stderr together."""
    ctx = _fork_context()
    if ctx is None:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the child's own process group (its xdist workers too)
            proc.communicate()
            return None, ""
        return proc.returncode, out
    fd, path = tempfile.mkstemp(prefix="mutate-child-", suffix=".log")
    os.close(fd)
    try:
        child = ctx.Process(target=_pytest_child, args=(cmd[3:], env, os.getcwd(), path), daemon=False)
        child.start()
        child.join(timeout)
        if child.exitcode is None:
            try:
                os.killpg(child.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            child.join()
            return None, ""
        with open(path, encoding="utf-8", errors="replace") as fh:
            return child.exitcode, fh.read()
    finally:
        os.unlink(path)


@dataclass
class Record:
    """The user's tests once, unmutated: pytest's exit code, nodeid -> launched (kernel, file), each test's
    seconds, the run's seconds and its output's tail."""

    code: int
    launched: dict[str, list[tuple[str, str]]]
    test_seconds: dict[str, float]
    seconds: float
    tail: str


def record(pytest_args: Sequence[str], workdir: Path) -> Record:
    """Run the user's tests once, unmutated, recording which test launched which kernel."""
    path = workdir / "record.json"
    t0 = time.monotonic()
    code, out = _run_pytest(_pytest_cmd(pytest_args, f"--harness-mutate-record={path}", "-q"), _child_env({}), None)
    seconds = time.monotonic() - t0
    launched: dict[str, list[tuple[str, str]]] = {}
    test_seconds: dict[str, float] = {}
    for f in sorted(workdir.glob("record.json*")):
        data = json.loads(f.read_text())
        for test, ks in data["launched"].items():
            launched.setdefault(test, []).extend((k, fl) for k, fl in ks)
        test_seconds.update(data["seconds"])
    return Record(3 if code is None else code, launched, test_seconds, seconds, out[-3000:])


def _callers(path: str, name: str) -> set[str]:
    """``name`` and the jit functions of its file that call it, directly or through others."""
    tree = ast.parse(Path(path).read_text(), filename=path)
    find_function(tree, name, f"{path}::{name}")
    calls = {f.name: {n.id for n in ast.walk(f) if isinstance(n, ast.Name)} for f in jit_functions(tree)}
    found, todo = {name}, [name]
    while todo:
        x = todo.pop()
        for f, used in calls.items():
            if x in used and f not in found:
                found.add(f)
                todo.append(f)
    return found


def tests_for(target: Target, launched: dict[str, list[tuple[str, str]]]) -> list[str]:
    """The tests that launched the target kernel, or (a device helper) a kernel of its file that calls it."""
    real = os.path.realpath(target.path)
    names = _callers(target.path, target.name)
    return [t for t, ks in launched.items()
            if any(os.path.realpath(f) == real and k.rsplit(".", 1)[-1] in names for k, f in ks)]


def run_mutant(m: Mutant, tests: Sequence[str], pytest_args: Sequence[str], timeout: float, workdir: Path) -> Outcome:
    """One mutant in a child pytest over ``tests``."""
    if m.declared is not None:
        return Outcome(m, "declared", detail=m.declared)
    if not tests:
        return Outcome(m, "survived", detail="no test launched the kernel")
    d = Path(tempfile.mkdtemp(prefix="m", dir=workdir))
    (d / "tests.json").write_text(json.dumps(list(tests)))
    loaded = d / "loaded"
    (d / "mutant.json").write_text(json.dumps({"path": os.path.abspath(m.file), "source": m.source,
                                               "loaded": str(loaded)}))
    env = _child_env({MUTANT_ENV: str(d / "mutant.json"), "HARNESS_MUTATE_TESTS": str(d / "tests.json")})
    t0 = time.monotonic()
    returncode, out = _run_pytest(_pytest_cmd(pytest_args, "-x", "-q", "--tb=line"), env, timeout)
    if returncode is None:
        return Outcome(m, "timeout", len(tests), time.monotonic() - t0, f"no result after {timeout:.0f} s")
    seconds = time.monotonic() - t0
    tail = out.strip().splitlines()[-1] if out.strip() else ""
    if not loaded.exists():
        return Outcome(m, "error", len(tests), seconds, f"the mutated module was never imported (pytest exit "
                                                        f"{returncode}: {tail})")
    if returncode == 0:
        return Outcome(m, "survived", len(tests), seconds)
    if returncode in (1, 2):
        failed = next((ln for ln in out.splitlines() if ln.startswith(("FAILED", "ERROR"))), tail)
        by = failed.split(" ", 1)[1].split(" - ", 1)[0] if failed.startswith(("FAILED ", "ERROR ")) else ""
        return Outcome(m, "killed", len(tests), seconds, failed[:300], by if by in tests else "")
    return Outcome(m, "error", len(tests), seconds, f"pytest exit {returncode}: {tail}")


def run_all(mutants: Sequence[tuple[Mutant, Sequence[str]]], pytest_args: Sequence[str], *, jobs: int,
            timeout: float, workdir: Path, progress: Callable[[Outcome], None] = lambda o: None,
            test_seconds: dict[str, float] | None = None) -> list[Outcome]:
    """Every mutant, ``jobs`` children at a time; outcomes in the mutants' order.

    A child stops at its first failing test (``-x``), so each runs its tests in this order: those that killed
    more of the same kernel's mutants so far first, then the fastest (``test_seconds``, from the record run).
    Which mutants are killed does not depend on the order; how long a killed one takes does."""
    kills: dict[tuple[str, str], dict[str, int]] = {}
    lock = threading.Lock()
    took = test_seconds or {}

    def one(mt: tuple[Mutant, Sequence[str]]) -> Outcome:
        m, tests = mt
        key = (m.file, m.kernel)
        with lock:
            k = kills.get(key, {})
            ordered = sorted(tests, key=lambda t: (-k.get(t, 0), took.get(t, 0.0)))
        o = run_mutant(m, ordered, pytest_args, timeout, workdir)
        if o.killed_by:
            with lock:
                n = kills.setdefault(key, {})
                n[o.killed_by] = n.get(o.killed_by, 0) + 1
        progress(o)
        return o

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(one, mutants))


