"""Row-wise top-k of fp32 logits on the GPU without sorting: find the k-th largest score exactly, then
compact; no host synchronization, a launch count that depends on the shapes only (CUDA-graph capturable).

Why not ``torch.topk``: for k = 512 of tens of thousands of columns it sorts, and at decode sizes it costs
twice the logits kernel.

Two searches, chosen by row width (H200 timings in docs/performance.md):

- **bitwise** (rows up to ``RADIX_ABOVE`` = 16,384 columns, and any ``k``): one program per row holds the
  row in registers as order-preserving int32 keys and decides the 32 bits of the k-th largest key from the
  top, each bit one counting pass (is ``count(key >= candidate) >= k``?). Wider rows would be re-read from
  memory on every pass.
- **radix, split** (wider rows, ``k <= TILE // 2``): the row is cut into ``TILE``-column tiles, one program
  each; a program finds its tile's k-th largest key one 8-bit digit at a time (four ``tl.histogram``
  passes) and keeps its top-k as (key, column) candidates, which one program per row then selects again
  the same way. The row's top-k under the order (score, then lower column) is a subset of the union of
  its tiles' top-k under that order, so the result is the same. On rows that fit in registers the radix
  search measured slower than the bitwise one (its four histogram passes cost more than 33 counting passes).

Both then write every column above the k-th largest key and the first columns (lowest index) equal to it,
``k`` in all: an exact top-k with ties broken towards the lower column, in ascending column order (not by
score: the attention that consumes it gathers in page order), ``-1``-padded at the end when a row sees
fewer than ``k`` columns. Both give the same result bit for bit (tests/kernels/qsa/test_qsa_topk.py).

Order of floats: ``-0.0`` ranks just below ``+0.0``; NaN ranks above ``+inf`` with its sign bit clear and
below ``-inf`` with it set (the logits kernel yields neither from finite inputs).
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from kernels._launch import Launcher

__all__ = ["topk_columns"]

#: Columns per counting pass of the bitwise search; rows up to this wide are loaded once and kept in
#: registers (as int32 keys, 16384 over 16 warps = 32 per thread).
CHUNK = 16384
#: Rows wider than this take the split radix search (where the bitwise one would re-read the row 33 times).
RADIX_ABOVE = CHUNK
#: The widest tile a radix program keeps in registers (as for CHUNK; its scan packs two counts < 2**16).
MAX_TILE = 16384
#: Radix plan: candidates up to SINGLE per row are selected by one program; wider rows (or candidate
#: lists) are cut into TILE-column tiles. The fastest plan of the H200 sweep at 64 rows × 32,768 columns,
#: k = 512: 16 tiles of 2,048, then 8,192 candidates in one program (docs/performance.md).
SINGLE = 16384
TILE = 2048
#: Below this many rows the last level is cut down to SINGLE_FEW candidates (see ``_plan``).
FEW_ROWS = 64
SINGLE_FEW = 4096


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
            # harness: equivalent-mutant(other): a lane at or past vis is not counted (hit & (cols < vis))
            key = _order_key(tl.load(row_ptr + cols, mask=cols < vis, other=0.0))
            hit = (key > t) if STRICT else (key >= t)
            n += tl.sum((hit & (cols < vis)).to(tl.int32))
    return n


@triton.jit
def _bitwise_topk_kernel(
    logits_ptr,
    vis_ptr,
    out_ptr,
    stride_lr,
    stride_or,
    width,
    K: tl.constexpr,
    CHUNK: tl.constexpr,
    RESIDENT: tl.constexpr,
    N_CHUNKS: tl.constexpr,
):
    # K, the chunk counts and the loops over them are compile-time: the Triton 3.6 interpreter cannot run a
    # loop bounded by a runtime value.
    r = tl.program_id(0).to(tl.int64)
    # Clamped to the row: an unvalidated visible count past the logits' width (or below 0) must not make
    # the loads leave the row; valid counts are unchanged.
    vis = tl.minimum(tl.maximum(tl.load(vis_ptr + r).to(tl.int32), 0), width)
    row_ptr = logits_ptr + r * stride_lr
    offs = tl.arange(0, CHUNK)
    if RESIDENT:
        # harness: equivalent-mutant(other): a lane at or past vis is never counted nor taken (offs < vis, ok)
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
            # harness: equivalent-mutant(other): a lane at or past vis is neither a tie nor taken (ok below)
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


@triton.jit
def _radix_threshold(key, live, K: tl.constexpr, BLOCK: tl.constexpr):
    # (t, need, n_live): t is the key of the K-th largest live key and need the number of live keys equal
    # to t that belong to the top K; with <= K live keys, t = INT32_MIN and need = K (all live are taken).
    # Digits of the unsigned key (key ^ 0x80000000) from the top, 8 bits each. tl.histogram is called
    # without a mask, so no version's handling of masked lanes matters: keys outside the current prefix go
    # to bin 0 and are taken back out of it; how many match the prefix is the count of the digit the last
    # pass chose.
    n_live = tl.sum(live.to(tl.int32))
    t = tl.full([], -2147483648, dtype=tl.int32)
    need = tl.full([], K, dtype=tl.int32)
    if n_live > K:
        bins = tl.arange(0, 256)
        t = tl.zeros([], dtype=tl.int32)
        n_match = n_live
        for p in tl.static_range(4):
            if p == 0:
                match = live
                digit = (key >> 24) + 128  # the top byte, sign flipped: 0 .. 255 in the order of the keys
            else:
                match = live & ((key >> (32 - 8 * p)) == (t >> (32 - 8 * p)))
                digit = (key >> (24 - 8 * p)) & 255
            hist = tl.histogram(tl.where(match, digit, 0), 256)
            hist -= tl.where(bins == 0, BLOCK - n_match, 0)
            # at_least[d]: matching keys whose digit is >= d (non-increasing in d); the K-th largest
            # (the need-th largest matching one) has the largest digit d with at_least[d] >= need.
            at_least = n_match - tl.cumsum(hist, 0) + hist
            d = tl.sum((at_least >= need).to(tl.int32)) - 1
            need -= tl.sum(tl.where(bins > d, hist, 0))
            n_match = tl.sum(tl.where(bins == d, hist, 0))
            if p == 0:
                t = (d - 128) << 24
            else:
                t = t | (d << (24 - 8 * p))
    return t, need, n_live


@triton.jit
def _radix_topk_kernel(
    src_ptr,
    col_ptr,
    vis_ptr,
    out_ptr,
    out_key_ptr,
    stride_sr,
    stride_or,
    width,
    K: tl.constexpr,
    BLOCK: tl.constexpr,
    FROM_LOGITS: tl.constexpr,
    WRITE_KEYS: tl.constexpr,
    PAD_CHUNKS: tl.constexpr,
):
    # Program (row r, tile j): the top K of BLOCK entries of row r, written in their order (ascending
    # column) to out[r, j*K : j*K + K], -1-padded; with WRITE_KEYS their keys too (a candidate level).
    # FROM_LOGITS: the entries are logits columns [j*BLOCK, (j+1)*BLOCK) below visible[r]; otherwise they
    # are candidates (key, column) of an earlier level, live where column >= 0, ``width`` per row.
    r = tl.program_id(0).to(tl.int64)
    j = tl.program_id(1)
    offs = tl.arange(0, BLOCK)
    pos = j * BLOCK + offs
    if FROM_LOGITS:
        vis = tl.minimum(tl.maximum(tl.load(vis_ptr + r).to(tl.int32), 0), width)  # as in the bitwise search
        live = pos < vis
        # harness: equivalent-mutant(other): a dead lane's key is read only under live (match, gt, eq)
        key = _order_key(tl.load(src_ptr + r * stride_sr + pos, mask=live, other=0.0))
        col = pos
    else:
        col = tl.load(col_ptr + r * stride_sr + pos, mask=pos < width, other=-1)
        live = col >= 0
        # harness: equivalent-mutant(other): a dead lane's key is read only under live (match, gt, eq)
        key = tl.load(src_ptr + r * stride_sr + pos, mask=live, other=0)
    t, need, n_live = _radix_threshold(key, live, K, BLOCK)
    # One scan for both running counts: keys above t in the high 16 bits, keys equal to t in the low 16
    # (BLOCK <= 16384 < 2**16, so the low half never carries into the high one).
    gt = live & (key > t)
    eq = live & (key == t)
    run = tl.cumsum((gt.to(tl.int32) << 16) | eq.to(tl.int32), axis=0)
    n_eq = run & 0xFFFF  # ties up to and including this entry
    take = gt | (eq & (n_eq <= need))
    dst = (run >> 16) + tl.minimum(n_eq, need) - 1
    taken = tl.minimum(n_live, K)
    base = r * stride_or + j * K
    tl.store(out_ptr + base + dst, col, mask=take)
    if WRITE_KEYS:
        tl.store(out_key_ptr + base + dst, key, mask=take)
    for c in tl.static_range(PAD_CHUNKS):
        p = c * BLOCK + offs
        tl.store(out_ptr + base + p, tl.full([BLOCK], -1, tl.int32), mask=(p >= taken) & (p < K))


def _warps(block: int) -> int:
    return 16 if block >= 8192 else 8 if block >= 2048 else 4


def _plan(
    width: int, k: int, single: int, tile: int, rows: int | None = None, few: tuple[int, int] | None = None
) -> list[tuple[int, int]] | None:
    """(block, tiles) per level, or None for the bitwise fallback: one level when a row fits ``single``
    columns, else ``tile``-wide tiles whose ``k`` candidates each are selected again until they fit.

    With ``rows`` below ``FEW_ROWS`` the last level (one program per row) would leave most SMs idle while
    one program per row ranks up to ``single`` candidates, so the candidates are cut into tiles again until
    at most ``SINGLE_FEW`` remain (8 rows × 65,536 columns, MTP2: 16 programs ranking 16,384 candidates
    each, otherwise). The selection is the same: a top-k is a subset of its tiles' top-k at every level.
    ``few`` = (FEW_ROWS, SINGLE_FEW), the module's values unless given."""
    single, tile = min(single, MAX_TILE), min(tile, MAX_TILE)
    few_rows, single_few = (FEW_ROWS, SINGLE_FEW) if few is None else few
    last = min(single, single_few) if rows is not None and rows < few_rows else single
    levels = []
    w = width
    while w > single or (levels and w > last):
        if 2 * k > tile:  # a level would not shrink the row
            return None if w > single else levels + [(max(16, triton.next_power_of_2(w)), 1)]
        n = triton.cdiv(w, tile)
        levels.append((tile, n))
        w = n * k
    levels.append((max(16, triton.next_power_of_2(w)), 1))
    return levels


