"""The default QSA selections never synchronize with the host and can be captured in a CUDA graph (issue 25);
unvalidated bad metadata stays inside the tensors, with the documented result.

On a GPU: torch's sync debug mode turns any synchronizing op into an error, and a captured call is replayed
on new inputs. On the interpreter lane (no CUDA): every aten op of the call is recorded, and none of those
that make a CUDA host wait may appear (``.item()``/``int()``/``bool()`` of a tensor, ``nonzero``,
``masked_select``, ``unique``, ``equal``, ...); two calls whose metadata differ only in values issue the same
ops (nothing is sized by the data, as a CUDA graph needs); and the recorder does see the syncs of
``validate=True``, so it is not blind.
"""

from __future__ import annotations

from collections import Counter

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

#: aten ops that read device data on the host (a stream sync on CUDA).
SYNCING = ("_local_scalar_dense", "nonzero", "masked_select", "unique", "equal", "is_nonzero", "allclose",
           "repeat_interleave.Tensor", "item")


class _Ops(TorchDispatchMode):
    """Records the name of every aten op run under it."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func.name() if hasattr(func, "name") else func))
        return func(*args, **(kwargs or {}))

    def syncing(self) -> list[str]:
        return [op for op in self.ops if any(s in op for s in SYNCING)]


def _qsa():
    import kernels.qsa as qsa

    return qsa


@pytest.fixture
def small(rng, device):
    from kernels.qsa.inputs import build_case, decode_rows, prefill_rows

    qsa = _qsa()
    cfg = qsa.IndexerConfig(num_heads=2, head_dim=64, compress_ratio=2, token_topk=6, page_size=4,
                            indexer_kv_dtype="fp8")
    case = build_case(cfg, [20, 9], rng=rng, device=device)
    _, q, vis = decode_rows(case, 2, rng=rng)
    qsl, row_req, pq, pvis = prefill_rows(case, [5, 3], rng=rng)
    return dict(qsa=qsa, case=case, q=q, vis=vis, qsl=qsl, row_req=row_req, pq=pq, pvis=pvis)


def _calls(s, vis=None, pvis=None, **kw):
    qsa, case = s["qsa"], s["case"]
    dec = qsa.decode_select(case.cache, s["q"], case.block_table, s["vis"] if vis is None else vis,
                            decode_query_len=2, topk_blocks=3, **kw)
    pre = qsa.prefill_select(case.cache, s["pq"], case.block_table, s["qsl"], s["pvis"] if pvis is None else pvis,
                             topk_blocks=3, chunk_rows=4, **kw)
    return dec, pre


@pytest.fixture
def host_ops_only(monkeypatch):
    """Kernel launches run outside the recorder (on the interpreter a launch's own tensor work is the GPU's
    on a real device) and are recorded as ``launch <kernel>``."""
    from torch.utils._python_dispatch import _disable_current_modes

    from kernels import _launch

    call = _launch.Launcher.__call__

    def launch(self, grid, args, config):
        with _disable_current_modes() as modes:
            for m in modes:
                if isinstance(m, _Ops):
                    m.ops.append(f"launch {self.kernel.__name__}")
            return call(self, grid, args, config)

    monkeypatch.setattr(_launch.Launcher, "__call__", launch)


@pytest.mark.interp_only
def test_default_calls_issue_no_syncing_op_and_the_same_ops_for_any_values(small, host_ops_only):
    want = _calls(small)  # compiles / warms up
    with _Ops() as rec:
        got = _calls(small)
    assert sum(op.startswith("launch ") for op in rec.ops) >= 4, f"the recorder missed the launches: {rec.ops}"
    assert rec.syncing() == [], f"the default call ran ops that sync with the host: {rec.syncing()}"
    assert all(torch.equal(g, w) for g, w in zip(got, want, strict=True))
    # other visible counts, same shapes: the same ops (a CUDA graph replays a fixed op sequence)
    vis, pvis = small["vis"] // 2, small["pvis"] // 3
    with _Ops() as other:
        _calls(small, vis=vis, pvis=pvis)
    assert Counter(other.ops) == Counter(rec.ops)
    with _Ops() as checked:
        _calls(small, validate=True)
    assert checked.syncing(), "validate=True reads the metadata on the host; the recorder must see it"


@pytest.mark.gpu
def test_default_calls_do_not_sync_gpu(small):
    want = _calls(small)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        got = _calls(small)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert all(torch.equal(g, w) for g, w in zip(got, want, strict=True))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bf16", "fp8"])
@pytest.mark.parametrize("tokens", [[4099, 17, 9000], [70001, 30000]], ids=["bitwise-topk", "radix-topk"])
def test_default_decode_select_replays_in_a_cuda_graph_gpu(dtype, tokens, rng, device):
    """Captured once, replayed after new queries and visible counts are copied into the static inputs: the
    same selection as an eager call on those inputs."""
    from kernels.qsa.inputs import REALISTIC, build_case, decode_rows

    qsa = _qsa()
    cfg = qsa.IndexerConfig(**REALISTIC, indexer_kv_dtype=dtype)
    case = build_case(cfg, tokens, rng=rng, device=device)
    _, q, vis = decode_rows(case, 2, rng=rng)
    _, q2, vis2 = decode_rows(case, 2, rng=rng)
    s_q, s_vis = q.clone(), vis.clone()

    def call():
        return qsa.decode_select(case.cache, s_q, case.block_table, s_vis, decode_query_len=2,
                                 topk_blocks=cfg.topk_blocks)

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        call()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = call()
    s_q.copy_(q2)
    s_vis.copy_(vis2)
    graph.replay()
    torch.cuda.synchronize()
    want = qsa.decode_select(case.cache, q2, case.block_table, vis2, decode_query_len=2,
                             topk_blocks=cfg.topk_blocks)
    assert torch.equal(out, want), "the replayed selection differs from an eager call on the same inputs"


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bf16", "fp8"])
def test_cached_launches_equal_triton_launches_gpu(dtype, rng, device, monkeypatch):
    """kernels._launch: the compiled-handle launches give the bits of ``kernel[grid](...)``, also when an
    argument's alignment changes between calls (a new specialization, compiled on first use)."""
    from kernels import _launch
    from kernels.qsa.inputs import REALISTIC, build_case, decode_rows

    qsa = _qsa()
    cfg = qsa.IndexerConfig(**REALISTIC, indexer_kv_dtype=dtype)
    case = build_case(cfg, [40000, 513, 9000], rng=rng, device=device)
    _, q, vis = decode_rows(case, 3, rng=rng)
    wide = torch.zeros(vis.shape[0] + 1, dtype=vis.dtype, device=device)
    wide[1:] = vis
    got = []
    for enabled in (True, False):
        monkeypatch.setattr(_launch, "ENABLED", enabled)
        for v in (vis, wide[1:], vis):  # 16-byte aligned, not, aligned again
            got.append(qsa.decode_select(case.cache, q, case.block_table, v, decode_query_len=3,
                                         topk_blocks=cfg.topk_blocks))
    assert all(torch.equal(g, got[-1]) for g in got)


