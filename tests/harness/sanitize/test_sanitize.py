"""The sanitizer on kernels with one defect each: every report field pinned (program id, block index, the tensor
argument and the miss), and the correct kernels it must leave alone (masked-off lanes, block pointers and
descriptors with a boundary check, atomics, shared and zero-size storages).

Each test installs a sanitizer of its own (a fresh :class:`State` in a scoped patch layer), so what it finds is
its own and never the session's findings: the session's hooks step aside while a newer layer is active."""

from __future__ import annotations

import warnings

import pytest
import torch

from harness.interp.patch import Patch
from harness.sanitize import SanitizerError, SanitizerWarning, State, install
from tests.harness.sanitize import sanitize_kernels as K
from tests.harness.sanitize.pins import line_of as pinned_line
from tests.harness.sanitize.sanitize_layout import apart

pytestmark = pytest.mark.interp_only

KERNELS = "tests/harness/sanitize/sanitize_kernels.py"


def line_of(fn_name: str, text: str) -> int:
    return pinned_line(KERNELS, fn_name, text)


def only(st: State, kind: str, op: str | None = None):
    found = [f for f in st.findings if f.kind == kind and (op is None or f.op == op)]
    assert len(found) == 1, [f.message() for f in st.findings]
    return found[0]


# --- out of bounds --------------------------------------------------------------------------------------------

def test_tail_overrun_is_caught_at_the_first_lane_past_the_end(sanitizer):
    x, y = apart(lambda: torch.arange(100, dtype=torch.float32), lambda: torch.zeros(100))
    with pytest.raises(SanitizerError, match=r"out-of-bounds load in kernel copy_unmasked at "):
        K.copy_unmasked[(4,)](x, y, BLOCK=32)
    load, store = only(sanitizer, "out_of_bounds", "load"), only(sanitizer, "out_of_bounds", "store")
    assert load.where == f"{KERNELS}:{line_of('copy_unmasked', 'tl.store')}"
    d = load.detail
    assert (d["program_id"], d["block_index"], d["lanes"], d["active"]) == ([3, 0, 0], [4], 28, 32)
    assert d["address"] == x.data_ptr() + 400 and (d["itemsize"], d["dtype"]) == (4, "fp32")
    assert d["nearest"] == {"name": "x_ptr", "dtype": "float32", "numel": 100, "storage_nbytes": 400,
                            "side": "past", "nbytes": 4, "element": 100}
    assert store.detail["nearest"]["name"] == "y_ptr" and store.detail["address"] == y.data_ptr() + 400
    # nothing was written past y, and the in-bounds lanes were copied
    assert torch.equal(y, x)


def test_the_message_names_every_field(sanitizer):
    x, y = apart(lambda: torch.arange(100, dtype=torch.float32), lambda: torch.zeros(100))
    with pytest.raises(SanitizerError) as e:
        K.copy_unmasked[(4,)](x, y, BLOCK=32)
    line = line_of("copy_unmasked", "tl.store")
    first = str(e.value).splitlines()[:4]
    assert first == [
        f"harness sanitizer (CPU lane): out-of-bounds load in kernel copy_unmasked at {KERNELS}:{line}",
        "  program_id (3, 0, 0): 28 of 32 active lanes fall outside every tensor argument's storage",
        f"  first: block index (4,), address {x.data_ptr() + 400:#x} (4-byte fp32)",
        "  nearest tensor argument: x_ptr (float32[100], storage 400 bytes): missed by 4 bytes (1 element) past "
        "its end; element 100 of x_ptr",
    ]
    assert str(e.value).splitlines()[-1] == "(--harness-sanitize=warn reports without failing; =off disables the check)"


def test_negative_offset_is_caught_before_the_start(sanitizer):
    x, y = apart(lambda: torch.arange(100, dtype=torch.float32), lambda: torch.zeros(100))
    with pytest.raises(SanitizerError):
        K.shift_left[(4,)](x, y, 100, BLOCK=32)
    d = only(sanitizer, "out_of_bounds").detail
    assert (d["program_id"], d["block_index"], d["lanes"], d["programs_hit"]) == ([0, 0, 0], [0], 1, 1)
    assert d["address"] == x.data_ptr() - 4
    assert (d["nearest"]["name"], d["nearest"]["side"], d["nearest"]["nbytes"], d["nearest"]["element"]) == \
        ("x_ptr", "before", 4, -1)


def test_row_stride_used_as_column_stride_is_caught(sanitizer):
    x, y = apart(lambda: torch.arange(12, dtype=torch.float32).reshape(3, 4), lambda: torch.zeros(12))
    with pytest.raises(SanitizerError):
        K.transpose_strided[(3,)](x, y, 3, 4, x.stride(0), BLOCK_N=4)
    d = only(sanitizer, "out_of_bounds").detail
    # program 0 reads columns 0, 4, 8, 12 of a 12-element tensor: lane 3 is one element past; all three rows do it
    assert (d["program_id"], d["block_index"], d["lanes"]) == ([0, 0, 0], [3], 1)
    assert (d["programs_hit"], d["lanes_total"]) == (3, 1 + 2 + 3)
    assert (d["nearest"]["side"], d["nearest"]["nbytes"], d["nearest"]["element"]) == ("past", 4, 12)


