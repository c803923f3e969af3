"""Deliberately broken kernels and launchers for the replay checks, beside their correct versions.

Each defect is one the issue names: a row that reads its neighbour (batch invariance), a result that changes
between calls (determinism: a float atomic sum on the GPU, a host-side counter anywhere), a launcher that caches
a tensor derived from an input by its address or reads an input's value on the host (graph replay), a kernel
that leaves part of its output unwritten (the replay leaves poison).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _rows_kernel(x_ptr, out_ptr, n_rows, n_cols, NEIGHBOUR: tl.constexpr, SKIP_LAST: tl.constexpr,
                 BLOCK: tl.constexpr):
    r = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < n_cols
    x = tl.load(x_ptr + r * n_cols + cols, mask=m)
    if NEIGHBOUR:  # the defect: the next row's data, when the launch has one
        x += tl.load(x_ptr + (r + 1) * n_cols + cols, mask=m & (cols * 0 + r + 1 < n_rows), other=0.0)
    else:
        x = x * 2.0
    if SKIP_LAST:  # the defect: the last column is never written
        m = cols < n_cols - 1
    tl.store(out_ptr + r * n_cols + cols, x, mask=m)


def rows(x: torch.Tensor, *, neighbour: bool = False, skip_last: bool = False, rows: int | None = None,
         out: torch.Tensor | None = None) -> torch.Tensor:
    """Each row of ``x`` [R, C] doubled (correct), or plus the next row (``neighbour``); the first ``rows`` rows
    only; into ``out`` (in place) or a new tensor."""
    n_rows, n_cols = x.shape
    out = torch.empty_like(x) if out is None else out
    _rows_kernel[(n_rows if rows is None else rows,)](x, out, n_rows, n_cols, NEIGHBOUR=neighbour,
                                                      SKIP_LAST=skip_last, BLOCK=triton.next_power_of_2(n_cols))
    return out


class PointerCache:
    """A launcher that keeps a copy of its input by the input's address (the defect: new values in the
    same buffer are never seen)."""

    def __init__(self) -> None:
        self.copies: dict[int, torch.Tensor] = {}

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        src = self.copies.setdefault(x.data_ptr(), x.clone())
        return rows(src)


class Drifting:
    """A host-side nondeterminism: from its third call on, one element is one ULP off."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        out = rows(x)
        if self.calls >= 3:
            out[1, 2] = torch.nextafter(out[1, 2], torch.tensor(float("inf"), dtype=out.dtype, device=out.device))
        return out


def rows_from_host_count(x: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
    """The first ``count[0]`` rows doubled, the rest zero; ``count`` is a CPU tensor read on the host (the defect
    under a CUDA graph: the capture's count is baked into the grid)."""
    out = torch.zeros_like(x)
    return rows(x, rows=int(count[0]), out=out)


@triton.jit
def _sum_kernel(x_ptr, out_ptr, partial_ptr, n, ATOMIC: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    s = tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0), axis=0)
    if ATOMIC:  # the defect on a GPU: the blocks' partial sums are added in the order they finish
        tl.atomic_add(out_ptr, s)
    else:
        tl.store(partial_ptr + pid, s)


def total(x: torch.Tensor, *, atomic: bool) -> torch.Tensor:
    """The sum of ``x`` (1-d float32): blocks added with a float atomic (order: the scheduler's), or each block's
    partial written and summed by torch in index order (deterministic)."""
    block = 256
    grid = triton.cdiv(x.numel(), block)
    out = torch.zeros(1, dtype=torch.float32, device=x.device)
    partial = torch.empty(grid, dtype=torch.float32, device=x.device)
    _sum_kernel[(grid,)](x, out, partial, x.numel(), ATOMIC=atomic, BLOCK=block)
    return out if atomic else partial.sum(0, keepdim=True)
