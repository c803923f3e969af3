"""``--harness-sanitize`` as users meet it: throwaway pytester projects with a kernel that overruns its tail, one that
races, one that overlaps benignly and a clean one, run in each mode; the terminal section and the
``--harness-report`` key; the ``sanitize`` marker."""

from __future__ import annotations

import json

import pytest

from harness.report import merge

pytest_plugins = ["pytester"]
pytestmark = [pytest.mark.interp_only, pytest.mark.filterwarnings("ignore::pytest.PytestConfigWarning")]

INI = """
[pytest]
addopts = -p no:cacheprovider -p no:hypothesispytest --harness-lane=interp
"""

SOURCE = '''
import pytest
import torch
import triton
import triton.language as tl


@triton.jit
def copy_unmasked(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs))


@triton.jit
def store_value(y_ptr, same: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    v = tl.zeros([BLOCK], tl.int32) + (0 if same else tl.program_id(0))
    tl.store(y_ptr + offs, v)


def apart():
    """x and y with no storage of the other within 64 KiB past x (what lies there decides the report)."""
    held = []
    while True:
        x, y = torch.arange(10, dtype=torch.float32), torch.zeros(16)
        if abs(y.data_ptr() - x.data_ptr()) > 1 << 16:
            return x, y
        held.append((x, y))


# The overrun reads past x only: with the check off (a mode, or the marker) the interpreter really makes the
# access, and a read a few bytes past a CPU allocation is harmless where a write would corrupt the heap.
def test_overrun():
    copy_unmasked[(2,)](*apart(), BLOCK=8)


@pytest.mark.sanitize("off")
def test_overrun_marked_off():
    copy_unmasked[(2,)](*apart(), BLOCK=8)


def test_race():
    store_value[(2,)](torch.zeros(4, dtype=torch.int32), same=False, BLOCK=4)


def test_benign():
    store_value[(2,)](torch.zeros(4, dtype=torch.int32), same=True, BLOCK=4)


def test_clean():
    x = torch.arange(16, dtype=torch.float32)
    y = torch.zeros(16)
    copy_unmasked[(2,)](x, y, BLOCK=8)
    assert torch.equal(x, y)
'''


def run(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, dict]:
    pytester.makeini(INI)
    pytester.makepyfile(test_k=SOURCE)
    r = pytester.runpytest("--harness-report=r.json", *args)
    return r, json.loads((pytester.path / "r.json").read_text())


def test_fail_is_the_default_and_fails_the_launching_tests(pytester):
    r, rep = run(pytester)
    r.assert_outcomes(passed=3, failed=2)
    r.stdout.fnmatch_lines([
        "*SanitizerError: harness sanitizer (CPU lane): out-of-bounds load in kernel copy_unmasked at test_k.py:10",
        "*program_id (1, 0, 0): 6 of 8 active lanes fall outside every tensor argument's storage",
        "*nearest tensor argument: x_ptr (float32[[]10], storage 40 bytes): missed by 4 bytes (1 element) past its "
        "end; element 10 of x_ptr",
        "*SanitizerError: harness sanitizer (CPU lane): race in kernel store_value at test_k.py:17: programs "
        "(0, 0, 0) and (1, 0, 0) store different values to y_ptr element 0 *",
    ])
    r.stdout.fnmatch_lines([
        "*harness: sanitizer (out-of-bounds accesses, races between programs)*",
        "mode fail: 4 launches checked; 1 out-of-bounds, 1 race, 1 benign overlap (noted once per kernel and line)",
        "test_k.py::test_benign: note: benign overlap in kernel store_value at test_k.py:17: *",
    ])
    s = rep["sanitize"]
    assert (s["mode"], s["launches"], s["counts"]) == ("fail", 4, {"out_of_bounds": 1, "race": 1, "overlap": 1})
    kinds = sorted((f["test"], f["kind"], f["op"]) for f in s["findings"])
    assert kinds == [("test_k.py::test_benign", "overlap", "store"),
                     ("test_k.py::test_overrun", "out_of_bounds", "load"),
                     ("test_k.py::test_race", "race", "store")]
    load = next(f for f in s["findings"] if f["op"] == "load")
    assert load["where"] == "test_k.py:10" and load["kernel"] == "copy_unmasked"
    assert (load["detail"]["program_id"], load["detail"]["block_index"]) == ([1, 0, 0], [2])
    assert load["detail"]["nearest"]["side"] == "past" and load["detail"]["nearest"]["element"] == 10


