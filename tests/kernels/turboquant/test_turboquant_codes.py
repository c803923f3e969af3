"""Turboquant byte-level facts checked against the layout spec itself, not against the torch reference.

test_turboquant.py compares the kernels with ``kernels.turboquant.reference``; a bug that both share (nibble
order, a sign, the rounding rule, a saturation branch) passes there. Here every expected byte is derived
from the spec in ``kernels.turboquant.layout`` by hand or through torch's own float8_e4m3fn, and the
reference is held to the same answers. Inputs reach every branch: every key code on load, keys on both sides
of each format's saturation bound, NaN / ±inf / huge keys and values, half-step ties, the scale floor.
"""

from __future__ import annotations

import pytest
import torch
from tq_casts import hw_casts

import kernels.turboquant.store as store_mod
from kernels.turboquant import reference as ref
from kernels.turboquant import slot_bytes, tq_load_k8v4, tq_store_k8v4
from kernels.turboquant.layout import FP16_NAN_BITS, KEY_MAX, SCALE_EPS, VALUE_MAX, value_bytes

FMTS = ["e4nv", "e4b15"]
NAN = float("nan")
INF = float("inf")

pytestmark = pytest.mark.harness_op("turboquant")


def _cache(nb, bs, h, d, device, *, slot_pad=0):
    """A poisoned cache; ``slot_pad`` > 0 spaces the slots by ``slot_pad`` extra bytes (the byte-store path)."""
    sb = slot_bytes(d)
    return torch.full((nb, bs, h, sb + slot_pad), 0xAA, dtype=torch.uint8, device=device)[..., :sb]


def _spec_decode(codes: torch.Tensor, fmt: str) -> torch.Tensor:
    """Key code → float by the spec: e4nv is OCP e4m3fn (torch's dtype); e4b15 is e4m3fn with bias 15, i.e.
    the e4m3fn value / 2**8; 0x7f and 0xff read as NaN in both (layout.KEY_NAN_CODE)."""
    x = codes.to(torch.uint8).view(torch.float8_e4m3fn).float()
    if fmt == "e4b15":
        x = x / 256.0
    return torch.where((codes & 0x7F) == 0x7F, torch.full_like(x, NAN), x)


def _store(key, value, device, fmt, *, slot=0, slot_pad=0):
    """Store one (token, head) vector per row of ``key``/``value`` [T, D] at slots slot, slot+1, ...;
    return the raw slots [T, slot_bytes] (CPU)."""
    t, d = key.shape
    cache = _cache(1, t + slot, 1, d, device, slot_pad=slot_pad)
    slots = torch.arange(slot, slot + t, device=device)
    tq_store_k8v4(key[:, None].to(device), value[:, None].to(device), cache, slots, fp8_format=fmt)
    return cache.cpu()[0, slot:, 0]


# --- load: every key code ----------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FMTS)
def test_load_decodes_every_key_code(fmt, device):
    """All 256 key codes through tq_load_k8v4 (two slots of head_dim 128): each decodes to the spec's value,
    0x7f and 0xff to NaN, 0x00 / 0x80 to +0 / −0; the torch reference agrees."""
    d = 128
    cache = _cache(1, 4, 1, d, device)
    raw = cache.cpu()
    raw[0, 1:3, 0, :d] = torch.arange(256, dtype=torch.uint8).reshape(2, d)
    raw[0, 1:3, 0, d:] = 0  # values: codes 0, scale 0, zero 0
    cache.copy_(raw.to(device))
    slots = torch.tensor([1, 2], device=device)
    key, value = tq_load_k8v4(cache, slots, head_dim=d, fp8_format=fmt)
    got = key.cpu().reshape(256)
    want = _spec_decode(torch.arange(256, dtype=torch.uint8), fmt)
    nan = torch.isnan(want)
    assert nan.nonzero().flatten().tolist() == [0x7F, 0xFF]
    assert torch.equal(torch.isnan(got), nan), f"NaN at {torch.isnan(got).nonzero().flatten().tolist()}"
    assert torch.equal(got[~nan], want[~nan]), "a key code decodes to the wrong value"
    assert torch.equal(torch.signbit(got[~nan]), torch.signbit(want[~nan])), "sign of a zero lost"
    top = KEY_MAX[fmt]
    assert got[[0x00, 0x80, 0x7E, 0xFE]].tolist() == [0.0, -0.0, top, -top]
    assert got[0x01].item() == (2.0**-9 if fmt == "e4nv" else 2.0**-17)  # smallest subnormal
    assert bool((value == 0).all())
    k_ref, _ = ref.load(cache, slots.cpu(), d, fmt)
    assert torch.equal(torch.isnan(k_ref.reshape(256)), nan)
    assert torch.equal(k_ref.reshape(256)[~nan], want[~nan])


