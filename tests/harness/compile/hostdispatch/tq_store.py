"""Demo kernels for launch capture's device personalities: a key-cache store written like vLLM's turboquant
store before its fix, whose *launcher* picks the FP8 format on the host from the device.

``store_keys`` casts the loaded key straight to the chosen FP8 format. On sm89+ that is e4nv, which takes
fp16/bf16/fp32; before sm89 the launcher picks Triton's e4b15, whose conversion takes fp16/fp32 only, so a bf16
key cannot compile for sm75-sm86. ``store_keys_fixed`` widens the key to fp32 first in the e4b15 branch (the
fix). A CPU box (``torch.cuda.is_available()`` is False) takes the e4nv branch, so a test that launches fp16
on the interpreter never runs the branch an A100 takes. Not a test module (no ``test_`` prefix).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def store_keys(key_ptr, cache_ptr, n, FP8: tl.constexpr, E4B15: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    k = tl.load(key_ptr + offs, mask=m, other=0.0)
    # no clamp before the cast: Triton 3.6 promotes bf16 to fp32 in tl.maximum with a float scalar, which would
    # hide the bug there (the seed bug's own history); the cast of the loaded key is what the GPU refuses
    tl.store(cache_ptr + offs, k.to(FP8).to(tl.uint8, bitcast=True), mask=m)


@triton.jit
def store_keys_fixed(key_ptr, cache_ptr, n, FP8: tl.constexpr, E4B15: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    k = tl.load(key_ptr + offs, mask=m, other=0.0)
    if E4B15:
        k = tl.minimum(tl.maximum(k.to(tl.float32), -1.75), 1.75)  # e4b15 takes fp16/fp32 only
    tl.store(cache_ptr + offs, k.to(FP8).to(tl.uint8, bitcast=True), mask=m)


def store(key: torch.Tensor, *, fixed: bool = False) -> torch.Tensor:
    """The FP8 codes of ``key`` (1-D) as uint8, in the format this device's cache uses."""
    e4b15 = torch.cuda.is_available() and torch.cuda.get_device_capability() < (8, 9)
    fmt = tl.float8e4b15 if e4b15 else tl.float8e4nv
    cache = torch.empty(key.shape, dtype=torch.uint8, device=key.device)
    kernel = store_keys_fixed if fixed else store_keys
    kernel[(triton.cdiv(key.numel(), 64),)](key, cache, key.numel(), FP8=fmt, E4B15=e4b15, BLOCK=64)
    return cache
