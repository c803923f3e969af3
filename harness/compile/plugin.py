"""pytest glue of the compile feature: the compile matrix (``--harness-targets``, the ``compile_targets``
marker, the ``compile_target`` fixture, a one-line timing summary) and launch capture
(``--harness-compile-launches`` / ini ``harness_compile_launches``).

Registered by ``harness.plugin``. Nothing here imports triton until a test asks for ``compile_target`` or
capture is on (the feature's modules import it on first use). The feature's per-session state is two
sections of the session: ``compile_stats`` (compile counters, summed over xdist workers) and
``compile_launches`` (the session's capture state: capture blocks, ``expect_compile_failure`` declarations;
with capture on, the capture report, also the key of that name in ``--harness-report``). The logic lives in
the sibling modules; every failure text in :mod:`harness.compile.message`.

On the GPU lane a third section, ``triton_compiles``, counts the run's Triton compiles and its reads from
Triton's on-disk cache (one summary line), and with ``--harness-record-launches=PATH`` writes the launch
manifest a warm start compiles ahead of the next run (:mod:`harness.compile.warm`,
``python -m harness compile --warm PATH``).

Which targets a test gets: the marker's targets if it has ``@pytest.mark.compile_targets(...)``, else
:data:`harness.compile.targets.DEFAULT_TARGETS`. ``--harness-targets=sm80,sm90`` replaces the default list and,
for a marked test, narrows the marker's list to the targets in both (a test marked for sm90 only is never
compiled for sm80); an empty intersection gives one skipped item saying so. Targets whose Triton backend
is missing here are skipped with the reason.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import pytest

from harness.arch import interpreting, parse_arch
from harness.compile import autotune, background, budget, cache
from harness.compile.disk_cache import cache_dir, representative
from harness.compile.findings import DEPTHS, Report, check
from harness.compile.launches import SECTION, Captured, CaptureState, Launch, code_flags, constexpr_text
from harness.compile.message import (
    LOWERING_LEGEND,
    MATRIX_LEGEND,
    Finding,
    format_capture_failure,
    format_capture_totals,
    format_compile_stats,
    format_finding,
    format_not_judged,
    group,
    has_lowering,
    has_slow,
    render_matrix,
    slow_legend,
)
from harness.compile.personality import device_personality, same_answers
from harness.compile.targets import (
    DEFAULT_TARGETS,
    check_targets,
    frontend_class,
    parse_targets,
    target_available,
    target_supported,
)
from harness.compile.warm import Listener, install_listener, write_manifest
from harness.imports import after_import
from harness.plugin import session_of

_MARKER = (
    "compile_targets(*targets): the GPU targets (sm90, sm_80, 120, gfx942...) the compile_target fixture "
    "is parametrized over for this test (default: harness.compile.targets.DEFAULT_TARGETS)"
)


_INI = "harness_compile_launches"
_MIN_INI = "harness_min_target"
_BUDGET_INI = "harness_ptxas_budget"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("harness")
    group.addoption(
        "--harness-targets",
        dest="harness_targets",
        metavar="T1,T2",
        default=None,
        help="comma-separated compile targets for the compile_target fixture (e.g. sm80,sm90); replaces "
        "the default list and narrows compile_targets markers to these",
    )
    group.addoption(
        "--harness-compile-launches", dest="harness_compile_launches", action="store_true", default=None,
        help="interpreter lane: compile every kernel launch (and its fp16/bf16/fp32 variants) for the "
             "compile-matrix targets; a compile failure fails the launching test (ini harness_compile_launches)",
    )
    group.addoption(
        "--harness-no-widen", dest="harness_no_widen", action="store_true", default=False,
        help="with --harness-compile-launches: compile only the launched dtypes, not the widened variants",
    )
    group.addoption(
        "--harness-widen-targets", dest="harness_widen_targets", metavar="T1,T2", default=None,
        help="with --harness-compile-launches: compile the widened variants for these targets only (default: "
             "every capture target); bounds the cost on a small CI machine",
    )
    group.addoption(
        "--harness-compile-all-configs", dest="harness_compile_all_configs", action="store_true", default=False,
        help="with --harness-compile-launches: compile every distinct launch; by default launches differing only "
             "in integer constexprs other than 0/1 (sizes) are compiled once",
    )
    group.addoption(
        "--harness-compile-depth", dest="harness_compile_depth", choices=DEPTHS, default="fast",
        help="with --harness-compile-launches: fast (default) compiles each launch as run through ptxas for every "
             "target (an autotuned kernel: its first config) and its widened variants, branches and other autotune "
             "configs through Triton's frontend only, once per class of targets the frontend treats alike; full "
             "compiles everything through ptxas on every target; frontend compiles nothing past the frontend",
    )
    group.addoption(
        "--harness-autotune", dest="harness_autotune", choices=("first", "each"), default="first",
        help="interpreter lane: how @triton.autotune kernels run (the autotuner's benchmarking needs a GPU): "
             "first (default) runs the first config, each runs every config in turn (for kernels that overwrite "
             "their output); launch capture compiles every config either way",
    )
    group.addoption(
        "--harness-record-launches", dest="harness_record_launches", metavar="PATH", default=None,
        help="GPU lane: write every kernel specialization Triton compiled (or read from its cache) in this run to "
             "PATH, the manifest `python -m harness compile --warm PATH` compiles ahead of the next run",
    )
    group.addoption(
        "--harness-ptxas-budget", dest="harness_ptxas_budget", metavar="SECONDS", default=None,
        help=f"with --harness-compile-launches: kill ptxas after SECONDS of wall time per compile; that compile is "
             f"not judged (cell 'slow'), neither a failure nor a pass; 0: no limit (default "
             f"{budget.DEFAULT_SECONDS:g}, ini {_BUDGET_INI})",
    )
    parser.addini(_BUDGET_INI, type="string", default="",
                  help=f"launch capture: ptxas's wall-clock seconds per compile (default {budget.DEFAULT_SECONDS:g}; "
                       f"0: no limit); see --harness-ptxas-budget")
    parser.addini(_MIN_INI, type="string", default="",
                  help="launch capture: the lowest CUDA target the project supports (e.g. sm80); compile failures "
                       "on targets below it are reported in the summary, not failed")
    parser.addini(_INI, type="bool", default=False,
                  help="compile every interpreted kernel launch for the compile-matrix targets (see "
                       "--harness-compile-launches)")


_targets_key = pytest.StashKey["tuple[Any, ...] | None"]()
_widen_key = pytest.StashKey["tuple[str, ...] | None"]()
_budget_key = pytest.StashKey[float]()
_min_key = pytest.StashKey[str]()


@pytest.hookimpl(trylast=True)  # after harness.plugin opened the session and chose the lane
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", _MARKER)
    config.stash[_targets_key] = _option_targets(config)  # a bad list is a usage error now, not at collection
    # The capture options' values, checked whether or not capture is on (a bad one was accepted until it was):
    # addopts shared by the lanes pass them where capture is off too, so their presence alone is no error.
    config.stash[_widen_key] = _widen_targets(config)
    config.stash[_budget_key] = _ptxas_budget(config)
    config.stash[_min_key] = _min_target(config)
    session_of(config).add_section("compile_stats", _Stats())
    if interpreting():
        s, mode = session_of(config), config.getoption("harness_autotune", default="first")
        if mode not in autotune.MODES:
            raise pytest.UsageError(f"--harness-autotune={mode!r}: expected one of {', '.join(autotune.MODES)}")
        after_import(s.patch, "triton", lambda: autotune.install(s.patch, mode), tag="autotune-on-import")
    _configure_capture(config)
    _configure_warm(config)


def _option_targets(config: pytest.Config) -> tuple[Any, ...] | None:
    raw = config.getoption("harness_targets", default=None)
    if raw is None:
        return None
    try:
        targets = parse_targets(raw)
        check_targets(targets)  # an unknown target would reach LLVM, which may abort the process
        return targets
    except ValueError as e:
        raise pytest.UsageError(f"--harness-targets={raw!r}: {e}") from None


def _marked_targets(node: pytest.Item) -> tuple[Any, ...] | None:
    """The test's ``compile_targets`` marker's targets (None without one), checked like ``--harness-targets``."""
    marker = node.get_closest_marker("compile_targets")
    if marker is None:
        return None
    if marker.kwargs:
        raise pytest.UsageError(f"{node.nodeid}: @pytest.mark.compile_targets takes target names only")
    try:
        marked = parse_targets(marker.args)
        check_targets(marked)
    except (ValueError, TypeError) as e:
        raise pytest.UsageError(f"{node.nodeid}: @pytest.mark.compile_targets: {e}") from None
    return marked


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    node = metafunc.definition
    # Checked on every test that carries the marker, whether or not it takes compile_target (a bad one was
    # accepted on a test that did not, and did nothing).
    marked = _marked_targets(node)
    if "compile_target" not in metafunc.fixturenames:
        return
    chosen = metafunc.config.stash.get(_targets_key, None)
    if marked is None:
        targets = chosen if chosen is not None else parse_targets(DEFAULT_TARGETS)
    elif chosen is None:
        targets = marked
    else:
        wanted = {t.name for t in chosen}
        targets = tuple(t for t in marked if t.name in wanted)
    if not targets:
        names = ",".join(t.name for t in marked or ())
        reason = f"none of --harness-targets is among this test's compile_targets ({names})"
        metafunc.parametrize(
            "compile_target", [pytest.param(None, id="no-target", marks=pytest.mark.skip(reason=reason))]
        )
        return
    params = []
    for t in targets:
        ok, reason = target_available(t)
        # An AOT compile never touches a device, so its outcome is the same on every lane: the CPU lanes run
        # these items, the GPU lane spends its time on what only a GPU shows (README, lane_independent).
        marks = [pytest.mark.lane_independent] + ([] if ok else [pytest.mark.skip(reason=reason)])
        params.append(pytest.param(t, id=t.name, marks=marks))
    metafunc.parametrize("compile_target", params)


@pytest.fixture
def compile_target(request: pytest.FixtureRequest) -> Any:
    """This item's :class:`harness.compile.targets.Target` (``.name`` ``sm90``, ``.cc`` 90, ``.backend``)."""
    if not hasattr(request, "param"):  # asked for at run time: collection parametrized nothing
        raise pytest.UsageError(
            f"{request.node.nodeid}: the compile_target fixture is parametrized at collection, one item per target: "
            f"name it as an argument of the test (or of a fixture the test uses), optionally with "
            f"@pytest.mark.compile_targets(...); request.getfixturevalue('compile_target') cannot parametrize")
    return request.param


