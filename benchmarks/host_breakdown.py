"""Where the host time of a turboquant store / load and a QSA decode selection goes, on a CUDA machine.

For each call of ``bench_turboquant.py``'s d128 bf16 shape (16k tokens, 8 heads) and ``bench_qsa.py``'s
64x32k MTP1 decode selection (both dtypes), median microseconds of:

- ``synced``: the whole public call, each started with the GPU idle (``host_us``, the benchmarks' column);
- ``queued``: the same call back to back, the GPU busy (no synchronization between calls);
- ``no launch``: the call with ``kernels._launch.run_compiled`` launching nothing (checks, plans, allocations,
  launcher keys): every launch of a warmed-up call goes through it, the ``Launcher``'s cached ones and the
  turboquant plans' direct ones alike;
- ``launches``: the call's launches alone, through ``run_compiled`` with the arguments the call gave it;
- ``run``: the same launches through Triton's compiled-kernel launcher alone, stream and metadata prepared
  (the floor of any Python-side launch path on Triton's launcher);
- ``C launch``: the launcher's C function itself (``compiled.run.launch``, Triton 3.6's ``CudaLauncher``), once
  with the tensors and once with their addresses as ints: for a tensor the C code calls ``data_ptr()`` and
  ``cuPointerGetAttribute``, for an int neither, so the two rows price that check (NaN where the installed
  Triton's launcher has no such function, or the kernel needs scratch memory);
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
import triton
from _common import emit, host_us, parse_args, require_cuda

import kernels._launch as launch_mod
from kernels.qsa import decode_select
from kernels.turboquant import slot_bytes, tq_load_k8v4, tq_store_k8v4

COLUMNS = [("call", ""), ("what", ""), ("us", ".1f")]


def _launches(fn) -> list[tuple]:
    """(compiled, grid, full, device) of every launch one warmed-up call of ``fn`` makes."""
    fn()  # every specialization compiled and kept: the call below launches through run_compiled only
    seen = []
    real = launch_mod.run_compiled

    def record(compiled, grid, full, device=None):
        seen.append((compiled, grid, full, device))
        return real(compiled, grid, full, device)

    launch_mod.run_compiled = record
    try:
        fn()
    finally:
        launch_mod.run_compiled = real
    return seen


def _prepared(seen: list[tuple]) -> list[tuple]:
    """(compiled, 3-d grid, stream, launch metadata, arguments) of each recorded launch, everything a launch
    through Triton's own launcher needs computed beforehand."""
    out = []
    for compiled, grid, full, device in seen:
        stream = launch_mod._driver().get_current_stream(torch.cuda.current_device() if device is None else device)
        meta = None if triton.knobs.runtime.launch_enter_hook is None else compiled.launch_metadata(grid, stream,
                                                                                                    *full)
        out.append((compiled, (grid[0], grid[1] if len(grid) > 1 else 1, grid[2] if len(grid) > 2 else 1), stream,
                    meta, full))
    return out


def _raw_runs(seen: list[tuple]):
    """A function launching each recorded launch through its compiled kernel's ``run`` alone."""
    prepared, hooks = _prepared(seen), triton.knobs.runtime

    def run():
        for compiled, g, stream, meta, full in prepared:
            compiled.run(*g, stream, compiled.function, compiled.packed_metadata, meta, hooks.launch_enter_hook,
                         hooks.launch_exit_hook, *full)

    return run


def _c_launches(seen: list[tuple], as_ints: bool):
    """A function calling each recorded launch's C launcher directly (None if one cannot be)."""
    prepared, hooks = [], triton.knobs.runtime
    for compiled, g, stream, meta, full in _prepared(seen):
        run = compiled.run
        launch = getattr(run, "launch", None)
        if launch is None or getattr(run, "global_scratch_size", 1) or getattr(run, "profile_scratch_size", 1):
            return None
        args = tuple(a.data_ptr() if as_ints and isinstance(a, torch.Tensor) else a for a in full)
        prepared.append((launch, g, stream, compiled.function, run.launch_cooperative_grid, run.launch_pdl,
                         compiled.packed_metadata, meta, args))

    def run():
        for launch, g, stream, fn, coop, pdl, packed, meta, args in prepared:
            launch(*g, stream, fn, coop, pdl, None, None, packed, meta, hooks.launch_enter_hook,
                   hooks.launch_exit_hook, *args)

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
        real = launch_mod.run_compiled
        launch_mod.run_compiled = lambda compiled, grid, full, device=None: None
        try:
            rows.append(_row(name, "no launch", host_us(fn, 300, sync=False)))
        finally:
            launch_mod.run_compiled = real
        rows.append(_row(name, f"launches ({len(seen)}, run_compiled)",
                         host_us(lambda seen=seen: [launch_mod.run_compiled(*s) for s in seen], 300, sync=False)))
        rows.append(_row(name, "run (compiled launcher alone)", host_us(_raw_runs(seen), 300, sync=False)))
        for as_ints, what in ((False, "C launch, tensors"), (True, "C launch, int addresses")):
            c = _c_launches(seen, as_ints)
            try:
                us = float("nan") if c is None else host_us(c, 300, sync=False)
            except Exception as e:  # a launcher whose C signature differs: a finding, not a crash
                print(f"{name}: {what} failed: {type(e).__name__}: {e}", flush=True)
                us = float("nan")
            rows.append(_row(name, what, us))
        profiles.append(f"--- {name}: cProfile of 2,000 queued calls ---\n{_profile(fn)}")
    emit("host time per call, broken down (us)", COLUMNS, rows, args.json)
    for p in profiles:
        print(p)


def _row(call: str, what: str, us: float) -> dict:
    return {"call": call, "what": what, "us": us}


if __name__ == "__main__":
    main()
