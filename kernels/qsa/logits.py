"""Paged indexer logits: ``logits[r, c] = Σ_h relu(k_c · q_{r,h})`` (fp32) for ``c < visible[r]``.

One program scores one query row against ``BLOCK_N`` compressed columns: it gathers the keys through the
row's page table, computes ``K [BLOCK_N, D] · Q_rᵀ [D, H]`` with one ``tl.dot`` (fp8 × fp8 directly on the
FP8 path, bf16 × bf16 otherwise, fp32 accumulate), applies ReLU and sums over heads. Columns at or past
``visible[r]`` are written as ``-inf`` so a plain ``topk`` never picks them.

``tl.dot`` needs every tile dim >= 16 (32 for fp8 K on Hopper), so heads and head_dim are zero-padded
through load masks; a zero head contributes ``relu(0) = 0``.

The operands are the same on every lane. On the Triton interpreter a bf16 ``tl.dot`` is right only with
the harness's ``tl.dot`` shim (``harness.interp.dots``, on by default in its pytest plugin): the
interpreter's own ``tl.dot`` multiplies the raw bf16 bit patterns.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from kernels.qsa import _checks
from kernels.qsa.cache import IndexerKVCache

__all__ = ["paged_logits", "decode_logits", "LogitsTile", "TILES"]


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
def _gather_keys(kv_ptr, bt_row, cols, valid, d, d_ok, stride_kvb, stride_kvp, PAGE: tl.constexpr):
    # The [BLOCK_N, D_PAD] key tile of columns ``cols`` of page-table row ``bt_row`` (masked loads touch no
    # memory where ``valid`` is False).
    blk = tl.load(bt_row + cols // PAGE, mask=valid, other=0).to(tl.int64)
    k = tl.load(
        kv_ptr + blk[:, None] * stride_kvb + (cols % PAGE)[:, None] * stride_kvp + d[None, :],
        mask=valid[:, None] & d_ok[None, :],
        other=0.0,
    )
    return k


@triton.jit
def _relu_head_sum(k, q_row, h, d, d_ok, H, stride_qh):
    # Σ_h relu(k · q_h) for every column of the key tile: one [BLOCK_N, D] x [D, H] MMA, fp32 accumulation.
    q = tl.load(q_row + h[:, None] * stride_qh + d[None, :], mask=(h[:, None] < H) & d_ok[None, :], other=0.0)
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
    vis = tl.load(vis_ptr + r)
    valid = cols < vis
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    if start < vis:
        req = tl.load(row_req_ptr + r).to(tl.int64)
        h = tl.arange(0, H_PAD)
        d = tl.arange(0, D_PAD)
        d_ok = d < D
        k = _gather_keys(kv_ptr, bt_ptr + req * stride_btb, cols, valid, d, d_ok, stride_kvb, stride_kvp, PAGE)
        acc = _relu_head_sum(k, q_ptr + r * stride_qr, h, d, d_ok, H, stride_qh)
    out = tl.where(valid, acc, float("-inf"))
    tl.store(out_ptr + r * stride_or + cols, out, mask=cols < n_cols)


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
    H,
    D,
    H_PAD: tl.constexpr,
    D_PAD: tl.constexpr,
    PAGE: tl.constexpr,
    BLOCK_N: tl.constexpr,
    L: tl.constexpr,
):
    # One program: request b's BLOCK_N columns against all L (MTP) rows of b. The key tile is gathered once
    # (masked to the widest row) and reused for every row; each row's dot is the same [BLOCK_N, D] x [D, H]
    # product as in _paged_logits_kernel, so the logits are the same bits.
    b = tl.program_id(0).to(tl.int64)
    start = tl.program_id(1) * BLOCK_N
    cols = start + tl.arange(0, BLOCK_N)
    vmax = tl.load(vis_ptr + b * L)
    for j in tl.static_range(1, L):  # L constexpr: the Triton 3.6 interpreter cannot loop to an int arg
        vmax = tl.maximum(vmax, tl.load(vis_ptr + b * L + j))
    h = tl.arange(0, H_PAD)
    d = tl.arange(0, D_PAD)
    d_ok = d < D
    kvalid = cols < vmax  # all False past the widest row: the masked loads touch no memory
    k = _gather_keys(kv_ptr, bt_ptr + b * stride_btb, cols, kvalid, d, d_ok, stride_kvb, stride_kvp, PAGE)
    for j in tl.static_range(L):
        r = b * L + j
        vis = tl.load(vis_ptr + r)
        acc = tl.zeros([BLOCK_N], dtype=tl.float32)
        if start < vis:
            acc = _relu_head_sum(k, q_ptr + r * stride_qr, h, d, d_ok, H, stride_qh)
        out = tl.where(cols < vis, acc, float("-inf"))
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


def _launch_args(cache: IndexerKVCache, q: torch.Tensor, tile: object) -> tuple[LogitsTile, dict]:
    tile = TILES[cache.dtype] if tile is None else tile
    if not isinstance(tile, LogitsTile):
        raise TypeError(f"tile must be a LogitsTile or None, got {type(tile).__name__}")
    h, d = q.shape[1], q.shape[2]
    min_dim = 32 if cache.dtype == torch.float8_e4m3fn else 16
    return tile, dict(
        H_PAD=max(16, triton.next_power_of_2(h)),
        D_PAD=max(min_dim, triton.next_power_of_2(d)),
        PAGE=cache.page_size,
        BLOCK_N=tile.block_n,
        num_warps=tile.num_warps,
        num_stages=tile.num_stages,
    )


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
    validate: bool = True,
) -> torch.Tensor:
    """fp32 logits [rows, n_cols] of query rows ``q`` [rows, H, D] against the paged compressed cache.

    ``row_req[r]`` picks the page-table row (request) of query row ``r``; ``visible_blocks[r]`` how many of
    that request's compressed columns row ``r`` may see. ``n_cols`` defaults to ``max(visible_blocks)``.
    ``validate=False`` skips the host-synchronizing bounds checks (callers that already did them).
    """
    bt, row_req, visible = _check_rows(cache, q, block_table, row_req, visible_blocks, validate)
    rows = q.shape[0]
    if n_cols is None:
        n_cols = int(visible.max()) if rows else 0
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
    grid = (rows, triton.cdiv(n_cols, tile.block_n))
    _paged_logits_kernel[grid](
        q,
        kv,
        bt,
        row_req,
        visible,
        out,
        q.stride(0),
        q.stride(1),
        kv.stride(0),
        kv.stride(1),
        bt.stride(0),
        out.stride(0),
        n_cols,
        q.shape[1],
        q.shape[2],
        **launch,
    )
    return out


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
    """:func:`paged_logits` for a request-major decode batch (row ``r`` belongs to request
    ``r // decode_query_len``), reading each key once for all MTP rows of its request.

    No checks beyond shapes and dtypes and no host synchronization: the caller (``decode_select``)
    validated ``visible_blocks`` against ``block_table`` and chose ``n_cols >= max(visible_blocks)``.
    """
    rows = q.shape[0]
    out = _out(out, rows, n_cols, cache.device)
    tile, launch = _launch_args(cache, q, tile)
    if rows == 0 or n_cols == 0:
        return out
    if q.stride(2) != 1:
        q = q.contiguous()
    kv = cache.kv
    grid = (block_table.shape[0], triton.cdiv(n_cols, tile.block_n))
    _decode_logits_kernel[grid](
        q,
        kv,
        block_table,
        visible_blocks,
        out,
        q.stride(0),
        q.stride(1),
        kv.stride(0),
        kv.stride(1),
        block_table.stride(0),
        out.stride(0),
        n_cols,
        q.shape[1],
        q.shape[2],
        L=decode_query_len,
        **launch,
    )
    return out
