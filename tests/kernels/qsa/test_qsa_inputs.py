"""QSA entry points given adversarial tensors: strided views of every index argument, non-contiguous data,
self-overlapping caches and outputs, and bad scalars (issue 9).

A strided view must give exactly the result of its contiguous copy (same kernel, same values: bit-equal);
memory where two elements share an address must be refused with a ValueError naming the argument.
"""

from __future__ import annotations

import pytest
import torch


def _qsa():
    import kernels.qsa as qsa  # lazily: the plugin sets TRITON_INTERPRET at configure time

    return qsa


def _cfg(dtype="fp8", heads=3, head_dim=64, page=4, ratio=2, topk_blocks=3):
    return _qsa().IndexerConfig(
        num_heads=heads, head_dim=head_dim, compress_ratio=ratio, token_topk=topk_blocks * ratio,
        page_size=page, indexer_kv_dtype=dtype,
    )


def _strided(x: torch.Tensor) -> torch.Tensor:
    """The same values as ``x`` as a non-contiguous view (every other element of a twice-as-long buffer,
    the gaps holding values that would be wrong if read)."""
    buf = torch.empty((*x.shape[:-1], 2 * x.shape[-1]), dtype=x.dtype, device=x.device)
    buf.fill_(float("nan") if x.dtype.is_floating_point else 10**6)
    buf[..., ::2] = x
    view = buf[..., ::2]
    assert not view.is_contiguous() and torch.equal(view, x)
    return view


def _row_strided(x: torch.Tensor) -> torch.Tensor:
    """``x`` [n, ...] as a view with rows two apart (another tensor's column, e.g. ``meta[:, 0]``)."""
    buf = torch.full((x.shape[0], 2, *x.shape[1:]), -7, dtype=x.dtype, device=x.device)
    buf[:, 0] = x
    view = buf[:, 0]
    assert (x.shape[0] < 2 or not view.is_contiguous()) and torch.equal(view, x)
    return view


def _codes(kv: torch.Tensor) -> torch.Tensor:
    return kv.view(torch.uint8) if kv.dtype == torch.float8_e4m3fn else kv.view(torch.int16)


@pytest.fixture(scope="module", params=["bf16", "fp8"])
def _built(request, harness_lane):
    """One valid cache and its decode/prefill rows per cache type, built once for the module (each build runs the
    store kernel): the bad-argument tests below take a copy each and change one argument of it."""
    from harness.plugin import node_seed
    from kernels.qsa.inputs import build_case, decode_rows, prefill_rows

    rng = torch.Generator(device="cpu").manual_seed(node_seed(f"tests/test_qsa_inputs.py::setup[{request.param}]",
                                                              request.config.getoption("harness_seed")))
    device = "cuda" if harness_lane == "gpu" else "cpu"
    cfg = _cfg(request.param)
    case = build_case(cfg, [22, 13, 9], rng=rng, device=device)
    row_req, q, vis = decode_rows(case, 2, rng=rng)
    qsl, prow_req, pq, pvis = prefill_rows(case, [5, 4, 3], rng=rng)
    return dict(cfg=cfg, case=case, row_req=row_req, q=q, vis=vis, qsl=qsl, prow_req=prow_req, pq=pq, pvis=pvis)


@pytest.fixture
def setup(_built):
    import copy

    return copy.deepcopy(_built)  # a test may write into the cache or the rows: never into the next test's


# --- strided index arguments ---------------------------------------------------------------------------


@pytest.mark.parametrize("view", [_strided, _row_strided], ids=["elem_stride2", "column_of_meta"])
def test_store_strided_slot_mapping_and_keys(view, rng, device):
    qsa = _qsa()
    cfg = _cfg("fp8")
    keys = torch.randn(12, cfg.head_dim, generator=rng).to(torch.bfloat16).to(device)
    slots = torch.tensor([5, -1, 0, 9, 2, 11], dtype=torch.int32, device=device)
    w = (0.1 * torch.randn(cfg.head_dim, generator=rng)).to(device)
    want = qsa.IndexerKVCache.empty(cfg, 3, device)
    qsa.store_compressed_keys(want, keys, slots, w)
    for args in ((keys, view(slots), w), (_row_strided(keys), slots, w), (_strided(keys), slots, _strided(w))):
        got = qsa.IndexerKVCache.empty(cfg, 3, device)
        qsa.store_compressed_keys(got, *args)
        assert torch.equal(_codes(got.kv), _codes(want.kv)), "a strided argument changed what was stored"


