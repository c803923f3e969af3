"""A frontend module that fails MLIR verification (Triton raises a bare "error encountered during parsing"; the
verifier's reason goes to stderr) is told apart by that reason (issue 40: capture on test_core's exec-built
kernels): an op's operand types refused among themselves is an op's type rule (a made-up variant there is "not
applicable"); ``tt.store``'s value-vs-pointer check, which Triton's e4b15 → bf16 conversion fails by returning
fp16, stays a refusal (a finding, the class of the seed regression)."""

from __future__ import annotations

import inspect
import re

import pytest
import triton
import triton.language as tl

from harness.compile.errors import InvalidIR, error_kind, error_line
from harness.compile.matrix import compile_matrix
from harness.versions import triton_at_least

pytestmark = [pytest.mark.lane_independent]


@triton.jit
def _fdiv(z_ptr, x_ptr, y_ptr):
    o = tl.arange(0, 16)
    tl.store(z_ptr + o, tl.math.fdiv(tl.load(x_ptr + o), tl.load(y_ptr + o)))


@triton.jit
def _store_fp8(y_ptr, x_ptr):
    o = tl.arange(0, 64)
    tl.store(y_ptr + o, tl.load(x_ptr + o))


@pytest.mark.parametrize("frontend", [True, False])
def test_a_store_the_conversion_helper_gives_the_wrong_type_is_a_refusal(frontend):
    r = compile_matrix(_store_fp8, signature={"y_ptr": "*bf16", "x_ptr": "*fp8e4b15"}, targets=["sm80"],
                       frontend=frontend)["sm80"]
    assert isinstance(r, InvalidIR) and error_kind(r) == "refused"
    # the store's line (3 below the decorator); the column is the op's (3.6) or its value's (3.9)
    line = inspect.getsourcelines(_store_fp8.fn)[1] + 3
    want = rf"at test_invalid_ir\.py:{line}:\d+: 'tt\.store' op failed to verify that value type matches ptr type"
    assert re.fullmatch(want + r" \(IR verification\)", error_line(r, _store_fp8))


def test_an_op_given_mixed_types_is_its_type_rule_where_the_frontend_leaves_them_to_the_verifier():
    r = compile_matrix(_fdiv, signature={"z_ptr": "*fp32", "x_ptr": "*fp16", "y_ptr": "*fp32"}, targets=["sm80"],
                       frontend=True)["sm80"]
    if triton_at_least(3, 7):
        assert not isinstance(r, BaseException)  # 3.9's fdiv promotes its operands (measured)
        return
    assert isinstance(r, InvalidIR) and error_kind(r) == "type-rule"  # Triton 3.6 (measured)
    assert "'arith.divf' op requires the same type for all operands and results" in error_line(r, _fdiv)
