"""The shipped kernels' bad inputs that reach the device unvalidated (turboquant slots past the cache, QSA
``row_req`` past the page table) access nothing outside their tensors.

Their own tests guard the memory after a cache with poison bytes inside a longer buffer: a view, whose storage is
the whole buffer, so a stray write there stays inside the launch's storages and is their assertion's business.
Here every tensor is exactly its size, so the sanitizer's check (no lane outside every argument's storage) is
what guards it, with a sanitizer of the test's own that must have seen the launches and found nothing."""

from __future__ import annotations

import pytest
import torch

from harness.sanitize import State

pytestmark = pytest.mark.interp_only




def clean(st: State, launches: int) -> None:
    assert [f.message() for f in st.findings if f.kind != "overlap"] == []
    assert st.launches >= launches


@pytest.mark.parametrize("h, d", [(2, 16), (8, 16), (2, 7)], ids=["word-kernel", "token-per-program", "byte-path"])
def test_turboquant_slots_past_the_cache_stay_inside_it(h, d, sanitizer):
    from kernels.turboquant import slot_bytes, tq_load_k8v4, tq_store_k8v4

    g = torch.Generator().manual_seed(42)
    t, nb, bs = 5, 2, 4
    cache = torch.full((nb, bs, h, slot_bytes(d)), 0xAA, dtype=torch.uint8)  # exactly the cache: no guard bytes
    key = torch.randn(t, h, d, generator=g) * 32
    value = torch.randn(t, h, d, generator=g) * 3
    slots = torch.tensor([nb * bs, 3, 2**40, nb * bs + 1, -1])
    tq_store_k8v4(key, value, cache, slots, fp8_format="e4nv")
    k, _ = tq_load_k8v4(cache, slots, head_dim=d, fp8_format="e4nv")
    assert [bool(torch.isnan(k[i]).all()) for i in range(t)] == [True, False, True, True, True]
    clean(sanitizer, 2)


def test_qsa_row_req_past_the_page_table_reads_nothing_outside_it(sanitizer):
    import kernels.qsa as qsa
    from kernels.qsa.inputs import build_case, prefill_rows

    g = torch.Generator().manual_seed(7)
    cfg = qsa.IndexerConfig(num_heads=2, head_dim=64, compress_ratio=2, token_topk=6, page_size=4,
                            indexer_kv_dtype="fp8")
    case = build_case(cfg, [20, 9], rng=g, device="cpu")
    _, row_req, pq, pvis = prefill_rows(case, [5, 3], rng=g)
    bt = case.block_table.clone()  # its own storage, exactly the table
    n = bt.shape[1] * case.config.page_size
    bad = row_req.clone()
    bad[0], bad[-1] = -1, bt.shape[0]
    got = qsa.paged_logits(case.cache, pq, bt, bad, pvis, n_cols=n)
    assert bool(torch.isneginf(got[0]).all() and torch.isneginf(got[-1]).all())
    bt[0, 1], bt[0, 2] = case.cache.num_blocks, -7  # page-table entries outside the cache
    qsa.paged_logits(case.cache, pq, bt, row_req, pvis, n_cols=n)
    clean(sanitizer, 2)
