"""The ``replay`` section of a session: every graph-replay, determinism and batch-invariance check, for the
``--harness-report`` JSON and for the plugin's "marked but never checked" rule.

The checks record here through :func:`record`, which is a no-op outside a pytest session (a script calling
the asserts). Each record is plain data, handed from xdist workers to the controller as the session's other
sections are.
"""

from __future__ import annotations

from typing import Any

from harness import session as sessions

__all__ = ["SECTION", "Results", "record"]

SECTION = "replay"

#: The kinds of check, in report order.
CHECKS = ("graph_replay", "deterministic", "batch_invariant")


class Results:
    """Every check of the session (a worker's own, or on the controller everyone's)."""

    def __init__(self) -> None:
        self.checks: list[dict[str, Any]] = []
        #: (test, kind) of every check made in this process, reported or not (the plugin's "marked but never
        #: checked" rule reads it in the process that ran the test)
        self.made: set[tuple[str, str]] = set()

    def add(self, check: dict[str, Any]) -> None:
        self.checks.append(check)

    def to_worker(self) -> list[dict[str, Any]] | None:
        return self.checks or None

    def merge(self, data: list[dict[str, Any]]) -> None:
        self.checks.extend(data)

    def report(self) -> dict[str, Any] | None:
        if not self.checks:
            return None
        return summarize(self.checks)


def summarize(checks: list[dict[str, Any]]) -> dict[str, Any]:
    """The report key: the counts of each kind (passed / failed), then every check sorted by test."""
    counts = {k: {"passed": 0, "failed": 0} for k in CHECKS}
    for c in checks:
        counts.setdefault(c["check"], {"passed": 0, "failed": 0})["passed" if c["passed"] else "failed"] += 1
    ordered = sorted(checks, key=lambda c: (str(c["test"]), str(c["check"]), str(c["fn"])))
    return {"counts": {k: v for k, v in counts.items() if v["passed"] or v["failed"]}, "checks": ordered}


def record(kind: str, fn: str, *, passed: bool, detail: dict[str, Any]) -> None:
    """Record one check in the current session's section (nothing outside a session, without the section, or in a
    test marked ``unreported``: its deliberate failures are not the suite's)."""
    s = sessions.current()
    section = s.sections.get(SECTION) if s is not None else None
    if not isinstance(section, Results):
        return
    test = s.observations.current_test
    section.made.add((test, kind))
    if not s.observations.paused:
        section.add({"test": test, "check": kind, "fn": fn, "passed": passed, **detail})
