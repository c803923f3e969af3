"""Block selection: the ``token_topk // compress_ratio`` best compressed columns per query row.

Both paths are the logits kernel followed by ``torch.topk``: decode (request-major, ``decode_query_len``
rows per request for MTP) and prefill (packed rows by ``query_start_loc``, chunked over rows so the fp32
logits never exceed ``chunk_rows × max_visible``). Rows that see fewer than ``k`` columns are ``-1``-padded
at the end. Indices are logical compressed-column numbers within the request, int32.
"""

from __future__ import annotations

import torch

from kernels.qsa import _checks
from kernels.qsa.cache import IndexerKVCache
from kernels.qsa.logits import paged_logits
from kernels.qsa.reference import select_from_logits

__all__ = ["decode_select", "prefill_select", "decode_row_req", "prefill_row_req", "DEFAULT_CHUNK_ROWS"]

#: Rows per prefill chunk: 4096 rows × 8192 visible columns × 4 B = 128 MiB of logits at most.
DEFAULT_CHUNK_ROWS = 4096


def _k(topk_blocks: object) -> int:
    if isinstance(topk_blocks, bool) or not isinstance(topk_blocks, int) or topk_blocks < 1:
        raise ValueError(f"topk_blocks must be an int >= 1, got {topk_blocks!r}")
    return topk_blocks


def decode_row_req(num_requests: int, decode_query_len: int, device: torch.device | str) -> torch.Tensor:
    """Request of each decode row: rows are request-major, ``decode_query_len`` per request."""
    return torch.arange(num_requests, device=device, dtype=torch.int32).repeat_interleave(decode_query_len)


def prefill_row_req(query_start_loc: torch.Tensor, rows: int) -> torch.Tensor:
    """Request of each packed prefill row, from ``query_start_loc`` [B + 1] (validated)."""
    qsl = _checks.int_tensor("query_start_loc", query_start_loc, dim=1, device=query_start_loc.device)
    if qsl.shape[0] < 1:
        raise ValueError("query_start_loc must have B + 1 >= 1 entries")
    if int(qsl[0]) != 0 or int(qsl[-1]) != rows:
        raise ValueError(
            f"query_start_loc must start at 0 and end at the number of query rows ({rows}), "
            f"got {int(qsl[0])} … {int(qsl[-1])}"
        )
    lens = qsl[1:] - qsl[:-1]
    if lens.numel() and int(lens.min()) < 0:
        raise ValueError("query_start_loc must be non-decreasing")
    b = torch.arange(lens.shape[0], device=qsl.device, dtype=torch.int32)
    return b.repeat_interleave(lens.long())


def decode_select(
    cache: IndexerKVCache,
    q: torch.Tensor,
    block_table: torch.Tensor,
    visible_blocks: torch.Tensor,
    *,
    decode_query_len: int,
    topk_blocks: int,
) -> torch.Tensor:
    """Selected blocks [B * decode_query_len, topk_blocks] for a request-major decode batch.

    ``q`` [B * L, H, D] must already be normalized to the cache dtype; ``visible_blocks`` [B * L] is per row
    (the MTP rows of one request see different prefixes).
    """
    k = _k(topk_blocks)
    cache.check_query(q)
    if isinstance(decode_query_len, bool) or not isinstance(decode_query_len, int) or decode_query_len < 1:
        raise ValueError(f"decode_query_len must be an int >= 1, got {decode_query_len!r}")
    bt = _checks.int_tensor("block_table", block_table, dim=2, device=cache.device)
    b = bt.shape[0]
    if q.shape[0] != b * decode_query_len:
        raise ValueError(
            f"q must have block_table rows × decode_query_len = {b} × {decode_query_len} = "
            f"{b * decode_query_len} rows, got {q.shape[0]}"
        )
    row_req = decode_row_req(b, decode_query_len, cache.device)
    logits = paged_logits(cache, q, bt, row_req, visible_blocks)
    return select_from_logits(logits, visible_blocks, k)


def prefill_select(
    cache: IndexerKVCache,
    q: torch.Tensor,
    block_table: torch.Tensor,
    query_start_loc: torch.Tensor,
    visible_blocks: torch.Tensor,
    *,
    topk_blocks: int,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
) -> torch.Tensor:
    """Selected blocks [rows, topk_blocks] for packed prefill rows (request ``b`` owns rows
    ``query_start_loc[b]:query_start_loc[b + 1]``), computed ``chunk_rows`` rows at a time."""
    k = _k(topk_blocks)
    if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, int) or chunk_rows < 1:
        raise ValueError(f"chunk_rows must be an int >= 1, got {chunk_rows!r}")
    cache.check_query(q)
    bt = _checks.int_tensor("block_table", block_table, dim=2, device=cache.device)
    qsl = _checks.int_tensor("query_start_loc", query_start_loc, dim=1, device=cache.device)
    if qsl.shape[0] != bt.shape[0] + 1:
        raise ValueError(
            f"query_start_loc must have block_table rows + 1 = {bt.shape[0] + 1} entries, got {qsl.shape[0]}"
        )
    rows = q.shape[0]
    row_req = prefill_row_req(qsl, rows)
    vis = _checks.int_tensor("visible_blocks", visible_blocks, dim=1, device=cache.device)
    if vis.shape[0] != rows:
        raise ValueError(f"visible_blocks must have one entry per query row ({rows}), got {vis.shape[0]}")
    if rows:
        _checks.visible_within(vis, bt, row_req, page_size=cache.page_size, num_blocks=cache.num_blocks)
    out = torch.full((rows, k), -1, dtype=torch.int32, device=cache.device)
    for r0 in range(0, rows, chunk_rows):
        r1 = min(rows, r0 + chunk_rows)
        v = vis[r0:r1]
        logits = paged_logits(cache, q[r0:r1], bt, row_req[r0:r1], v, n_cols=int(v.max()), validate=False)
        out[r0:r1] = select_from_logits(logits, v, k)
    return out