@functools.lru_cache(maxsize=512)
def _steps(
    rows: int, width: int, k: int, chunk: int, radix_above: int, single: int, tile: int, few: tuple[int, int],
    warps: object,
) -> tuple:
    """The launches of ``topk_columns`` for one shape, computed once: ("bitwise", config) or
    ("radix", ((block, tiles, width in, config), ...)). The tunables (``warps``: the ``_warps`` rule) are
    arguments so that a test's or benchmark's monkeypatched one is a new cache entry, not a stale plan."""
    plan = _plan(width, k, single, tile, rows, few) if width > radix_above else None
    if plan is None:
        c = min(chunk, max(16, triton.next_power_of_2(max(width, k))))
        return ("bitwise", _BITWISE.config(
            dict(K=k, CHUNK=c, RESIDENT=width <= c, N_CHUNKS=triton.cdiv(width, c)), dict(num_warps=warps(c))))
    levels, w = [], width
    for i, (block, n) in enumerate(plan):
        cfg = _RADIX.config(
            dict(K=k, BLOCK=block, FROM_LOGITS=i == 0, WRITE_KEYS=i < len(plan) - 1,
                 PAD_CHUNKS=triton.cdiv(k, block)),
            dict(num_warps=warps(block)))
        levels.append((block, n, w, cfg))
        w = n * k
    return ("radix", tuple(levels))


