"""Every failure text of the compile feature, built from records: the compile assertions'
(:mod:`harness.compile.matrix`: :class:`CompileFailure`, :class:`AsmMismatch`) and launch capture's
(:class:`Finding`, and the kernel × target matrix of the session summary and ``python -m harness compile``).

Why one module: the texts are what tests and users read, and some are pinned by tests; building each from a
plain record here keeps the code that decides (compiling, judging) free of formatting, and the wording in one
place. The callers raise once, at their public boundary.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

__all__ = ["LOWERING_LEGEND", "MATRIX_LEGEND", "MAX_ASM_LINES", "AsmMismatch", "Cells", "CompileFailure",
           "CompileProblem", "Finding", "format_asm_mismatch", "format_capture_failure", "format_capture_totals",
           "format_compile_failure", "format_compile_stats", "format_finding", "format_not_judged", "group",
           "has_lowering", "has_slow", "render_matrix", "slow_legend"]

#: Cap on the assembly lines a failed ``assert_ptx_contains`` / ``assert_ptx_lacks`` shows.
MAX_ASM_LINES = 20


@dataclass(frozen=True)
class CompileProblem:
    """One target that did not do what a compile assertion expected.

    ``outcome``: ``"failed"`` (expected to compile), ``"compiled"`` (expected a refusal), ``"wrong type"``
    (refused with another exception type, named in ``raised``) or ``"no match"`` (refused, but the error
    does not match). ``line`` is the compiler's reason in one line (:func:`harness.compile.errors.error_summary`)."""

    target: str
    outcome: str
    line: str = ""
    raised: str = ""


@dataclass(frozen=True)
class CompileFailure:
    """A failed ``assert_compiles`` (``expected="compiles"``) or ``assert_compile_error``
    (``expected="refusal"``, with the regex ``match`` and the exception type name it wanted)."""

    kernel: str
    expected: str
    n_targets: int
    problems: tuple[CompileProblem, ...]
    match: str = ""
    exc_type: str = ""


def _problem_line(f: CompileFailure, p: CompileProblem) -> str:
    if p.outcome == "failed":
        return f"  {p.target}: {p.line}"
    if p.outcome == "compiled":
        return f"  {p.target}: compiled, but a compile error matching {f.match!r} was expected"
    if p.outcome == "wrong type":
        return f"  {p.target}: raised {p.raised}, expected {f.exc_type}: {p.line}"
    return f"  {p.target}: error does not match {f.match!r}: {p.line}"


def format_compile_failure(f: CompileFailure) -> str:
    """A header counting the targets that did not comply, then one line per target with the compiler's
    reason."""
    if f.expected == "compiles":
        head = f"{f.kernel} failed to compile for {len(f.problems)} / {f.n_targets} target(s):"
    else:
        head = (f"{f.kernel}: expected compile error on {f.n_targets} target(s), {len(f.problems)} did not "
                f"comply:")
    return "\n".join([head] + [_problem_line(f, p) for p in f.problems])


@dataclass(frozen=True)
class AsmMismatch:
    """A failed ``assert_ptx_contains`` (``wanted="match"``: ``lines`` are the related lines, those sharing
    the pattern's leading opcode word) or ``assert_ptx_lacks`` (``wanted="none"``: ``lines`` match)."""

    kernel: str
    target: str
    stage: str
    pattern: str
    wanted: str
    lines: tuple[str, ...]
    total_lines: int


def format_asm_mismatch(m: AsmMismatch) -> str:
    """Which kernel, target and stage; what was wanted; at most :data:`MAX_ASM_LINES` assembly lines."""
    shown = m.lines[:MAX_ASM_LINES]
    if m.wanted == "match":
        more = f" (showing {MAX_ASM_LINES} of {len(m.lines)})" if len(m.lines) > MAX_ASM_LINES else ""
        body = "\n".join(f"    {ln}" for ln in shown) or "    (none)"
        return (f"{m.kernel}@{m.target}: no match for {m.pattern!r} in {m.stage} ({m.total_lines} lines); "
                f"related lines{more}:\n{body}")
    body = "\n".join(f"    {ln}" for ln in shown)
    return (f"{m.kernel}@{m.target}: {len(m.lines)} line(s) of {m.stage} match {m.pattern!r}, expected "
            f"none:\n{body}")