# --- timing summary ----------------------------------------------------------------------------------------


def _local_stats() -> dict[str, float] | None:
    s = cache.stats()
    return s if s["compiles"] or s["frontend"] or s["hits"] else None


class _Stats:
    """The ``compile_stats`` section: this process's compile counters, plus the workers' on the controller."""

    def __init__(self) -> None:
        self.workers: dict[str, float] = {}

    def to_worker(self) -> dict[str, float] | None:
        return _local_stats()

    def merge(self, data: dict[str, float]) -> None:
        _merge(self.workers, data)

    def report(self) -> None:
        return None

    def total(self) -> dict[str, float]:
        total = dict(self.workers)
        local = _local_stats()
        if local:
            _merge(total, local)
        return total


def _merge(into: dict[str, float], s: dict[str, float]) -> None:
    for k, v in s.items():
        into[k] = max(into.get(k, 0), v) if k == "slowest" else into.get(k, 0) + v


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return
    s = session_of(config)
    capture = _launches(config).active
    if capture is not None:
        capture.terminal_summary(terminalreporter)
    warm_ = s.sections.get(WARM_SECTION)
    if isinstance(warm_, _Warm):
        for line in warm_.summary_lines():
            terminalreporter.write_line(line)
    total = s.sections["compile_stats"].total()
    if not total.get("compiles") and not total.get("frontend") and not total.get("hits"):
        return
    terminalreporter.write_line(format_compile_stats(total))


