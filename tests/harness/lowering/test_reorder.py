"""``tl.sum(x)`` with no axis reshapes the block with ``allow_reorder`` (Triton's ``reduce``), and Triton lowers that
reshape by renaming each thread's registers: the reduction then combines the load layout's elements in its own
register order (:func:`harness.lowering.compiled.reorder_of`). Found on an H100 with FlagGems' two-stage sum:
without it, 58 of 98 block sums were 1-2 ulp off on the interpreter lane."""

from __future__ import annotations

import numpy as np
import pytest

from harness.lowering import compiled, reduce_order, ttgir

triton = pytest.importorskip("triton")

_TTGIR = """\
#blocked = #ttg.blocked<{sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}>
#blocked1 = #ttg.blocked<{sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}>
module attributes {"ttg.num-warps" = 4 : i32, "ttg.threads-per-warp" = 32 : i32} {
    %s = tt.reshape %x allow_reorder : tensor<1024xf32, #blocked> -> tensor<1024xf32, #blocked1> loc(#loc1)
    %r = "tt.reduce"(%s) <{axis = 0 : i32}> ({
    ^bb0(%a: f32, %b: f32):
      %c = arith.addf %a, %b : f32
      tt.reduce.return %c : f32
    }) : (tensor<1024xf32, #blocked1>) -> f32
}
"""


def test_the_reduce_knows_the_layout_its_operand_was_reshaped_from():
    (op,) = ttgir.parse(_TTGIR).ops
    assert op.reordered_from == "#blocked" and op.operands[0].layout == "#blocked1"
    same = _TTGIR.replace("tensor<1024xf32, #blocked> ->", "tensor<1024xf32, #blocked1> ->")
    assert ttgir.parse(same).ops[0].reordered_from is None  # a reshape within one layout moves nothing


def test_reorder_pairs_each_register_of_the_load_layout_with_the_reduce_layout_position():
    mod = ttgir.parse(_TTGIR)
    perm = compiled.reorder_of("#blocked", "#blocked1", (1024,), 0, mod.layouts)
    # by the layouts' definitions: thread t = lane + 32 * warp holds, in #blocked, 4t..4t+3 then 512 + 4t..;
    # in #blocked1, t, t + 128, ..., t + 896, register r at t + 128 r
    want = np.empty(1024, np.int64)
    for t in range(128):
        for r in range(8):
            want[t + 128 * r] = 4 * t + (r % 4) + 512 * (r // 4)
    assert list(perm) == list(want)


def test_a_reduction_over_the_reordered_registers_sums_in_the_load_layouts_order():
    mod = ttgir.parse(_TTGIR)
    perm = np.asarray(compiled.reorder_of("#blocked", "#blocked1", (1024,), 0, mod.layouts))
    bits = compiled.axis_bits("#blocked1", (1024,), 0, mod.layouts)
    plan = reduce_order.ReducePlan(bits, reduce_order.rule_for("3.6.0"))
    x = (np.random.default_rng(7).standard_normal((64, 1024)) * 3).astype(np.float32)
    (reordered,) = reduce_order.reduce(np.take(x, perm, 1), 1, plan, "add", "fp32")
    (plain,) = reduce_order.reduce(x, 1, plan, "add", "fp32")
    assert not np.array_equal(reordered, plain)  # the inputs tell the two orders apart


def test_layouts_that_do_not_map_one_to_one_are_refused():
    mod = ttgir.parse(_TTGIR.replace("sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4]",
                                     "sizePerThread = [8], threadsPerWarp = [32], warpsPerCTA = [2]"))
    with pytest.raises(ValueError, match="elements per thread|one to one"):
        compiled.reorder_of("#blocked", "#blocked1", (1024,), 0, mod.layouts)


def test_the_compiled_block_sum_reduces_over_a_reordering_reshape():
    """What Triton 3.6 and 3.9 compile for ``tl.sum(x)`` of a vectorized load (16-byte aligned, as a launch's
    tensors are): the facts carry the reorder, and the interpreter lane computes the sum in its order."""
    from harness.compile.matrix import compile_matrix
    from tests.lowering import kernels

    k = compile_matrix(kernels.block_sum, signature={"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32"},
                       constexprs={"BLOCK": 1024}, targets=["sm90"], options={"num_warps": 4},
                       divisible=["x_ptr", "y_ptr", "n"])["sm90"]
    facts = compiled.facts_from_asm(k.asm, version=triton.__version__, arch="sm90", num_warps=4)
    (r,) = facts.reductions
    assert r.reorder is not None and sorted(r.reorder) == list(range(1024)) and list(r.reorder) != list(range(1024))
