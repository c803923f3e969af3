"""Pure-torch reference for the K8V4 cache: what every slot byte must be, and what a slot decodes to.

Why a byte-level reference: the store's contract *is* the slot layout, so the test compares whole slot
images (key codes, nibbles, fp16 scale/zero, pad) and the bytes around them. Key codes and the fp32 upcast
come from a :class:`Casts` model of the arch being tested, passed in (hardware casts differ from torch's on
e4b15 ties, the interpreter's differ near subnormals); the tests pass the harness's (``harness.fp8``, through
``tests/kernels/turboquant/tq_casts.py``), so this package never imports the harness. The value math is fp32
with IEEE division, as in the kernel. Everything runs on CPU; results are moved back to the input's device.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import torch

from kernels.turboquant.layout import (
    FORMATS,
    FP16_NAN_BITS,
    KEY_MAX,
    KEY_NAN_CODE,
    SCALE_EPS,
    VALUE_MAX,
    slot_bytes,
    value_bytes,
)

__all__ = [
    "Casts",
    "ValueQuant",
    "key_codes",
    "nearest_key_codes",
    "value_quant",
    "pack_nibbles",
    "slot_images",
    "store",
    "decode_slots",
    "load",
]


def _fmt(fmt: Any) -> str:
    name = getattr(fmt, "name", fmt)
    if name not in FORMATS:
        raise ValueError(f"fmt must be one of {FORMATS}, got {fmt!r}")
    return name


class Casts(Protocol):
    """The conversions the store performs, as one arch performs them (a CPU tensor in, a CPU tensor out)."""

    def upcast_fp32(self, x: torch.Tensor) -> torch.Tensor:
        """``x.to(tl.float32)`` of a float16, bfloat16 or float32 tensor."""
        ...

    def encode(self, x: torch.Tensor, fmt: str) -> torch.Tensor:
        """The uint8 codes ``x.to(<fmt>)`` writes for float32 ``x`` (``fmt`` one of :data:`FORMATS`)."""
        ...


def _fp32(x: torch.Tensor, casts: Casts) -> torch.Tensor:
    """The kernel's ``.to(tl.float32)`` as ``casts`` does it (the interpreter's bf16 upcast is its own).

    Non-finite inputs keep torch's upcast: the store only looks at NaN-ness and the sign of inf, and the
    interpreter's model (``harness.fp8.upcast_fp32(arch="interp")``) turns fp16 NaN/inf into finite numbers
    (NaN → 98304), which the interpreter's kernel cast (exact for fp16, measured on all 65536 patterns) does not.
    """
    x = x.detach().to("cpu")
    return torch.where(torch.isfinite(x), casts.upcast_fp32(x), x.float())


def key_codes(key: torch.Tensor, fmt: Any, *, casts: Casts) -> torch.Tensor:
    """FP8 codes (uint8, key's shape) the store writes with ``casts``: fp32, NaN aside, clamp to ±KEY_MAX,
    cast as that arch casts; NaN → 0x7f."""
    f = _fmt(fmt)
    x = _fp32(key, casts)
    nan = torch.isnan(x)
    x = torch.where(nan, torch.zeros_like(x), x).clamp(-KEY_MAX[f], KEY_MAX[f])
    codes = casts.encode(x, f).to("cpu", torch.uint8)
    return torch.where(nan, torch.full_like(codes, KEY_NAN_CODE), codes)


def nearest_key_codes(key: torch.Tensor, fmt: Any) -> torch.Tensor:
    """The correctly rounded (nearest, ties to even), saturated code of each finite key — the yardstick of
    the round trip, independent of any arch's cast quirks. e4b15 is e4m3fn scaled by 2**8 (exact in fp32)."""
    f = _fmt(fmt)
    x = key.detach().to("cpu", torch.float32).clamp(-KEY_MAX[f], KEY_MAX[f])
    if f == "e4b15":
        x = x * 256.0
    return x.to(torch.float8_e4m3fn).view(torch.uint8)


@dataclass(frozen=True)
class ValueQuant:
    """Per-vector value quantization: unpacked codes [..., D] and per-vector parameters [...]."""

    codes: torch.Tensor  # uint8 in 0..15
    vmin: torch.Tensor  # fp32: the zero point before fp16 storage
    scale: torch.Tensor  # fp32: max(range / 15, SCALE_EPS), before fp16 storage
    scale16: torch.Tensor  # fp16 as stored (NaN for a vector with a NaN)
    zero16: torch.Tensor  # fp16 as stored
    nan: torch.Tensor  # bool: the vector had a NaN


def value_quant(value: torch.Tensor, *, casts: Casts) -> ValueQuant:
    """scale = max((max − min) / 15, SCALE_EPS); code = clamp(floor((v − min) / scale + 0.5), 0, 15);
    zero = min;
    after clamping to ±65504. A vector with a NaN: codes 0, scale and zero fp16 NaN."""
    v = _fp32(value, casts)
    nan = torch.isnan(v).any(dim=-1)
    v = torch.where(torch.isnan(v), torch.zeros_like(v), v).clamp(-VALUE_MAX, VALUE_MAX)
    vmin = v.amin(dim=-1)
    vmax = v.amax(dim=-1)
    scale = torch.clamp_min((vmax - vmin) / 15.0, SCALE_EPS)
    q = torch.floor((v - vmin[..., None]) / scale[..., None] + 0.5).clamp(0, 15).to(torch.uint8)
    q = torch.where(nan[..., None], torch.zeros_like(q), q)
    nan16 = torch.tensor(FP16_NAN_BITS, dtype=torch.int16).view(torch.float16)
    scale16 = torch.where(nan, nan16, scale.to(torch.float16))
    zero16 = torch.where(nan, nan16, vmin.to(torch.float16))
    return ValueQuant(q, vmin, scale, scale16, zero16, nan)


def pack_nibbles(codes: torch.Tensor) -> torch.Tensor:
    """[..., D] codes 0..15 → [..., ceil(D/2)] bytes, even index in the low nibble (odd D: high nibble 0)."""
    d = codes.shape[-1]
    if d % 2:
        codes = torch.cat([codes, torch.zeros_like(codes[..., :1])], dim=-1)
    c = codes.to(torch.uint8)
    return c[..., 0::2] | (c[..., 1::2] << 4)


def slot_images(key: torch.Tensor, value: torch.Tensor, fmt: Any, *, casts: Casts) -> torch.Tensor:
    """The full slot bytes [T, H, slot_bytes] for every (token, head), pad byte included (0)."""
    d = key.shape[-1]
    vq = value_quant(value, casts=casts)
    params = torch.stack([vq.scale16, vq.zero16], dim=-1).contiguous().view(torch.uint8)  # little-endian
    parts = [key_codes(key, fmt, casts=casts), pack_nibbles(vq.codes), params]
    img = torch.cat(parts, dim=-1)
    pad = slot_bytes(d) - img.shape[-1]
    if pad:
        img = torch.cat([img, torch.zeros((*img.shape[:-1], pad), dtype=torch.uint8)], dim=-1)
    return img


def _positions(
    slot_mapping: torch.Tensor, block_size: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    s = slot_mapping.detach().to("cpu", torch.int64)
    keep = torch.nonzero(s >= 0).flatten()
    return keep, s[keep] // block_size, s[keep] % block_size


def store(
    key: torch.Tensor,
    value: torch.Tensor,
    kv_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
    fmt: Any,
    *,
    casts: Casts,
) -> torch.Tensor:
    """A CPU copy of ``kv_cache`` (its logical shape) with the addressed slots written; negative = skip."""
    out = kv_cache.detach().to("cpu").clone()
    img = slot_images(key, value, fmt, casts=casts)
    keep, blk, pos = _positions(slot_mapping, kv_cache.shape[1])
    out[blk, pos] = img[keep]
    return out


def decode_slots(images: torch.Tensor, head_dim: int, fmt: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """Slot bytes [..., slot_bytes] → (key, value) fp32 [..., head_dim]; key code 0x7f/0xff reads as NaN.

    Decoding is exact on every arch: e4nv is torch's float8_e4m3fn, e4b15 the same codes scaled by 2**-8."""
    f = _fmt(fmt)
    img = images.detach().to("cpu", torch.uint8)
    d, nv = head_dim, value_bytes(head_dim)
    codes = img[..., :d].contiguous()
    key = codes.view(torch.float8_e4m3fn).to(torch.float32)
    if f == "e4b15":
        key = key / 256.0
    key = torch.where((codes & 0x7F) == KEY_NAN_CODE, torch.full_like(key, float("nan")), key)
    packed = img[..., d : d + nv]
    q = torch.stack([packed & 0xF, packed >> 4], dim=-1).reshape(*packed.shape[:-1], 2 * nv)[..., :d]
    params = img[..., d + nv : d + nv + 4].clone().view(torch.float16).to(torch.float32)
    value = q.to(torch.float32) * params[..., :1] + params[..., 1:2]
    return key, value


def load(
    kv_cache: torch.Tensor, slot_mapping: torch.Tensor, head_dim: int, fmt: Any
) -> tuple[torch.Tensor, torch.Tensor]:
    """What ``tq_load_k8v4`` returns, on CPU: decoded slots, NaN rows for negative slots."""
    n, h = slot_mapping.shape[0], kv_cache.shape[2]
    key = torch.full((n, h, head_dim), float("nan"))
    value = torch.full((n, h, head_dim), float("nan"))
    keep, blk, pos = _positions(slot_mapping, kv_cache.shape[1])
    k, v = decode_slots(kv_cache.detach().to("cpu")[blk, pos], head_dim, fmt)
    key[keep], value[keep] = k, v
    return key, value
