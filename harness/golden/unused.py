"""Which golden files no test used: the one judgement, for a whole-suite run and for the union of shards.

Why a module of its own: the judgement is made in two places, and they must apply one rule. A run of the
whole suite judges itself at its end (``harness.golden``, ``--golden-unused``). A suite split into shards
(pytest-split's ``--splits N --group i``, one CI job each) cannot: every shard deselects the others' tests,
so each one alone would call the others' goldens unused. Each shard therefore writes its bookkeeping to a
*golden record* (``--golden-record=PATH``: the suite it collected, the tests it selected, the golden files
its tests checked or loaded, which golden tests passed), and ``python -m harness golden unused RECORD...``
(:func:`judge`) judges the union, once.

The rule (:func:`unused_files`): a golden file is unused when no test checked or loaded it, unless its
directory belongs to a selected test that did not pass (failed, skipped, never ran: its checks may not have
been reached), or it is a file the params of such a test share (a directory of that test that is no param's
own, such as the inputs every param loads with ``param="inputs"``), or its module was skipped at collection.
The union of records is judged only when it is the whole suite: every record collected the same tests, their
selections together cover all of them, and no record is narrower for another reason (``-k``, ``-m``, a path
argument...) or ended interrupted. Anything else is a verdict that could not judge (exit 2), never a silent
pass.

Pure: no torch, no pytest (the merge step runs anywhere the checkout is).
"""

from __future__ import annotations

import json
import os
import re
import stat
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.golden.paths import golden_root
from harness.paths import input_problem

__all__ = ["RECORD_KIND", "RECORD_VERSION", "Verdict", "judge", "load_record", "unused_files"]

RECORD_KIND = "harness-golden-record"
#: Bumped when the record's fields change.
RECORD_VERSION = 1

#: How many node ids a verdict lists before "... and N more".
SHOWN = 10


def _rel(path: Path, rootdir: Path) -> str:
    p = Path(os.path.abspath(path))
    try:
        return p.relative_to(Path(os.path.abspath(rootdir))).as_posix()
    except ValueError:
        return p.as_posix()


#: A golden write's temp file (harness.golden.files): ``.<name>.npz.<pid>.<random>.tmp``, and the same without the pid
#: (files written by an older harness).
_TEMP = re.compile(r"\.(?P<name>.+\.npz)\.(?:(?P<pid>\d+)\.)?[A-Za-z0-9_]+\.tmp")
#: A temp file older than this is a leftover whoever wrote it: a golden write takes well under a second.
TEMP_MAX_AGE_S = 600.0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True  # another user's process, or no pid at all: only its age can tell
    return True


def leftover_temps(root: Path, *, now: float | None = None) -> list[Path]:
    """Temp files of golden writes that will never complete, under ``root``: their process is gone (killed mid-write,
    ``kill -9``), or they are older than :data:`TEMP_MAX_AGE_S`. A temp file of a write in progress (a concurrent run
    on this machine) is none. Regular files only; links are never followed (a golden dir that is a link too)."""
    if root.is_symlink() or not root.is_dir():
        return []
    t = time.time() if now is None else now
    out = []
    for d, _dirs, names in os.walk(root, followlinks=False):
        for name in names:
            m = _TEMP.fullmatch(name)
            if m is None:
                continue
            p = Path(d) / name
            try:
                st = p.lstat()
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            pid = m.group("pid")
            if t - st.st_mtime > TEMP_MAX_AGE_S or (pid is not None and int(pid) > 0 and not _alive(int(pid))):
                out.append(p)
    return sorted(out)


def remove_leftover_temps(root: Path, rootdir: Path) -> tuple[list[str], list[str]]:
    """Remove :func:`leftover_temps`; (removed, not removable) as paths relative to ``rootdir``, for the report."""
    removed, kept = [], []
    for p in leftover_temps(root):
        try:
            p.unlink()
            removed.append(_rel(p, rootdir))
        except FileNotFoundError:
            pass  # another run removed it first
        except OSError:
            kept.append(_rel(p, rootdir))
    return removed, kept


