"""The graph_replay marker, fixture and option end to end in a child session (interpreter lane): which calls are
checked, the failure text, the rule that a marked test must make a check, bad markers, the report key."""

from __future__ import annotations

import json

import pytest

# Imported here, before any in-process pytester run: such a run drops the modules first imported during it, and
# torch's operator registrations (imported with the checks) fail when imported a second time.
import harness.replay.graph  # noqa: F401

pytestmark = pytest.mark.lane_independent  # child sessions on the interpreter lane

INNER = '''
import pytest
import torch
import triton
import triton.language as tl


@triton.jit
def double(x_ptr, out_ptr, n, SKIP_LAST: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, x * 2.0, mask=offs < n - SKIP_LAST)


def launch(x, skip_last=False):
    out = torch.empty_like(x)
    double[(1,)](x, out, x.numel(), SKIP_LAST=int(skip_last), BLOCK=8)
    return out


def broken(x):
    return launch(x, skip_last=True)


@pytest.fixture
def x(device):
    return torch.arange(8, dtype=torch.float32, device=device)


@pytest.mark.graph_replay
def test_marked_ok(graph_replay, x):
    out = graph_replay(launch, inputs={"x": x}, fresh=lambda: {"x": -x})
    assert torch.equal(out, x * 2)


@pytest.mark.graph_replay
def test_marked_broken(graph_replay, x):
    graph_replay(broken, inputs={"x": x}, fresh={"x": x + 1})


def test_unmarked_broken(graph_replay, x):
    out = graph_replay(broken, inputs={"x": x}, fresh={"x": x + 1})
    assert torch.equal(out[:7], x[:7] * 2)


@pytest.mark.no_graph_replay(reason="reads its lengths on the host")
def test_opted_out(graph_replay, x):
    graph_replay(broken, inputs={"x": x}, fresh={"x": x + 1})


@pytest.mark.graph_replay
@pytest.mark.unreported
def test_marked_and_unreported(graph_replay, x):
    graph_replay(launch, inputs={"x": x}, fresh={"x": x + 2})


@pytest.mark.graph_replay
def test_marked_without_a_check(x):
    assert torch.equal(launch(x), x * 2)
'''


def _report(pytester) -> dict:
    return json.loads((pytester.path / "r.json").read_text())["replay"]


def test_the_marker_checks_its_tests_calls_and_the_option_every_call_but_the_opted_out(pytester):
    pytester.makepyfile(test_inner=INNER)
    r = pytester.runpytest("--harness-lane=interp", "--harness-report=r.json")
    r.assert_outcomes(passed=4, failed=2)
    r.stdout.fnmatch_lines([
        "*_ test_marked_broken _*",
        "E       AssertionError: Graph replay differs from an eager run! (fn=broken)",
        "E       Replayed: a second call on the same buffers (interpreter lane: no CUDA graph), after fresh inputs "
        "were copied into the captured ones",
        "E       Output 'return': mismatched elements: 1 / 8 (12.5%)",
        "E       First difference at index (7,): eager has 0x00000000 (0), replay has 0xffffffff (nan)",
        "E       The replay left poison there: it never wrote this element",
        "*_ test_marked_without_a_check _*",
        "harness: test_inner.py::test_marked_without_a_check is marked graph_replay but made no graph-replay check:*",
    ])
    rep = _report(pytester)
    assert rep["counts"] == {"graph_replay": {"passed": 1, "failed": 1}}
    assert [(c["test"], c["fn"], c["passed"], c["lane"]) for c in rep["checks"]] == [
        ("test_inner.py::test_marked_broken", "broken", False, "interpreter"),
        ("test_inner.py::test_marked_ok", "launch", True, "interpreter"),
    ]
    r = pytester.runpytest("--harness-lane=interp", "--harness-graph-replay", "--harness-report=r.json", "-rf")
    r.assert_outcomes(passed=3, failed=3)
    r.stdout.fnmatch_lines(["FAILED test_inner.py::test_unmarked_broken - AssertionError: Graph replay dif*"])
    assert _report(pytester)["counts"] == {"graph_replay": {"passed": 1, "failed": 2}}


def test_xdist_workers_hand_their_checks_to_the_report(pytester):
    pytester.makepyfile(test_inner=INNER)
    r = pytester.runpytest_subprocess("--harness-lane=interp", "--harness-report=r.json", "-n", "1")
    r.assert_outcomes(passed=4, failed=2)
    rep = _report(pytester)
    assert rep["counts"] == {"graph_replay": {"passed": 1, "failed": 1}}
    assert sorted(c["test"] for c in rep["checks"]) == ["test_inner.py::test_marked_broken",
                                                        "test_inner.py::test_marked_ok"]


@pytest.mark.parametrize(("marks", "error"), [
    ("@pytest.mark.no_graph_replay", "test_bad.py::test_it: @pytest.mark.no_graph_replay needs reason='why*"),
    ("@pytest.mark.no_graph_replay(reason='x')\n@pytest.mark.graph_replay",
     "test_bad.py::test_it: marked both graph_replay and no_graph_replay"),
    ("@pytest.mark.graph_replay(True)", "test_bad.py::test_it: @pytest.mark.graph_replay takes no arguments"),
])
def test_a_bad_marker_stops_the_run_naming_the_test(pytester, marks, error):
    pytester.makepyfile(test_bad=f"import pytest\n\n{marks}\ndef test_it():\n    pass\n")
    r = pytester.runpytest("--harness-lane=interp")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines([f"ERROR: {error}"])
