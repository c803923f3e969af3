"""Host-side validation for the K8V4 entry points: every bad argument is named with what was expected.

Two kinds of checks. Those that need only shapes, strides, dtypes and devices run before anything is
launched, so a rejected call writes nothing; a call whose layout (everything they read but the token count)
passed them before skips them (the entry points' ``_PLANS``). Those that need the slot *values* (range,
duplicates) read device memory, i.e. sync the host with the GPU: they run only with ``validate=True``. The
kernels re-check the range themselves, so an unvalidated bad slot is skipped, never written out of bounds.
"""

from __future__ import annotations

from typing import Any

import torch

from kernels.turboquant.layout import FORMATS, MAX_HEAD_DIM, slot_bytes

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
INT_DTYPES = (torch.int32, torch.int64)


def _names(dtypes: tuple[torch.dtype, ...]) -> str:
    return ", ".join(str(d).replace("torch.", "") for d in dtypes)


def tensor(name: str, x: Any, *, dim: int, dtypes: tuple[torch.dtype, ...]) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != dim:
        raise ValueError(f"{name} must have {dim} dims, got shape {tuple(x.shape)}")
    if x.dtype not in dtypes:
        raise TypeError(
            f"{name} must have dtype in ({_names(dtypes)}), got {str(x.dtype).replace('torch.', '')}"
        )
    return x


def last_dim_contiguous(name: str, x: torch.Tensor) -> None:
    if x.shape[-1] > 1 and x.stride(-1) != 1:
        raise ValueError(
            f"{name} must be contiguous in its last dim (stride 1), got strides {tuple(x.stride())}"
        )


def same_device(device: torch.device, **tensors: torch.Tensor) -> None:
    for name, t in tensors.items():
        if t.device != device:
            raise ValueError(f"{name} is on {t.device}, expected {device} (the kv_cache's device)")


#: (shape, strides, num_kv_heads, head_dim) of uint8 caches that passed :func:`cache`: its checks read only
#: these, so a cache seen before is not checked again (the host-overhead budget of a call: <= 25 us).
_CACHES_OK: set[tuple] = set()


def cache(kv_cache: Any, *, num_kv_heads: int, head_dim: int) -> torch.Tensor:
    tensor("kv_cache", kv_cache, dim=4, dtypes=(torch.uint8,))
    seen = (kv_cache.shape, kv_cache.stride(), num_kv_heads, head_dim)
    if seen in _CACHES_OK:
        return kv_cache
    nb, bs, h, sb = kv_cache.shape
    if nb < 1 or bs < 1:
        raise ValueError(
            f"kv_cache must have num_blocks >= 1 and block_size >= 1, got shape {tuple(kv_cache.shape)}"
        )
    if h != num_kv_heads:
        raise ValueError(
            f"kv_cache.shape[2] (num_kv_heads) is {h}, but key/value have {num_kv_heads} kv heads"
        )
    want = slot_bytes(head_dim)
    if sb != want:
        raise ValueError(
            f"kv_cache.shape[3] (slot bytes) is {sb}, but head_dim {head_dim} needs exactly {want} "
            f"(= {head_dim} key + {(head_dim + 1) // 2} value + 4 scale/zero bytes, padded to even)"
        )
    last_dim_contiguous("kv_cache", kv_cache)
    no_self_overlap("kv_cache", kv_cache)
    if len(_CACHES_OK) < 4096:
        _CACHES_OK.add(seen)
    return kv_cache


def no_self_overlap(name: str, x: torch.Tensor) -> None:
    """Refuse a view in which two elements share memory (``expand``, zero or interleaved strides): two slots
    would alias one byte range and the duplicate-slot guard could not see it. Sufficient test: with the dims
    of size > 1 sorted by stride, each stride must step past everything the smaller ones span."""
    span = 1  # elements covered by the dims checked so far
    for stride, size in sorted((x.stride(i), x.shape[i]) for i in range(x.dim()) if x.shape[i] > 1):
        if stride < span:
            raise ValueError(
                f"{name} overlaps itself in memory (shape {tuple(x.shape)}, strides {tuple(x.stride())}): "
                f"distinct slots must not share bytes; pass a tensor whose strides do not alias "
                f"(e.g. not an expand()ed view)"
            )
        span += stride * (size - 1)


def head_dim(d: Any, *, name: str = "head_dim") -> int:
    if not isinstance(d, int) or isinstance(d, bool) or not 1 <= d <= MAX_HEAD_DIM:
        raise ValueError(f"{name} must be an int in [1, {MAX_HEAD_DIM}], got {d!r}")
    return d


def num_entries(slot_mapping: torch.Tensor, num_tokens: int) -> None:
    if slot_mapping.shape[0] != num_tokens:
        raise ValueError(
            f"slot_mapping has {slot_mapping.shape[0]} entries, expected num_tokens = {num_tokens}"
        )


def slot_values(slot_mapping: torch.Tensor, *, num_slots: int, unique: bool) -> None:
    """``validate=True`` only (reads the slots: a device sync). Range (``slot < num_blocks * block_size``;
    negative = skip) and, for writes, no slot twice."""
    if slot_mapping.numel() == 0:
        return
    hi = int(slot_mapping.max())
    if hi >= num_slots:
        t = int(torch.argmax(slot_mapping.long()))
        raise ValueError(
            f"slot_mapping[{t}] = {hi} is out of range: the cache has num_blocks × block_size = "
            f"{num_slots} slots (valid: 0..{num_slots - 1}, or negative to skip the token)"
        )
    if unique:
        used = slot_mapping[slot_mapping >= 0]
        if used.numel() > 1:
            u, counts = torch.unique(used, return_counts=True)
            if bool((counts > 1).any()):
                dup = int(u[counts > 1][0])
                raise ValueError(
                    f"slot_mapping writes slot {dup} more than once; the result would depend on program order"
                )


def fp8_format(value: Any) -> str:
    if value == "auto" or value in FORMATS:
        return value
    raise ValueError(f"fp8_format must be 'auto', {', '.join(repr(f) for f in FORMATS)}; got {value!r}")
