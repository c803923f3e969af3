"""Host-side validation for the K8V4 entry points: every bad argument is named with what was expected.

Why on the host, with a device sync for the slot range: a slot past the cache is an out-of-bounds write
that corrupts another sequence's KV silently. Every check runs before anything is launched, so a rejected
call writes nothing.
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


def cache(kv_cache: Any, *, num_kv_heads: int, head_dim: int) -> torch.Tensor:
    tensor("kv_cache", kv_cache, dim=4, dtypes=(torch.uint8,))
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
    return kv_cache


def head_dim(d: Any) -> int:
    if not isinstance(d, int) or isinstance(d, bool) or not 1 <= d <= MAX_HEAD_DIM:
        raise ValueError(f"head_dim must be an int in [1, {MAX_HEAD_DIM}], got {d!r}")
    return d


def slots(slot_mapping: torch.Tensor, *, num_tokens: int, num_slots: int, unique: bool) -> None:
    """Length, range (``slot < num_blocks * block_size``; negative = skip) and, for writes, no slot twice."""
    tensor("slot_mapping", slot_mapping, dim=1, dtypes=INT_DTYPES)
    if slot_mapping.shape[0] != num_tokens:
        raise ValueError(
            f"slot_mapping has {slot_mapping.shape[0]} entries, expected num_tokens = {num_tokens}"
        )
    if num_tokens == 0:
        return
    hi = int(slot_mapping.max())
    if hi >= num_slots:
        t = int(torch.argmax(slot_mapping.long()))
        raise ValueError(
            f"slot_mapping[{t}] = {hi} is out of range: the cache has num_blocks × block_size = "
            f"{num_slots} slots "
            f"(valid: 0..{num_slots - 1}, or negative to skip the token)"
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
