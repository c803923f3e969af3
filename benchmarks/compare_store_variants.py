"""Bit-exactness and timing of the candidate store kernels (``store_variants.py``) against the shipped
``tq_store_k8v4`` (before 2026-12-03 the tiled kernel, now the int64-word kernel for these inputs). Not a
test: it prints PASS/FAIL counts and a table, and writes one JSON.

Usage (GPU): ``python benchmarks/compare_store_variants.py --json PATH [--check-only] [--quick]``.
On CPU under ``TRITON_INTERPRET=1`` with ``--check-only --small`` it runs the exactness part alone.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
import traceback
import zlib
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import store_variants as sv  # noqa: E402
import torch  # noqa: E402

import kernels.turboquant.store as store_mod  # noqa: E402
from kernels.turboquant import slot_bytes  # noqa: E402

# (name, kwargs): kwargs of store_words, or of store_uniform when "uniform" is set; round 1 (2026-12-03) timed the
# store_words / split configs, round 2 the uniform kernel against the best of round 1.
U = {"uniform": True}
VARIANTS_D128 = [
    ("split r2w1", dict(rows=2, warps=1, split=True)),
    ("words r2w1 novec", dict(rows=2, warps=1, vec=False)),
    ("uniform r2w1", dict(rows=2, warps=1, **U)),
    ("uniform r4w1", dict(rows=4, warps=1, **U)),
    ("uniform r4w2", dict(rows=4, warps=2, **U)),
    ("uniform r8w2", dict(rows=8, warps=2, **U)),
    ("uniform r4w4", dict(rows=4, warps=4, **U)),
    ("uniform r8w4", dict(rows=8, warps=4, **U)),
    ("uniform r16w4", dict(rows=16, warps=4, **U)),
    ("uniform r16w8", dict(rows=16, warps=8, **U)),
]
VARIANTS_D256 = [
    ("words r2w1 vec", dict(rows=2, warps=1, vec=True)),
    ("uniform r1w1", dict(rows=1, warps=1, **U)),
    ("uniform r2w1", dict(rows=2, warps=1, **U)),
    ("uniform r2w2", dict(rows=2, warps=2, **U)),
    ("uniform r4w2", dict(rows=4, warps=2, **U)),
    ("uniform r4w4", dict(rows=4, warps=4, **U)),
    ("uniform r8w4", dict(rows=8, warps=4, **U)),
]
SECONDARY = [
    ("words r4w1 vec", dict(rows=4, warps=1, vec=True)),
    ("uniform r2w1", dict(rows=2, warps=1, **U)),
    ("uniform r4w1", dict(rows=4, warps=1, **U)),
    ("uniform r4w2", dict(rows=4, warps=2, **U)),
    ("uniform r8w4", dict(rows=8, warps=4, **U)),
]
CHECK_VARIANTS = [
    ("uniform r2w1", dict(rows=2, warps=1, **U)),
    ("uniform r4w2", dict(rows=4, warps=2, **U)),
    ("uniform r8w4", dict(rows=8, warps=4, **U)),
]


def _launch(kw: dict, dev: torch.device):
    """The store function and keyword arguments a variant row names."""
    kw = dict(kw)
    if kw.pop("uniform", False):
        return partial(sv.store_uniform, **kw)
    return partial(sv.store_words, **_persist(kw, dev))


def _persist(kw: dict, dev: torch.device) -> dict:
    kw = dict(kw)
    if kw.get("persist", 0) < 0:
        sms = torch.cuda.get_device_properties(dev).multi_processor_count if dev.type == "cuda" else 2
        kw["persist"] = -kw["persist"] * sms
    return kw


def _specials(t: int, h: int, d: int, dtype: torch.dtype, fmt: str, g: torch.Generator) -> torch.Tensor:
    """Random data with NaN, ±inf, out-of-range, ±65504+, constant and near-constant vectors mixed in."""
    x = torch.randn(t, h, d, generator=g) * torch.exp(torch.randn(t, h, 1, generator=g) * 2)
    flat = x.view(-1)
    n = flat.numel()
    pick = lambda k: torch.randint(0, n, (k,), generator=g)  # noqa: E731
    m = max(1, n // 500)
    big = 1e6 if dtype != torch.float16 else 60000.0
    flat[pick(m)] = float("nan")
    flat[pick(m)] = float("inf")
    flat[pick(m)] = -float("inf")
    flat[pick(m)] = big
    flat[pick(m)] = -big
    flat[pick(m)] = 65504.0
    flat[pick(m)] = 448.0 + 16
    flat[pick(m)] = 1.8
    flat[pick(m)] = -1.76
    flat[pick(m)] = 1e-30
    rows = x.view(-1, d)
    r = torch.randint(0, rows.shape[0], (max(1, rows.shape[0] // 50),), generator=g)
    rows[r] = torch.randn(r.numel(), 1, generator=g)  # constant vectors
    r = torch.randint(0, rows.shape[0], (max(1, rows.shape[0] // 50),), generator=g)
    rows[r] = 1.0 + torch.rand(r.numel(), d, generator=g) * 1e-4  # near-constant
    r = torch.randint(0, rows.shape[0], (max(1, rows.shape[0] // 50),), generator=g)
    rows[r] = torch.randn(r.numel(), d, generator=g) * 1e5  # beyond fp16 after clamp
    return x.to(dtype)


def _make(t, h, d, dtype, fmt, heads_major, dev, g, bs=16):
    key = _specials(t, h, d, dtype, fmt, g).to(dev)
    value = _specials(t, h, d, dtype, fmt, g).to(dev)
    if heads_major:  # [t, h, d] views of [h, t, d] storage
        key = key.transpose(0, 1).contiguous().transpose(0, 1)
        value = value.transpose(0, 1).contiguous().transpose(0, 1)
    nb = (2 * t + bs - 1) // bs
    sb = slot_bytes(d)
    if heads_major:
        cache = torch.zeros(nb, h, bs, sb, dtype=torch.uint8, device=dev).transpose(1, 2)
    else:
        cache = torch.zeros(nb, bs, h, sb, dtype=torch.uint8, device=dev)
    slots = torch.randperm(nb * bs, generator=g)[:t]
    slots[torch.randint(0, t, (max(1, t // 20),), generator=g)] = -1
    slots[torch.randint(0, t, (max(1, t // 50),), generator=g)] = nb * bs + 5  # out of range: skipped
    return key, value, cache, slots.to(dev)


def _shipped(key, value, cache, slots, fmt):
    store_mod.tq_store_k8v4(key, value, cache, slots, fp8_format=fmt)


def check(dev: torch.device, small: bool, variants, log) -> tuple[int, int, list]:
    t = 64 if small else 4096
    h = 2 if small else 8
    dims = (8, 64, 80, 128) if small else (80, 128, 256)
    dtypes = (torch.float16, torch.bfloat16, torch.float32)
    fmts = ("e4nv", "e4b15")
    passed = failed = 0
    fails = []
    combos = list(itertools.product(dims, dtypes, fmts, (False, True)))
    if not small:
        combos += [(d, torch.bfloat16, "e4nv", hm) for d in (64, 96) for hm in (False, True)]
    for d, dtype, fmt, hm in combos:
        g = torch.Generator().manual_seed(zlib.crc32(f"{d}{dtype}{fmt}{hm}".encode()))
        key, value, cache, slots = _make(t, h, d, dtype, fmt, hm, dev, g)
        ref = cache.clone()
        _shipped(key, value, ref, slots, fmt)
        # mixed key/value dtypes once per shape: value fp32
        for name, kw in variants:
            out = cache.clone()
            try:
                _launch(kw, dev)(key, value, out, slots, fmt)
                ok = torch.equal(out, ref)
            except Exception as e:  # noqa: BLE001
                ok = False
                log(f"ERROR {name} d{d} {dtype} {fmt} hm={hm}: {type(e).__name__}: {str(e)[:300]}")
            if ok:
                passed += 1
            else:
                failed += 1
                bad = (out != ref).nonzero()[:3].tolist() if out.shape == ref.shape else []
                fails.append(f"{name} d{d} {dtype} {fmt} hm={hm} first diffs {bad}")
                log("FAIL " + fails[-1])
        log(f"checked d{d} {dtype} {fmt} heads_major={hm}: pass {passed} fail {failed} so far")
    # mixed dtypes
    for kd, vd in ((torch.bfloat16, torch.float32), (torch.float32, torch.float16)):
        g = torch.Generator().manual_seed(7)
        key, value, cache, slots = _make(t, h, 128 if not small else 64, kd, "e4nv", False, dev, g)
        value = value.to(vd)
        ref = cache.clone()
        _shipped(key, value, ref, slots, "e4nv")
        for name, kw in variants:
            out = cache.clone()
            try:
                _launch(kw, dev)(key, value, out, slots, "e4nv")
                ok = torch.equal(out, ref)
            except Exception as e:  # noqa: BLE001
                ok = False
                log(f"ERROR {name} mixed {kd}/{vd}: {type(e).__name__}: {str(e)[:300]}")
            passed += ok
            failed += not ok
            if not ok:
                fails.append(f"{name} mixed {kd}/{vd}")
    return passed, failed, fails


SHAPES = [
    ("128k x 8 d128 bf16", 131072, 8, 128, 16, torch.bfloat16, "e4nv", True),
    ("128k x 8 d256 bf16", 131072, 8, 256, 32, torch.bfloat16, "e4nv", True),
    ("128k x 8 d96 bf16", 131072, 8, 96, 64, torch.bfloat16, "e4nv", False),
    ("64k x 16 d80 fp32", 65536, 16, 80, 128, torch.float32, "e4nv", False),
    ("128k x 8 d128 fp16", 131072, 8, 128, 16, torch.float16, "e4nv", False),
]


def _ptx_stats(k) -> dict:
    """Counts of barriers and global load/store widths in a compiled kernel's PTX (why a variant is fast)."""
    try:
        ptx = k.asm["ptx"]
    except Exception:  # noqa: BLE001
        return {}
    import re

    out = {"bar_sync": len(re.findall(r"\bbar\.sync|barrier\.sync", ptx))}
    for m in re.findall(r"(ld\.global[\w.]*|st\.global[\w.]*|st\.shared[\w.]*|ld\.shared[\w.]*)", ptx):
        out[m] = out.get(m, 0) + 1
    return out


