"""The logic under the hooks, on plain numpy: :class:`StoreLog` (element and byte paths) and :class:`Extents`."""

from __future__ import annotations

import numpy as np

from harness.sanitize.memory import Argument, Extents
from harness.sanitize.races import StoreLog

A = 0x10000


def u64(*a: int) -> np.ndarray:
    return np.array(a, dtype=np.uint64)


def test_same_program_twice_is_program_order_not_an_overlap():
    log = StoreLog()
    log.add(u64(A, A + 4), np.array([1, 2], np.int32), program=0, site=0)
    log.add(u64(A), np.array([3], np.int32), program=0, site=1)
    log.add(u64(A + 8), np.array([3], np.int32), program=1, site=0)
    assert log.overlaps() == []


def test_the_last_value_of_each_program_decides():
    log = StoreLog()
    log.add(u64(A), np.array([1], np.int32), program=0, site=0)
    log.add(u64(A), np.array([5], np.int32), program=0, site=0)  # program 0 leaves 5
    log.add(u64(A), np.array([5], np.int32), program=1, site=0)
    (o,) = log.overlaps()
    assert (o.racy, o.address, o.programs, o.nbytes) == (False, A, (0, 1), 4)


def test_mixed_element_sizes_are_compared_byte_by_byte():
    log = StoreLog()
    log.add(u64(A), np.array([0x01020304], np.int32), program=0, site=0)
    log.add(u64(A + 1), np.array([0x03], np.uint8), program=1, site=1)  # the same byte as program 0's
    log.add(u64(A + 2), np.array([0x07], np.uint8), program=2, site=1)  # program 0 wrote 0x02 there
    found = log.overlaps()
    assert [(o.racy, o.address, o.programs, o.sites, o.nbytes) for o in found] == [(True, A + 2, (0, 2), (0, 1), 2)]


def test_misaligned_stores_of_one_size_take_the_byte_path():
    log = StoreLog()
    log.add(u64(A + 2), np.array([0x7F7F], np.uint16), program=0, site=0)
    log.add(u64(A + 3), np.array([0x7F7F], np.uint16), program=1, site=0)
    (o,) = log.overlaps()
    assert (o.racy, o.address, o.nbytes) == (False, A + 3, 1)


def test_a_program_storing_a_byte_again_is_a_repeat_with_both_stores_and_elements():
    log = StoreLog()
    log.add(u64(A, A + 4, A + 8), np.array([1, 2, 3], np.int32), program=0, site=0,
            mask=np.array([[True, False], [True, True]]))  # elements 0, 2, 3 of a 2x2 block
    log.add(u64(A + 8, A + 12), np.array([3, 9], np.int32), program=1, site=0)  # another program: no repeat
    log.add(u64(A + 8, A), np.array([3, 7], np.int32), program=0, site=1)
    rep = log.repeats()
    assert rep.address.tolist() == [A, A + 8] and rep.program.tolist() == [0, 0] and rep.width == 4
    assert [s.tolist() for s in rep.stores] == [[0, 0], [2, 2]]
    assert [e.tolist() for e in rep.elements] == [[0, 3], [1, 0]]
    assert rep.differ.tolist() == [True, False]
    assert StoreLog().repeats() is None
    once = StoreLog()
    once.add(u64(A, A + 4), np.array([1, 2], np.int32), program=0, site=0)
    once.add(u64(A, A + 4), np.array([1, 2], np.int32), program=1, site=0)
    assert once.repeats() is None


def test_repeats_of_mixed_sizes_are_bytes_with_their_elements():
    log = StoreLog()
    log.add(u64(A), np.array([0x01020304], np.int32), program=0, site=0)
    log.add(u64(A + 2, A + 3), np.array([0x02, 0x05], np.uint8), program=0, site=1)
    log.add(u64(A + 2), np.array([0x02], np.uint8), program=0, site=1)  # one store's element twice: in order
    rep = log.repeats()
    assert rep.width == 1 and rep.address.tolist() == [A + 2, A + 2, A + 3]
    assert [s.tolist() for s in rep.stores] == [[0, 1, 0], [1, 2, 1]]
    assert [e.tolist() for e in rep.elements] == [[0, 0, 0], [0, 0, 1]]
    assert rep.differ.tolist() == [False, False, True]


