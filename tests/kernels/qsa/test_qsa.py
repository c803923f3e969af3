"""QSA indexer kernels on small shapes (interpreter lane; the same tests run on a GPU unmodified).

Cache store and query norm vs the unfused torch path, logits vs the fp32 reference in the dot-product
error metric |got - ref| <= rtol * S (qsa_checks.check_logits), selections compared as multisets
(harness.topk), FP8 vs BF16 selection overlap, and input validation. Big shapes live in test_qsa_gpu.py.
"""

from __future__ import annotations

import re

import pytest
import torch
from qsa_checks import (
    assert_logits_close,
    assert_selection,
    check_logits,
    require_row,
    selection_overlap,
    selection_tolerance,
)

from harness import compare
from harness.tolerances import Tolerance, lookup, tomllib  # tomllib, or tomli on 3.10: what the table loader reads
from harness.topk import assert_topk_multiset_equal, check_topk_multiset_equal

# Test axes: module constants with odd sizes (heads not a power of two, pages of 1 and 7, ratio 3, ...).
INDEXER_DTYPES = ["bf16", "fp8"]
HEAD_DIMS = [64, 80, 128]  # 80: BLOCK_D pads it to 128, so the kernels' d < D masks act
STORE_RATIOS = [1, 3, 4]
QUERY_HEADS = [1, 5, 16]
# (heads, head_dim, page_size, compress_ratio); paired so each dimension's odd values are all covered.
LOGIT_SHAPES = [(1, 64, 7, 1), (5, 128, 16, 4), (16, 64, 1, 3), (3, 128, 64, 8)]
MTP_LENS = [1, 2, 3, 4]
# Ragged requests: 0 complete blocks, visible not a multiple of any tile, one long-ish request.
DECODE_TOKENS = [3, 97, 41]
PREFILL_TOKENS = [13, 61, 5]
PREFILL_QUERY_LENS = [9, 6, 5]
PREFILL_CHUNKS = [5, 4096]
# Selection configs (_cfg keywords); the selections are checked with the qsa.logits rows too.
DECODE_CFG = dict(heads=5, head_dim=64, page=7, ratio=4, topk_blocks=9)
PREFILL_CFG = dict(heads=3, head_dim=128, page=16, ratio=3, topk_blocks=7)
TIES_CFG = dict(heads=4, head_dim=64, page=5, ratio=2, topk_blocks=5)
SELECT_CFGS = [DECODE_CFG, PREFILL_CFG, TIES_CFG]
SELFTEST = "qsa.logits.selftest"  # the check's own tests (marked unreported: their failures are deliberate)


def _qsa():
    import kernels.qsa as qsa  # imported lazily: the plugin sets TRITON_INTERPRET at configure time

    return qsa


def _cfg(dtype, heads=4, head_dim=64, page=7, ratio=4, topk_blocks=6):
    return _qsa().IndexerConfig(
        num_heads=heads,
        head_dim=head_dim,
        compress_ratio=ratio,
        token_topk=topk_blocks * ratio,
        page_size=page,
        indexer_kv_dtype=dtype,
    )


def _case(cfg, tokens, rng, device, **kw):
    from kernels.qsa.inputs import build_case

    return build_case(cfg, tokens, rng=rng, device=device, **kw)


def _codes(x: torch.Tensor) -> torch.Tensor:
    return x.view(torch.uint8)


# --- config --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "dtype"),
    [("bf16", torch.bfloat16), ("fp8", torch.float8_e4m3fn), ("fp8_e4m3", torch.float8_e4m3fn)],
)
def test_indexer_dtype_resolution(name, dtype):
    assert _cfg(name).dtype == dtype


@pytest.mark.parametrize("name", ["fp16", "e4m3", "fp8_e5m2", "", "BF16"])
def test_unknown_indexer_dtype_names_value_and_supported(name):
    with pytest.raises(
        NotImplementedError,
        match=rf"indexer_kv_dtype='{name}' is not supported; "
        r"supported: bf16, fp8, fp8_e4m3",
    ):
        _cfg(name)


