"""Observed error vs tolerance, aggregated over a session.

Every harness check calls :func:`record`. The plugin turns the records into a terminal table per
op × dtype × arch (checks, failures, worst ULP / abs error, the tolerance, the headroom), a JSON file
(``--harness-report=PATH``) and JUnit properties. Why: a suite that is green by a hair on one arch is a
suite about to flake; the headroom column shows it before it does.

The collector of a session is :attr:`harness.session.Session.observations`; under xdist each worker's
records travel to the controller in the session's one hand-off, so the table is the same with or without
``-n``.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from harness.session import current

__all__ = ["Collector", "Observation", "Row", "active", "observation_problem", "record", "render_table", "suspended"]


@dataclass
class Observation:
    op: str
    dtype: str
    arch: str
    n: int
    worst_ulp: int | None
    worst_abs: float | None
    tol: str
    max_ulp: int | None
    passed: bool
    worst_ratio: float | None = None  # max |err| / allowed over elements (float checks)
    test: str = ""


@dataclass
class Row:
    op: str
    dtype: str
    arch: str
    checks: int = 0
    failures: int = 0
    elements: int = 0
    worst_ulp: int | None = None
    worst_abs: float | None = None
    worst_ratio: float | None = None
    max_ulp: int | None = None
    tols: set[str] = field(default_factory=set)

    @property
    def headroom(self) -> str:
        """What is left before the tolerance: ULPs for code checks, fraction of the allowed error else."""
        if self.max_ulp is not None and self.worst_ulp is not None:
            return f"{self.max_ulp - self.worst_ulp} ulp"
        if self.worst_ratio is not None:
            if math.isinf(self.worst_ratio) or math.isnan(self.worst_ratio):
                return "none"
            return f"{(1.0 - self.worst_ratio):.0%}"
        return "-"


def _max(a: Any, b: Any) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    if isinstance(a, float) and math.isnan(a) or isinstance(b, float) and math.isnan(b):
        return float("nan")
    return max(a, b)


#: The JSON types of an :class:`Observation`'s fields, the optional ones last: what a report read back from a file
#: (``python -m harness report merge``) is checked against, so a malformed one is refused naming its field rather
#: than failing in :meth:`Collector.rows`' arithmetic.
_FIELD_TYPES: dict[str, tuple[str, tuple[type, ...]]] = {
    "op": ("a string", (str,)), "dtype": ("a string", (str,)), "arch": ("a string", (str,)),
    "n": ("an integer", (int,)), "worst_ulp": ("an integer or null", (int, type(None))),
    "worst_abs": ("a number or null", (int, float, type(None))), "tol": ("a string", (str,)),
    "max_ulp": ("an integer or null", (int, type(None))), "passed": ("true or false", (bool,)),
    "worst_ratio": ("a number or null", (int, float, type(None))), "test": ("a string", (str,)),
}
_OPTIONAL = ("worst_ratio", "test")


def observation_problem(d: Any) -> str:
    """Why ``d`` (one observation of a report's JSON) is no :class:`Observation` (empty when it is one)."""
    if not isinstance(d, dict):
        return f"a JSON {type(d).__name__}, not an object"
    unknown = sorted(set(d) - set(_FIELD_TYPES))
    if unknown:
        return f"unknown field {unknown[0]!r}"
    for name, (what, types) in _FIELD_TYPES.items():
        if name not in d:
            if name in _OPTIONAL:
                continue
            return f"no field {name!r}"
        v = d[name]
        # JSON true/false are Python bools, which are ints too: only 'passed' takes them
        if not isinstance(v, types) or (isinstance(v, bool) and bool not in types):
            return f"field {name!r} must be {what}, got {v!r}"
    return ""


class Collector:
    """Holds the observations of one process; ``merge`` adds a worker's."""

    def __init__(self) -> None:
        self.observations: list[Observation] = []
        self.current_test = ""
        self.current_item: Any = None
        self.paused = 0  # > 0 inside suspended(): checks are not recorded

    def set_test(self, nodeid: str, item: Any = None) -> None:
        """The test whose checks come next (its JUnit properties get them)."""
        self.current_test, self.current_item = nodeid, item

    @contextlib.contextmanager
    def suspended(self) -> Iterator[None]:
        """Checks inside are not recorded (self-tests of the checks, whose deliberate failures would otherwise
        show as failing rows of a green session)."""
        self.paused += 1
        try:
            yield
        finally:
            self.paused -= 1

    def add(self, obs: Observation) -> None:
        obs.test = obs.test or self.current_test
        self.observations.append(obs)
        item = self.current_item
        if item is not None:  # JUnit XML carries user_properties as <property> elements
            item.user_properties.append(
                (f"harness[{obs.op}/{obs.dtype}/{obs.arch}]",
                 f"n={obs.n} worst_ulp={obs.worst_ulp} worst_abs={_fmt(obs.worst_abs)} tol={obs.tol} "
                 f"passed={obs.passed}")
            )

    def to_dicts(self) -> list[dict[str, Any]]:
        return [asdict(o) for o in self.observations]

    def merge(self, dicts: Iterable[dict[str, Any]]) -> None:
        for d in dicts:
            self.observations.append(Observation(**d))

    def rows(self) -> list[Row]:
        table: dict[tuple[str, str, str], Row] = {}
        for o in self.observations:
            r = table.setdefault((o.op, o.dtype, o.arch), Row(o.op, o.dtype, o.arch))
            r.checks += 1
            r.failures += 0 if o.passed else 1
            r.elements += o.n
            r.worst_ulp = _max(r.worst_ulp, o.worst_ulp)
            r.worst_abs = _max(r.worst_abs, o.worst_abs)
            r.worst_ratio = _max(r.worst_ratio, o.worst_ratio)
            if o.max_ulp is not None:
                r.max_ulp = o.max_ulp if r.max_ulp is None else min(r.max_ulp, o.max_ulp)
            r.tols.add(o.tol)
        return [table[k] for k in sorted(table)]

    def report(self) -> dict[str, Any]:
        """The observation part of the ``--harness-report`` JSON."""
        rows = []
        for r in self.rows():
            d = asdict(r)
            d["tols"] = sorted(r.tols)
            d["headroom"] = r.headroom
            rows.append(d)
        return {"version": 1, "rows": rows, "observations": self.to_dicts()}


def _fmt(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.3g}"


def render_table(rows: list[Row]) -> list[str]:
    """Fixed-width lines for the terminal summary."""
    head = ("op", "dtype", "arch", "checks", "fail", "worst ulp", "worst abs", "tolerance", "headroom")
    body = []
    for r in rows:
        tol = "; ".join(sorted(r.tols))
        body.append((r.op, r.dtype, r.arch, str(r.checks), str(r.failures),
                     "-" if r.worst_ulp is None else str(r.worst_ulp), _fmt(r.worst_abs), tol, r.headroom))
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(head)]
    widths[7] = min(widths[7], 60)

    def line(cells: tuple[str, ...]) -> str:
        out = []
        for c, w in zip(cells, widths, strict=True):
            out.append((c if len(c) <= w else c[: w - 1] + "…").ljust(w))
        return "  ".join(out).rstrip()

    return [line(head), line(tuple("-" * w for w in widths))] + [line(b) for b in body]


