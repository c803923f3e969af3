"""Mutation testing's pytest glue, loaded with ``-p harness.mutate.plugin`` by the runs that
``python -m harness mutate`` starts (never by the harness plugin itself: an ordinary run has no use for it).

- Loading it installs the mutant's import hook (:mod:`harness.mutate.hook`) when the environment names one,
  before any conftest or test module is imported.
- ``--harness-mutate-record=PATH``: the kernels each test launched, from launch capture's listeners, or compiled
  ahead of time (:data:`harness.compile.matrix.COMPILE_LISTENERS`: a target's compile error fails such a test,
  which no launch on the interpreter shows), and each test's seconds, written to PATH as
  ``{"launched": {nodeid: [[kernel, file], ...]}, "seconds": {nodeid: s}}`` (an xdist worker writes
  ``PATH.<worker id>``).
- :data:`TESTS_ENV` names a file of node ids: the run keeps those tests, in that order, and deselects the rest, so
  the user's own pytest arguments (paths, ``-k``, options) are passed on unchanged. The order is the runner's:
  with ``-x`` a mutant costs the tests up to the first that fails, so the ones that killed most run first.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from harness.mutate import hook

TESTS_ENV = "HARNESS_MUTATE_TESTS"

hook.install()


class _Record:
    """Registered as a plugin of its own (its hook below) by a record run."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.test = ""
        self.launched: dict[str, set[tuple[str, str]]] = {}
        self.seconds: dict[str, float] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[report.nodeid] = self.seconds.get(report.nodeid, 0.0) + report.duration

    def add(self, launch: Any) -> None:
        if self.test:
            self.launched.setdefault(self.test, set()).add((launch.kernel, launch.file))

    def compiled(self, jit: Any) -> None:
        fn = getattr(jit, "fn", None)
        code = getattr(fn, "__code__", None)
        if self.test and code is not None:
            self.launched.setdefault(self.test, set()).add((f"{fn.__module__}.{fn.__qualname__}", code.co_filename))

    def write(self, suffix: str) -> None:
        data = {"launched": {t: sorted(map(list, k)) for t, k in sorted(self.launched.items())},
                "seconds": {t: round(x, 3) for t, x in sorted(self.seconds.items())}}
        with open(self.path + suffix, "w") as f:
            json.dump(data, f, indent=1)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("harness").addoption(
        "--harness-mutate-record", dest="harness_mutate_record", metavar="PATH", default=None,
        help="write the kernels each test launched to PATH (JSON), for python -m harness mutate")


def pytest_configure(config: pytest.Config) -> None:
    path = config.getoption("harness_mutate_record")
    if path:
        config.stash[_KEY] = rec = _Record(path)
        config.pluginmanager.register(rec, "harness-mutate-record")


_KEY = pytest.StashKey[_Record]()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    listed = os.environ.get(TESTS_ENV)
    if not listed:
        return
    with open(listed) as f:
        order = {t: i for i, t in enumerate(json.load(f))}
    out = sorted((it for it in items if it.nodeid in order), key=lambda it: order[it.nodeid])
    gone = [it for it in items if it.nodeid not in order]
    if gone:
        config.hook.pytest_deselected(items=gone)
    items[:] = out


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    __tracebackhide__ = True
    rec = item.config.stash.get(_KEY, None)
    if rec is None:
        return (yield)
    from harness.compile.launches import state
    from harness.compile.matrix import COMPILE_LISTENERS

    st = state()
    if rec.add not in st.listeners:
        st.listeners.append(rec.add)
    if rec.compiled not in COMPILE_LISTENERS:
        COMPILE_LISTENERS.append(rec.compiled)
    rec.test = item.nodeid
    try:
        # a capture block of our own: launches are seen even where compile capture is off (an inner block,
        # compile capture's, takes them when it is on; the listeners hear them either way)
        with st.capture():
            return (yield)
    finally:
        rec.test = ""


def pytest_sessionfinish(session: pytest.Session) -> None:
    rec = session.config.stash.get(_KEY, None)
    if rec is not None:
        wid = getattr(session.config, "workerinput", {}).get("workerid")
        rec.write(f".{wid}" if wid else "")
