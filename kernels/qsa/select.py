"""Block selection: the ``token_topk // compress_ratio`` best compressed columns per query row.

Both paths are a logits kernel followed by the Triton top-k (kernels.qsa.topk): decode (request-major,
``decode_query_len`` rows per request for MTP; each key is read once for all rows of its request) and
prefill (packed rows by ``query_start_loc``, chunked over rows so the fp32 logits never exceed
``chunk_rows × page-table capacity``). Rows that see fewer than ``k`` columns are ``-1``-padded at the
end. Indices are logical compressed-column numbers within the request, int32, in ascending column order.

No host round trip by default: logits are as wide as the page table (a shape known on the host, not
``max(visible)``), launch configurations are computed once per shape, and bad metadata cannot make a
kernel read or write outside its tensors (visible counts are clamped on the device, pages with a block id
outside the cache score ``-inf``), so each call is CUDA-graph capturable. ``validate=True`` (opt-in, for
debugging: it reads the metadata on the host, a sync) raises on bad metadata with the offending entry
named: checking by default would cost every call a host round trip and make it uncapturable.
"""

from __future__ import annotations

import torch

from kernels.qsa import _checks
from kernels.qsa.cache import IndexerKVCache
from kernels.qsa.logits import LogitsTile, decode_logits, paged_logits
from kernels.qsa.topk import topk_columns

__all__ = ["decode_select", "prefill_select", "decode_row_req", "prefill_row_req", "DEFAULT_CHUNK_ROWS"]

#: Rows per prefill chunk: 4096 rows × 8192 columns × 4 B = 128 MiB of logits at most.
DEFAULT_CHUNK_ROWS = 4096


def decode_row_req(num_requests: int, decode_query_len: int, device: torch.device | str) -> torch.Tensor:
    """Request of each decode row: rows are request-major, ``decode_query_len`` per request."""
    _checks.count("num_requests", num_requests, minimum=0)
    _checks.count("decode_query_len", decode_query_len, minimum=1)
    return torch.arange(num_requests, device=device, dtype=torch.int32).repeat_interleave(decode_query_len)


def prefill_row_req(query_start_loc: torch.Tensor, rows: int, *, validate: bool = False) -> torch.Tensor:
    """Request of each packed prefill row, from ``query_start_loc`` [B + 1]: starts at 0, non-decreasing,
    ends at ``rows`` (checked with ``validate=True``, a host sync; the result has ``rows`` entries without
    one). Unvalidated, a row outside every request gets ``B`` (past the page table), which the logits
    kernel reads as a row that sees nothing."""
    _checks.count("rows", rows, minimum=0)
    _checks.flag("validate", validate)
    if not isinstance(query_start_loc, torch.Tensor):
        raise TypeError(f"query_start_loc must be a torch.Tensor, got {type(query_start_loc).__name__}")
    qsl = _checks.int_tensor("query_start_loc", query_start_loc, dim=1, device=query_start_loc.device)
    if qsl.shape[0] < 1:
        raise ValueError("query_start_loc must have B + 1 >= 1 entries, got 0")
    lens = qsl[1:] - qsl[:-1]
    if validate:
        first, last = int(qsl[0]), int(qsl[-1])
        if first != 0 or last != rows:
            raise ValueError(
                f"query_start_loc must start at 0 and end at the number of query rows ({rows}), "
                f"got {first} … {last}"
            )
        if lens.numel() and int(lens.min()) < 0:
            i = int(torch.argmin(lens))
            raise ValueError(
                f"query_start_loc must be non-decreasing, got query_start_loc[{i}] = {int(qsl[i])} > "
                f"query_start_loc[{i + 1}] = {int(qsl[i + 1])}"
            )
    # Row r belongs to the request whose span holds it: the number of spans ending at or before r (a search,
    # not repeat_interleave: that needs lens >= 0 summing to rows, which only validation guarantees).
    r = torch.arange(rows, device=qsl.device, dtype=qsl.dtype)
    return torch.searchsorted(qsl[1:], r, right=True, out_int32=True)