def test_cache_validates_against_its_own_dtype(device):
    qsa = _qsa()
    cfg = _cfg("fp8")
    bf16_kv = torch.zeros(2, cfg.page_size, 1, cfg.head_dim, dtype=torch.bfloat16, device=device)
    with pytest.raises(TypeError, match=r"kv.dtype must be the indexer dtype torch.float8_e4m3fn"):
        qsa.IndexerKVCache(bf16_kv, cfg)
    cache = qsa.IndexerKVCache(bf16_kv.to(torch.float8_e4m3fn), cfg)
    with pytest.raises(
        TypeError, match=r"q.dtype must equal the cache dtype torch.float8_e4m3fn, got torch.bfloat16"
    ):
        cache.check_query(torch.zeros(1, 2, cfg.head_dim, dtype=torch.bfloat16, device=device))


# --- cache store and query norm ------------------------------------------------------------------------


@pytest.mark.parametrize("ratio", STORE_RATIOS)
@pytest.mark.parametrize("head_dim", HEAD_DIMS)
@pytest.mark.parametrize("dtype", INDEXER_DTYPES)
def test_store_matches_unfused(dtype, head_dim, ratio, rng, device, tolerance):
    cfg = _cfg(dtype, head_dim=head_dim, ratio=ratio)
    seed = int(torch.randint(0, 2**31, (1,), generator=rng))
    tokens = [9 * ratio + 1, 2, 4 * ratio]  # ragged: one incomplete trailing group, one request with none
    fused = _case(cfg, tokens, torch.Generator().manual_seed(seed), device)
    unfused = _case(cfg, tokens, torch.Generator().manual_seed(seed), device, fused=False)
    got, want = fused.cache.kv, unfused.cache.kv
    key = _qsa().dtype_key(cfg.dtype)
    tol = tolerance(op="qsa.store", dtype=key)
    if dtype == "fp8":
        compare.assert_fp8_within_one_ulp(_codes(got), _codes(want), "e4nv", tol=tol)
    else:
        compare.assert_close_tol(got.float(), want.float(), tol)


@pytest.mark.parametrize("heads", QUERY_HEADS)
@pytest.mark.parametrize("head_dim", HEAD_DIMS)
@pytest.mark.parametrize("dtype", INDEXER_DTYPES)
def test_query_norm_matches_unfused(dtype, head_dim, heads, rng, device, tolerance):
    qsa = _qsa()
    cfg = _cfg(dtype, heads=heads, head_dim=head_dim)
    q = (3.0 * torch.randn(9, heads, head_dim, generator=rng)).to(torch.bfloat16).to(device)
    q[0, 0, :4], q[0, 0, 4:8] = 1e4, -1e4
    w = (0.1 * torch.randn(head_dim, generator=rng)).to(torch.bfloat16).to(device)
    # the norm bounds |x * rstd| by sqrt(head_dim): only a large weight takes those eight past ±448, where fp8
    # must saturate (±448 codes, not NaN)
    w[:8] = 200.0
    got = qsa.normalize_query(q, w, eps=cfg.rms_eps, dtype=cfg.dtype)
    want = qsa.normalize_query(q, w, eps=cfg.rms_eps, dtype=cfg.dtype, fused=False)
    key = qsa.dtype_key(cfg.dtype)
    tol = tolerance(op="qsa.store", dtype=key)  # the store's row: the same cast; reported as qsa.query_norm
    if dtype == "fp8":
        assert not torch.isnan(got.float()).any(), "FP8 query cast produced NaN codes (no saturation)"
        assert got[0, 0, :8].float().tolist() == [448.0] * 4 + [-448.0] * 4, "the large entries do not saturate"
        compare.assert_fp8_within_one_ulp(_codes(got), _codes(want), "e4nv", tol=tol, op="qsa.query_norm")
    else:
        compare.assert_close_tol(got.float(), want.float(), tol, op="qsa.query_norm")


