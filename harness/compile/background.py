"""A warm start beside the GPU run: the file it writes when it ends, and the wait for that file.

Why: on a fresh GPU machine the lane was the warm start (every manifest entry compiled on every core), then
pytest's workers starting (imports, collection: 5-10 s, docs/gpu-lane.md), one after the other. Started in the
background instead, the warm start compiles while the workers start, and each worker waits only before its
first test, so no test compiles a kernel the warm start is about to put in Triton's cache.

The background process (``python -m harness compile --warm MANIFEST --background DONE``) writes its pid to
``DONE.pid`` before the launcher returns and, whatever happens, ``DONE`` when it ends: its exit status and
summary line, as JSON, written whole (a rename). :func:`wait_done` returns as soon as ``DONE`` exists, the
process is gone without writing it (or its pid now names another process), or the timeout passes: a warm start
that fails or dies costs the run its compiles, never a test.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DONE_ENV", "WAIT_ENV", "Waited", "clear", "pid_path", "wait_done", "write_done", "write_pid"]

#: Names the file a background warm start writes when it ends; a GPU-lane pytest process waits for it.
DONE_ENV = "HARNESS_WARM_DONE"
#: The most seconds a pytest process waits for it (default :data:`DEFAULT_WAIT_S`).
WAIT_ENV = "HARNESS_WARM_WAIT_S"
DEFAULT_WAIT_S = 900.0


def pid_path(done: str | os.PathLike[str]) -> Path:
    """Where the launcher writes the background process's pid."""
    return Path(f"{os.fspath(done)}.pid")


def clear(done: str | os.PathLike[str]) -> None:
    """Remove an earlier run's ``done`` and pid files (a waiter must not take them for this run's)."""
    for p in (Path(done), pid_path(done)):
        p.unlink(missing_ok=True)


def write_pid(done: str | os.PathLike[str], pid: int) -> None:
    _write_whole(pid_path(done), str(pid))


def write_done(done: str | os.PathLike[str], rc: int, summary: str) -> None:
    """The background warm start's last act: its exit status and summary line."""
    _write_whole(Path(done), json.dumps({"rc": rc, "summary": summary}))


def _write_whole(path: Path, text: str) -> None:
    """A reader sees the whole file or none (a pid read half-written would end the wait); a failed write leaves
    no temp file behind."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


@dataclass(frozen=True)
class Waited:
    """What one wait came to: the seconds waited and how it ended (``done``, ``failed (exit N)``, ``ended
    without a result``, ``timed out``, or ``not started`` when no background warm start was launched)."""

    seconds: float
    outcome: str


def _running(pid: int, done: Path) -> bool:
    """Whether the warm start that writes ``done`` is still running as ``pid``. Where ``/proc`` tells a process's
    command line, a process by that number that does not name ``done`` is not it (the number was reused after
    an earlier run), so nobody waits on it."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a process of another user by that number: not the one we started
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:  # no /proc here (or it went just now): the number is all there is to go by
        return True
    if stat.rpartition(b")")[2].split()[:1] == [b"Z"]:  # exited, not yet reaped: gone
        return False
    if argv == [b""]:  # a process in the middle of its exec shows no command line yet: cannot tell
        return True
    return os.fsencode(os.path.abspath(done)) in argv


def _read_pid(done: str | os.PathLike[str]) -> int | None:
    try:
        return int(pid_path(done).read_text().strip())
    except (OSError, ValueError):
        return None


def _outcome(done: Path) -> str | None:
    try:
        doc = json.loads(done.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return "ended with an unreadable result"
    rc = doc.get("rc") if isinstance(doc, dict) else None
    return "done" if rc == 0 else f"failed (exit {rc})"


def wait_done(done: str | os.PathLike[str], timeout: float = DEFAULT_WAIT_S, poll: float = 0.05) -> Waited:
    """Wait until the background warm start that writes ``done`` has ended, at most ``timeout`` seconds."""
    if timeout < 0:
        raise ValueError(f"wait_done: timeout must be >= 0 seconds, got {timeout}")
    t0 = time.monotonic()
    path = Path(done)
    while True:
        outcome = _outcome(path)
        if outcome is not None:
            return Waited(time.monotonic() - t0, outcome)
        pid = _read_pid(path)
        if pid is None:
            return Waited(time.monotonic() - t0, "not started")
        if not _running(pid, path):
            outcome = _outcome(path)  # it may have written the file just before it went
            return Waited(time.monotonic() - t0, outcome or "ended without a result")
        if time.monotonic() - t0 >= timeout:
            return Waited(time.monotonic() - t0, "timed out")
        time.sleep(poll)