# --- launch capture ----------------------------------------------------------------------------------------


class _Launches(CaptureState):
    """The ``compile_launches`` section: the session's :class:`~harness.compile.launches.CaptureState` (so
    declarations and capture blocks end with the session), and, when capture is on, the :class:`_Capture` that
    compiles and reports. Registered before the initial conftest files load: a conftest may declare
    expected failures at import."""

    def __init__(self) -> None:
        super().__init__()
        self.active: _Capture | None = None  # set when capture is on

    def to_worker(self) -> dict[str, Any] | None:
        return self.active.to_worker() if self.active is not None else None

    def merge(self, data: dict[str, Any]) -> None:
        if self.active is not None:
            self.active.merge(data)

    def report(self) -> dict[str, Any] | None:
        return self.active.report() if self.active is not None else None


def _launches(config: pytest.Config) -> _Launches:
    s = session_of(config)
    section = s.sections.get(SECTION)
    if section is None:
        section = _Launches()
        s.add_section(SECTION, section)
    assert isinstance(section, _Launches)
    return section


def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    # After harness.plugin opened the session (tryfirst), before pytest imports the conftest files.
    _launches(early_config)


class _Capture:
    """The hooks of capture and what it found: launches seen, the report, the time spent compiling. On the
    interpreter lane every kernel launch a test makes is recorded; after the test body, each launch not seen
    before in this process is compiled for the capture targets with its widened dtype variants, and a finding
    fails that test. Off on GPU lanes (the GPU compiles what it runs)."""

    def __init__(self, config: pytest.Config, state: CaptureState, targets: tuple[str, ...],
                 widen_targets: tuple[str, ...] | None, ptxas_budget: float = budget.DEFAULT_SECONDS) -> None:
        self.state = state
        self.ptxas_budget = ptxas_budget  # 0: none
        self.targets = targets
        self.widen_targets = widen_targets
        self.dropped: dict[str, str] = {}  # default targets this Triton cannot compile for -> why
        self.all_configs = bool(config.getoption("harness_compile_all_configs"))
        self.widen = not config.getoption("harness_no_widen")
        self.depth = str(config.getoption("harness_compile_depth", default="fast") or "fast")
        self.done: dict[Any, set[str]] = {}  # configuration (or launch) -> targets compiled for it
        self.backend_done: set[Any] = set()  # launches as run compiled through ptxas (autotune: one config each)
        self.base_keys: set[Any] = set()  # configurations some test launched as run (not only in a replay)
        self.not_replayed: dict[str, str] = {}
        # launcher or kernel -> why its replays could not steer it: its other branches come from flag variants
        self.unsteered: dict[str, str] = {}
        self.never_asked: set[str] = set()  # kernels with flags whose launch followed no device query
        self.report_ = Report()
        self.seconds = 0.0
        self.worker_reports: list[dict[str, Any]] = []
        # test id -> the distinct launches capture recorded (0: none, or none it could type or find the source of)
        self.captured: dict[str, int] = {}

    def drop_unsupported(self) -> None:
        """Leave out the default targets the installed Triton cannot compile for (each said once in the
        summary): a default list must never fail a project over its Triton install."""
        for t in parse_targets(self.targets):
            ok, why = target_supported(t)
            if not ok:
                self.dropped[t.name] = why
        if self.dropped:
            self.targets = tuple(n for n in self.targets if n not in self.dropped)
            if self.widen_targets:
                self.widen_targets = tuple(n for n in self.widen_targets if n not in self.dropped) or None

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Any:
        failure: BaseException | None = None
        result = None
        code = getattr(getattr(item, "obj", None), "__code__", None)
        with self.state.queries.watching(), self.state.capture(code) as launches:
            self.state.queries.asked = False
            try:
                result = yield
            except BaseException as e:
                failure = e
            replayed = self._replay(launches)
            launches.close()
        # Compiled outside the except block: a compile error must not carry the test's failure as its context.
        findings = self._check(item, launches, replayed)
        if failure is not None:
            raise failure  # still compiled and reported; the test's own failure wins
        if findings:
            __tracebackhide__ = True
            raise AssertionError(format_capture_failure(findings, self.targets))
        return result

    def _replay(self, block: Captured) -> list[tuple[tuple[str, ...], Launch]]:
        """Each launcher call that asked ``torch.cuda`` about the device, made again as each CUDA target
        (:mod:`harness.compile.personality`); the launches each made, with the targets that make them."""
        out: list[tuple[tuple[str, ...], Launch]] = []
        for call in block.replays:
            pending = [p for p in (device_personality(t) for t in self.targets) if p is not None]
            while pending:
                p = pending.pop(0)
                error = None
                with self.state.capture() as got, self.state.queries.as_device(p) as transcript:
                    try:
                        call.call()
                    except (Exception, pytest.skip.Exception, pytest.fail.Exception) as e:
                        error = e  # the launcher's later steps may need real results; its launches count
                same = [q for q in pending if same_answers(q, transcript)]
                pending = [q for q in pending if q not in same]
                targets = (p.target, *(q.target for q in same))
                if not transcript and not pending and targets == tuple(
                        x.target for x in (device_personality(t) for t in self.targets) if x is not None):
                    name = getattr(call.fn, "__qualname__", "?")
                    self.unsteered[name] = (
                        "asked torch.cuda about the device in the test, not when replayed as each GPU: it launched "
                        "the same thing as every target (a memoized device check?)")
                if error is not None and not got:
                    name = getattr(call.fn, "__qualname__", "?")
                    self.not_replayed[name] = f"as {p.target}: {type(error).__name__}: {error}"[:200]
                out += [(targets, launch) for launch in got]
        return out

    def _check(self, item: pytest.Item, launches: list[Launch],
               replayed: list[tuple[tuple[str, ...], Launch]]) -> list[Finding]:
        findings: list[Finding] = []
        t0 = time.perf_counter()
        self.captured[item.nodeid] = len(set(launches))
        for launch in launches:
            self.base_keys.add(launch if self.all_configs else launch.config_key())
        if not self.state.queries.asked and self.widen:
            self.never_asked.update(x.kernel for x in launches if code_flags(x))
        used: dict[str, set[tuple[str, str]]] = {}  # kernel -> constexpr values some launch of the test used
        for _, launch in [((), x) for x in launches] + replayed:
            used.setdefault(launch.kernel, set()).update((k, constexpr_text(v)) for k, v in launch.constexprs)
        for targets, launch in [(self.targets, x) for x in launches] + replayed:
            key = launch if self.all_configs else launch.config_key()
            done = self.done.setdefault(key, set())
            todo = tuple(t for t in targets if t not in done)
            if not todo:
                continue
            done.update(todo)
            if not self.all_configs:
                launch = representative(launch)
            # A launch only a device personality makes (a branch no test ran) is widened on every target that
            # makes it: it is where a host-side arch branch hides its bug.
            wt = None if key not in self.base_keys else self.widen_targets
            depth, widen = self._depth(launch, key)
            if depth == "frontend" and not widen and self.depth == "fast":
                todo = self._config_targets(todo)
            findings += check(launch, todo, widen=widen, test=item.nodeid, report=self.report_,
                              widen_targets=wt, declarations=self.state.declarations,
                              launched=used.get(launch.kernel, ()), depth=depth,
                              ptxas_budget=self.ptxas_budget or None)
        self.seconds += time.perf_counter() - t0
        return findings

    def _depth(self, launch: Launch, key: Any) -> tuple[str, bool]:
        """How deep this launch is compiled, and whether it is widened: with the default ``fast``, an autotuned
        launch's first config goes through ptxas with its variants and branches, and its other configs through the
        frontend only, as launched. Why: a config changes tiles, warps and stages, which the frontend checks (tile
        shapes against ``tl.dot``'s minimum, ``tl.static_assert``) whatever the dtypes, and which the backend
        lowers alike; compiling 12 configs x 7 targets with their variants made two autotuned kernels miss 22
        minutes (issue 40). A launch only a replay makes is compiled in full."""
        if self.depth != "fast" or not launch.pinned or key not in self.base_keys:
            return self.depth, self.widen
        bkey = launch.backend_key()
        if bkey in self.backend_done:
            return "frontend", False
        self.backend_done.add(bkey)
        return self.depth, self.widen

    def _config_targets(self, todo: tuple[str, ...]) -> tuple[str, ...]:
        """The targets an autotuned launch's later config is compiled for by default: those of the newest capture
        target's frontend class (sm90, sm100, sm120 by default). Why one class: the config was launched with the
        dtypes of the first config, which every target compiled; what a config changes (tiles, warps, stages)
        reaches the frontend through shapes, ``tl.static_assert`` and ``tl.dot``'s minimum size, which Triton's
        frontend checks alike for every CUDA target (``min_dot_size`` in Triton 3.6's and 3.9's NVIDIA backend
        does not read the capability)."""
        ts = parse_targets(self.targets)
        newest = max(ts, key=lambda t: (t.backend == "cuda", t.cc or 0))
        cls = frontend_class(newest)
        return tuple(t for t in todo if frontend_class(parse_targets([t])[0]) == cls)

    def to_worker(self) -> dict[str, Any]:
        return {"report": self.report_.to_worker(), "seconds": self.seconds, "not_replayed": self.not_replayed,
                "captured": self.captured,
                "dropped": self.dropped, "unsteered": self.unsteered,
                "never_asked": sorted(self.never_asked),
                "below_min": [[k, t, line] for (k, t), line in self.state.declarations.below_min.items()]}

    def merge(self, data: dict[str, Any]) -> None:
        self.worker_reports.append(data)

    def merged(self) -> tuple[Report, float]:
        rep = Report()
        seconds = self.seconds
        rep.merge(self.report_.to_worker())
        for d in self.worker_reports:
            rep.merge(d["report"])
            seconds += float(d.get("seconds", 0.0))
        return rep, seconds

    def report(self) -> dict[str, Any]:
        """The ``compile_launches`` key of ``--harness-report``."""
        rep, seconds = self.merged()
        captured = dict(self.captured)
        for d in self.worker_reports:
            captured.update(d.get("captured", {}))
        return {"targets": list(self.targets), "widen": self.widen, "ptxas_budget": self.ptxas_budget,
                "widen_targets": list(self.widen_targets or self.targets),
                "seconds": round(seconds, 3), **rep.to_dict(), "captured_launches": captured}

    def terminal_summary(self, terminalreporter: Any) -> None:
        rep, seconds = self.merged()
        tr = terminalreporter
        tr.write_sep("-", "harness: compile matrix of captured launches")
        if not rep.cells:
            tr.write_line("no kernel launches captured")
        else:
            cells = rep.count_cells()
            for line in render_matrix(cells, self.targets):
                tr.write_line(line)
            tr.write_line(MATRIX_LEGEND)
            if has_lowering(cells):
                tr.write_line(LOWERING_LEGEND)
            if has_slow(cells):
                tr.write_line(slow_legend(self.ptxas_budget))
        scope = "widening off" if not self.widen else (
            f"widened on {','.join(self.widen_targets)}" if self.widen_targets else "widened on every target")
        tr.write_line(format_capture_totals(rep.compiles, rep.cached, seconds, scope, str(cache_dir())))
        tr.write_line(_DEPTH_LINES[self.depth])
        for f, ts in group(rep.findings):
            for line in format_finding(f, ts).splitlines():
                tr.write_line(line)
        for f, ts in group(rep.not_judged):
            tr.write_line(format_not_judged(f, ts, self.ptxas_budget))
        for k, why in sorted(self.state.skipped.items()):
            tr.write_line(f"not captured: {k}: {why}")
        not_replayed = dict(self.not_replayed)
        for d in self.worker_reports:
            not_replayed.update(d.get("not_replayed", {}))
        for k, why in sorted(not_replayed.items()):
            tr.write_line(f"not replayed: {k} {why}")
        unsteered = dict(self.unsteered)
        for d in self.worker_reports:
            unsteered.update(d.get("unsteered", {}))
        for k, why in sorted(unsteered.items()):
            tr.write_line(f"not steered by the device: {k} {why}; its kernels' other branches were compiled from "
                          "the values of their flags and dtype constexprs the run did not launch")
        never = set(self.never_asked)
        for d in self.worker_reports:
            never.update(d.get("never_asked", ()))
        if never:
            names = sorted(k.rsplit(".", 1)[-1] for k in never)
            shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
            tr.write_line(f"not steered by the device: {len(names)} kernel(s) with flags or dtype constexprs were "
                          f"launched by code that never asked torch.cuda about the device (decided at import, or "
                          f"not device-dependent): {shown}; their other values were compiled as branches instead")
        below = dict(self.state.declarations.below_min)
        for d in self.worker_reports:
            below.update({(k, t): line for k, t, line in d.get("below_min", [])})
        for (k, t), line in sorted(below.items()):
            tr.write_line(f"below {_MIN_INI}={self.state.declarations.min_target} (reported, not failed): "
                          f"{k} @ {t}: {line}")
        dropped = dict(self.dropped)
        for d in self.worker_reports:
            dropped.update(d.get("dropped", {}))
        for t, why in sorted(dropped.items()):
            tr.write_line(f"not compiled for {t} (a default target): {why}")


