"""Coverage map's pytest glue: ``--harness-coverage=PACKAGE[,...]``, ``--harness-coverage-fail``, the terminal
section and the report key. The logic is :mod:`harness.coverage`.

Registered by ``harness.plugin``. The map is on when ``--harness-coverage`` is given (an empty value maps the
launches and lists no package). It reads launch capture (its own capture block when compile capture is off), so it
fills on the interpreter lane; ``--harness-coverage-fail`` fails the session when a kernel of the packages was not
launched and is not justified in place (meaningful on a run of the whole suite).
"""

from __future__ import annotations

from typing import Any

import pytest

from harness.coverage import SECTION, Map
from harness.plugin import session_of


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("harness")
    group.addoption(
        "--harness-coverage", dest="harness_coverage", metavar="PACKAGE[,...]", default=None,
        help="map what the tests launched (kernel x launched dtypes x arch) and list the @triton.jit kernels of "
             "these packages that no test launched (terminal summary and --harness-report)",
    )
    group.addoption(
        "--harness-coverage-fail", dest="harness_coverage_fail", action="store_true", default=False,
        help="with --harness-coverage: fail the session when a kernel of the packages was not launched and is not "
             "justified in place ('# harness-coverage: why' on its def line)",
    )


def _map(config: pytest.Config) -> Map | None:
    m = session_of(config).sections.get(SECTION)
    return m if isinstance(m, Map) else None


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    spec = config.getoption("harness_coverage")
    if spec is None:
        if config.getoption("harness_coverage_fail"):
            raise pytest.UsageError("--harness-coverage-fail needs --harness-coverage=PACKAGE[,...]")
        return
    packages = tuple(p.strip() for p in spec.split(",") if p.strip())
    bad = [p for p in packages if not all(part.isidentifier() for part in p.split("."))]
    if bad:
        raise pytest.UsageError(f"--harness-coverage={spec}: {bad[0]!r} is not a package name (dotted identifiers, "
                                f"comma-separated)")
    if config.getoption("harness_coverage_fail") and not packages:
        raise pytest.UsageError("--harness-coverage-fail needs a package: --harness-coverage=PACKAGE[,...]")
    from harness.coverage import package_dir

    for p in packages:
        try:
            package_dir(p)
        except ValueError as e:
            raise pytest.UsageError(str(e)) from None
    s = session_of(config)
    m = Map(packages, bool(config.getoption("harness_coverage_fail")))
    m.arch = s.arch.name if s.arch is not None else "-"
    s.add_section(SECTION, m)
    from harness.compile.launches import state  # no torch/triton: the capture state only

    state().listeners.append(m.add)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    __tracebackhide__ = True  # a test's failure is reported as its own, not this wrapper's
    m = _map(item.config)
    if m is None:
        return (yield)
    from harness.compile.launches import state

    m.test = item.nodeid
    try:
        # a capture block of its own: without --harness-compile-launches nothing else would watch the launches, and
        # every launched kernel would be listed as unlaunched (an inner block, compile capture's, takes the launches
        # when it is on; the listeners hear them either way)
        with state().capture():
            return (yield)
    finally:
        m.test = ""


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    m = _map(config)
    if m is None or hasattr(config, "workerinput") or not m.fail:
        return
    try:
        bad, _ = m.unlaunched()
    except ValueError as e:
        raise pytest.UsageError(str(e)) from None
    if bad and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    m = _map(config)
    if m is None or hasattr(config, "workerinput"):
        return
    terminalreporter.write_sep("-", "harness: coverage map (what the tests launched)")
    try:
        lines = m.lines()
    except ValueError as e:
        lines = [str(e)]
    for line in lines:
        terminalreporter.write_line(line)
