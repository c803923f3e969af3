"""Paged indexer logits: ``logits[r, c] = Σ_h relu(k_c · q_{r,h})`` (fp32) for ``c < visible[r]``.

One program scores one query row against ``BLOCK_N`` compressed columns: it gathers the keys through the
row's page table, computes ``K [BLOCK_N, D] · Q_rᵀ [D, H]`` with one ``tl.dot`` (fp8 × fp8 directly on the
FP8 path, bf16 × bf16 otherwise, fp32 accumulate), applies ReLU and sums over heads. Columns at or past
``visible[r]`` are written as ``-inf`` so a plain ``topk`` never picks them.

``tl.dot`` needs every tile dim >= 16 (32 for fp8 K on Hopper), so heads and head_dim are zero-padded
through load masks; a zero head contributes ``relu(0) = 0``.

Unvalidated metadata (``validate=False``, the default) never makes the kernel read or write outside its
tensors: a row whose ``row_req`` is outside the page table sees nothing, visible counts are clamped to
``[0, page-table capacity]``, and a page whose block id is outside ``[0, num_blocks)`` is not read (its
columns score ``-inf``). Valid metadata is unaffected.

Decode (:func:`decode_logits`, request-major rows): one program scores ``TILES`` consecutive
``BLOCK_N``-column tiles of one request against all its ``L`` (MTP) rows, reading each key once for the
``L`` rows, in a loop the compiler software-pipelines (``num_stages``): the next tiles' page-table and key
loads are in flight while the current tile is multiplied. With one row per request (``L = 1``) its queries
are loaded once per program, before the loop (Triton 3.6 left them in the loop: a second async copy per
tile, 8 KiB beside the tile's 16 KiB of FP8 keys). Why: with one tile per program (the layout until
2026-12-04) every program waited on a dependent pair of loads (page id, then keys) before its one MMA, and
the FP8 kernel moved its bytes at about half the copy bandwidth (docs/performance.md, "QSA"). Each tile's
product is the same ``[BLOCK_N, D] x [D, H]`` ``tl.dot`` and ReLU head sum as in the paged kernel, so the
logits are the same bits for any ``TILES``.

The operands are the same on every lane. On the Triton interpreter a bf16 ``tl.dot`` is right only with
the harness's ``tl.dot`` shim (``harness.interp.dots``, on by default in its pytest plugin): the
interpreter's own ``tl.dot`` multiplies the raw bf16 bit patterns.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from kernels._launch import Launcher
from kernels.qsa import _checks
from kernels.qsa.cache import IndexerKVCache

__all__ = ["paged_logits", "decode_logits", "LogitsTile", "TILES", "DECODE_TILES", "DECODE_TILES_PER_PROGRAM",
           "tiles_per_program"]


def _pow2(name: str, v: object, lo: int, hi: int) -> None:
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi or v & (v - 1):
        raise ValueError(f"LogitsTile.{name} must be a power of two in [{lo}, {hi}], got {v!r}")


@dataclass(frozen=True)
class LogitsTile:
    """Launch shape of the logits kernel: ``block_n`` compressed columns per program (the ``tl.dot`` M dim,
    so a power of two >= 32: the fp8 MMA needs 32), ``num_warps`` and ``num_stages``."""

    block_n: int
    num_warps: int
    num_stages: int = 2

    def __post_init__(self) -> None:
        _pow2("block_n", self.block_n, 32, 1024)
        _pow2("num_warps", self.num_warps, 1, 16)
        if isinstance(self.num_stages, bool) or not isinstance(self.num_stages, int) or self.num_stages < 1:
            raise ValueError(f"LogitsTile.num_stages must be an int >= 1, got {self.num_stages!r}")


#: Column tile and warps per cache dtype. FP8 keys are half the bytes, so twice the columns fill the same
#: shared memory, and the fp8 MMA wants a longer M (measured on the H200 2026-12-02 over 32..128 × 4/8 warps).
TILES: dict[torch.dtype, LogitsTile] = {
    torch.bfloat16: LogitsTile(block_n=64, num_warps=4),
    torch.float8_e4m3fn: LogitsTile(block_n=128, num_warps=8),
}


@triton.jit
def _gather_keys(kv_ptr, bt_row, cols, valid, d, d_ok, stride_kvb, stride_kvp, num_blocks, PAGE: tl.constexpr):
    # (the [BLOCK_N, D_PAD] key tile of columns ``cols`` of page-table row ``bt_row``, which columns were
    # read): masked loads touch no memory where ``valid`` is False or the page's block id is outside the cache.
    # harness: equivalent-mutant(other): a lane off in valid stays off in ok, whatever block id it reads
    blk = tl.load(bt_row + cols // PAGE, mask=valid, other=0).to(tl.int64)
    ok = valid & (blk >= 0) & (blk < num_blocks)
    k = tl.load(
        kv_ptr + blk[:, None] * stride_kvb + (cols % PAGE)[:, None] * stride_kvp + d[None, :],
        mask=ok[:, None] & d_ok[None, :],
        # harness: equivalent-mutant(other): a column off in ok is -inf in every caller's tl.where(.. ok ..);
        # a d past D meets the query's 0 there (_queries' other=)
        other=0.0,
    )
    return k, ok


@triton.jit
def _queries(q_row, h, d, d_ok, H, stride_qh):
    # the [H_PAD, D_PAD] queries of one row, zero-padded (a zero head contributes relu(0) = 0)
    return tl.load(q_row + h[:, None] * stride_qh + d[None, :], mask=(h[:, None] < H) & d_ok[None, :], other=0.0)


@triton.jit
def _relu_head_sum(k, q):
    # Σ_h relu(k · q_h) for every column of the key tile: one [BLOCK_N, D] x [D, H] MMA, fp32 accumulation.
    s = tl.dot(k, tl.trans(q), out_dtype=tl.float32)
    return tl.sum(tl.maximum(s, 0.0), axis=1)


@triton.jit
def _paged_logits_kernel(
    q_ptr,
    kv_ptr,
    bt_ptr,
    row_req_ptr,
    vis_ptr,
    out_ptr,
    stride_qr,
    stride_qh,
    stride_kvb,
    stride_kvp,
    stride_btb,
    stride_or,
    n_cols,
    n_req,
    cap,
    num_blocks,
    H,
    D,
    H_PAD: tl.constexpr,
    D_PAD: tl.constexpr,
    PAGE: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    r = tl.program_id(0).to(tl.int64)
    start = tl.program_id(1) * BLOCK_N
    cols = start + tl.arange(0, BLOCK_N)
    req = tl.load(row_req_ptr + r).to(tl.int64)
    vis = tl.minimum(tl.maximum(tl.load(vis_ptr + r).to(tl.int32), 0), cap)
    vis = tl.where((req >= 0) & (req < n_req), vis, 0)  # a row outside the page table sees nothing
    valid = cols < vis
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    if start < vis:
        h = tl.arange(0, H_PAD)
        d = tl.arange(0, D_PAD)
        d_ok = d < D
        k, valid = _gather_keys(kv_ptr, bt_ptr + req * stride_btb, cols, valid, d, d_ok, stride_kvb, stride_kvp,
                                num_blocks, PAGE)
        acc = _relu_head_sum(k, _queries(q_ptr + r * stride_qr, h, d, d_ok, H, stride_qh))
    out = tl.where(valid, acc, float("-inf"))
    tl.store(out_ptr + r * stride_or + cols, out, mask=cols < n_cols)


def _check_rows(
    cache: IndexerKVCache,
    q: object,
    block_table: object,
    row_req: object,
    visible: object,
    validate: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(block_table, row_req, visible) checked and contiguous; bounds only when ``validate`` (a sync)."""
    if not isinstance(cache, IndexerKVCache):
        raise TypeError(f"cache must be an IndexerKVCache, got {type(cache).__name__}")
    _checks.flag("validate", validate)
    cache.check_query(q)
    dev = cache.device
    bt = _checks.int_tensor("block_table", block_table, dim=2, device=dev)
    row_req = _checks.int_tensor("row_req", row_req, dim=1, device=dev)
    visible = _checks.int_tensor("visible_blocks", visible, dim=1, device=dev)
    rows = q.shape[0]
    if row_req.shape[0] != rows or visible.shape[0] != rows:
        raise ValueError(
            f"row_req and visible_blocks must have one entry per query row ({rows}), got "
            f"{row_req.shape[0]} and {visible.shape[0]}"
        )
    if validate and rows:
        _checks.row_req_within(row_req, bt.shape[0])
        _checks.visible_within(visible, bt, row_req, page_size=cache.page_size, num_blocks=cache.num_blocks)
    return bt, row_req, visible