def test_load_nibble_order_scale_and_zero(device):
    """Value byte i holds element 2i in its low nibble; value = code · scale + zero with the fp16 scale and zero
    stored little-endian after the nibbles (bytes written here by hand)."""
    d = 16
    cache = _cache(1, 2, 1, d, device)
    raw = cache.cpu()
    codes = torch.tensor([3, 12, 0, 15, 7, 1, 9, 4, 14, 2, 5, 11, 6, 10, 8, 13], dtype=torch.uint8)
    raw[0, 1, 0, :d] = 0
    raw[0, 1, 0, d : d + 8] = codes[0::2] | (codes[1::2] << 4)
    raw[0, 1, 0, d + 8 : d + 12] = torch.tensor([0x00, 0x38, 0x00, 0xC2])  # fp16 0.5, fp16 -3.0
    cache.copy_(raw.to(device))
    slots = torch.tensor([1], device=device)
    _, value = tq_load_k8v4(cache, slots, head_dim=d, fp8_format="e4nv")
    want = codes.float() * 0.5 - 3.0
    assert value.cpu().reshape(d).tolist() == want.tolist()
    _, v_ref = ref.load(cache, slots.cpu(), d, "e4nv")
    assert v_ref.reshape(d).tolist() == want.tolist()


# --- store: known answers ------------------------------------------------------------------------------------

_PERM = [3, 12, 0, 15, 7, 1, 9, 4, 14, 2, 5, 11, 6, 10, 8, 13]


@pytest.mark.parametrize("slot_pad", [0, 1], ids=["words", "bytes"])
@pytest.mark.parametrize(
    "offset, step, zero_bits",
    [(0.0, 1.0, 0x0000), (10.0, 1.0, 0x4900), (-20.0, 2.0, 0xCD00), (0.25, 0.125, 0x3400)],
    ids=["0+k", "10+k", "-20+2k", "0.25+k/8"],
)
def test_store_known_answer(offset, step, zero_bits, slot_pad, device, harness_arch):
    """v = offset + step · perm(0..15): min = offset, scale = step, codes = perm exactly. Packed bytes
    (element 2i low), fp16 scale / zero little-endian and key codes of exactly representable keys are spelled
    out from the spec, on both store paths (32-bit words, and bytes for a cache whose slots are not 4-byte
    aligned). The reference gives the same bytes."""
    d = 16
    codes = torch.tensor(_PERM, dtype=torch.uint8)
    value = (offset + step * codes.double()).float()[None]
    key = torch.tensor([[1.0, -1.0, 0.5, -0.5, 0.0, -0.0, 2.0**-9, -(2.0**-9)] * 2])
    words = store_mod.words_ok(d, _cache(1, 2, 1, d, device, slot_pad=slot_pad))
    assert words == (slot_pad == 0)
    got = _store(key, value, device, "e4nv", slot=1, slot_pad=slot_pad)[0]
    scale_bits = torch.tensor([step], dtype=torch.float16).view(torch.int16).item() & 0xFFFF
    want = torch.tensor(
        [0x38, 0xB8, 0x30, 0xB0, 0x00, 0x80, 0x01, 0x81] * 2
        + (codes[0::2] | (codes[1::2] << 4)).tolist()
        + [scale_bits & 0xFF, scale_bits >> 8, zero_bits & 0xFF, zero_bits >> 8],
        dtype=torch.uint8,
    )
    assert got.tolist() == want.tolist()
    assert ref.slot_images(key, value, "e4nv", casts=hw_casts(harness_arch))[0].tolist() == want.tolist()


