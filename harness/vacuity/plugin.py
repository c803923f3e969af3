"""Vacuity check's pytest glue: ``--harness-vacuity[=fail]``, the ``vacuity_ok`` marker, the failing test and the
terminal section. The logic (the wrong answers, the probing, the section) is :mod:`harness.vacuity`.

Registered by ``harness.plugin``. Off by default. ``--harness-vacuity`` (``=report``) lists the assertions that
accepted a wrong answer; ``=fail`` also fails each test that made one, unless the test carries
``@pytest.mark.vacuity_ok(reason=...)`` (optionally ``corruptions=[names]``: only those are justified).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from harness.plugin import session_of
from harness.vacuity import SECTION, State

_MARKER = ("vacuity_ok(reason, corruptions=None): this test's assertions may accept the named wrong answers "
           "(all, without corruptions=) of --harness-vacuity; reason says why")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("harness")
    group.addoption(
        "--harness-vacuity", dest="harness_vacuity", nargs="?", const="report", default="off",
        choices=("off", "report", "fail"), metavar="report|fail",
        help="ask every passing harness assertion about wrong answers built from its inputs (an ULP past the "
             "tolerance, swapped blocks, a NaN, a sign flip, ...) and list those it accepts; =fail fails the test "
             "(justify in place with @pytest.mark.vacuity_ok(reason=...)). Default: off",
    )


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", _MARKER)
    mode = config.getoption("harness_vacuity")
    if mode != "off":
        session_of(config).add_section(SECTION, State(mode))


def _state(config: pytest.Config) -> State | None:
    st = session_of(config).sections.get(SECTION)
    return st if isinstance(st, State) else None


def _justifier(item: pytest.Item) -> Any:
    m = item.get_closest_marker("vacuity_ok")
    if m is None:
        return lambda name: None
    unknown = sorted(set(m.kwargs) - {"reason", "corruptions"})
    if unknown or len(m.args) > 1 or (m.args and "reason" in m.kwargs):
        raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.vacuity_ok takes reason (one, by position or keyword) "
                                f"and corruptions=; got args={m.args!r}, kwargs={sorted(m.kwargs)!r}")
    reason = m.kwargs.get("reason") or (m.args[0] if m.args else None)
    if not isinstance(reason, str) or not reason.strip():
        raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.vacuity_ok needs reason='why the assertion may accept "
                                f"these wrong answers'")
    only = m.kwargs.get("corruptions")
    if only is not None and (not isinstance(only, (list, tuple, set, frozenset))
                             or not all(isinstance(c, str) for c in only)):
        raise pytest.UsageError(f"{item.nodeid}: vacuity_ok(corruptions=...) expects a list of corruption names")
    return lambda name: reason if only is None or name in only else None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # At collection, whatever --harness-vacuity says: a bad marker was accepted until a run turned the check on.
    _justifier(metafunc.definition)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    __tracebackhide__ = True  # a test's failure is reported as its own, not this wrapper's
    st = _state(item.config)
    if st is None:
        return (yield)
    st.test, st.justify = item.nodeid, _justifier(item)
    try:
        return (yield)
    finally:
        st.test, st.justify = "", (lambda name: None)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    rep = yield
    st = _state(item.config)
    if st is None or st.mode != "fail" or call.when != "call" or not rep.passed:
        return rep
    bad = [f for f in st.of_test(item.nodeid) if f.justified is None]
    if bad:
        lines = ["harness: --harness-vacuity=fail: an assertion of this test accepts a wrong answer (fix the check "
                 "or its tolerance row, or justify it with @pytest.mark.vacuity_ok(reason=...)):"]
        for f in bad:
            lines.extend(f.lines())
        rep.outcome = "failed"
        rep.longrepr = "\n".join(lines)
    return rep


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return
    st = _state(config)
    if st is None:
        return
    terminalreporter.write_sep("-", "harness: vacuity (passing assertions that accept a wrong answer)")
    for line in st.lines():
        terminalreporter.write_line(line)
