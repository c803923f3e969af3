"""Goldens' pytest glue: options, the ``golden`` fixture, the regen failure, the unused-golden report.

Why this module holds only hooks: loading the plugin must import no torch (the harness is loaded into
every pytest run), so what imports torch is imported inside the hooks that need it, on first use. The
feature's logic sits beside it (:mod:`harness.golden`).

Registered by ``harness.plugin``. This session's golden state is the session's ``golden`` section
(:class:`_Run`, a ``harness.session.Section``); under xdist it reaches the controller in the session's one
hand-off, and the controller decides what is reported.

Unused goldens (``--golden-unused=warn|fail``) are judged only on a run of the whole suite, because only
then is "no test used it" meaningful. A run is whole when: no ``-k``/``-m``/``--lf``/``--sw``/
``--deselect``/``--ignore``/``--ignore-glob``, nothing was deselected (shards deselect), not
``--collect-only``, every test path (``testpaths``, else the rootdir) lies inside a path argument (an
argument with ``::`` covers nothing), no collector was skipped except whole modules, and the session ended
with tests passed or failed (not interrupted or a usage error). A golden file is then reported when nobody
checked or loaded it, unless its directory belongs to a selected test that did not pass (failed, skipped,
never ran: its checks may not have been reached) or to a module skipped at collection. Any other run is
silent.

Shards (``pytest --splits N --group i``, pytest-split) deselect, so each is silent; with
``--golden-record=PATH`` each writes its bookkeeping (the suite it collected, its selection, the goldens it
used, which golden tests passed) and ``python -m harness golden unused RECORD...`` judges the union by the
same rule (:mod:`harness.golden.unused`).
"""
from __future__ import annotations

import json
import os
import sys
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from harness.golden.decide import max_bytes, run_mode
from harness.golden.paths import golden_root, output_problem
from harness.golden.unused import RECORD_KIND, RECORD_VERSION, remove_leftover_temps, unused_files
from harness.plugin import harness_op, session_key, session_of

if TYPE_CHECKING:
    from harness.golden.fixture import Golden, GoldenState

_CHANGES_VERSION = 1


class _Run:
    """Everything one process knows about goldens in this session (plain data, mergeable): the session's
    ``golden`` section (``harness.session.Section``)."""

    def __init__(self, config: pytest.Config, mode: str, root: Path) -> None:
        self.config = config
        self.mode = mode
        self.root = root
        self.rootdir = Path(config.rootpath)
        self._state: GoldenState | None = None   # the fixture's bookkeeping, created on first use
        self.collisions: dict[str, list[str]] = {}
        self.all_dirs: dict[str, str] = {}       # nodeid -> golden dir, every collected golden test
        self.items: dict[str, str] = {}          # the same for the selected ones
        self.deselected = 0
        self.recording = bool(config.getoption("golden_record"))
        self.collected: list[str] = []           # every collected test, before deselection (when recording)
        self.selected: set[str] = set()          # the tests this run selected (when recording)
        self.skipped_modules: set[str] = set()   # module stems skipped at collection
        self.skipped_dirs: set[str] = set()      # other collectors skipped (disables the unused report)
        self.passed: set[str] = set()
        self.not_passed: set[str] = set()
        self.used: set[str] = set()
        self.changes: list[dict[str, Any]] = []
        self.checked = 0
        self.unused: list[str] = []
        self.partial: str | None = None
        self.error: str | None = None
        self.leftovers: tuple[list[str], list[str]] = ([], [])  # temp files of killed writes: (removed, kept)

    def state(self) -> GoldenState:
        if self._state is None:
            from harness.golden.fixture import GoldenState  # imports torch: only once a test uses goldens

            self._state = GoldenState(root=self.root, rootdir=self.rootdir, mode=self.mode)
        return self._state

    def rel(self, path: Path) -> str:
        from harness.golden.files import rel_path  # imports torch: only once a test uses goldens

        return rel_path(path, self.rootdir)

    def fold_local(self) -> None:
        """Move this process's fixture bookkeeping into the mergeable fields (once, at session end)."""
        s, self._state = self._state, None
        if s is not None:
            self.used |= s.used
            self.changes.extend(s.changes)
            self.checked += s.checked

    def to_worker(self) -> dict[str, Any]:
        d = {"used": sorted(self.used), "changes": self.changes, "checked": self.checked,
             "items": self.items, "deselected": self.deselected,
             "skipped_modules": sorted(self.skipped_modules), "skipped_dirs": sorted(self.skipped_dirs)}
        if self.recording:  # the whole suite's node ids travel only when a record is asked for
            d["collected"] = self.collected
            d["selected"] = sorted(self.selected)
        return d

    def report(self) -> None:
        return None  # goldens have their own output: --golden-changes and the terminal summary

    def merge(self, d: dict[str, Any]) -> None:
        self.used.update(d.get("used", ()))
        self.changes.extend(d.get("changes", ()))
        self.checked += int(d.get("checked", 0))
        self.items.update(d.get("items", {}))
        # every worker collects the whole selection, so one worker's count is the session's
        self.deselected = max(self.deselected, int(d.get("deselected", 0)))
        self.skipped_modules.update(d.get("skipped_modules", ()))
        self.skipped_dirs.update(d.get("skipped_dirs", ()))
        if not self.collected:  # every worker collects the whole suite
            self.collected = list(d.get("collected", ()))
        self.selected.update(d.get("selected", ()))