def test_store_skips_minus_one_slots_and_writes_nothing_else(rng, device):
    qsa = _qsa()
    cfg = _cfg("fp8", ratio=2)
    cache = qsa.IndexerKVCache.empty(cfg, 2, device)
    sentinel = torch.full_like(_codes(cache.kv), 0x5A)
    _codes(cache.kv).copy_(sentinel)
    keys = torch.randn(9, cfg.head_dim, generator=rng).to(torch.bfloat16).to(device)  # 4 groups + 1 token
    slots = torch.tensor([3, -1, 12, 0], dtype=torch.int32, device=device)
    qsa.store_compressed_keys(cache, keys, slots, torch.zeros(cfg.head_dim, device=device))
    flat = _codes(cache.kv).reshape(-1, cfg.head_dim)
    written = torch.zeros(flat.shape[0], dtype=torch.bool)
    written[[3, 12, 0]] = True
    assert torch.equal(flat[~written.to(device)], sentinel.reshape(-1, cfg.head_dim)[~written.to(device)]), (
        "rows outside the slot mapping were modified"
    )
    assert not torch.equal(flat[3], sentinel.reshape(-1, cfg.head_dim)[3])


# --- logits --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", LOGIT_SHAPES, ids=lambda s: "h{}-d{}-p{}-r{}".format(*s))
@pytest.mark.parametrize("dtype", INDEXER_DTYPES)
def test_prefill_logits_match_reference(dtype, shape, rng, device, tolerance):
    from kernels.qsa.inputs import prefill_rows
    from kernels.qsa.reference import logits_reference, logits_scale

    qsa = _qsa()
    heads, head_dim, page, ratio = shape
    cfg = _cfg(dtype, heads=heads, head_dim=head_dim, page=page, ratio=ratio)
    case = _case(cfg, PREFILL_TOKENS, rng, device)
    _, row_req, q, vis = prefill_rows(case, PREFILL_QUERY_LENS, rng=rng)
    if ratio > 1:
        assert int((vis == 0).sum()) > 0, "inputs must include rows that see no block"
    got = qsa.paged_logits(case.cache, q, case.block_table, row_req, vis)
    args = (q, case.cache.kv, case.block_table, row_req, vis, got.shape[1])
    key = qsa.dtype_key(cfg.dtype)
    assert_logits_close(got, logits_reference(*args), logits_scale(*args), require_row(tolerance, key))


def test_logits_sweep_covers_the_tested_shapes():
    # The qsa.logits rows are measured over LOGITS_SWEEP (scripts/measure_qsa_logits.py): every shape a
    # test applies them to must be in it, or a row would be applied where it was never measured.
    from kernels.qsa.inputs import LOGITS_SWEEP

    swept = {(s.heads, s.head_dim, s.page, s.ratio) for s in LOGITS_SWEEP}
    tested = set(LOGIT_SHAPES) | {(c["heads"], c["head_dim"], c["page"], c["ratio"]) for c in SELECT_CFGS}
    assert tested <= swept, f"shapes tested but not measured: {sorted(tested - swept)}"