# --- unvalidated bad metadata: inside the tensors, with the documented result ----------------------------


def test_unvalidated_decode_logits_clamp_visible_and_skip_pages_outside_the_cache(small):
    """Visible counts past the page table or below 0 are clamped; a page whose block id is outside the cache
    is not read and its columns score -inf; nothing else changes."""
    from kernels.qsa.logits import decode_logits

    case = small["case"]
    bt, vis, q = case.block_table, small["vis"], small["q"]
    page = case.config.page_size
    n = bt.shape[1] * page
    want = decode_logits(case.cache, q, bt, vis, decode_query_len=2, n_cols=n)
    bad_vis = vis.clone()
    bad_vis[0], bad_vis[3] = n + 1000, -5
    clamped = bad_vis.clamp(0, n)
    assert torch.equal(decode_logits(case.cache, q, bt, bad_vis, decode_query_len=2, n_cols=n),
                       decode_logits(case.cache, q, bt, clamped, decode_query_len=2, n_cols=n))
    bad_bt = bt.clone()
    bad_bt[0, 1], bad_bt[0, 2] = case.cache.num_blocks, -7
    got = decode_logits(case.cache, q, bad_bt, vis, decode_query_len=2, n_cols=n)
    expect = want.clone()
    expect[0:2, page : 3 * page] = float("-inf")  # request 0 (rows 0, 1), pages 1 and 2
    assert torch.equal(got, expect)


def test_unvalidated_paged_logits_give_rows_outside_the_table_nothing(small):
    qsa, case = small["qsa"], small["case"]
    bt, pq, row_req, pvis = case.block_table, small["pq"], small["row_req"], small["pvis"]
    n = bt.shape[1] * case.config.page_size
    want = qsa.paged_logits(case.cache, pq, bt, row_req, pvis, n_cols=n)
    bad = row_req.clone()
    bad[0], bad[-1] = -1, bt.shape[0]
    got = qsa.paged_logits(case.cache, pq, bt, bad, pvis, n_cols=n)
    assert bool(torch.isneginf(got[0]).all() and torch.isneginf(got[-1]).all())
    assert torch.equal(got[1:-1], want[1:-1])
    big, cap = pvis.clone(), pvis.clone()
    big[1], cap[1] = 10**6, n
    assert torch.equal(qsa.paged_logits(case.cache, pq, bt, row_req, big, n_cols=n),
                       qsa.paged_logits(case.cache, pq, bt, row_req, cap, n_cols=n))


def test_unvalidated_paged_logits_row_just_past_the_table_reads_no_block_ids(small):
    """row_req == the number of page-table rows, with the memory just past the table holding valid block ids (the
    table is a view of a longer one): the row must still see nothing, not the next request's pages."""
    qsa, case = small["qsa"], small["case"]
    bt, pq, row_req, pvis = case.block_table, small["pq"], small["row_req"], small["pvis"]
    n = bt.shape[1] * case.config.page_size
    longer = torch.cat([bt, bt[:1]])
    view = longer[: bt.shape[0]]
    assert view.is_contiguous() and view.data_ptr() == longer.data_ptr()
    bad, vis = row_req.clone(), pvis.clone()
    bad[-1], vis[-1] = bt.shape[0], n
    got = qsa.paged_logits(case.cache, pq, view, bad, vis, n_cols=n)
    assert bool(torch.isneginf(got[-1]).all()), "a row past the page table scored columns"


def test_unvalidated_topk_clamps_visible_to_the_row(rng, device):
    from kernels.qsa.topk import topk_columns

    x = torch.randn(3, 40, generator=rng).to(device)
    vis = torch.tensor([1000, -3, 17], dtype=torch.int32, device=device)
    assert torch.equal(topk_columns(x, vis, 5), topk_columns(x, vis.clamp(0, 40), 5))


def test_unvalidated_prefill_rows_outside_every_request_see_nothing(device):
    qsa = _qsa()
    good = torch.tensor([0, 3, 3, 5], dtype=torch.int32, device=device)
    assert qsa.prefill_row_req(good, 5).tolist() == [0, 0, 0, 2, 2]
    assert qsa.prefill_row_req(good, 5).dtype == torch.int32
    # ends before the last row: that row belongs to no request and gets B (past the page table)
    assert qsa.prefill_row_req(torch.tensor([0, 2, 3], device=device), 4).tolist() == [0, 0, 1, 2]