#: The summary's line on how deep capture compiled (``--harness-compile-depth``).
_DEPTH_LINES = {
    "fast": "compile depth fast: launches as run through ptxas; widened variants, branches and later autotune configs "
            "through Triton's frontend only, once per frontend class (--harness-compile-depth=full: all through ptxas)",
    "full": "compile depth full: every compile through ptxas on its own target",
    "frontend": "compile depth frontend: every compile through Triton's frontend only, once per frontend class",
}


def _enabled(config: pytest.Config) -> bool:
    opt = config.getoption("harness_compile_launches", default=None)
    return bool(opt) if opt is not None else bool(config.getini(_INI))


def _configure_capture(config: pytest.Config) -> None:
    section = _launches(config)
    if not _enabled(config):
        return
    if not interpreting():
        return  # a GPU lane runs the real compiler on every launch already
    raw = config.getoption("harness_targets", default=None)
    try:
        targets = parse_targets(raw if raw else DEFAULT_TARGETS)
        if raw:  # the user's own list: refused up front (it needs Triton imported now)
            check_targets(targets)
    except ValueError as e:
        raise pytest.UsageError(f"--harness-targets: {e}") from None
    names = tuple(t.name for t in targets)
    widen = config.stash[_widen_key]
    if widen is not None:
        outside = [t for t in widen if t not in names]
        if outside:
            raise pytest.UsageError(f"--harness-widen-targets: {','.join(outside)} not among the capture targets "
                                    f"({','.join(names)})")
    low = config.stash[_min_key]
    if low:
        section.declarations.set_min_target(low)
    section.active = _Capture(config, section, names, widen, config.stash[_budget_key])
    config.pluginmanager.register(section.active, "harness-launch-capture")
    if not raw:  # the defaults: a target this Triton cannot compile for is left out once Triton is imported
        after_import(session_of(config).patch, "triton", section.active.drop_unsupported, tag="capture-targets")


