""":mod:`harness.lowering.stores` on hand-written TTGIR / PTX: which thread stores each element, and the barrier
rule (judged only for straight-line code, silent wherever the text order is not the execution order)."""

from __future__ import annotations

import numpy as np
import pytest

from harness.lowering.stores import StoreSite, facts_from_asm, thread_table

pytestmark = pytest.mark.lane_independent  # text in, facts out: no kernel runs

BLOCKED = "#ttg.blocked<{sizePerThread = [%d], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}>"


def _ttgir(*stores: tuple[int, str, str]) -> str:
    """A module with one ``tt.store`` per (source line, tensor type, layout text)."""
    lines = ['#loc = loc("/k.py":1:1)']
    body, locs = [], []
    for i, (line, ty, lay) in enumerate(stores):
        lines.append(f"#l{i} = {lay}")
        body.append(f"    tt.store %p{i}, %v{i} : {ty.replace('LAYOUT', f'#l{i}')} loc(#loc{i + 1})")
        locs.append(f'#loc{i + 1} = loc("/k.py":{line}:5)')
    lines += ['module attributes {"ttg.num-warps" = 4 : i32, "ttg.threads-per-warp" = 32 : i32} {',
              "  tt.func public @k() {", *body, "  } loc(#loc)", "} loc(#loc)", *locs]
    return "\n".join(lines)


def _facts(between: list[str], before: list[str] = (), after: list[str] = (), warps: int = 4):
    """Two 128-element stores at lines 5 and 6, with ``between`` in the PTX between them."""
    ty = "tensor<128x!tt.ptr<i32>, LAYOUT>"
    ttgir = _ttgir((5, ty, BLOCKED % 1), (6, ty, BLOCKED % 1))
    ptx = "\n".join([".visible .entry k()", "{", *before, ".loc 1 5 5", "@%p1 st.global.b32 [ %rd1 + 0 ], { %r1 };",
                     *between, ".loc 1 6 5", "st.global.b32 [ %rd2 + 0 ], { %r2 };", *after, "ret;", "}",
                     '.file 1 "/k.py"'])
    return facts_from_asm({"ttgir": ttgir, "ptx": ptx}, "3.9.0", "sm90", warps)


def test_sites_take_the_interpreter_position_the_layout_and_the_ptx_lines():
    f = _facts(["bar.sync 0;"])
    a, b = f.sites
    assert (a.where, b.where) == (("/k.py", 5, 4), ("/k.py", 6, 4))  # 3.9's column is the node's + 1
    assert a.shape == (128,) and a.count == 1 and not a.looped and a.first == a.last < b.first
    assert f.site_at(("/k.py", 6, 4)) is b and f.site_at(("/k.py", 7, 4)) is None


@pytest.mark.parametrize("between, want", [
    (["bar.sync 0;"], True),
    (["barrier.sync.aligned 0;"], True),
    (["add.s32 %r3, %r1, %r2;"], False),
    ([], False),
    (["bar.sync 1, 64;"], None),  # a barrier of some threads only
    (["@%p2 bar.sync 0;"], None),  # a barrier some threads may skip
    (["bar.warp.sync -1;"], None),  # one warp of four
    (["bar.sync 0;", "bar.warp.sync -1;"], True),  # a sync more takes no order away
    (["mbarrier.try_wait.parity.shared::cta.b64 %p3, [%r4], %r5;"], None),
    (["@%p2 bra $L__BB0_2;", "bar.sync 0;", "$L__BB0_2:"], None),  # the barrier may be jumped over
    (["call.uni foo, ();"], None),
], ids=["bar.sync", "barrier.sync", "nothing", "empty", "counted", "predicated", "warp-sync", "both", "mbarrier",
        "branch", "call"])
def test_a_barrier_orders_straight_line_stores_and_anything_else_is_not_judged(between, want):
    f = _facts(between)
    assert f.ordered(*f.sites) is want


def test_a_full_warp_sync_is_a_barrier_of_a_one_warp_program():
    f = _facts(["bar.warp.sync -1;"], warps=1)
    assert f.ordered(*f.sites) is True
    f = _facts(["bar.warp.sync 65535;"], warps=1)  # half the warp
    assert f.ordered(*f.sites) is None


