"""QSA indexer at realistic shapes on a real GPU (skipped elsewhere).

These also *measure*: the logits test prints the worst error per dtype and fails with a ready-to-paste
``tests/tolerances/qsa.toml`` row while the arch has no ``qsa.logits`` row of its own (SM90's FP8 wgmma
accumulates with reduced precision, so the interpreter's rows say nothing about it).
Run: ``pytest tests/test_qsa_gpu.py -s -v``.
"""

from __future__ import annotations

import pytest
import torch

from harness.topk import assert_topk_multiset_equal

pytestmark = pytest.mark.gpu

INDEXER_DTYPES = ["bf16", "fp8"]
# DeepSeek-V3.2-like indexer: 64 heads × 128, 4 tokens per compressed key, 2048 selected tokens.
HEADS, HEAD_DIM, RATIO, TOKEN_TOPK, PAGE = 64, 128, 4, 2048, 64
DECODE_TOKENS = [32768, 4099, 17, 65536 + 13, 9000, 2048, 513, 40000]
MTP = 3
PREFILL_TOKENS = [8192 + 5, 3001, 700]
PREFILL_QUERY_LENS = [2048, 1500, 700]


def _cfg(dtype):
    from kernels.qsa import IndexerConfig

    return IndexerConfig(
        num_heads=HEADS,
        head_dim=HEAD_DIM,
        compress_ratio=RATIO,
        token_topk=TOKEN_TOPK,
        page_size=PAGE,
        indexer_kv_dtype=dtype,
    )


def _stats(got: torch.Tensor, ref: torch.Tensor) -> tuple[float, float]:
    err = (got.double() - ref.double()).abs()
    return float(err.max()), float((err / ref.double().abs().clamp(min=1.0)).max())


def _logits_tol(tolerance, key, worst_abs, worst_rel, harness_arch):
    tol = tolerance(op="qsa.logits", dtype=key)
    if not tol.key.startswith("qsa.logits/"):
        pytest.fail(
            f"no qsa.logits row for {key} on {harness_arch.name} (lookup gave {tol!r}). "
            f"Measured: worst |err| "
            f"{worst_abs:.3e}, worst |err|/max(|ref|,1) {worst_rel:.3e}. Add to tests/tolerances/qsa.toml:\n"
            f'[[tolerance]]\nop = "qsa.logits"\ndtype = "{key}"\narch = "{harness_arch.family}"\n'
            f"rtol = {2 * worst_rel:.1e}\natol = {2 * worst_rel:.1e}\n"
            f'note = "H200 test_logits_error_gpu: worst rel {worst_rel:.2e} (x2 margin)"',
            pytrace=False,
        )
    return tol


@pytest.mark.parametrize("dtype", INDEXER_DTYPES)
def test_logits_error_gpu(dtype, rng, device, tolerance, harness_arch):
    from harness import compare
    from kernels.qsa import dtype_key, paged_logits, prefill_row_req
    from kernels.qsa.reference import logits_reference
    from kernels.qsa.testing import build_case, prefill_visible, queries

    cfg = _cfg(dtype)
    case = build_case(cfg, PREFILL_TOKENS, rng=rng, device=device)
    qsl, vis = prefill_visible(case, [256, 100, 37])
    row_req = prefill_row_req(qsl, int(qsl[-1]))
    q = queries(case, row_req.cpu(), rng=rng)
    got = paged_logits(case.cache, q, case.block_table, row_req, vis)
    ref = logits_reference(q, case.cache.kv, case.block_table, row_req, vis, got.shape[1])
    fin = torch.isfinite(ref)
    assert torch.equal(torch.isneginf(got), ~fin), "columns past visible_blocks must be -inf, only those"
    worst_abs, worst_rel = _stats(got[fin], ref[fin])
    key = dtype_key(cfg.dtype)
    print(
        f"\nqsa.logits/{key}/{harness_arch.name}: worst |err| {worst_abs:.3e}, "
        f"worst |err|/max(|ref|,1) {worst_rel:.3e}, max |ref| {float(ref[fin].abs().max()):.3e}"
    )
    tol = _logits_tol(tolerance, key, worst_abs, worst_rel, harness_arch)
    compare.assert_close_tol(got[fin], ref[fin], tol, op="qsa.logits", dtype=key)