@pytest.mark.parametrize("slot_pad", [0, 1], ids=["words", "bytes"])
def test_store_rounds_half_steps_up(slot_pad, device, harness_arch):
    """code = floor((v − min) / scale + 0.5): exact half steps round up (6.5 → 7, 0.5 → 1, not to even)."""
    d = 8
    value = torch.tensor([[0.0, 15.0, 6.5, 0.5, 14.5, 2.5, 7.5, 1.0]])
    got = _store(torch.zeros_like(value), value, device, "e4nv", slot_pad=slot_pad)[0]
    codes = torch.tensor([0, 15, 7, 1, 15, 3, 8, 1], dtype=torch.uint8)
    assert got[d : d + 4].tolist() == (codes[0::2] | (codes[1::2] << 4)).tolist()
    assert ref.value_quant(value, casts=hw_casts(harness_arch)).codes[0].tolist() == codes.tolist()


@pytest.mark.parametrize("d", [7, 9, 11], ids=["d7-pad", "d9", "d11-pad"])
def test_store_odd_head_dim_and_one_sided_vectors(d, device, harness_arch):
    """Odd head_dim (byte path; d7 and d11 have a pad byte): the last high nibble and the pad are 0. All-positive and
    all-negative vectors: the masked lanes past head_dim must not pull min / max towards 0."""
    pos = 5.0 + torch.arange(d, dtype=torch.float32)  # min 5
    neg = -(5.0 + torch.arange(d, dtype=torch.float32))  # max -5
    value = torch.stack([pos, neg])
    got = _store(torch.zeros_like(value), value, device, "e4nv")
    nv = value_bytes(d)
    params = got[:, d + nv : d + nv + 4].clone().view(torch.float16).float()
    assert params[:, 1].tolist() == [5.0, -(5.0 + d - 1)], "zero = the vector's own min"
    assert params[:, 0].tolist() == torch.tensor([(d - 1) / 15] * 2).half().float().tolist()
    assert (got[:, d + nv - 1] >> 4).tolist() == [0, 0], "the high nibble past an odd head_dim is 0"
    pad = slot_bytes(d) - (d + nv + 4)
    assert got[:, d + nv + 4 :].tolist() == [[0] * pad] * 2, "pad byte"
    want = ref.slot_images(torch.zeros_like(value), value, "e4nv", casts=hw_casts(harness_arch))
    assert got.tolist() == want.tolist()


# --- every saturation / special branch ---------------------------------------------------------------------


def _near_limit(fmt):
    """Keys at, just inside and beyond ±KEY_MAX — the region between the largest code and the format's next
    (non-existent) one, where a cast that does not saturate (the interpreter's) yields 0x7f = NaN."""
    top = KEY_MAX[fmt]
    beyond = [top * (1 + 2.0**-6), top * 1.0625, top * (1 + 1 / 14), top * 1.125, top * 2, 1e30, INF]
    return top, beyond


@pytest.mark.parametrize("src", [torch.float16, torch.bfloat16, torch.float32], ids=["fp16", "bf16", "fp32"])
@pytest.mark.parametrize("fmt", FMTS)
def test_keys_saturate_on_both_sides_of_the_bound(fmt, src, device, harness_arch):
    top, beyond = _near_limit(fmt)
    below = top * 13 / 14  # the code under the top one: 416 / 1.625
    pos = [top, below] + beyond + [NAN]
    key = torch.tensor([pos + [-x for x in pos]]).to(src)
    got = _store(key, torch.zeros_like(key), device, fmt)[0, : key.shape[1]]
    n = len(pos)
    want = [0x7E, 0x7D] + [0x7E] * len(beyond) + [0x7F]
    want += [0xFE, 0xFD] + [0xFE] * len(beyond) + [0x7F]  # a NaN key is 0x7f whatever its sign
    assert got.tolist() == want, f"{fmt} {src}: {[hex(c) for c in got.tolist()]}"
    assert len(want) == 2 * n
    assert ref.key_codes(key, fmt, casts=hw_casts(harness_arch))[0].tolist() == want, "the reference disagrees"
    k_out, _ = tq_load_k8v4(
        _put(got, key.shape[1], device), torch.tensor([0], device=device), head_dim=key.shape[1], fp8_format=fmt
    )
    sat = [top, below] + [top] * len(beyond) + [NAN]
    want_f = torch.tensor([sat + [-x for x in sat]])
    assert torch.equal(torch.isnan(k_out.cpu()[0]), torch.isnan(want_f))
    assert k_out.cpu()[0][~torch.isnan(want_f)].tolist() == want_f[~torch.isnan(want_f)].tolist()