_FIXTURE = pytest.StashKey["Golden"]()


def _run_of(config: pytest.Config) -> _Run | None:
    s = config.stash.get(session_key, None)
    return None if s is None else s.sections.get("golden")  # type: ignore[return-value]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("harness", "low-precision kernel harness")
    group.addoption("--golden-regen", action="store_true", dest="golden_regen", default=False,
                    help="rewrite the golden files of failing golden checks (those tests still fail)")
    group.addoption("--golden-regen-all", action="store_true", dest="golden_regen_all", default=False,
                    help="re-capture every selected golden (written only if changed); checks pass")
    group.addoption("--golden-unused", dest="golden_unused", choices=("off", "warn", "fail"), default="off",
                    metavar="off|warn|fail",
                    help="report golden files no test used (only on a run of the whole suite)")
    group.addoption("--golden-changes", dest="golden_changes", metavar="PATH", default=None,
                    help="write the goldens created/rewritten in this run as JSON to PATH, a new file unless "
                         "--golden-overwrite-changes")
    group.addoption("--golden-overwrite-changes", action="store_true", dest="golden_overwrite_changes",
                    default=False, help="let --golden-changes=PATH replace an existing file")
    group.addoption("--golden-record", dest="golden_record", metavar="PATH", default=None,
                    help="write this run's golden bookkeeping as JSON to PATH, for 'python -m harness golden "
                         "unused RECORD...' to judge unused goldens over the union of shards (--splits)")
    parser.addini("golden_dir", type="string", default="golden",
                  help="directory of golden files, relative to the rootdir (default: golden)")


def pytest_configure(config: pytest.Config) -> None:
    try:
        mode = run_mode(config.getoption("golden_regen"), config.getoption("golden_regen_all"))
    except ValueError as e:  # a regen run with CI set
        raise pytest.UsageError(str(e)) from None
    try:
        max_bytes()
    except ValueError as e:  # HARNESS_GOLDEN_MAX_BYTES that is no size
        raise pytest.UsageError(str(e)) from None
    if not hasattr(config, "workerinput"):  # only the controller writes them
        _check_output_paths(config)
    raw = config.getini("golden_dir") or "golden"
    try:
        root = golden_root(raw, config.rootpath)
    except ValueError as e:  # checked before the temp-file sweep below, which must stay inside the project
        raise pytest.UsageError(f"ini golden_dir: {e}; goldens live in the project: give a directory under the "
                                f"rootdir (default: golden)") from None
    run = _Run(config, mode, root)
    if not hasattr(config, "workerinput"):  # once per session, before any worker writes
        run.leftovers = remove_leftover_temps(root, Path(config.rootpath))
    session_of(config).add_section("golden", run)
    config.pluginmanager.register(_Tracker(run), "harness-golden-tracker")


