"""Where the host time of a turboquant store / load and a QSA decode selection goes, on a CUDA machine.

For each call of ``bench_turboquant.py``'s d128 bf16 shape (16k tokens, 8 heads) and ``bench_qsa.py``'s
64x32k MTP1 decode selection (both dtypes), median microseconds of:

- ``synced``: the whole public call, each started with the GPU idle (``host_us``, the benchmarks' column);
- ``queued``: the same call back to back, the GPU busy (no synchronization between calls);
- ``no launch``: the call with ``kernels._launch.Launcher`` launching nothing (checks, plans, allocations);
- ``launcher``: the call's launches alone, through ``Launcher`` with the arguments the call gave it;
- ``run``: the same launches through Triton's compiled-kernel launcher alone, stream and metadata prepared
  (the floor of any Python-side launch path on Triton's launcher);
- and the same machine's reference costs: ``torch.empty`` on the GPU, ``torch.cuda.current_stream()``.

Then the top functions of a cProfile of 2,000 queued calls each. Not a test; prints a table and, with
``--json PATH``, writes it.

    python benchmarks/host_breakdown.py [--json PATH]
"""

from __future__ import annotations

import cProfile
import io
import pstats
from functools import partial

import _common  # noqa: F401  (puts the repo root on sys.path)
import bench_qsa as bq
import torch
from _common import emit, host_us, parse_args, require_cuda

import kernels._launch as launch_mod
from kernels.qsa import decode_select
from kernels.turboquant import slot_bytes, tq_load_k8v4, tq_store_k8v4

COLUMNS = [("call", ""), ("what", ""), ("us", ".1f")]


def _launches(fn) -> list[tuple]:
    """(launcher, grid, args, config) of every Launcher launch one call of ``fn`` makes."""
    seen = []
    real = launch_mod.Launcher.__call__

    def record(self, grid, args, config):
        seen.append((self, grid, args, config))
        return real(self, grid, args, config)

    launch_mod.Launcher.__call__ = record
    try:
        fn()
    finally:
        launch_mod.Launcher.__call__ = real
    return seen


def _raw_runs(seen: list[tuple]):
    """A function launching each recorded launch through its compiled kernel's ``run`` alone."""
    import triton

    prepared = []
    for launcher, grid, args, config in seen:
        compiled = launcher(grid, args, config)  # a hit: the compiled kernel
        full = args + config[0]
        device = torch.cuda.current_device()
        stream = launch_mod._driver().get_current_stream(device)
        meta = compiled.launch_metadata(grid, stream, *full)
        g = (grid[0], grid[1] if len(grid) > 1 else 1, grid[2] if len(grid) > 2 else 1)
        hooks = triton.knobs.runtime
        prepared.append((compiled, g, stream, meta, full, hooks))

    def run():
        for compiled, g, stream, meta, full, hooks in prepared:
            compiled.run(*g, stream, compiled.function, compiled.packed_metadata, meta, hooks.launch_enter_hook,
                         hooks.launch_exit_hook, *full)

    return run


def _profile(fn, calls: int = 2000, top: int = 18) -> str:
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(calls):
        fn()
    pr.disable()
    torch.cuda.synchronize()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(top)
    return s.getvalue()


def main() -> None:
    args = parse_args(__doc__)
    require_cuda("host_breakdown.py")
    t, h, d = 16384, 8, 128
    g = torch.Generator(device="cuda").manual_seed(0)
    key = torch.randn(t, h, d, device="cuda", dtype=torch.bfloat16, generator=g)
    value = torch.randn(t, h, d, device="cuda", dtype=torch.bfloat16, generator=g)
    cache = torch.zeros(t // 16, 16, h, slot_bytes(d), dtype=torch.uint8, device="cuda")
    slots = torch.randperm(t, device="cuda", generator=g)
    calls = {
        "tq_store_k8v4 d128 bf16": partial(tq_store_k8v4, key, value, cache, slots),
        "tq_load_k8v4 d128": partial(tq_load_k8v4, cache, slots, head_dim=d),
    }
    label, reqs, tokens, mtp = bq.DECODE[0]
    for dtype in ("bf16", "fp8"):
        cfg, qcache, bt, q, vis, _, _ = bq._build(dtype, reqs, tokens, mtp, True, g)
        calls[f"decode_select {label} {dtype}"] = partial(decode_select, qcache, q, bt, vis, decode_query_len=mtp,
                                                          topk_blocks=bq.K)
    rows, profiles = [], []
    rows.append(_row("reference", "torch.empty(1 MiB) on the GPU",
                     host_us(lambda: torch.empty(1 << 20, device="cuda"), 2000, sync=False)))
    rows.append(_row("reference", "torch.cuda.current_stream()", host_us(torch.cuda.current_stream, 2000, sync=False)))
    for name, fn in calls.items():
        seen = _launches(fn)
        rows.append(_row(name, "synced (host_us)", host_us(fn, 300)))
        rows.append(_row(name, "queued", host_us(fn, 300, sync=False)))
        real = launch_mod.Launcher.__call__
        launch_mod.Launcher.__call__ = lambda self, grid, a, config: None
        try:
            rows.append(_row(name, "no launch", host_us(fn, 300, sync=False)))
        finally:
            launch_mod.Launcher.__call__ = real
        rows.append(_row(name, f"launcher ({len(seen)} launches)",
                         host_us(lambda seen=seen: [s[0](*s[1:]) for s in seen], 300, sync=False)))
        rows.append(_row(name, "run (compiled launcher alone)", host_us(_raw_runs(seen), 300, sync=False)))
        profiles.append(f"--- {name}: cProfile of 2,000 queued calls ---\n{_profile(fn)}")
    emit("host time per call, broken down (us)", COLUMNS, rows, args.json)
    for p in profiles:
        print(p)


def _row(call: str, what: str, us: float) -> dict:
    return {"call": call, "what": what, "us": us}


if __name__ == "__main__":
    main()
