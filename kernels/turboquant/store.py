"""``tq_store_k8v4``: write keys as FP8 codes and values as 4-bit min/max codes into a paged KV cache.

Two kernels, the same bytes. ``_store_k8v4_words_kernel`` is the fast path (a 4-byte aligned cache, key and
value rows on 8-byte boundaries: any contiguous or heads-major input with head_dim % 8 == 0): sources are
read as int64 words, every tile is 2-D, and a program stores a group of heads of a few tokens (a 2-D grid, so
no division finds a row). The store is issue-bound once its bytes are laid out well, so on a GPU it takes
two instruction-saving paths (docs/performance.md): e4nv keys cast four at a time by ``cvt.satfinite`` (which
saturates by itself), and value quotients from one reciprocal per vector plus an FMA residual step (the
correctly rounded quotient, so the same codes as IEEE division). ``_store_k8v4_kernel`` takes the rest
(unaligned sources; caches whose slots are not 4-byte aligned, written byte by byte). Every element is fp32
before any Triton FP8 cast or arithmetic: Triton lowers bf16 → e4b15 nowhere ("custom FP8 conversion accepts
only fp16/fp32", the seed bug; the word kernel builds fp32 from the bits), and fp32 is also what the torch
reference computes in. Out-of-range keys get the saturated code after Triton's cast, so the interpreter (which
does not saturate) and hardware (which does) write the same code. The portable value quantizer divides with
``div_rn`` (IEEE), so its codes do not depend on a GPU's fast-division approximation.

Special inputs, on purpose (see :mod:`kernels.turboquant.layout`):

- keys beyond ±KEY_MAX (448 e4nv, **1.75 e4b15**) and ±inf saturate; NaN keys are written as code 0x7f;
- values are clamped to ±65504 (scale and zero are fp16, so nothing wider fits; no inf is ever written);
- a NaN anywhere in a value vector makes its scale and zero fp16 NaN and its codes 0.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import torch
import triton
import triton.language as tl

from kernels._grid import cdiv
from kernels._interpreter import runs_on_interpreter
from kernels._launch import Launcher, int_class, launch_planned, launcher_for, remember
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

__all__ = [
    "tq_store_k8v4",
    "resolve_fp8_format",
    "store_compile_spec",
    "words_compile_spec",
    "launch_config",
    "words_launch_config",
    "heads_per_program",
    "words_grid",
    "gpu_paths",
    "words_ok",
    "src_words_ok",
    "FMT_CODE",
]

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
    stride_s,
    num_rows,
    num_heads,
    block_size,
    num_slots,
    HEAD_DIM: tl.constexpr,
    KW_P2: tl.constexpr,
    VW_P2: tl.constexpr,
    PAD: tl.constexpr,
    ROWS: tl.constexpr,
    WORDS: tl.constexpr,
    KEY_FMT: tl.constexpr,
    KEY_LIMIT: tl.constexpr,
    VALUE_LIMIT: tl.constexpr,
    EPS: tl.constexpr,
    NAN_CODE: tl.constexpr,
    NAN_F16: tl.constexpr,
):
    # ROWS (token, head) rows per program; row = token * num_heads + head. WORDS: the cache is an int32 view
    # and every slot is written as 32-bit words (head_dim % 8 == 0, 4-byte aligned slots); else byte by byte.
    # Keys are tiled [ROWS, KW_P2, 4] (element 4w+c is byte c of key word w) and values [ROWS, VW_P2, 8]
    # (element 8w+j is nibble j of value word w), so each word is a reduction inside one thread.
    row = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    tok = row // num_heads
    head = row % num_heads
    # harness: equivalent-mutant(other): ok rejects a row past num_rows (row < num_rows) whatever slot it reads
    slot = tl.load(slot_ptr + tok * stride_s, mask=row < num_rows, other=-1).to(tl.int64)
    # Slots outside the cache are skipped here even unvalidated: nothing is ever written out of bounds.
    # harness: equivalent-mutant(mask-compare@10): row == num_rows reads slot = other = -1, which slot >= 0 rejects
    ok = (row < num_rows) & (slot >= 0) & (slot < num_slots)
    base = (slot // block_size) * stride_cb + (slot % block_size) * stride_cs + head * stride_ch
    r3 = ok[:, None, None]

    # --- keys: fp32 first (the seed fix), cast, saturate ------------------------------------------------
    c4 = tl.arange(0, 4)
    d = (tl.arange(0, KW_P2) * 4)[None, :, None] + c4[None, None, :]
    kmask = r3 & (d < HEAD_DIM)
    koff = (tok * stride_kt + head * stride_kh)[:, None, None] + d
    # harness: equivalent-mutant(other): a lane off in kmask is never stored (the byte path stores under kmask; a
    # stored word has all four lanes in kmask, WORDS needing head_dim % 8 == 0)
    k = tl.load(key_ptr + koff, mask=kmask, other=0.0).to(tl.float32)
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
    kc = tl.where(k != k, NAN_CODE, kc).to(tl.uint8)

    # --- values: per-vector asymmetric min/max, 4 bits, even index in the low nibble -------------------
    j8 = tl.arange(0, 8)
    e = (tl.arange(0, VW_P2) * 8)[None, :, None] + j8[None, None, :]
    vmask = r3 & (e < HEAD_DIM)
    vp = value_ptr + (tok * stride_vt + head * stride_vh)[:, None, None] + e
    # harness: equivalent-mutant(other): vmin, vmax and q take lanes off in vmask through tl.where(vmask, ...), and
    # no other= value is NaN (n_nan)
    v = tl.load(vp, mask=vmask, other=0.0).to(tl.float32)
    n_nan = tl.sum(tl.sum((v != v).to(tl.int32), axis=2), axis=1)
    v = tl.minimum(tl.maximum(tl.where(v != v, 0.0, v), -VALUE_LIMIT), VALUE_LIMIT)
    vmin = tl.min(tl.min(tl.where(vmask, v, VALUE_LIMIT), axis=2), axis=1)
    vmax = tl.max(tl.max(tl.where(vmask, v, -VALUE_LIMIT), axis=2), axis=1)
    scale = tl.maximum(tl.math.div_rn(vmax - vmin, tl.zeros_like(vmax) + 15.0), EPS)
    q = tl.floor(tl.math.div_rn(v - vmin[:, None, None], tl.zeros_like(v) + scale[:, None, None]) + 0.5)
    # harness: equivalent-mutant(clamp@54): the upper bound never binds: RN(v - vmin) <= RN(vmax - vmin) and
    # scale >= RN((vmax - vmin) / 15), so the quotient is below 15 * (1 + 2**-22) and floor(q + 0.5) <= 15
    q = tl.where(vmask & (n_nan == 0)[:, None, None], tl.minimum(tl.maximum(q, 0.0), 15.0), 0.0)
    vword = tl.sum(q.to(tl.uint32) << (4 * j8).to(tl.uint32)[None, None, :], axis=2)  # [ROWS, VW_P2]

    # --- scale, zero: fp16, little-endian, scale in the low half of the word --------------------------
    s_bits = scale.to(tl.float16).to(tl.uint16, bitcast=True).to(tl.uint32)
    z_bits = vmin.to(tl.float16).to(tl.uint16, bitcast=True).to(tl.uint32)
    s_bits = tl.where(n_nan > 0, NAN_F16, s_bits)
    z_bits = tl.where(n_nan > 0, NAN_F16, z_bits)
    pword = s_bits | (z_bits << 16)  # [ROWS]

    if WORDS:
        kword = tl.sum(kc.to(tl.uint32) << (8 * c4).to(tl.uint32)[None, None, :], axis=2)  # [ROWS, KW_P2]
        w = tl.arange(0, KW_P2)
        wk = base[:, None] + w[None, :]
        # harness: equivalent-mutant(mask-compare): word HEAD_DIM // 4 (codes of masked-off keys) is value word 0,
        # which the value store below rewrites, after a bar.sync (it orders the CTA's stores) in the PTX of every
        # WORDS config: head_dim 80-240, fp16/bf16/fp32 keys, both formats, sm75-sm120, Triton 3.6 and 3.9
        wmask = ok[:, None] & (w < HEAD_DIM // 4)[None, :]
        tl.store(cache_ptr + wk, kword.to(tl.int32, bitcast=True), mask=wmask)
        u = tl.arange(0, VW_P2)
        wv = base[:, None] + HEAD_DIM // 4 + u[None, :]
        umask = ok[:, None] & (u < HEAD_DIM // 8)[None, :]
        tl.store(cache_ptr + wv, vword.to(tl.int32, bitcast=True), mask=umask)
        tl.store(cache_ptr + base + HEAD_DIM // 4 + HEAD_DIM // 8, pword.to(tl.int32, bitcast=True), mask=ok)
    else:
        tl.store(cache_ptr + base[:, None, None] + d, kc, mask=kmask)
        b = (tl.arange(0, VW_P2) * 4)[None, :, None] + c4[None, None, :]  # value byte 4u+c = byte c of word u
        vbyte = ((vword[:, :, None] >> (8 * c4).to(tl.uint32)[None, None, :]) & 0xFF).to(tl.uint8)
        tl.store(cache_ptr + base[:, None, None] + HEAD_DIM + b, vbyte, mask=r3 & (b < (HEAD_DIM + 1) // 2))
        t = tl.arange(0, 8)
        pbyte = (pword[:, None] >> (8 * (t % 4)).to(tl.uint32)[None, :]) & 0xFF
        tail = tl.where(t < 4, pbyte, 0).to(tl.uint8)
        tp = cache_ptr + base[:, None] + HEAD_DIM + (HEAD_DIM + 1) // 2 + t[None, :]
        tl.store(tp, tail, mask=ok[:, None] & (t < 4 + PAD)[None, :])


@triton.jit
def _halves(x):
    """The low and high 32 bits of the int64 word ``x`` (free on the GPU: an int64 is two registers)."""
    return x.to(tl.int32), (x >> 32).to(tl.int32)


@triton.jit
def _f32_pair(w, SRC: tl.constexpr):
    """The two 16-bit elements of the int32 ``w`` as fp32 (SRC 0 fp16, 1 bf16; element 0 in the low half): a
    bf16 shifted into the high half *is* its fp32, so a bf16 pair unpacks in one instruction per element."""
    if SRC == 1:
        return (w << 16).to(tl.float32, bitcast=True), (w & -65536).to(tl.float32, bitcast=True)
    else:
        a = w.to(tl.int16).to(tl.float16, bitcast=True).to(tl.float32)
        b = (w >> 16).to(tl.int16).to(tl.float16, bitcast=True).to(tl.float32)
        return a, b


@triton.jit
def _int64_pair(ptr, off, mask, VEC: tl.constexpr):
    """The int64s at ``ptr + off`` and ``ptr + off + 1`` (off 2-D): one [.., 2] load split in two (VEC, so
    a thread may read 16 bytes at once), or two loads. Which is faster depends on the shape (measured)."""
    if VEC:
        p = tl.arange(0, 2)
        # harness: equivalent-mutant(other): a lane off in mask is never stored: the callers store key words under
        # the same mask; _value_range drops value lanes off in it before the min and max, the value store too
        x = tl.load(ptr + off[:, :, None] + p[None, None, :], mask=mask[:, :, None], other=0)
        a, b = tl.split(x)
    else:
        a = tl.load(ptr + off, mask=mask, other=0)  # harness: equivalent-mutant(other): as x's above
        b = tl.load(ptr + off + 1, mask=mask, other=0)  # harness: equivalent-mutant(other): as x's above
    return a, b


@triton.jit
def _key_code(k, KEY_FMT: tl.constexpr, KEY_LIMIT: tl.constexpr, NAN_CODE: tl.constexpr):
    """The key code of fp32 ``k`` as an int32 (saturated, NaN → NAN_CODE), as ``_store_k8v4_kernel`` writes."""
    if KEY_FMT == 0:
        kc = k.to(tl.float8e4nv).to(tl.uint8, bitcast=True)
    else:
        kc = k.to(tl.float8e4b15).to(tl.uint8, bitcast=True)
    sat = tl.where(k < 0, 0xFE, 0x7E).to(tl.uint8)
    kc = tl.where((k > KEY_LIMIT) | (k < -KEY_LIMIT), sat, kc)
    return tl.where(k != k, NAN_CODE, kc).to(tl.uint8).to(tl.int32)


@triton.jit
def _key_word(k0, k1, k2, k3, KEY_FMT: tl.constexpr, KEY_LIMIT: tl.constexpr, NAN_CODE: tl.constexpr):
    """Four fp32 keys → one cache word (byte c = key c) through Triton's casts: runs everywhere."""
    return (
        _key_code(k0, KEY_FMT, KEY_LIMIT, NAN_CODE)
        | (_key_code(k1, KEY_FMT, KEY_LIMIT, NAN_CODE) << 8)
        | (_key_code(k2, KEY_FMT, KEY_LIMIT, NAN_CODE) << 16)
        | (_key_code(k3, KEY_FMT, KEY_LIMIT, NAN_CODE) << 24)
    )