def test_a_bad_gather_index_is_caught_with_the_element_it_reached(sanitizer):
    x, idx, y = apart(lambda: torch.arange(10, dtype=torch.float32),
                      lambda: torch.tensor([0, 3, 9, 1000], dtype=torch.int32), lambda: torch.zeros(4))
    with pytest.raises(SanitizerError):
        K.gather_rows[(1,)](x, idx, y, 4, BLOCK=4)
    d = only(sanitizer, "out_of_bounds").detail
    assert (d["block_index"], d["address"], d["lanes"]) == ([3], x.data_ptr() + 4000, 1)
    assert (d["nearest"]["name"], d["nearest"]["side"], d["nearest"]["nbytes"], d["nearest"]["element"]) == \
        ("x_ptr", "past", 4000 + 4 - 40, 1000)


def test_an_atomic_past_the_end_is_caught_and_not_performed(sanitizer):
    y = torch.zeros(20, dtype=torch.int32)
    with pytest.raises(SanitizerError, match="out-of-bounds atomic_add"):
        K.atomic_past_end[(2,)](y, 20, BLOCK=16)
    d = only(sanitizer, "out_of_bounds", "atomic_add").detail
    assert (d["program_id"], d["block_index"], d["lanes"]) == ([1, 0, 0], [4], 12)
    assert (y == 1).all()


def test_a_bf16_atomic_served_by_the_harness_shim_is_checked_first(sanitizer):
    y = torch.zeros(20, dtype=torch.bfloat16)
    with pytest.raises(SanitizerError):
        K.add_bf16_past_end[(2,)](y, BLOCK=16)
    d = only(sanitizer, "out_of_bounds", "atomic_add").detail
    assert (d["program_id"], d["block_index"], d["itemsize"], d["nearest"]["element"]) == ([1, 0, 0], [4], 2, 20)
    assert (y == 1).all()


def test_a_compare_and_swap_past_the_end_is_caught_and_acts_on_no_argument(sanitizer):
    y = torch.zeros(12, dtype=torch.int32)
    with pytest.raises(SanitizerError, match="out-of-bounds atomic_cas"):
        K.cas_past_end[(1,)](y, BLOCK=16)
    d = only(sanitizer, "out_of_bounds", "atomic_cas").detail
    assert (d["block_index"], d["lanes"], d["active"], d["nearest"]["element"]) == ([12], 4, 16, 12)
    assert (y == 5).all()


def test_a_block_that_lifts_the_shims_launch_wrappers_is_still_checked(sanitizer):
    from harness.interp import differences, dots
    from harness.interp.patch import lift

    x, y = apart(lambda: torch.arange(100, dtype=torch.float32), lambda: torch.zeros(100))
    with lift(differences.TAG, dots.TAG):  # GridExecutor.__call__ as Triton's own, every wrapper above it gone
        with pytest.raises(SanitizerError, match="out-of-bounds load in kernel copy_unmasked"):
            K.copy_unmasked[(4,)](x, y, BLOCK=32)
    assert sanitizer.launches == 1


def test_warn_mode_warns_and_the_launch_completes(sanitizer):
    sanitizer.mode = "warn"
    x, y = apart(lambda: torch.arange(100, dtype=torch.float32), lambda: torch.zeros(100))
    with pytest.warns(SanitizerWarning, match="out-of-bounds load in kernel copy_unmasked"):
        K.copy_unmasked[(4,)](x, y, BLOCK=32)
    assert torch.equal(y, x)
    assert sanitizer.counts["out_of_bounds"] == 2 and sanitizer.launches == 1


def test_a_test_marked_off_is_not_checked(sanitizer):
    sanitizer.override = "off"
    K.copy_unmasked[(4,)](torch.arange(128, dtype=torch.float32), torch.zeros(128), BLOCK=32)
    assert sanitizer.launches == 0 and not sanitizer.findings


# --- what must not be flagged -----------------------------------------------------------------------------------

def clean(st: State) -> None:
    assert not st.findings, [f.message() for f in st.findings]
    assert st.launches >= 1


def test_masked_off_lanes_past_the_end_are_not_flagged(sanitizer):
    x = torch.arange(100, dtype=torch.float32)
    y = torch.zeros(100)
    K.copy_masked[(4,)](x, y, 100, BLOCK=32)
    assert torch.equal(y, x)
    clean(sanitizer)


def test_block_pointers_with_a_boundary_check_are_not_flagged(sanitizer):
    from triton.runtime import interpreter

    if not hasattr(interpreter.InterpreterBuilder, "create_tensor_pointer_load"):
        pytest.skip("this Triton has no block pointers (3.9 removed them for tensor descriptors)")
    x = torch.arange(5 * 7, dtype=torch.float32).reshape(5, 7)
    y = torch.zeros(5, 7)
    K.copy_block_ptr[(2, 2)](x, y, 5, 7, BLOCK_M=4, BLOCK_N=4)
    assert torch.equal(y, x)
    clean(sanitizer)