@pytest.mark.parametrize("arg", ["block_table", "row_req", "visible_blocks", "q"])
def test_paged_logits_strided_arguments(setup, arg):
    qsa = _qsa()
    s = setup
    args = dict(block_table=s["case"].block_table, row_req=s["prow_req"], visible_blocks=s["pvis"], q=s["pq"])
    want = qsa.paged_logits(s["case"].cache, **args)
    if arg == "q":
        args["q"] = s["pq"].transpose(0, 1).contiguous().transpose(0, 1)  # rows not outermost
        assert not args["q"].is_contiguous()
    else:
        args[arg] = _strided(args[arg])
    got = qsa.paged_logits(s["case"].cache, **args)
    assert torch.equal(got, want), f"strided {arg} changed the logits"


@pytest.mark.parametrize("arg", ["block_table", "visible_blocks", "q", "block_table_rows"])
def test_decode_select_strided_arguments(setup, arg):
    qsa = _qsa()
    s = setup
    args = dict(block_table=s["case"].block_table, visible_blocks=s["vis"], q=s["q"])
    want = qsa.decode_select(s["case"].cache, **args, decode_query_len=2, topk_blocks=3)
    if arg == "q":
        args["q"] = _strided(s["q"].transpose(1, 2)).transpose(1, 2)
    elif arg == "block_table_rows":
        args["block_table"] = _row_strided(s["case"].block_table)
    else:
        args[arg] = _strided(args[arg])
    got = qsa.decode_select(s["case"].cache, **args, decode_query_len=2, topk_blocks=3)
    assert torch.equal(got, want), f"strided {arg} changed the selection"


@pytest.mark.parametrize("arg", ["block_table", "query_start_loc", "visible_blocks", "q"])
def test_prefill_select_strided_arguments(setup, arg):
    qsa = _qsa()
    s = setup
    args = dict(block_table=s["case"].block_table, query_start_loc=s["qsl"], visible_blocks=s["pvis"], q=s["pq"])
    want = qsa.prefill_select(s["case"].cache, **args, topk_blocks=3, chunk_rows=5)
    args[arg] = _row_strided(args[arg]) if arg == "q" else _strided(args[arg])
    got = qsa.prefill_select(s["case"].cache, **args, topk_blocks=3, chunk_rows=5)
    assert torch.equal(got, want), f"strided {arg} changed the selection"
    assert torch.equal(qsa.prefill_row_req(_strided(s["qsl"]), s["pq"].shape[0]), s["prow_req"])


def test_normalize_query_strided_input_and_weight(rng, device):
    qsa = _qsa()
    q = torch.randn(5, 3, 64, generator=rng).to(torch.bfloat16).to(device)
    w = (0.1 * torch.randn(64, generator=rng)).to(device)
    for dtype in (torch.bfloat16, torch.float8_e4m3fn):
        for fused in (True, False):
            want = qsa.normalize_query(q, w, eps=1e-6, dtype=dtype, fused=fused)
            for qv, wv in ((q.transpose(0, 1).contiguous().transpose(0, 1), w), (_strided(q), _strided(w))):
                got = qsa.normalize_query(qv, wv, eps=1e-6, dtype=dtype, fused=fused)
                assert torch.equal(_codes(got), _codes(want)), f"strided input changed the result ({dtype}, {fused})"


def test_cache_may_be_a_strided_view_of_a_pool(rng, device):
    # Blocks two apart in a larger pool (distinct elements): stores and logits address it by its strides.
    qsa = _qsa()
    cfg = _cfg("bf16")
    pool = torch.full((6, cfg.page_size, 1, cfg.head_dim), float("nan"), dtype=torch.bfloat16, device=device)
    view = qsa.IndexerKVCache(pool[::2], cfg)
    dense = qsa.IndexerKVCache.empty(cfg, 3, device)
    keys = torch.randn(8, cfg.head_dim, generator=rng).to(torch.bfloat16).to(device)
    slots = torch.tensor([1, 4, 11, 6], dtype=torch.int32, device=device)
    w = torch.zeros(cfg.head_dim, device=device)
    for c in (view, dense):
        c.kv[:] = 0
        qsa.store_compressed_keys(c, keys, slots, w)
    assert torch.equal(view.kv, dense.kv)
    assert bool(pool[1::2].isnan().all()), "the store wrote between the view's blocks"
    q = torch.randn(2, cfg.num_heads, cfg.head_dim, generator=rng).to(torch.bfloat16).to(device)
    bt = torch.tensor([[2, 1, 0]], dtype=torch.int32, device=device)
    rr = torch.zeros(2, dtype=torch.int32, device=device)
    vis = torch.tensor([12, 5], dtype=torch.int32, device=device)
    assert torch.equal(qsa.paged_logits(view, q, bt, rr, vis), qsa.paged_logits(dense, q, bt, rr, vis))


