"""A KV-cache store that quantizes keys to FP8, written the way vLLM's turboquant store is: the launcher asks the
device once which FP8 format its cache uses and remembers the answer per device (``_use_fp8_e4b15``).

Before sm89 NVIDIA GPUs have no e4m3 conversion, so the cache uses Triton's ``float8e4b15``; its conversion takes
fp16 and fp32 sources only, which is why the kernel widens the key to fp32 first on that branch (a bf16 key cast
straight to e4b15 does not compile for sm75-sm86).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

# device -> whether its cache stores e4b15 (the check is asked once per device, as real launchers do)
_FP8_E4B15: dict[str, bool] = {}


def _use_fp8_e4b15(device: torch.device) -> bool:
    key = str(device)
    if key not in _FP8_E4B15:
        _FP8_E4B15[key] = (
            torch.cuda.is_available() and device.type == "cuda" and torch.cuda.get_device_capability(device) < (8, 9)
        )
    return _FP8_E4B15[key]


@triton.jit
def _store_keys(key_ptr, cache_ptr, n, FP8: tl.constexpr, E4B15: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    k = tl.load(key_ptr + offs, mask=mask, other=0.0)
    if E4B15:
        k = k.to(tl.float32)  # e4b15's conversion takes fp16/fp32 only
    tl.store(cache_ptr + offs, k.to(FP8).to(tl.uint8, bitcast=True), mask=mask)


def store_fp8(key: torch.Tensor) -> torch.Tensor:
    """The FP8 codes of ``key`` (1-D fp16/bf16/fp32) as uint8, in the format this device's cache uses."""
    e4b15 = _use_fp8_e4b15(key.device)
    cache = torch.empty(key.shape, dtype=torch.uint8, device=key.device)
    grid = (triton.cdiv(key.numel(), 128),)
    _store_keys[grid](key, cache, key.numel(), FP8=tl.float8e4b15 if e4b15 else tl.float8e4nv, E4B15=e4b15,
                      BLOCK=128)
    return cache
