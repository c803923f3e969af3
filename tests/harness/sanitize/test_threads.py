"""Races between the threads of one program: bytes one program stores twice, judged against the compiled kernel
(:mod:`harness.lowering.stores`) — a race only where two threads store them with different values and no barrier
lies between; the same thread storing twice, a barrier between, or equal values never fail a launch.

Each test installs a sanitizer of its own (as ``test_sanitize.py`` does), judged as sm90 unless it says."""

from __future__ import annotations

import pytest
import torch

from harness.interp.patch import Patch
from harness.sanitize import SanitizerError, State, install
from tests.harness.sanitize import thread_kernels as T
from tests.harness.sanitize.pins import line_of as pinned_line

pytestmark = pytest.mark.interp_only

KERNELS = "tests/harness/sanitize/thread_kernels.py"


def line_of(fn_name: str, text: str) -> int:
    return pinned_line(KERNELS, fn_name, text)


def clean(st: State) -> None:
    assert not st.findings, [f.message() for f in st.findings]
    assert not st.unjudged, st.unjudged
    assert st.launches >= 1


def test_two_stores_by_other_threads_without_a_barrier_race(sanitizer):
    y = torch.zeros(256, dtype=torch.int32)
    with pytest.raises(SanitizerError, match=r"race in kernel mirror at .*thread_kernels.py:\d+ and "):
        T.mirror[(1,)](y, BLOCK=256)
    (f,) = sanitizer.findings
    assert f.kind == "race"
    assert f.where == f"{KERNELS}:{line_of('mirror', 'tl.store(y_ptr + offs')}"
    assert f.detail["other_where"] == f"{KERNELS}:{line_of('mirror', 'tl.store(y_ptr + BLOCK')}"
    assert f.detail["program"] == [0, 0, 0]
    assert (f.detail["argument"], f.detail["element"], f.detail["address"]) == ("y_ptr", 0, y.data_ptr())
    # element 0: index 0 of the first store (warp 0 lane 0), index 255 of the second (the last thread's)
    assert f.detail["threads"][0] == [0, 0] and f.detail["threads"][1][0] == 3
    assert f.detail["nbytes"] == 1024 - 8  # every element but the two middle ones (a thread stores both there)
    assert f.message().startswith(
        f"race in kernel mirror at {f.where} and {f.detail['other_where']}: program (0, 0, 0) stores different "
        "values to y_ptr element 0")
    assert sanitizer.counts["race"] == 1


def test_equal_values_from_two_threads_are_one_note(sanitizer):
    y = torch.zeros(256, dtype=torch.int32)
    T.mirror_same_values[(1,)](y, BLOCK=256)
    T.mirror_same_values[(1,)](y, BLOCK=256)
    (f,) = sanitizer.findings
    assert f.kind == "overlap" and f.message().startswith("note: benign overlap in kernel mirror_same_values")
    assert sanitizer.counts == {"out_of_bounds": 0, "race": 0, "overlap": 1}
    assert torch.equal(y, torch.arange(256, dtype=torch.int32))


def test_a_barrier_between_the_stores_orders_them(sanitizer):
    y = torch.zeros(256, dtype=torch.int32)
    T.mirror_after_sum[(1,)](y, BLOCK=256)
    clean(sanitizer)


@pytest.mark.parametrize("n", [0, 17, 256])
def test_one_thread_overwriting_its_own_elements_is_program_order(sanitizer, n):
    y = torch.full((256,), 5, dtype=torch.int32)
    T.zero_then_masked[(1,)](y, n, BLOCK=256)
    assert y.tolist() == [i + 1 for i in range(n)] + [0] * (256 - n)
    clean(sanitizer)


def test_a_scalar_store_is_thread_0s(sanitizer):
    y = torch.zeros(8 * 32, dtype=torch.int32)
    with pytest.raises(SanitizerError, match=r"race in kernel rows_then_total"):
        T.rows_then_total[(1,)](y, ROWS=8, COLS=32)
    (f,) = sanitizer.findings
    assert f.detail["element"] == 255 and f.detail["threads"][1] == [0, 0] and f.detail["threads"][0] != [0, 0]


def test_stores_of_one_program_in_a_loop_are_not_judged(sanitizer):
    y = torch.zeros(256, dtype=torch.int32)
    T.mirror_in_loop[(1,)](y, 3, BLOCK=256)
    assert not sanitizer.findings
    assert "is not judged (a loop, a branch" in sanitizer.unjudged["mirror_in_loop"]
    assert any(line.startswith("bytes a program of mirror_in_loop stores twice were not judged") for line in
               sanitizer.lines())


def test_one_store_whose_threads_share_an_address_races(sanitizer):
    """Eight lanes store eight values to y[0] in one instruction: which lane's value lands is undefined (CUDA C++
    Programming Guide, "Global Memory": only one thread of a warp performs a non-atomic write to a location
    several of its threads write, and which one is undefined)."""
    y = torch.zeros(4, dtype=torch.int32)
    with pytest.raises(SanitizerError, match=r"race in kernel one_address"):
        T.one_address[(1,)](y, BLOCK=8)
    (f,) = sanitizer.findings
    assert f.detail["element"] == 0 and f.detail["threads"] == [[0, 0], [0, 1]]
    assert f.where == f.detail["other_where"] == f"{KERNELS}:{line_of('one_address', 'tl.store')}"


def test_without_a_compiled_kernel_the_check_is_skipped_and_said_once():
    y = torch.zeros(256, dtype=torch.int32)
    with Patch.context() as p:
        st = State("fail")
        assert install(p, st, "gfx942")
        T.mirror[(1,)](y, BLOCK=256)
        T.mirror[(1,)](y, BLOCK=256)
    assert not st.findings
    assert st.unjudged == {"mirror": "the assumed arch is not a CUDA arch: no compiled kernel to read the threads "
                                     "from"}


def test_a_check_that_breaks_is_noted_and_never_fails_the_launch(sanitizer, monkeypatch):
    from harness.sanitize import launch

    def broken(L):
        raise RuntimeError("no facts today")

    monkeypatch.setattr(launch, "_compiled_stores", broken)
    y = torch.zeros(256, dtype=torch.int32)
    T.mirror[(1,)](y, BLOCK=256)
    assert not sanitizer.findings
    assert sanitizer.unjudged == {"mirror": "the check failed (RuntimeError: no facts today)"}