# --- launch capture ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Finding:
    """A compile failure the launching test is answerable for: the launch as run failing unexpectedly
    (``variant`` empty), or a widened variant (``key_ptr=bf16``) failing where the launch compiles."""

    kernel: str
    target: str
    signature: str
    variant: str
    error: str
    kind: str
    test: str = ""
    #: For a branch the launch as run did not take (:func:`harness.compile.launches.flag_variants`): the flag value
    #: (``FP8=tl.float8e4b15``) and the whole combination that failed (``E4B15=1, FP8=tl.float8e4b15``).
    flag: str = ""
    flags: str = ""


def group(findings: Iterable[Finding]) -> list[tuple[Finding, list[str]]]:
    """Findings that differ only in target, as ``(first finding, [targets])``: one entry per bug, because the
    same bug on seven targets is one thing to fix."""
    out: dict[tuple[str, ...], tuple[Finding, list[str]]] = {}
    for f in findings:
        k = (f.kernel, f.variant, f.signature, f.error, f.kind, f.test, f.flag, f.flags)
        if k in out:
            out[k][1].append(f.target)
        else:
            out[k] = (f, [f.target])
    return list(out.values())


def format_finding(f: Finding, targets: list[str]) -> str:
    """One bug: kernel, targets, what failed, the signature to reproduce it with, the compiler's line."""
    if f.flag:
        what = f"`{f.flag}`: a value this run did not launch; a launcher may choose it on another GPU"
        tried = f"{f.flags}" + (f", {f.variant}" if f.variant else "")
        return (f"{f.kernel} @ {','.join(targets)}: {what}\n    {tried} fails to compile [{f.kind}] (and no "
                f"setting tried of the other code-selecting constexprs compiles it)\n"
                f"    signature: {f.signature}\n    error: {f.error}"
                + (f"\n    launched by: {f.test}" if f.test else ""))
    what = f"variant {f.variant} (the launch as run compiles)" if f.variant else "the launch as run"
    return (f"{f.kernel} @ {','.join(targets)}: {what} fails to compile [{f.kind}]\n"
            f"    signature: {f.signature}\n    error: {f.error}"
            + (f"\n    launched by: {f.test}" if f.test else ""))


def format_capture_failure(findings: Sequence[Finding], targets: Iterable[str]) -> str:
    """What fails the launching test: a count, then each bug once (:func:`group`)."""
    run = [x for x in findings if not x.flag]
    other = [x for x in findings if x.flag]
    lines = []
    if run:
        lines += [f"{len(run)} compile failure(s) in kernels this test launched "
                  f"(harness launch capture; targets {','.join(targets)}):"]
        lines += [format_finding(f, ts) for f, ts in group(run)]
    if other:
        lines += [f"{len(other)} compile failure(s) in branches of kernels this test launched that it did not "
                  f"launch (a launcher may choose them on another GPU; harness launch capture; targets "
                  f"{','.join(targets)}):"]
        lines += [format_finding(f, ts) for f, ts in group(other)]
    return "\n".join(lines)


#: Per (kernel, target) cell: how many compiles were ``ok``, ``expected`` refusals or ``failed``; for a kernel
#: that calls ``tl.dot_scaled``, also how many launches as run compiled ``native`` / ``emulated``.
Cells = Mapping[tuple[str, str], Mapping[str, int]]


def render_matrix(cells: Cells, targets: Iterable[str]) -> list[str]:
    """Kernel × target table: ``ok`` / ``expected`` (refusals the arch model predicts) / ``FAIL n``; an ``ok``
    cell of a kernel calling ``tl.dot_scaled`` says how the target lowers it (``ok native`` / ``ok emul``)."""
    ts = list(targets)
    kernels = sorted({k for k, _ in cells})
    if not kernels:
        return []

    def cell(k: str, t: str) -> str:
        c = cells.get((k, t))
        if c is None:
            return "-"
        na = " +n/a" if c.get("na") else ""
        slow = " +slow" if c.get("slow") else ""
        if c["failed"]:
            return f"FAIL {c['failed']}" + (f" +{c['branch']}br" if c.get("branch") else "") + na + slow
        if c.get("branch"):
            return f"BRANCH {c['branch']}" + na + slow
        if c["ok"]:
            return "ok" + ("*" if c["expected"] else "") + _lowering(c) + na + slow
        if c["expected"]:
            return "expected" + na + slow
        return "slow" + na if slow else "expected" + na

    names = [k.rsplit(".", 2)[-2] + "." + k.rsplit(".", 1)[-1] if k.count(".") else k for k in kernels]
    w0 = max(len("kernel"), *(len(n) for n in names))
    rows = [[cell(k, t) for t in ts] for k in kernels]
    widths = [max(len(t), 8, *(len(r[i]) for r in rows)) for i, t in enumerate(ts)]
    lines = ["  ".join(["kernel".ljust(w0)] + [t.ljust(w) for t, w in zip(ts, widths, strict=True)])]
    for n, row in zip(names, rows, strict=True):
        lines.append("  ".join([n.ljust(w0)] + [c.ljust(w) for c, w in zip(row, widths, strict=True)]))
    return [ln.rstrip() for ln in lines]


