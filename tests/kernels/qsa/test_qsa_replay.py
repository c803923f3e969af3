"""decode_select beyond numerics: replayed from a CUDA graph on fresh queries and visible counts (its docstring
says it is capturable), the same bits on every call, and each request's selection independent of the requests
batched with it. On the interpreter lane with a small indexer (the two-call replay check; the kernels' logic),
on the GPU with the realistic one."""

from __future__ import annotations

import pytest
import torch

from harness.replay import assert_batch_invariant, assert_deterministic

#: decode rows per request (MTP)
MTP = 2


#: GPU request lengths: short enough for the bitwise top-k, long enough for the radix one
TOKENS_GPU = {"bitwise-topk": [4099, 17, 9000], "radix-topk": [70001, 30000]}


def _setup(dtype: str, device: str, rng: torch.Generator, topk: str = "bitwise-topk"):
    import kernels.qsa as qsa
    from kernels.qsa.inputs import REALISTIC, build_case, decode_rows

    if device == "cuda":
        cfg = qsa.IndexerConfig(**REALISTIC, indexer_kv_dtype=dtype)
        tokens, k = TOKENS_GPU[topk], cfg.topk_blocks
    else:  # small: the interpreter runs every program on the CPU
        cfg = qsa.IndexerConfig(num_heads=2, head_dim=64, compress_ratio=2, token_topk=6, page_size=4,
                                indexer_kv_dtype=dtype)
        tokens, k = [20, 9, 14], 3
    case = build_case(cfg, tokens, rng=rng, device=device)
    _, q, vis = decode_rows(case, MTP, rng=rng)
    _, q2, vis2 = decode_rows(case, MTP, rng=rng)

    def select(q, visible_blocks):
        return qsa.decode_select(case.cache, q, case.block_table, visible_blocks, decode_query_len=MTP,
                                 topk_blocks=k)

    def per_request(q, block_table, visible_blocks):
        """[B, MTP, ...] in and out: a request's rows stay together in every split."""
        b = q.shape[0]
        got = qsa.decode_select(case.cache, q.flatten(0, 1), block_table, visible_blocks.flatten(),
                                decode_query_len=MTP, topk_blocks=k)
        return got.unflatten(0, (b, MTP))

    batched = (q.unflatten(0, (-1, MTP)), case.block_table, vis.unflatten(0, (-1, MTP)))
    return select, per_request, batched, dict(q=q, visible_blocks=vis), dict(q=q2, visible_blocks=vis2)


@pytest.mark.graph_replay
@pytest.mark.parametrize("dtype", ["bf16", "fp8"])
@pytest.mark.parametrize("topk", list(TOKENS_GPU))
def test_decode_select_replays_from_a_graph(dtype, topk, rng, device, graph_replay):
    if device != "cuda" and topk == "radix-topk":
        pytest.skip("the radix top-k needs tens of thousands of tokens: too many for the interpreter lane")
    select, _, _, inputs, fresh = _setup(dtype, device, rng, topk)
    got = graph_replay(select, inputs=inputs, fresh=fresh)
    assert got.shape == (inputs["q"].shape[0], got.shape[1]) and got.dtype in (torch.int32, torch.int64)


@pytest.mark.parametrize("dtype", ["bf16", "fp8"])
def test_decode_select_is_deterministic_and_batch_invariant(dtype, rng, device):
    select, per_request, batched, inputs, _ = _setup(dtype, device, rng)
    assert_deterministic(select, inputs["q"], inputs["visible_blocks"], repeats=20 if device == "cuda" else 2)
    assert_batch_invariant(per_request, batched)  # each request alone, then reversed
