"""What ``triton.testing.do_bench``'s L2 flush adds to the kernel it times, and the floor at a row's own size.

    python benchmarks/l2_flush.py [--json PATH]

Why: do_bench "flushes" L2 by zeroing a 256 MB buffer before each run, which leaves L2 full of *dirty* lines
(Hopper's L2 writes back). The timed kernel then evicts them, so up to an L2's worth of DRAM writes lands inside
its time whatever it does. A 1 GiB copy hides that; a 64 MiB read (a QSA decode's FP8 keys) does not. Every row
here is timed twice: ``dirty_us`` = do_bench as the other benchmarks time (``_common.time_ms``), ``clean_us`` =
the same events with L2 filled by a read instead (clean lines: evicting them costs nothing). Rows:

- ``read`` / ``copy`` of N bytes moved (a Triton read-only streaming kernel; ``Tensor.copy_`` of N/2 to N/2):
  the floor a memory-bound kernel of that size meets, with and without the flush's write-back;
- the QSA decode logits (FP8 and BF16) and the turboquant store at the shapes of ``bench_qsa.py`` /
  ``bench_turboquant.py`` where issue 25's targets are missed, each beside a copy of as many bytes timed the
  same two ways (``pct_copy_*`` = copy time / kernel time: the floor at the row's own size).

Not a test; nothing asserts a time.
"""

from __future__ import annotations

import statistics
from functools import partial

import _common  # noqa: F401  (puts the repo root on sys.path)
import torch
import triton
import triton.language as tl
from _common import emit, parse_args, require_cuda, time_ms

FLUSH_BYTES = 256 * 10**6  # do_bench's own flush buffer size
SIZES_MIB = (16, 32, 64, 128, 256, 512, 1024)
COLUMNS = [("row", ""), ("MiB", ".1f"), ("dirty_us", ".1f"), ("clean_us", ".1f"), ("flush_cost_us", ".1f"),
           ("dirty_GBs", ".0f"), ("clean_GBs", ".0f"), ("pct_copy_dirty", ".1f"), ("pct_copy_clean", ".1f")]


@triton.jit
def _read_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, ITERS: tl.constexpr):
    """Read ``n`` int32 words, one xor-folded word out per program: DRAM reads and (almost) nothing else."""
    pid = tl.program_id(0)
    acc = tl.zeros([BLOCK], tl.int32)
    for i in range(ITERS):
        offs = (pid * ITERS + i) * BLOCK + tl.arange(0, BLOCK)
        acc ^= tl.load(x_ptr + offs, mask=offs < n, other=0)
    tl.store(out_ptr + pid, tl.xor_sum(acc, 0))


def _reader(nbytes: int):
    x = torch.ones(nbytes // 4, dtype=torch.int32, device="cuda")
    block, iters = 4096, 4
    grid = triton.cdiv(x.numel(), block * iters)
    out = torch.empty(grid, dtype=torch.int32, device="cuda")
    return partial(_read_kernel[(grid,)], x, out, x.numel(), BLOCK=block, ITERS=iters, num_warps=8)


def _copier(nbytes: int):
    """A device-to-device copy moving ``nbytes`` (half read, half written), as the copy floor counts bytes."""
    src = torch.empty(nbytes // 2, dtype=torch.uint8, device="cuda")
    return partial(torch.empty_like(src).copy_, src)


def clean_us(fn, reps: int = 100) -> float:
    """Median microseconds of ``fn`` between CUDA events, L2 filled before each run by *reading* a buffer of
    do_bench's flush size (after one zeroing write of it, outside every timed region)."""
    buf = torch.zeros(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    sink = torch.empty((), dtype=torch.int64, device="cuda")
    fn()
    times = []
    for _ in range(reps):
        torch.sum(buf, 0, dtype=torch.int64, out=sink)  # evicts fn's dirty lines here, leaves clean ones
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        times.append((start, end))
    torch.cuda.synchronize()
    return 1000 * statistics.median(s.elapsed_time(e) for s, e in times)


def _row(name: str, nbytes: int, fn, *, against_copy: bool = False) -> dict:
    dirty = 1000 * time_ms(fn)
    clean = clean_us(fn)
    row = {"row": name, "MiB": nbytes / 2**20, "bytes": nbytes, "dirty_us": dirty, "clean_us": clean,
           "flush_cost_us": dirty - clean, "dirty_GBs": nbytes / dirty / 1e3, "clean_GBs": nbytes / clean / 1e3,
           "pct_copy_dirty": float("nan"), "pct_copy_clean": float("nan")}
    if against_copy:  # the floor at this row's own size: a copy moving as many bytes, timed the same two ways
        copy = _copier(nbytes)
        row["pct_copy_dirty"] = 100 * 1000 * time_ms(copy) / dirty
        row["pct_copy_clean"] = 100 * clean_us(copy) / clean
    return row


def main() -> None:
    args = parse_args(__doc__.split("\n\n")[0])
    require_cuda("l2_flush.py")
    import bench_qsa as bq
    import bench_turboquant as bt

    from kernels.qsa import logits as L
    from kernels.turboquant import slot_bytes, tq_store_k8v4

    rows = []
    for mib in SIZES_MIB:
        n = mib << 20
        rows.append(_row(f"read {mib} MiB", n, _reader(n)))
        rows.append(_row(f"copy {mib // 2} MiB to {mib // 2} MiB", n, _copier(n)))
        torch.cuda.empty_cache()
    g = torch.Generator(device="cuda").manual_seed(0)
    for i in (0, 4):  # 64x32k MTP1 (the lowest ratio), 8x256k MTP2
        label, reqs, tokens, mtp = bq.DECODE[i]
        for dtype in ("fp8", "bf16"):
            _, cache, table, q, vis, _, nb = bq._build(dtype, reqs, tokens, mtp, True, g)
            n_cols = table.shape[1] * cache.page_size
            fn = partial(L.decode_logits, cache, q, table, vis, decode_query_len=mtp, n_cols=n_cols)
            rows.append(_row(f"qsa {label} logits {dtype}", nb, fn, against_copy=True))
            del cache, table, q, vis
            torch.cuda.empty_cache()
    for label, t, h, d, bs, dtype, fmt in bt.SHAPES:
        if t * h < 1 << 20:
            continue
        key, value, cache, slots = bt._case(t, h, d, bs, dtype)
        nbytes = 2 * key.numel() * key.element_size() + t * h * slot_bytes(d) + slots.numel() * slots.element_size()
        store = partial(tq_store_k8v4, key, value, cache, slots, fp8_format=fmt)
        rows.append(_row(f"store {label} {fmt}", nbytes, store, against_copy=True))
        del key, value, cache, slots
        torch.cuda.empty_cache()
    emit("do_bench's L2 flush: dirty (do_bench) vs clean (read-filled) L2", COLUMNS, rows, args.json,
         extra={"flush_bytes": FLUSH_BYTES})


if __name__ == "__main__":
    main()
