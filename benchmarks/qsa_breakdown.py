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


def _radix_levels(levels: tuple, logits, vis, k: int) -> list[dict]:
    """Graph ms of each level of a radix top-k plan launched alone (as ``topk._run_radix`` launches it)."""
    from kernels.qsa import topk as T

    rows = logits.shape[0]
    sizes = [n * k for _, n, _, _ in levels[:-1]]
    scratch = torch.empty(rows, 2 * sum(sizes), dtype=torch.int32, device=logits.device)
    out = torch.empty(rows, k, dtype=torch.int32, device=logits.device)
    src, cols, at, timed = logits, logits, 0, []
    for i, (block, n, w, cfg) in enumerate(levels):
        if i == len(levels) - 1:
            dst, dst_keys = out, out
        else:
            dst = scratch[:, at : at + sizes[i]]
            dst_keys = scratch[:, at + sizes[i] : at + 2 * sizes[i]]
            at += 2 * sizes[i]
        launch = partial(T._RADIX, (rows, n), (src, cols, vis, dst, dst_keys, src.stride(0), dst.stride(0), w), cfg)
        launch()  # fills this level's output for the next one
        timed.append(dict(block=block, programs=rows * n, width_in=w, ms=graph_ms(launch)))
        src, cols = dst_keys, dst
    return timed


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
        kind, how = T._steps(logits.shape[0], n_cols, bq.K, T.CHUNK, T.RADIX_ABOVE, T.SINGLE, T.TILE,
                             (T.FEW_ROWS, T.SINGLE_FEW), T._warps)
        if kind == "radix":  # each level of the split search alone, on the inputs the whole search gave it
            r["topk_levels"] = _radix_levels(how, logits, vis, bq.K)
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
