"""``tq_load_k8v4``: gather (token, kv-head) slots back into float keys and values — the read-back that
makes the store testable by round trip, and the decode side of the layout.

Dequantization is exact in fp32: FP8 codes decode exactly, and ``code · scale`` (4 × 11 significant bits)
is exact, so ``code · scale + zero`` rounds once whether or not the compiler fuses it into an FMA.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.turboquant import _checks
from kernels.turboquant.layout import KEY_NAN_CODE, next_pow2, value_bytes
from kernels.turboquant.store import FMT_CODE, resolve_fp8_format

__all__ = ["tq_load_k8v4", "load_compile_spec"]


@triton.jit
def _load_k8v4_kernel(
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


def load_compile_spec(fmt: str, *, head_dim: int = 128, slot_dtype: str = "i64") -> tuple[dict, dict]:
    """(signature, constexprs) of the load kernel as launched — for the compile matrix."""
    if fmt not in FMT_CODE:
        raise ValueError(f"fmt must be one of {sorted(FMT_CODE)}, got {fmt!r}")
    sig = {
        "cache_ptr": "*u8",
        "slot_ptr": f"*{slot_dtype}",
        "key_out": "*fp32",
        "value_out": "*fp32",
        **{
            n: "i32"
            for n in (
                "stride_cb",
                "stride_cs",
                "stride_ch",
                "stride_ot",
                "stride_oh",
                "stride_s",
                "block_size",
                "num_slots",
            )
        },
    }
    return sig, _constexprs(head_dim, fmt)


def _constexprs(head_dim: int, fmt: str) -> dict:
    return {
        "HEAD_DIM": head_dim,
        "D_P2": next_pow2(head_dim),
        "HALF_P2": max(1, next_pow2(value_bytes(head_dim))),
        "KEY_FMT": FMT_CODE[fmt],
        "NAN_CODE": KEY_NAN_CODE,
    }


def tq_load_k8v4(
    kv_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
    *,
    head_dim: int,
    fp8_format: str = "auto",
    validate: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Keys and values of the slots in ``slot_mapping`` as fp32 ``[num_tokens, num_kv_heads, head_dim]``.

    ``head_dim`` is required (the slot size does not determine it); ``fp8_format`` must be what the store
    used (``"auto"`` resolves the same way on the same device). Rows of negative slots are NaN ("no data").
    NaN keys come back NaN in both formats; a vector stored with a NaN value comes back all NaN. A slot
    past the cache reads as NaN too (checked on the device); ``validate=True`` raises on it instead, at the
    cost of a host sync (see ``tq_store_k8v4``).
    """
    d = _checks.head_dim(head_dim)
    _checks.tensor("kv_cache", kv_cache, dim=4, dtypes=(torch.uint8,))
    num_blocks, block_size, num_heads, _ = kv_cache.shape
    _checks.cache(kv_cache, num_kv_heads=num_heads, head_dim=d)
    _checks.tensor("slot_mapping", slot_mapping, dim=1, dtypes=_checks.INT_DTYPES)
    _checks.same_device(kv_cache.device, slot_mapping=slot_mapping)
    fmt = resolve_fp8_format(kv_cache.device, fp8_format)
    n = slot_mapping.shape[0]
    if not isinstance(validate, bool):
        raise TypeError(f"validate must be a bool, got {type(validate).__name__}")
    if validate:
        _checks.slot_values(slot_mapping, num_slots=num_blocks * block_size, unique=False)
    key = torch.empty((n, num_heads, d), dtype=torch.float32, device=kv_cache.device)
    value = torch.empty_like(key)
    if n == 0 or num_heads == 0:
        return key, value
    _load_k8v4_kernel[(n, num_heads)](
        kv_cache,
        slot_mapping,
        key,
        value,
        kv_cache.stride(0),
        kv_cache.stride(1),
        kv_cache.stride(2),
        key.stride(0),
        key.stride(1),
        slot_mapping.stride(0),
        block_size,
        num_blocks * block_size,
        **_constexprs(d, fmt),
        num_warps=1 if d <= 128 else 2,
    )
    return key, value
