"""The turboquant load kernel as it shipped before issue 25 (one one-warp program per (token, kv-head), FP8
through Triton's casts): the yardstick the new kernels are held to, bit for bit.

Kept here, beside the tests, and not in ``kernels/`` (the package ships one load); ``benchmarks/
bench_turboquant.py --check-old`` imports it from here to compare the two on the GPU. ``load_v1`` takes the
arguments of ``tq_load_k8v4`` after its checks (a resolved format) and launches the old kernel as it was
launched. Known defect, kept: on a GPU its e4b15 cast does not compile for head_dim 1 or 2 (Triton packs
that conversion four elements at a time and the tile has fewer); the new kernels have no FP8 cast.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.turboquant.layout import KEY_NAN_CODE, next_pow2, value_bytes
from kernels.turboquant.store import FMT_CODE

__all__ = ["load_v1", "builds_on_gpu"]


@triton.jit
def _load_k8v4_v1_kernel(
    cache_ptr,
    slot_ptr,
    key_out,
    value_out,
    stride_cb,
    stride_cs,
    stride_ch,
    stride_ot,
    stride_oh,
    stride_s,
    block_size,
    num_slots,
    HEAD_DIM: tl.constexpr,
    D_P2: tl.constexpr,
    HALF_P2: tl.constexpr,
    KEY_FMT: tl.constexpr,
    NAN_CODE: tl.constexpr,
):
    tok = tl.program_id(0).to(tl.int64)
    head = tl.program_id(1).to(tl.int64)
    slot = tl.load(slot_ptr + tok * stride_s).to(tl.int64)
    ok = ((slot >= 0) & (slot < num_slots)).to(tl.int32)  # int, broadcast into masks (see the store kernel)
    base = cache_ptr + (slot // block_size) * stride_cb + (slot % block_size) * stride_cs + head * stride_ch
    out = tok * stride_ot + head * stride_oh

    d = tl.arange(0, D_P2)
    dmask = d < HEAD_DIM
    dvalid = d * 0 + ok != 0
    codes = tl.load(base + d, mask=dmask & dvalid, other=0)
    if KEY_FMT == 0:
        k = codes.to(tl.float8e4nv, bitcast=True).to(tl.float32)
    else:
        k = codes.to(tl.float8e4b15, bitcast=True).to(tl.float32)
    k = tl.where((codes & 0x7F) == NAN_CODE, float("nan"), k)  # e4b15's written NaN; e4nv's own NaN
    k = tl.where(dvalid, k, float("nan"))
    tl.store(key_out + out + d, k, mask=dmask)

    h = tl.arange(0, HALF_P2)
    me = 2 * h < HEAD_DIM
    mo = 2 * h + 1 < HEAD_DIM
    hvalid = h * 0 + ok != 0
    packed = tl.load(base + HEAD_DIM + h, mask=me & hvalid, other=0).to(tl.int32)
    p = base + HEAD_DIM + (HEAD_DIM + 1) // 2
    t = tl.arange(0, 4)
    b = tl.load(p + t, mask=t * 0 + ok != 0, other=0).to(tl.int32)
    s_bits = tl.sum(tl.where(t == 0, b, 0) | tl.where(t == 1, b << 8, 0), axis=0)
    z_bits = tl.sum(tl.where(t == 2, b, 0) | tl.where(t == 3, b << 8, 0), axis=0)
    scale = s_bits.to(tl.int16).to(tl.float16, bitcast=True).to(tl.float32)
    zero = z_bits.to(tl.int16).to(tl.float16, bitcast=True).to(tl.float32)
    ve = (packed & 0xF).to(tl.float32) * scale + zero
    vo = (packed >> 4).to(tl.float32) * scale + zero
    ve = tl.where(hvalid, ve, float("nan"))
    vo = tl.where(hvalid, vo, float("nan"))
    tl.store(value_out + out + 2 * h, ve, mask=me)
    tl.store(value_out + out + 2 * h + 1, vo, mask=mo)


def builds_on_gpu(head_dim: int, fmt: str) -> bool:
    """Whether the old kernel compiles for a GPU at this head_dim (see the module docstring)."""
    return fmt != "e4b15" or next_pow2(head_dim) >= 4


def load_v1(kv_cache: torch.Tensor, slot_mapping: torch.Tensor, head_dim: int, fmt: str):
    """(key, value) fp32 ``[n, heads, head_dim]`` as the old ``tq_load_k8v4`` returned them."""
    num_blocks, block_size, num_heads, _ = kv_cache.shape
    n = slot_mapping.shape[0]
    key = torch.empty((n, num_heads, head_dim), dtype=torch.float32, device=kv_cache.device)
    value = torch.empty_like(key)
    if n == 0 or num_heads == 0:
        return key, value
    _load_k8v4_v1_kernel[(n, num_heads)](
        kv_cache, slot_mapping, key, value,
        kv_cache.stride(0), kv_cache.stride(1), kv_cache.stride(2),
        key.stride(0), key.stride(1), slot_mapping.stride(0),
        block_size, num_blocks * block_size,
        HEAD_DIM=head_dim, D_P2=next_pow2(head_dim), HALF_P2=max(1, next_pow2(value_bytes(head_dim))),
        KEY_FMT=FMT_CODE[fmt], NAN_CODE=KEY_NAN_CODE,
        num_warps=1 if head_dim <= 128 else 2,
    )
    return key, value
