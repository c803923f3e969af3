"""Demo kernel for launch capture: an FP8 store written like the turboquant store before the seed fix.

``store_prefix`` casts the loaded values straight to FP8; for ``tl.float8e4b15`` Triton's custom conversion takes
fp16/fp32 only, so bf16 input cannot compile for any NVIDIA target. ``store_fixed`` widens to fp32 after the load
(the fix). Launched with fp16 only by ``tests/test_launch_capture.py``'s inner tests: only widening can see the
bf16 bug. Not a test module (no ``test_`` prefix).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def store_prefix(x_ptr, y_ptr, n, FMT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    tl.store(y_ptr + offs, x.to(FMT).to(tl.uint8, bitcast=True), mask=m)


@triton.jit
def store_fixed(x_ptr, y_ptr, n, FMT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0).to(tl.float32)
    tl.store(y_ptr + offs, x.to(FMT).to(tl.uint8, bitcast=True), mask=m)


def store(x: torch.Tensor, fmt=tl.float8e4b15, *, fixed: bool = False) -> torch.Tensor:
    """FP8 codes of ``x`` (1-D, contiguous) as uint8."""
    if x.dim() != 1 or not x.is_contiguous():
        raise ValueError(f"x must be a contiguous 1-D tensor, got shape {tuple(x.shape)}")
    y = torch.empty(x.shape, dtype=torch.uint8, device=x.device)
    kernel = store_fixed if fixed else store_prefix
    kernel[(triton.cdiv(x.numel(), 64),)](x, y, x.numel(), FMT=fmt, BLOCK=64)
    return y
