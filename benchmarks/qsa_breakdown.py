"""Where a QSA decode selection's time goes: the whole call (do_bench, and CUDA-graph replay), the logits
kernel and the top-k alone (graph replay), and the Python time per call (200 calls without a sync), for
bench_qsa.py's decode shapes, twice. At these sizes the call's host work (~70 us) is as long as its GPU
work, so a do_bench of the call can measure the host (docs/performance.md). Not a test; prints JSON lines.

    python benchmarks/qsa_breakdown.py OUT.json
"""

import json
import sys
import time
from functools import partial
from pathlib import Path

import _common  # noqa: F401  (puts the repo root on sys.path)
import bench_qsa as bq
import torch
from _common import graph_ms, require_cuda, time_ms

from kernels.qsa import decode_select
from kernels.qsa.logits import decode_logits
from kernels.qsa.topk import topk_columns

if len(sys.argv) != 2:
    raise SystemExit(f"usage: python benchmarks/{Path(__file__).name} OUT.json")
require_cuda("qsa_breakdown.py")
out = []
for rep in range(2):
    for label, reqs, tokens, mtp in bq.DECODE:
        for dtype in ("bf16", "fp8"):
            g = torch.Generator(device="cuda").manual_seed(0)
            _, cache, bt, q, vis, _, nb = bq._build(dtype, reqs, tokens, mtp, True, g)
            n_cols = bt.shape[1] * cache.page_size
            sel = partial(decode_select, cache, q, bt, vis, decode_query_len=mtp, topk_blocks=bq.K, validate=False)
            lg = partial(decode_logits, cache, q, bt, vis, decode_query_len=mtp, n_cols=n_cols)
            logits = lg()
            tk = partial(topk_columns, logits, vis, bq.K)
            sel()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(200):
                sel()
            host_us = (time.perf_counter() - t0) / 200 * 1e6
            torch.cuda.synchronize()
            r = dict(rep=rep, case=label, dtype=dtype, do_bench_ms=time_ms(sel), graph_ms=graph_ms(sel),
                     logits_graph_ms=graph_ms(lg), topk_graph_ms=graph_ms(tk), logits_ms=time_ms(lg),
                     topk_ms=time_ms(tk), host_us_per_call=host_us, mb=nb / 2**20)
            print(json.dumps(r), flush=True)
            out.append(r)
            del cache, bt, q, vis, logits
            torch.cuda.empty_cache()
Path(sys.argv[1]).write_text(json.dumps(out, indent=1))