#: What the cells of :func:`render_matrix` mean (printed under the matrix).
MATRIX_LEGEND = ("ok: every compile for the target succeeded; ok*: the launches compile, some variants were refused "
                 "as the arch model predicts (e4nv below sm89) or as declared (expect_compile_failure); expected: "
                 "the launch itself is such a refusal; FAIL n: n findings; BRANCH n (or FAIL n +nbr): n findings "
                 "in branches the run did not launch (other values of its flags and dtype constexprs); -: not "
                 "compiled for the target; +n/a: some made-up variants (widened dtypes, flipped flags) fail in the "
                 "kernel's own guard (tl.static_assert) or an op's type rules (fp32-only math, mismatched tl.dot "
                 "operands): launches nobody can make, never a failure")


def slow_legend(seconds: float) -> str:
    """What ``slow`` in a cell means (printed under the legend when a cell has one)."""
    return (f"slow (or +slow): not judged: ptxas ran over {seconds:g} s (--harness-ptxas-budget) and was killed "
            f"(Triton's FMA fallback for tl.dot gives it megabytes of PTX); every stage before it (frontend, TTGIR, "
            f"LLVM, PTX) succeeded; neither a failure nor a pass")


def format_not_judged(f: Finding, targets: list[str], seconds: float) -> str:
    """One compile capture did not judge: ``not judged (ptxas over 60 s): kernel @ sm75: signature``."""
    what = f" variant {f.variant}" if f.variant else ""
    return f"not judged (ptxas over {seconds:g} s): {f.kernel} @ {','.join(targets)}:{what} {f.signature}"


def has_slow(cells: Cells) -> bool:
    """Whether some cell counts a compile not judged (ptxas over its budget)."""
    return any(c.get("slow") for c in cells.values())


#: What a lowering after ``ok`` means (printed under the legend when a cell has one).
LOWERING_LEGEND = ("native / emul: the kernel calls tl.dot_scaled and the target's PTX runs it on block-scaled MMA "
                   "(tcgen05.mma / mma.sync ... block_scale) / on Triton's emulation (upcast plus an ordinary MMA); "
                   "native|emul: its launches differ")


def _lowering(c: Mapping[str, int]) -> str:
    native, emulated = c.get("native", 0), c.get("emulated", 0)
    if native and emulated:
        return " native|emul"
    return " native" if native else " emul" if emulated else ""


def has_lowering(cells: Cells) -> bool:
    """Whether some cell records a ``tl.dot_scaled`` lowering (then :data:`LOWERING_LEGEND` goes under the
    matrix)."""
    return any(c.get("native") or c.get("emulated") for c in cells.values())


def format_capture_totals(distinct: int, cached: int, seconds: float, scope: str, directory: str) -> str:
    """Launch capture's one totals line: distinct compiles (each launch or variant on each target, counted once
    over xdist workers), how many of them this run compiled and how many it read back from the disk cache."""
    return (f"{distinct} distinct compiles: {distinct - cached} compiled, {cached} read from the disk cache "
            f"({directory}) in {seconds:.1f}s ({scope})")


def format_compile_stats(total: Mapping[str, float]) -> str:
    """The compile matrix's process counters (every ``triton.compile`` call, launch capture's and the
    ``compile_target`` tests', and launch capture's frontend-only compiles), worded so they cannot be read as the
    disk cache's: repeats answered from the process's own memo are ``in-process repeats``."""
    n = int(total.get("compiles", 0))
    front = int(total.get("frontend", 0))
    avg = total.get("seconds", 0.0) / (n + front) if n + front else 0.0
    also = f" and Triton's frontend alone {front} times" if front else ""
    return (f"harness: triton.compile ran {n} times{also} "
            f"({int(total.get('failures', 0))} refused, {int(total.get('ptxas', 0))} ptxas failures) in "
            f"{total.get('seconds', 0.0):.1f}s (avg {avg:.2f}s, slowest {total.get('slowest', 0.0):.2f}s); "
            f"{int(total.get('hits', 0))} in-process repeats answered from memory")
