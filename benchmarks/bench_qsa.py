"""Time the QSA indexer on a GPU: prefill logits, prefill selection and MTP decode selection, each with a
BF16 and an FP8 cache, beside torch eager doing the same work and the byte-limit floor.

    python benchmarks/bench_qsa.py [--json PATH]

Every row: ``bf16_ms``, ``fp8_ms`` (the kernels, each called as a user calls it: the selections with their
default ``validate=False``, which never syncs), ``eager_bf16_ms`` / ``eager_fp8_ms`` (gather + matmul +
relu + head sum + ``torch.topk`` in torch, fp8 keys upcast to bf16 for the matmul), ``speedup`` = bf16_ms / fp8_ms,
``byte_limit`` = bf16 bytes / fp8 bytes (the speedup a purely memory-bound kernel would reach) and
``fp8_floor_ms`` = fp8 bytes / the measured copy bandwidth; ``*_graph_ms`` / ``graph_speedup``: the same
call captured in a CUDA graph and replayed (GPU time alone, as a decode step under CUDA graphs runs; at
decode sizes the Python launch work of a call, ~70 us, is as long as the GPU work, so ``*_ms`` depends on
the host CPU; NaN where capture failed); ``*_host_us``: the host time of one call (median of
``time.perf_counter`` around a call started with the GPU idle, 50 calls: what the Python side costs; a call
that synchronized would show the GPU time here too). Bytes counted: keys each row may see (once per
request), queries, fp32 logits written. Inputs are larger than L2 (benchmarks/_common.py refuses others).
Not a test: nothing here asserts a time. Inputs are random normalized keys and queries built on the
device (the timings do not depend on their values).
"""

from __future__ import annotations

from functools import partial

import _common  # noqa: F401  (puts the repo root on sys.path)
import torch
from _common import check_larger_than_l2, copy_bandwidth_gbs, emit, graph_ms, host_us, parse_args, require_cuda, time_ms

from kernels.qsa import (
    IndexerConfig,
    IndexerKVCache,
    decode_select,
    normalize_query,
    paged_logits,
    prefill_row_req,
    prefill_select,
)
from kernels.qsa.inputs import REALISTIC

K = REALISTIC["token_topk"] // REALISTIC["compress_ratio"]
# (label, requests, tokens per request, query rows per request: MTP length (decode) or prefill rows)
# fp8 keys must exceed the H200 L2 (60 MiB): 32x32k (32 MiB of fp8 keys) and 8x128k (32 MiB) do not.
DECODE = [("decode 64x32k mtp1", 64, 32768, 1), ("decode 64x32k mtp2", 64, 32768, 2),
          ("decode 64x64k mtp1", 64, 65536, 1), ("decode 16x128k mtp4", 16, 131072, 4),
          ("decode 8x256k mtp2", 8, 262144, 2), ("decode 128x16k mtp1", 128, 16384, 1)]
PREFILL = [("prefill 1x8k", 1, 8192, 8192), ("prefill 4x16k last 4k", 4, 16384, 4096)]
CHUNK_ROWS = 4096


