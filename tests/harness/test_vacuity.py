"""--harness-vacuity: a passing assertion is asked about wrong answers built from its inputs; one it accepts is a
finding with the corruption, the row that let it pass and the smallest such corruption."""

from __future__ import annotations

import json

import pytest
import torch

from harness import vacuity
from harness.compare import assert_close_tol, assert_fp8_close
from harness.mx import assert_mx_close
from harness.mx.schemes import get_scheme
from harness.session import current
from harness.tolerances import Tolerance
from harness.topk import assert_topk_multiset_equal


@pytest.fixture
def probed() -> vacuity.State:
    """A fresh vacuity state as the running session's section (the outer run's, if any, is put back after)."""
    s = current()
    assert s is not None
    old = s.sections.pop(vacuity.SECTION, None)
    st = vacuity.State("report")
    s.sections[vacuity.SECTION] = st
    try:
        yield st
    finally:
        del s.sections[vacuity.SECTION]
        if old is not None:
            s.sections[vacuity.SECTION] = old


def _x() -> torch.Tensor:
    return torch.linspace(-3.0, 5.0, 8 * 64, dtype=torch.float64).reshape(8, 64).float()


def _names(f: vacuity.Finding) -> set[str]:
    return {a["corruption"] for a in f.accepted}


def test_exact_check_accepts_no_wrong_answer(probed):
    x = _x()
    assert_close_tol(x.clone(), x, Tolerance(key="exact"))
    assert probed.findings == [] and probed.assertions == 1 and probed.candidates >= 6


def test_loose_row_is_reported_with_the_row_and_the_smallest_corruption(probed):
    x = _x()
    assert_close_tol(x.clone(), x, Tolerance(rtol=0.0, atol=20.0, key="loose/*/*"), op="demo")
    (f,) = probed.findings
    assert f.tol == "loose/*/*" and f.row["atol"] == 20.0 and f.op == "demo"
    assert {"one sign flip", "two adjacent rows swapped", "two adjacent columns swapped", "a tile transposed",
            "two adjacent blocks swapped"} <= _names(f)
    assert "one NaN" not in _names(f) and "one ULP past the tolerance at a few elements" not in _names(f)
    assert f.smallest.startswith("two adjacent columns swapped")  # the smallest relative L2 change
    assert f.where.startswith("harness/test_vacuity.py:")  # the test's assertion, not a harness frame


def test_nan_inside_the_mismatch_budget_is_refused(probed):
    """max_mismatch never covers a NaN: the one-NaN answer is refused even with a budget of half the elements."""
    x = _x()
    assert_close_tol(x.clone(), x, Tolerance(max_mismatch=0.5, key="budget"))
    (f,) = probed.findings
    assert "one NaN" not in _names(f) and "one sign flip" in _names(f)  # a budget this large takes one flip


def test_probing_records_no_observation_and_keeps_the_outcome(probed):
    x = _x()
    col = current().observations
    before = len(col.observations)
    assert_close_tol(x.clone(), x, Tolerance(atol=20.0, key="loose"))
    assert len(col.observations) == before + 1
    with pytest.raises(AssertionError):
        assert_close_tol(-x, x, Tolerance(atol=1e-3, key="tight"))
    assert probed.assertions == 1  # a failing assertion is not probed


def test_fp8_budget_that_takes_a_row_swap(probed):
    codes = torch.arange(256, dtype=torch.uint8).reshape(16, 16) & 0x7E
    assert_fp8_close(codes.clone(), codes, "e4nv", max_ulp=1, max_mismatch=0.25)
    (f,) = probed.findings
    assert "two adjacent rows swapped" in _names(f) and "one NaN" not in _names(f)
    assert f.row == {"max_ulp": 1, "ulp_floor": 0.0, "max_mismatch": 0.25}


def test_fp8_one_ulp_rule_rejects_every_corruption(probed):
    codes = torch.arange(256, dtype=torch.uint8).reshape(16, 16) & 0x7E
    assert_fp8_close(codes.clone(), codes, "e4nv", max_ulp=1)
    assert probed.findings == []


def test_mx_scale_ulp_without_a_global_bound_takes_a_doubled_block(probed):
    """scale_ulp=1 lets a block's scale move one code (its values double) and then compares its elements by
    nothing: without max_rel_l2 the assertion accepts it."""
    sch = get_scheme("mxfp8e4m3")
    q = sch.quantize(_x())
    assert_mx_close(q, q, sch, scale_ulp=1)
    (f,) = probed.findings
    assert _names(f) == {"a scale one code off"}
    probed.findings.clear()
    assert_mx_close(q, q, sch, scale_ulp=1, max_rel_l2=0.01)
    assert probed.findings == []


def test_topk_tolerance_that_takes_any_selection(probed):
    scores = torch.arange(32, dtype=torch.float32).reshape(2, 16)
    idx = torch.topk(scores, 4).indices
    assert_topk_multiset_equal(idx, scores, k=4)
    assert probed.findings == []
    assert_topk_multiset_equal(idx, scores, k=4, tol=Tolerance(atol=100.0, key="wide"))
    (f,) = probed.findings
    assert _names(f) == {"one top-k index replaced by a non-selected one"}


