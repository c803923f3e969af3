"""A ``@triton.jit`` helper may call ``tl.core``'s builtins with keyword arguments (triton_kernels' MXFP4
downcast: ``tl.core.sub(E8_BIAS, e + 1, sanitize_overflow=False)``). The raw interpreter runs it only while an
earlier device call has left ``tl.core`` patched (the leak :func:`harness.interp.jit.fix_interpreter_leak`
undoes); the plugin's interpreter lane must run it in any order (issue 40)."""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl


@triton.jit
def _denormal_shift(x):
    # as triton_kernels' _downcast_to_mxfp computes an e2m1 subnormal's mantissa shift
    e = (x.to(tl.uint32, bitcast=True) >> 23) & 0xFF
    E8_BIAS: tl.constexpr = 127
    return tl.core.sub(E8_BIAS, e + 1, sanitize_overflow=False)


@triton.jit
def _shift_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    tl.store(y_ptr + o, _denormal_shift(tl.load(x_ptr + o)).to(tl.int32))


@pytest.mark.interp_only
def test_core_builtin_with_keyword_arguments_in_a_helper():
    x = torch.tensor([0.25, 0.5, 1.0, 3.0, 1e-3, 6.0, 0.75, 2.0])
    y = torch.empty(8, dtype=torch.int32)
    _shift_kernel[(1,)](x, y, BLOCK=8)
    e = (x.view(torch.int32) >> 23) & 0xFF
    assert torch.equal(y, (127 - (e + 1)).to(torch.int32))
