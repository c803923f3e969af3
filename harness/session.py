"""The one object that holds a pytest session's state, and the stack of open sessions.

Why one object: the arch, the lane, the tolerance table, the observation report, the interpreter patches and
each feature's run state (goldens, launch capture, compile counters, GPU pins) all begin and end with a
session. A pytester session nested in a test is a second session in the same process: it must see none of
the outer one's state and give it all back when it ends. One object pushed at the start and popped at the
end does that once, for everything, instead of one save/restore protocol per module.

Library code (``harness.compare``, ``harness.tolerances``, ``harness.fp8`` …) asks :func:`current` and works
the same with no session at all (plain Python, a benchmark script).

Features keep their per-session state as a :class:`Section` registered under a name. The session hands every
section to the xdist controller in one dict (:meth:`Session.to_worker` / :meth:`Session.merge_worker`) and
asks each for its part of the ``--harness-report`` JSON (:meth:`Session.report`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from harness.arch import ENV_ARCH, Arch, detect_arch, parse_arch
from harness.interp.patch import Patch

if TYPE_CHECKING:
    from harness.summary import Collector
    from harness.tolerances import ToleranceTable

__all__ = ["Section", "Session", "current", "current_arch", "pop", "push"]


class Section(Protocol):
    """A feature's per-session state, as the session sees it."""

    def to_worker(self) -> Any:
        """Plain data (JSON-able) an xdist worker hands to the controller; ``None`` when there is nothing."""

    def merge(self, data: Any) -> None:
        """Controller: fold in what one worker handed over."""

    def report(self) -> dict[str, Any] | None:
        """This feature's key of the ``--harness-report`` JSON; ``None`` leaves it out."""


@dataclass(eq=False)
class Session:
    """Per-session state. ``arch`` and ``lane`` are set when the plugin configures the session; before that
    (while the initial conftest files load) only the tolerance table and the report exist."""

    tolerances: ToleranceTable
    observations: Collector
    rootdir: Path
    arch: Arch | None = None
    lane: str | None = None
    sections: dict[str, Section] = field(default_factory=dict)
    #: every replacement the session's features make (interpreter shims, capture, env): undone when it closes
    patch: Patch = field(default_factory=Patch, repr=False)
    _undo: list[Callable[[], None]] = field(default_factory=list, repr=False)

    def add_section(self, name: str, section: Section) -> None:
        if name in self.sections:
            raise ValueError(f"session section {name!r} is already registered")
        self.sections[name] = section

    def on_close(self, undo: Callable[[], None]) -> None:
        """Run ``undo`` when the session ends (in reverse order of registration), before :attr:`patch` is
        undone: what is not a replacement (a listener's last flush, say). Replacements go through :attr:`patch`."""
        self._undo.append(undo)

    def to_worker(self) -> dict[str, Any]:
        """Everything an xdist worker hands over: the observations and each section's data, by name."""
        out: dict[str, Any] = {"observations": self.observations.to_dicts()}
        for name, section in self.sections.items():
            data = section.to_worker()
            if data is not None:
                out[name] = data
        return out

    def merge_worker(self, data: dict[str, Any]) -> None:
        self.observations.merge(data.get("observations", ()))
        for name, section in self.sections.items():
            if name in data:
                section.merge(data[name])

    def report(self) -> dict[str, Any]:
        """The ``--harness-report`` JSON: the observation table, then each section's key."""
        out = self.observations.report()
        for name, section in self.sections.items():
            part = section.report()
            if part is not None:
                out[name] = part
        return out

    def close(self) -> None:
        try:
            while self._undo:
                self._undo.pop()()
        finally:
            self.patch.undo()


_stack: list[Session] = []


def push(session: Session) -> None:
    _stack.append(session)


def pop(session: Session) -> None:
    """End ``session``: run its undo steps and make the enclosing session (if any) current again. Sessions end
    innermost first; anything else is a bug in the caller."""
    if not _stack or _stack[-1] is not session:
        raise RuntimeError("harness.session.pop: sessions must end innermost first")
    try:
        session.close()
    finally:
        _stack.pop()


def current() -> Session | None:
    """The innermost open session, or ``None`` outside pytest."""
    return _stack[-1] if _stack else None


def current_arch() -> Arch:
    """The arch the running session is judged as; outside a session ``HARNESS_ARCH``, else what is detected."""
    s = current()
    if s is not None and s.arch is not None:
        return s.arch
    env = os.environ.get(ENV_ARCH)
    if not env:
        return detect_arch()
    try:
        return parse_arch(env)
    except ValueError as e:
        raise ValueError(f"{ENV_ARCH}={env}: {e}") from None