def _widen_targets(config: pytest.Config) -> tuple[str, ...] | None:
    """``--harness-widen-targets`` as target names (None when not given); an empty, malformed or uncompilable list
    is a usage error (an empty one widened on every target, silently)."""
    raw = config.getoption("harness_widen_targets", default=None)
    if raw is None:
        return None
    where = "--harness-widen-targets"
    try:
        targets = parse_targets(raw)
    except (TypeError, ValueError) as e:
        raise pytest.UsageError(f"{where}: {e}") from None
    for t in targets:
        _refuse_nonexistent(t, where)
    return tuple(t.name for t in targets)


def _refuse_nonexistent(target: Any, where: str) -> None:
    """A usage error for a target no GPU has: neither in the harness's table of known archs nor compilable by the
    installed Triton (a GPU newer than the table). Not a check of this install: a known target it cannot compile
    for stays valid (capture leaves such a default target out, saying why)."""
    try:
        parse_arch(target.name)
    except ValueError as unknown:
        ok, _ = target_supported(target)
        if not ok and target_available(target)[0]:  # no backend here: nothing to ask, accepted
            raise pytest.UsageError(f"{where}: {unknown}") from None


def _min_target(config: pytest.Config) -> str:
    """The ini ``harness_min_target`` ("" when unset): a CUDA target that exists, i.e. one the harness knows or the
    installed Triton can compile for (a GPU newer than the harness's table); anything else is a usage error
    (``sm91`` only met the format, and then judged every target below it as unsupported)."""
    raw = config.getini(_MIN_INI).strip()
    if not raw:
        return ""
    where = f"ini {_MIN_INI}={raw!r}"
    try:
        target = parse_targets([raw])[0]
    except (TypeError, ValueError) as e:
        raise pytest.UsageError(f"{where}: {e}") from None
    if target.backend != "cuda":
        raise pytest.UsageError(f"{where}: expected a CUDA target such as sm80 (failures below it are reported, "
                                f"not failed)")
    _refuse_nonexistent(target, where)
    return target.name


