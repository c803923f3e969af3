"""The QSA references on hand-computed values, and the kernels that have no torch twin checked against
their definition: the Triton top-k (exact, ties to the lower column, ascending order, padding) and the
MTP decode logits (the same bits as paged_logits).

Why by hand: the fused kernels are judged against kernels.qsa.reference; a mistake made in both (the
Gemma ``1 + weight``, a ReLU, a page-table gather) would pass every kernel-vs-reference test.
"""

from __future__ import annotations

import math

import pytest
import torch

from harness.topk import assert_topk_multiset_equal


def _qsa():
    import kernels.qsa as qsa

    return qsa


def test_pool_keys_is_the_mean_of_complete_groups():
    from kernels.qsa.reference import pool_keys

    keys = torch.tensor([[1.0, -2.0], [3.0, 4.0], [5.0, 0.5], [7.0, 8.0], [100.0, 100.0]]).to(torch.bfloat16)
    got = pool_keys(keys, 2)
    assert got.dtype == torch.bfloat16
    assert got.float().tolist() == [[2.0, 1.0], [6.0, 4.25]]  # the trailing 5th token is not pooled
    assert pool_keys(keys, 1).float().tolist() == keys.float().tolist()
    assert pool_keys(keys, 6).shape == (0, 2)


def test_rms_norm_cast_is_gemma_rmsnorm():
    from kernels.qsa.reference import rms_norm_cast

    x = torch.tensor([[3.0, 4.0]])
    w = torch.tensor([0.0, 1.0])
    eps = 1e-6
    rms = math.sqrt((9 + 16) / 2 + eps)
    got = rms_norm_cast(x, w, eps, torch.float32)
    torch.testing.assert_close(got, torch.tensor([[3 / rms, 2 * 4 / rms]]), rtol=1e-6, atol=0)
    fp8 = rms_norm_cast(torch.tensor([[1.0, 0.0]]), torch.tensor([500.0, 0.0]), eps, torch.float8_e4m3fn)
    assert fp8.float().tolist() == [[448.0, 0.0]]  # sqrt(2) * 501 saturates