def unused_files(root: Path, rootdir: Path, *, used: Iterable[str], items: Mapping[str, str],
                 passed: Iterable[str], skipped_modules: Iterable[str]) -> list[str]:
    """Golden files under ``root`` (paths relative to ``rootdir``) that no test used.

    ``used``: files checked or loaded; ``items``: selected golden tests -> their golden directory
    (``<root>/<module>/<test>/<param id or _>``);
    ``passed``: tests that passed (and failed or skipped in no phase); ``skipped_modules``: module stems skipped
    at collection."""
    if not root.is_dir():
        return []
    used, passed, skipped = set(used), set(passed), set(skipped_modules)
    blocked = {d for n, d in items.items() if n not in passed}
    # A directory <root>/<module>/<test>/<name> that is no selected test's own holds files its test's params
    # share (inputs each one loads with ``param=``): they wait on every param of that test.
    depth = len(_rel(root, rootdir).split("/")) + 3
    waiting = {d.rsplit("/", 1)[0] for d in blocked if len(d.split("/")) == depth}
    own = set(items.values())
    out = []
    for p in sorted(root.rglob("*.npz")):
        if not p.is_file():
            continue
        rel = _rel(p, rootdir)
        parent = rel.rsplit("/", 1)[0]
        try:
            stem = p.relative_to(root).parts[0]
        except (ValueError, IndexError):
            stem = ""
        if rel in used or parent in blocked or stem in skipped:
            continue
        if parent not in own and parent.rsplit("/", 1)[0] in waiting:
            continue
        out.append(rel)
    return out


# ------------------------------------------------------------------------------------------ records

def load_record(path: str | os.PathLike[str]) -> dict[str, Any]:
    """One shard's record; a ``ValueError`` naming the file when it is not one this version writes."""
    problem = input_problem(path)
    if problem:  # before opening: opening a FIFO blocks
        raise ValueError(f"{path!s}: {problem}; expected a golden record (written by pytest --golden-record=PATH)")
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: cannot read a golden record ({e})") from None
    if not isinstance(data, dict) or data.get("kind") != RECORD_KIND:
        raise ValueError(f"{path}: not a golden record (written by pytest --golden-record=PATH)")
    if data.get("version") != RECORD_VERSION:
        raise ValueError(f"{path}: golden record version {data.get('version')!r}, this harness reads "
                         f"{RECORD_VERSION}: write the records and judge them with one harness version")
    for key, (ok, expected) in _FIELDS.items():
        if key in data and not ok(data[key]):
            raise ValueError(f"{path}: field {key!r} is {_shown(data[key])}; expected {expected} (a record "
                             f"written by pytest --golden-record=PATH holds one)")
    return data