def _out(out: object, rows: int, n_cols: int, device: torch.device) -> torch.Tensor:
    if out is None:
        return torch.empty(rows, n_cols, dtype=torch.float32, device=device)
    out = _checks.tensor("out", out, dim=2, dtypes=(torch.float32,), device=device)
    if out.shape != (rows, n_cols) or out.stride(1) != 1:
        raise ValueError(
            f"out must be a float32 [{rows}, {n_cols}] tensor contiguous in columns, "
            f"got {tuple(out.shape)} strides {out.stride()}"
        )
    return _checks.writable("out", out)


def _launch_args(cache: IndexerKVCache, q: torch.Tensor, tile: object) -> tuple[LogitsTile, tuple]:
    tile = TILES[cache.dtype] if tile is None else tile
    if not isinstance(tile, LogitsTile):
        raise TypeError(f"tile must be a LogitsTile or None, got {type(tile).__name__}")
    return tile, _paged_config(cache.dtype, q.shape[1], q.shape[2], cache.page_size, tile)


@functools.lru_cache(maxsize=256)
def _paged_config(dtype: torch.dtype, h: int, d: int, page: int, tile: LogitsTile) -> tuple:
    return _PAGED.config(
        dict(H_PAD=max(16, triton.next_power_of_2(h)), D_PAD=max(_min_dim(dtype), triton.next_power_of_2(d)),
             PAGE=page, BLOCK_N=tile.block_n),
        dict(num_warps=tile.num_warps, num_stages=tile.num_stages),
    )