def _ptxas_budget(config: pytest.Config) -> float:
    """``--harness-ptxas-budget``, else the ini's, else :data:`harness.compile.budget.DEFAULT_SECONDS`; a usage
    error naming the option for anything but seconds >= 0."""
    raw = config.getoption("harness_ptxas_budget", default=None)
    name = "--harness-ptxas-budget"
    if raw is None:
        raw, name = config.getini(_BUDGET_INI).strip(), f"ini {_BUDGET_INI}"
        if not raw:
            return budget.DEFAULT_SECONDS
    try:
        seconds = float(raw)
    except ValueError:
        seconds = float("nan")
    if not seconds >= 0 or seconds == float("inf"):
        raise pytest.UsageError(f"{name}={raw!r}: expected seconds >= 0 (0: no limit), e.g. 60")
    return seconds


# --- the GPU lane's compiles, and the manifest of a warm start ---------------------------------------------

#: The session section of the GPU lane's Triton compile counts.
WARM_SECTION = "triton_compiles"


class _Warm:
    """The ``triton_compiles`` section (GPU lane): the Triton compiles this run made and those it read from
    Triton's on-disk cache, summed over xdist workers (what a warm start saves shows here), and with
    ``--harness-record-launches`` the launches to write as the manifest of :mod:`harness.compile.warm`."""

    def __init__(self, listener: Listener, path: str | None) -> None:
        self.listener = listener
        self.path = path
        self.wait: tuple[str, float] | None = None  # (DONE, timeout) of a background warm start to wait for
        self.waited: list[tuple[float, str]] = []  # per process: the wait for a background warm start
        self.totals: dict[str, float] = {}
        self.entries: dict[str, dict[str, Any]] = {}
        self.not_recorded: dict[str, str] = {}
        self.written: int | None = None

    def to_worker(self) -> dict[str, Any]:
        return {"counts": self.listener.counts(), "entries": list(self.listener.entries.values()),
                "not_recorded": dict(self.listener.not_recorded), "waited": self.waited}

    def merge(self, data: dict[str, Any]) -> None:
        _merge(self.totals, data["counts"])
        for e in data["entries"]:
            self.entries.setdefault(json.dumps(e, sort_keys=True), e)
        self.not_recorded.update(data["not_recorded"])
        self.waited += [(float(t), str(o)) for t, o in data.get("waited", ())]

    def counts(self) -> dict[str, float]:
        out = dict(self.totals)
        _merge(out, self.listener.counts())
        return out

    def report(self) -> None:
        return None  # the terminal line says it; shards' differing counts would need a merge rule of their own

    def finish(self) -> None:
        """Controller: write the manifest (the workers' launches and this process's own)."""
        if self.path:
            for e in self.listener.entries.values():
                self.entries.setdefault(json.dumps(e, sort_keys=True), e)
            self.not_recorded.update(self.listener.not_recorded)
            self.written = write_manifest(self.path, self.entries.values())

    def summary_lines(self) -> list[str]:
        c = self.counts()
        if not c.get("compiled") and not c.get("cached") and not self.path:
            return self._wait_lines()
        lines = [f"harness: Triton compiled {int(c.get('compiled', 0))} kernels in this run "
                 f"({c.get('seconds', 0.0):.1f}s, slowest {c.get('slowest', 0.0):.2f}s) and read "
                 f"{int(c.get('cached', 0))} from its on-disk cache"]
        if self.written is not None:
            lines.append(f"harness: recorded {self.written} kernel specializations to {self.path} "
                         f"(python -m harness compile --warm {self.path} compiles them before a run)")
        for name, why in sorted(self.not_recorded.items()):
            lines.append(f"not recorded: {name}: {why}")
        return lines + self._wait_lines()

    def _wait_lines(self) -> list[str]:
        if not self.waited:
            return []
        outcomes = sorted({o for _, o in self.waited})
        return [f"harness: {len(self.waited)} process(es) waited up to {max(t for t, _ in self.waited):.1f}s "
                f"before their first test for the background warm start ({', '.join(outcomes)})"]