def test_tensor_descriptors_with_tail_tiles_are_not_flagged(sanitizer):
    from triton.tools.tensor_descriptor import TensorDescriptor

    x = torch.arange(5 * 8, dtype=torch.float32).reshape(5, 8)
    y = torch.zeros(5, 8)
    dx, dy = (TensorDescriptor.from_tensor(t, [4, 4]) for t in (x, y))
    K.copy_descriptor[(2, 2)](dx, dy, BLOCK_M=4, BLOCK_N=4)
    assert torch.equal(y, x)
    clean(sanitizer)


def test_scalar_loads_views_shared_and_zero_size_storages_are_not_flagged(sanitizer):
    base = torch.arange(64, dtype=torch.float32)
    x = base[8:40]  # a view: its storage is base's
    y = base[40:]  # another view of the same storage
    K.scale_by_first[(1,)](x, y, 24, BLOCK=32)
    assert torch.equal(base[40:], torch.arange(8, 32, dtype=torch.float32) * 8)
    raw = torch.zeros(64, dtype=torch.uint8)  # an int8 storage seen as int32
    K.store_constant[(1,)](raw.view(torch.int32), BLOCK=16)
    K.copy_masked[(1,)](torch.empty(0), torch.empty(0), 0, BLOCK=32)  # zero-size: every lane masked off
    clean(sanitizer)


def test_a_load_through_one_arguments_pointer_into_another_arguments_storage_is_in_bounds(sanitizer):
    buf = torch.arange(10, dtype=torch.float32)
    other = torch.arange(4, dtype=torch.float32)
    gap = buf.data_ptr() - other.data_ptr()
    assert gap % 4 == 0  # CPU allocations are 64-byte aligned
    idx = torch.tensor([gap // 4 + 2], dtype=torch.int64)
    K.gather_rows[(1,)](other, idx, buf, 1, BLOCK=1)  # buf[0] = buf[2], read through other's pointer
    assert buf[0].item() == 2.0
    clean(sanitizer)


# --- races ----------------------------------------------------------------------------------------------------

def test_two_programs_storing_different_values_race(sanitizer):
    y = torch.zeros(16, dtype=torch.int32)
    with pytest.raises(SanitizerError, match=r"race in kernel store_program_id"):
        K.store_program_id[(3,)](y, BLOCK=16)
    f = only(sanitizer, "race")
    assert f.where == f"{KERNELS}:{line_of('store_program_id', 'tl.store')}"
    assert f.detail["programs"] == [[0, 0, 0], [1, 0, 0]]
    assert (f.detail["argument"], f.detail["element"], f.detail["address"]) == ("y_ptr", 0, y.data_ptr())
    assert f.detail["nbytes"] == 64
    assert not [g for g in sanitizer.findings if g.kind == "overlap"]


def test_the_same_value_stored_twice_is_one_note_not_a_failure(sanitizer):
    y = torch.zeros(16, dtype=torch.int32)
    K.store_constant[(3,)](y, BLOCK=16)
    K.store_constant[(4,)](y, BLOCK=16)
    f = only(sanitizer, "overlap")  # once per kernel and line
    assert f.detail["programs"] == [[0, 0, 0], [1, 0, 0]] and f.detail["argument"] == "y_ptr"
    assert f.message().startswith("note: benign overlap in kernel store_constant")
    assert sanitizer.counts == {"out_of_bounds": 0, "race": 0, "overlap": 1}


def test_atomic_adds_of_several_programs_are_no_race(sanitizer):
    y = torch.zeros(16, dtype=torch.int32)
    K.count_into_one[(3,)](y, BLOCK=16)
    assert (y == 3).all()
    clean(sanitizer)


def test_a_race_warns_in_warn_mode(sanitizer):
    sanitizer.mode = "warn"
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        K.store_program_id[(2,)](torch.zeros(16, dtype=torch.int32), BLOCK=16)
    assert [str(x.message).splitlines()[0] for x in w if x.category is SanitizerWarning][0].startswith(
        "harness sanitizer (CPU lane): race in kernel store_program_id")


def test_an_interpreter_without_the_hooked_methods_is_said_once_and_not_sanitized():
    from triton.runtime import interpreter

    with Patch.context() as p:
        p.setattr(interpreter.InterpreterBuilder, "create_masked_store", None, tag="test-future-triton")
        st = State("fail")
        with pytest.warns(RuntimeWarning, match=r"harness sanitizer: this Triton's interpreter is not understood "
                                                r"\(InterpreterBuilder lacks \['create_masked_store'\]\); loads, "
                                                r"stores and atomics are not checked"):
            assert install(p, st) is False
        assert st.lines()[1] == ("nothing was sanitized: this Triton's interpreter is not understood "
                                 "(InterpreterBuilder lacks ['create_masked_store']); loads, stores and atomics are "
                                 "not checked")
