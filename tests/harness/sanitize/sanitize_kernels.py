"""Kernels with one memory defect each (and their correct twins), for the sanitizer's tests. Each defect is one a
real kernel makes: the last block unmasked, an offset below zero, a row stride used as a column stride, two
programs storing the same bytes."""

import triton
import triton.language as tl


@triton.jit
def copy_unmasked(x_ptr, y_ptr, BLOCK: tl.constexpr):
    """Tail overrun: no mask, so the last block reads and writes past n."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs))


@triton.jit
def copy_masked(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    """The same copy with the tail masked (out-of-bounds lanes masked off: must not be flagged)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n, other=0.0), mask=offs < n)


@triton.jit
def shift_left(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    """Negative offset: y[i] = x[i - 1] reads x[-1] for i = 0 (the mask checks only the upper bound)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs - 1, mask=offs < n), mask=offs < n)


@triton.jit
def transpose_strided(x_ptr, y_ptr, M, N, stride_row, BLOCK_N: tl.constexpr):
    """Stride bug: row m of x (M×N, row stride ``stride_row``) should be read along columns, but the column
    offset is multiplied by the row stride."""
    m = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    row = tl.load(x_ptr + m * stride_row + cols * stride_row, mask=mask)
    tl.store(y_ptr + m * N + cols, row, mask=mask)


@triton.jit
def store_program_id(y_ptr, BLOCK: tl.constexpr):
    """Cross-program overlap, different values: every program writes its id to the same block."""
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.zeros([BLOCK], tl.int32) + tl.program_id(0))


@triton.jit
def store_constant(y_ptr, BLOCK: tl.constexpr):
    """Cross-program overlap, same values: every program writes 7 to the same block (benign)."""
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.full([BLOCK], 7, tl.int32))


@triton.jit
def count_into_one(y_ptr, BLOCK: tl.constexpr):
    """Overlap through atomics: every program adds 1 to the same block (no race)."""
    offs = tl.arange(0, BLOCK)
    tl.atomic_add(y_ptr + offs, tl.full([BLOCK], 1, tl.int32))


@triton.jit
def atomic_past_end(y_ptr, n, BLOCK: tl.constexpr):
    """An atomic_add with no mask on a tail block."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_add(y_ptr + offs, tl.full([BLOCK], 1, tl.int32))


@triton.jit
def add_bf16_past_end(y_ptr, BLOCK: tl.constexpr):
    """A bf16 atomic_add with no mask (the harness's own bf16 atomic model serves it)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_add(y_ptr + offs, tl.full([BLOCK], 1.0, tl.bfloat16))


@triton.jit
def copy_block_ptr(x_ptr, y_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Block pointers whose tail tiles hang past M and N, masked by boundary_check."""
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    src = tl.make_block_ptr(x_ptr, (M, N), (N, 1), (pm * BLOCK_M, pn * BLOCK_N), (BLOCK_M, BLOCK_N), (1, 0))
    dst = tl.make_block_ptr(y_ptr, (M, N), (N, 1), (pm * BLOCK_M, pn * BLOCK_N), (BLOCK_M, BLOCK_N), (1, 0))
    tl.store(dst, tl.load(src, boundary_check=(0, 1), padding_option="zero"), boundary_check=(0, 1))


@triton.jit
def copy_descriptor(x_desc, y_desc, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Host tensor descriptors whose tail tiles hang past the tensor (the descriptor masks them)."""
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    y_desc.store([pm * BLOCK_M, pn * BLOCK_N], x_desc.load([pm * BLOCK_M, pn * BLOCK_N]))


@triton.jit
def scale_by_first(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    """A scalar load (x[0]) beside the block's."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    s = tl.load(x_ptr)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n, other=0.0) * s, mask=offs < n)


@triton.jit
def gather_rows(x_ptr, idx_ptr, y_ptr, n, BLOCK: tl.constexpr):
    """y[i] = x[idx[i]]: the index decides the address (a bad index is an out-of-bounds read)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    i = tl.load(idx_ptr + offs, mask=m, other=0)
    tl.store(y_ptr + offs, tl.load(x_ptr + i, mask=m), mask=m)


@triton.jit
def cas_past_end(y_ptr, BLOCK: tl.constexpr):
    """A compare-and-swap (no mask exists) on a block that hangs past y: 0 -> 5 where it finds 0."""
    offs = tl.arange(0, BLOCK)
    tl.atomic_cas(y_ptr + offs, tl.zeros([BLOCK], tl.int32), tl.full([BLOCK], 5, tl.int32))
