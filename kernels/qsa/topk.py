"""Row-wise top-k of fp32 logits on the GPU without sorting: a bitwise threshold search, then compaction.

Why not ``torch.topk``: for k = 512 of tens of thousands of columns it sorts, and at decode sizes it costs
twice the logits kernel. Here one program per row finds the k-th largest score exactly by deciding the
32 bits of its order-preserving int32 key from the top (each bit one counting pass over the row: is
``count(key >= candidate) >= k``?), then writes every column above that score and the first columns
(lowest index) equal to it, ``k`` in all. The result is an exact top-k with ties broken towards the lower
column, in ascending column order (not by score: the attention that consumes it gathers in page order),
``-1``-padded at the end when a row sees fewer than ``k`` columns.

Order of floats: ``-0.0`` ranks just below ``+0.0``; NaN ranks above ``+inf`` with its sign bit clear and
below ``-inf`` with it set (the logits kernel yields neither from finite inputs).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

__all__ = ["topk_columns"]

#: Columns per counting pass; rows up to this wide are loaded once and kept in registers (as int32 keys,
#: 16384 over 16 warps = 32 per thread).
CHUNK = 16384


@triton.jit
def _order_key(x):
    # fp32 -> int32 with the order of the floats (signed compare): positives keep their bits, negatives
    # flip all but the sign bit, so -0.0 -> -1 sits just below +0.0 -> 0 and -inf far below.
    b = x.to(tl.float32).to(tl.int32, bitcast=True)  # exact for fp16/bf16 scores too
    return tl.where(b >= 0, b, b ^ 0x7FFFFFFF)


@triton.jit
def _count(
    row_ptr, vis, t, ks, offs, STRICT: tl.constexpr, CHUNK: tl.constexpr, RESIDENT: tl.constexpr, N_CHUNKS: tl.constexpr
):
    # Visible columns whose key is > t (STRICT) or >= t.
    if RESIDENT:
        hit = (ks > t) if STRICT else (ks >= t)
        n = tl.sum((hit & (offs < vis)).to(tl.int32))
    else:
        n = tl.zeros([], dtype=tl.int32)
        for c in tl.static_range(N_CHUNKS):
            cols = c * CHUNK + offs
            key = _order_key(tl.load(row_ptr + cols, mask=cols < vis, other=0.0))
            hit = (key > t) if STRICT else (key >= t)
            n += tl.sum((hit & (cols < vis)).to(tl.int32))
    return n


@triton.jit
def _topk_kernel(
    logits_ptr,
    vis_ptr,
    out_ptr,
    stride_lr,
    stride_or,
    K: tl.constexpr,
    CHUNK: tl.constexpr,
    RESIDENT: tl.constexpr,
    N_CHUNKS: tl.constexpr,
):
    # K, the chunk counts and the loops over them are compile-time: the Triton 3.6 interpreter cannot run a
    # loop bounded by a runtime value.
    r = tl.program_id(0).to(tl.int64)
    vis = tl.load(vis_ptr + r).to(tl.int32)
    row_ptr = logits_ptr + r * stride_lr
    offs = tl.arange(0, CHUNK)
    if RESIDENT:
        ks = _order_key(tl.load(row_ptr + offs, mask=offs < vis, other=0.0))
    else:
        ks = tl.zeros([CHUNK], dtype=tl.int32)  # unused: each pass reloads the row
    # t: the key of the k-th largest visible score, the largest t with count(key >= t) >= k, decided bit by
    # bit from the top (int64 bookkeeping, int32 compares: every candidate lies in the int32 range).
    # A row with <= k visible columns keeps t = INT32_MIN: everything is taken.
    t = tl.full([], -2147483648, dtype=tl.int64)
    if vis > K:
        step = tl.full([], 2147483648, dtype=tl.int64)
        for _ in range(32):
            cand = (t + step).to(tl.int32)
            if _count(row_ptr, vis, cand, ks, offs, False, CHUNK, RESIDENT, N_CHUNKS) >= K:
                t += step
            step = step // 2
    t32 = t.to(tl.int32)
    need = K - _count(row_ptr, vis, t32, ks, offs, True, CHUNK, RESIDENT, N_CHUNKS)  # ties at t to take
    taken = tl.zeros([], dtype=tl.int32)
    ties = tl.zeros([], dtype=tl.int32)
    for c in tl.static_range(N_CHUNKS):
        cols = c * CHUNK + offs
        if RESIDENT:
            key = ks
        else:
            key = _order_key(tl.load(row_ptr + cols, mask=cols < vis, other=0.0))
        ok = cols < vis
        eq = (key == t32) & ok
        tie_rank = ties + tl.cumsum(eq.to(tl.int32), axis=0) - 1
        take = ((key > t32) & ok) | (eq & (tie_rank < need))
        pos = taken + tl.cumsum(take.to(tl.int32), axis=0) - 1
        tl.store(out_ptr + r * stride_or + pos, cols.to(tl.int32), mask=take)
        taken += tl.sum(take.to(tl.int32))
        ties += tl.sum(eq.to(tl.int32))
    for c in tl.static_range((K + CHUNK - 1) // CHUNK):
        p = c * CHUNK + offs
        tl.store(out_ptr + r * stride_or + p, tl.full([CHUNK], -1, tl.int32), mask=(p >= taken) & (p < K))


def topk_columns(
    logits: torch.Tensor, visible: torch.Tensor, k: int, *, out: torch.Tensor | None = None
) -> torch.Tensor:
    """int32 [rows, k]: the ``k`` best of columns ``[0, visible[r])`` of each row of fp32 ``logits``, in
    ascending column order, ``-1``-padded; no host synchronization. Callers validated the arguments
    (``visible`` contiguous int, ``0 <= visible[r] <= logits.shape[1]``; ``out`` int32 [rows, k] with
    unit column stride, e.g. a row slice of the caller's result)."""
    rows, width = logits.shape
    if out is None:
        out = torch.empty(rows, k, dtype=torch.int32, device=logits.device)
    if rows == 0:
        return out
    chunk = min(CHUNK, max(16, triton.next_power_of_2(max(width, k))))
    resident = width <= chunk
    _topk_kernel[(rows,)](
        logits,
        visible,
        out,
        logits.stride(0),
        out.stride(0),
        k,
        CHUNK=chunk,
        RESIDENT=resident,
        N_CHUNKS=triton.cdiv(width, chunk),
        num_warps=16 if chunk >= 8192 else 8 if chunk >= 2048 else 4,
    )
    return out
