"""Time tq_store_k8v4 / tq_load_k8v4 on a CUDA GPU against the device's measured copy bandwidth.

Usage: ``python benchmarks/bench_turboquant.py [--json PATH] [--sweep]``. Not a test: nothing asserts a time.

Each row moves ``bytes`` (store: key + value read, slots written, slot_mapping read; load: slots and
slot_mapping read, fp32 key + value written); ``floor ms`` = bytes / copy bandwidth is the least time any
kernel moving them can take, and ``% copy`` = that floor / the measured time. ``call`` times the public
function (every host check included), ``graph`` the same call captured in a CUDA graph (the GPU time alone).
``--sweep`` also times other (rows per program, warps, split 16-byte loads) configs of the int64-word store
kernel at every e4nv shape of a million token-heads or more (the inputs here are contiguous, so that kernel
runs), the numbers behind ``kernels.turboquant.store.words_launch_config``.
"""

from __future__ import annotations

from functools import partial

import torch
from _common import (
    check_larger_than_l2,
    copy_bandwidth_gbs,
    emit,
    graph_ms,
    parse_args,
    require_cuda,
    time_ms,
)

import kernels.turboquant.store as store_mod  # after _common: it puts the repo root on sys.path
from kernels.turboquant import slot_bytes, tq_load_k8v4, tq_store_k8v4  # noqa: E402

# (label, num_tokens, num_kv_heads, head_dim, block_size, src dtype, key format)
SHAPES = [
    ("16k tok x 8 kvh d128 bf16", 16384, 8, 128, 16, torch.bfloat16, "e4nv"),
    ("128k tok x 8 kvh d128 bf16", 131072, 8, 128, 16, torch.bfloat16, "e4nv"),
    ("128k tok x 8 kvh d128 bf16", 131072, 8, 128, 16, torch.bfloat16, "e4b15"),
    ("256k tok x 8 kvh d128 bf16", 262144, 8, 128, 16, torch.bfloat16, "e4nv"),
    ("128k tok x 8 kvh d128 fp16", 131072, 8, 128, 16, torch.float16, "e4nv"),
    ("128k tok x 8 kvh d96 bf16", 131072, 8, 96, 64, torch.bfloat16, "e4nv"),
    ("64k tok x 16 kvh d80 fp32", 65536, 16, 80, 128, torch.float32, "e4nv"),
    ("128k tok x 8 kvh d256 bf16", 131072, 8, 256, 32, torch.bfloat16, "e4nv"),
]
SWEEP_ROWS = (2, 4, 8, 16)
SWEEP_WARPS = (1, 2)
SWEEP_VEC = (False, True)
COLUMNS = [
    ("op", ""),
    ("shape", ""),
    ("fmt", ""),
    ("token_heads", ",d"),
    ("config", ""),
    ("MB", ".1f"),
    ("floor_ms", ".4f"),
    ("call_ms", ".4f"),
    ("call_pct_copy", ".1f"),
    ("graph_ms", ".4f"),
    ("graph_pct_copy", ".1f"),
]


def _case(t: int, h: int, d: int, bs: int, dtype: torch.dtype):
    g = torch.Generator(device="cpu").manual_seed(0)
    key = torch.randn(t, h, d, generator=g).to(dtype).cuda()
    value = torch.randn(t, h, d, generator=g).to(dtype).cuda()
    nb = (2 * t + bs - 1) // bs  # a cache twice as large as needed: slots scattered over it
    cache = torch.zeros(nb, bs, h, slot_bytes(d), dtype=torch.uint8, device="cuda")
    slots = torch.randperm(nb * bs, generator=g)[:t].cuda()
    return key, value, cache, slots


def _row(op, label, fmt, th, config, nbytes, copy_gbs, call, graph):
    floor = nbytes / copy_gbs / 1e6
    return {
        "op": op,
        "shape": label,
        "fmt": fmt,
        "token_heads": th,
        "config": config,
        "MB": nbytes / 1e6,
        "floor_ms": floor,
        "call_ms": call,
        "call_pct_copy": 100 * floor / call if call else float("nan"),
        "graph_ms": graph,
        "graph_pct_copy": 100 * floor / graph,
        "bytes": nbytes,
    }


def main() -> None:
    args = parse_args(__doc__, extra=lambda p: p.add_argument("--sweep", action="store_true"))
    require_cuda("bench_turboquant.py")
    copy = copy_bandwidth_gbs()
    print(f"measured copy bandwidth: {copy:,.0f} GB/s (bytes read + written)")
    rows = []
    default = store_mod.words_launch_config
    swept: set[str] = set()
    for label, t, h, d, bs, dtype, fmt in SHAPES:
        key, value, cache, slots = _case(t, h, d, bs, dtype)
        th = t * h
        slot_total = th * slot_bytes(d)
        idx = slots.numel() * slots.element_size()
        store_bytes = 2 * key.numel() * key.element_size() + slot_total + idx
        load_bytes = slot_total + 2 * key.numel() * 4 + idx
        check_larger_than_l2(store_bytes, label)
        store = partial(tq_store_k8v4, key, value, cache, slots, fp8_format=fmt)
        load = partial(tq_load_k8v4, cache, slots, head_dim=d, fp8_format=fmt)
        r0, w0, v0 = default(d, key.element_size())
        cfg = f"{r0}r/{w0}w{'/vec' if v0 else ''}"
        rows.append(_row("store", label, fmt, th, cfg, store_bytes, copy, time_ms(store), graph_ms(store)))
        rows.append(_row("load", label, fmt, th, "-", load_bytes, copy, time_ms(load), graph_ms(load)))
        if args.sweep and fmt == "e4nv" and th >= 1 << 20 and label not in swept:
            swept.add(label)
            for r in SWEEP_ROWS:
                for w in SWEEP_WARPS:
                    for v in SWEEP_VEC:
                        store_mod.words_launch_config = lambda head_dim, elem_size, r=r, w=w, v=v: (r, w, v)
                        try:
                            ms = graph_ms(store)
                        finally:
                            store_mod.words_launch_config = default
                        c = f"{r}r/{w}w{'/vec' if v else ''}"
                        rows.append(_row("store-sweep", label, fmt, th, c, store_bytes, copy, 0.0, ms))
        del key, value, cache, slots
        torch.cuda.empty_cache()
    emit("turboquant K8V4 store / load", COLUMNS, rows, args.json, extra={"copy_gbs": copy})


if __name__ == "__main__":
    main()
