"""``tq_store_k8v4``: write keys as FP8 codes and values as 4-bit min/max codes into a paged KV cache.

One Triton program per (token, kv-head). Every load is converted to fp32 before any FP8 cast or
arithmetic: Triton lowers bf16 → e4b15 nowhere ("custom FP8 conversion accepts only fp16/fp32", the seed
bug), and fp32 is also what the torch reference computes in. Out-of-range keys get the saturated code after
the cast, so the interpreter (which does not saturate) and hardware (which does) write the same code. The
value quantizer divides with ``div_rn`` (IEEE), so its codes do not depend on a GPU's fast-division
approximation.

Special inputs, on purpose (see :mod:`kernels.turboquant.layout`):

- keys beyond ±KEY_MAX (448 e4nv, **1.75 e4b15**) and ±inf saturate; NaN keys are written as code 0x7f;
- values are clamped to ±65504 (scale and zero are fp16, so nothing wider fits; no inf is ever written);
- a NaN anywhere in a value vector makes its scale and zero fp16 NaN and its codes 0.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from kernels.turboquant import _checks
from kernels.turboquant.layout import (
    FP16_NAN_BITS,
    KEY_MAX,
    KEY_NAN_CODE,
    SCALE_EPS,
    VALUE_MAX,
    next_pow2,
    slot_bytes,
    value_bytes,
)

__all__ = ["tq_store_k8v4", "resolve_fp8_format", "store_compile_spec", "FMT_CODE"]

#: The ``KEY_FMT`` constexpr of the kernels.
FMT_CODE: dict[str, int] = {"e4nv": 0, "e4b15": 1}


@triton.jit
def _store_k8v4_kernel(
    key_ptr,
    value_ptr,
    cache_ptr,
    slot_ptr,
    stride_kt,
    stride_kh,
    stride_vt,
    stride_vh,
    stride_cb,
    stride_cs,
    stride_ch,
    block_size,
    num_slots,
    HEAD_DIM: tl.constexpr,
    D_P2: tl.constexpr,
    HALF_P2: tl.constexpr,
    PAD: tl.constexpr,
    KEY_FMT: tl.constexpr,
    KEY_LIMIT: tl.constexpr,
    VALUE_LIMIT: tl.constexpr,
    EPS: tl.constexpr,
    NAN_CODE: tl.constexpr,
    NAN_F16: tl.constexpr,
):
    tok = tl.program_id(0).to(tl.int64)
    head = tl.program_id(1).to(tl.int64)
    slot = tl.load(slot_ptr + tok).to(tl.int64)
    # The host rejects slot >= num_slots; never write past the cache anyway. `ok` is an int broadcast into
    # each mask (bool-tensor & bool-scalar yields int32 masks in the interpreter, which it then refuses).
    ok = ((slot >= 0) & (slot < num_slots)).to(tl.int32)
    blk = slot // block_size
    pos = slot % block_size
    base = cache_ptr + blk * stride_cb + pos * stride_cs + head * stride_ch

    # --- keys: fp32 first (the seed fix), cast, saturate ------------------------------------------------
    d = tl.arange(0, D_P2)
    dmask = (d < HEAD_DIM) & (d * 0 + ok != 0)
    k = tl.load(key_ptr + tok * stride_kt + head * stride_kh + d, mask=dmask, other=0.0).to(tl.float32)
    # Cast straight from the loaded keys, fix up the codes after: nothing may stand between the load line and
    # the cast (Triton 3.6 widens bf16 to fp32 inside tl.maximum, which hid the seed bug there). Out-of-range
    # keys and ±inf get the saturated code 0x7e/0xfe (hardware saturates by itself, the interpreter does not),
    # NaN keys NAN_CODE.
    if KEY_FMT == 0:
        kc = k.to(tl.float8e4nv).to(tl.uint8, bitcast=True)
    else:
        kc = k.to(tl.float8e4b15).to(tl.uint8, bitcast=True)
    sat = tl.where(k < 0, 0xFE, 0x7E).to(tl.uint8)
    kc = tl.where((k > KEY_LIMIT) | (k < -KEY_LIMIT), sat, kc)
    kc = tl.where(k != k, tl.full([D_P2], NAN_CODE, tl.uint8), kc)
    tl.store(base + d, kc, mask=dmask)

    # --- values: per-vector asymmetric min/max, 4 bits, even index in the low nibble -------------------
    h = tl.arange(0, HALF_P2)
    me = (2 * h < HEAD_DIM) & (h * 0 + ok != 0)
    mo = (2 * h + 1 < HEAD_DIM) & (h * 0 + ok != 0)
    vrow = value_ptr + tok * stride_vt + head * stride_vh
    ve = tl.load(vrow + 2 * h, mask=me, other=0.0).to(tl.float32)
    vo = tl.load(vrow + 2 * h + 1, mask=mo, other=0.0).to(tl.float32)
    n_nan = tl.sum((ve != ve).to(tl.int32), axis=0) + tl.sum((vo != vo).to(tl.int32), axis=0)
    ve = tl.minimum(tl.maximum(tl.where(ve != ve, 0.0, ve), -VALUE_LIMIT), VALUE_LIMIT)
    vo = tl.minimum(tl.maximum(tl.where(vo != vo, 0.0, vo), -VALUE_LIMIT), VALUE_LIMIT)
    vmin = tl.minimum(
        tl.min(tl.where(me, ve, VALUE_LIMIT), axis=0), tl.min(tl.where(mo, vo, VALUE_LIMIT), axis=0)
    )
    vmax = tl.maximum(
        tl.max(tl.where(me, ve, -VALUE_LIMIT), axis=0), tl.max(tl.where(mo, vo, -VALUE_LIMIT), axis=0)
    )
    scale = tl.maximum(tl.math.div_rn(vmax - vmin, tl.full([], 15.0, tl.float32)), EPS)
    qe = tl.floor(tl.math.div_rn(ve - vmin, tl.zeros_like(ve) + scale) + 0.5)
    qo = tl.floor(tl.math.div_rn(vo - vmin, tl.zeros_like(vo) + scale) + 0.5)
    qe = tl.minimum(tl.maximum(qe, 0.0), 15.0).to(tl.int32)
    qo = tl.where(mo, tl.minimum(tl.maximum(qo, 0.0), 15.0).to(tl.int32), 0)
    packed = qe | (qo << 4)
    packed = tl.where(n_nan > 0, 0, packed).to(tl.uint8)
    tl.store(base + HEAD_DIM + h, packed, mask=me)

    # --- scale, zero (fp16, little-endian bytes) and the even-size pad --------------------------------
    s_bits = scale.to(tl.float16).to(tl.int16, bitcast=True).to(tl.int32) & 0xFFFF
    z_bits = vmin.to(tl.float16).to(tl.int16, bitcast=True).to(tl.int32) & 0xFFFF
    s_bits = tl.where(n_nan > 0, NAN_F16, s_bits)
    z_bits = tl.where(n_nan > 0, NAN_F16, z_bits)
    t = tl.arange(0, 8)
    word = tl.where(t < 2, s_bits, z_bits)
    tail = tl.where(t < 4, (word >> ((t % 2) * 8)) & 0xFF, 0).to(tl.uint8)
    tl.store(base + HEAD_DIM + (HEAD_DIM + 1) // 2 + t, tail, mask=(t < 4 + PAD) & (t * 0 + ok != 0))


def _interpreting(kernel: Any) -> bool:
    try:
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:  # pragma: no cover
        return False
    return isinstance(kernel, InterpretedFunction)


def resolve_fp8_format(device: torch.device | str, fp8_format: str = "auto") -> str:
    """The key format for ``device``: ``"auto"`` is e4nv on sm89+ and e4b15 below; the interpreter (CPU
    tensors under ``TRITON_INTERPRET=1``) gets e4nv. A forced e4nv below sm89 is refused here, not by the
    compiler."""
    fmt = _checks.fp8_format(fp8_format)
    dev = torch.device(device)
    if dev.type == "cuda":
        if getattr(torch.version, "hip", None):
            raise ValueError(
                "tq_store_k8v4 supports NVIDIA GPUs (and the interpreter) only: Triton has no "
                "e4b15 lowering on ROCm and e4nv there needs gfx950"
            )
        major, minor = torch.cuda.get_device_capability(dev)
        ada = (major, minor) >= (8, 9)
        if fmt == "auto":
            return "e4nv" if ada else "e4b15"
        if fmt == "e4nv" and not ada:
            raise ValueError(
                f"fp8_format='e4nv' needs sm89+; {dev} is sm{major}{minor} (use 'e4b15' or 'auto')"
            )
        return fmt
    if dev.type == "cpu":
        if not _interpreting(_store_k8v4_kernel):
            raise ValueError(
                "CPU tensors need the Triton interpreter: set TRITON_INTERPRET=1 before "
                "importing kernels.turboquant"
            )
        return "e4nv" if fmt == "auto" else fmt
    raise ValueError(f"unsupported device {dev}; expected cuda (NVIDIA) or cpu under TRITON_INTERPRET=1")


def _constexprs(head_dim: int, fmt: str) -> dict[str, Any]:
    d_p2 = next_pow2(head_dim)
    used = head_dim + value_bytes(head_dim) + 4
    return {
        "HEAD_DIM": head_dim,
        "D_P2": d_p2,
        "HALF_P2": max(1, next_pow2(value_bytes(head_dim))),
        "PAD": slot_bytes(head_dim) - used,
        "KEY_FMT": FMT_CODE[fmt],
        "KEY_LIMIT": KEY_MAX[fmt],
        "VALUE_LIMIT": VALUE_MAX,
        "EPS": SCALE_EPS,
        "NAN_CODE": KEY_NAN_CODE,
        "NAN_F16": FP16_NAN_BITS,
    }


_TL_NAME = {"fp16": "fp16", "bf16": "bf16", "fp32": "fp32"}


def store_compile_spec(
    key_dtype: str, fmt: str, *, head_dim: int = 128, value_dtype: str | None = None, slot_dtype: str = "i64"
) -> tuple[dict[str, str], dict[str, Any]]:
    """(signature, constexprs) of the store kernel as launched for these dtypes — for the compile matrix."""
    if key_dtype not in _TL_NAME or (value_dtype or key_dtype) not in _TL_NAME:
        raise ValueError(
            f"key_dtype/value_dtype must be one of {sorted(_TL_NAME)}, got {key_dtype!r}/{value_dtype!r}"
        )
    if fmt not in FMT_CODE:
        raise ValueError(f"fmt must be one of {sorted(FMT_CODE)}, got {fmt!r}")
    sig = {
        "key_ptr": f"*{_TL_NAME[key_dtype]}",
        "value_ptr": f"*{_TL_NAME[value_dtype or key_dtype]}",
        "cache_ptr": "*u8",
        "slot_ptr": f"*{slot_dtype}",
        **{
            n: "i32"
            for n in (
                "stride_kt",
                "stride_kh",
                "stride_vt",
                "stride_vh",
                "stride_cb",
                "stride_cs",
                "stride_ch",
                "block_size",
                "num_slots",
            )
        },
    }
    return sig, _constexprs(head_dim, fmt)


def tq_store_k8v4(
    key: torch.Tensor,
    value: torch.Tensor,
    kv_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
    *,
    fp8_format: str = "auto",
) -> None:
    """Quantize ``key``/``value`` ``[num_tokens, num_kv_heads, head_dim]`` (fp16, bf16 or fp32) into the
    ``uint8`` cache ``[num_blocks, block_size, num_kv_heads, slot_bytes(head_dim)]`` at ``slot_mapping``
    (``[num_tokens]`` int32/int64; negative = skip the token). Strided cache views are fine if the last dim
    is contiguous. Everything is validated before launch; on error nothing is written.
    """
    _checks.tensor("key", key, dim=3, dtypes=_checks.FLOAT_DTYPES)
    _checks.tensor("value", value, dim=3, dtypes=_checks.FLOAT_DTYPES)
    if value.shape != key.shape:
        raise ValueError(f"value has shape {tuple(value.shape)}, expected key's shape {tuple(key.shape)}")
    num_tokens, num_heads, head_dim = key.shape
    _checks.head_dim(head_dim)
    _checks.cache(kv_cache, num_kv_heads=num_heads, head_dim=head_dim)
    _checks.tensor("slot_mapping", slot_mapping, dim=1, dtypes=_checks.INT_DTYPES)
    _checks.same_device(kv_cache.device, key=key, value=value, slot_mapping=slot_mapping)
    _checks.last_dim_contiguous("key", key)
    _checks.last_dim_contiguous("value", value)
    fmt = resolve_fp8_format(kv_cache.device, fp8_format)
    num_blocks, block_size = kv_cache.shape[:2]
    _checks.slots(slot_mapping, num_tokens=num_tokens, num_slots=num_blocks * block_size, unique=True)
    if num_tokens == 0 or num_heads == 0:
        return
    kernel = _store_k8v4_kernel  # module global at call time: tests swap in the known-bad variant
    kernel[(num_tokens, num_heads)](
        key,
        value,
        kv_cache,
        slot_mapping,
        key.stride(0),
        key.stride(1),
        value.stride(0),
        value.stride(1),
        kv_cache.stride(0),
        kv_cache.stride(1),
        kv_cache.stride(2),
        block_size,
        num_blocks * block_size,
        **_constexprs(head_dim, fmt),
        num_warps=1 if head_dim <= 128 else 2,
    )