@pytest.mark.parametrize("src", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("fmt", FMTS)
def test_store_writes_every_16_bit_key_as_the_reference(fmt, src, device, harness_arch):
    """All 2**16 fp16 / bf16 bit patterns as keys (64 tokens x 8 heads x d128: the word kernel, one token per
    program) give the reference's codes (the arch's cast, clamped to the format's bound, NaN → 0x7f). On an
    sm89+ GPU both formats take the inline ``cvt.rn.satfinite`` path, e4b15 through ``_e4b15_as_e4m3``'s
    nudge of ties away from zero, which this checks at every tie; the interpreter runs the portable cast."""
    bits = torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16)
    key = bits.view(src).reshape(64, 8, 128)
    cache = torch.full((4, 16, 8, slot_bytes(128)), 0xAA, dtype=torch.uint8, device=device)
    tq_store_k8v4(key.to(device), torch.zeros_like(key).to(device), cache, torch.arange(64, device=device),
                  fp8_format=fmt)
    got = cache.cpu().reshape(64, 8, -1)[..., :128].reshape(-1)
    want = ref.key_codes(key, fmt, casts=hw_casts(harness_arch)).reshape(-1)
    bad = (got != want).nonzero().flatten()
    assert bad.numel() == 0, (
        f"{fmt} {src}: {bad.numel()} of 65536 keys differ; first: "
        + ", ".join(f"{int(bits[i]) & 0xFFFF:#06x} -> {int(got[i]):#04x} (want {int(want[i]):#04x})" for i in bad[:6])
    )


def test_e4b15_through_the_e4m3_cast_is_tritons_e4b15(device):
    """The arithmetic behind ``_e4b15_as_e4m3`` for every fp16 and bf16 key, in torch: ``k * 256 + sign(k) *
    2**(e-4)`` is exact in fp32, and its round-to-nearest-even, saturating e4m3fn code (NaN bytes → 0x7f) is
    the code of Triton's fp32 → e4b15 cast as the store applies it (``cvt.rz`` to fp16, the software cast
    that rounds ties away and saturates at 1.75; NaN → 0x7f): harness.fp8's model of that lowering, which the
    H200 tables check."""
    from harness.fp8 import encode

    for src in (torch.float16, torch.bfloat16):
        k = torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16).view(src).float()
        e = (k.view(torch.int32) & -8388608).view(torch.float32)
        y = k * 256.0 + e * 0.0625
        exact = k.double() * 256.0 + e.double() * 0.0625
        finite = exact.abs() < 2.0**127
        assert torch.equal(y.double()[finite], exact[finite]), f"{src}: the sum is not exact"
        assert bool((y[~finite & ~torch.isnan(k)].abs() > 448).all()), f"{src}: an overflow does not saturate"
        codes = y.clamp(-448.0, 448.0).to(torch.float8_e4m3fn).view(torch.uint8).to(torch.int32)
        codes = torch.where(torch.isnan(y) | ((codes & 0x7F) == 0x7F), 0x7F, codes)
        nan = torch.isnan(k)
        triton_codes = encode(torch.where(nan, 0.0, k), "e4b15", arch="sm90").to(torch.int32)
        triton_codes = torch.where(nan, 0x7F, triton_codes)
        bad = (codes != triton_codes).nonzero().flatten()
        assert bad.numel() == 0, f"{src}: {bad.numel()} keys differ, first {k[bad[:4]].tolist()}"


