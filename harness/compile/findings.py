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

from harness.arch import (
    supports_bf16_arithmetic,
    supports_format,
    supports_int8_dot,
    supports_scaled_dot,
    supports_scaled_dot_emulation,
)
from harness.compile.disk_cache import Outcome, cache_key, launch_outcome
from harness.compile.errors import BUDGET, NOT_APPLICABLE
from harness.compile.launches import (
    FP8_FORMAT_OF_TYPE,
    SCALE_LABEL,
    Declarations,
    Launch,
    calls_dot,
    calls_dot_scaled,
    constexpr_text,
    flag_text,
    flag_variants,
    pointer_variants,
    scale_pointers,
    state,
    variants,
)
from harness.compile.message import Finding

__all__ = ["DEPTHS", "Report", "check", "expected_reason"]

#: How deep :func:`check` compiles: ``full`` (every compile through ptxas on its own target), ``fast`` (the launch as
#: run in full, its widened variants and branches through Triton's frontend only, once per frontend class of
#: targets; the other scale type of a ``tl.dot_scaled`` in full), ``frontend`` (the launch as run too).
DEPTHS: tuple[str, ...] = ("fast", "full", "frontend")

_TYPE_REFUSED = re.compile(r"type (fp8\w+) not supported in this architecture")


def expected_reason(launch: Launch, target: str, out: Outcome, declarations: Declarations) -> str | None:
    """Why a failure is expected: the arch model refuses an FP8 format the launch uses on ``target``
    (``e4nv`` below sm89...) or its ``tl.dot_scaled`` scale type (NVFP4's e4m3 on sm90 before Triton 3.9), or
    bf16 instructions the failure names (below sm80, :func:`~harness.arch.supports_bf16_arithmetic`), an int8
    ``tl.dot`` whose TritonGPU passes fail (below sm80, :func:`~harness.arch.supports_int8_dot`), a ``tl.dot_scaled``
    emulated with sm89 FP8 converts (:func:`~harness.arch.supports_scaled_dot_emulation`),
    Triton itself refused the type for the arch, or the kernel is among
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
    for scale in sorted(set(scale_pointers(launch).values())):
        ok, why = supports_scaled_dot(target, scale)
        if not ok:
            return why
    if _BF16_REFUSED.search(out.line) and _uses_bf16(launch):
        ok, why = supports_bf16_arithmetic(target)
        if not ok:
            return why
    if _FP8_CVT_REFUSED.search(out.line) and calls_dot_scaled(launch):
        ok, why = supports_scaled_dot_emulation(target)
        if not ok:
            return why
    if (_PASSES_FAILED.search(out.line) and any(v == "*i8" for _, v in launch.signature)
            and calls_dot(launch)):
        ok, why = supports_int8_dot(target)
        if not ok:
            return why
    return declarations.reason(launch, target, out.line)


#: A refusal of bf16 instructions (ptxas's ``Feature '.bf16' requires .target sm_80 or higher``).
_BF16_REFUSED = re.compile(r"\.bf16\b.*requires|bf16.*not supported", re.I)


#: ptxas refusing the FP8 converts of sm89+ (``cvt with .e4m3x2/.e5m2x2``), which Triton 3.9's ``tl.dot_scaled``
#: emulation emitted for sm75 (:func:`~harness.arch.supports_scaled_dot_emulation`).
_FP8_CVT_REFUSED = re.compile(r"cvt with \.e4m3x2/\.e5m2x2' requires \.target sm_89")
#: Triton's TritonGPU passes failing (the MLIR diagnostic goes to stderr), as an int8 ``tl.dot`` for sm75 does
#: (:func:`~harness.arch.supports_int8_dot`).
_PASSES_FAILED = re.compile(r"PassManager::run failed")


def _uses_bf16(launch: Launch) -> bool:
    return (any(v.lstrip("*") == "bf16" for _, v in launch.signature)
            or any(getattr(v, "name", None) == "bf16" for _, v in launch.constexprs))


#: Refusals that say the widened type is not legal for an operation the kernel performs on that pointer (atomics
#: on 16-bit floats): the kernel cannot be widened so, which is no bug (:func:`harness.compile.launches.variants`
#: already keeps pointers that reach an atomic; this catches the ones its source scan misses).
_NOT_WIDENABLE = re.compile(r"\batomic_\w+ does not support (fp16|bf16|fp32|fp8\w*)")

_KINDS = ("ok", "expected", "failed")
#: Findings in branches the launch as run did not take (:func:`_flag_findings`): counted apart from ``failed``,
#: present only in cells that have some.
#: ``na``: made-up variants (a widened dtype, a flipped flag) the kernel's own guard or an op's type rule refuses:
#: no launch anyone can make, never a finding (:data:`harness.compile.errors.NOT_APPLICABLE`).
#: ``slow``: compiles whose ptxas ran past its budget and was killed (:mod:`harness.compile.budget`): not judged,
#: neither a failure nor a pass.
_EXTRA = ("branch", "na", "slow")
#: How a launch as run that compiled lowers its ``tl.dot_scaled`` (:attr:`Outcome.lowering`); counted beside the
#: kinds, only for kernels that call it.
_LOWERINGS = ("native", "emulated")


@dataclass
class Report:
    """What :func:`check` found for a set of launches: per (kernel, target) cell the distinct compiles that were
    ``ok``, ``expected`` refusals or ``failed`` (each named by its disk-cache key, so xdist workers that
    compiled or read back the same thing count it once), and the findings; plain data an xdist worker hands over
    (:meth:`to_dict`) and the controller folds in (:meth:`merge`). ``compiled`` are the distinct compiles some
    process ran in this session, the rest of ``distinct`` were read back from the disk cache. A cell of a kernel
    that calls ``tl.dot_scaled`` also counts its launches as run that compiled ``native`` / ``emulated``."""

    cells: dict[tuple[str, str], dict[str, set[str]]] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    #: compiles whose ptxas ran past its budget (kind ``budget``): listed in the summary, never findings
    not_judged: list[Finding] = field(default_factory=list)
    distinct: set[str] = field(default_factory=set)
    compiled: set[str] = field(default_factory=set)

    @property
    def compiles(self) -> int:
        return len(self.distinct)

    @property
    def cached(self) -> int:
        return len(self.distinct - self.compiled)

    def counts(self, kernel: str, target: str) -> dict[str, int] | None:
        c = self.cells.get((kernel, target))
        return None if c is None else {k: len(c[k]) for k in _KINDS}

    def count_cells(self) -> dict[tuple[str, str], dict[str, int]]:
        return {k: _count(v) for k, v in self.cells.items()}

    def bump(self, kernel: str, target: str, what: str, ident: str) -> None:
        self.cells.setdefault((kernel, target), {k: set() for k in _KINDS}).setdefault(what, set()).add(ident)

    def add_not_judged(self, f: Finding) -> None:
        if f not in self.not_judged:
            self.not_judged.append(f)

    def seen(self, ident: str, out: Outcome) -> None:
        self.distinct.add(ident)
        if not out.cached:
            self.compiled.add(ident)

    def to_dict(self) -> dict[str, Any]:
        return {"cells": [{"kernel": k, "target": t, **_count(v)} for (k, t), v in sorted(self.cells.items())],
                "findings": [f.__dict__ for f in self.findings], "compiles": self.compiles, "cached": self.cached,
                "not_judged": [f.__dict__ for f in self.not_judged]}

    def to_worker(self) -> dict[str, Any]:
        """Everything :meth:`merge` needs to count each distinct compile once."""
        return {"cells": [{"kernel": k, "target": t, **{w: sorted(ids) for w, ids in v.items()}}
                          for (k, t), v in sorted(self.cells.items())],
                "findings": [f.__dict__ for f in self.findings], "distinct": sorted(self.distinct),
                "compiled": sorted(self.compiled), "not_judged": [f.__dict__ for f in self.not_judged]}

    def merge(self, d: Mapping[str, Any]) -> None:
        for c in d.get("cells", []):
            cell = self.cells.setdefault((c["kernel"], c["target"]), {k: set() for k in _KINDS})
            for k in (*_KINDS, *_LOWERINGS, *_EXTRA):
                if c.get(k):
                    cell.setdefault(k, set()).update(c[k])
        for f in d.get("findings", []):
            finding = Finding(**f)
            if finding not in self.findings:
                self.findings.append(finding)
        for f in d.get("not_judged", []):
            self.add_not_judged(Finding(**f))
        self.distinct.update(d.get("distinct", ()))
        self.compiled.update(d.get("compiled", ()))


def _count(cell: Mapping[str, set[str]]) -> dict[str, int]:
    """A cell's counts: every kind, and a lowering only where some launch recorded one."""
    return {**{w: len(cell[w]) for w in _KINDS},
            **{w: len(cell[w]) for w in (*_LOWERINGS, *_EXTRA) if cell.get(w)}}


