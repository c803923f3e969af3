"""Where a distributed run's wall time goes: each xdist worker's start-up, its tests, and its wait for the
slowest worker.

Why: a lane's wall time is the slowest worker's start-up (spawn, imports, collection) plus its share of the
tests plus the time the others wait for its last test. JUnit and ``--durations`` hold only the tests' own times,
so a lane over its budget could not tell start-up from imbalance from slow tests (a GPU lane of 161.6 s
against 1,025 s of test time over 8 workers left 33 s unexplained). Each worker hands its clock readings
to the controller through the session's xdist hand-off; the controller prints them as one summary section.

Times are ``time.time()`` of each process, so they compare only between processes of one host (``-n``, not
remote ``--tx``). Nothing here is written to ``--harness-report``: a timeline belongs to one run and has no
meaning merged across shards.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any

import pytest

__all__ = ["Controller", "Worker", "WorkerTimes", "render"]

SECTION = "timeline"


@dataclass(frozen=True)
class WorkerTimes:
    """One worker's readings: seconds since the controller's session start, except ``busy`` (the summed
    setup, call and teardown durations of its tests). ``first`` and ``last`` are None if it ran no test."""

    worker: str
    ready: float
    tests: int
    busy: float
    first: float | None
    last: float | None


def render(workers: list[WorkerTimes], missing: int = 0) -> list[str]:
    """The summary lines for these workers (``missing``: workers that handed over no readings, e.g. crashed)."""
    lines = []
    ran = [w for w in workers if w.last is not None]
    if not workers:
        return [f"{missing} worker(s) handed over no timeline"] if missing else []
    end = max((w.last for w in ran), default=max(w.ready for w in workers))
    busy = sum(w.busy for w in workers)
    ready = [w.ready for w in workers]
    share = 100 * busy / (len(workers) * end) if end > 0 else 0.0
    lines.append(
        f"{len(workers)} workers; the last test ended {end:.1f} s after the session started; tests kept the "
        f"workers busy {share:.0f}% of {len(workers)} × {end:.1f} s"
    )
    lines.append(
        f"start-up (spawn, imports, collection): {min(ready):.1f}-{max(ready):.1f} s "
        f"(median {statistics.median(ready):.1f})"
    )
    lines.append(
        f"tests: {sum(w.tests for w in workers)} ran, {busy:.1f} s summed ({busy / len(workers):.1f} s a worker)"
    )
    if ran:
        idle = [end - w.last for w in ran]
        lines.append(
            f"idle after its last test, waiting for the slowest worker: {min(idle):.1f}-{max(idle):.1f} s "
            f"(median {statistics.median(idle):.1f})"
        )
    for w in sorted(workers, key=_order):
        span = "no test" if w.last is None else f"tests {w.first:.1f}-{w.last:.1f} s"
        tests = "1 test" if w.tests == 1 else f"{w.tests} tests"
        lines.append(f"{w.worker}: ready {w.ready:.1f} s, {tests}, busy {w.busy:.1f} s, {span}")
    if missing:
        lines.append(f"{missing} worker(s) handed over no timeline")
    return lines


def _order(w: WorkerTimes) -> tuple[int, str]:
    digits = w.worker[2:] if w.worker.startswith("gw") else ""
    return (int(digits), "") if digits.isdigit() else (1 << 30, w.worker)


class Worker:
    """Worker side: its clock readings, handed over as the session section ``timeline``."""

    def __init__(self, worker: str, started: float) -> None:
        self.worker = worker
        self.started = started  # the controller's session start (time.time()), from workerinput
        self.ready = 0.0
        self.tests = 0
        self.busy = 0.0
        self.first: float | None = None
        self.last: float | None = None

    def _now(self) -> float:
        return time.time() - self.started

    def pytest_collection_finish(self) -> None:
        self.ready = self._now()

    def pytest_runtest_logstart(self) -> None:
        if self.first is None:
            self.first = self._now()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.busy += report.duration

    def pytest_runtest_logfinish(self) -> None:
        self.tests += 1
        self.last = self._now()

    # the Section protocol (harness.session)
    def to_worker(self) -> dict[str, Any]:
        return dict(worker=self.worker, ready=self.ready, tests=self.tests, busy=self.busy, first=self.first,
                    last=self.last)

    def merge(self, data: Any) -> None:  # pragma: no cover - a worker merges nothing
        raise TypeError("a worker's timeline merges nothing")

    def report(self) -> None:
        return None


class Controller:
    """Controller side: the session start that every worker's readings count from, and the readings."""

    def __init__(self) -> None:
        self.started = time.time()  # moved to the session start by harness.plugin (before xdist spawns workers)
        self.workers: list[WorkerTimes] = []
        self.missing = 0  # workers that went down without readings (crashed, killed)

    def merge(self, data: Any) -> None:
        self.workers.append(WorkerTimes(**data))

    def to_worker(self) -> None:
        return None

    def report(self) -> None:
        return None

    def lines(self) -> list[str]:
        return render(self.workers, self.missing)
