"""The turboquant store's memory traffic without its arithmetic: how fast can *this access pattern* go?

Each row (token, kv-head) reads a key row and a value row (d128 bf16: 256 B each) and writes 196 B (49 int32
words: 32 from the key, 17 from the value, the size of a d128 K8V4 slot) to its cache slot; random token
slots as in bench_turboquant.py. Rows: slot stride 196 (the real layout) or 256 (sector-aligned), random or
identity slots, rows per program x warps. If the pattern alone reaches the copy bandwidth, the store's gap is
in its arithmetic, not its layout (docs/performance.md). Not a test; prints JSON lines.

    python benchmarks/store_pattern.py OUT.json
"""

import json
import sys
from pathlib import Path

import _common  # noqa: F401  (puts the repo root on sys.path)
import torch
import triton
import triton.language as tl
from _common import copy_bandwidth_gbs, graph_ms, require_cuda


@triton.jit
def _move(k_ptr, v_ptr, c_ptr, slot_ptr, n_rows, H, STRIDE: tl.constexpr, ROWS: tl.constexpr):
    r = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    ok = r < n_rows
    tok = r // H
    head = r % H
    slot = tl.load(slot_ptr + tok, mask=ok, other=0)
    w = tl.arange(0, 64)
    kk = tl.load(k_ptr + r[:, None].to(tl.int64) * 64 + w[None, :], mask=ok[:, None])
    vv = tl.load(v_ptr + r[:, None].to(tl.int64) * 64 + w[None, :], mask=ok[:, None])
    dst = c_ptr + ((slot * H + head).to(tl.int64) * (STRIDE // 4))[:, None]
    tl.store(dst + w[None, :], kk, mask=ok[:, None] & (w[None, :] < 32))
    tl.store(dst + 32 + w[None, :], vv, mask=ok[:, None] & (w[None, :] < 17))

if len(sys.argv) != 2:
    raise SystemExit(f"usage: python benchmarks/{Path(__file__).name} OUT.json")
require_cuda("store_pattern.py")
t, h = 131072, 8
rows = t * h
g = torch.Generator(device="cuda").manual_seed(0)
key = torch.randn(rows, 128, device="cuda", generator=g).to(torch.bfloat16).view(torch.int32)
val = torch.randn(rows, 128, device="cuda", generator=g).to(torch.bfloat16).view(torch.int32)
copy = copy_bandwidth_gbs()
nslots = 2 * t
res = {"copy_gbs": copy, "rows": []}
for stride in (196, 256):
    cache = torch.zeros(nslots * h * stride // 4, dtype=torch.int32, device="cuda")
    for slots_kind in ("random", "identity"):
        slots = (torch.randperm(nslots, device="cuda", generator=g)[:t] if slots_kind == "random"
                 else torch.arange(t, device="cuda"))
        nbytes = rows * (2 * 256 + 196) + t * 8
        for R, W in ((2, 1), (8, 1), (8, 2), (32, 4), (64, 8)):
            def fn(R=R, W=W, stride=stride, slots=slots, cache=cache):
                _move[(triton.cdiv(rows, R),)](key, val, cache, slots, rows, h, STRIDE=stride, ROWS=R, num_warps=W)
            ms = graph_ms(fn)
            pct = nbytes / ms / 1e6 / copy * 100
            row = dict(stride=stride, slots=slots_kind, rows_per_prog=R, warps=W, ms=ms, pct_copy=pct)
            print(json.dumps(row), flush=True)
            res["rows"].append(row)
Path(sys.argv[1]).write_text(json.dumps(res, indent=1))