@triton.jit
def _e4nv_word_f32(k0, k1, k2, k3):
    """Four fp32 keys → one word of e4m3 codes with two ``cvt.rn.satfinite.e4m3x2.f32`` (sm89+): the hardware
    saturates (beyond ±448 and ±inf → 0x7e / 0xfe), so no compare or select per key. NaN: see _nan_bytes."""
    return tl.inline_asm_elementwise(
        "{ .reg .b16 lo, hi;\n"
        "cvt.rn.satfinite.e4m3x2.f32 lo, $2, $1;\n"
        "cvt.rn.satfinite.e4m3x2.f32 hi, $4, $3;\n"
        "mov.b32 $0, {lo, hi}; }",
        "=r,f,f,f,f",
        [k0, k1, k2, k3],
        dtype=tl.int32,
        is_pure=True,
        pack=1,
    )


@triton.jit
def _e4nv_word_f16(lo, hi):
    """Four fp16 keys (two int32 f16x2 words) → one word of e4m3 codes: one cvt per pair, no widening."""
    return tl.inline_asm_elementwise(
        "{ .reg .b16 a, b;\n"
        "cvt.rn.satfinite.e4m3x2.f16x2 a, $1;\n"
        "cvt.rn.satfinite.e4m3x2.f16x2 b, $2;\n"
        "mov.b32 $0, {a, b}; }",
        "=r,r,r",
        [lo, hi],
        dtype=tl.int32,
        is_pure=True,
        pack=1,
    )