def _min_dim(dtype: torch.dtype) -> int:
    return 32 if dtype == torch.float8_e4m3fn else 16  # the fp8 MMA's K is 32


def paged_logits(
    cache: IndexerKVCache,
    q: torch.Tensor,
    block_table: torch.Tensor,
    row_req: torch.Tensor,
    visible_blocks: torch.Tensor,
    *,
    n_cols: int | None = None,
    out: torch.Tensor | None = None,
    tile: LogitsTile | None = None,
    validate: bool = False,
) -> torch.Tensor:
    """fp32 logits [rows, n_cols] of query rows ``q`` [rows, H, D] against the paged compressed cache.

    ``row_req[r]`` picks the page-table row (request) of query row ``r``; ``visible_blocks[r]`` how many of
    that request's compressed columns row ``r`` may see. ``n_cols`` defaults to ``max(visible_blocks)``,
    which reads the device (a host sync): pass it for a sync-free call. ``validate=True`` (opt-in, a host
    sync) checks the metadata's values and raises on the first bad
    entry; unvalidated, bad values are clamped on the device (module docstring).
    """
    bt, row_req, visible = _check_rows(cache, q, block_table, row_req, visible_blocks, validate)
    rows = q.shape[0]
    if n_cols is None:
        n_cols = max(0, int(visible.max())) if rows else 0
    _checks.count("n_cols", n_cols, minimum=0)
    if validate and rows and int(visible.max()) > n_cols:
        raise ValueError(
            f"n_cols ({n_cols}) must be >= max(visible_blocks) ({int(visible.max())}): visible columns would "
            "be dropped"
        )
    out = _out(out, rows, n_cols, cache.device)
    tile, launch = _launch_args(cache, q, tile)
    if rows == 0 or n_cols == 0:
        return out
    if q.stride(2) != 1:
        q = q.contiguous()
    kv = cache.kv
    grid = (rows, -(-n_cols // tile.block_n))
    _PAGED(
        grid,
        (q, kv, bt, row_req, visible, out, q.stride(0), q.stride(1), kv.stride(0), kv.stride(1), bt.stride(0),
         out.stride(0), n_cols, bt.shape[0], bt.shape[1] * cache.page_size, cache.num_blocks, q.shape[1],
         q.shape[2]),
        launch,
    )
    return out


#: Column tile, warps and pipeline depth of the decode kernel per cache dtype (``block_n`` and the warps as
#: the paged kernel's TILES, which the H200 sweep of 2026-12-02 chose; ``num_stages`` is the loop's: 3 was at
#: least as fast as 1 at every shape with several tiles per program, measured as below).
DECODE_TILES: dict[torch.dtype, LogitsTile] = {
    torch.bfloat16: LogitsTile(block_n=64, num_warps=4, num_stages=3),
    torch.float8_e4m3fn: LogitsTile(block_n=128, num_warps=8, num_stages=3),
}

#: Tiles per decode program per cache dtype, for 1, 2 and >= 3 MTP rows (a compile-time loop bound). Measured
#: on the H200 2026-12-04 (Triton 3.6, benchmarks/qsa_breakdown.py, graph replay of the logits alone, the
#: six decode shapes of bench_qsa.py, 1/2/4/8 tiles × 1/3 stages, every candidate bit-identical): BF16 gains
#: 11-17% with 8 tiles at MTP1 (64×32k: 68.2 -> 56.6 us), ties at MTP2, and loses 35% at MTP4 (124 -> 167 us:
#: 1 tile kept, also for the unmeasured MTP3); FP8 is within 3% of its best candidate with 4 tiles at every
#: shape, and within 2% of one tile per program (its logits were not sped up by the loop).
DECODE_TILES_PER_PROGRAM: dict[torch.dtype, tuple[int, int, int]] = {
    torch.bfloat16: (8, 8, 1),
    torch.float8_e4m3fn: (4, 4, 4),
}


@triton.jit
def _decode_logits_kernel(
    q_ptr,
    kv_ptr,
    bt_ptr,
    vis_ptr,
    out_ptr,
    stride_qr,
    stride_qh,
    stride_kvb,
    stride_kvp,
    stride_btb,
    stride_or,
    n_cols,
    cap,
    num_blocks,
    H,
    D,
    H_PAD: tl.constexpr,
    D_PAD: tl.constexpr,
    PAGE: tl.constexpr,
    BLOCK_N: tl.constexpr,
    L: tl.constexpr,
    TILES: tl.constexpr,
):
    # L and TILES are compile-time: the Triton 3.6 interpreter cannot loop to a runtime int.
    b = tl.program_id(0).to(tl.int64)
    first = tl.program_id(1) * (TILES * BLOCK_N)
    lim = tl.minimum(n_cols, cap)
    vmax = tl.zeros([], dtype=tl.int32)
    for j in tl.static_range(L):
        vmax = tl.maximum(vmax, tl.minimum(tl.maximum(tl.load(vis_ptr + b * L + j).to(tl.int32), 0), lim))
    h = tl.arange(0, H_PAD)
    d = tl.arange(0, D_PAD)
    d_ok = d < D
    bt_row = bt_ptr + b * stride_btb
    if L == 1:  # the row's queries, loaded once for all its tiles (not once per tile, inside the loop)
        q1 = _queries(q_ptr + b * stride_qr, h, d, d_ok, H, stride_qh)
    for t in tl.range(0, TILES):
        cols = first + t * BLOCK_N + tl.arange(0, BLOCK_N)
        kvalid = cols < vmax  # all False past the widest row: the masked loads touch no memory
        k, ok = _gather_keys(kv_ptr, bt_row, cols, kvalid, d, d_ok, stride_kvb, stride_kvp, num_blocks, PAGE)
        if L == 1:
            acc = _relu_head_sum(k, q1)
            out = tl.where(kvalid & ok, acc, float("-inf"))  # vmax is the row's own visible count
            tl.store(out_ptr + b * stride_or + cols, out, mask=cols < n_cols)
        else:
            for j in tl.static_range(L):
                r = b * L + j
                # harness: equivalent-mutant(clamp): ok holds only where cols < vmax <= lim, so a vis past lim admits
                # no more columns
                vis = tl.minimum(tl.maximum(tl.load(vis_ptr + r).to(tl.int32), 0), lim)
                acc = _relu_head_sum(k, _queries(q_ptr + r * stride_qr, h, d, d_ok, H, stride_qh))
                out = tl.where((cols < vis) & ok, acc, float("-inf"))
                tl.store(out_ptr + r * stride_or + cols, out, mask=cols < n_cols)


def tiles_per_program(dtype: torch.dtype, mtp: int, n_tiles: int) -> int:
    """Tiles per decode program: DECODE_TILES_PER_PROGRAM's, but no more than a request's row needs."""
    return _tiles(DECODE_TILES_PER_PROGRAM[dtype], mtp, n_tiles)


def _tiles(per_mtp: tuple[int, int, int], mtp: int, n_tiles: int) -> int:
    return min(per_mtp[min(mtp, 3) - 1], triton.next_power_of_2(n_tiles))


@functools.lru_cache(maxsize=256)
def _launch_config(
    dtype: torch.dtype, h: int, d: int, page: int, mtp: int, requests: int, n_cols: int, tile: LogitsTile,
    per_mtp: tuple[int, int, int],
) -> tuple[tuple[int, int], tuple]:
    # Everything a launch needs that depends on shapes only, once per shape (Triton's cdiv and
    # next_power_of_2 alone cost microseconds per call on the host).
    n_tiles = triton.cdiv(n_cols, tile.block_n)
    tiles = _tiles(per_mtp, mtp, n_tiles)
    constexprs = dict(
        H_PAD=max(16, triton.next_power_of_2(h)),
        D_PAD=max(_min_dim(dtype), triton.next_power_of_2(d)),
        PAGE=page,
        BLOCK_N=tile.block_n,
        L=mtp,
        TILES=tiles,
    )
    options = dict(num_warps=tile.num_warps, num_stages=tile.num_stages)
    return (requests, triton.cdiv(n_tiles, tiles)), _DECODE.config(constexprs, options)


def decode_logits(
    cache: IndexerKVCache,
    q: torch.Tensor,
    block_table: torch.Tensor,
    visible_blocks: torch.Tensor,
    *,
    decode_query_len: int,
    n_cols: int,
    out: torch.Tensor | None = None,
    tile: LogitsTile | None = None,
) -> torch.Tensor:
    """fp32 logits [B * decode_query_len, n_cols] of a request-major decode batch (row ``r`` belongs to
    request ``r // decode_query_len``); the bits of :func:`paged_logits` for valid metadata.

    Internal: the caller (``decode_select``) checked shapes, dtypes and devices; nothing here synchronizes
    with the host, and bad metadata is clamped on the device (module docstring).
    """
    rows = q.shape[0]
    out = _out(out, rows, n_cols, cache.device)
    tile = DECODE_TILES[cache.dtype] if tile is None else tile
    if not isinstance(tile, LogitsTile):
        raise TypeError(f"tile must be a LogitsTile or None, got {type(tile).__name__}")
    if rows == 0 or n_cols == 0:
        return out
    if q.stride(2) != 1:
        q = q.contiguous()
    kv = cache.kv
    grid, config = _launch_config(
        kv.dtype, q.shape[1], q.shape[2], kv.shape[1], decode_query_len, block_table.shape[0], n_cols, tile,
        DECODE_TILES_PER_PROGRAM[kv.dtype],
    )
    _DECODE(
        grid,
        (q, kv, block_table, visible_blocks, out, q.stride(0), q.stride(1), kv.stride(0), kv.stride(1),
         block_table.stride(0), out.stride(0), n_cols, block_table.shape[1] * kv.shape[1], kv.shape[0],
         q.shape[1], q.shape[2]),
        config,
    )
    return out


_DECODE = Launcher(_decode_logits_kernel)
_PAGED = Launcher(_paged_logits_kernel)
