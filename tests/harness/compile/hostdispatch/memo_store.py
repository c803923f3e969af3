"""Demo launchers for launch capture's flag variants: the turboquant key store behind the two launcher patterns
device replays cannot steer (vLLM's own): a device check memoized per device (``functools.cache``, as vLLM's
``_use_fp8_e4b15`` caches its answer in a module dict) and a platform decided once, at import (vLLM's
``current_platform``, a CPU platform on a CPU box, which never asks ``torch.cuda`` again).

``store_keys`` casts the loaded key straight to the chosen FP8 format: a bf16 key cannot be cast to e4b15 (its
conversion takes fp16/fp32), which is the branch an A100 takes. ``store_keys_fixed`` widens the key to fp32 first
on that branch. Not a test module (no ``test_`` prefix).
"""

import functools

import torch
import triton
import triton.language as tl


@functools.cache
def _use_fp8_e4b15(device: torch.device) -> bool:
    return torch.cuda.is_available() and device.type == "cuda" and torch.cuda.get_device_capability(device) < (8, 9)


class _Platform:
    """Resolved once, when the module is imported (a CPU box gets a platform that never asks the GPU)."""

    def __init__(self) -> None:
        self.fp8_e4b15 = torch.cuda.is_available() and torch.cuda.get_device_capability() < (8, 9)


PLATFORM = _Platform()


@triton.jit
def store_keys(key_ptr, cache_ptr, n, FP8: tl.constexpr, E4B15: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    k = tl.load(key_ptr + offs, mask=m, other=0.0)
    tl.store(cache_ptr + offs, k.to(FP8).to(tl.uint8, bitcast=True), mask=m)


@triton.jit
def store_keys_fixed(key_ptr, cache_ptr, n, FP8: tl.constexpr, E4B15: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    k = tl.load(key_ptr + offs, mask=m, other=0.0)
    if E4B15:
        k = k.to(tl.float32)  # e4b15's conversion takes fp16/fp32 only
    tl.store(cache_ptr + offs, k.to(FP8).to(tl.uint8, bitcast=True), mask=m)


def _launch(key: torch.Tensor, e4b15: bool, fixed: bool) -> torch.Tensor:
    cache = torch.empty(key.shape, dtype=torch.uint8, device=key.device)
    kernel = store_keys_fixed if fixed else store_keys
    kernel[(triton.cdiv(key.numel(), 64),)](key, cache, key.numel(), FP8=tl.float8e4b15 if e4b15 else tl.float8e4nv,
                                             E4B15=e4b15, BLOCK=64)
    return cache


def store_memoized(key: torch.Tensor, *, fixed: bool = False) -> torch.Tensor:
    """The FP8 codes of ``key`` in the format this device's cache uses, asked once per device."""
    return _launch(key, _use_fp8_e4b15(key.device), fixed)


def store_platform(key: torch.Tensor, *, fixed: bool = False) -> torch.Tensor:
    """The same, in the format the platform chose at import."""
    return _launch(key, PLATFORM.fp8_e4b15, fixed)