@triton.jit
def _nan_bytes(w):
    """Every NaN byte of a code word (0x7f or 0xff: satfinite never makes them from a number) becomes
    NAN_CODE 0x7f, whatever the NaN's sign — three word ops for four keys instead of a select per key."""
    t = ((w & 0x7F7F7F7F) + 0x01010101) & (-0x7F7F7F80)  # 0x80 in each byte whose low 7 bits are all set
    return w & ~t


@triton.jit
def _max_nan(a, b):
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def _value_code(v, zero, scale, y, VALUE_LIMIT: tl.constexpr, RCP_DIV: tl.constexpr):
    """The 4-bit code of ``v`` for a vector without NaN: floor((clamp(v) - zero) / scale + 0.5), the quotient
    rounded as IEEE division rounds it. RCP_DIV: with y = RN(1/scale) (one division per vector) the quotient
    q0 = a·y is within an ulp, and one FMA residual step q0 + (a - scale·q0)·y makes it the correctly rounded
    a / scale (Markstein's theorem; a ≥ 0 and scale ≥ 2**-14 keep every step clear of underflow) — three
    instructions instead of a division each. Clamped v lies in [zero, max], so the code lies in [0, 15]."""
    a = tl.minimum(tl.maximum(v, -VALUE_LIMIT), VALUE_LIMIT) - zero
    if RCP_DIV:
        q0 = a * y
        q = tl.fma(tl.fma(-scale, q0, a), y, q0)
    else:
        q = tl.math.div_rn(a, scale)
    return tl.floor(q + 0.5).to(tl.int32)


@triton.jit
def _key_src(key_ptr, koff, w, kmask, KSRC: tl.constexpr, VEC: tl.constexpr):
    """The source words behind cache key words ``w``: two int64 (eight bytes hold two fp32 keys) or one (four
    16-bit keys; returned twice, the second unused)."""
    if KSRC == 2:
        ka, kb = _int64_pair(key_ptr, koff + 2 * w[None, :], kmask, VEC)
    else:
        # harness: equivalent-mutant(other): a word off in kmask is never stored (the key store takes the same mask)
        ka = tl.load(key_ptr + koff + w[None, :], mask=kmask, other=0)
        kb = ka
    return ka, kb


@triton.jit
def _key_words(ka, kb, KSRC: tl.constexpr, HW_KEYS: tl.constexpr, KEY_FMT: tl.constexpr,
               KEY_LIMIT: tl.constexpr, NAN_CODE: tl.constexpr):
    """The cache key words (byte c of word w = the code of element 4w + c) of ``_key_src``'s words."""
    if KSRC == 2:
        a0, a1 = _halves(ka)
        b0, b1 = _halves(kb)
        k0, k1 = a0.to(tl.float32, bitcast=True), a1.to(tl.float32, bitcast=True)
        k2, k3 = b0.to(tl.float32, bitcast=True), b1.to(tl.float32, bitcast=True)
    else:
        lo, hi = _halves(ka)
        k0, k1 = _f32_pair(lo, KSRC)
        k2, k3 = _f32_pair(hi, KSRC)
    if HW_KEYS and KEY_FMT == 0:
        if KSRC == 0:
            kword = _nan_bytes(_e4nv_word_f16(lo, hi))
        else:
            kword = _nan_bytes(_e4nv_word_f32(k0, k1, k2, k3))
    elif HW_KEYS and KSRC != 2:  # e4b15 from 16-bit keys
        kword = _nan_bytes(_e4nv_word_f32(_e4b15_as_e4m3(k0), _e4b15_as_e4m3(k1), _e4b15_as_e4m3(k2),
                                          _e4b15_as_e4m3(k3)))
    else:
        kword = _key_word(k0, k1, k2, k3, KEY_FMT, KEY_LIMIT, NAN_CODE)
    return kword


@triton.jit
def _e4b15_as_e4m3(k):
    """The fp32 whose e4m3 code under ``cvt.rn.satfinite`` is the e4b15 code of key ``k`` (exact in fp16: a
    16-bit source), so e4b15 keys take the hardware cast too (one cvt per two keys, against ~10 instructions
    a key through Triton's software cast). e4b15 is e4m3 at 2**-8 the scale, saturating at 1.75 (448 / 256),
    but Triton rounds its ties away from zero, the cvt to even. ``k * 256`` is exact; adding 2**(e-4) for
    ``k = ±2**e * m`` (a sixteenth of an ulp of fp16, under half an ulp of any 16-bit source) moves a tie
    just past itself, away from zero, and no other value across a rounding boundary; the sum is exact in
    fp32. inf keeps its sign and saturates; NaN stays NaN (``_nan_bytes``). Every fp16 and bf16 key gives
    Triton's code (tests/kernels/turboquant/test_turboquant_codes.py checks all 2**16 of each)."""
    e = (k.to(tl.int32, bitcast=True) & -8388608).to(tl.float32, bitcast=True)  # ±2**e; ±inf for inf, NaN
    return tl.fma(e, 0.0625, k * 256.0)


@triton.jit
def _value_src(value_ptr, voff, u, umask, VSRC: tl.constexpr, VEC: tl.constexpr):
    """The source words behind cache value words ``u`` (eight values each): four int64 for fp32 values, two
    for 16-bit ones (returned twice, the copies unused)."""
    if VSRC == 2:
        a, b = _int64_pair(value_ptr, voff + 4 * u[None, :], umask, VEC)
        c, d = _int64_pair(value_ptr, voff + 4 * u[None, :] + 2, umask, VEC)
    else:
        a, b = _int64_pair(value_ptr, voff + 2 * u[None, :], umask, VEC)
        c, d = a, b
    return a, b, c, d


@triton.jit
def _value_elems(a, b, c, d, VSRC: tl.constexpr):
    """Elements 8u..8u+7 of ``_value_src``'s words as fp32 tensors, one per position."""
    if VSRC == 2:
        a0, a1 = _halves(a)
        b0, b1 = _halves(b)
        c0, c1 = _halves(c)
        d0, d1 = _halves(d)
        v0, v1 = a0.to(tl.float32, bitcast=True), a1.to(tl.float32, bitcast=True)
        v2, v3 = b0.to(tl.float32, bitcast=True), b1.to(tl.float32, bitcast=True)
        v4, v5 = c0.to(tl.float32, bitcast=True), c1.to(tl.float32, bitcast=True)
        v6, v7 = d0.to(tl.float32, bitcast=True), d1.to(tl.float32, bitcast=True)
    else:
        a0, a1 = _halves(a)
        b0, b1 = _halves(b)
        v0, v1 = _f32_pair(a0, VSRC)
        v2, v3 = _f32_pair(a1, VSRC)
        v4, v5 = _f32_pair(b0, VSRC)
        v6, v7 = _f32_pair(b1, VSRC)
    return v0, v1, v2, v3, v4, v5, v6, v7