def _configure_warm(config: pytest.Config) -> None:
    path = config.getoption("harness_record_launches", default=None)
    if interpreting():
        if path:
            raise pytest.UsageError("--harness-record-launches records the kernels a GPU compiles; the interpreter "
                                    "lane compiles none (run it with --harness-lane=gpu)")
        return
    listener = Listener(record=bool(path), rootdir=config.rootpath)
    s = session_of(config)
    try:
        install_listener(s.patch, listener)
    except RuntimeError as e:
        if path:
            raise pytest.UsageError(f"--harness-record-launches: {e}") from None
        return
    section = _Warm(listener, path)
    done = os.environ.get(background.DONE_ENV)
    if done:
        raw = os.environ.get(background.WAIT_ENV)
        try:
            timeout = background.DEFAULT_WAIT_S if raw is None else float(raw)
            if not timeout >= 0:
                raise ValueError
        except ValueError:
            raise pytest.UsageError(f"{background.WAIT_ENV}={raw!r}: expected the most seconds to wait for the "
                                    f"background warm start (a number >= 0)") from None
        section.wait = (done, timeout)
    s.add_section(WARM_SECTION, section)


def pytest_collection_finish(session: pytest.Session) -> None:
    """GPU lane with ``HARNESS_WARM_DONE`` set: wait here, after collecting, for the warm start running beside the
    run (:mod:`harness.compile.background`), so that no test compiles what it is compiling."""
    try:
        section = session_of(session.config).sections.get(WARM_SECTION)
    except KeyError:
        return
    if isinstance(section, _Warm) and section.wait is not None:  # the section exists on the GPU lane only
        w = background.wait_done(*section.wait)
        section.waited.append((w.seconds, w.outcome))


def pytest_sessionfinish(session: pytest.Session) -> None:
    if hasattr(session.config, "workerinput"):
        return
    try:
        section = session_of(session.config).sections.get(WARM_SECTION)
    except KeyError:  # the session never opened (a usage error before configure)
        return
    if isinstance(section, _Warm):
        section.finish()