def _check_output_paths(config: pytest.Config) -> None:
    """--golden-changes and --golden-record, asked at start-up: a path that cannot be written would otherwise
    cost a traceback after the whole run, a FIFO a hang, a symlink a file overwritten elsewhere. The change list
    is a new file unless --golden-overwrite-changes, as ``golden regen --changes`` is; a shard's record is
    replaced on every run of that shard."""
    changes = config.getoption("golden_changes")
    if config.getoption("golden_overwrite_changes") and changes is None:
        raise pytest.UsageError("--golden-overwrite-changes needs --golden-changes=PATH")
    replace = None if config.getoption("golden_overwrite_changes") else "--golden-overwrite-changes"
    for flag, path, flag_replace in (("--golden-changes", changes, replace),
                                     ("--golden-record", config.getoption("golden_record"), None)):
        problem = None if path is None else output_problem(path, replace_flag=flag_replace)
        if problem:
            raise pytest.UsageError(f"{flag}={path}: {problem}")


def pytest_unconfigure(config: pytest.Config) -> None:
    plugin = config.pluginmanager.get_plugin("harness-golden-tracker")
    if plugin is not None:
        config.pluginmanager.unregister(plugin)


class _Tracker:
    """Hooks that need this session's run but get no config (reports, deselection): one per config."""

    def __init__(self, run: _Run) -> None:
        self.run = run

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        self.run.deselected += len(items)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        run = self.run
        run.items = {i.nodeid: run.all_dirs[i.nodeid] for i in session.items if i.nodeid in run.all_dirs}
        if run.recording:
            run.selected = {i.nodeid for i in session.items}

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if not report.skipped or not report.nodeid or "::" in report.nodeid:
            return  # a skipped class holds items of its module; those are judged per item
        if report.nodeid.endswith(".py"):
            self.run.skipped_modules.add(Path(report.nodeid).stem)
        else:
            self.run.skipped_dirs.add(report.nodeid)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" and report.passed:
            self.run.passed.add(report.nodeid)
        elif report.failed or report.skipped:
            self.run.not_passed.add(report.nodeid)


# ---------------------------------------------------------------------------------------- collection

