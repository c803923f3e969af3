"""What skipping the interpreter's discarded integer-overflow check saves (``harness.interp.overflow_check``): the
shipped kernels on the Triton interpreter with every lane shim installed (as sm90), once with the skip and once
with it lifted (Triton's own path: the check computed, then thrown away by ``device_assert`` without debug).

Usage: ``python benchmarks/bench_interp_overflow.py [--repeat N] [--json PATH]``. CPU only; not a test: nothing
asserts a time. Each row runs ``--repeat`` times each way, alternately (each way first in every other pair),
after one warm-up of each (the warm-up looks up the launch's compiled facts for the lowering shim: from the disk
cache when warm); medians of wall and CPU time. The outputs of the two ways are compared bit for bit, and a row
whose outputs differ says so.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "1"  # before triton decorates any kernel
ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import triton  # noqa: E402


def _qsa_topk():
    from kernels.qsa.topk import topk_columns

    g = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 20000, generator=g)  # wider than RADIX_ABOVE: the radix select
    visible = torch.tensor([20000, 17000], dtype=torch.int32)
    return "QSA topk_columns 2x20000 (radix), k=64", lambda: (topk_columns(logits, visible, 64),)


def _turboquant():
    from kernels.turboquant import slot_bytes, tq_load_k8v4, tq_store_k8v4

    g = torch.Generator().manual_seed(1)
    tokens, heads, d, blocks, block_size = 64, 4, 128, 8, 16
    key = torch.randn(tokens, heads, d, generator=g).to(torch.bfloat16)
    value = torch.randn(tokens, heads, d, generator=g).to(torch.bfloat16)
    slots = torch.randperm(blocks * block_size, generator=g)[:tokens].to(torch.int64)

    def run():
        cache = torch.zeros(blocks, block_size, heads, slot_bytes(d), dtype=torch.uint8)
        tq_store_k8v4(key, value, cache, slots, fp8_format="e4nv")
        return (cache, *tq_load_k8v4(cache, slots, head_dim=d, fp8_format="e4nv"))

    return f"turboquant store+load {tokens} tokens x {heads} heads, d={d}", run


def _mx_quantize():
    from kernels.mx import quantize_fp4
    from kernels.mx.reference import nvfp4_global_scale

    g = torch.Generator().manual_seed(2)
    x = torch.randn(64, 512, generator=g).to(torch.bfloat16)
    gs = nvfp4_global_scale(x)
    return ("MX quantize_fp4 64x512 bf16, MXFP4 + NVFP4 swizzled",
            lambda: (*quantize_fp4(x, "mxfp4", layout="swizzled"),
                     *quantize_fp4(x, "nvfp4", global_scale=gs, layout="swizzled")))


CASES = (_qsa_topk, _turboquant, _mx_quantize)


def _timed(fn):
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - w0, time.process_time() - c0, out


def _same(a, b) -> bool:
    def raw(t):
        return t.reshape(-1).view(torch.uint8)

    return len(a) == len(b) and all(x.shape == y.shape and x.dtype == y.dtype and torch.equal(raw(x), raw(y))
                                    for x, y in zip(a, b, strict=True))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3, help="timed runs each way (default 3)")
    ap.add_argument("--json", type=Path, default=None, help="also write the rows as JSON here")
    args = ap.parse_args()
    if args.repeat < 1:
        ap.error(f"--repeat: expected a positive count of runs, got {args.repeat}")

    from harness.interp import overflow_check, shims
    from harness.interp.patch import Patch, lift

    torch.set_num_threads(1)
    rows = []
    with Patch.context() as p:
        shims.install(p, "sm90")
        for make in CASES:
            name, fn = make()
            skip, check = [], []
            out_skip = _timed(fn)[2]
            with lift(overflow_check.TAG):
                out_check = _timed(fn)[2]
            for i in range(args.repeat):  # alternately, each way first in every other pair
                for way in ("skip", "check")[:: 1 if i % 2 == 0 else -1]:
                    if way == "skip":
                        skip.append(_timed(fn)[:2])
                    else:
                        with lift(overflow_check.TAG):
                            check.append(_timed(fn)[:2])
            row = {"kernel": name, "skip_s": statistics.median(t[0] for t in skip),
                   "check_s": statistics.median(t[0] for t in check),
                   "skip_cpu_s": statistics.median(t[1] for t in skip),
                   "check_cpu_s": statistics.median(t[1] for t in check),
                   "same_bits": _same(out_skip, out_check)}
            rows.append(row)

    print(f"Triton {triton.__version__}, torch {torch.__version__}, one torch thread, median of {args.repeat}; "
          f"check: Triton's own path (the overflow check computed and discarded)")
    print(f"{'kernel':<52} {'skip s':>7} {'check s':>8} {'check/skip':>10} {'CPU skip':>8} {'CPU check':>9} "
          f"{'same bits':>9}")
    for r in rows:
        print(f"{r['kernel']:<52} {r['skip_s']:7.2f} {r['check_s']:8.2f} {r['check_s'] / r['skip_s']:10.2f} "
              f"{r['skip_cpu_s']:8.2f} {r['check_cpu_s']:9.2f} {'yes' if r['same_bits'] else 'NO':>9}")
    if args.json:
        args.json.write_text(json.dumps({"triton": triton.__version__, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