def check(launch: Launch, targets: Iterable[str], *, widen: bool = True, test: str = "",
          report: Report | None = None, directory: Path | None = None,
          widen_targets: Iterable[str] | None = None, declarations: Declarations | None = None,
          launched: Iterable[tuple[str, str]] = (), depth: str = "full",
          ptxas_budget: float | None = None) -> list[Finding]:
    """Compile ``launch`` (and, with ``widen``, its :func:`~harness.compile.launches.variants`) for
    ``targets``; the findings: the launch itself failing unexpectedly, or a variant failing where the launch
    compiles, or a branch the launch did not take failing (a value of a flag or dtype constexpr no launch of the
    test used: ``launched`` holds the ``(name, constexpr text)`` pairs the test's launches of this kernel did
    use). Variants and branches are compiled for ``widen_targets`` only when given (a subset, to bound the cost).
    ``declarations`` default to the running session's. ``depth``: one of :data:`DEPTHS`. ``ptxas_budget``: the
    wall-clock seconds each ptxas run may take (:mod:`harness.compile.budget`); a compile past it is *not judged*:
    counted ``slow`` in its cell and listed in :attr:`Report.not_judged`, never a finding. A launch as run that is
    not judged so still has its variants and branches judged: they went through the same frontend.

    Why a budget: Triton's FMA fallback for ``tl.dot`` (fp64, every dot on sm75) gives ptxas 1.5 MB of PTX,
    which took it over 10 minutes per compile (docs/capture.md)."""
    if depth not in DEPTHS:
        raise ValueError(f"depth={depth!r}: expected one of {', '.join(DEPTHS)}")
    made_up = depth != "full"  # variants and branches through the frontend only
    # but for the other scale type of a tl.dot_scaled (MX <-> NVFP4), whose lowering is the target's own: native,
    # emulated, or refused (NVFP4 scales on sm90 before Triton 3.9)
    scaled = calls_dot_scaled(launch)
    declared = declarations if declarations is not None else state().declarations
    wt = None if widen_targets is None else set(widen_targets)
    rep = report if report is not None else Report()
    found: list[Finding] = []
    vs = variants(launch) if widen else []
    flags = widen and bool(flag_variants(launch))
    launched = frozenset(launched) | {(k, constexpr_text(v)) for k, v in launch.constexprs}
    branches: list[tuple[Finding, str]] = []
    branch_targets: list[str] = []
    for t in targets:
        if declared.skip_reason(launch, t) is not None:
            continue  # never compiled (skip_compile): the kernel does not run there
        base = _outcome(launch, t, directory, depth == "frontend", ptxas_budget)
        ident = cache_key(launch, t, depth == "frontend")
        rep.seen(ident, base)
        in_wt = wt is None or t in wt
        unjudged = base.kind == BUDGET
        if unjudged:
            rep.bump(launch.kernel, t, "slow", ident)
            rep.add_not_judged(Finding(launch.kernel, t, launch.sig_text(), "", base.line, base.kind, test))
        elif base.ok:
            rep.bump(launch.kernel, t, "ok", ident)
            if base.lowering in _LOWERINGS:
                rep.bump(launch.kernel, t, base.lowering, ident)
        elif expected_reason(launch, t, base, declared):
            rep.bump(launch.kernel, t, "expected", ident)
        else:
            rep.bump(launch.kernel, t, "failed", ident)
            found.append(Finding(launch.kernel, t, launch.sig_text(), "", base.line, base.kind, test))
            continue
        judged = frozenset((v.signature, v.constexprs) for _, v in vs) if base.ok else frozenset()
        if flags and in_wt:
            branch_targets.append(t)
            branches += _flag_findings(launch, t, test, rep, directory, declared, launched, judged, made_up,
                                       ptxas_budget)
        if not base.ok and not unjudged:
            continue
        for label, v in vs if in_wt else ():
            front = made_up and not (scaled and label.startswith(SCALE_LABEL))
            out = _outcome(v, t, directory, front, ptxas_budget)
            vident = cache_key(v, t, front)
            rep.seen(vident, out)
            if out.ok:
                continue
            if out.kind == BUDGET:
                rep.bump(launch.kernel, t, "slow", vident)
                rep.add_not_judged(Finding(launch.kernel, t, v.sig_text(), label, out.line, out.kind, test))
                continue
            if _NOT_WIDENABLE.search(out.line):
                continue  # not a launch anyone can make: the kernel's atomics fix this pointer's type
            if out.kind in NOT_APPLICABLE:
                rep.bump(launch.kernel, t, "na", vident)
                continue
            if expected_reason(v, t, out, declared):
                rep.bump(launch.kernel, t, "expected", vident)
                continue
            rep.bump(launch.kernel, t, "failed", vident)
            found.append(Finding(launch.kernel, t, v.sig_text(), label, out.line, out.kind, test))
    # A branch that fails on some targets and compiles on others is one a launcher takes only where it compiles
    # (a flag gating sm89+ instructions, HW_KEYS=1): a finding only where it fails on every target tried.
    everywhere: dict[tuple[str, str], set[str]] = {}
    for f, _ in branches:
        everywhere.setdefault((f.flag, f.variant), set()).add(f.target)
    for f, ident in branches:
        if everywhere[(f.flag, f.variant)] == set(branch_targets):
            rep.bump(launch.kernel, f.target, "branch", ident)
            found.append(f)
    rep.findings.extend(found)
    return found


