"""Time tq_store_k8v4 / tq_load_k8v4 on a CUDA GPU against the device's measured copy bandwidth.

Usage: ``python benchmarks/bench_turboquant.py [--json PATH] [--sweep] [--sweep-load] [--check-old]``. Not a
test: nothing asserts a time.

Each row moves ``bytes`` (store: key + value read, slots written, slot_mapping read; load: slots and
slot_mapping read, fp32 key + value written); ``floor ms`` = bytes / copy bandwidth is the least time any
kernel moving them can take, and ``% copy`` = that floor / the measured time. ``call`` times the public
function (every host check included), ``graph`` the same call captured in a CUDA graph (the GPU time alone).
``host us`` is the Python time of one public call with the GPU idle: the median over 200 calls of
``time.perf_counter`` around the call, each after ``torch.cuda.synchronize()``.
``--sweep`` also times other (rows per program, warps, split 16-byte loads) configs of the int64-word store
kernel at every e4nv shape of a million token-heads or more (the inputs here are contiguous, so that kernel
runs), the numbers behind ``kernels.turboquant.store.words_launch_config``; ``--sweep-load`` times (rows,
warps) configs of the load's word kernel at those shapes (``kernels.turboquant.load.load_words_launch_config``).
``--check-old`` compares the load's output bits with the pre-issue-25 kernel
(``tests/kernels/turboquant/tq_load_v1.py``) at every shape and on caches of random bytes, and times it.
"""

from __future__ import annotations

import sys
import time
from concurrent.futures import ProcessPoolExecutor
from functools import partial

import torch
from _common import (
    ROOT,
    check_larger_than_l2,
    copy_bandwidth_gbs,
    emit,
    graph_ms,
    host_us,
    parse_args,
    require_cuda,
    time_ms,
)

import kernels.turboquant.load as load_mod  # after _common: it puts the repo root on sys.path
import kernels.turboquant.store as store_mod
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
LOAD_SWEEP = [(r, w) for r in (2, 4, 8, 16, 32) for w in (1, 2, 4) if r * w <= 64]
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
    ("host_us", ".1f"),
]


def _case(t: int, h: int, d: int, bs: int, dtype: torch.dtype):
    g = torch.Generator(device="cpu").manual_seed(0)
    key = torch.randn(t, h, d, generator=g).to(dtype).cuda()
    value = torch.randn(t, h, d, generator=g).to(dtype).cuda()
    nb = (2 * t + bs - 1) // bs  # a cache twice as large as needed: slots scattered over it
    cache = torch.zeros(nb, bs, h, slot_bytes(d), dtype=torch.uint8, device="cuda")
    slots = torch.randperm(nb * bs, generator=g)[:t].cuda()
    return key, value, cache, slots


def _row(op, label, fmt, th, config, nbytes, copy_gbs, call, graph, host=float("nan")):
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
        "host_us": host,
        "bytes": nbytes,
    }


def _load_config(r: int, w: int):
    return lambda head_dim: (r, w)


