"""Demo kernels whose made-up variants the kernel itself or an op's type rule refuses (issue 40): launch capture
must call those "not applicable", never a failure. Not a test module (no ``test_`` prefix).

``mx_downcast`` guards its output format as triton_kernels' MXFP8 downcast does (``tl.static_assert(...
Invalid mx_tensor_dtype)``): widening its FP8 output to e4b15 fails there. ``scale_rows`` divides with
``tl.math.div_rn``, which takes fp32 only: its x widened to fp16/bf16 fails in that rule. ``mix_dot`` feeds
``tl.dot`` its two operands as loaded: widening one alone mismatches them.
"""

import triton
import triton.language as tl


@triton.jit
def mx_downcast(x_ptr, y_ptr, n, OUT: tl.constexpr, BLOCK: tl.constexpr):
    tl.static_assert(OUT == tl.float8e4nv or OUT == tl.float8e5, "Invalid mx_tensor_dtype")
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0).to(tl.float32)
    tl.store(y_ptr + offs, x.to(OUT).to(tl.uint8, bitcast=True), mask=m)


@triton.jit
def scale_rows(x_ptr, y_ptr, s, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=1.0)
    tl.store(y_ptr + offs, tl.math.div_rn(x, s), mask=m)


@triton.jit
def mix_dot(a_ptr, b_ptr, c_ptr):
    o = tl.arange(0, 16)
    a = tl.load(a_ptr + o[:, None] * 16 + o[None, :])
    b = tl.load(b_ptr + o[:, None] * 16 + o[None, :])
    tl.store(c_ptr + o[:, None] * 16 + o[None, :], tl.dot(a, b))
