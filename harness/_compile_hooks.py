"""pytest glue for the compile matrix: ``--harness-targets``, the ``compile_targets`` marker, the
``compile_target`` fixture and a one-line timing summary.

Registered by ``harness.plugin`` (or alone with ``-p harness._compile_hooks``). Nothing here imports triton
until a test asks for ``compile_target``, except on the interpreter lane at session start, to stop the
interpreter's leaked language patch from breaking later compiles (``harness.interp_shims.fix_interpreter_leak``,
removed again when the session ends).

Which targets a test gets: the marker's targets if it has ``@pytest.mark.compile_targets(...)``, else
:data:`harness.targets.DEFAULT_TARGETS`. ``--harness-targets=sm80,sm90`` replaces the default list and,
for a marked test, narrows the marker's list to the targets in both (a test marked for sm90 only is never
compiled for sm80); an empty intersection gives one skipped item saying so. Targets whose Triton backend
is missing here are skipped with the reason.
"""

from __future__ import annotations

from typing import Any

import pytest

from harness.arch import interpreting

_WORKER_KEY = "harness_compile_stats"
_MARKER = (
    "compile_targets(*targets): the GPU targets (sm90, sm_80, 120, gfx942...) the compile_target fixture "
    "is parametrized over for this test (default: harness.targets.DEFAULT_TARGETS)"
)


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


_targets_key = pytest.StashKey["tuple[Any, ...] | None"]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", _MARKER)
    config.stash[_targets_key] = _option_targets(config)  # a bad list is a usage error now, not at collection
    if config.pluginmanager.hasplugin("xdist") and not hasattr(config, "workerinput"):
        config.pluginmanager.register(_XdistStats(), "harness-compile-xdist")


def pytest_sessionstart(session: pytest.Session) -> None:
    # Before any test module runs an interpreted kernel; undone at the end (an outer session's fix, in a
    # pytester run, gives a None handle: that session removes it).
    if interpreting():
        from harness.interp_shims import fix_interpreter_leak, unfix_interpreter_leak

        handle = fix_interpreter_leak()
        session.config.add_cleanup(lambda: unfix_interpreter_leak(handle))


def _option_targets(config: pytest.Config) -> tuple[Any, ...] | None:
    raw = config.getoption("harness_targets", default=None)
    if raw is None:
        return None
    from harness.targets import check_targets, parse_targets

    try:
        targets = parse_targets(raw)
        check_targets(targets)  # an unknown target would reach LLVM, which may abort the process
        return targets
    except ValueError as e:
        raise pytest.UsageError(f"--harness-targets={raw!r}: {e}") from None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "compile_target" not in metafunc.fixturenames:
        return
    from harness.targets import DEFAULT_TARGETS, check_targets, parse_targets, target_available

    node = metafunc.definition
    marker = node.get_closest_marker("compile_targets")
    try:
        marked = parse_targets(marker.args) if marker is not None else None
        if marked is not None:
            check_targets(marked)
    except (ValueError, TypeError) as e:
        raise pytest.UsageError(f"{node.nodeid}: @pytest.mark.compile_targets: {e}") from None
    if marker is not None and marker.kwargs:
        raise pytest.UsageError(f"{node.nodeid}: @pytest.mark.compile_targets takes target names only")
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
        marks = [] if ok else [pytest.mark.skip(reason=reason)]
        params.append(pytest.param(t, id=t.name, marks=marks))
    metafunc.parametrize("compile_target", params)


@pytest.fixture
def compile_target(request: pytest.FixtureRequest) -> Any:
    """This item's :class:`harness.targets.Target` (``.name`` ``sm90``, ``.cc`` 90, ``.backend``)."""
    return request.param


# --- timing summary ----------------------------------------------------------------------------------------


def _local_stats() -> dict[str, float] | None:
    import sys

    mod = sys.modules.get("harness.compile_cache")  # only if something compiled: never import triton here
    if mod is None:
        return None
    s = mod.stats()
    return s if s["compiles"] or s["hits"] else None


class _XdistStats:
    """Controller side under xdist: add up each worker's compile counters."""

    def __init__(self) -> None:
        self.total: dict[str, float] = {}

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        s = getattr(node, "workeroutput", {}).get(_WORKER_KEY)
        if s:
            _merge(self.total, s)


def _merge(into: dict[str, float], s: dict[str, float]) -> None:
    for k, v in s.items():
        into[k] = max(into.get(k, 0), v) if k == "slowest" else into.get(k, 0) + v


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    if hasattr(config, "workerinput"):
        s = _local_stats()
        if s:
            config.workeroutput[_WORKER_KEY] = s


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return
    total: dict[str, float] = {}
    xd = config.pluginmanager.get_plugin("harness-compile-xdist")
    if xd is not None:
        _merge(total, xd.total)
    local = _local_stats()
    if local:
        _merge(total, local)
    if not total.get("compiles") and not total.get("hits"):
        return
    n = int(total["compiles"])
    avg = total["seconds"] / n if n else 0.0
    terminalreporter.write_line(
        f"harness: compile matrix: {n} compiles ({int(total['failures'])} refused, "
        f"{int(total.get('ptxas', 0))} ptxas failures) "
        f"in {total['seconds']:.1f}s "
        f"(avg {avg:.2f}s, slowest {total['slowest']:.2f}s), {int(total['hits'])} cache hits"
    )