@pytest.mark.parametrize("dtype", INDEXER_DTYPES)
def test_decode_select_gpu(dtype, rng, device, tolerance):
    from kernels.qsa import decode_row_req, decode_select, dtype_key
    from kernels.qsa.reference import logits_reference
    from kernels.qsa.testing import build_case, decode_visible, queries

    cfg = _cfg(dtype)
    case = build_case(cfg, DECODE_TOKENS, rng=rng, device=device)
    row_req = decode_row_req(len(DECODE_TOKENS), MTP, device)
    q = queries(case, row_req.cpu(), rng=rng)
    vis = decode_visible(case, MTP)
    sel = decode_select(
        case.cache, q, case.block_table, vis, decode_query_len=MTP, topk_blocks=cfg.topk_blocks
    )
    ref = logits_reference(q, case.cache.kv, case.block_table, row_req, vis, int(vis.max()))
    key = dtype_key(cfg.dtype)
    assert_topk_multiset_equal(
        sel,
        ref,
        k=cfg.topk_blocks,
        visible=vis,
        tol=tolerance(op="qsa.logits", dtype=key),
        op="qsa.decode_select",
        dtype=key,
    )


@pytest.mark.parametrize("dtype", INDEXER_DTYPES)
def test_prefill_select_chunked_gpu(dtype, rng, device, tolerance):
    from kernels.qsa import dtype_key, prefill_row_req, prefill_select
    from kernels.qsa.reference import logits_reference
    from kernels.qsa.testing import build_case, prefill_visible, queries

    cfg = _cfg(dtype)
    case = build_case(cfg, PREFILL_TOKENS, rng=rng, device=device)
    qsl, vis = prefill_visible(case, PREFILL_QUERY_LENS)
    row_req = prefill_row_req(qsl, int(qsl[-1]))
    q = queries(case, row_req.cpu(), rng=rng)
    sel = prefill_select(
        case.cache, q, case.block_table, qsl, vis, topk_blocks=cfg.topk_blocks, chunk_rows=1000
    )
    ref = logits_reference(q, case.cache.kv, case.block_table, row_req, vis, int(vis.max()))
    key = dtype_key(cfg.dtype)
    assert_topk_multiset_equal(
        sel,
        ref,
        k=cfg.topk_blocks,
        visible=vis,
        tol=tolerance(op="qsa.logits", dtype=key),
        op="qsa.prefill_select",
        dtype=key,
    )


@pytest.mark.parametrize("dtype", INDEXER_DTYPES)
def test_store_within_one_ulp_gpu(dtype, seed, device, tolerance, harness_arch):
    from harness import compare
    from kernels.qsa import dtype_key
    from kernels.qsa.testing import build_case

    cfg = _cfg(dtype)
    tokens = [65536 + 3, 4097]
    got = build_case(cfg, tokens, rng=torch.Generator().manual_seed(seed), device=device).cache.kv
    want = build_case(
        cfg, tokens, rng=torch.Generator().manual_seed(seed), device=device, fused=False
    ).cache.kv
    key = dtype_key(cfg.dtype)
    tol = tolerance(op="qsa.store", dtype=key)
    if dtype == "fp8":
        a, b = got.view(torch.uint8).int(), want.view(torch.uint8).int()
        ordered = [torch.where(c & 0x80 > 0, -(c & 0x7F), c & 0x7F) for c in (a, b)]
        off = (ordered[0] - ordered[1]).abs()
        print(
            f"\nqsa.store/e4nv/{harness_arch.name}: codes off by 1: {int((off == 1).sum())}, by >1: "
            f"{int((off > 1).sum())} of {off.numel()}"
        )
        compare.assert_fp8_within_one_ulp(
            got.view(torch.uint8), want.view(torch.uint8), "e4nv", tol=tol, op="qsa.store", dtype=key
        )
    else:
        compare.assert_close_tol(got.float(), want.float(), tol, op="qsa.store", dtype=key)


def test_fp8_selection_overlaps_bf16_gpu(seed, device, tolerance):
    from kernels.qsa import decode_row_req, decode_select
    from kernels.qsa.testing import build_case, decode_visible, queries

    sels = {}
    for dtype in INDEXER_DTYPES:
        g = torch.Generator().manual_seed(seed)
        cfg = _cfg(dtype)
        case = build_case(cfg, DECODE_TOKENS, rng=g, device=device)
        row_req = decode_row_req(len(DECODE_TOKENS), MTP, device)
        q = queries(case, row_req.cpu(), rng=g)
        vis = decode_visible(case, MTP)
        sels[dtype] = decode_select(
            case.cache, q, case.block_table, vis, decode_query_len=MTP, topk_blocks=cfg.topk_blocks
        ).cpu()
    fr = []
    for ra, rb in zip(sels["bf16"].tolist(), sels["fp8"].tolist(), strict=True):
        sa, sb = set(ra) - {-1}, set(rb) - {-1}
        if sa:
            fr.append(len(sa & sb) / len(sa))
    ov = sum(fr) / len(fr)
    tol = tolerance(op="qsa.select_overlap", dtype="e4nv")
    print(f"\nqsa fp8 vs bf16 selection overlap: mean {ov:.4f}, worst row {min(fr):.4f}")
    assert ov >= 1.0 - tol.max_mismatch, (
        f"mean overlap {ov:.3f} below floor {1 - tol.max_mismatch:.2f} ({tol!r})"
    )
