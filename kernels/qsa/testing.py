"""Input builders for QSA tests and benchmarks: realistic structured keys/queries in a scattered paged cache.

Why structured rather than i.i.d. noise: with pure noise every column scores about the same and a top-k
comparison says little (any selection is "almost right"). Here keys follow a few per-request topic
directions that drift over the sequence, and each query row leans towards some topics, so the scores have
a real spread with a head of clearly-better columns plus a crowd of near-ties, as in a trained indexer.
Pages are handed out from a shuffled block pool so the page-table gather is exercised.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kernels.qsa.cache import IndexerKVCache, normalize_query, store_compressed_keys
from kernels.qsa.config import IndexerConfig

__all__ = ["IndexerCase", "build_case", "decode_visible", "prefill_visible"]


@dataclass
class IndexerCase:
    config: IndexerConfig
    cache: IndexerKVCache
    block_table: torch.Tensor  # int32 [B, max_pages], -1 where unused
    raw_keys: list[torch.Tensor]  # per request, bf16 [T_b, D]
    key_weight: torch.Tensor
    query_weight: torch.Tensor
    topics: list[torch.Tensor]  # per request, fp32 [n_topics, D]
    num_tokens: list[int]


def _randn(rng: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=rng, dtype=torch.float32)


def build_case(
    config: IndexerConfig,
    num_tokens: list[int],
    *,
    rng: torch.Generator,
    device: str | torch.device,
    n_topics: int = 4,
    spare_blocks: int = 1,
    fused: bool = True,
) -> IndexerCase:
    """A cache holding ``num_tokens[b] // compress_ratio`` compressed keys for each request ``b``."""
    d, page, ratio = config.head_dim, config.page_size, config.compress_ratio
    pages = [-(-(t // ratio) // page) for t in num_tokens]
    max_pages = max(1, *pages) if pages else 1
    total = sum(pages) + spare_blocks
    perm = torch.randperm(total, generator=rng).to(torch.int32)
    bt = torch.full((len(num_tokens), max_pages), -1, dtype=torch.int32)
    pos = 0
    for b, p in enumerate(pages):
        bt[b, :p] = perm[pos : pos + p]
        pos += p
    cache = IndexerKVCache.empty(config, total, device)
    key_w = (0.1 * _randn(rng, d)).to(torch.bfloat16)
    q_w = (0.1 * _randn(rng, d)).to(torch.bfloat16)
    raw, topics = [], []
    for b, t in enumerate(num_tokens):
        top = _randn(rng, n_topics, d)
        # Topic of each token drifts slowly (segments of ~4 compressed blocks), as context does.
        seg = torch.randint(0, n_topics, (t // max(1, 4 * ratio) + 1,), generator=rng)
        z = seg.repeat_interleave(max(1, 4 * ratio))[:t]
        keys = (_randn(rng, t, d) + 1.5 * top[z]).to(torch.bfloat16)
        raw.append(keys)
        topics.append(top)
        g = t // ratio
        cols = torch.arange(g)
        slots = (bt[b, cols // page].long() * page + cols % page).to(torch.int32)
        store_compressed_keys(cache, keys.to(device), slots.to(device), key_w.to(device), fused=fused)
    return IndexerCase(
        config, cache, bt.to(device), raw, key_w.to(device), q_w.to(device), topics, list(num_tokens)
    )


def queries(
    case: IndexerCase, row_req: torch.Tensor, *, rng: torch.Generator, raw: bool = False
) -> torch.Tensor:
    """Normalized query rows [rows, H, D] in the cache dtype; each head leans to a topic of its request."""
    cfg = case.config
    rows = row_req.shape[0]
    out = torch.empty(rows, cfg.num_heads, cfg.head_dim)
    for r, b in enumerate(row_req.tolist()):
        top = case.topics[b]
        mix = torch.softmax(2.0 * _randn(rng, cfg.num_heads, top.shape[0]), dim=-1)
        out[r] = mix @ top + 0.7 * _randn(rng, cfg.num_heads, cfg.head_dim)
    q = out.to(torch.bfloat16).to(case.cache.device)
    if raw:
        return q
    return normalize_query(q, case.query_weight, eps=cfg.rms_eps, dtype=cfg.dtype)


def decode_visible(case: IndexerCase, decode_query_len: int) -> torch.Tensor:
    """Per decode row: MTP row ``j`` of ``L`` sees the first ``T - (L - 1 - j)`` tokens' complete blocks."""
    r = case.config.compress_ratio
    vis = [
        max(0, t - (decode_query_len - 1 - j)) // r for t in case.num_tokens for j in range(decode_query_len)
    ]
    return torch.tensor(vis, dtype=torch.int32, device=case.cache.device)


def prefill_visible(case: IndexerCase, query_lens: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """(query_start_loc, visible) for prefill rows that are the last ``query_lens[b]`` tokens of each request:
    the row at position ``p`` sees the ``(p + 1) // compress_ratio`` complete blocks (early rows see none)."""
    r = case.config.compress_ratio
    vis, qsl = [], [0]
    for t, n in zip(case.num_tokens, query_lens, strict=True):
        if not 0 <= n <= t:
            raise ValueError(f"query_lens entries must be in [0, num_tokens], got {n} for {t} tokens")
        vis += [(p + 1) // r for p in range(t - n, t)]
        qsl.append(qsl[-1] + n)
    dev = case.cache.device
    return torch.tensor(qsl, dtype=torch.int32, device=dev), torch.tensor(vis, dtype=torch.int32, device=dev)
