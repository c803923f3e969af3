"""Row sums of a 2-D tensor with an autotuned column tile: the configs Triton's autotuner picks among on a GPU."""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK": 64}, num_warps=2),
        triton.Config({"BLOCK": 128}, num_warps=4),
        triton.Config({"BLOCK": 256}, num_warps=4),
    ],
    key=["n_cols"],
)
@triton.jit
def _row_sum(x_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * stride + offs, mask=offs < n_cols, other=0.0).to(tl.float32)
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


def row_sum(x: torch.Tensor) -> torch.Tensor:
    """The fp32 sum of each row of ``x`` (2-D, contiguous rows)."""
    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)
    _row_sum[(x.shape[0],)](x, out, x.shape[1], x.stride(0))
    return out