def test_stores_in_a_loop_or_in_the_wrong_order_are_not_judged():
    f = _facts(["bar.sync 0;"], before=["$L__BB0_1:"], after=["@%p5 bra $L__BB0_1;"])
    assert all(s.looped for s in f.sites) and f.ordered(*f.sites) is None
    f = _facts(["bar.sync 0;"])
    assert f.ordered(f.sites[1], f.sites[0]) is None  # the second's instructions come first
    assert f.ordered(f.sites[0], f.sites[0]) is None


def test_one_position_with_two_stores_is_not_judged():
    ty = "tensor<128x!tt.ptr<i32>, LAYOUT>"
    ttgir = _ttgir((5, ty, BLOCKED % 1), (5, ty, BLOCKED % 1), (6, ty, BLOCKED % 1))
    ptx = "\n".join([".loc 1 5 5", "st.global.b32 [ %rd1 + 0 ], { %r1 };", "bar.sync 0;", ".loc 1 5 5",
                     "st.global.b32 [ %rd1 + 0 ], { %r1 };", "bar.sync 0;", ".loc 1 6 5",
                     "st.global.b32 [ %rd2 + 0 ], { %r2 };", '.file 1 "/k.py"'])
    f = facts_from_asm({"ttgir": ttgir, "ptx": ptx}, "3.9.0", "sm90", 4)
    assert [s.count for s in f.sites] == [2, 2, 1]
    assert f.ordered(f.sites[0], f.sites[2]) is None
    assert f.site_at(("/k.py", 5, 4)) is f.sites[0]  # the two share a layout: their threads are known
    ttgir = _ttgir((5, ty, BLOCKED % 1), (5, ty, BLOCKED % 2))
    assert facts_from_asm({"ttgir": ttgir, "ptx": ptx}, "3.9.0", "sm90", 4).site_at(("/k.py", 5, 4)) is None


def _site(shape, layout_text):
    ty = f"tensor<{'x'.join(map(str, shape))}x!tt.ptr<i32>, LAYOUT>"
    f = facts_from_asm({"ttgir": _ttgir((5, ty, layout_text)), "ptx": ""}, "3.9.0", "sm90", 4)
    return f.sites[0]


def test_each_element_has_the_thread_the_layout_gives_it():
    assert thread_table(_site((256,), BLOCKED % 2)).tolist() == [i // 2 for i in range(256)]
    assert thread_table(_site((512,), BLOCKED % 1)).tolist() == [i % 128 for i in range(512)]  # wraps: registers
    two_d = "#ttg.blocked<{sizePerThread = [1, 4], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]}>"
    t = thread_table(_site((16, 32), two_d)).reshape(16, 32)
    assert t[0, :8].tolist() == [0, 0, 0, 0, 1, 1, 1, 1] and t[1, 0] == 8 and t[4, 0] == 32 and t[15, 31] == 127


def test_a_layout_larger_than_the_tensor_stores_from_the_first_threads_only():
    """16 elements on 128 threads: lanes 0-15 of warp 0 hold the first copy and store it (Triton's redundant-thread
    predicate; the PTX of Triton 3.6 and 3.9 stores under ``tid & ~15 == 0``)."""
    assert thread_table(_site((16,), BLOCKED % 1)).tolist() == list(range(16))
    parent = "#ttg.blocked<{sizePerThread = [1, 1], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]}>"
    sliced = f"#ttg.slice<{{dim = 1, parent = {parent}}}>"
    assert thread_table(_site((16,), sliced)).tolist() == [(i % 4) * 8 + (i // 4) * 32 for i in range(16)]


def test_a_scalar_store_is_thread_0s_and_an_unread_layout_has_no_table():
    scalar = facts_from_asm({"ttgir": _ttgir((5, "!tt.ptr<i32>", BLOCKED % 1)), "ptx": ""}, "3.9.0", "sm90", 4)
    assert scalar.sites[0].shape == () and thread_table(scalar.sites[0]).tolist() == [0]
    # an MMA layout without its instruction shape: not one harness.lowering.layout reads
    mma = _site((64, 64), "#ttg.nvidia_mma<{versionMajor = 3, versionMinor = 0, warpsPerCTA = [4, 1]}>")
    assert mma.bases is None and "not modelled" in mma.error
    assert thread_table(mma) is None
    assert thread_table(StoreSite(None, (4,), {"register": [[1], [2]], "lane": [[1]], "warp": []})) is None
    assert isinstance(thread_table(StoreSite(None, (4,), {"register": [[1]], "lane": [[2]], "warp": []})),
                      np.ndarray)
