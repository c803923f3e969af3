"""Kernels written in the patterns of public low-precision kernels whose launches differ on real GPUs from what a
CPU test runs (the patterns, not their code). Not a test module: the pytester tests copy it into their project.

- ``quant_rows`` (torchao style): a ``input_dtype: tl.constexpr`` the launcher sets from the tensor's dtype, and a
  bf16 path of its own that casts straight to e4b15 (the bug); fp16/fp32 go through fp32.
- ``amax_rows``: an fp32 ``amax_ptr`` updated with ``tl.atomic_max`` through a local pointer (an fp32 scale
  output; Triton has no 16-bit float atomic_max, so it cannot be widened).
- ``copy_i64``: ``n: tl.int64``, typed i64 by Triton's launcher whatever its value.
- ``store_fp8``: stores into an FP8 tensor of any format (``out_ptr.dtype.element_ty``).
- ``scale_tuned``: ``@triton.autotune`` over four configs (two tiles x two warp counts).
- ``copy_even``: ``@triton.heuristics`` for ``EVEN`` and a constexpr with a default (``BLOCK = 64``).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def quant_rows(x_ptr, y_ptr, n, input_dtype: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    if input_dtype == tl.bfloat16:
        y = x.to(tl.float8e4b15)  # the bug: bf16 -> e4b15 does not lower
    else:
        y = x.to(tl.float32).to(tl.float8e4b15)
    tl.store(y_ptr + offs, y.to(tl.uint8, bitcast=True), mask=m)


_TL = {torch.float16: tl.float16, torch.bfloat16: tl.bfloat16, torch.float32: tl.float32}


def quant(x):
    y = torch.empty(x.shape, dtype=torch.uint8, device=x.device)
    quant_rows[(triton.cdiv(x.numel(), 64),)](x, y, x.numel(), input_dtype=_TL[x.dtype], BLOCK=64)
    return y


@triton.jit
def amax_rows(x_ptr, amax_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
    dst = amax_ptr + 0
    tl.atomic_max(dst, tl.max(tl.abs(x), axis=0))


def amax(x):
    out = torch.zeros(1, dtype=torch.float32, device=x.device)
    amax_rows[(triton.cdiv(x.numel(), 64),)](x, out, x.numel(), BLOCK=64)
    return out


@triton.jit
def copy_i64(x_ptr, y_ptr, n: tl.int64, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


@triton.jit
def store_fp8(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    tl.store(out_ptr + offs, x.to(out_ptr.dtype.element_ty), mask=m)


@triton.autotune(
    configs=[triton.Config({"BLOCK": b}, num_warps=w) for b in (32, 128) for w in (1, 4)],
    key=["n"],
)
@triton.jit
def scale_tuned(x_ptr, y_ptr, n, s, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) * s, mask=m)


def scale(x, s):
    y = torch.empty_like(x)
    scale_tuned[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, y, x.numel(), s)
    return y


@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def copy_even(x_ptr, y_ptr, n, EVEN: tl.constexpr, BLOCK: tl.constexpr = 64):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        tl.store(y_ptr + offs, tl.load(x_ptr + offs))
    else:
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