def _strs(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _relative_dir(v: Any) -> bool:
    """A golden dir as records name it: relative to the rootdir and inside it (the judge resolves links)."""
    return (isinstance(v, str) and bool(v) and not os.path.isabs(v)
            and os.path.normpath(v).split(os.sep)[0] != os.pardir)


#: A record's fields that :func:`judge` reads: their check and what is expected, for the error.
_FIELDS: dict[str, tuple[Any, str]] = {
    "exitstatus": (lambda v: isinstance(v, int) and not isinstance(v, bool), "an int (pytest's exit status)"),
    "partial": (lambda v: v is None or isinstance(v, str), "null or a string (why the run was not a shard)"),
    "golden_dir": (_relative_dir, "a path relative to the rootdir that stays inside it, such as 'golden'"),
    **{k: (_strs, "a list of strings (node ids)") for k in ("collected", "selected", "passed", "not_passed")},
    "used": (_strs, "a list of strings (golden files)"),
    "skipped_modules": (_strs, "a list of strings (module names)"),
    "items": (lambda v: isinstance(v, dict) and all(isinstance(x, str) for kv in v.items() for x in kv),
              "an object of strings (node id -> golden directory)"),
}


def _shown(v: Any) -> str:
    text = json.dumps(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _listed(nodeids: Sequence[str]) -> str:
    shown = ", ".join(nodeids[:SHOWN])
    return shown + (f" ... and {len(nodeids) - SHOWN} more" if len(nodeids) > SHOWN else "")


@dataclass
class Verdict:
    """What :func:`judge` found over a set of records; :meth:`message` is its text, :attr:`exit_code` its
    status (0 every golden used, 1 unused files, 2 not judged)."""

    records: int
    tests: int = 0
    golden_tests: int = 0
    files_used: int = 0
    unused: list[str] = field(default_factory=list)
    problem: str | None = None        # why the union could not be judged
    overlap: list[str] = field(default_factory=list)  # tests selected by more than one record

    @property
    def exit_code(self) -> int:
        if self.problem is not None:
            return 2
        return 1 if self.unused else 0

    def message(self) -> str:
        head = f"golden unused: {self.records} record(s)"
        if self.problem is not None:
            return f"{head}: not judged: {self.problem}"
        lines = [f"{head}, {self.tests} tests ({self.golden_tests} with goldens), "
                 f"{self.files_used} golden file(s) used"]
        if self.overlap:
            lines.append(f"note: {len(self.overlap)} test(s) ran in more than one shard: {_listed(self.overlap)}")
        if self.unused:
            lines.append(f"{len(self.unused)} golden file(s) used by no test of any shard:")
            lines.extend(f"  {rel}" for rel in self.unused)
        else:
            lines.append("every golden file was used")
        return "\n".join(lines)


def _status_name(status: Any) -> str:
    names = {0: "OK", 1: "TESTS_FAILED", 2: "INTERRUPTED", 3: "INTERNAL_ERROR", 4: "USAGE_ERROR",
             5: "NO_TESTS_COLLECTED"}
    return names.get(status, str(status))


def judge(records: Sequence[tuple[str, Mapping[str, Any]]], rootdir: str | os.PathLike[str]) -> Verdict:
    """Judge the union of ``records`` (``(name, record)`` pairs, as :func:`load_record` reads them) against the
    golden files under ``rootdir``."""
    v = Verdict(records=len(records))
    if not records:
        v.problem = "no records given"
        return v
    first_name, first = records[0]
    for name, r in records:
        status = r.get("exitstatus")
        if status not in (0, 1):
            v.problem = f"{name} ended with {_status_name(status)}: its tests' outcomes are not known"
            return v
        if r.get("partial"):
            v.problem = f"{name} is not a shard of the whole suite ({r['partial']})"
            return v
        if r.get("golden_dir") != first.get("golden_dir"):
            v.problem = (f"{name} records golden dir {r.get('golden_dir')!r}, {first_name} "
                         f"{first.get('golden_dir')!r}")
            return v
        if set(r.get("collected", ())) != set(first.get("collected", ())):
            mine, theirs = set(r.get("collected", ())), set(first.get("collected", ()))
            odd = sorted(mine ^ theirs)
            v.problem = (f"{name} and {first_name} collected different suites ({len(mine)} and {len(theirs)} "
                         f"tests; {len(odd)} in one only: {_listed(odd)}): run every shard on one checkout "
                         f"with the same options")
            return v
    collected = set(first.get("collected", ()))
    seen: dict[str, int] = {}
    for _, r in records:
        for n in r.get("selected", ()):
            seen[n] = seen.get(n, 0) + 1
    missing = sorted(collected - set(seen))
    if missing:
        v.problem = (f"{len(missing)} of the suite's {len(collected)} tests ran in no shard: {_listed(missing)} "
                     f"(is a shard's record missing?)")
        return v
    v.overlap = sorted(n for n, k in seen.items() if k > 1)
    used: set[str] = set()
    items: dict[str, str] = {}
    passed: set[str] = set()
    not_passed: set[str] = set()
    skipped_modules: set[str] = set()
    for _, r in records:
        used.update(r.get("used", ()))
        items.update(r.get("items", {}))
        passed.update(r.get("passed", ()))
        not_passed.update(r.get("not_passed", ()))
        skipped_modules.update(r.get("skipped_modules", ()))
    root_dir = Path(rootdir)
    if not root_dir.is_dir():  # else no golden file is found, and every one "was used"
        v.problem = f"the rootdir {root_dir} is not a directory (expected the checkout the shards ran on)"
        return v
    try:
        root = golden_root(str(first.get("golden_dir") or "golden"), root_dir)
    except ValueError as e:
        v.problem = f"{first_name}: golden_dir {e}"
        return v
    if used and not root.is_dir():  # the shards used goldens that are not here: another checkout
        v.problem = (f"the records used {len(used)} golden file(s) but {root} is not a directory: is the rootdir "
                     f"{root_dir} the checkout the shards ran on?")
        return v
    v.tests, v.golden_tests, v.files_used = len(collected), len(items), len(used)
    v.unused = unused_files(root, root_dir, used=used, items=items, passed=passed - not_passed,
                            skipped_modules=skipped_modules)
    return v
