"""Time tq_store_k8v4 / tq_load_k8v4 on the GPU for a few realistic shapes; print time and effective GB/s.

Usage: ``python benchmarks/bench_turboquant.py``. Not a test: nothing here asserts a time. Bytes counted per
call: store reads key + value and writes the slots; load reads the slots and writes fp32 key + value.
"""

from __future__ import annotations

from functools import partial

import torch
import triton.testing

from kernels.turboquant import slot_bytes, tq_load_k8v4, tq_store_k8v4

# (label, num_tokens, num_kv_heads, head_dim, block_size, src dtype)
SHAPES = [
    ("decode 256 tok, 8 kvh, d128", 256, 8, 128, 16, torch.bfloat16),
    ("prefill 8k tok, 8 kvh, d128", 8192, 8, 128, 16, torch.bfloat16),
    ("prefill 8k tok, 8 kvh, d128 fp16", 8192, 8, 128, 16, torch.float16),
    ("prefill 16k tok, 4 kvh, d96", 16384, 4, 96, 64, torch.bfloat16),
    ("prefill 16k tok, 16 kvh, d80", 16384, 16, 80, 128, torch.float32),
    ("prefill 32k tok, 8 kvh, d256", 32768, 8, 256, 32, torch.bfloat16),
]


def _case(t: int, h: int, d: int, bs: int, dtype: torch.dtype):
    g = torch.Generator(device="cpu").manual_seed(0)
    key = torch.randn(t, h, d, generator=g).to(dtype).cuda()
    value = torch.randn(t, h, d, generator=g).to(dtype).cuda()
    nb = (2 * t + bs - 1) // bs  # a cache twice as large as needed: slots scattered over it
    cache = torch.zeros(nb, bs, h, slot_bytes(d), dtype=torch.uint8, device="cuda")
    slots = torch.randperm(nb * bs, generator=g)[:t].cuda()
    return key, value, cache, slots


def main() -> None:
    if not torch.cuda.is_available():
        raise SystemExit("bench_turboquant.py needs a CUDA GPU")
    cap = torch.cuda.get_device_capability()
    print(
        f"{torch.cuda.get_device_name()} (sm{cap[0]}{cap[1]}), torch {torch.__version__}, "
        f"triton {triton.__version__}"
    )
    head = f"{'shape':36} {'fmt':6} {'store ms':>9} {'store GB/s':>10} {'load ms':>9} {'load GB/s':>10}"
    print(head)
    print("-" * len(head))
    fmts = ["e4nv", "e4b15"] if cap >= (8, 9) else ["e4b15"]
    for label, t, h, d, bs, dtype in SHAPES:
        key, value, cache, slots = _case(t, h, d, bs, dtype)
        for fmt in fmts:
            store = partial(tq_store_k8v4, key, value, cache, slots, fp8_format=fmt)
            load = partial(tq_load_k8v4, cache, slots, head_dim=d, fp8_format=fmt)
            store_ms = triton.testing.do_bench(store)
            load_ms = triton.testing.do_bench(load)
            slot_total = t * h * slot_bytes(d)
            store_bytes = (
                2 * key.numel() * key.element_size() + slot_total + slots.numel() * slots.element_size()
            )
            load_bytes = slot_total + 2 * key.numel() * 4 + slots.numel() * slots.element_size()
            print(
                f"{label:36} {fmt:6} {store_ms:9.4f} {store_bytes / store_ms / 1e6:10.1f} "
                f"{load_ms:9.4f} {load_bytes / load_ms / 1e6:10.1f}"
            )


if __name__ == "__main__":
    main()
