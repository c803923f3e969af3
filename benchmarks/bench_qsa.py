"""Time the QSA indexer: prefill logits and paged decode selection, bf16 vs fp8 cache (GPU only).

Usage: ``python benchmarks/bench_qsa.py`` (table), ``--sweep`` also times other logits tiles per dtype so
``kernels.qsa.logits.TILES`` can be re-tuned. Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
from functools import partial

import torch
import triton.testing

from kernels.qsa import (
    IndexerConfig,
    LogitsTile,
    decode_select,
    paged_logits,
    prefill_select,
)
from kernels.qsa.logits import TILES
from kernels.qsa.testing import REALISTIC, build_case, decode_rows, prefill_rows

RATIO, TOKEN_TOPK = REALISTIC["compress_ratio"], REALISTIC["token_topk"]
# (label, tokens per request, query rows per request (prefill) or MTP length (decode))
PREFILL = [("prefill 1x8k", [8192], [8192]), ("prefill 4x4k+ctx", [16384] * 4, [4096] * 4)]
DECODE = [
    ("decode 32x32k mtp1", [32768] * 32, 1),
    ("decode 64x8k mtp2", [8192] * 64, 2),
    ("decode 8x128k mtp4", [131072] * 8, 4),
]
SWEEP = [LogitsTile(32, 4), LogitsTile(64, 4), LogitsTile(64, 8), LogitsTile(128, 4), LogitsTile(128, 8)]


def _cfg(dtype: str) -> IndexerConfig:
    return IndexerConfig(**REALISTIC, indexer_kv_dtype=dtype)  # the GPU tests' shape (tests/test_qsa_gpu.py)


def _ms(fn) -> float:
    return float(triton.testing.do_bench(fn))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sweep", action="store_true", help="also time alternative logits tiles")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("bench_qsa.py needs a CUDA GPU")
    rows = []
    for label, tokens, qlens in PREFILL:
        for dtype in ("bf16", "fp8"):
            g = torch.Generator().manual_seed(0)
            case = build_case(_cfg(dtype), tokens, rng=g, device="cuda")
            qsl, rr, q, vis = prefill_rows(case, qlens, rng=g)
            n = int(vis.max())
            tiles = SWEEP if args.sweep else [TILES[case.cache.dtype]]
            for tile in tiles:
                fn = partial(
                    paged_logits,
                    case.cache,
                    q,
                    case.block_table,
                    rr,
                    vis,
                    n_cols=n,
                    tile=tile,
                    validate=False,
                )
                rows.append((f"{label} logits", dtype, f"{tile.block_n}/{tile.num_warps}w", _ms(fn)))
            fn = partial(
                prefill_select, case.cache, q, case.block_table, qsl, vis, topk_blocks=TOKEN_TOPK // RATIO
            )
            rows.append((f"{label} select", dtype, "default", _ms(fn)))
            torch.cuda.empty_cache()
    for label, tokens, mtp in DECODE:
        for dtype in ("bf16", "fp8"):
            g = torch.Generator().manual_seed(0)
            case = build_case(_cfg(dtype), tokens, rng=g, device="cuda")
            _, q, vis = decode_rows(case, mtp, rng=g)
            fn = partial(
                decode_select,
                case.cache,
                q,
                case.block_table,
                vis,
                decode_query_len=mtp,
                topk_blocks=TOKEN_TOPK // RATIO,
            )
            rows.append((f"{label} select", dtype, "default", _ms(fn)))
            torch.cuda.empty_cache()
    w = max(len(r[0]) for r in rows)
    print(f"{'case':<{w}}  {'dtype':<5}  {'tile':<8}  {'ms':>9}")
    for r in rows:
        print(f"{r[0]:<{w}}  {r[1]:<5}  {r[2]:<8}  {r[3]:>9.3f}")


if __name__ == "__main__":
    main()