def _uses_golden(item: pytest.Item) -> bool:
    return "golden" in getattr(item, "fixturenames", ())


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Give every golden test its directory, over all collected tests (before any deselection), and flag
    directories two tests would share: one owner per file is what keeps xdist workers from racing."""
    run = _run_of(config)
    if run is None:
        return
    if run.recording:  # first (tryfirst), so before -k/-m/--deselect and shards (pytest-split) deselect
        run.collected = [i.nodeid for i in items]
    golden_items = [i for i in items if _uses_golden(i)]
    if not golden_items:
        return
    from harness.golden.files import item_dir_parts  # imports torch: only when golden tests were collected

    by_key: dict[str, list[str]] = {}
    for item in golden_items:
        d = run.rel(run.root.joinpath(*item_dir_parts(item)))
        run.all_dirs[item.nodeid] = d
        by_key.setdefault(d.casefold(), []).append(item.nodeid)
    for nodeids in by_key.values():
        if len(nodeids) > 1:
            for n in nodeids:
                run.collisions[n] = nodeids


# ------------------------------------------------------------------------------------------- fixture

@pytest.fixture
def golden(request: pytest.FixtureRequest) -> Golden:
    """Compare tensors with this test's golden files: ``golden.check(name, tensor, fmt=None, tol=None)``;
    ``golden.load(name, test=None, param=None)`` reads one (also another test's)."""
    run = _run_of(request.config)
    if run is None:
        raise pytest.UsageError("the golden fixture needs the harness golden plugin (harness.golden.plugin)")
    node = request.node
    clash = run.collisions.get(node.nodeid)
    if clash:
        pytest.fail(
            f"golden directory {run.all_dirs[node.nodeid]} would be shared by {len(clash)} tests: "
            f"{', '.join(clash)}. Each golden file must belong to one test: rename a test or its param ids",
            pytrace=False,
        )
    from harness.golden.fixture import Golden  # imports torch: only once a test uses goldens

    g = Golden(node, run.state(), op=harness_op(node))
    node.stash[_FIXTURE] = g
    return g


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    """Under ``--golden-regen`` checks rewrite and carry on, so one run regenerates every golden of a test;
    the test then fails here, once, listing what was rewritten."""
    try:
        result = yield
    except BaseException:
        g = item.stash.get(_FIXTURE, None)
        if g is not None and g.regenerated:
            item.add_report_section("call", "golden", "\n\n".join(g.regenerated))
        raise
    g = item.stash.get(_FIXTURE, None)
    if g is not None and g.regenerated:
        from harness.golden.message import review_failure  # torch is loaded by now (the fixture ran)

        pytest.fail(review_failure(g.regenerated), pytrace=False)
    return result


# -------------------------------------------------------------------------------------- session end

def _partial_reason(config: pytest.Config, run: _Run, *, count_deselected: bool = True) -> str | None:
    """Why this run is not the whole suite (None when it is); ``count_deselected=False``: why it is not a
    shard of the whole suite (a record's union is checked for coverage where it is judged)."""
    opt = config.option
    for dest, flag in (("keyword", "-k"), ("markexpr", "-m"), ("lf", "--lf"), ("stepwise", "--sw"),
                       ("deselect", "--deselect"), ("ignore", "--ignore"), ("ignore_glob", "--ignore-glob"),
                       ("collectonly", "--collect-only")):
        if getattr(opt, dest, None):
            return f"{flag} given"
    if run.deselected and count_deselected:
        return f"{run.deselected} tests deselected"
    if run.skipped_dirs:
        return f"collection skipped in {', '.join(sorted(run.skipped_dirs))}"
    rootdir = Path(os.path.abspath(config.rootpath))
    roots = []
    for pattern in config.getini("testpaths") or []:
        matches = sorted(rootdir.glob(pattern)) if any(c in pattern for c in "*?[") else [rootdir / pattern]
        roots.extend(Path(os.path.abspath(m)) for m in matches)
    roots = roots or [rootdir]
    inv = Path(config.invocation_params.dir)
    covering = [Path(os.path.abspath(inv / a)) for a in config.args if "::" not in a]
    for r in roots:
        if not any(r == c or c in r.parents for c in covering):
            return f"test path {r} is not selected"
    return None


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    run = _run_of(config)
    if run is None:
        return
    run.fold_local()
    if hasattr(config, "workerinput"):
        return  # the session hands the run to the controller (harness.plugin)
    path = config.getoption("golden_changes")
    if path:
        if os.path.lexists(path) and not config.getoption("golden_overwrite_changes"):
            _not_written(config, "--golden-changes", path, "a file appeared there during the run; not replaced")
        else:
            data = {"version": _CHANGES_VERSION, "mode": run.mode, "checked": run.checked,
                    "changes": sorted(run.changes, key=lambda c: c["path"])}
            _write_json(config, "--golden-changes", path, data)
    path = config.getoption("golden_record")
    if path:
        _write_record(config, run, int(exitstatus), path)
    if config.getoption("golden_unused") == "off":
        return
    if int(exitstatus) not in (int(pytest.ExitCode.OK), int(pytest.ExitCode.TESTS_FAILED)):
        run.partial = f"session ended with {pytest.ExitCode(int(exitstatus)).name}"
        return
    run.partial = _partial_reason(config, run)
    if run.partial is not None:
        return
    run.unused = _unused(run)
    if run.unused and config.getoption("golden_unused") == "fail" and int(exitstatus) == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _unused(run: _Run) -> list[str]:
    return unused_files(run.root, run.rootdir, used=run.used, items=run.items, passed=run.passed - run.not_passed,
                        skipped_modules=run.skipped_modules)


def _write_record(config: pytest.Config, run: _Run, exitstatus: int, path: str) -> None:
    """This run's golden record (``harness.golden.unused`` reads and judges it): written by the controller,
    after every worker's part has been merged."""
    items = run.items
    if int(exitstatus) in (int(pytest.ExitCode.OK), int(pytest.ExitCode.TESTS_FAILED)):
        partial = _partial_reason(config, run, count_deselected=False)
    else:
        partial = f"session ended with {pytest.ExitCode(int(exitstatus)).name}"
    # relative to the rootdir (the golden dir lies inside it: golden_root), so shards on other checkouts agree
    golden_dir = Path(os.path.relpath(run.root, os.path.abspath(run.rootdir))).as_posix()
    data = {
        "kind": RECORD_KIND, "version": RECORD_VERSION, "exitstatus": int(exitstatus), "partial": partial,
        "golden_dir": golden_dir,
        "collected": run.collected, "selected": sorted(run.selected), "items": items,
        "used": sorted(run.used),
        "passed": sorted(n for n in run.passed if n in items),
        "not_passed": sorted(n for n in run.not_passed if n in items),
        "skipped_modules": sorted(run.skipped_modules),
    }
    _write_json(config, "--golden-record", path, data)


def _write_json(config: pytest.Config, flag: str, path: str, data: dict[str, Any]) -> None:
    """Write ``data`` through a temp file beside ``path`` and ``os.replace``: a reader never sees half a file, and
    a symlink put at ``path`` during the run is replaced, never written through. The path was checked at
    start-up; what changed since costs the file (named in the summary), never the run."""
    tmp = f"{path}.tmp{os.getpid()}"
    created = False
    try:
        with open(tmp, "x", encoding="utf-8") as f:  # "x": a file or link already there is never written through
            created = True
            json.dump(data, f, indent=1, sort_keys=True)
            f.write("\n")
        os.replace(tmp, path)
    except OSError as e:
        _not_written(config, flag, path, e.strerror or str(e))
        if created and os.path.lexists(tmp):  # ours: never left behind
            os.unlink(tmp)


def _not_written(config: pytest.Config, flag: str, path: str, why: str) -> None:
    line = f"golden: {flag}={path}: not written: {why}"
    tr = config.pluginmanager.get_plugin("terminalreporter")
    if tr is not None:
        tr.write_line(line, red=True)
    else:
        print(line, file=sys.stderr)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    run = _run_of(config)
    if run is None or hasattr(config, "workerinput"):
        return
    tr = terminalreporter
    removed, kept = run.leftovers
    if removed or kept:
        tr.write_sep("=", "golden: interrupted writes")
        if removed:
            tr.write_line(f"removed {len(removed)} temp file(s) left by golden writes that never finished "
                          f"(a killed run):")
            for rel in removed:
                tr.write_line(f"  {rel}")
        if kept:
            tr.write_line(f"{len(kept)} such temp file(s) could not be removed; remove them by hand:", red=True)
            for rel in kept:
                tr.write_line(f"  {rel}")
    if run.changes or run.mode == "regen-all":
        created = sum(c["action"] == "created" for c in run.changes)
        tr.write_sep("=", "golden")
        tr.write_line(f"golden ({run.mode}): {run.checked} checks, {created} created, "
                      f"{len(run.changes) - created} rewritten")
        for c in sorted(run.changes, key=lambda c: c["path"]):
            tr.write_line(f"  {c['action']:<9} {c['path']}  ({c['summary']})")
    record = config.getoption("golden_record")
    if record and run.collected:
        if not run.changes and run.mode != "regen-all":
            tr.write_sep("=", "golden")
        tr.write_line(f"golden record: {record} ({len(run.selected)} of {len(run.collected)} tests selected; "
                      f"judge the shards' union with: python -m harness golden unused RECORD...)")
    if run.unused:
        mode = config.getoption("golden_unused")
        if not run.changes and not (record and run.collected):
            tr.write_sep("=", "golden")
        tr.write_line(f"{len(run.unused)} golden file(s) used by no test (--golden-unused={mode}):",
                      red=mode == "fail", yellow=mode == "warn")
        for rel in run.unused:
            tr.write_line(f"  {rel}")