def _build(dtype: str, requests: int, tokens: int, rows_per_req: int, decode: bool, g: torch.Generator):
    cfg = IndexerConfig(**REALISTIC, indexer_kv_dtype=dtype)
    page, ratio, h, d = cfg.page_size, cfg.compress_ratio, cfg.num_heads, cfg.head_dim
    n = tokens // ratio
    pages = -(-n // page)
    blocks = requests * pages
    w = torch.zeros(d, device="cuda")
    raw = torch.randn(blocks * page, 1, d, device="cuda", generator=g)
    kv = normalize_query(raw, w, eps=cfg.rms_eps, dtype=cfg.dtype).view(blocks, page, 1, d)
    cache = IndexerKVCache(kv, cfg)
    bt = torch.randperm(blocks, device="cuda", generator=g).to(torch.int32).view(requests, pages)
    rows = requests * rows_per_req
    q = normalize_query(torch.randn(rows, h, d, device="cuda", generator=g), w, eps=cfg.rms_eps, dtype=cfg.dtype)
    if decode:  # MTP row j of L sees the prefix up to its own token
        j = torch.arange(rows_per_req, device="cuda").repeat(requests)
        vis = ((tokens - (rows_per_req - 1 - j)) // ratio).to(torch.int32)
        qsl = None
    else:  # the last rows_per_req tokens of each request
        p = torch.arange(tokens - rows_per_req, tokens, device="cuda").repeat(requests)
        vis = ((p + 1) // ratio).to(torch.int32)
        qsl = torch.arange(0, rows + 1, rows_per_req, device="cuda", dtype=torch.int32)
    key_bytes = requests * n * d * kv.element_size()
    out_bytes = rows * n * 4
    return cfg, cache, bt, q, vis, qsl, key_bytes + q.numel() * q.element_size() + out_bytes


def _eager_decode(cache, bt, q, vis, mtp, k):
    """torch eager decode selection: gather each request's keys once, one bmm for its MTP rows."""
    page = cache.page_size
    b = bt.shape[0]
    n = bt.shape[1] * page
    cols = torch.arange(n, device=q.device)
    keys = cache.kv[bt[:, cols // page].long(), cols % page, 0].to(torch.bfloat16)  # [B, n, D]
    s = torch.bmm(q.to(torch.bfloat16).view(b, -1, q.shape[2]), keys.transpose(1, 2))  # [B, L*H, n]
    logits = s.float().relu_().view(b, mtp, q.shape[1], n).sum(2).view(b * mtp, n)
    logits.masked_fill_(cols[None, :] >= vis[:, None], float("-inf"))
    return torch.topk(logits, k, dim=1).indices


def _eager_prefill_logits(cache, bt, q, vis, rows_per_req, k=None):
    """torch eager prefill logits (and top-k when ``k``): per request, CHUNK_ROWS rows at a time."""
    page = cache.page_size
    n = bt.shape[1] * page
    cols = torch.arange(n, device=q.device)
    outs = []
    for b in range(bt.shape[0]):
        keys = cache.kv[bt[b, cols // page].long(), cols % page, 0].to(torch.bfloat16)  # [n, D]
        for r0 in range(b * rows_per_req, (b + 1) * rows_per_req, CHUNK_ROWS):
            qc = q[r0 : r0 + CHUNK_ROWS].to(torch.bfloat16)
            s = torch.matmul(qc, keys.T)  # [R, H, n]
            logits = s.float().relu_().sum(1).masked_fill_(cols[None, :] >= vis[r0 : r0 + CHUNK_ROWS, None],
                                                          float("-inf"))
            outs.append(logits if k is None else torch.topk(logits, k, dim=1).indices)
    return outs


def _prefill_logits(cache, bt, q, rr, vis, out):
    """The logits part of prefill_select: CHUNK_ROWS rows at a time into one reused buffer."""
    for r0 in range(0, q.shape[0], out.shape[0]):
        r1 = min(q.shape[0], r0 + out.shape[0])
        paged_logits(cache, q[r0:r1], bt, rr[r0:r1], vis[r0:r1], n_cols=out.shape[1], out=out[: r1 - r0],
                     validate=False)


def _graph_or_nan(fn) -> float:
    try:
        return graph_ms(fn)
    except RuntimeError as e:  # a call that cannot be captured is a finding for the table, not a crash
        print(f"CUDA graph capture failed: {str(e)[:200]}", flush=True)
        return float("nan")


def main() -> None:
    args = parse_args(__doc__.split("\n\n")[0])
    require_cuda("bench_qsa.py")
    bw = copy_bandwidth_gbs()
    rows = []

    def row(label, fns, nbytes):
        r = {"case": label}
        for dtype in ("bf16", "fp8"):
            check_larger_than_l2(nbytes[dtype], f"{label} {dtype}")
            r[f"{dtype}_ms"] = time_ms(fns[dtype])
            r[f"eager_{dtype}_ms"] = time_ms(fns[f"eager_{dtype}"])
            r[f"{dtype}_graph_ms"] = _graph_or_nan(fns[dtype])
            r[f"{dtype}_host_us"] = host_us(fns[dtype])
        r["speedup"] = r["bf16_ms"] / r["fp8_ms"]
        r["graph_speedup"] = r["bf16_graph_ms"] / r["fp8_graph_ms"]
        r["byte_limit"] = nbytes["bf16"] / nbytes["fp8"]
        r["fp8_floor_ms"] = nbytes["fp8"] / (bw * 1e6)
        r["fp8_mb"] = nbytes["fp8"] / 2**20
        print(r, flush=True)
        rows.append(r)

    for label, reqs, tokens, mtp in DECODE:
        fns, nbytes = {}, {}
        for dtype in ("bf16", "fp8"):
            g = torch.Generator(device="cuda").manual_seed(0)
            _, cache, bt, q, vis, _, nb = _build(dtype, reqs, tokens, mtp, True, g)
            nbytes[dtype] = nb
            fns[dtype] = partial(decode_select, cache, q, bt, vis, decode_query_len=mtp, topk_blocks=K)
            fns[f"eager_{dtype}"] = partial(_eager_decode, cache, bt, q, vis, mtp, K)
        row(f"{label} select", fns, nbytes)
        del fns
        torch.cuda.empty_cache()
    for label, reqs, tokens, qrows in PREFILL:
        logit_fns, select_fns, nbytes = {}, {}, {}
        for dtype in ("bf16", "fp8"):
            g = torch.Generator(device="cuda").manual_seed(0)
            _, cache, bt, q, vis, qsl, nb = _build(dtype, reqs, tokens, qrows, False, g)
            nbytes[dtype] = nb
            rr = prefill_row_req(qsl, q.shape[0])
            out = torch.empty(min(CHUNK_ROWS, q.shape[0]), bt.shape[1] * cache.page_size, device="cuda")
            logit_fns[dtype] = partial(_prefill_logits, cache, bt, q, rr, vis, out)
            logit_fns[f"eager_{dtype}"] = partial(_eager_prefill_logits, cache, bt, q, vis, qrows)
            select_fns[dtype] = partial(prefill_select, cache, q, bt, qsl, vis, topk_blocks=K, chunk_rows=CHUNK_ROWS)
            select_fns[f"eager_{dtype}"] = partial(_eager_prefill_logits, cache, bt, q, vis, qrows, K)
        row(f"{label} logits", logit_fns, nbytes)
        row(f"{label} select", select_fns, nbytes)
        del logit_fns, select_fns
        torch.cuda.empty_cache()
    columns = [("case", ""), ("bf16_ms", ".3f"), ("fp8_ms", ".3f"), ("eager_bf16_ms", ".3f"), ("eager_fp8_ms", ".3f"),
               ("speedup", ".2f"), ("bf16_graph_ms", ".3f"), ("fp8_graph_ms", ".3f"), ("graph_speedup", ".2f"),
               ("bf16_host_us", ".0f"), ("fp8_host_us", ".0f"), ("byte_limit", ".2f"), ("fp8_floor_ms", ".3f"),
               ("fp8_mb", ".0f")]
    emit("QSA indexer (REALISTIC: 64 heads x d128, ratio 4, 2048 tokens = 512 blocks selected, pages of 64)",
         columns, rows, args.json, extra={"copy_bandwidth_gbs": bw, "k_blocks": K})


if __name__ == "__main__":
    main()
