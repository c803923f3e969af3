"""``tq_load_k8v4``: gather (token, kv-head) slots back into float keys and values — the read-back that
makes the store testable by round trip, and the decode side of the layout.

A pure streaming dequant: a slot of ``1.5·d + 4`` bytes in, ``8·d`` bytes of fp32 out. Two kernels, the same
bits. ``_load_k8v4_words_kernel`` (a 4-byte aligned cache, head_dim % 8 == 0: every slot field is whole
int32 words) reads each slot as words and a program decodes a tile of ``TOKS x HEADS`` rows on a 2-D grid (no
division finds a row's token); ``_load_k8v4_kernel`` takes the rest (odd head_dims, unaligned caches, caches
of 2**31 slots or more) as ``[ROWS, D]`` byte tiles. One row per program would leave the GPU
launch-bound: 0.64 ms per million rows whatever their size (docs/performance.md).

FP8 codes decode by bit arithmetic, not by Triton's FP8 casts: an e4m3 code's 7 magnitude bits shifted left
by 7 (sign to bit 15) are the fp16 of the same code read with bias 15, so fp16 → fp32 (exact, subnormals
included) gives e4b15 as is and e4nv times 2**8 (exact). That is what Triton 3.6 does for e4b15 on a GPU and
what ``cvt.f16x2.e4m3x2`` computes for e4nv, bit for bit (tests/kernels/turboquant/test_turboquant_load.py
holds every code of both formats to the old kernel's casts); it runs unchanged on the interpreter and on
GPUs without FP8 instructions. Codes 0x7f / 0xff (e4nv's NaN, the store's NaN in e4b15) decode to |x| =
480 / 1.875, which no other code reaches, and become NaN.

Values: ``code · scale + zero`` in fp32 is exact to one rounding: ``code · scale`` (4 × 11 significant
bits) is exact, so it rounds once whether or not the compiler fuses it into an FMA.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
import triton
import triton.language as tl

from kernels._grid import cdiv
from kernels._launch import Launcher, int_class, launch_planned, launcher_for, remember
from kernels.turboquant import _checks
from kernels.turboquant.layout import next_pow2, value_bytes
from kernels.turboquant.store import FMT_CODE, _slot_base, _token_rows, heads_per_program, resolve_fp8_format

__all__ = [
    "tq_load_k8v4",
    "load_compile_spec",
    "load_words_compile_spec",
    "load_launch_config",
    "load_words_launch_config",
    "load_words_ok",
    "NAN_ABS",
    "MAX_GRID_Y",
]

#: |decoded value| of code 0x7f / 0xff per format before it is replaced by NaN (e4nv: 1.875 · 2**8).
NAN_ABS: dict[str, float] = {"e4nv": 480.0, "e4b15": 1.875}

#: CUDA's limit on grid.y: the word kernel's head groups beyond it go to the general kernel (a 1-D grid).
MAX_GRID_Y = 65535


@triton.jit
def _f16_pair_f32(x):
    """The two fp16 bit patterns in int32 ``x`` (element 0 in the low half) as fp32."""
    lo = x.to(tl.int16).to(tl.float16, bitcast=True).to(tl.float32)
    hi = (x >> 16).to(tl.int16).to(tl.float16, bitcast=True).to(tl.float32)
    return lo, hi


@triton.jit
def _fix_key(k, KEY_FMT: tl.constexpr, NAN_ABS: tl.constexpr):
    """A code's bias-15 fp16 value (as fp32) → the key: times 2**8 for e4nv; codes 0x7f/0xff → NaN."""
    if KEY_FMT == 0:
        k = k * 256.0
    return tl.where(tl.abs(k) == NAN_ABS, float("nan"), k)


@triton.jit
def _key_bytes_f32(c, KEY_FMT: tl.constexpr, NAN_ABS: tl.constexpr):
    """Key codes (int32 holding 0..255) → fp32 keys."""
    h = ((c & 0x7F) << 7) | ((c & 0x80) << 8)
    # harness: equivalent-mutant(drop-f32): then _fix_key's * 256, abs and == run in f16 (PTX for sm75-sm120, Triton
    # 3.6 and 3.9: mul.f16x2, abs.f16x2, setp.eq.f16, no .ftz), exactly: k has 4 significant bits in [2**-17, 1.875]
    k = h.to(tl.int16).to(tl.float16, bitcast=True).to(tl.float32)
    return _fix_key(k, KEY_FMT, NAN_ABS)


