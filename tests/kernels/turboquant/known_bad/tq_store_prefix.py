"""KNOWN BAD: the store kernel as it was before the seed fix — the key load is cast straight to FP8.

Not a test module (no ``test_`` prefix, never collected). ``tests/kernels/turboquant/test_turboquant_meta.py``
runs the seed regression tests (``test_turboquant_seed.py``) with ``TQ_STORE_VARIANT`` pointing here and
asserts that they fail, and checks that this kernel differs from ``kernels/turboquant/store.py``'s in that
one line only.

What the bug does: bf16 → e4b15 does not compile for any NVIDIA target ("custom FP8 conversion accepts only
fp16/fp32"), on Triton 3.6 and 3.9 alike; in the interpreter, fp16 keys cast directly round differently from
the fp32 path and bf16 keys fail the range check (compared as bf16 there, they all read as out of range).
"""

import triton
import triton.language as tl


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
    k = tl.load(key_ptr + koff, mask=kmask, other=0.0)  # SEED BUG: no fp32
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
