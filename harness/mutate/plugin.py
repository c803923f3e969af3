"""Mutation testing's pytest glue, loaded with ``-p harness.mutate.plugin`` by the runs that
``python -m harness mutate`` starts (never by the harness plugin itself: an ordinary run has no use for it).

- Loading it installs the mutant's import hook (:mod:`harness.mutate.hook`) when the environment names one,
  before any conftest or test module is imported.
- ``--harness-mutate-record=PATH``: the kernels each test launched, from launch capture's listeners, written to
  PATH as ``{nodeid: [[kernel, file], ...]}`` (an xdist worker writes ``PATH.<worker id>``).
- :data:`TESTS_ENV` names a file of node ids: the run keeps those tests and deselects the rest, so the user's
  own pytest arguments (paths, ``-k``, options) are passed on unchanged.
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
    def __init__(self, path: str) -> None:
        self.path = path
        self.test = ""
        self.launched: dict[str, set[tuple[str, str]]] = {}

    def add(self, launch: Any) -> None:
        if self.test:
            self.launched.setdefault(self.test, set()).add((launch.kernel, launch.file))

    def write(self, suffix: str) -> None:
        data = {t: sorted(map(list, k)) for t, k in sorted(self.launched.items())}
        with open(self.path + suffix, "w") as f:
            json.dump(data, f, indent=1)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("harness").addoption(
        "--harness-mutate-record", dest="harness_mutate_record", metavar="PATH", default=None,
        help="write the kernels each test launched to PATH (JSON), for python -m harness mutate")


def pytest_configure(config: pytest.Config) -> None:
    path = config.getoption("harness_mutate_record")
    if path:
        config.stash[_KEY] = _Record(path)


_KEY = pytest.StashKey[_Record]()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    listed = os.environ.get(TESTS_ENV)
    if not listed:
        return
    with open(listed) as f:
        keep = set(json.load(f))
    out = [it for it in items if it.nodeid in keep]
    gone = [it for it in items if it.nodeid not in keep]
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

    st = state()
    if rec.add not in st.listeners:
        st.listeners.append(rec.add)
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