@triton.jit
def _value_range(v0, v1, v2, v3, v4, v5, v6, v7, umask, PADDED: tl.constexpr):
    """Per row, the max (NaN if any element is NaN) and the min of the raw values of a [rows, words] tile;
    PADDED: some words lie past the row (zeros, kept out)."""
    hi8 = _max_nan(_max_nan(_max_nan(v0, v1), _max_nan(v2, v3)), _max_nan(_max_nan(v4, v5), _max_nan(v6, v7)))
    lo8 = tl.minimum(tl.minimum(tl.minimum(v0, v1), tl.minimum(v2, v3)), tl.minimum(tl.minimum(v4, v5),
                                                                                     tl.minimum(v6, v7)))
    if PADDED:
        hi8 = tl.where(umask, hi8, -float("inf"))
        lo8 = tl.where(umask, lo8, float("inf"))
    return tl.reduce(hi8, 1, _max_nan), tl.min(lo8, axis=1)


@triton.jit
def _value_words(v0, v1, v2, v3, v4, v5, v6, v7, zero, sc, y, nan, VALUE_LIMIT: tl.constexpr,
                 RCP_DIV: tl.constexpr):
    """The cache value words (element 8u + j in bits 4j..4j+3 of word u); rows with a NaN get codes 0."""
    vword = _value_code(v7, zero, sc, y, VALUE_LIMIT, RCP_DIV)
    vword = (vword << 4) | _value_code(v6, zero, sc, y, VALUE_LIMIT, RCP_DIV)
    vword = (vword << 4) | _value_code(v5, zero, sc, y, VALUE_LIMIT, RCP_DIV)
    vword = (vword << 4) | _value_code(v4, zero, sc, y, VALUE_LIMIT, RCP_DIV)
    vword = (vword << 4) | _value_code(v3, zero, sc, y, VALUE_LIMIT, RCP_DIV)
    vword = (vword << 4) | _value_code(v2, zero, sc, y, VALUE_LIMIT, RCP_DIV)
    vword = (vword << 4) | _value_code(v1, zero, sc, y, VALUE_LIMIT, RCP_DIV)
    vword = (vword << 4) | _value_code(v0, zero, sc, y, VALUE_LIMIT, RCP_DIV)
    return tl.where(nan[:, None], 0, vword)


@triton.jit
def _token_rows(slot_ptr, stride_s, num_tokens, num_slots, TOKS: tl.constexpr, HEADS: tl.constexpr):
    """(token, head, live, slot, ok) of a word-kernel program's TOKS x HEADS rows (the store's and the
    load's): token groups along grid axis 0, head groups along axis 1; a row past the batch reads slot -1, and
    only a slot in [0, num_slots) is ok (the others are skipped on the device, never followed)."""
    r = tl.arange(0, TOKS * HEADS)
    tok = tl.program_id(0) * TOKS + r // HEADS
    head = tl.program_id(1) * HEADS + r % HEADS
    live = tok < num_tokens
    tok = tok.to(tl.int64)
    head = head.to(tl.int64)
    slot = tl.load(slot_ptr + tok * stride_s, mask=live, other=-1).to(tl.int64)
    return tok, head, live, slot, (slot >= 0) & (slot < num_slots)


@triton.jit
def _slot_base(slot, ok, block_size, stride_cb, stride_cs, BS_LOG2: tl.constexpr):
    """The int64 offset of slot ``slot``'s first head in the cache (0 where not ``ok``): a shift and a mask
    where block_size is a power of two (BS_LOG2 >= 0), else a division."""
    s = tl.where(ok, slot, 0).to(tl.int32)  # < num_slots < 2**31
    if BS_LOG2 >= 0:
        blk, off = s >> BS_LOG2, s & ((1 << BS_LOG2) - 1)
    else:
        blk, off = s // block_size, s % block_size
    return blk.to(tl.int64) * stride_cb + off.to(tl.int64) * stride_cs


