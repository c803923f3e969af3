"""Kernels whose one program stores some bytes twice, for the check of races between the threads of one program:
each pair of stores is ordered (one thread stores both, or a barrier lies between) or not, by construction of
the layouts Triton gives them (the same on Triton 3.6 and 3.9, sm90, 4 warps)."""

import triton
import triton.language as tl


@triton.jit
def mirror(y_ptr, BLOCK: tl.constexpr):
    """y[i] = i, then y[BLOCK-1-i] = 2 i: element j is stored by the thread of i = j, then by the thread of
    i = BLOCK-1-j, with different values and no barrier: a race."""
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, offs)
    tl.store(y_ptr + BLOCK - 1 - offs, 2 * offs)


@triton.jit
def mirror_same_values(y_ptr, BLOCK: tl.constexpr):
    """The same two stores, each element stored with its own index both times: benign."""
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, offs)
    tl.store(y_ptr + BLOCK - 1 - offs, BLOCK - 1 - offs)


@triton.jit
def mirror_after_sum(y_ptr, BLOCK: tl.constexpr):
    """The mirrored store takes a sum over the block: the reduction's bar.sync lies between the two stores."""
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, offs)
    s = tl.sum(offs, axis=0)
    tl.store(y_ptr + BLOCK - 1 - offs, 2 * offs + s)


@triton.jit
def zero_then_masked(y_ptr, n, BLOCK: tl.constexpr):
    """Clear a block, then store values into its first n: each element stored twice by one thread."""
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.zeros([BLOCK], tl.int32))
    tl.store(y_ptr + offs, offs + 1, mask=offs < n)


@triton.jit
def rows_then_total(y_ptr, ROWS: tl.constexpr, COLS: tl.constexpr):
    """A [ROWS, COLS] tile stored, then its last element overwritten by a scalar (thread 0 stores scalars) with no
    barrier between: a race where the tile's last element belongs to another thread."""
    r = tl.arange(0, ROWS)[:, None]
    c = tl.arange(0, COLS)[None, :]
    tl.store(y_ptr + r * COLS + c, r * COLS + c)
    tl.store(y_ptr + ROWS * COLS - 1, -1)


@triton.jit
def mirror_in_loop(y_ptr, n, BLOCK: tl.constexpr):
    """The mirrored stores inside a loop over a runtime count: not judged (the PTX order is not the execution
    order), so never a failure."""
    offs = tl.arange(0, BLOCK)
    for k in range(n):
        tl.store(y_ptr + offs, offs + k)
        tl.store(y_ptr + BLOCK - 1 - offs, 2 * offs + k)


@triton.jit
def one_address(y_ptr, BLOCK: tl.constexpr):
    """One store of a block of lanes to y[0], each lane its own index: eight threads, one address."""
    tl.store(y_ptr + tl.zeros([BLOCK], tl.int32), tl.arange(0, BLOCK))
