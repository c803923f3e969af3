"""Which compile outcomes of a captured launch are findings: :func:`check` compiles a launch and its widened
variants for the capture targets and judges each outcome; :class:`Report` counts them per kernel × target.

Why a failure is not always a finding: the arch model predicts some refusals (``e4nv`` below sm89), Triton
refuses a type for an arch by design, and a user may declare a known one
(:func:`harness.compile.launches.expect_compile_failure`); those are ``expected``. A variant failing where the
launch as run compiles is the bug widening exists to find.

Public API: :func:`check`, :func:`expected_reason`, :class:`Report`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.arch import supports_format
from harness.compile.disk_cache import Outcome, launch_outcome
from harness.compile.launches import FP8_FORMAT_OF_TYPE, Declarations, Launch, state, variants
from harness.compile.message import Finding

__all__ = ["Report", "check", "expected_reason"]

_TYPE_REFUSED = re.compile(r"type (fp8\w+) not supported in this architecture")


def expected_reason(launch: Launch, target: str, out: Outcome, declarations: Declarations) -> str | None:
    """Why a failure is expected: the arch model refuses an FP8 format the launch uses on ``target``
    (``e4nv`` below sm89...), Triton itself refused the type for the arch, or the kernel is among
    ``declarations``."""
    if out.ok:
        return None
    fmts = set(launch.fp8_formats())
    m = _TYPE_REFUSED.search(out.line)
    if m and m.group(1) in FP8_FORMAT_OF_TYPE:
        fmts.add(FP8_FORMAT_OF_TYPE[m.group(1)])
    for f in sorted(fmts):
        ok, why = supports_format(target, f)
        if not ok:
            return why
    return declarations.reason(launch, target, out.line)


def _counts() -> dict[str, int]:
    return {"ok": 0, "expected": 0, "failed": 0}


@dataclass
class Report:
    """What :func:`check` found for a set of launches: per (kernel, target) cell counts and findings; plain data
    an xdist worker hands over (:meth:`to_dict`) and the controller folds in (:meth:`merge`)."""

    cells: dict[tuple[str, str], dict[str, int]] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    compiles: int = 0
    cached: int = 0

    def bump(self, kernel: str, target: str, what: str) -> None:
        self.cells.setdefault((kernel, target), _counts())[what] += 1

    def to_dict(self) -> dict[str, Any]:
        return {"cells": [{"kernel": k, "target": t, **v} for (k, t), v in sorted(self.cells.items())],
                "findings": [f.__dict__ for f in self.findings], "compiles": self.compiles, "cached": self.cached}

    def merge(self, d: Mapping[str, Any]) -> None:
        for c in d.get("cells", []):
            cell = self.cells.setdefault((c["kernel"], c["target"]), _counts())
            for k in cell:
                cell[k] += int(c.get(k, 0))
        self.findings.extend(Finding(**f) for f in d.get("findings", []))
        self.compiles += int(d.get("compiles", 0))
        self.cached += int(d.get("cached", 0))


def check(launch: Launch, targets: Iterable[str], *, widen: bool = True, test: str = "",
          report: Report | None = None, directory: Path | None = None,
          widen_targets: Iterable[str] | None = None, declarations: Declarations | None = None) -> list[Finding]:
    """Compile ``launch`` (and, with ``widen``, its :func:`~harness.compile.launches.variants`) for
    ``targets``; the findings: the launch itself failing unexpectedly, or a variant failing where the launch
    compiles. Variants are compiled for ``widen_targets`` only when given (a subset, to bound the cost).
    ``declarations`` default to the running session's."""
    declared = declarations if declarations is not None else state().declarations
    wt = None if widen_targets is None else set(widen_targets)
    rep = report if report is not None else Report()
    found: list[Finding] = []
    vs = variants(launch) if widen else []
    for t in targets:
        base = launch_outcome(launch, t, directory)
        rep.compiles += 1
        rep.cached += base.cached
        if base.ok:
            rep.bump(launch.kernel, t, "ok")
        elif expected_reason(launch, t, base, declared):
            rep.bump(launch.kernel, t, "expected")
            continue
        else:
            rep.bump(launch.kernel, t, "failed")
            found.append(Finding(launch.kernel, t, launch.sig_text(), "", base.line, base.kind, test))
            continue
        for label, v in vs if wt is None or t in wt else ():
            out = launch_outcome(v, t, directory)
            rep.compiles += 1
            rep.cached += out.cached
            if out.ok or expected_reason(v, t, out, declared):
                continue
            rep.bump(launch.kernel, t, "failed")
            found.append(Finding(launch.kernel, t, v.sig_text(), label, out.line, out.kind, test))
    rep.findings.extend(found)
    return found
