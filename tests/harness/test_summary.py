"""harness.summary: aggregation per op × dtype × arch, headroom, xdist merge, nesting and suspension.

Unit tests on a private session pushed around each (its own Collector), so this session's own report is
left alone; tests/harness/plugin/test_plugin.py::test_report_table_json_and_junit covers the plugin wiring end
to end.
"""

from __future__ import annotations

import contextlib
import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness import session, summary, tolerances
from harness.tolerances import Tolerance

pytestmark = pytest.mark.lane_independent  # the same on every lane: the GPU lane skips it


@contextlib.contextmanager
def _private_session():
    s = session.Session(tolerances=tolerances.base_table().copy(), observations=summary.Collector(),
                        rootdir=Path("."))
    session.push(s)
    try:
        yield s.observations
    finally:
        session.pop(s)


@pytest.fixture
def col():
    with _private_session() as c:
        yield c


def _rec(**kw):
    base = dict(op="op", dtype="bf16", arch="sm90", n=10, tol=Tolerance(atol=1.0, key="op/bf16/sm90"), passed=True)
    base.update(kw)
    summary.record(**base)


def test_rows_aggregate_counts_worsts_and_tolerances(col):
    _rec(worst_abs=0.25, worst_ratio=0.25)
    _rec(worst_abs=0.5, worst_ratio=0.5, passed=False, n=5)
    _rec(worst_abs=0.125, worst_ratio=0.125, tol=Tolerance(atol=2.0, key="op/bf16/cuda"))
    _rec(dtype="fp16", worst_abs=1.0)
    rows = col.rows()
    assert [(r.op, r.dtype, r.arch) for r in rows] == [("op", "bf16", "sm90"), ("op", "fp16", "sm90")]
    r = rows[0]
    assert (r.checks, r.failures, r.elements) == (3, 1, 25)
    assert (r.worst_abs, r.worst_ratio) == (0.5, 0.5)
    assert r.tols == {"op/bf16/sm90", "op/bf16/cuda"}
    assert r.headroom == "50%"


def test_max_ulp_is_the_tightest_and_headroom_counts_ulps(col):
    _rec(worst_ulp=1, tol=Tolerance(max_ulp=3, key="a"))
    _rec(worst_ulp=2, tol=Tolerance(max_ulp=2, key="b"))
    _rec(worst_ulp=0, tol=Tolerance(max_ulp=8, key="c"))
    (r,) = col.rows()
    assert (r.worst_ulp, r.max_ulp, r.headroom) == (2, 2, "0 ulp")


@pytest.mark.parametrize(
    "ratios, headroom",
    [([0.25], "75%"), ([1.0], "0%"), ([1.5], "-50%"), ([math.inf], "none"), ([0.5, math.nan], "none"), ([], "-")],
)
def test_headroom_of_float_checks(col, ratios, headroom):
    for r in ratios:
        _rec(worst_ratio=r)
    if not ratios:
        _rec()
    assert col.rows()[0].headroom == headroom


def test_nan_is_worst_and_none_is_absent():
    assert summary._max(None, 1.0) == 1.0 and summary._max(2.0, None) == 2.0 and summary._max(None, None) is None
    assert math.isnan(summary._max(1.0, math.nan)) and math.isnan(summary._max(math.nan, 1.0))
    assert summary._max(1, 3) == 3


def test_worker_dicts_merge_into_the_same_rows(col):
    _rec(worst_abs=0.5, worst_ratio=0.5)
    worker = summary.Collector()
    worker.add(summary.Observation("op", "bf16", "sm90", 7, None, 0.75, "op/bf16/sm90", None, False, 0.75, "t"))
    col.merge(json.loads(json.dumps(worker.to_dicts())))  # what crosses the xdist channel
    (r,) = col.rows()
    assert (r.checks, r.failures, r.elements, r.worst_abs) == (2, 1, 17, 0.75)
    assert col.observations[-1].test == "t"


def test_json_has_rows_with_headroom_and_every_observation(col):
    _rec(worst_ulp=1, tol=Tolerance(max_ulp=2, key="k2"))
    _rec(op="a.op", worst_abs=0.1, worst_ratio=0.5)
    data = json.loads(json.dumps(col.report()))
    assert data["version"] == 1 and len(data["observations"]) == 2
    assert [(r["op"], r["headroom"], r["tols"]) for r in data["rows"]] == [
        ("a.op", "50%", ["op/bf16/sm90"]), ("op", "1 ulp", ["k2"])]


def test_record_is_a_noop_without_a_session_and_suspended_drops_checks(col):
    with summary.suspended():
        assert summary.active() is None
        _rec()  # dropped
    assert summary.active() is col and col.observations == []
    with pytest.raises(RuntimeError), summary.suspended():
        raise RuntimeError("a failing self-test")
    assert summary.active() is col  # restored after an exception too
    _rec()
    assert len(col.observations) == 1


def test_nested_sessions_restore_the_outer_collector(col):
    with _private_session() as inner:
        assert summary.active() is inner
        _rec()
    assert summary.active() is col and col.observations == [] and len(inner.observations) == 1


def test_record_labels_tolerance_and_arch():
    with _private_session() as c:
        summary.record(op="", dtype="", arch=SimpleNamespace(name="sm86"), n=3, tol=Tolerance(rtol=0.5), passed=True)
        summary.record(op="x", dtype="fp16", arch="interp", n=1, tol=None, passed=False)
    a, b = c.observations
    assert (a.op, a.dtype, a.arch, a.tol) == ("-", "-", "sm86", "Tolerance(rtol=5.0e-01, atol=0.0e+00)")
    assert (b.tol, b.max_ulp, b.passed) == ("-", None, False)


def test_current_test_and_junit_properties(col):
    item = SimpleNamespace(user_properties=[])
    col.set_test("tests/x.py::test_y", item)
    _rec(worst_ulp=0, worst_abs=0.0)
    col.set_test("", None)
    _rec()
    assert [o.test for o in col.observations] == ["tests/x.py::test_y", ""]
    assert item.user_properties == [
        ("harness[op/bf16/sm90]", "n=10 worst_ulp=0 worst_abs=0 tol=op/bf16/sm90 passed=True")]


def test_render_table_truncates_long_tolerance_cells(col):
    long_key = "k" * 80
    _rec(tol=Tolerance(atol=1.0, key=long_key), worst_abs=1e-3, worst_ratio=0.1)
    head, rule, line = summary.render_table(col.rows())
    assert head.split() == ["op", "dtype", "arch", "checks", "fail", "worst", "ulp", "worst", "abs", "tolerance",
                            "headroom"]
    assert set(rule.replace(" ", "")) == {"-"}
    assert "k" * 59 + "…" in line and "k" * 60 not in line
    assert line.split()[-1] == "90%" and "0.001" in line
