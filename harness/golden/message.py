"""Every failure text of a golden check, built by one function (:func:`format_failure`) from its record.

Why one function: a golden failure is a comparison report plus advice, and the advice depends on how the
check ended (missing, unreadable, refused path, mismatch, foreign arch, regenerated) and on where the file
came from. Built in one place, as pytest-regressions' ``perform_regression_check`` does, every outcome names
the file and the exact command that fixes it the same way. The fixture (``harness.golden.fixture``) decides
and compares, this module only writes, and ``Golden.check`` raises once. Tests pin these lines
(``tests/harness/golden/``).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any

from harness.compare.message import Mismatch, format_mismatch
from harness.text import fmt_index

__all__ = [
    "INT_ROWS",
    "GoldenFailure",
    "GoldenMismatch",
    "file_problem",
    "format_failure",
    "format_golden",
    "load_missing",
    "recapture_command",
    "regen_command",
    "review_failure",
]

#: Rows of the differing-elements table of an integer golden.
INT_ROWS = 10


def regen_command(selection: str) -> str:
    """The command that re-captures the goldens of ``selection`` (a node id or a pytest argument)."""
    return f"python -m harness golden regen {shlex.quote(selection)}"


def recapture_command(rel: str, selection: str) -> str:
    """The command that replaces a golden captured on another arch with this machine's output: a regen run
    never rewrites a foreign golden, but it creates a missing one."""
    return f"rm {shlex.quote(rel)} && {regen_command(selection)}"


def load_missing(rel: str, nodeid: str, other_test: str | None = None) -> str:
    """``golden.load`` of a file that does not exist, with the command that creates it: this test's regen,
    or ``-k`` on ``other_test`` when the golden belongs to another test."""
    if other_test is None:
        how = regen_command(nodeid)
    else:
        how = f"python -m harness golden regen -k {shlex.quote(other_test.split('.')[-1])}"
    return f"golden file not found: {rel}\nCreate it with: {how}"


def file_problem(state: str, error: Any) -> str:
    """What was wrong with the file a regen run rewrote ("" for a readable one); also the change list's
    ``reason``."""
    return "missing" if state == "missing" else f"unreadable ({error})" if state == "unreadable" else ""


@dataclass
class GoldenMismatch:
    """A tensor that does not match its golden file: the comparison part of a failure."""

    name: str
    path: str  # as reports name it (relative to the rootdir)
    generated_on: Any
    device: Any
    torch_version: Any
    triton_version: Any
    running_on: Any
    layout: str = ""  # dtype/shape difference: then nothing else is compared
    tol: Any = None  # None: integer/bool tensors, which compare exactly
    why: str = ""  # why that tolerance ("same arch: bit-exact", "cross-arch (a -> b)", "explicit tol=")
    mismatch: Mismatch | None = None  # the float/FP8 comparison, when it failed
    bits_differ: int = 0  # equal in value, different in bits, where bit-exact is required
    n: int = 0
    int_k: int = 0  # integer/bool: elements that differ, and the first INT_ROWS of them
    int_rows: list[tuple[tuple[int, ...], Any, Any]] = field(default_factory=list)


def format_golden(m: GoldenMismatch) -> str:
    """Which golden, where and how it was captured, the tolerance, then what differs."""
    lines = [
        f"golden {m.name!r} does not match {m.path}",
        f"  golden: generated on {m.generated_on} ({m.device}), torch {m.torch_version}, triton "
        f"{m.triton_version}; running on {m.running_on}",
    ]
    if m.layout:
        lines.append(f"  {m.layout}")
    elif m.tol is None:
        lines.append("  tolerance: exact (integer/bool tensors)")
        lines.append(f"  Mismatched elements: {m.int_k} / {m.n} ({m.int_k / max(m.n, 1):.1%})")
        lines.append("  index  obtained  expected")
        lines += [f"  {fmt_index(at)}  {a}  {b}" for at, a, b in m.int_rows]
        if m.int_k > len(m.int_rows):
            lines.append(f"  ... {m.int_k - len(m.int_rows)} more")
    else:
        lines.append(f"  tolerance: {m.tol!r} ({m.why})")
        if m.mismatch is not None:
            lines.append(format_mismatch(m.mismatch))
        elif m.bits_differ:
            lines.append(
                f"  {m.bits_differ} / {m.n} elements are equal in value but differ in bits (signed zero or NaN "
                f"payload); bit-exact is required on the generating arch"
            )
    return "\n".join(lines)


@dataclass
class GoldenFailure:
    """How one ``golden.check`` ended, when it did not simply pass: everything its text needs."""

    outcome: str  # decide()'s outcome: a fail-* one, or write-review (rewritten under --golden-regen)
    name: str
    path: str  # relative to the rootdir
    nodeid: str
    state: str  # the file's state (decide's FILE_STATES)
    generated_on: str | None  # the arch the file names (None: unknown)
    running_on: str | None
    ci: bool = False  # CI is set: a missing golden is never created here
    error: Any = None  # what is wrong with the file (refused, unreadable)
    mismatch: GoldenMismatch | None = None  # the comparison, when one failed
    change: str = ""  # write-review: what the rewrite changed


def format_failure(f: GoldenFailure) -> str:
    """The text of every golden check that did not pass: what happened, then the command that fixes it."""
    compared = format_golden(f.mismatch) if f.mismatch is not None else None
    if f.outcome == "fail-missing":
        how = ("Goldens are never created in CI (CI is set); create it locally and commit it:" if f.ci
               else "Create it with:")
        return f"golden {f.name!r} not found: {f.path}\n{how}\n    {regen_command(f.nodeid)}"
    if f.outcome == "fail-refused":
        return str(f.error)
    if f.outcome == "write-review":
        problem = file_problem(f.state, f.error)
        if problem:
            return f"golden {f.name!r} regenerated: {f.path} ({f.change}; was {problem})"
        return f"golden {f.name!r} regenerated: {f.path} ({f.change})\nprevious comparison:\n{compared}"
    gen, here = f.generated_on, f.running_on
    foreign = (f"{f.path} was captured on {gen} and this run is {here}; a run here never rewrites it.\n"
               f"To update it, run on {gen}:\n    {regen_command(f.nodeid)}\n"
               f"or, to replace it with this arch's output on purpose:\n    {recapture_command(f.path, f.nodeid)}")
    if f.outcome == "fail-unreadable":
        advice = f"To rewrite it: {regen_command(f.nodeid)}" if gen in (None, here) else foreign
        return f"{f.error}\n{advice}"
    if f.outcome == "fail-mismatch":
        advice = (f"To update it: {regen_command(f.nodeid)}  (or pytest --golden-regen)" if gen == here
                  else f"{foreign}\n(or, if the difference is expected across arches, widen the tolerance "
                       f"row named above)")
        return f"{compared}\n{advice}"
    if f.outcome == "fail-foreign":
        return f"{compared or f.error}\nNot rewritten: {foreign}"
    raise AssertionError(f"golden: unknown outcome {f.outcome!r}")  # decide() returned something new


def review_failure(regenerated: list[str]) -> str:
    """The end-of-test failure of a test whose checks rewrote goldens under ``--golden-regen``."""
    return ("\n\n".join(regenerated) + "\n(--golden-regen: the test fails so that the new golden is reviewed; "
            "it passes on the next run)")