def test_the_quick_answer_never_hides_a_repeat():
    """Stores whose addresses increase and whose spans are disjoint are answered without the sort; anything else
    (an address twice in one store, addresses out of order, a span reaching into another's) is sorted."""
    apart = StoreLog()
    apart.add(u64(A, A + 4), np.array([1, 2], np.int32), program=0, site=0)
    apart.add(u64(A + 8, A + 12), np.array([1, 2], np.int32), program=0, site=1)
    assert apart.repeats() is None and apart.overlaps() == []
    for addrs in [(A, A), (A + 4, A, A + 4), (A, A + 2)]:  # A + 2: inside the 4 bytes at A
        log = StoreLog()
        log.add(u64(*addrs), np.arange(len(addrs), dtype=np.int32), program=0, site=0)
        assert log.repeats() is not None, addrs
    touching = StoreLog()
    touching.add(u64(A, A + 4), np.array([1, 2], np.int32), program=0, site=0)
    touching.add(u64(A + 6), np.array([3], np.int16), program=0, site=1)  # inside the element at A + 4
    assert touching.repeats().address.tolist() == [A + 6, A + 7]


def arg(name: str, ptr: int, nbytes: int, *, data_ptr: int | None = None, esize: int = 4) -> Argument:
    return Argument(name, ptr if data_ptr is None else data_ptr, esize, nbytes // esize, "float32", ptr, nbytes)


def test_an_access_must_fit_in_one_storage_not_straddle_two_touching_ones():
    ext = Extents([arg("a", A, 16), arg("b", A + 16, 16)])
    out = ext.outside(u64(A, A + 12, A + 14, A + 16, A + 28, A + 29, A - 1), 4)
    assert out.tolist() == [False, False, True, False, False, True, True]
    assert ext.span_inside(u64(A + 12, A, A + 4), 4)  # the quick answer for a block inside one storage
    assert not ext.span_inside(u64(A, A + 16), 4)  # the span of two storages: asked lane by lane
    assert not ext.span_inside(u64(A + 16, A + 29), 4)


def test_zero_size_storages_hold_nothing_and_overlapping_ones_are_each_checked():
    ext = Extents([arg("empty", A, 0), arg("outer", A + 64, 64), arg("inner", A + 80, 8)])
    assert ext.outside(u64(A, A + 64, A + 124, A + 125), 4).tolist() == [True, False, False, True]
    miss = ext.nearest(A + 125, 4)
    assert (miss.argument.name, miss.side, miss.nbytes) == ("outer", "past", 1)
    miss = ext.nearest(A - 8, 4)
    assert (miss.argument.name, miss.side, miss.nbytes) == ("empty", "before", 8)


def test_the_owner_of_a_byte_is_the_argument_whose_elements_hold_it():
    base = arg("base", A, 64)
    view = arg("view", A, 64, data_ptr=A + 32)
    ext = Extents([base, view])
    assert ext.owner(A + 40).name == "base"  # both storages hold it; base's elements [A, A+64) do too
    assert Extents([view]).owner(A + 8).name == "view"  # before the view's first element: its storage's
    assert ext.owner(A + 64) is None


def test_workers_reports_add_up_and_a_note_is_kept_once():
    from harness.sanitize.report import Finding, State

    def worker(*findings: Finding) -> dict:
        st = State("fail")
        st.launches = 2
        for f in findings:
            st.add(f)
        return st.to_worker()

    note = Finding("overlap", "k", "k.py:3", "store", {"programs": [[0, 0, 0], [1, 0, 0]], "address": A,
                                                         "nbytes": 4, "argument": "y", "element": 0})
    oob = Finding("out_of_bounds", "k", "k.py:5", "load", {})
    controller = State("fail")
    controller.merge(worker(note, oob))
    controller.merge(worker(note))
    assert controller.launches == 4
    assert controller.counts == {"out_of_bounds": 1, "race": 0, "overlap": 1}
    assert [f.kind for f in controller.findings] == ["overlap", "out_of_bounds"]