def _tiny():
    """kv with three keys in a shuffled two-block cache (page 2), one request, two query rows of two heads."""
    kv = torch.zeros(2, 2, 1, 2)
    keys = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    bt = torch.tensor([[1, 0]], dtype=torch.int32)  # column c lives in block bt[0, c // 2], slot c % 2
    for c in range(3):
        kv[int(bt[0, c // 2]), c % 2, 0] = keys[c]
    q = torch.tensor([[[1.0, -1.0], [2.0, 0.0]], [[-1.0, -1.0], [0.5, 3.0]]])
    row_req = torch.zeros(2, dtype=torch.int32)
    vis = torch.tensor([2, 3], dtype=torch.int32)
    return q, kv, bt, row_req, vis


def test_paged_keys_follow_the_page_table():
    from kernels.qsa.reference import paged_keys

    _, kv, bt, _, _ = _tiny()
    assert paged_keys(kv, bt, 0, 3).tolist() == [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]


def test_logits_reference_and_scale_by_hand():
    from kernels.qsa.reference import logits_reference, logits_scale

    args = _tiny()
    # row 0 (heads [1,-1], [2,0]), 2 visible: c0 relu(1)+relu(2) = 3, c1 relu(-1)+relu(0) = 0
    # row 1 (heads [-1,-1], [0.5,3]), 3 visible: c0 0+0.5, c1 0+3, c2 relu(-2)+3.5
    ref = logits_reference(*args, 4)
    assert ref.tolist() == [[3.0, 0.0, -math.inf, -math.inf], [0.5, 3.0, 3.5, -math.inf]]
    # S = sum_h sum_d |q_hd k_cd|: row 0: c0 1+2, c1 1+0; row 1: c0 1+0.5, c1 1+3, c2 2+3.5
    assert logits_scale(*args, 4).tolist() == [[3.0, 1.0, 0.0, 0.0], [1.5, 4.0, 5.5, 0.0]]


def test_select_from_logits_pads_rows_that_see_fewer_than_k():
    from kernels.qsa.reference import select_from_logits

    logits = torch.tensor([[1.0, 5.0, 3.0, -math.inf], [2.0, -math.inf, -math.inf, -math.inf]])
    vis = torch.tensor([3, 1])
    assert select_from_logits(logits, vis, 2).tolist() == [[1, 2], [0, -1]]
    assert select_from_logits(logits, vis, 5).tolist() == [[1, 2, 0, -1, -1], [0, -1, -1, -1, -1]]


# --- the Triton top-k ----------------------------------------------------------------------------------


def _topk_spec(logits: torch.Tensor, vis: torch.Tensor, k: int) -> list[list[int]]:
    """The documented result, from its definition: the k best visible columns, ties to the lower column
    (a stable descending sort), listed in ascending column order, -1-padded."""
    out = []
    for r in range(logits.shape[0]):
        v = int(vis[r])
        order = sorted(range(v), key=lambda c: (-float(logits[r, c]), c))  # -0.0 == 0.0 here: see below
        chosen = sorted(order[:k])
        out.append(chosen + [-1] * (k - len(chosen)))
    return out


@pytest.mark.parametrize("width", [7, 40, 16384 + 300], ids=["narrow", "resident", "chunked"])
def test_topk_columns_is_exact_with_ties_to_the_lower_column(width, rng, device):
    from kernels.qsa.topk import topk_columns

    k = 5
    rows = 6
    # few distinct values (many ties), negatives, a zero, and rows that see < k, == k, 0 and all columns
    logits = torch.randint(-3, 4, (rows, width), generator=rng).float() * 0.75
    logits[1, :3] = torch.tensor([2.5, 2.5, 2.5])
    vis = torch.tensor([width, min(3, width), 0, k, width, max(1, width - 2)], dtype=torch.int32)
    logits[4] = -1.5  # all tied
    logits[4, width - 1] = 4.0  # the best column last
    got = topk_columns(logits.to(device), vis.to(device), k).cpu()
    assert got.dtype == torch.int32 and got.shape == (rows, k)
    assert got.tolist() == _topk_spec(logits, vis, k)
    ref = torch.where(torch.arange(width)[None] < vis[:, None].long(), logits, -math.inf)
    assert_topk_multiset_equal(got, ref, k=k, visible=vis, tol=0.0, op="qsa.topk", dtype="fp32")


def test_topk_columns_orders_by_value_across_signs_and_magnitudes(rng, device):
    from kernels.qsa.topk import topk_columns

    # a permutation of values spanning signs and 80 binades: the order key must rank them as floats
    vals = torch.tensor([-3e30, -1.0, -1e-30, -1e-40, 0.0, 1e-40, 1e-30, 1.0, 2.0, 3e30, -math.inf, math.inf])
    perm = torch.randperm(vals.numel(), generator=rng)
    logits = vals[perm][None]
    vis = torch.tensor([vals.numel()], dtype=torch.int32)
    for k in range(1, vals.numel() + 1):
        got = topk_columns(logits.to(device), vis.to(device), k).cpu()[0]
        want = torch.topk(logits[0], k).indices.sort().values
        assert got.tolist() == want.tolist(), f"k={k}: {logits[0, got].tolist()} vs {logits[0, want].tolist()}"


def test_topk_columns_ranks_negative_zero_below_positive_zero(device):
    from kernels.qsa.topk import topk_columns

    logits = torch.tensor([[-0.0, 0.0, -1.0]])
    got = topk_columns(logits.to(device), torch.tensor([3], dtype=torch.int32, device=device), 1).cpu()
    assert got.tolist() == [[1]]


# --- MTP decode logits ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["bf16", "fp8"])
@pytest.mark.parametrize("mtp", [1, 3])
@pytest.mark.parametrize("tiles", [1, 2, 8], ids=["tile-per-program", "2-tiles", "4-tiles-past-the-row"])
def test_decode_logits_equal_paged_logits_bit_for_bit(dtype, mtp, tiles, rng, device, monkeypatch):
    from kernels.qsa import logits as logits_mod
    from kernels.qsa import resolve_indexer_dtype
    from kernels.qsa.inputs import build_case, decode_rows
    from kernels.qsa.logits import decode_logits

    # `tiles` tiles per program (8 > the 3 tiles of a row is cut to 4: the loop runs past the row, masked)
    monkeypatch.setitem(logits_mod.DECODE_TILES_PER_PROGRAM, resolve_indexer_dtype(dtype), (tiles,) * 3)

    qsa = _qsa()
    cfg = qsa.IndexerConfig(num_heads=5, head_dim=64, compress_ratio=2, token_topk=8, page_size=7,
                            indexer_kv_dtype=dtype)
    case = build_case(cfg, [150, 5, 71], rng=rng, device=device)
    row_req, q, vis = decode_rows(case, mtp, rng=rng)
    vis[0] = 0  # a row that sees nothing beside ones that see a lot, in one request (when mtp > 1)
    n = case.block_table.shape[1] * cfg.page_size
    tile = qsa.LogitsTile(block_n=32, num_warps=4)  # several tiles per row: the per-tile masks matter
    want = qsa.paged_logits(case.cache, q, case.block_table, row_req, vis, n_cols=n, tile=tile)
    got = decode_logits(case.cache, q, case.block_table, vis, decode_query_len=mtp, n_cols=n, tile=tile)
    assert torch.equal(got, want), "decode_logits differ from paged_logits"
    assert bool(torch.isneginf(got[0]).all())