def test_warn_reports_without_failing(pytester):
    r, rep = run(pytester, "--harness-sanitize=warn")
    r.assert_outcomes(passed=5)
    r.stdout.fnmatch_lines(["*SanitizerWarning: harness sanitizer (CPU lane): out-of-bounds load in kernel "
                            "copy_unmasked at test_k.py:10"])
    assert rep["sanitize"]["mode"] == "warn"
    assert rep["sanitize"]["counts"] == {"out_of_bounds": 1, "race": 1, "overlap": 1}


def test_off_checks_nothing(pytester):
    r, rep = run(pytester, "--harness-sanitize=off")
    r.assert_outcomes(passed=5)
    assert "sanitize" not in rep
    assert "harness: sanitizer" not in r.stdout.str()


def test_the_marker_takes_a_mode_and_refuses_others(pytester):
    pytester.makeini(INI)
    pytester.makepyfile(test_m='''
import pytest

@pytest.mark.sanitize("loud")
def test_x():
    pass
''')
    r = pytester.runpytest()
    r.stdout.fnmatch_lines(["*test_m.py::test_x: @pytest.mark.sanitize takes one mode: 'off', 'warn' or 'fail'*"])


def test_a_bad_mode_is_a_usage_error(pytester):
    pytester.makeini(INI)
    r = pytester.runpytest("--harness-sanitize=loud")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["*--harness-sanitize: invalid choice: 'loud' (choose from *off*warn*fail*)"])


def test_shards_reports_merge():
    part = {"version": 1, "rows": [], "observations": []}
    a = {**part, "sanitize": {"mode": "fail", "launches": 3, "counts": {"out_of_bounds": 1, "race": 0, "overlap": 0},
                              "findings": [{"kind": "out_of_bounds", "test": "t::a"}]}}
    b = {**part, "sanitize": {"mode": "fail", "launches": 2, "counts": {"out_of_bounds": 0, "race": 1, "overlap": 0},
                              "findings": [{"kind": "race", "test": "t::b"}]}}
    m = merge([a, b])["sanitize"]
    assert (m["launches"], m["counts"]) == (5, {"out_of_bounds": 1, "race": 1, "overlap": 0})
    assert [f["test"] for f in m["findings"]] == ["t::a", "t::b"]
    with pytest.raises(ValueError, match=r"sanitize: the reports ran with different modes \(fail, warn\)"):
        merge([a, {**b, "sanitize": {**b["sanitize"], "mode": "warn"}}])


def test_the_session_checks_an_access_the_shims_serve_themselves(pytester):
    """A bf16 atomic_add is computed by the harness's own model (harness.interp.arith), which writes memory
    itself: the session's hooks must sit on top of it (harness.plugin registers the sanitizer's glue last)."""
    pytester.makeini(INI)
    pytester.makepyfile(test_b='''
import torch
import triton
import triton.language as tl


@triton.jit
def add_past_end(y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.atomic_add(y_ptr + offs, tl.full([BLOCK], 1.0, tl.bfloat16))


def test_add():
    y = torch.zeros(20, dtype=torch.bfloat16)
    add_past_end[(1,)](y[:12], BLOCK=16)  # a view: the lanes past 12 stay inside y's storage
    add_past_end[(1,)](torch.zeros(12, dtype=torch.bfloat16), BLOCK=16)
''')
    r = pytester.runpytest()
    r.assert_outcomes(failed=1)
    r.stdout.fnmatch_lines(["*SanitizerError: harness sanitizer (CPU lane): out-of-bounds atomic_add in kernel "
                            "add_past_end at test_b.py:9",
                            "*program_id (0, 0, 0): 4 of 16 active lanes fall outside*"])
