"""Graph replay's pytest glue: ``--harness-graph-replay``, the ``graph_replay`` / ``no_graph_replay`` markers, the
``graph_replay`` fixture and the ``replay`` section of the report. The checks are :mod:`harness.replay`.

Registered by ``harness.plugin``. A test routes a call through the fixture, saying what is input, what is
output and what fresh inputs look like; the fixture returns the eager result, so the test goes on as before.
Where replay is on for the test (``@pytest.mark.graph_replay``, or ``--harness-graph-replay`` and no
``@pytest.mark.no_graph_replay(reason=...)``) the call is also checked with
:func:`~harness.replay.assert_graph_replay`: a CUDA graph on the GPU lane, the two-call check on the
interpreter lane. A test marked ``graph_replay`` that makes no replay check fails: the marker promised one.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from typing import Any

import pytest

from harness.plugin import session_of
from harness.replay.results import SECTION, Results

_MARKERS = (
    "graph_replay: check this test's graph_replay fixture calls (and require at least one replay check): a CUDA "
    "graph replayed on fresh inputs with poisoned outputs (GPU lane), two calls on the same buffers (interpreter)",
    "no_graph_replay(reason): --harness-graph-replay leaves this test's graph_replay fixture calls eager; reason "
    "says why",
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("harness")
    group.addoption(
        "--harness-graph-replay", dest="harness_graph_replay", action="store_true", default=False,
        help="check every graph_replay fixture call by graph replay (CUDA graph on the GPU lane), not only those of "
             "tests marked graph_replay; a test opts out with @pytest.mark.no_graph_replay(reason=...)",
    )


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    for line in _MARKERS:
        config.addinivalue_line("markers", line)
    session_of(config).add_section(SECTION, Results())


def _results(config: pytest.Config) -> Results | None:
    r = session_of(config).sections.get(SECTION)
    return r if isinstance(r, Results) else None


def _check_markers(item: pytest.Item) -> None:
    on = item.get_closest_marker("graph_replay")
    off = item.get_closest_marker("no_graph_replay")
    if on is not None and (on.args or on.kwargs):
        raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.graph_replay takes no arguments")
    if off is None:
        return
    reason = off.kwargs.get("reason") or (off.args[0] if off.args else None)
    if not isinstance(reason, str) or not reason.strip():
        raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.no_graph_replay needs reason='why this call cannot be "
                                "replayed from a CUDA graph'")
    if on is not None:
        raise pytest.UsageError(f"{item.nodeid}: marked both graph_replay and no_graph_replay")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:  # a bad marker stops the run at collection, as the plugin's other markers do
        _check_markers(item)


def _enabled(item: pytest.Item) -> bool:
    if item.get_closest_marker("no_graph_replay") is not None:
        return False
    return item.get_closest_marker("graph_replay") is not None or bool(item.config.getoption("harness_graph_replay"))


class GraphReplay:
    """The ``graph_replay`` fixture: ``graph_replay(fn, inputs, fresh, outputs=None, warmup=1)`` returns
    ``fn(**inputs, **outputs)`` (eager, on the test's own tensors), after checking the call by graph replay
    where replay is on for the test (:attr:`enabled`)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def __call__(self, fn: Callable[..., Any], inputs: Mapping[str, Any], fresh: Any, *,
                 outputs: Mapping[str, Any] | None = None, warmup: int = 1) -> Any:
        __tracebackhide__ = True
        if self.enabled:
            from harness.replay.graph import assert_graph_replay

            assert_graph_replay(fn, inputs, fresh, outputs=outputs, warmup=warmup)
        return fn(**inputs, **(outputs or {}))

    def __repr__(self) -> str:
        return f"GraphReplay(enabled={self.enabled})"


@pytest.fixture
def graph_replay(request: pytest.FixtureRequest) -> GraphReplay:
    """Route a kernel call through graph replay: ``out = graph_replay(fn, inputs={...}, fresh=..., outputs=...)``."""
    return GraphReplay(_enabled(request.node))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    rep = yield
    if call.when != "call" or not rep.passed or item.get_closest_marker("graph_replay") is None:
        return rep
    r = _results(item.config)
    if r is not None and (item.nodeid, "graph_replay") not in r.made:
        rep.outcome = "failed"
        rep.longrepr = (f"harness: {item.nodeid} is marked graph_replay but made no graph-replay check: route its "
                        "kernel call through the graph_replay fixture, or call harness.replay.assert_graph_replay")
    return rep