@triton.jit
def _key_word_f32(w, KEY_FMT: tl.constexpr, NAN_ABS: tl.constexpr):
    """One cache word of four key codes (byte c = element c) → four fp32 keys. Codes 0 and 2 become an f16x2
    word by shifting left, codes 1 and 3 by shifting right: four word ops for four codes."""
    # -0x7FFF8000 is 0x80008000 as an int32 (a literal above 2**31 would make the expression unsigned)
    even = ((w & 0x007F007F) << 7) | ((w & 0x00800080) << 8)
    odd = ((w >> 1) & 0x3F803F80) | (w & -0x7FFF8000)
    k0, k2 = _f16_pair_f32(even)
    k1, k3 = _f16_pair_f32(odd)
    return (
        _fix_key(k0, KEY_FMT, NAN_ABS),
        _fix_key(k1, KEY_FMT, NAN_ABS),
        _fix_key(k2, KEY_FMT, NAN_ABS),
        _fix_key(k3, KEY_FMT, NAN_ABS),
    )


@triton.jit
def _value(n, scale, zero, ok):
    """4-bit codes (int32) → values; NaN in rows without data (``ok`` false), as the torch reference has it."""
    return tl.where(ok, n.to(tl.float32) * scale + zero, float("nan"))


@triton.jit
def _load_k8v4_words_kernel(
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
    num_tokens,
    num_heads,
    block_size,
    num_slots,
    HEAD_DIM: tl.constexpr,
    KW_P2: tl.constexpr,
    VW_P2: tl.constexpr,
    TOKS: tl.constexpr,
    HEADS: tl.constexpr,
    BS_LOG2: tl.constexpr,
    KEY_FMT: tl.constexpr,
    NAN_ABS: tl.constexpr,
):
    # cache_ptr is the cache as int32 words (strides in words); a program decodes TOKS tokens x HEADS heads.
    # Key word w holds codes 4w..4w+3, value word u the nibbles of elements 8u..8u+7 (element 8u+j in bits
    # 4j..4j+3), then one word: fp16 scale (low half) | fp16 zero (high half).
    # rows of slots outside the cache read nothing and come back NaN
    tok, head, live, slot, ok = _token_rows(slot_ptr, stride_s, num_tokens, num_slots, TOKS, HEADS)
    base = _slot_base(slot, ok, block_size, stride_cb, stride_cs, BS_LOG2) + head * stride_ch
    out = (tok * stride_ot + head * stride_oh)[:, None]
    live2 = live[:, None]

    # --- keys: a row without data reads the NaN code in every byte -----------------------------------------
    w = tl.arange(0, KW_P2)
    # harness: equivalent-mutant(mask-compare): w == HEAD_DIM // 4 reads the slot's first value word (inside the
    # slot) into keys d >= HEAD_DIM, which the key store masks off
    kw = tl.load(cache_ptr + base[:, None] + w[None, :], mask=ok[:, None] & (w < HEAD_DIM // 4)[None, :],
                 other=0x7F7F7F7F)
    k0, k1, k2, k3 = _key_word_f32(kw, KEY_FMT, NAN_ABS)
    k = tl.reshape(tl.join(tl.join(k0, k2), tl.join(k1, k3)), (TOKS * HEADS, 4 * KW_P2))
    d = tl.arange(0, 4 * KW_P2)
    tl.store(key_out + out + d[None, :], k, mask=live2 & (d < HEAD_DIM)[None, :])

    # --- values ---------------------------------------------------------------------------------------------
    u = tl.arange(0, VW_P2)
    vw = tl.load(cache_ptr + base[:, None] + HEAD_DIM // 4 + u[None, :],
                 # harness: equivalent-mutant(mask-compare, other): u == HEAD_DIM // 8 reads the slot's scale|zero
                 # word into values e >= HEAD_DIM, which the value store masks off; a row off in ok is NaN (_value)
                 mask=ok[:, None] & (u < HEAD_DIM // 8)[None, :], other=0)
    # harness: equivalent-mutant(other): a row off in ok comes back NaN whatever its scale and zero (_value)
    pw = tl.load(cache_ptr + base + HEAD_DIM // 4 + HEAD_DIM // 8, mask=ok, other=0)
    sc, zr = _f16_pair_f32(pw)
    sc, zr, ok2 = sc[:, None], zr[:, None], ok[:, None]
    v0 = _value(vw & 0xF, sc, zr, ok2)
    v1 = _value((vw >> 4) & 0xF, sc, zr, ok2)
    v2 = _value((vw >> 8) & 0xF, sc, zr, ok2)
    v3 = _value((vw >> 12) & 0xF, sc, zr, ok2)
    v4 = _value((vw >> 16) & 0xF, sc, zr, ok2)
    v5 = _value((vw >> 20) & 0xF, sc, zr, ok2)
    v6 = _value((vw >> 24) & 0xF, sc, zr, ok2)
    v7 = _value((vw >> 28) & 0xF, sc, zr, ok2)
    # join nests as (bit 2, bit 1, bit 0) of the element index 8u + j
    v = tl.join(tl.join(tl.join(v0, v4), tl.join(v2, v6)), tl.join(tl.join(v1, v5), tl.join(v3, v7)))
    v = tl.reshape(v, (TOKS * HEADS, 8 * VW_P2))
    e = tl.arange(0, 8 * VW_P2)
    tl.store(value_out + out + e[None, :], v, mask=live2 & (e < HEAD_DIM)[None, :])


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
    num_rows,
    num_heads,
    block_size,
    num_slots,
    HEAD_DIM: tl.constexpr,
    D_P2: tl.constexpr,
    HALF_P2: tl.constexpr,
    ROWS: tl.constexpr,
    KEY_FMT: tl.constexpr,
    NAN_ABS: tl.constexpr,
):
    # Any layout: the cache as bytes, ROWS (token, head) rows per program (row = token * num_heads + head,
    # int64 throughout), [ROWS, D_P2] key tiles and [ROWS, HALF_P2] tiles of value bytes.
    row = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    live = row < num_rows
    tok = row // num_heads
    head = row % num_heads
    # harness: equivalent-mutant(other): a row past num_rows is never stored (live), whatever slot it decodes
    slot = tl.load(slot_ptr + tok * stride_s, mask=live, other=-1).to(tl.int64)
    ok = (slot >= 0) & (slot < num_slots)
    s = tl.where(ok, slot, 0)
    base = (s // block_size) * stride_cb + (s % block_size) * stride_cs + head * stride_ch
    out = (tok * stride_ot + head * stride_oh)[:, None]
    live2, ok2 = live[:, None], ok[:, None]

    d = tl.arange(0, D_P2)
    # harness: equivalent-mutant(mask-compare): d == HEAD_DIM reads the slot's first value byte (inside the slot)
    # into key d, which the key store masks off
    codes = tl.load(cache_ptr + base[:, None] + d[None, :], mask=ok2 & (d < HEAD_DIM)[None, :], other=0x7F)
    k = _key_bytes_f32(codes.to(tl.int32), KEY_FMT, NAN_ABS)
    tl.store(key_out + out + d[None, :], k, mask=live2 & (d < HEAD_DIM)[None, :])

    h = tl.arange(0, HALF_P2)
    packed = tl.load(cache_ptr + base[:, None] + HEAD_DIM + h[None, :],
                     # harness: equivalent-mutant(mask-compare, other): h == (HEAD_DIM + 1) // 2 reads the slot's
                     # first scale byte into values 2h, 2h + 1 > HEAD_DIM, which the value store masks off; a row off
                     # in ok comes back NaN (_value)
                     mask=ok2 & (h < (HEAD_DIM + 1) // 2)[None, :], other=0).to(tl.int32)
    p = cache_ptr + base + HEAD_DIM + (HEAD_DIM + 1) // 2
    # harness: equivalent-mutant(other): a row off in ok comes back NaN whatever its scale and zero (_value)
    b0 = tl.load(p, mask=ok, other=0).to(tl.int32)
    b1 = tl.load(p + 1, mask=ok, other=0).to(tl.int32)  # harness: equivalent-mutant(other): as b0's
    b2 = tl.load(p + 2, mask=ok, other=0).to(tl.int32)  # harness: equivalent-mutant(other): as b0's
    b3 = tl.load(p + 3, mask=ok, other=0).to(tl.int32)  # harness: equivalent-mutant(other): as b0's
    sc, zr = _f16_pair_f32(b0 | (b1 << 8) | (b2 << 16) | (b3 << 24))
    sc, zr = sc[:, None], zr[:, None]
    v = tl.join(_value(packed & 0xF, sc, zr, ok2), _value(packed >> 4, sc, zr, ok2))
    v = tl.reshape(v, (ROWS, 2 * HALF_P2))
    e = tl.arange(0, 2 * HALF_P2)
    tl.store(value_out + out + e[None, :], v, mask=live2 & (e < HEAD_DIM)[None, :])


def load_words_ok(head_dim: int, kv_cache: torch.Tensor) -> bool:
    """Whether the load may read 32-bit words: head_dim % 8 == 0 (keys, value nibbles and scale|zero are
    whole words) and every slot starts on a 4-byte boundary."""
    return (
        head_dim % 8 == 0
        and kv_cache.data_ptr() % 4 == 0
        and kv_cache.stride(0) % 4 == 0
        and kv_cache.stride(1) % 4 == 0
        and kv_cache.stride(2) % 4 == 0
    )


def load_words_launch_config(head_dim: int) -> tuple[int, int]:
    """(rows per program, warps) of ``_load_k8v4_words_kernel``. From the H200 sweep of 2026-12-04
    (``bench_turboquant.py --sweep-load``, rows 2-32 x warps 1-4, 1M token-heads, docs/performance.md): 16
    rows / 1 warp is the fastest or within 0.8 points of it at d80, d96 and d128 (91.3 / 90.3 / 90.7% of
    copy), 8 rows / 1 warp at d256 (89.8%; 16 rows 88.8%, 32 rows / 1 warp 44%, not profiled). 2 rows
    reach 57-85%, the old one row per program 30-76%."""
    return (16, 1) if head_dim <= 128 else (8, 1)


def load_launch_config(head_dim: int) -> tuple[int, int]:
    """(rows per program, warps) of ``_load_k8v4_kernel``: at most 2,048 key bytes per program tile (a row of
    head_dim 1024 alone), so its registers stay bounded. Chosen by that rule, not measured: the benchmark's
    inputs all take the word kernel, and this one serves the layouts it cannot read."""
    rows = max(1, min(8, 2048 // next_pow2(head_dim)))
    return rows, 1 if rows * next_pow2(head_dim) <= 1024 else 2


def _block_log2(block_size: int) -> int:
    return block_size.bit_length() - 1 if block_size > 0 and block_size & (block_size - 1) == 0 else -1


def _words_constexprs(head_dim: int, fmt: str, rows: int, *, num_heads: int, block_size: int) -> dict[str, Any]:
    heads = heads_per_program(num_heads, rows)
    return {
        "HEAD_DIM": head_dim,
        "KW_P2": next_pow2(head_dim // 4),
        "VW_P2": next_pow2(head_dim // 8),
        "TOKS": rows // heads,
        "HEADS": heads,
        "BS_LOG2": _block_log2(block_size),
        "KEY_FMT": FMT_CODE[fmt],
        "NAN_ABS": NAN_ABS[fmt],
    }


def _constexprs(head_dim: int, fmt: str, rows: int) -> dict[str, Any]:
    return {
        "HEAD_DIM": head_dim,
        "D_P2": next_pow2(head_dim),
        "HALF_P2": max(1, next_pow2(value_bytes(head_dim))),
        "ROWS": rows,
        "KEY_FMT": FMT_CODE[fmt],
        "NAN_ABS": NAN_ABS[fmt],
    }


_INT_ARGS = ("stride_cb", "stride_cs", "stride_ch", "stride_ot", "stride_oh", "stride_s")


def _signature(cache: str, slot_dtype: str, count: str) -> dict[str, str]:
    return {"cache_ptr": cache, "slot_ptr": f"*{slot_dtype}", "key_out": "*fp32", "value_out": "*fp32",
            **{n: "i32" for n in (*_INT_ARGS, count, "num_heads", "block_size", "num_slots")}}


def _check_fmt(fmt: str) -> None:
    if fmt not in FMT_CODE:
        raise ValueError(f"fmt must be one of {sorted(FMT_CODE)}, got {fmt!r}")


def load_compile_spec(fmt: str, *, head_dim: int = 128, slot_dtype: str = "i64") -> tuple[dict, dict]:
    """(signature, constexprs) of ``_load_k8v4_kernel`` (the general load) as launched — for the compile
    matrix."""
    _check_fmt(fmt)
    _checks.head_dim(head_dim)
    return _signature("*u8", slot_dtype, "num_rows"), _constexprs(head_dim, fmt, load_launch_config(head_dim)[0])


def load_words_compile_spec(fmt: str, *, head_dim: int = 128, slot_dtype: str = "i64", num_heads: int = 8,
                            block_size: int = 16) -> tuple[dict, dict, int]:
    """(signature, constexprs, num_warps) of ``_load_k8v4_words_kernel`` as ``tq_load_k8v4`` launches it on a
    word-aligned cache."""
    _check_fmt(fmt)
    if isinstance(head_dim, bool) or not isinstance(head_dim, int) or head_dim < 8 or head_dim % 8:
        raise ValueError(f"head_dim must be a positive multiple of 8 for the word kernel, got {head_dim!r}")
    for name, n in (("num_heads", num_heads), ("block_size", block_size)):
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"{name} must be a positive int, got {n!r}")
    rows, warps = load_words_launch_config(head_dim)
    consts = _words_constexprs(head_dim, fmt, rows, num_heads=num_heads, block_size=block_size)
    return _signature("*i32", slot_dtype, "num_tokens"), consts, warps


@functools.lru_cache(maxsize=512)
def _plan(config: Any, words: bool, head_dim: int, fmt: str, num_heads: int,
          block_size: int) -> tuple[dict, int, int, int]:
    """(constexprs, warps, tokens or rows per program, heads per program) of one launch: all of it that does
    not depend on the number of tokens, computed once per key. ``config`` is the launch-config function as
    the call found it (``load_words_launch_config`` or ``load_launch_config``): a swapped one (the
    benchmark's sweep, tests) is a new key, so it takes effect at once."""
    rows, warps = config(head_dim)
    if words:
        c = _words_constexprs(head_dim, fmt, rows, num_heads=num_heads, block_size=block_size)
        return c, warps, c["TOKS"], c["HEADS"]
    return _constexprs(head_dim, fmt, rows), warps, rows, 0


#: Word-kernel launches already checked and planned, by everything the checks and the plan read except the
#: number of slots asked for (``_call_key``); as the store's (kernels.turboquant.store._PLANS). Bounded.
_PLANS: dict[tuple, tuple] = {}
_MAX_PLANS = 256


def _call_key(kv_cache: Any, slot_mapping: Any, head_dim: Any, fp8_format: Any) -> tuple | None:
    """What decides a load call's checks and word-kernel launch, apart from the number of slots: the cache's
    dtype, shape, strides, device and address modulo 16, the slot tensor's dtype, dims, strides, device and
    address modulo 16, head_dim and the format asked for, and the module globals a test or benchmark may swap
    (the kernel by identity, as the store's key). None: not plain tensors and values (the full path
    raises)."""
    if not (type(kv_cache) is torch.Tensor and type(slot_mapping) is torch.Tensor and type(head_dim) is int
            and type(fp8_format) is str):
        return None
    try:
        return (kv_cache.dtype, kv_cache.shape, kv_cache.stride(), kv_cache.device, kv_cache.data_ptr() & 15,
                slot_mapping.dtype, slot_mapping.dim(), slot_mapping.stride(), slot_mapping.device,
                slot_mapping.data_ptr() & 15, head_dim, fp8_format, load_words_launch_config,
                id(_load_k8v4_words_kernel), torch.cuda.get_device_capability)
    except RuntimeError:  # a layout without strides or storage: the full path says what is wrong
        return None


def _launcher(kernel: Any) -> Launcher:
    return launcher_for(kernel, tensors=4, classed=("num_tokens",))


def _launch_words(plan: tuple, kv_cache: torch.Tensor, slot_mapping: torch.Tensor, n: int) -> tuple:
    """The two outputs and one word-kernel launch of a plan: directly through the plan's compiled kernel for
    the slot count's specialization class and the outputs' 16-byte alignment once there is one, else through
    the compiled-kernel launcher (as the store's ``_launch_words``)."""
    shape, ints, tail, launcher, config, toks, groups, direct = plan
    key = torch.empty((n, *shape), dtype=torch.float32, device=kv_cache.device)
    value = torch.empty((n, *shape), dtype=torch.float32, device=kv_cache.device)
    if n:
        launch_planned(
            launcher, direct, (*int_class(n), key.data_ptr() & 15, value.data_ptr() & 15),
            (cdiv(n, toks), groups), config, (kv_cache, slot_mapping, key, value, *ints, n, *tail),
            lambda: (kv_cache.view(torch.int32), slot_mapping, key, value, *ints, n, *tail),
        )
    return key, value


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
    call = _call_key(kv_cache, slot_mapping, head_dim, fp8_format) if validate is False else None
    plan = _PLANS.get(call) if call is not None else None
    if plan is not None and slot_mapping.shape[0] < 2**31 - 64:
        return _launch_words(plan, kv_cache, slot_mapping, slot_mapping.shape[0])
    d = _checks.head_dim(head_dim)
    _checks.tensor("kv_cache", kv_cache, dim=4, dtypes=(torch.uint8,))
    num_blocks, block_size, num_heads, _ = kv_cache.shape
    _checks.cache(kv_cache, num_kv_heads=num_heads, head_dim=d)
    _checks.tensor("slot_mapping", slot_mapping, dim=1, dtypes=_checks.INT_DTYPES)
    device = kv_cache.device
    _checks.same_device(device, slot_mapping=slot_mapping)
    fmt = resolve_fp8_format(device, fp8_format)
    if not isinstance(validate, bool):
        raise TypeError(f"validate must be a bool, got {type(validate).__name__}")
    if validate:
        _checks.slot_values(slot_mapping, num_slots=num_blocks * block_size, unique=False)
    n = slot_mapping.shape[0]
    num_slots = num_blocks * block_size
    if n and num_heads and load_words_ok(d, kv_cache) and num_slots < 2**31 and n < 2**31 - 64:
        consts, warps, toks, heads = _plan(load_words_launch_config, True, d, fmt, num_heads, block_size)
        if num_heads // heads <= MAX_GRID_Y:
            cs, launcher = kv_cache.stride(), _launcher(_load_k8v4_words_kernel)
            plan = ((num_heads, d), (cs[0] // 4, cs[1] // 4, cs[2] // 4, num_heads * d, d, slot_mapping.stride(0)),
                    (num_heads, block_size, num_slots), launcher, launcher.config(consts, {"num_warps": warps}), toks,
                    num_heads // heads, {})
            if call is not None:
                remember(_PLANS, call, plan, _MAX_PLANS)
            return _launch_words(plan, kv_cache, slot_mapping, n)
        # else too many head groups for grid.y: the general kernel
    key = torch.empty((n, num_heads, d), dtype=torch.float32, device=device)
    value = torch.empty((n, num_heads, d), dtype=torch.float32, device=device)
    if n == 0 or num_heads == 0:
        return key, value
    # the general kernel: any layout, a 1-D grid of rows, int64 throughout
    consts, warps, rows, _ = _plan(load_launch_config, False, d, fmt, num_heads, block_size)
    args = (kv_cache, slot_mapping, key, value, kv_cache.stride(0), kv_cache.stride(1), kv_cache.stride(2),
            num_heads * d, d, slot_mapping.stride(0), n * num_heads, num_heads, block_size, num_slots)
    _load_k8v4_kernel[(cdiv(n * num_heads, rows),)](*args, **consts, num_warps=warps)
    return key, value

