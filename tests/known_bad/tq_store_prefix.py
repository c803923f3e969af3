"""KNOWN BAD: the store kernel as it was before the seed fix — the key load is cast straight to FP8.

Not a test module (no ``test_`` prefix, never collected). ``tests/test_turboquant_meta.py`` runs the seed
regression tests (``tests/test_turboquant_seed.py``) with ``TQ_STORE_VARIANT`` pointing here and asserts that
they fail, and checks that this kernel differs from ``kernels/turboquant/store.py``'s in that one line only.

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
    k = tl.load(key_ptr + tok * stride_kt + head * stride_kh + d, mask=dmask, other=0.0)  # SEED BUG: no fp32
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