def _put(key_codes: torch.Tensor, d: int, device) -> torch.Tensor:
    cache = _cache(1, 1, 1, d, device)
    raw = cache.cpu()
    raw[0, 0, 0, :d] = key_codes
    raw[0, 0, 0, d:] = 0
    return raw.to(device)


@pytest.mark.parametrize("src", [torch.float16, torch.bfloat16, torch.float32], ids=["fp16", "bf16", "fp32"])
def test_values_saturate_at_fp16_max(src, device, harness_arch):
    """Values beyond ±65504 and ±inf clamp to ±65504 before min / max (each side alone, then both): scale and
    zero are finite fp16 and the saturated elements land on codes 0 / 15."""
    top = float(torch.finfo(src).max) if src == torch.float16 else 1e6
    rows = [
        [top, INF, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0],  # only the upper clamp
        [-top, -INF, 0.0, -1.0, -2.0, -3.0, -4.0, -5.0],  # only the lower one
        [INF, -INF, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0],  # both
    ]
    value = torch.tensor(rows).to(src)
    got = _store(torch.zeros_like(value), value, device, "e4nv")
    params = got[:, 12:16].clone().view(torch.float16).float()
    assert bool(torch.isfinite(params).all()), params.tolist()
    assert params[:, 1].tolist() == [0.0, -VALUE_MAX, -VALUE_MAX]
    scale = torch.tensor([VALUE_MAX / 15, VALUE_MAX / 15, 2 * VALUE_MAX / 15]).half().float()
    assert params[:, 0].tolist() == scale.tolist()
    codes = torch.stack([got[:, 8:12] & 0xF, got[:, 8:12] >> 4], -1).reshape(3, 8)
    assert codes[:, :2].tolist() == [[15, 15], [0, 0], [15, 0]]
    want = ref.slot_images(torch.zeros_like(value), value, "e4nv", casts=hw_casts(harness_arch))
    assert got.tolist() == want.tolist()


@pytest.mark.parametrize("src", [torch.float16, torch.bfloat16, torch.float32], ids=["fp16", "bf16", "fp32"])
def test_nan_value_poisons_its_vector_only(src, device):
    """A NaN anywhere (first, last, beside an inf) → scale / zero fp16 NaN bits, codes 0; the other vectors
    are quantized as usual."""
    value = torch.tensor(
        [[NAN, 1.0, 2.0, 3.0], [1.0, 2.0, 3.0, NAN], [INF, NAN, -INF, 0.0], [0.0, 5.0, 10.0, 15.0]]
    ).to(src)
    got = _store(torch.zeros_like(value), value, device, "e4nv")
    words = got[:, 6:10].clone().view(torch.int16).tolist()
    assert words[:3] == [[FP16_NAN_BITS, FP16_NAN_BITS]] * 3
    assert got[:3, 4:6].tolist() == [[0, 0]] * 3
    assert got[3, 4:6].tolist() == [0x50, 0xFA]  # codes 0, 5, 10, 15
    assert words[3] == [0x3C00, 0]  # scale 1.0, zero 0


def test_scale_floor_for_near_constant_vectors(device):
    """range / 15 below 2**-14 → scale = 2**-14 (fp16 0x0400); a range just above the floor keeps its own."""
    base = 3.0
    tiny = torch.tensor([[base, base + 2.0**-14, base, base]])  # range/15 < floor
    got = _store(torch.zeros_like(tiny), tiny, device, "e4nv")[0]
    assert got[6:8].clone().view(torch.float16).item() == SCALE_EPS
    assert got[4:6].tolist() == [0x10, 0x00], "(v − min) / floor = 1 → code 1 for the element 2**-14 above"
    wide = torch.tensor([[0.0, 15 * 2.0**-13, 0.0, 0.0]])
    got = _store(torch.zeros_like(wide), wide, device, "e4nv")[0]
    assert got[6:8].clone().view(torch.float16).item() == 2.0**-13