def active() -> Collector | None:
    """The running session's collector, or None (no session, or inside :func:`suspended`)."""
    s = current()
    if s is None or s.observations.paused:
        return None
    return s.observations


@contextlib.contextmanager
def suspended() -> Iterator[None]:
    """The running session's checks inside the block stay out of its report (a no-op outside a session)."""
    s = current()
    if s is None:
        yield
        return
    with s.observations.suspended():
        yield


def record(*, op: str, dtype: str, arch: Any, n: int, worst_ulp: int | None = None,
           worst_abs: float | None = None, tol: Any = None, passed: bool, worst_ratio: float | None = None) -> None:
    """Note one check's outcome; a no-op outside a pytest session with the harness plugin."""
    col = active()
    if col is None:
        return
    max_ulp = getattr(tol, "max_ulp", None)
    tol_s = getattr(tol, "key", "") or (repr(tol) if tol is not None else "-")
    col.add(Observation(op=op or "-", dtype=str(dtype or "-"), arch=str(getattr(arch, "name", arch) or "-"),
                            n=int(n), worst_ulp=None if worst_ulp is None else int(worst_ulp),
                            worst_abs=None if worst_abs is None else float(worst_abs), tol=tol_s,
                            max_ulp=max_ulp, passed=bool(passed),
                            worst_ratio=None if worst_ratio is None else float(worst_ratio)))