def decode_select(
    cache: IndexerKVCache,
    q: torch.Tensor,
    block_table: torch.Tensor,
    visible_blocks: torch.Tensor,
    *,
    decode_query_len: int,
    topk_blocks: int,
    validate: bool = False,
    tile: LogitsTile | None = None,
) -> torch.Tensor:
    """Selected blocks [B * decode_query_len, topk_blocks] for a request-major decode batch.

    ``q`` [B * L, H, D] must already be normalized to the cache dtype; ``visible_blocks`` [B * L] is per row
    (the MTP rows of one request see different prefixes). Shapes, dtypes and devices are always checked;
    the call never synchronizes with the host and can be captured in a CUDA graph. ``validate=True``
    (opt-in, a host sync) also checks the metadata's values and raises
    on the first bad entry; unvalidated, bad values are clamped on the device (module docstring).
    """
    if not isinstance(cache, IndexerKVCache):
        raise TypeError(f"cache must be an IndexerKVCache, got {type(cache).__name__}")
    k = _checks.count("topk_blocks", topk_blocks, minimum=1)
    mtp = _checks.count("decode_query_len", decode_query_len, minimum=1)
    _checks.flag("validate", validate)
    cache.check_query(q)
    bt = _checks.int_tensor("block_table", block_table, dim=2, device=cache.device)
    vis = _checks.int_tensor("visible_blocks", visible_blocks, dim=1, device=cache.device)
    b = bt.shape[0]
    if q.shape[0] != b * mtp:
        raise ValueError(
            f"q must have block_table rows × decode_query_len = {b} × {mtp} = {b * mtp} rows, got {q.shape[0]}"
        )
    if vis.shape[0] != q.shape[0]:
        raise ValueError(f"visible_blocks must have one entry per query row ({q.shape[0]}), got {vis.shape[0]}")
    if validate and b:
        row_req = decode_row_req(b, mtp, cache.device)
        _checks.visible_within(vis, bt, row_req, page_size=cache.page_size, num_blocks=cache.num_blocks)
    n_cols = bt.shape[1] * cache.page_size
    logits = decode_logits(cache, q, bt, vis, decode_query_len=mtp, n_cols=n_cols, tile=tile)
    return topk_columns(logits, vis, k)


def prefill_select(
    cache: IndexerKVCache,
    q: torch.Tensor,
    block_table: torch.Tensor,
    query_start_loc: torch.Tensor,
    visible_blocks: torch.Tensor,
    *,
    topk_blocks: int,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    validate: bool = False,
    tile: LogitsTile | None = None,
) -> torch.Tensor:
    """Selected blocks [rows, topk_blocks] for packed prefill rows (request ``b`` owns rows
    ``query_start_loc[b]:query_start_loc[b + 1]``), computed ``chunk_rows`` rows at a time. No host sync
    unless ``validate=True`` (as :func:`decode_select`)."""
    if not isinstance(cache, IndexerKVCache):
        raise TypeError(f"cache must be an IndexerKVCache, got {type(cache).__name__}")
    k = _checks.count("topk_blocks", topk_blocks, minimum=1)
    _checks.count("chunk_rows", chunk_rows, minimum=1)
    _checks.flag("validate", validate)
    cache.check_query(q)
    bt = _checks.int_tensor("block_table", block_table, dim=2, device=cache.device)
    qsl = _checks.int_tensor("query_start_loc", query_start_loc, dim=1, device=cache.device)
    if qsl.shape[0] != bt.shape[0] + 1:
        raise ValueError(
            f"query_start_loc must have block_table rows + 1 = {bt.shape[0] + 1} entries, got {qsl.shape[0]}"
        )
    rows = q.shape[0]
    row_req = prefill_row_req(qsl, rows, validate=validate)
    vis = _checks.int_tensor("visible_blocks", visible_blocks, dim=1, device=cache.device)
    if vis.shape[0] != rows:
        raise ValueError(f"visible_blocks must have one entry per query row ({rows}), got {vis.shape[0]}")
    if validate and rows:
        _checks.visible_within(vis, bt, row_req, page_size=cache.page_size, num_blocks=cache.num_blocks)
    n_cols = bt.shape[1] * cache.page_size
    out = torch.empty((rows, k), dtype=torch.int32, device=cache.device)
    logits = None
    for r0 in range(0, rows, chunk_rows):
        r1 = min(rows, r0 + chunk_rows)
        if logits is None or logits.shape[0] != r1 - r0:
            logits = torch.empty(r1 - r0, n_cols, dtype=torch.float32, device=cache.device)
        v = vis[r0:r1]
        paged_logits(cache, q[r0:r1], bt, row_req[r0:r1], v, n_cols=n_cols, out=logits, tile=tile, validate=False)
        topk_columns(logits, v, k, out=out[r0:r1])
    return out