# --- overlapping memory is refused ---------------------------------------------------------------------


def test_self_overlapping_cache_is_refused(device):
    qsa = _qsa()
    cfg = _cfg("fp8")
    one = torch.zeros(1, cfg.page_size, 1, cfg.head_dim, dtype=torch.float8_e4m3fn, device=device)
    flat = torch.zeros(3 * cfg.page_size * cfg.head_dim, dtype=torch.float8_e4m3fn, device=device)
    # page p of block b is page p + 1 of block b - 1: blocks one page apart instead of page_size pages
    rows_alias = flat.as_strided((3, cfg.page_size, 1, cfg.head_dim), (cfg.head_dim, cfg.head_dim, 1, 1))
    for kv in (one.expand(4, -1, -1, -1), rows_alias):
        with pytest.raises(ValueError, match=r"kv has overlapping memory .*strides"):
            qsa.IndexerKVCache(kv, cfg)


def test_overlapping_out_is_refused_and_out_is_written_only_in_its_columns(setup):
    qsa = _qsa()
    s = setup
    rows = s["pq"].shape[0]
    n = int(s["pvis"].max())
    args = (s["case"].cache, s["pq"], s["case"].block_table, s["prow_req"], s["pvis"])
    row = torch.zeros(1, n, device=s["pq"].device)
    with pytest.raises(ValueError, match=r"out has overlapping memory"):
        qsa.paged_logits(*args, out=row.expand(rows, n))
    wide = torch.full((rows, n + 5), 123.0, device=s["pq"].device)
    got = qsa.paged_logits(*args, out=wide[:, 2 : 2 + n])
    assert torch.equal(got, qsa.paged_logits(*args))
    assert bool((wide[:, :2] == 123.0).all() and (wide[:, 2 + n :] == 123.0).all()), "wrote outside out"


# --- argument messages ---------------------------------------------------------------------------------


def test_decode_row_req_and_logits_tile_fail_at_construction():
    qsa = _qsa()
    with pytest.raises(ValueError, match=r"num_requests must be an int >= 0, got -1"):
        qsa.decode_row_req(-1, 2, "cpu")
    with pytest.raises(ValueError, match=r"decode_query_len must be an int >= 1, got 0"):
        qsa.decode_row_req(2, 0, "cpu")
    assert qsa.decode_row_req(0, 3, "cpu").shape == (0,)
    assert qsa.decode_row_req(2, 2, "cpu").tolist() == [0, 0, 1, 1]
    with pytest.raises(ValueError, match=r"LogitsTile.block_n must be a power of two in \[32, 1024\], got 48"):
        qsa.LogitsTile(block_n=48, num_warps=4)
    with pytest.raises(ValueError, match=r"LogitsTile.block_n must be a power of two in \[32, 1024\], got 16"):
        qsa.LogitsTile(block_n=16, num_warps=4)
    with pytest.raises(ValueError, match=r"LogitsTile.num_warps must be a power of two in \[1, 16\], got 3"):
        qsa.LogitsTile(block_n=64, num_warps=3)
    with pytest.raises(ValueError, match=r"LogitsTile.num_stages must be an int >= 1, got 0"):
        qsa.LogitsTile(block_n=64, num_warps=4, num_stages=0)
    qsa.LogitsTile(block_n=32, num_warps=1, num_stages=1)  # the smallest accepted tile


