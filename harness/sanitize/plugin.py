"""pytest glue of the sanitizer (:mod:`harness.sanitize`): ``--harness-sanitize=off|warn|fail`` (default fail),
the ``sanitize(mode)`` marker, the per-test attribution and the terminal section. Registered by
``harness.plugin``; active on the interpreter lane only (the GPU lane's kernels run on the device, where these
hooks see nothing)."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from harness.imports import after_import
from harness.plugin import session_of
from harness.sanitize.report import SECTION, State

_MODES = ("off", "warn", "fail")
_MARKER = ("sanitize(mode): this test's launches are sanitized in this mode (off, warn or fail) instead of "
           "--harness-sanitize's; for a kernel that dereferences pointers it loaded from memory, say")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("harness")
    group.addoption(
        "--harness-sanitize", dest="harness_sanitize", choices=_MODES, default="fail",
        help="interpreter lane: check every tl.load/tl.store/tl.atomic_* lane against the launch's tensor "
             "arguments' storages, every store against the other programs' and a byte a program stores twice "
             "against the compiled kernel's threads (races). fail (default): the launch raises; warn: a warning; "
             "off: no check",
    )


@pytest.hookimpl(trylast=True)  # after harness.plugin chose the lane, and after the shims' (registered after them)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", _MARKER)
    s = session_of(config)
    mode = config.getoption("harness_sanitize")
    if s.lane != "interp":
        return
    state = State(mode)
    if mode != "off":
        s.add_section(SECTION, state)

    def install() -> None:
        from harness.sanitize import launch

        if mode == "off":  # an enclosing session's sanitizer must not check this session's launches either
            launch.silence(s.patch, state)
        else:
            launch.install(s.patch, state, s.arch)

    after_import(s.patch, "triton", install, tag="sanitize-on-import")


def _state(config: pytest.Config) -> State | None:
    st = session_of(config).sections.get(SECTION)
    return st if isinstance(st, State) else None


def _marker_mode(item: pytest.Item) -> str | None:
    m = item.get_closest_marker("sanitize")
    if m is None:
        return None
    if len(m.args) == 1 and not m.kwargs:
        mode = m.args[0]
    else:  # mode= alone; anything besides it (a misspelt keyword) was ignored
        mode = m.kwargs.get("mode") if not m.args and set(m.kwargs) == {"mode"} else None
    if not isinstance(mode, str) or mode not in _MODES:
        raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.sanitize takes one mode: 'off', 'warn' or 'fail', "
                                f"got args={m.args!r} kwargs={m.kwargs!r}")
    return mode


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # At collection, on every lane and under every --harness-sanitize: a bad marker was accepted where the
    # sanitizer was off and failed the test only where it was on.
    _marker_mode(metafunc.definition)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    __tracebackhide__ = True
    st = _state(item.config)
    if st is None:
        return (yield)
    st.test, st.override = item.nodeid, _marker_mode(item)
    try:
        return (yield)
    finally:
        st.test, st.override = "", None


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return
    st = _state(config)
    if st is None or not (st.launches or st.findings or st.unsupported or st.skipped):
        return
    terminalreporter.write_sep("-", "harness: sanitizer (out-of-bounds accesses, races between programs)")
    for line in st.lines():
        terminalreporter.write_line(line)
