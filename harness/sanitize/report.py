"""What the sanitizer found, as data and as text: one record per finding (an out-of-bounds access, a race, a
benign overlap), the one message of each, and the session's collection of them (a section of
:class:`harness.session.Session`: the xdist hand-off, the ``--harness-report`` key, the terminal lines).

Records stay plain data (JSON-able dicts) until a launch ends; only then does the hook turn them into an error
or a warning, with the text built here. Nothing here imports Triton, torch or pytest.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["SECTION", "Finding", "SanitizerError", "SanitizerWarning", "State", "launch_message"]

#: The session section's name, and the ``--harness-report`` key.
SECTION = "sanitize"
#: Findings a report keeps (the counts stay exact past it).
REPORT_CAP = 200
#: Findings one launch's error message spells out.
MESSAGE_CAP = 3


class SanitizerError(AssertionError):
    """A launch accessed memory outside its tensor arguments, or two of its programs raced
    (``--harness-sanitize=fail``)."""


class SanitizerWarning(UserWarning):
    """The same findings under ``--harness-sanitize=warn``."""


def _pid(p: tuple[int, ...] | list[int]) -> str:
    return "(" + ", ".join(str(int(v)) for v in p) + ")"


def _nbytes(n: int) -> str:
    return f"{n} byte" + ("" if n == 1 else "s")


def _elements(nbytes: int, itemsize: int) -> str:
    n, r = divmod(nbytes, itemsize)
    if r:
        return f"{nbytes / itemsize:g} elements"
    return f"{n} element" + ("" if n == 1 else "s")


def _block(i: list[int]) -> str:
    return "(" + ", ".join(str(int(v)) for v in i) + ("," if len(i) == 1 else "") + ")"


def _index(i: float) -> str:
    return str(int(i)) if float(i).is_integer() else f"{i:g}"


@dataclass
class Finding:
    """One finding. ``kind``: ``"out_of_bounds"``, ``"race"`` or ``"overlap"`` (the same values stored by two
    programs: a note). ``where``: ``file:line`` of the access (for a race, of the first program's store).
    ``detail``: the kind's own fields (see :meth:`message`)."""

    kind: str
    kernel: str
    where: str
    op: str
    detail: dict[str, Any] = field(default_factory=dict)
    test: str = ""

    def message(self) -> str:
        d = self.detail
        if self.kind == "out_of_bounds":
            lines = [f"out-of-bounds {self.op} in kernel {self.kernel} at {self.where}",
                     f"  program_id {_pid(d['program_id'])}: {d['lanes']} of {d['active']} active lanes fall outside "
                     f"every tensor argument's storage",
                     f"  first: block index {_block(d['block_index'])}, address {d['address']:#x} "
                     f"({d['itemsize']}-byte {d['dtype']})"]
            near = d.get("nearest")
            if near is None:
                lines.append("  the launch has no tensor argument")
            else:
                side = "before its start" if near["side"] == "before" else "past its end"
                lines.append(f"  nearest tensor argument: {near['name']} ({near['dtype']}[{near['numel']}], storage "
                             f"{near['storage_nbytes']} bytes): missed by {_nbytes(near['nbytes'])} "
                             f"({_elements(near['nbytes'], d['itemsize'])}) {side}; element "
                             f"{_index(near['element'])} of {near['name']}")
            if d.get("programs_hit", 1) > 1:
                lines.append(f"  {d['programs_hit']} programs of the launch make this access out of bounds "
                             f"({d['lanes_total']} lanes in all)")
            return "\n".join(lines)
        what = "different values" if self.kind == "race" else "the same values"
        other = d.get("other_where")
        at = self.where if not other or other == self.where else f"{self.where} and {other}"
        head = "race" if self.kind == "race" else "note: benign overlap"
        arg = d.get("argument")
        target = f"{arg} element {_index(d['element'])}" if arg else "memory of no argument"
        if "threads" in d:
            (w0, l0), (w1, l1) = d["threads"]
            return (f"{head} in kernel {self.kernel} at {at}: program {_pid(d['program'])} stores {what} to "
                    f"{target} (address {d['address']:#x}) from two threads, warp {w0} lane {l0} then warp {w1} "
                    f"lane {l1}, with no barrier between the stores in its compiled kernel ({d['arch']}, Triton "
                    f"{d['triton']}); {_nbytes(d['nbytes'])} stored by two threads this way")
        text = (f"{head} in kernel {self.kernel} at {at}: programs {_pid(d['programs'][0])} and "
                f"{_pid(d['programs'][1])} store {what} to {target} (address {d['address']:#x}); "
                f"{_nbytes(d['nbytes'])} stored by two programs this way")
        return text

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def launch_message(findings: list[Finding], mode: str) -> str:
    """The text of one launch's error or warning: its findings (the first :data:`MESSAGE_CAP`), then how to
    turn the check off."""
    shown = findings[:MESSAGE_CAP]
    lines = ["harness sanitizer (CPU lane): " + shown[0].message()]
    lines += [f.message() for f in shown[1:]]
    if len(findings) > len(shown):
        lines.append(f"... and {len(findings) - len(shown)} more finding(s) in this launch")
    if mode == "fail":
        lines.append("(--harness-sanitize=warn reports without failing; =off disables the check)")
    return "\n".join(lines)


class State:
    """One session's sanitizer: its mode, and what its launches found (the ``sanitize`` section)."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.test = ""  # the running test's node id, set by the plugin
        self.launches = 0
        self.counts = {"out_of_bounds": 0, "race": 0, "overlap": 0}
        self.findings: list[Finding] = []
        self._notes: set[tuple[str, str]] = set()
        self.override: str | None = None  # the running test's own mode (its ``sanitize`` marker)
        self.unsupported = ""  # why nothing is sanitized (an interpreter the hooks do not know), once
        self.skipped: dict[str, str] = {}  # kernel -> why one of its launches was not checked
        #: kernel -> why bytes one of its programs stored twice were not judged for a race between threads
        self.unjudged: dict[str, str] = {}

    def effective_mode(self) -> str:
        return self.override or self.mode

    def note_skipped(self, kernel: str, why: str) -> None:
        self.skipped.setdefault(kernel, why)

    def note_unjudged(self, kernel: str, why: str) -> None:
        self.unjudged.setdefault(kernel, why)

    def add(self, finding: Finding) -> bool:
        """Record ``finding``; ``False`` for a benign overlap already noted at its (kernel, line)."""
        finding.test = finding.test or self.test
        if finding.kind == "overlap":
            key = (finding.kernel, finding.where)
            if key in self._notes:
                return False
            self._notes.add(key)
        self.counts[finding.kind] += 1
        if len(self.findings) < REPORT_CAP:
            self.findings.append(finding)
        return True

    def to_worker(self) -> dict[str, Any]:
        return {"mode": self.mode, "launches": self.launches, "counts": dict(self.counts),
                "findings": [f.to_dict() for f in self.findings], "unsupported": self.unsupported,
                "skipped": dict(self.skipped), "unjudged": dict(self.unjudged)}

    def merge(self, data: dict[str, Any]) -> None:
        """Controller: fold in a worker's part; a benign overlap another worker already noted at the same kernel
        and line is not counted again."""
        self.launches += int(data.get("launches", 0))
        counts = {k: int(v) for k, v in data.get("counts", {}).items()}
        for f in data.get("findings", ()):
            finding = Finding(**f)
            if finding.kind == "overlap":
                key = (finding.kernel, finding.where)
                if key in self._notes:
                    counts["overlap"] = counts.get("overlap", 1) - 1
                    continue
                self._notes.add(key)
            if len(self.findings) < REPORT_CAP:
                self.findings.append(finding)
        for k, v in counts.items():
            self.counts[k] = self.counts.get(k, 0) + v
        self.unsupported = self.unsupported or data.get("unsupported", "")
        for k, v in data.get("skipped", {}).items():
            self.skipped.setdefault(k, v)
        for k, v in data.get("unjudged", {}).items():
            self.unjudged.setdefault(k, v)

    def report(self) -> dict[str, Any]:
        out = self.to_worker()
        for k in ("unsupported", "skipped", "unjudged"):
            if not out[k]:
                del out[k]
        return out

    def lines(self) -> list[str]:
        """The terminal summary: the counts, then each finding's first line with its test."""
        c = self.counts
        out = [f"mode {self.mode}: {self.launches} launch{'' if self.launches == 1 else 'es'} checked; "
               f"{c['out_of_bounds']} out-of-bounds, {c['race']} race{'' if c['race'] == 1 else 's'}, "
               f"{c['overlap']} benign overlap{'' if c['overlap'] == 1 else 's'} (noted once per kernel and line)"]
        if self.unsupported:
            out.append(f"nothing was sanitized: {self.unsupported}")
        for kernel, why in sorted(self.skipped.items()):
            out.append(f"launches of {kernel} were not checked: {why}")
        for kernel, why in sorted(self.unjudged.items()):
            out.append(f"bytes a program of {kernel} stores twice were not judged for a race between its threads: "
                       f"{why}")
        for f in self.findings:
            out.append(f"{f.test or '(outside a test)'}: {f.message().splitlines()[0]}")
        return out