@pytest.mark.parametrize(
    ("call", "exc", "match"),
    [
        (lambda s, q: q.paged_logits(s["case"].cache, s["pq"], s["case"].block_table, s["prow_req"], s["pvis"],
                                     n_cols=int(s["pvis"].max()) - 1, validate=True), ValueError,
         r"n_cols \(\d+\) must be >= max\(visible_blocks\)"),
        (lambda s, q: q.paged_logits(s["case"].cache, s["pq"], s["case"].block_table, s["prow_req"], s["pvis"],
                                     tile=(64, 4)), TypeError, "tile must be a LogitsTile or None, got tuple"),
        (lambda s, q: q.paged_logits(s["case"].cache, s["pq"], s["case"].block_table, s["prow_req"] - 1, s["pvis"],
                                     validate=True),
         ValueError, r"row_req entries must index block_table rows \[0, 3\), got range \[-1, 1\]"),
        (lambda s, q: q.paged_logits(s["case"].cache, s["pq"], s["case"].block_table, s["prow_req"] + 1, s["pvis"],
                                     validate=True),
         ValueError, r"row_req entries must index block_table rows \[0, 3\), got range \[1, 3\]"),
        (lambda s, q: q.paged_logits("cache", s["pq"], s["case"].block_table, s["prow_req"], s["pvis"]),
         TypeError, "cache must be an IndexerKVCache, got str"),
        (lambda s, q: q.paged_logits(s["case"].cache, s["pq"], s["case"].block_table, s["prow_req"], s["pvis"],
                                     validate=1), TypeError, "validate must be a bool, got int 1"),
        (lambda s, q: q.decode_select(s["case"].cache, s["q"], s["case"].block_table, s["vis"], decode_query_len=2,
                                      topk_blocks=3, validate="no"), TypeError, "validate must be a bool"),
        (lambda s, q: q.decode_select(s["case"].cache, s["q"], s["case"].block_table, s["vis"][:-1],
                                      decode_query_len=2, topk_blocks=3), ValueError,
         r"visible_blocks must have one entry per query row \(6\), got 5"),
        (lambda s, q: q.prefill_select(s["case"].cache, s["pq"], s["case"].block_table, s["qsl"], s["pvis"],
                                       topk_blocks=3, chunk_rows=0),
         ValueError, "chunk_rows must be an int >= 1, got 0"),
        (lambda s, q: q.prefill_row_req(torch.tensor([0, 3, 2, 12]), 12, validate=True), ValueError,
         r"query_start_loc must be non-decreasing, got query_start_loc\[1\] = 3 > query_start_loc\[2\] = 2"),
        (lambda s, q: q.prefill_row_req(torch.tensor([0, 3]), -1), ValueError, "rows must be an int >= 0, got -1"),
        (lambda s, q: q.prefill_row_req([0, 3], 3), TypeError, "query_start_loc must be a torch.Tensor, got list"),
        (lambda s, q: q.store_compressed_keys(s["case"].cache, torch.zeros(4, 64, dtype=torch.bfloat16),
                                              torch.arange(2), torch.zeros(64), fused=1), TypeError,
         "fused must be a bool, got int 1"),
        (lambda s, q: q.normalize_query(s["pq"].float(), torch.zeros(64), eps=float("inf"), dtype=torch.bfloat16),
         ValueError, r"eps must be a float > 0, got inf"),
        (lambda s, q: q.normalize_query(s["pq"].float(), torch.zeros(64), eps=1e-6, dtype=torch.bfloat16,
                                        fused=None), TypeError, "fused must be a bool, got NoneType"),
        (lambda s, q: q.IndexerKVCache.empty("cfg", 2), TypeError, "config must be an IndexerConfig, got str"),
        (lambda s, q: q.IndexerKVCache.empty(s["cfg"], True), ValueError, "num_blocks must be an int >= 1, got True"),
    ],
    ids=[
        "n_cols_below_visible", "tile_type", "row_req_negative", "row_req_past_table", "cache_type",
        "validate_int", "decode_validate", "decode_visible_len", "chunk_rows", "qsl_decreasing", "rows_negative",
        "qsl_list", "store_fused", "eps_inf", "norm_fused", "empty_config", "empty_bool",
    ],
)
def test_public_functions_name_the_bad_argument(setup, call, exc, match):
    s = dict(setup)
    with pytest.raises(exc, match=match):
        call(s, _qsa())


