"""Where a QSA decode selection's time goes, for bench_qsa.py's decode shapes: the whole call (CUDA-graph
replay, and host microseconds per call with the launch cache of kernels/_launch.py on and off, and with
no launch at all: the checks and allocations alone), the logits kernel alone for each tiles-per-program ×
pipeline-depth candidate (each checked bit for bit against one tile per program, and against paged_logits),
and the top-k alone for the shipped plan and its candidates (each checked equal to the shipped result), each level
of a split (radix) top-k alone.
Not a test; prints JSON lines and writes them to OUT.json.

    python benchmarks/qsa_breakdown.py OUT.json [--shapes 0,4] [--dtypes fp8] [--configs 128/8/3,256/8/3]
                                       [--no-sweep | --topk-sweep-only]

Compiles run first in a pool of processes (one per shape and dtype; Triton's disk cache hands them to the
timing process), so the sweep fits in a short GPU session.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import time
from functools import partial
from pathlib import Path

import _common  # noqa: F401  (puts the repo root on sys.path)
import bench_qsa as bq
import torch
from _common import graph_ms, host_us

TILES = [1, 2, 4, 8]
STAGES = [1, 3]
#: top-k plan candidates: (FEW_ROWS, SINGLE_FEW, TILE); FEW_ROWS = 0 is the plan before issue 25
TOPK_PLANS = [(0, 4096, 2048), (64, 2048, 2048), (64, 4096, 2048), (64, 8192, 2048), (64, 4096, 4096),
              (65, 4096, 2048), (129, 4096, 2048), (129, 8192, 2048)]


def _case(i: int, dtype: str):
    label, reqs, tokens, mtp = bq.DECODE[i]
    g = torch.Generator(device="cuda").manual_seed(0)
    _, cache, bt, q, vis, _, nb = bq._build(dtype, reqs, tokens, mtp, True, g)
    return label, mtp, cache, bt, q, vis, nb


def _logits(cache, q, bt, vis, mtp, tiles, stages, block_n=None, warps=None):
    from kernels.qsa import logits as L

    L.DECODE_TILES_PER_PROGRAM[cache.dtype] = (tiles,) * 3  # until reset
    t = L.DECODE_TILES[cache.dtype]
    tile = L.LogitsTile(block_n=block_n or t.block_n, num_warps=warps or t.num_warps, num_stages=stages)
    return partial(L.decode_logits, cache, q, bt, vis, decode_query_len=mtp, n_cols=bt.shape[1] * cache.page_size,
                   tile=tile)


def _candidates(configs: list[tuple[int, int, int]] | None) -> list[tuple[int, int, int | None, int | None]]:
    """(tiles, stages, block_n, warps) of the logits sweep: TILES x STAGES at the shipped tile, or TILES x
    each ``--configs`` (block_n, warps, stages)."""
    if not configs:
        return [(t, s, None, None) for t in TILES for s in STAGES]
    return [(t, s, b, w) for b, w, s in configs for t in TILES]


def _precompile(job):
    i, dtype, configs = job
    from kernels.qsa import decode_select

    _, mtp, cache, bt, q, vis, _ = _case(i, dtype)
    for cand in _candidates(configs):
        _logits(cache, q, bt, vis, mtp, *cand)()
    decode_select(cache, q, bt, vis, decode_query_len=mtp, topk_blocks=bq.K)
    torch.cuda.synchronize()
    return job


def _radix_levels(logits, vis, k: int) -> list[dict]:
    """Graph ms of each level of the split (radix) top-k launched alone, on the inputs one whole search gave it:
    the levels are the launches ``topk_columns`` makes through ``topk._RADIX``, recorded (none for the bitwise
    search)."""
    from kernels.qsa import topk as T

    real, seen = T._RADIX, []

    class Recorder:  # the launcher, recording each launch (its config() still plans the levels)
        config = real.config

        def __call__(self, grid, args, cfg):
            seen.append((grid, args, cfg))
            return real(grid, args, cfg)

    T._RADIX = Recorder()
    try:
        T.topk_columns(logits, vis, k)
    finally:
        T._RADIX = real
    return [dict(block=dict(cfg[1])["BLOCK"], programs=grid[0] * grid[1], width_in=args[-1],
                 ms=graph_ms(partial(real, grid, args, cfg))) for grid, args, cfg in seen]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--shapes", default=",".join(str(i) for i in range(len(bq.DECODE))))
    ap.add_argument("--no-sweep", action="store_true")
    ap.add_argument("--topk-sweep-only", action="store_true")
    ap.add_argument("--dtypes", default="bf16,fp8", help="cache dtypes, comma-separated")
    ap.add_argument("--configs", default="", help="logits tiles to sweep instead of the shipped one's stages: "
                    "block_n/warps/stages, comma-separated (e.g. 128/8/3,256/8/3)")
    args = ap.parse_args()
    configs = [tuple(int(x) for x in c.split("/")) for c in args.configs.split(",") if c] or None
    from kernels import _launch
    from kernels.qsa import decode_select, paged_logits
    from kernels.qsa import logits as L
    from kernels.qsa import topk as T

    shapes = [int(s) for s in args.shapes.split(",")]
    jobs = [(i, d) for i in shapes for d in args.dtypes.split(",")]
    t0 = time.time()
    logits_sweep = not (args.no_sweep or args.topk_sweep_only)
    if logits_sweep:
        with mp.get_context("spawn").Pool(min(len(jobs), 12)) as pool:
            for job in pool.imap_unordered(_precompile, [(i, d, configs) for i, d in jobs]):
                print(f"compiled {job} at {time.time() - t0:.0f}s", flush=True)
    out = []
    shipped_tiles = dict(L.DECODE_TILES_PER_PROGRAM)
    defaults = (T.FEW_ROWS, T.SINGLE_FEW, T.TILE)
    for i, dtype in jobs:
        label, mtp, cache, bt, q, vis, nb = _case(i, dtype)
        n_cols = bt.shape[1] * cache.page_size
        sel = partial(decode_select, cache, q, bt, vis, decode_query_len=mtp, topk_blocks=bq.K)
        r = dict(case=label, dtype=dtype, mb=nb / 2**20, select_graph_ms=graph_ms(sel),
                 host_us=host_us(sel))
        _launch.ENABLED = False
        r["host_us_plain_launch"] = host_us(sel)
        _launch.ENABLED = True
        call = _launch.Launcher.__call__
        _launch.Launcher.__call__ = lambda self, grid, a, c: None
        r["host_us_no_launch"] = host_us(sel)
        _launch.Launcher.__call__ = call
        logits = L.decode_logits(cache, q, bt, vis, decode_query_len=mtp, n_cols=n_cols)
        row_req = torch.arange(bt.shape[0], device="cuda", dtype=torch.int32).repeat_interleave(mtp)
        r["decode_equals_paged"] = bool(torch.equal(
            logits, paged_logits(cache, q, bt, row_req, vis, n_cols=n_cols)))
        r["logits_graph_ms"] = graph_ms(partial(L.decode_logits, cache, q, bt, vis, decode_query_len=mtp,
                                                n_cols=n_cols))
        r["tiles_shipped"] = L.tiles_per_program(cache.dtype, mtp, -(-n_cols // L.DECODE_TILES[cache.dtype].block_n))
        if logits_sweep:
            ref = _logits(cache, q, bt, vis, mtp, 1, 1)()
            sweep = {}
            for tiles, stages, block_n, warps in _candidates(configs):
                fn = _logits(cache, q, bt, vis, mtp, tiles, stages, block_n, warps)
                name = f"t{tiles}s{stages}" if block_n is None else f"b{block_n}w{warps}t{tiles}s{stages}"
                sweep[name] = dict(ms=graph_ms(fn), same_bits=bool(torch.equal(fn(), ref)))
            L.DECODE_TILES_PER_PROGRAM.update(shipped_tiles)
            r["logits_sweep"] = sweep
        want = T.topk_columns(logits, vis, bq.K)
        r["topk_graph_ms"] = graph_ms(partial(T.topk_columns, logits, vis, bq.K))
        if n_cols > T.RADIX_ABOVE:
            r["topk_levels"] = _radix_levels(logits, vis, bq.K)
        if not args.no_sweep and n_cols > T.RADIX_ABOVE:
            plans = {}
            for few, single_few, tile in TOPK_PLANS:
                T.FEW_ROWS, T.SINGLE_FEW, T.TILE = few, single_few, tile
                plan = T._plan(n_cols, bq.K, T.SINGLE, tile, logits.shape[0])
                plans[f"few{few}/last{single_few}/tile{tile}"] = dict(
                    plan=plan, ms=graph_ms(partial(T.topk_columns, logits, vis, bq.K)),
                    same=bool(torch.equal(T.topk_columns(logits, vis, bq.K), want)))
            T.FEW_ROWS, T.SINGLE_FEW, T.TILE = defaults
            r["topk_plans"] = plans
        print(json.dumps(r), flush=True)
        out.append(r)
        args.out.write_text(json.dumps(out, indent=1))
        del cache, bt, q, vis, logits
        torch.cuda.empty_cache()
    print(f"done in {time.time() - t0:.0f}s", flush=True)


if __name__ == "__main__":
    main()