def _precompile_load(job) -> str:
    """Compile one (shape, load config) in a worker process, so the parent finds it in Triton's disk cache.
    Same dtypes, strides and divisibility as the timed call (sizes scaled down by 512, multiples of 16)."""
    (label, t, h, d, bs, _dtype, fmt), (r, w) = job
    t = max(16, t // 512)
    nb = (2 * t + bs - 1) // bs
    cache = torch.zeros(nb, bs, h, slot_bytes(d), dtype=torch.uint8, device="cuda")
    slots = torch.arange(t, device="cuda")
    load_mod.load_words_launch_config = _load_config(r, w)
    tq_load_k8v4(cache, slots, head_dim=d, fp8_format=fmt)
    torch.cuda.synchronize()
    return f"{label} {r}r/{w}w"


def _old_load():
    sys.path.insert(0, str(ROOT / "tests" / "kernels" / "turboquant"))
    from tq_load_v1 import builds_on_gpu, load_v1

    return builds_on_gpu, load_v1


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> int:
    """Elements whose fp32 bits differ."""
    return int((a.view(torch.int32) != b.view(torch.int32)).sum())


RANDOM_DIMS = (1, 2, 3, 7, 8, 13, 16, 24, 33, 80, 96, 128, 256)


def _check_old_random(job) -> str:
    """New vs old load (in a worker process) on a cache of random bytes (every code, every fp16 scale/zero
    pattern), slots negative, past the cache and repeated: the number of elements whose bits differ."""
    d, fmt = job
    builds_on_gpu, load_v1 = _old_load()
    if not builds_on_gpu(d, fmt):
        return f"random d{d} {fmt}: the old kernel does not build on a GPU here (see tq_load_v1)"
    g = torch.Generator(device="cpu").manual_seed(d)
    nb, bs, h = 64, 16, 4
    cache = torch.randint(0, 256, (nb, bs, h, slot_bytes(d)), generator=g, dtype=torch.int32).to(torch.uint8).cuda()
    slots = torch.randint(-2, nb * bs + 50, (3000,), generator=g).cuda()
    k, v = tq_load_k8v4(cache, slots, head_dim=d, fp8_format=fmt)
    k0, v0 = load_v1(cache, slots, d, fmt)
    return f"random d{d} {fmt}: {_same_bits(k, k0) + _same_bits(v, v0)} of {2 * k.numel()} elements differ"


def main() -> None:
    def options(p):
        p.add_argument("--sweep", action="store_true")
        p.add_argument("--sweep-rows", type=int, nargs="+", default=list(SWEEP_ROWS), help="--sweep's rows per program")
        p.add_argument("--sweep-warps", type=int, nargs="+", default=list(SWEEP_WARPS), help="--sweep's warps")
        p.add_argument("--sweep-vec", type=int, nargs="+", default=[int(v) for v in SWEEP_VEC], choices=(0, 1),
                       help="--sweep's split 16-byte loads (0 = two 8-byte loads, 1 = one 16-byte load)")
        p.add_argument("--sweep-load", action="store_true")
        p.add_argument("--check-old", action="store_true")
        p.add_argument("--jobs", type=int, default=12, help="processes compiling --sweep-load configs first")

    args = parse_args(__doc__, extra=options)
    require_cuda("bench_turboquant.py")
    copy = copy_bandwidth_gbs()
    print(f"measured copy bandwidth: {copy:,.0f} GB/s (bytes read + written)")
    rows = []
    checks: list[str] = []
    default = store_mod.words_launch_config
    load_default = load_mod.load_words_launch_config
    swept: set[str] = set()
    load_swept: set[int] = set()
    big = [s for s in SHAPES if s[1] * s[2] >= 1 << 20 and s[6] == "e4nv"]
    ctx = torch.multiprocessing.get_context("spawn")
    if (args.sweep_load or args.check_old) and args.jobs > 0:  # compile (and check) in parallel, first
        jobs, seen = [], set()
        for shape in big if args.sweep_load else []:
            if shape[3] not in seen:
                seen.add(shape[3])
                jobs += [(shape, c) for c in LOAD_SWEEP]
        t0 = time.perf_counter()
        with ProcessPoolExecutor(args.jobs, mp_context=ctx) as pool:
            random = [(d, f) for d in RANDOM_DIMS for f in ("e4nv", "e4b15")] if args.check_old else []
            checked = pool.map(_check_old_random, random)
            done = list(pool.map(_precompile_load, jobs))
            checks += list(checked)
        print(f"compiled {len(done)} load configs, {len(random)} random checks in {time.perf_counter() - t0:.1f} s")
    if args.check_old:
        _, load_v1 = _old_load()
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
        r0, w0, v0 = default(d, key.dtype, value.dtype, fmt)
        cfg = f"{r0}r/{w0}w{'/vec' if v0 else ''}"
        rows.append(_row("store", label, fmt, th, cfg, store_bytes, copy, time_ms(store), graph_ms(store),
                         host_us(store, calls=200)))
        lr, lw = load_default(d)
        rows.append(_row("load", label, fmt, th, f"{lr}r/{lw}w", load_bytes, copy, time_ms(load), graph_ms(load),
                         host_us(load, calls=200)))
        if args.check_old:
            k, v = load()
            k0, v0 = load_v1(cache, slots, d, fmt)
            checks.append(f"{label} {fmt}: {_same_bits(k, k0) + _same_bits(v, v0)} of {2 * k.numel()} elements "
                          f"differ from the old load")
            del k, v, k0, v0
            old = partial(load_v1, cache, slots, d, fmt)
            rows.append(_row("load-v1", label, fmt, th, "1 row/prog", load_bytes, copy, time_ms(old), graph_ms(old)))
        if args.sweep_load and fmt == "e4nv" and th >= 1 << 20 and d not in load_swept:
            load_swept.add(d)
            for r, w in LOAD_SWEEP:
                load_mod.load_words_launch_config = _load_config(r, w)
                try:
                    ms = graph_ms(load)
                finally:
                    load_mod.load_words_launch_config = load_default
                rows.append(_row("load-sweep", label, fmt, th, f"{r}r/{w}w", load_bytes, copy, 0.0, ms))
        if args.sweep and fmt == "e4nv" and th >= 1 << 20 and label not in swept:
            swept.add(label)
            for r in args.sweep_rows:
                for w in args.sweep_warps:
                    for v in map(bool, args.sweep_vec):
                        store_mod.words_launch_config = lambda *shape, r=r, w=w, v=v: (r, w, v)
                        try:
                            ms = graph_ms(store)
                        finally:
                            store_mod.words_launch_config = default
                        c = f"{r}r/{w}w{'/vec' if v else ''}"
                        rows.append(_row("store-sweep", label, fmt, th, c, store_bytes, copy, 0.0, ms))
        del key, value, cache, slots
        torch.cuda.empty_cache()
    emit("turboquant K8V4 store / load", COLUMNS, rows, args.json, extra={"copy_gbs": copy, "checks": checks})
    for line in checks:
        print(line)


if __name__ == "__main__":
    main()