def test_logits_scale_is_the_sum_of_product_magnitudes(small):
    from kernels.qsa.reference import logits_reference, logits_scale

    qsa, case, q, vis, row_req = small
    n = int(vis.max())
    args = (q, case.cache.kv, case.block_table, row_req, vis, n)
    scale, ref = logits_scale(*args), logits_reference(*args)
    kv = case.cache.kv.float()[:, :, 0]  # [blocks, page, D], dequantized
    page = case.config.page_size
    for r in range(q.shape[0]):
        v = int(vis[r])
        keys = torch.stack([kv[int(case.block_table[int(row_req[r]), c // page]), c % page] for c in range(v)])
        want = torch.einsum("hd,cd->c", q[r].float().abs(), keys.abs())  # Σ_h Σ_d |q_hd| |k_cd|
        torch.testing.assert_close(scale[r, :v], want, rtol=1e-6, atol=0.0)
        assert bool((scale[r, v:] == 0).all()), "S past visible must be 0"
        assert bool((scale[r, :v] >= ref[r, :v].abs()).all()), "S bounds |ref| (triangle inequality)"


def _logits_triplet():
    """got/ref/S for check_logits: column 0 cancels (|ref| 1.8, S 1000), column 2 is past visible."""
    ref = torch.tensor([[1.8, 500.0, -torch.inf]])
    scale = torch.tensor([[1000.0, 600.0, 0.0]])
    return ref.clone(), ref, scale


@pytest.mark.unreported
def test_check_logits_bounds_the_error_by_s_not_by_ref():
    got, ref, scale = _logits_triplet()
    tol = Tolerance(rtol=2e-5, key="qsa.logits/e4nv/test")
    got[0, 0] += 1.07e-2  # the H200 case: |err| / |ref| = 6e-3, |err| / S = 1.07e-5
    assert check_logits(got, ref, scale, tol, op=SELFTEST) is None
    got[0, 0] = ref[0, 0] + 2.5e-2  # |err| / S = 2.5e-5 > rtol
    m = check_logits(got, ref, scale, tol, op=SELFTEST, dtype="e4nv")
    assert m is not None and m.rows[0].index == (0, 0) and m.rows[0].scale == 1000.0
    text = m.message()
    assert text.startswith(f"{SELFTEST}: logits vs the fp32 reference in the dot-product error bound "
                           "|got - ref| <= atol + rtol * S"), text
    assert "qsa.logits/e4nv/test" in text, text
    assert re.search(r"Greatest difference relative to scale: 2\.500e-05 at index \(0, 0\) \(up to 2\.000e-05", text)
    assert "Rule: |actual - expected| <= atol + rtol * scale" in text


@pytest.mark.parametrize(
    ("where", "value"),
    [((0, 1), float("nan")), ((0, 1), float("inf")), ((0, 1), -float("inf")), ((0, 2), 0.0), ((0, 2), float("nan"))],
    ids=["nan", "inf", "neginf_visible", "finite_past_visible", "nan_past_visible"],
)
@pytest.mark.unreported
def test_check_logits_never_passes_specials(where, value):
    got, ref, scale = _logits_triplet()
    got[where] = value
    m = check_logits(got, ref, scale, Tolerance(rtol=1.0, atol=1.0, key="qsa.logits/bf16/test"), op=SELFTEST)
    assert m is not None and (m.k, m.n) == (1, 3) and m.rows[0].index == where, m
    assert "got must be -inf there and only there" in m.message()


@pytest.mark.unreported
def test_check_logits_zero_scale_needs_an_exact_result_and_atol_is_absolute():
    def check(got, ref, scale, **tol):
        return check_logits(got, ref, scale, Tolerance(**tol), op=SELFTEST)

    ref, scale = torch.tensor([[0.0, 4.0]]), torch.tensor([[0.0, 8.0]])
    assert check(ref.clone(), ref, scale, rtol=1e-3) is None
    assert check(ref + torch.tensor([[1e-30, 0.0]]), ref, scale, rtol=1e-3) is not None
    off = ref + torch.tensor([[0.0, 0.5]])  # allowed at column 1: atol + rtol * S
    assert check(off, ref, scale, rtol=0.05, atol=0.1) is None  # 0.1 + 0.05 * 8 >= 0.5
    assert check(off, ref, scale, rtol=0.05, atol=0.09) is not None
    assert check(off, ref, scale, atol=0.5) is None  # rtol 0: plain atol
    with pytest.raises(ValueError, match="got, ref and scale must have one shape"):
        check(off, ref, scale[:, :1], atol=0.5)
    with pytest.raises(ValueError, match="max_mismatch=0.5: logits rows allow none"):
        check(off, ref, scale, atol=0.5, max_mismatch=0.5)


@pytest.mark.unreported
def test_assert_logits_close_raises_the_report():
    got, ref, scale = _logits_triplet()
    got[0, 2] = 0.0  # a finite logit past visible
    table_row = r"\n\s+\(0, 2\)\s+0\s+-inf"  # index, actual, expected in the worst-elements table
    with pytest.raises(AssertionError, match=rf"(?s)^{re.escape(SELFTEST)}: .*past visible_blocks.*{table_row}"):
        assert_logits_close(got, ref, scale, Tolerance(rtol=1.0, key="qsa.logits/bf16/test"), op=SELFTEST)


def test_selection_tolerance_is_twice_the_logit_bound_at_max_s():
    tol = selection_tolerance(Tolerance(rtol=1e-3, atol=1e-4, key="qsa.logits/bf16/x"), torch.tensor([[5.0, 100.0]]))
    assert tol.rtol == 0.0 and tol.atol == pytest.approx(2 * (1e-4 + 1e-3 * 100.0))
    assert tol.key.startswith("qsa.logits/bf16/x")
    assert selection_overlap(torch.tensor([[1, 2], [3, -1]]), torch.tensor([[2, 5], [3, 4]])) == (0.75, 0.5)
    with pytest.raises(ValueError, match="no row of a selects anything"):
        selection_overlap(torch.tensor([[-1, -1]]), torch.tensor([[1, 2]]))


def test_paste_row_is_twice_the_measurement_rounded_up_and_refuses_nan():
    from kernels.qsa.inputs import paste_row

    for worst in (1.573e-07, 4.598e-08, 3.27e-4, 1.0e-5):
        row = tomllib.loads(paste_row("qsa.logits", "e4nv", "sm90", worst, "test"))["tolerance"][0]
        assert 2 * worst <= row["rtol"] <= 2.1 * worst and row["atol"] == 0.0, row
        assert (row["op"], row["dtype"], row["arch"]) == ("qsa.logits", "e4nv", "sm90")
    for bad in (float("nan"), float("inf")):
        assert "not a tolerance but a bug" in paste_row("qsa.logits", "e4nv", "sm90", bad, "test")


def test_require_row_accepts_only_the_ops_own_row():
    def on(arch):
        return lambda op, dtype: lookup(op, dtype, arch)

    assert require_row(on("interp"), "e4nv").key == "qsa.logits/e4nv/interp"
    with pytest.raises(AssertionError, match=r"no qsa.logits row for bf16 .*\*/bf16/\*.*measure_qsa_logits"):
        require_row(on("sm120"), "bf16")  # only torch.testing's default: another metric
    with pytest.raises(AssertionError, match=r"(?s)no golden/qsa.logits row for e4nv .*tried: .*PASTE ME"):
        require_row(on("sm120"), "e4nv", op="golden/qsa.logits", paste="PASTE ME")  # no row at all


# --- selection -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("mtp", MTP_LENS)
@pytest.mark.parametrize("dtype", INDEXER_DTYPES)
def test_decode_selection_multiset(dtype, mtp, rng, device, tolerance):
    from kernels.qsa.inputs import decode_rows

    qsa = _qsa()
    cfg = _cfg(dtype, **DECODE_CFG)
    case = _case(cfg, DECODE_TOKENS, rng, device)
    row_req, q, vis = decode_rows(case, mtp, rng=rng)
    sel = qsa.decode_select(
        case.cache, q, case.block_table, vis, decode_query_len=mtp, topk_blocks=cfg.topk_blocks
    )
    assert sel.dtype == torch.int32 and sel.shape == (len(DECODE_TOKENS) * mtp, cfg.topk_blocks)
    key = qsa.dtype_key(cfg.dtype)
    assert_selection(
        sel, q, case.cache.kv, case.block_table, row_req, vis, k=cfg.topk_blocks,
        tol=require_row(tolerance, key), op="qsa.decode_select",
    )


@pytest.mark.parametrize("chunk_rows", PREFILL_CHUNKS)
@pytest.mark.parametrize("dtype", INDEXER_DTYPES)
def test_prefill_selection_multiset(dtype, chunk_rows, rng, device, tolerance):
    from kernels.qsa.inputs import prefill_rows

    qsa = _qsa()
    cfg = _cfg(dtype, **PREFILL_CFG)
    case = _case(cfg, PREFILL_TOKENS, rng, device)
    qsl, row_req, q, vis = prefill_rows(case, PREFILL_QUERY_LENS, rng=rng)
    sel = qsa.prefill_select(
        case.cache, q, case.block_table, qsl, vis, topk_blocks=cfg.topk_blocks, chunk_rows=chunk_rows
    )
    key = qsa.dtype_key(cfg.dtype)
    assert_selection(
        sel, q, case.cache.kv, case.block_table, row_req, vis, k=cfg.topk_blocks,
        tol=require_row(tolerance, key), op="qsa.prefill_select",
    )


def _tied_case(dtype, rng, device):
    """A cache whose compressed keys repeat exactly: columns 2j and 2j+1 are identical, so every logit
    has an exact twin, and the selection boundary falls inside a tied pair for most rows."""
    qsa = _qsa()
    cfg = _cfg(dtype, **TIES_CFG)
    cache = qsa.IndexerKVCache.empty(cfg, 8, device)
    half = torch.randn(10, cfg.head_dim, generator=rng)
    groups = half.repeat_interleave(2, dim=0)  # 20 compressed columns in identical pairs
    keys = groups.repeat_interleave(cfg.compress_ratio, dim=0).to(torch.bfloat16).to(device)
    bt = torch.randperm(8, generator=rng)[:4].to(torch.int32)[None].to(device)
    cols = torch.arange(20, device=device)
    slots = (bt[0, cols // cfg.page_size].long() * cfg.page_size + cols % cfg.page_size).to(torch.int32)
    qsa.store_compressed_keys(cache, keys, slots, torch.zeros(cfg.head_dim, device=device))
    raw_q = torch.randn(6, cfg.num_heads, cfg.head_dim, generator=rng).to(torch.bfloat16).to(device)
    q = qsa.normalize_query(raw_q, torch.zeros(cfg.head_dim, device=device), eps=cfg.rms_eps, dtype=cfg.dtype)
    vis = torch.tensor([20, 19, 7, 5, 3, 0], dtype=torch.int32, device=device)
    return cfg, cache, q, bt, vis


@pytest.mark.parametrize("dtype", INDEXER_DTYPES)
def test_exact_ties_accept_either_twin_and_index_equality_would_not(dtype, rng, device, tolerance):
    qsa = _qsa()
    cfg, cache, q, bt, vis = _tied_case(dtype, rng, device)
    sel = qsa.decode_select(cache, q, bt, vis, decode_query_len=6, topk_blocks=cfg.topk_blocks)
    key = qsa.dtype_key(cfg.dtype)
    ref, tol = assert_selection(
        sel, q, cache.kv, bt, torch.zeros(6, dtype=torch.int32, device=device), vis, k=cfg.topk_blocks,
        tol=require_row(tolerance, key), op="qsa.decode_select",
    )
    # Swap every selected column for its twin (2j <-> 2j+1) where the twin is visible and not selected:
    # an equally valid selection with a different index set.
    twin = sel.clone()
    for r in range(sel.shape[0]):
        chosen = set(sel[r].tolist())
        for j, c in enumerate(sel[r].tolist()):
            t = c ^ 1
            if c >= 0 and t < int(vis[r]) and t not in chosen:
                twin[r, j] = t
    assert not torch.equal(twin.sort(1).values, sel.sort(1).values), "no tie reached the boundary"
    assert_topk_multiset_equal(twin, ref, k=cfg.topk_blocks, visible=vis, tol=tol)
    # Dropping the row's clearly best column (well above the k-th score) for the best unselected one fails.
    r = 0
    order = torch.argsort(ref[r, :20], descending=True)
    best, outside = int(order[0]), int(order[cfg.topk_blocks + 1])
    assert float(ref[r, best] - ref[r, order[cfg.topk_blocks - 1]]) > tol.allowed(float(ref[r, best])) * 10
    dropped = sel.clone()
    dropped[r][dropped[r] == best] = outside
    dropped[r][dropped[r] == (best ^ 1)] = int(order[cfg.topk_blocks + 2])
    mismatch, _ = check_topk_multiset_equal(dropped, ref, k=cfg.topk_blocks, visible=vis, tol=tol)
    assert mismatch is not None and mismatch.row == 0 and mismatch.check in ("values", "missing")


# --- fp8 vs bf16 quality -------------------------------------------------------------------------------


def test_fp8_selection_overlaps_bf16(rng, device, tolerance):
    from kernels.qsa.inputs import decode_rows

    qsa = _qsa()
    seed = int(torch.randint(0, 2**31, (1,), generator=rng))
    sels = {}
    for dtype in INDEXER_DTYPES:
        g = torch.Generator().manual_seed(seed)  # same raw keys and queries for both dtypes
        cfg = _cfg(dtype, heads=8, head_dim=128, page=16, ratio=4, topk_blocks=8)
        case = _case(cfg, [120, 90, 60], g, device)
        _, q, vis = decode_rows(case, 2, rng=g)
        sels[dtype] = qsa.decode_select(
            case.cache, q, case.block_table, vis, decode_query_len=2, topk_blocks=cfg.topk_blocks
        )
    tol = tolerance(op="qsa.select_overlap", dtype="e4nv")
    ov, _ = selection_overlap(sels["bf16"], sels["fp8"])
    assert ov >= 1.0 - tol.max_mismatch, (
        f"fp8 selection overlaps the bf16 one by {ov:.3f} on average, floor {1.0 - tol.max_mismatch:.2f} "
        f"({tol!r})"
    )


# --- validation ----------------------------------------------------------------------------------------


@pytest.fixture
def small(rng, device):
    from kernels.qsa.inputs import decode_rows

    cfg = _cfg("fp8", heads=2, page=4, ratio=2, topk_blocks=3)
    case = _case(cfg, [20, 9], rng, device)
    row_req, q, vis = decode_rows(case, 1, rng=rng)
    return _qsa(), case, q, vis, row_req


def test_visible_beyond_capacity_is_rejected(small):
    qsa, case, q, vis, row_req = small
    cap = case.block_table.shape[1] * case.config.page_size
    bad = vis.clone()
    bad[1] = cap + 1
    with pytest.raises(ValueError, match=rf"visible_blocks\[1\] = {cap + 1} exceeds the page-table capacity"):
        qsa.decode_select(case.cache, q, case.block_table, bad, decode_query_len=1, topk_blocks=3, validate=True)


def test_page_table_entry_out_of_range_is_rejected(small):
    qsa, case, q, vis, row_req = small
    bt = case.block_table.clone()
    bt[0, 1] = case.cache.num_blocks
    with pytest.raises(ValueError, match=r"block_table\[0, 1\] = \d+ is outside \[0, \d+\)"):
        qsa.paged_logits(case.cache, q, bt, row_req, vis, validate=True)
    bt = case.block_table.clone()
    bt[1, 2] = -1  # request 1 sees 4 blocks = 1 page: unused entries may hold anything
    qsa.paged_logits(case.cache, q, bt, row_req, vis, validate=True)


def test_query_dtype_must_equal_cache_dtype(small):
    qsa, case, q, vis, _ = small
    with pytest.raises(TypeError, match=r"q.dtype must equal the cache dtype torch.float8_e4m3fn"):
        qsa.decode_select(
            case.cache, q.float().to(torch.bfloat16), case.block_table, vis, decode_query_len=1, topk_blocks=3
        )


@pytest.mark.parametrize(
    ("mutate", "exc", "match"),
    [
        (lambda a: a.update(q=a["q"][:, :, :32]), ValueError, r"q must be \[rows, heads, head_dim=64\]"),
        (lambda a: a.update(q=a["q"][:1]), ValueError, r"q must have block_table rows × decode_query_len"),
        (lambda a: a.update(visible_blocks=a["visible_blocks"][:1]), ValueError, "one entry per query row"),
        (
            lambda a: a.update(visible_blocks=a["visible_blocks"] - 20),
            ValueError,
            "visible_blocks must be >= 0",
        ),
        (
            lambda a: a.update(visible_blocks=a["visible_blocks"].float()),
            TypeError,
            "visible_blocks must have dtype",
        ),
        (lambda a: a.update(block_table=a["block_table"][0]), ValueError, "block_table must have 2 dims"),
        (lambda a: a.update(topk_blocks=0), ValueError, "topk_blocks must be an int >= 1"),
        (lambda a: a.update(decode_query_len=0), ValueError, "decode_query_len must be an int >= 1"),
    ],
    ids=["head_dim", "rows", "visible_len", "visible_neg", "visible_dtype", "bt_dims", "k", "mtp"],
)
def test_decode_select_rejects_bad_inputs(small, mutate, exc, match):
    qsa, case, q, vis, _ = small
    args = {
        "q": q,
        "block_table": case.block_table,
        "visible_blocks": vis,
        "decode_query_len": 1,
        "topk_blocks": 3,
        "validate": True,  # the value checks (visible_neg) are opt-in; the others run on every call
    }
    mutate(args)
    with pytest.raises(exc, match=match):
        qsa.decode_select(case.cache, **args)


def test_prefill_select_rejects_bad_query_start_loc(small):
    qsa, case, q, vis, _ = small
    for qsl, match in (
        ([0, 1], "block_table rows \\+ 1 = 3"),
        ([0, 2, 1], "must start at 0 and end at"),
        ([1, 1, 2], "must start at 0"),
        ([0, 2, 2], None),
    ):
        t = torch.tensor(qsl, dtype=torch.int32, device=q.device)
        if match is None:
            qsa.prefill_select(case.cache, q, case.block_table, t, torch.zeros_like(vis), topk_blocks=3,
                               validate=True)
            continue
        with pytest.raises(ValueError, match=match):
            qsa.prefill_select(case.cache, q, case.block_table, t, vis, topk_blocks=3, validate=True)


def test_store_rejects_bad_slots(small, device):
    qsa, case, _, _, _ = small
    d = case.config.head_dim
    keys = torch.zeros(8, d, dtype=torch.bfloat16, device=device)
    w = torch.zeros(d, device=device)
    n_slots = case.cache.num_blocks * case.config.page_size
    for slots, match in (
        ([0, 1, 2], "must have T // compress_ratio = 8 // 2 = 4 entries"),
        ([0, 1, 2, n_slots], rf"-1 \(skip\) or in \[0, {n_slots}\)"),
        ([0, 1, -2, 3], "-1 \\(skip\\)"),
        ([0, 1, 1, 3], "duplicate slot"),
    ):
        with pytest.raises(ValueError, match=match):
            qsa.store_compressed_keys(
                case.cache, keys, torch.tensor(slots, dtype=torch.int32, device=device), w
            )
    with pytest.raises(TypeError, match="keys must have dtype"):
        qsa.store_compressed_keys(
            case.cache, keys.float(), torch.arange(4, dtype=torch.int32, device=device), w
        )
    with pytest.raises(ValueError, match=r"weight must be \[head_dim=64\]"):
        qsa.store_compressed_keys(case.cache, keys, torch.arange(4, dtype=torch.int32, device=device), w[:8])


def test_config_rejects_bad_values():
    qsa = _qsa()
    with pytest.raises(ValueError, match="token_topk .* must be >= compress_ratio"):
        qsa.IndexerConfig(num_heads=1, head_dim=64, compress_ratio=8, token_topk=4, page_size=1)
    with pytest.raises(ValueError, match="head_dim must be >= 16"):
        qsa.IndexerConfig(num_heads=1, head_dim=8, compress_ratio=1, token_topk=4, page_size=1)
    with pytest.raises(ValueError, match="page_size must be an int >= 1"):
        qsa.IndexerConfig(num_heads=1, head_dim=64, compress_ratio=1, token_topk=4, page_size=0)


def test_float_tolerance_and_table_tolerance_agree():
    # harness.topk accepts a bare atol too; same verdict as the equivalent Tolerance.
    scores = torch.tensor([[1.0, 0.9995, 0.2]])
    for tol in (1e-3, Tolerance(atol=1e-3)):
        assert_topk_multiset_equal(torch.tensor([[1, 0]]), scores, k=2, tol=tol)