def _outcome(launch: Launch, target: str, directory: Path | None, frontend: bool,
             budget: float | None = None) -> Outcome:
    """:func:`~harness.compile.disk_cache.launch_outcome`, through the frontend only when asked."""
    if frontend:
        return launch_outcome(launch, target, directory, frontend=True)
    return launch_outcome(launch, target, directory, budget=budget)


def _judged(v: Launch, t: str, out: Outcome, declared: Declarations) -> str:
    """A made-up launch's outcome on ``t``: ``ok``, ``na`` (the kernel's guard or an op's type rule refuses it),
    ``slow`` (ptxas ran past its budget: not judged), ``expected`` (the arch model or a declaration), else
    ``failed``."""
    if out.ok:
        return "ok"
    if out.kind == BUDGET:
        return "slow"
    if out.kind in NOT_APPLICABLE:
        return "na"
    if _NOT_WIDENABLE.search(out.line) or expected_reason(v, t, out, declared):
        return "expected"
    return "failed"


def _flag_findings(launch: Launch, t: str, test: str, rep: Report, directory: Path | None,
                   declared: Declarations, launched: frozenset[tuple[str, str]],
                   judged: frozenset[tuple[Any, Any]] = frozenset(),
                   frontend: bool = False, budget: float | None = None) -> list[tuple[Finding, str]]:
    """The branches a launcher may choose on another GPU (:func:`~harness.compile.launches.flag_variants`),
    compiled for ``t`` as they are and, where they compile, with their floating-point pointers widened
    (:func:`~harness.compile.launches.pointer_variants`). A flag value is a finding, as it is or widened so, only
    when every combination tried that holds it fails unexpectedly: flags a launcher sets together from one device
    check (``E4B15=1`` with ``FP8=e4b15``) make combinations no launcher makes fail (a bf16 key cast to e4b15 with
    ``E4B15=0``), so a value that compiles, or is refused as the arch model predicts, with some setting of the
    other flags is no finding. A value some launch of the test made (``launched``: name and
    :func:`~harness.compile.launches.constexpr_text`, the replays' included) is judged as that launch, not here.
    A combination :func:`~harness.compile.launches.variants` already judged (``judged``: signature and constexprs;
    an FP8 output-format constexpr alone) is reported there. The finding shows the first failing combination;
    :func:`check` keeps it only if it fails on every target tried. With its disk-cache key, for the report.
    ``frontend``: compiled through Triton's frontend only."""
    tried: list[tuple[tuple[tuple[str, Any], ...], dict[str, tuple[str, Launch, Outcome]]]] = []
    for changes, fv in flag_variants(launch):
        base = _outcome(fv, t, directory, frontend, budget)
        outs = {"": (_judged(fv, t, base, declared), fv, base)}
        rep.seen(cache_key(fv, t, frontend), base)
        if outs[""][0] in ("na", "slow"):
            rep.bump(launch.kernel, t, outs[""][0], cache_key(fv, t, frontend))
        if base.ok:
            for label, pv in pointer_variants(fv):
                out = _outcome(pv, t, directory, frontend, budget)
                rep.seen(cache_key(pv, t, frontend), out)
                outs[label] = (_judged(pv, t, out, declared), pv, out)
                if outs[label][0] in ("na", "slow"):
                    rep.bump(launch.kernel, t, outs[label][0], cache_key(pv, t, frontend))
        tried.append((changes, outs))
    found: list[tuple[Finding, str]] = []
    values = list(dict.fromkeys(kv for changes, _ in tried for kv in changes))
    for kv in values:
        if (kv[0], constexpr_text(kv[1])) in launched:
            continue
        holding = [outs for changes, outs in tried if kv in changes]
        labels = list(dict.fromkeys(label for outs in holding for label in outs))
        for label in labels:
            if not all(label in outs and outs[label][0] == "failed" for outs in holding):
                continue
            _, v, out = holding[0][label]
            if (v.signature, v.constexprs) in judged:
                continue
            changed = tuple((k, x) for k, x in v.constexprs if (k, x) not in launch.constexprs)
            found.append((Finding(launch.kernel, t, v.sig_text(), label, out.line, out.kind, test,
                                  flag=flag_text((kv,)), flags=flag_text(changed)), cache_key(v, t, frontend)))
    return found