def _radix_topk(
    logits: torch.Tensor, visible: torch.Tensor, k: int, out: torch.Tensor, single: int, tile: int
) -> bool:
    """The radix path into ``out``; False (nothing launched) where it does not apply."""
    rows, width = logits.shape
    if _plan(width, k, single, tile, rows) is None:
        return False
    _run_radix(_steps(rows, width, k, CHUNK, -1, single, tile, (FEW_ROWS, SINGLE_FEW), _warps)[1], logits, visible, out)
    return True


def _run_radix(levels: tuple, logits: torch.Tensor, visible: torch.Tensor, out: torch.Tensor) -> None:
    rows = logits.shape[0]
    k = out.shape[1]
    # One allocation holds every intermediate level's candidates: columns, then keys (int32 both).
    sizes = [n * k for _, n, _, _ in levels[:-1]]
    scratch = torch.empty(rows, 2 * sum(sizes), dtype=torch.int32, device=logits.device) if sizes else None
    src, cols, at = logits, logits, 0  # cols: unused on the first level
    for i, (_, n, w, cfg) in enumerate(levels):
        if i == len(levels) - 1:
            dst, dst_keys = out, out  # dst_keys unused
        else:
            dst = scratch[:, at : at + sizes[i]]
            dst_keys = scratch[:, at + sizes[i] : at + 2 * sizes[i]]
            at += 2 * sizes[i]
        _RADIX((rows, n), (src, cols, visible, dst, dst_keys, src.stride(0), dst.stride(0), w), cfg)
        src, cols = dst_keys, dst


def _bitwise_topk(logits: torch.Tensor, visible: torch.Tensor, k: int, out: torch.Tensor) -> None:
    rows, width = logits.shape
    cfg = _steps(rows, width, k, CHUNK, width, SINGLE, TILE, (FEW_ROWS, SINGLE_FEW), _warps)[1]
    _BITWISE((rows,), (logits, visible, out, logits.stride(0), out.stride(0), width), cfg)


def topk_columns(
    logits: torch.Tensor, visible: torch.Tensor, k: int, *, out: torch.Tensor | None = None
) -> torch.Tensor:
    """int32 [rows, k]: the ``k`` best of columns ``[0, visible[r])`` of each row of fp32 ``logits``, in
    ascending column order, ``-1``-padded; no host synchronization. ``visible`` is read clamped to
    ``[0, logits.shape[1]]`` (an unvalidated count never reads outside the row). Callers checked the
    arguments (``visible`` contiguous int; ``out`` int32 [rows, k] with unit column stride, e.g. a row slice
    of the caller's result)."""
    rows, width = logits.shape
    if out is None:
        out = torch.empty(rows, k, dtype=torch.int32, device=logits.device)
    if rows == 0:
        return out
    kind, how = _steps(rows, width, k, CHUNK, RADIX_ABOVE, SINGLE, TILE, (FEW_ROWS, SINGLE_FEW), _warps)
    if kind == "radix":
        _run_radix(how, logits, visible, out)
    else:
        _bitwise_topk(logits, visible, k, out)
    return out


_BITWISE = Launcher(_bitwise_topk_kernel)
_RADIX = Launcher(_radix_topk_kernel)