def test_bounds_are_exact_at_the_edges(setup):
    """Accepted right at each limit, refused one past it (a flipped comparison would move the edge)."""
    qsa = _qsa()
    s = setup
    cache, bt = s["case"].cache, s["case"].block_table.clone()
    page = cache.page_size
    # request 2 (9 tokens / ratio 2 = 4 blocks) sees exactly one page; its page 1 may hold anything
    bt[2, 1] = -1
    rows = torch.tensor([2, 2], dtype=torch.int32, device=bt.device)
    q = s["pq"][:2]
    qsa.paged_logits(cache, q, bt, rows, torch.tensor([page, 0], dtype=torch.int32, device=bt.device),
                     validate=True)
    with pytest.raises(ValueError, match=r"block_table\[2, 1\] = -1 is outside"):
        qsa.paged_logits(cache, q, bt, rows, torch.tensor([page + 1, 0], dtype=torch.int32, device=bt.device),
                         validate=True)
    bt[2, 1] = cache.num_blocks - 1  # the last real block is fine
    cap = bt.shape[1] * page
    bt[2, 2:] = cache.num_blocks - 1
    qsa.paged_logits(cache, q, bt, rows, torch.tensor([cap, 1], dtype=torch.int32, device=bt.device),
                     validate=True)
    with pytest.raises(ValueError, match=rf"visible_blocks\[0\] = {cap + 1} exceeds"):
        qsa.paged_logits(cache, q, bt, rows, torch.tensor([cap + 1, 1], dtype=torch.int32, device=bt.device),
                         validate=True)
    bt[2, 0] = cache.num_blocks
    with pytest.raises(ValueError, match=rf"block_table\[2, 0\] = {cache.num_blocks} is outside \[0, "):
        qsa.paged_logits(cache, q, bt, rows, torch.tensor([1, 1], dtype=torch.int32, device=bt.device),
                         validate=True)
    # row_req: the last block-table row is accepted
    qsa.paged_logits(cache, q, s["case"].block_table, rows, torch.tensor([1, 1], dtype=torch.int32, device=bt.device),
                     validate=True)
    # slot mapping: -1 and the last slot are accepted, -2 and num_slots are not
    cfg = s["cfg"]
    n_slots = cache.num_blocks * page
    keys = torch.zeros(4, cfg.head_dim, dtype=torch.bfloat16, device=bt.device)
    w = torch.zeros(cfg.head_dim, device=bt.device)
    qsa.store_compressed_keys(cache, keys, torch.tensor([-1, n_slots - 1], dtype=torch.int32, device=bt.device), w)
    for bad in ([-2, 0], [0, n_slots]):
        with pytest.raises(ValueError, match="slot_mapping entries must be -1"):
            qsa.store_compressed_keys(cache, keys, torch.tensor(bad, dtype=torch.int32, device=bt.device), w)


# --------------------------------------------------- found by mutating kernels/qsa/_checks.py


def test_overlap_ignores_dims_of_size_one_and_answers_a_bool():
    from kernels.qsa import _checks

    x = torch.zeros(8)
    assert _checks.overlapping(x.as_strided((1, 4), (0, 1))) is False  # a size-1 dim's stride steps nowhere
    assert _checks.overlapping(x.as_strided((2, 4), (4, 1))) is False
    assert _checks.overlapping(x.as_strided((2, 4), (3, 1))) is True  # rows share one element
    assert _checks.overlapping(x.as_strided((2, 4), (0, 1))) is True


def test_a_single_row_is_range_checked_like_many():
    from kernels.qsa import _checks

    bt = torch.tensor([[0, 1]])
    with pytest.raises(ValueError, match=r"visible_blocks must be >= 0, got min -1"):
        _checks.visible_within(torch.tensor([-1]), bt, torch.tensor([0]), page_size=4, num_blocks=2)
    with pytest.raises(ValueError, match=r"visible_blocks\[0\] = 9 exceeds the page-table capacity 2 pages"):
        _checks.visible_within(torch.tensor([9]), bt, torch.tensor([0]), page_size=4, num_blocks=2)
    _checks.visible_within(torch.tensor([8]), bt, torch.tensor([0]), page_size=4, num_blocks=2)  # the capacity
    _checks.visible_within(torch.tensor([], dtype=torch.long), bt, torch.tensor([], dtype=torch.long),
                           page_size=4, num_blocks=2)
    with pytest.raises(ValueError, match=r"row_req entries must index block_table rows \[0, 1\), got range "
                                         r"\[1, 1\]"):
        _checks.row_req_within(torch.tensor([1]), 1)
    _checks.row_req_within(torch.tensor([0]), 1)
    _checks.row_req_within(torch.tensor([], dtype=torch.long), 1)