def bench(log, quick: bool, save=lambda rows: None) -> tuple[float, list]:
    from _common import copy_bandwidth_gbs, graph_ms, time_ms

    copy = copy_bandwidth_gbs()
    log(f"copy bandwidth {copy:,.0f} GB/s")
    rows = []
    dev = torch.device("cuda")
    for label, t, h, d, bs, dtype, fmt, primary in SHAPES:
        g = torch.Generator(device="cuda").manual_seed(0)
        key = torch.randn(t, h, d, generator=g, device="cuda").to(dtype)
        value = torch.randn(t, h, d, generator=g, device="cuda").to(dtype)
        nb = (2 * t + bs - 1) // bs
        cache = torch.zeros(nb, bs, h, slot_bytes(d), dtype=torch.uint8, device="cuda")
        slots = torch.randperm(nb * bs, generator=g, device="cuda")[:t]
        nbytes = 2 * key.numel() * key.element_size() + t * h * slot_bytes(d) + slots.numel() * 8
        floor = nbytes / copy / 1e6
        r0, w0, v0 = store_mod.words_launch_config(d, key.element_size())
        variants = [(f"shipped {r0}r/{w0}w{'/vec' if v0 else ''}", None)]
        if primary:
            variants += VARIANTS_D256 if d > 128 else VARIANTS_D128
        else:
            variants += [] if quick else SECONDARY
        ref = None
        for name, kw in variants:
            t0 = time.time()
            try:
                if kw is None:
                    fn = partial(_shipped, key, value, cache, slots, fmt)
                else:
                    fn = partial(_launch(kw, dev), key, value, cache, slots, fmt)
                cache.zero_()
                fn()
                torch.cuda.synchronize()
                if ref is None:
                    ref = cache.clone()
                    same = True
                else:
                    same = bool(torch.equal(cache, ref))
                if kw is not None:
                    row_ptx = _ptx_stats(sv.LAST.get("kernel"))
                else:
                    row_ptx = {}
                gms = graph_ms(fn)
                cms = time_ms(fn)
                row = dict(shape=label, d=d, dtype=str(dtype).split(".")[-1], fmt=fmt, variant=name,
                           graph_ms=gms, call_ms=cms, floor_ms=floor, graph_pct=100 * floor / gms,
                           call_pct=100 * floor / cms, same_bytes=same, bytes=nbytes, secs=time.time() - t0, **row_ptx)
            except Exception as e:  # noqa: BLE001
                row = dict(shape=label, variant=name, error=f"{type(e).__name__}: {str(e)[:400]}")
                log(traceback.format_exc()[-1500:])
            rows.append(row)
            save(rows)
            if "error" in row:
                log(f"{label:22s} {name:28s} ERROR {row['error'][:200]}")
            else:
                log(f"{label:22s} {name:28s} graph {row['graph_ms']:.4f} ms ({row['graph_pct']:5.1f}%)  call "
                    f"{row['call_ms']:.4f} ms ({row['call_pct']:5.1f}%)  same={same}  [{row['secs']:.1f}s]")
                if row_ptx:
                    log(f"    ptx of the row above: {row_ptx}")
        del key, value, cache, slots, ref
        torch.cuda.empty_cache()
    return copy, rows


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--check-only", action="store_true")
    p.add_argument("--bench-only", action="store_true")
    p.add_argument("--small", action="store_true")
    p.add_argument("--quick", action="store_true")
    a = p.parse_args()
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    def log(msg: str) -> None:
        print(msg, flush=True)

    import triton

    res: dict = {"torch": torch.__version__, "triton": triton.__version__}
    if dev.type == "cuda":
        res["gpu"] = torch.cuda.get_device_name()
    if not a.bench_only:
        t0 = time.time()
        passed, failed, fails = check(dev, a.small, CHECK_VARIANTS, log)
        log(f"EXACTNESS: PASS {passed} FAIL {failed} ({time.time() - t0:.1f}s)")
        res["check"] = dict(passed=passed, failed=failed, fails=fails[:50])
        if a.json:
            a.json.write_text(json.dumps(res, indent=1) + "\n")
    if not a.check_only:
        def save(rows: list) -> None:  # after every row: a run cut short by its timeout keeps what it measured
            if a.json:
                a.json.write_text(json.dumps({**res, "rows": rows}, indent=1) + "\n")

        copy, rows = bench(log, a.quick, save)
        res["copy_gbs"] = copy
        res["rows"] = rows
    if a.json:
        a.json.write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
