"""pytest glue for launch capture (:mod:`harness.launches`): ``--harness-compile-launches`` / ini
``harness_compile_launches``.

On the interpreter lane, every kernel launch a test makes is recorded; after the test body, each launch not seen
before in this process is compiled for the compile-matrix targets (``--harness-targets``, default
:data:`harness.targets.DEFAULT_TARGETS`) together with its widened dtype variants. A finding fails
*that* test, naming kernel, target, signature, the compiler's own error line and the launching test.
Refusals the arch model predicts (e4nv below sm89) and those declared with
:func:`harness.launches.expect_compile_failure` count as expected, never as failures. The terminal summary
shows a kernel × target matrix; with ``--harness-report=PATH`` the same goes under the ``compile_launches``
key of that JSON. Off on GPU lanes (the GPU compiles what it runs).
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import pytest

from harness.arch import interpreting

_WORKER_KEY = "harness_launch_report"
_INI = "harness_compile_launches"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("harness")
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
    parser.addini(_INI, type="bool", default=False,
                  help="compile every interpreted kernel launch for the compile-matrix targets (see "
                       "--harness-compile-launches)")


class _Capture:
    """Per-process state: launches seen, the report, the time spent compiling."""

    def __init__(self, config: pytest.Config, targets: tuple[str, ...], widen_targets: tuple[str, ...] | None
                 ) -> None:
        from harness.launches import Report

        self.config = config
        self.targets = targets
        self.widen_targets = widen_targets
        self.all_configs = bool(config.getoption("harness_compile_all_configs"))
        self.widen = not config.getoption("harness_no_widen")
        self.seen: set[Any] = set()
        self.report = Report()
        self.seconds = 0.0
        self.worker_reports: list[dict[str, Any]] = []

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Any:
        from harness.launches import capture

        failure: BaseException | None = None
        result = None
        with capture() as launches:
            try:
                result = yield
            except BaseException as e:
                failure = e
        # Compiled outside the except block: a compile error must not carry the test's failure as its context.
        findings = self._check(item, launches)
        if failure is not None:
            raise failure  # still compiled and reported; the test's own failure wins
        if findings:
            __tracebackhide__ = True
            from harness.launches import describe_group, group

            lines = [f"{len(findings)} compile failure(s) in kernels this test launched "
                     f"(harness launch capture; targets {','.join(self.targets)}):"]
            lines += [describe_group(f, ts) for f, ts in group(findings)]
            raise AssertionError("\n".join(lines))
        return result

    def _check(self, item: pytest.Item, launches: list[Any]) -> list[Any]:
        from harness.launches import check

        findings: list[Any] = []
        t0 = time.perf_counter()
        for launch in launches:
            key = launch if self.all_configs else launch.config_key()
            if key in self.seen:
                continue
            self.seen.add(key)
            findings += check(launch, self.targets, widen=self.widen, test=item.nodeid, report=self.report,
                              widen_targets=self.widen_targets)
        self.seconds += time.perf_counter() - t0
        return findings

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        data = getattr(node, "workeroutput", {}).get(_WORKER_KEY)
        if data:
            self.worker_reports.append(data)

    def merged(self) -> tuple[Any, float]:
        from harness.launches import Report

        rep = Report()
        rep.merge(self.report.to_dict())
        seconds = self.seconds
        for d in self.worker_reports:
            rep.merge(d["report"])
            seconds += float(d.get("seconds", 0.0))
        return rep, seconds

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        config = session.config
        if hasattr(config, "workerinput"):
            config.workeroutput[_WORKER_KEY] = {"report": self.report.to_dict(), "seconds": self.seconds}

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self, config: pytest.Config) -> None:
        # After the plugin's pytest_sessionfinish wrote --harness-report: add our key to that JSON.
        path = config.getoption("harness_report", default=None)
        if not path or hasattr(config, "workerinput") or not os.path.exists(path):
            return
        rep, seconds = self.merged()
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        data["compile_launches"] = {"targets": list(self.targets), "widen": self.widen,
                                    "widen_targets": list(self.widen_targets or self.targets),
                                    "seconds": round(seconds, 3),
                                    **rep.to_dict()}
        tmp = f"{path}.tmp{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1, sort_keys=True, default=str)
        os.replace(tmp, path)

    def pytest_terminal_summary(self, terminalreporter: Any, config: pytest.Config) -> None:
        if hasattr(config, "workerinput"):
            return
        from harness.launches import describe_group, group, render_matrix, skipped_launches

        rep, seconds = self.merged()
        tr = terminalreporter
        tr.write_sep("-", "harness: compile matrix of captured launches")
        if not rep.cells:
            tr.write_line("no kernel launches captured")
        for line in render_matrix(rep, self.targets):
            tr.write_line(line)
        scope = "widening off" if not self.widen else (
            f"widened on {','.join(self.widen_targets)}" if self.widen_targets else "widened on every target")
        tr.write_line(f"{rep.compiles} compiles ({rep.cached} from the disk cache) in {seconds:.1f}s ({scope})")
        for f, ts in group(rep.findings):
            for line in describe_group(f, ts).splitlines():
                tr.write_line(line)
        for k, why in sorted(skipped_launches().items()):
            tr.write_line(f"not captured: {k}: {why}")


def _enabled(config: pytest.Config) -> bool:
    opt = config.getoption("harness_compile_launches", default=None)
    return bool(opt) if opt is not None else bool(config.getini(_INI))


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    from harness import launches

    # Declarations made during this session (expect_compile_failure) end with it: a session nested in a test
    # (pytester) must not leave its own behind in the outer one.
    saved = list(launches._EXPECTED)
    config.add_cleanup(lambda: launches._EXPECTED.__setitem__(slice(None), saved))
    # A session nested in a captured test (pytester) shields the outer test from the launches it makes.
    shield = launches.barrier()
    shield.__enter__()
    config.add_cleanup(lambda: shield.__exit__(None, None, None))
    if not _enabled(config):
        return
    if not interpreting():
        return  # a GPU lane runs the real compiler on every launch already
    from harness.targets import DEFAULT_TARGETS, check_targets, parse_targets

    raw = config.getoption("harness_targets", default=None)
    try:
        targets = parse_targets(raw if raw else DEFAULT_TARGETS)
        check_targets(targets)
    except ValueError as e:
        raise pytest.UsageError(f"--harness-targets: {e}") from None
    names = tuple(t.name for t in targets)
    wraw = config.getoption("harness_widen_targets", default=None)
    widen = None
    if wraw:
        try:
            widen = tuple(t.name for t in parse_targets(wraw))
        except ValueError as e:
            raise pytest.UsageError(f"--harness-widen-targets: {e}") from None
        outside = [t for t in widen if t not in names]
        if outside:
            raise pytest.UsageError(f"--harness-widen-targets: {','.join(outside)} not among the capture targets "
                                    f"({','.join(names)})")
    config.pluginmanager.register(_Capture(config, names, widen), "harness-launch-capture")