def test_a_reason_for_some_corruptions_does_not_justify_others(probed):
    x = _x()
    probed.justify = lambda name: "rows may tie" if name == "two adjacent rows swapped" else None
    assert_close_tol(x.clone(), x, Tolerance(atol=20.0, key="loose"))
    assert probed.findings[-1].justified is None  # it also took a sign flip and swapped columns
    probed.justify = lambda name: "the row is loose on purpose"
    assert_close_tol(x.clone(), x, Tolerance(atol=20.0, key="loose"))
    assert probed.findings[-1].justified == "the row is loose on purpose"


def test_equal_rows_are_not_a_wrong_answer(probed):
    x = torch.ones(4, 4)
    assert_close_tol(x.clone(), x, Tolerance(atol=0.5, key="half"))
    assert probed.findings == []  # swaps and transposes change nothing; 1 ULP past 0.5 is refused


VACUOUS = """
import pytest, torch
from harness.compare import assert_close_tol
from harness.tolerances import Tolerance

def test_loose():
    x = torch.arange(64.0).reshape(8, 8)
    assert_close_tol(x.clone(), x, Tolerance(atol=1000.0, key="loose"))

@pytest.mark.vacuity_ok(reason="demo: the row is loose on purpose")
def test_justified():
    x = torch.arange(64.0).reshape(8, 8)
    assert_close_tol(x.clone(), x, Tolerance(atol=1000.0, key="loose"))

def test_tight():
    x = torch.arange(64.0).reshape(8, 8)
    assert_close_tol(x.clone(), x, Tolerance(key="exact"))
"""


def test_fail_mode_fails_the_test_and_the_marker_justifies(pytester):
    pytester.makepyfile(test_inner=VACUOUS)
    pytester.runpytest("--harness-arch=interp").assert_outcomes(passed=3)  # off by default
    r = pytester.runpytest("--harness-arch=interp", "--harness-vacuity=fail", "--harness-report=r.json")
    r.assert_outcomes(passed=2, failed=1)
    r.stdout.fnmatch_lines(["*test_loose*accepted*wrong answer(s) under loose*", "*smallest: *"])
    rep = json.loads((pytester.path / "r.json").read_text())["vacuity"]
    assert rep["vacuous"] == 1 and rep["justified"] == 1 and rep["assertions"] == 3
    assert {f["test"].split("::")[1]: f["justified"] for f in rep["findings"]} == {
        "test_loose": None, "test_justified": "demo: the row is loose on purpose"}
    pytester.runpytest("--harness-arch=interp", "--harness-vacuity").assert_outcomes(passed=3)  # report only


def test_a_wrong_answer_that_cannot_be_built_is_reported_never_raised(probed):
    def broken():
        raise IndexError("demo")

    assert vacuity.probe("demo_assert", lambda c: True, broken, op="o", dtype="d", tol=None) is None
    (err,) = probed.errors
    assert probed.findings == [] and err.endswith("_is_reported_never_raised: demo_assert: IndexError: demo")


def test_an_accepted_answer_whose_size_cannot_be_measured_is_still_a_finding(probed):
    """An accepted wrong answer's size only ranks it; where its values cannot be decoded (a NaN NVFP4 global scale,
    which nan_equal lets pass, no longer dequantizes) the finding stands with size inf and the reason reported."""
    def unmeasurable():
        raise ValueError("global_scale: expected a finite positive scalar; got nan")

    def corruptions():
        yield vacuity.Corruption("demo", "everywhere", unmeasurable, lambda: None)
        yield vacuity.Corruption("small", "one value", lambda: 0.5, lambda: None)

    f = vacuity.probe("demo_assert", lambda c: True, corruptions, op="o", dtype="d", tol=None)
    assert f is not None and _names(f) == {"demo", "small"} and f.smallest == "small: one value"
    (err,) = probed.errors
    assert err.endswith("demo_assert: the size of 'demo': ValueError: global_scale: expected a finite positive "
                        "scalar; got nan")


def test_shard_reports_merge_their_vacuity_and_coverage():
    from harness import report

    def one(test: str, launched: list[str]) -> dict:
        f = {"test": test, "where": "t.py:1", "assertion": "assert_close_tol", "op": "", "dtype": "", "tol": "x",
             "row": {}, "accepted": [], "smallest": "s", "justified": None}
        return {"version": 1, "rows": [], "observations": [],
                "vacuity": {"mode": "fail", "assertions": 2, "candidates": 10, "vacuous": 1, "justified": 0,
                            "seconds": 0.5, "slowest": {test: 0.5}, "errors": [], "findings": [f]},
                "coverage": {"cells": [{"kernel": k, "types": "bf16", "arch": "interp", "launches": 1, "tests": 1}
                                       for k in launched],
                             "packages": ["p"], "unlaunched": [f"p.{k} (p.py:1)" for k in "ab" if f"p.{k}" not in
                                                               launched], "justified": {}}}

    m = report.merge([one("t::a", ["p.a"]), one("t::b", ["p.b"])])
    assert m["vacuity"]["assertions"] == 4 and m["vacuity"]["vacuous"] == 2
    assert [f["test"] for f in m["vacuity"]["findings"]] == ["t::a", "t::b"]
    assert m["coverage"]["unlaunched"] == []  # each shard launched the kernel the other did not
    with pytest.raises(ValueError, match="vacuity: the reports ran with different modes"):
        report.merge([one("t::a", []), {**one("t::b", []), "vacuity": {"mode": "report"}}])