@triton.jit
def _store_k8v4_words_kernel(
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
    stride_s,
    num_tokens,
    num_heads,
    block_size,
    num_slots,
    HEAD_DIM: tl.constexpr,
    KW1: tl.constexpr,
    KW2: tl.constexpr,
    VW1: tl.constexpr,
    VW2: tl.constexpr,
    TOKS: tl.constexpr,
    HEADS: tl.constexpr,
    BS_LOG2: tl.constexpr,
    KSRC: tl.constexpr,
    VSRC: tl.constexpr,
    VEC: tl.constexpr,
    HW_KEYS: tl.constexpr,
    RCP_DIV: tl.constexpr,
    KEY_FMT: tl.constexpr,
    KEY_LIMIT: tl.constexpr,
    VALUE_LIMIT: tl.constexpr,
    EPS: tl.constexpr,
    NAN_CODE: tl.constexpr,
    NAN_F16: tl.constexpr,
):
    # The fast path: an int32 cache and key/value rows readable as int64 words (pointers typed *i64, strides
    # in int64 units; KSRC/VSRC say what the words hold). A program stores TOKS tokens x HEADS heads (grid:
    # token groups x head groups, so no division finds a row's token); every tile is 2-D [rows, words] and
    # every element of a source word is pulled out with shifts into its own tensor, so a cache word is built
    # inside one thread and a row's min/max is one reduction along axis 1. The store is issue-bound
    # (docs/performance.md), so the GPU-only paths exist to cut instructions: HW_KEYS casts four keys with two
    # saturating cvt instructions (e4b15 from 16-bit keys after a nudge, _e4b15_as_e4m3), RCP_DIV divides by
    # one reciprocal per vector. Both write the same bytes as
    # the portable paths, which the interpreter runs (tests/kernels/turboquant/test_turboquant_inputs.py compares them).
    if TOKS == 1:
        # one token per program (8+ kv heads): its slot and the slot's cache address are scalars, loaded and
        # computed once per program rather than once per tensor layout that uses them (SASS per row, below)
        r = tl.arange(0, HEADS)
        tok = tl.program_id(0).to(tl.int64)
        head = (tl.program_id(1) * HEADS + r).to(tl.int64)
        slot = tl.load(slot_ptr + tok * stride_s).to(tl.int64)  # tok < num_tokens: the grid has no spare token
        ok_tok = (slot >= 0) & (slot < num_slots)  # slots outside the cache are skipped, never written
        ok = tl.where(ok_tok, r >= 0, False)  # (not ``vector & scalar``: Triton 3.9's interpreter refuses it)
    else:
        tok, head, _, slot, ok_tok = _token_rows(slot_ptr, stride_s, num_tokens, num_slots, TOKS, HEADS)
        ok = ok_tok
    base = _slot_base(slot, ok_tok, block_size, stride_cb, stride_cs, BS_LOG2) + head * stride_ch

    # --- loads: every source word of the tile is requested before anything is stored. The compiler keeps a
    # load after a store in program order (the cache might alias a source), so loading the values after the
    # keys' store would wait for memory twice per program; the traffic pattern alone (loads, then stores:
    # benchmarks/store_pattern.py) is what reached 90.6% of copy. A row's HEAD_DIM / 4 key words are two
    # tiles, KW1 (the largest power of two that fits) and KW2 (the rest, padded to a power of two; 0: none),
    # and its HEAD_DIM / 8 value words VW1 + VW2 alike: a lane past the row still issues every instruction,
    # so one padded tile would cost head_dim 96 a third more work than it needs (24 key words in 32 lanes).
    koff = (tok * stride_kt + head * stride_kh)[:, None]  # int64 units
    wk1 = tl.arange(0, KW1)
    km1 = ok[:, None] & (wk1 < HEAD_DIM // 4)[None, :]
    ka1, kb1 = _key_src(key_ptr, koff, wk1, km1, KSRC, VEC)
    if KW2 > 0:
        wk2 = KW1 + tl.arange(0, KW2)
        km2 = ok[:, None] & (wk2 < HEAD_DIM // 4)[None, :]
        ka2, kb2 = _key_src(key_ptr, koff, wk2, km2, KSRC, VEC)
    voff = (tok * stride_vt + head * stride_vh)[:, None]
    u1 = tl.arange(0, VW1)
    um1 = ok[:, None] & (u1 < HEAD_DIM // 8)[None, :]
    a1, b1, c1, d1 = _value_src(value_ptr, voff, u1, um1, VSRC, VEC)
    if VW2 > 0:
        u2 = VW1 + tl.arange(0, VW2)
        um2 = ok[:, None] & (u2 < HEAD_DIM // 8)[None, :]
        a2, b2, c2, d2 = _value_src(value_ptr, voff, u2, um2, VSRC, VEC)

    # --- keys: cache word w = codes of elements 4w..4w+3, byte c = element 4w+c --------------------------
    row = cache_ptr + base[:, None]
    tl.store(row + wk1[None, :], _key_words(ka1, kb1, KSRC, HW_KEYS, KEY_FMT, KEY_LIMIT, NAN_CODE), mask=km1)
    if KW2 > 0:
        tl.store(row + wk2[None, :], _key_words(ka2, kb2, KSRC, HW_KEYS, KEY_FMT, KEY_LIMIT, NAN_CODE), mask=km2)

    # --- values: cache word u = nibbles of elements 8u..8u+7, element 8u+j in bits 4j..4j+3 -------------
    # min and max of the raw values, clamped after the reduction (clamping is monotone, so this is the min
    # and max of the clamped values); the max propagates NaN, so a NaN anywhere in a vector shows up there.
    x0, x1, x2, x3, x4, x5, x6, x7 = _value_elems(a1, b1, c1, d1, VSRC)
    vmax_raw, vmin_raw = _value_range(x0, x1, x2, x3, x4, x5, x6, x7, um1, VW1 > HEAD_DIM // 8)
    if VW2 > 0:
        y0, y1, y2, y3, y4, y5, y6, y7 = _value_elems(a2, b2, c2, d2, VSRC)
        hi2, lo2 = _value_range(y0, y1, y2, y3, y4, y5, y6, y7, um2, VW1 + VW2 > HEAD_DIM // 8)
        vmax_raw = _max_nan(vmax_raw, hi2)
        vmin_raw = tl.minimum(vmin_raw, lo2)
    nan = vmax_raw != vmax_raw
    # a vector with a NaN is quantized from 0..0 (its codes and parameters are replaced below), so nothing
    # after this line ever sees a NaN
    vmax = tl.where(nan, 0.0, tl.minimum(tl.maximum(vmax_raw, -VALUE_LIMIT), VALUE_LIMIT))
    vmin = tl.where(nan, 0.0, tl.minimum(tl.maximum(vmin_raw, -VALUE_LIMIT), VALUE_LIMIT))
    scale = tl.maximum(tl.math.div_rn(vmax - vmin, tl.zeros_like(vmax) + 15.0), EPS)
    rcp = tl.math.div_rn(tl.zeros_like(scale) + 1.0, scale)
    zero, sc, y = vmin[:, None], scale[:, None], rcp[:, None]
    vrow = row + HEAD_DIM // 4
    tl.store(vrow + u1[None, :], _value_words(x0, x1, x2, x3, x4, x5, x6, x7, zero, sc, y, nan, VALUE_LIMIT,
                                               RCP_DIV), mask=um1)
    if VW2 > 0:
        tl.store(vrow + u2[None, :], _value_words(y0, y1, y2, y3, y4, y5, y6, y7, zero, sc, y, nan, VALUE_LIMIT,
                                                   RCP_DIV), mask=um2)

    # --- scale, zero: fp16, scale in the low half of the word ----------------------------------------------
    s_bits = scale.to(tl.float16).to(tl.uint16, bitcast=True).to(tl.int32)
    z_bits = vmin.to(tl.float16).to(tl.uint16, bitcast=True).to(tl.int32)
    pword = tl.where(nan, NAN_F16 | (NAN_F16 << 16), s_bits | (z_bits << 16))
    tl.store(cache_ptr + base + HEAD_DIM // 4 + HEAD_DIM // 8, pword, mask=ok)


def resolve_fp8_format(device: torch.device | str, fp8_format: str = "auto") -> str:
    """The key format for ``device``: ``"auto"`` is e4nv on sm89+ and e4b15 below; the interpreter (CPU
    tensors under ``TRITON_INTERPRET=1``) gets e4nv. A forced e4nv below sm89 is refused here, not by the
    compiler."""
    fmt = _checks.fp8_format(fp8_format)
    dev = device if isinstance(device, torch.device) else torch.device(device)
    if dev.type == "cuda":
        if getattr(torch.version, "hip", None):
            raise ValueError(
                "tq_store_k8v4 supports NVIDIA GPUs (and the interpreter) only: Triton has no "
                "e4b15 lowering on ROCm and e4nv there needs gfx950"
            )
        major, minor = _capability(dev)
        ada = (major, minor) >= (8, 9)
        if fmt == "auto":
            return "e4nv" if ada else "e4b15"
        if fmt == "e4nv" and not ada:
            raise ValueError(
                f"fp8_format='e4nv' needs sm89+; {dev} is sm{major}{minor} (use 'e4b15' or 'auto')"
            )
        return fmt
    if dev.type == "cpu":
        if not runs_on_interpreter(_store_k8v4_kernel):
            raise ValueError(
                "CPU tensors need the Triton interpreter: set TRITON_INTERPRET=1 before "
                "importing kernels.turboquant"
            )
        return "e4nv" if fmt == "auto" else fmt
    raise ValueError(f"unsupported device {dev}; expected cuda (NVIDIA) or cpu under TRITON_INTERPRET=1")


_CAPABILITIES: dict[tuple[Any, int], tuple[int, int]] = {}


def _sm(dev: torch.device) -> int:
    """``dev``'s compute capability as ``10 * major + minor`` (90 for sm90)."""
    major, minor = _capability(dev)
    return 10 * major + minor


def _capability(dev: torch.device) -> tuple[int, int]:
    """``torch.cuda.get_device_capability(dev)``, asked once per device and per query function: a call is a
    few microseconds of the per-call budget, and keying by the function itself keeps a patched query (tests,
    the compile package's device personalities) answered by the patch."""
    query = torch.cuda.get_device_capability
    if dev.index is None:  # "cuda": the current device, which may change
        return tuple(query(dev))  # type: ignore[return-value]
    key = (query, dev.index)
    cap = _CAPABILITIES.get(key)
    if cap is None:
        cap = _CAPABILITIES[key] = tuple(query(dev))  # type: ignore[assignment]
    return cap  # type: ignore[return-value]


def words_ok(head_dim: int, kv_cache: torch.Tensor) -> bool:
    """Whether the store may write 32-bit words: every slot field starts on a 4-byte boundary (head_dim a
    multiple of 8, so keys, value nibbles and scale/zero are whole words) and so does every slot."""
    return (
        head_dim % 8 == 0
        and kv_cache.data_ptr() % 4 == 0
        and all(kv_cache.stride(i) % 4 == 0 for i in range(3))
    )


def src_words_ok(x: torch.Tensor) -> bool:
    """Whether ``x`` (key or value, unit stride in its last dim) can be read as int64 words: its start and
    its token and head strides fall on 8-byte boundaries (with head_dim % 8 == 0 every row does then)."""
    per_word = 8 // x.element_size()
    return (
        x.stride(-1) == 1
        and x.data_ptr() % 8 == 0
        and x.stride(0) % per_word == 0
        and x.stride(1) % per_word == 0
    )


def launch_config(head_dim: int) -> tuple[int, int]:
    """(rows per program, warps) of ``_store_k8v4_kernel`` (sources not int64-aligned, or a cache that is
    not 4-byte aligned). Measured on the H200 (docs/performance.md): head_dim 128 is fastest at 4 rows /
    2 warps, head_dim 256 at 1 row / 1 warp; larger tiles lose (the reductions go through shared memory)."""
    return (1, 1) if head_dim > 128 else (4, 2)


def words_launch_config(head_dim: int, key_dtype: torch.dtype, value_dtype: torch.dtype,
                        fmt: str) -> tuple[int, int, bool]:
    """(rows per program, warps, VEC) of ``_store_k8v4_words_kernel``. A program stores ``rows`` (token, head)
    rows: ``heads_per_program`` heads of ``rows / heads`` tokens. 8 rows / two 8-byte loads: the fastest (or
    tied, within 0.5%) of the H200 sweeps at every shape of ``bench_turboquant.py --sweep`` (rows 2-16 x warps
    1-2 x split 16-byte loads; d128 bf16/fp16, d96 bf16, d80 fp32, d256 bf16; docs/performance.md, "Evening
    run"); 2 rows lost 30%, 16 rows 2-20% (more layout conversions through shared memory). 1 warp, except 2
    for bf16 sources with e4nv keys at d128, from the H200 runs of 2026-12-05 (% of copy, 1 warp -> 2):
    bf16 e4nv d128 78.3 -> 84.8-84.9 (1M and 2M token-heads, four runs), bf16 e4b15 d128 84.7 -> 82.9,
    fp16 d128 85.6-85.8 -> 84.8-85.1, d96 bf16 83.6 -> 75.8, d80 fp32 89.0 -> 87.5-87.9, d256 92.5 -> 90.2."""
    two = head_dim == 128 and key_dtype == value_dtype == torch.bfloat16 and fmt == "e4nv"
    return (8, 2 if two else 1, False)


def words_grid(num_tokens: int, num_heads: int, num_slots: int, toks: int, heads: int) -> tuple[int, int] | None:
    """The word kernel's grid (token groups, head groups), or None where it cannot run and the general kernel
    (int64 throughout) takes the call: it counts tokens and slots in int32 (a slot is bounds-checked in int64
    first), so caches of 2**31 slots or more and batches near 2**31 tokens are out, and CUDA caps grid.y at
    65,535 head groups."""
    if num_slots >= 2**31 or num_tokens >= 2**31 - toks or num_heads // heads > 65535:
        return None
    return cdiv(num_tokens, toks), num_heads // heads


def _constexprs(head_dim: int, fmt: str, *, rows: int = 1, words: bool = False) -> dict[str, Any]:
    used = head_dim + value_bytes(head_dim) + 4
    return {
        "HEAD_DIM": head_dim,
        "KW_P2": next_pow2((head_dim + 3) // 4),
        "VW_P2": next_pow2((head_dim + 7) // 8),
        "PAD": slot_bytes(head_dim) - used,
        "ROWS": rows,
        "WORDS": words,
        "KEY_FMT": FMT_CODE[fmt],
        "KEY_LIMIT": KEY_MAX[fmt],
        "VALUE_LIMIT": VALUE_MAX,
        "EPS": SCALE_EPS,
        "NAN_CODE": KEY_NAN_CODE,
        "NAN_F16": FP16_NAN_BITS,
    }


_SRC_CODE = {torch.float16: 0, torch.bfloat16: 1, torch.float32: 2}


def heads_per_program(num_heads: int, rows: int) -> int:
    """Heads of one token that a word-kernel program stores: the largest power of two that divides
    ``num_heads`` and is at most ``rows`` (so head groups tile the heads exactly and no lane idles)."""
    return math.gcd(num_heads, rows)


def _block_log2(block_size: int) -> int:
    """log2(block_size) when it is a power of two (slot → block is a shift), else -1 (a division)."""
    return block_size.bit_length() - 1 if block_size > 0 and block_size & (block_size - 1) == 0 else -1


def gpu_paths(device_type: str, fmt: str, cc: int = 0) -> tuple[bool, bool]:
    """(HW_KEYS, RCP_DIV) of the word kernel on this device type and compute capability (``10 * major +
    minor``; 0 if unknown): on an sm89+ GPU the keys go through inline ``cvt.rn.satfinite.e4m3x2`` (e4nv
    needs sm89+ anyway; e4b15 from 16-bit keys through the same instruction, ``_e4b15_as_e4m3``), and on any
    GPU values divide by a reciprocal; the interpreter runs no inline PTX and (Triton 3.6's) rounds
    ``tl.fma`` twice, so it takes the portable paths (tests run RCP_DIV there where its fma is exact)."""
    gpu = device_type == "cuda"
    return gpu and (fmt == "e4nv" or cc >= 89), gpu


@functools.lru_cache(maxsize=512)
def _words_plan(config: Any, paths: Any, head_dim: int, fmt: str, key_dtype: torch.dtype,
                value_dtype: torch.dtype, num_heads: int, block_size: int, device_type: str,
                cc: int) -> tuple[dict, int]:
    """(constexprs, warps) of one word-kernel launch, computed once per key. ``config`` and ``paths`` are
    ``words_launch_config`` and ``gpu_paths`` as the call found them: a swapped one (the benchmark's sweep,
    tests) is a new key, so it takes effect at once."""
    rows, warps, vec = config(head_dim, key_dtype, value_dtype, fmt)
    consts = _words_constexprs(head_dim, fmt, rows, warps, key_dtype, value_dtype, vec, num_heads=num_heads,
                               block_size=block_size, paths=paths(device_type, fmt, cc))
    return consts, warps


@functools.lru_cache(maxsize=512)
def _plan(config: Any, head_dim: int, fmt: str, words: bool) -> tuple[int, dict, int]:
    """(rows, constexprs, warps) of one general-kernel launch; ``config`` as in :func:`_words_plan`."""
    rows, warps = config(head_dim)
    return rows, _constexprs(head_dim, fmt, rows=rows, words=words), warps


def _split_words(name: str, n: int, rows: int, lanes: int) -> dict[str, int]:
    """The word kernel's one or two tiles of ``n`` words per row: ``{name}1`` the largest power of two <= n
    and ``{name}2`` the rest rounded up to a power of two (24 = 16 + 8), or ``{name}1`` = n rounded up and
    ``{name}2`` = 0 where n is a power of two or the second tile would not fill the ``lanes`` threads of a
    program once (``rows`` x rest < lanes: its lanes would hold copies, measured in SASS as more work than
    the padding it saves; benchmarks/store_sass.py)."""
    first = 1 << (n.bit_length() - 1)
    rest = next_pow2(n - first) if n > first else 0
    if rest and rows * rest >= lanes:
        return {f"{name}1": first, f"{name}2": rest}
    return {f"{name}1": next_pow2(n), f"{name}2": 0}


def _words_constexprs(head_dim: int, fmt: str, rows: int, warps: int, key_dtype: torch.dtype, value_dtype: torch.dtype,
                      vec: bool, *, num_heads: int, block_size: int, paths: tuple[bool, bool]) -> dict[str, Any]:
    heads = heads_per_program(num_heads, rows)
    return {
        "HEAD_DIM": head_dim,
        **_split_words("KW", head_dim // 4, rows, 32 * warps),
        **_split_words("VW", head_dim // 8, rows, 32 * warps),
        "TOKS": rows // heads,
        "HEADS": heads,
        "BS_LOG2": _block_log2(block_size),
        "KSRC": _SRC_CODE[key_dtype],
        "VSRC": _SRC_CODE[value_dtype],
        "VEC": vec,
        "HW_KEYS": paths[0],
        "RCP_DIV": paths[1],
        "KEY_FMT": FMT_CODE[fmt],
        "KEY_LIMIT": KEY_MAX[fmt],
        "VALUE_LIMIT": VALUE_MAX,
        "EPS": SCALE_EPS,
        "NAN_CODE": KEY_NAN_CODE,
        "NAN_F16": FP16_NAN_BITS,
    }


_TL_NAME = {"fp16": "fp16", "bf16": "bf16", "fp32": "fp32"}
_TORCH_DTYPE = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}
_INT_ARGS = (
    "stride_kt",
    "stride_kh",
    "stride_vt",
    "stride_vh",
    "stride_cb",
    "stride_cs",
    "stride_ch",
    "stride_s",
    "num_rows",
    "num_heads",
    "block_size",
    "num_slots",
)


def store_compile_spec(
    key_dtype: str,
    fmt: str,
    *,
    head_dim: int = 128,
    value_dtype: str | None = None,
    slot_dtype: str = "i64",
    words: bool | None = None,
) -> tuple[dict[str, str], dict[str, Any]]:
    """(signature, constexprs) of ``_store_k8v4_kernel`` as launched for these dtypes — for the compile
    matrix. ``words`` defaults to what an aligned cache gets (True when head_dim is a multiple of 8)."""
    _check_spec_dtypes(key_dtype, value_dtype, fmt)
    words = head_dim % 8 == 0 if words is None else words
    sig = _signature(
        f"*{_TL_NAME[key_dtype]}", f"*{_TL_NAME[value_dtype or key_dtype]}", "*i32" if words else "*u8", slot_dtype
    )
    return sig, _constexprs(head_dim, fmt, rows=launch_config(head_dim)[0], words=words)


def words_compile_spec(
    key_dtype: str,
    fmt: str,
    *,
    head_dim: int = 128,
    value_dtype: str | None = None,
    slot_dtype: str = "i64",
    num_heads: int = 8,
    block_size: int = 16,
    gpu: bool = True,
    arch: int = 90,
) -> tuple[dict[str, str], dict[str, Any], int]:
    """(signature, constexprs, num_warps) of ``_store_k8v4_words_kernel`` as ``tq_store_k8v4`` launches it
    for word-aligned inputs of these dtypes (``benchmarks/store_sass.py`` compiles it ahead of time) on an
    ``sm{arch}`` GPU. ``gpu=False`` gives the interpreter's launch (no inline PTX, IEEE division per
    element)."""
    _check_spec_dtypes(key_dtype, value_dtype, fmt)
    if isinstance(head_dim, bool) or not isinstance(head_dim, int) or head_dim < 8 or head_dim % 8:
        raise ValueError(f"head_dim must be a positive multiple of 8 for the word kernel, got {head_dim!r}")
    for name, n in (("num_heads", num_heads), ("block_size", block_size)):
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"{name} must be a positive int, got {n!r}")
    if not isinstance(gpu, bool):
        raise TypeError(f"gpu must be a bool, got {type(gpu).__name__}")
    if isinstance(arch, bool) or not isinstance(arch, int) or arch < 0:
        raise ValueError(f"arch must be a compute capability as an int (90 for sm90), got {arch!r}")
    kd, vd = _TORCH_DTYPE[key_dtype], _TORCH_DTYPE[value_dtype or key_dtype]
    rows, warps, vec = words_launch_config(head_dim, kd, vd, fmt)
    sig = _signature("*i64", "*i64", "*i32", slot_dtype, words=True)  # sources as int64 words, cache as int32
    consts = _words_constexprs(head_dim, fmt, rows, warps, kd, vd, vec, num_heads=num_heads, block_size=block_size,
                               paths=gpu_paths("cuda" if gpu else "cpu", fmt, arch))
    return sig, consts, warps


def _check_spec_dtypes(key_dtype: str, value_dtype: str | None, fmt: str) -> None:
    if key_dtype not in _TL_NAME or (value_dtype or key_dtype) not in _TL_NAME:
        raise ValueError(
            f"key_dtype/value_dtype must be one of {sorted(_TL_NAME)}, got {key_dtype!r}/{value_dtype!r}"
        )
    if fmt not in FMT_CODE:
        raise ValueError(f"fmt must be one of {sorted(FMT_CODE)}, got {fmt!r}")


def _signature(key: str, value: str, cache: str, slot_dtype: str, *, words: bool = False) -> dict[str, str]:
    """Both store kernels take the same arguments (the word kernel counts tokens, the general one rows);
    only the pointer types differ."""
    ints = [("num_tokens" if words and n == "num_rows" else n) for n in _INT_ARGS]
    return {"key_ptr": key, "value_ptr": value, "cache_ptr": cache, "slot_ptr": f"*{slot_dtype}",
            **{n: "i32" for n in ints}}


def _last_dim_unit(x: torch.Tensor) -> torch.Tensor:
    """The kernels read a vector's elements at unit stride; a view without one is copied (correct, slower)."""
    return x if x.shape[-1] <= 1 or x.stride(-1) == 1 else x.contiguous()


#: Word-kernel launches already checked and planned, by everything the checks and the plan read except the
#: token count (``_call_key``): a call that matches one skips the checks (the host budget of a call: on the CPU
#: box they cost ~10 us of a call, a hit ~4 us). Bounded: cleared when full.
_PLANS: dict[tuple, tuple] = {}
_MAX_PLANS = 256


def _call_key(key: Any, value: Any, kv_cache: Any, slot_mapping: Any, fp8_format: Any) -> tuple | None:
    """What decides a store call's checks and word-kernel launch, apart from the number of tokens: every
    argument's dtype, shape past dim 0 (the cache's whole shape), strides, device and start address modulo 16
    (Triton specializes a pointer on 16-byte alignment, so a plan can hold its compiled kernels), the format
    asked for, and the module globals a test or benchmark may swap (launch config, GPU paths, the kernel by
    identity: a plan holds it, and a JITFunction's own hash costs microseconds, the capability query). None:
    not plain tensors (the full path raises on them or copies)."""
    if not (type(key) is torch.Tensor and type(value) is torch.Tensor and type(kv_cache) is torch.Tensor
            and type(slot_mapping) is torch.Tensor and type(fp8_format) is str):
        return None
    try:
        return (key.dtype, key.shape[1:], key.stride(), key.device, key.data_ptr() & 15,
                value.dtype, value.shape[1:], value.stride(), value.device, value.data_ptr() & 15,
                kv_cache.dtype, kv_cache.shape, kv_cache.stride(), kv_cache.device, kv_cache.data_ptr() & 15,
                slot_mapping.dtype, slot_mapping.dim(), slot_mapping.stride(), slot_mapping.device,
                slot_mapping.data_ptr() & 15, fp8_format, words_launch_config, gpu_paths,
                id(_store_k8v4_words_kernel), torch.cuda.get_device_capability)
    except RuntimeError:  # a layout without strides or storage (sparse, ...): the full path says what is wrong
        return None


def _launcher(kernel: Any) -> Launcher:
    return launcher_for(kernel, classed=("num_tokens",))


def _launch_words(plan: tuple, key: torch.Tensor, value: torch.Tensor, kv_cache: torch.Tensor,
                  slot_mapping: torch.Tensor, num_tokens: int) -> None:
    """One word-kernel launch of a plan. The plan's compiled kernels, by the token count's specialization
    class (``kernels._launch.int_class``; the plan's key holds everything else Triton specializes on), launch
    directly (``kernels._launch.launch_planned``: no views, no launcher key; on the H200 box that is about half
    a planned call's host time); a class not seen yet goes through the compiled-kernel launcher, which also
    compiles."""
    head, tail, launcher, config, toks, groups, direct = plan
    launch_planned(
        launcher, direct, int_class(num_tokens), (cdiv(num_tokens, toks), groups), config,
        (key, value, kv_cache, slot_mapping, *head, num_tokens, *tail),
        lambda: (key.view(torch.int64), value.view(torch.int64), kv_cache.view(torch.int32), slot_mapping, *head,
                 num_tokens, *tail),
    )


def tq_store_k8v4(
    key: torch.Tensor,
    value: torch.Tensor,
    kv_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
    *,
    fp8_format: str = "auto",
    validate: bool = False,
) -> None:
    """Quantize ``key``/``value`` ``[num_tokens, num_kv_heads, head_dim]`` (fp16, bf16 or fp32) into the
    ``uint8`` cache ``[num_blocks, block_size, num_kv_heads, slot_bytes(head_dim)]`` at ``slot_mapping``
    (``[num_tokens]`` int32/int64; negative = skip the token). Any strides are fine (key/value views whose
    last dim is not unit-stride are copied first); the cache must be unit-stride in its last dim and its
    slots must not overlap in memory. Key/value rows on 8-byte boundaries and a 4-byte aligned cache (the
    usual case) take the faster kernel; other layouts write the same bytes, more slowly.

    Every check that needs only shapes, strides and dtypes runs before launch: on error nothing is written.
    They run once per layout: a later call that differs only in its token count reuses the checked plan.
    The slot *values* are checked on the device: a slot outside the cache is skipped, never written out of
    bounds. ``validate=True`` also reads them on the host (a device sync) and raises on
    a slot out of range or written twice — for debugging; the default keeps the call free of host syncs, so
    it can be captured in a CUDA graph.
    """
    call = _call_key(key, value, kv_cache, slot_mapping, fp8_format) if validate is False else None
    plan = _PLANS.get(call) if call is not None else None
    if plan is not None:
        n = key.shape[0]
        if value.shape[0] == n and slot_mapping.shape[0] == n and n < 2**31 - plan[4]:  # else: the full path
            if n:
                _launch_words(plan, key, value, kv_cache, slot_mapping, n)
            return
    _checks.tensor("key", key, dim=3, dtypes=_checks.FLOAT_DTYPES)
    _checks.tensor("value", value, dim=3, dtypes=_checks.FLOAT_DTYPES)
    if value.shape != key.shape:
        raise ValueError(f"value has shape {tuple(value.shape)}, expected key's shape {tuple(key.shape)}")
    num_tokens, num_heads, head_dim = key.shape
    _checks.head_dim(head_dim, name="key.shape[2] (head_dim)")
    _checks.cache(kv_cache, num_kv_heads=num_heads, head_dim=head_dim)
    _checks.tensor("slot_mapping", slot_mapping, dim=1, dtypes=_checks.INT_DTYPES)
    device = kv_cache.device
    _checks.same_device(device, key=key, value=value, slot_mapping=slot_mapping)
    fmt = resolve_fp8_format(device, fp8_format)
    num_blocks, block_size = kv_cache.shape[:2]
    _checks.num_entries(slot_mapping, num_tokens)
    if not isinstance(validate, bool):
        raise TypeError(f"validate must be a bool, got {type(validate).__name__}")
    if validate:
        _checks.slot_values(slot_mapping, num_slots=num_blocks * block_size, unique=True)
    if num_tokens == 0 or num_heads == 0:
        return
    given = key, value
    key, value = _last_dim_unit(key), _last_dim_unit(value)
    words = words_ok(head_dim, kv_cache)
    if words and src_words_ok(key) and src_words_ok(value):
        cc = _sm(device) if device.type == "cuda" else 0
        consts, warps = _words_plan(words_launch_config, gpu_paths, head_dim, fmt, key.dtype, value.dtype, num_heads,
                                    block_size, device.type, cc)
        grid = words_grid(num_tokens, num_heads, num_blocks * block_size, consts["TOKS"], consts["HEADS"])
        if grid is not None:
            launcher = _launcher(_store_k8v4_words_kernel)
            ke, ve, cs = key.element_size(), value.element_size(), kv_cache.stride()  # strides in int64 / int32 words
            plan = ((ke * key.stride(0) // 8, ke * key.stride(1) // 8, ve * value.stride(0) // 8,
                     ve * value.stride(1) // 8, cs[0] // 4, cs[1] // 4, cs[2] // 4, slot_mapping.stride(0)),
                    (num_heads, block_size, num_blocks * block_size), launcher,
                    launcher.config(consts, {"num_warps": warps}), consts["TOKS"], grid[1], {})
            if call is not None and key is given[0] and value is given[1]:  # not copies: the same layout next time
                remember(_PLANS, call, plan, _MAX_PLANS)
            _launch_words(plan, key, value, kv_cache, slot_mapping, num_tokens)
            return
    # the general kernel: unaligned sources, or a cache written byte by byte
    cache, unit = (kv_cache.view(torch.int32), 4) if words else (kv_cache, 1)
    num_rows = num_tokens * num_heads
    rows, consts, warps = _plan(launch_config, head_dim, fmt, words)
    kernel = _store_k8v4_kernel  # module global at call time: tests swap in the known-bad variant
    args = (key, value, cache, slot_mapping, key.stride(0), key.stride(1), value.stride(0), value.stride(1),
            kv_cache.stride(0) // unit, kv_cache.stride(1) // unit, kv_cache.stride(2) // unit, slot_mapping.stride(0),
            num_rows, num_heads, block_size, num_blocks * block_size)
    kernel[(cdiv(num_rows, rows),)](*args, **consts, num_warps=warps)
