"""tq_store_k8v4 / tq_load_k8v4 against the torch reference, byte by byte, on the interpreter and the GPU.

Every store test poisons the cache (0xAA) first and checks that exactly the addressed slots changed, then
compares the slot contents: key codes (FP8, per-arch tolerance), value nibbles, fp16 scale/zero and the pad.
Interpreter tests stay tiny (one Triton program costs ~40 ms there); the GPU lane repeats them at real sizes.
"""

from __future__ import annotations

import pytest
import torch
from tq_casts import hw_casts

from harness.compare import assert_close_tol, assert_fp8_close
from kernels.turboquant import reference as ref
from kernels.turboquant import resolve_fp8_format, slot_bytes, tq_load_k8v4, tq_store_k8v4
from kernels.turboquant.layout import FP16_NAN_BITS, KEY_MAX, VALUE_MAX, value_bytes

HEAD_DIMS = [128, 96, 80, 7]
BLOCK_SIZES = [16, 32, 64, 128]
POISON = 0xAA
KEY_SCALE = {"e4nv": 64.0, "e4b15": 0.5}  # spread keys over most of each format's range

pytestmark = pytest.mark.harness_op("turboquant")


# --- helpers ---------------------------------------------------------------------------------------------


def _inputs(rng, t, h, d, dtype, fmt):
    key = (torch.randn(t, h, d, generator=rng) * KEY_SCALE[fmt]).to(dtype)
    scale = 10 ** (torch.rand(t, h, 1, generator=rng) * 4 - 2)  # per-vector ranges 1e-2 .. 1e2
    value = (torch.randn(t, h, d, generator=rng) * scale + torch.randn(t, h, 1, generator=rng) * scale).to(
        dtype
    )
    return key, value


def _slots(rng, t, num_slots, *, skips=2):
    """Distinct random slots (so tokens land in different blocks and at block edges), a few skipped."""
    s = torch.randperm(num_slots, generator=rng)[:t].clone()
    s[torch.randperm(t, generator=rng)[:skips]] = -1
    return s


def _cache(nb, bs, h, d, device, *, layout="contiguous"):
    sb = slot_bytes(d)
    if layout == "contiguous":
        c = torch.full((nb, bs, h, sb), POISON, dtype=torch.uint8, device=device)
    elif layout == "heads_major":  # allocated [blocks, heads, block_size, slot], viewed as the logical shape
        c = torch.full((nb, h, bs, sb), POISON, dtype=torch.uint8, device=device).transpose(1, 2)
    elif layout == "padded_blocks":  # every block padded by 3 extra slots of garbage
        c = torch.full((nb, bs + 3, h, sb), POISON, dtype=torch.uint8, device=device)[:, :bs]
    else:
        raise ValueError(layout)
    return c


def _check_slots(cache, before, key, value, slots, fmt, arch, tolerance, dtype):
    """Exactly the addressed slots changed, and each holds what the reference says (per the table rows)."""
    __tracebackhide__ = True
    d = key.shape[-1]
    expected = ref.store(key, value, before, slots, fmt, casts=hw_casts(arch))
    got = cache.detach().to("cpu")
    keep = torch.nonzero(slots.cpu() >= 0).flatten()
    blk, pos = slots.cpu()[keep] // cache.shape[1], slots.cpu()[keep] % cache.shape[1]
    touched = torch.zeros(cache.shape[:2], dtype=torch.bool)
    touched[blk, pos] = True
    assert torch.equal(got[~touched], before.cpu()[~touched]), "bytes outside the addressed slots changed"
    g, e = got[blk, pos], expected[blk, pos]  # [n, H, slot]
    nv = value_bytes(d)
    assert_fp8_close(
        g[..., :d],
        e[..., :d],
        fmt,
        tol=tolerance("fp8_cast", dtype),
        nan_equal=True,
        op="turboquant.key_codes",
        dtype=dtype,
    )

    def unpack(p):
        return torch.stack([p & 0xF, p >> 4], -1).reshape(*p.shape[:-1], 2 * nv)[..., :d].float()

    assert_close_tol(
        unpack(g[..., d : d + nv]),
        unpack(e[..., d : d + nv]),
        tolerance("turboquant.value_codes", dtype),
        op="turboquant.value_codes",
        dtype=dtype,
    )

    def f16(b):
        return b.clone().view(torch.float16).float()

    assert_close_tol(
        f16(g[..., d + nv : d + nv + 4]),
        f16(e[..., d + nv : d + nv + 4]),
        tolerance("turboquant.value_params", dtype),
        op="turboquant.value_params",
        dtype=dtype,
        equal_nan=True,
    )
    assert torch.equal(g[..., d + nv + 4 :], e[..., d + nv + 4 :]), "pad byte must be written as 0"
    if d % 2:
        assert not bool((g[..., d + nv - 1] >> 4).any()), "odd head_dim: the last high nibble must be 0"


def _value_bound(value, arch):
    """Half a quantization step, plus what storing zero and scale as fp16 adds (|zero16 − min| and 15× the
    scale's rounding), plus the fp32 rounding of the dequant — the spec's bound made exact."""
    vq = ref.value_quant(value, casts=hw_casts(arch))
    s16, z16 = vq.scale16.double(), vq.zero16.double()
    extra = (z16 - vq.vmin.double()).abs() + 15 * (s16 - vq.scale.double()).abs()
    vmax = value.detach().cpu().double().abs().clamp(max=VALUE_MAX).amax(-1)
    return (0.5 * s16 + extra + vmax * 2.0**-23)[..., None]


# --- stores vs the reference -----------------------------------------------------------------------------


@pytest.mark.dtype_cases(fmt=["e4nv", "e4b15"])
@pytest.mark.parametrize("head_dim", HEAD_DIMS)
def test_store_matches_reference(dtype_case, head_dim, rng, device, harness_arch, tolerance):
    t, h, nb, bs = 5, 2, 3, 16
    key, value = _inputs(rng, t, h, head_dim, dtype_case.src, dtype_case.fmt.name)
    slots = _slots(rng, t, nb * bs, skips=1)
    cache = _cache(nb, bs, h, head_dim, device)
    before = cache.clone()
    tq_store_k8v4(key.to(device), value.to(device), cache, slots.to(device), fp8_format=dtype_case.fmt.name)
    _check_slots(
        cache, before, key, value, slots, dtype_case.fmt.name, harness_arch, tolerance, dtype_case.id
    )


@pytest.mark.parametrize("layout", ["contiguous", "heads_major", "padded_blocks"])
@pytest.mark.parametrize("block_size", BLOCK_SIZES)
def test_block_sizes_and_strided_caches(block_size, layout, rng, device, harness_arch, tolerance):
    t, h, d, nb = 6, 2, 96, 3
    key, value = _inputs(rng, t, h, d, torch.bfloat16, "e4nv")
    # Slots at both edges of a block boundary, the very last slot, and a skip.
    slots = torch.tensor([block_size - 1, block_size, 0, nb * block_size - 1, -1, 2 * block_size + 1])
    cache = _cache(nb, block_size, h, d, device, layout=layout)
    before = cache.clone()
    tq_store_k8v4(key.to(device), value.to(device), cache, slots.to(device), fp8_format="e4nv")
    _check_slots(cache, before, key, value, slots, "e4nv", harness_arch, tolerance, "bf16-e4nv")
    if layout == "padded_blocks":  # the garbage slots between blocks are untouched too
        full = cache.as_strided((nb, block_size + 3, h, slot_bytes(d)), cache.stride())
        assert bool((full[:, block_size:] == POISON).all())


def test_int32_slots_and_strided_key(rng, device, harness_arch, tolerance):
    t, h, d = 4, 3, 80
    base, value = _inputs(rng, t, 2 * h, d, torch.float16, "e4nv")
    key = base[:, ::2]  # heads strided in memory, last dim still contiguous
    value = value[:, 1::2]
    slots = torch.tensor([5, -1, 0, 31], dtype=torch.int32)
    cache = _cache(2, 16, h, d, device)
    before = cache.clone()
    tq_store_k8v4(key.to(device), value.to(device), cache, slots.to(device), fp8_format="e4nv")
    _check_slots(cache, before, key, value, slots, "e4nv", harness_arch, tolerance, "fp16-e4nv")


# --- round trip ------------------------------------------------------------------------------------------


@pytest.mark.dtype_cases(fmt=["e4nv", "e4b15"])
def test_round_trip(dtype_case, rng, device, harness_arch, tolerance):
    """Store then load: keys within the table's ULP bound of the correctly rounded code of the input (1 on
    hardware; the interpreter's casts are off by more), values within half a quantization step."""
    fmt = dtype_case.fmt.name
    t, h, d = 4, 2, 128
    key, value = _inputs(rng, t, h, d, dtype_case.src, fmt)
    key = (
        key.float().clamp(-KEY_MAX[fmt], KEY_MAX[fmt]).to(dtype_case.src)
    )  # in range: clipping is tested apart
    slots = torch.tensor([7, 40, 3, 16])
    cache = _cache(4, 16, h, d, device)
    tq_store_k8v4(key.to(device), value.to(device), cache, slots.to(device), fp8_format=fmt)
    k_out, v_out = tq_load_k8v4(cache, slots.to(device), head_dim=d, fp8_format=fmt)
    # load decodes exactly what is stored
    k_ref, v_ref = ref.load(cache, slots, d, fmt)
    assert_close_tol(k_out.cpu(), k_ref, tolerance("exact", "fp32"), op="turboquant.exact", equal_nan=True)
    assert_close_tol(v_out.cpu(), v_ref, tolerance("exact", "fp32"), op="turboquant.exact", equal_nan=True)
    stored = cache.cpu()[slots // 16, slots % 16][..., :d]
    assert_fp8_close(
        stored,
        ref.nearest_key_codes(key, fmt),
        fmt,
        tol=tolerance("turboquant.key_roundtrip"),
        op="turboquant.key_roundtrip",
        dtype=dtype_case.id,
    )
    err = (v_out.cpu().double() - value.double()).abs()
    bound = _value_bound(value, harness_arch)
    worst = float((err - bound).max())
    assert worst <= 0, f"value round trip exceeds half a step (+fp16 storage) by {worst:.3e}"


# --- hazards, on purpose ---------------------------------------------------------------------------------


@pytest.mark.dtype_cases(src=["bf16", "fp32"], fmt=["e4b15"])
def test_e4b15_clips_keys_beyond_1_75(dtype_case, device, tolerance):
    """Pre-Ada keys saturate at ±1.75: stated in kernels.turboquant.layout.KEY_MAX and visible here."""
    key = torch.tensor([3.0, -2.0, 1.75, -1.75, 100.0, float("inf"), -float("inf"), 1.5]).to(dtype_case.src)
    key = key.reshape(1, 1, 8)
    cache = _cache(1, 16, 1, 8, device)
    slots = torch.tensor([0], device=device)
    tq_store_k8v4(key.to(device), torch.zeros_like(key).to(device), cache, slots, fp8_format="e4b15")
    k_out, _ = tq_load_k8v4(cache, slots, head_dim=8, fp8_format="e4b15")
    expected = torch.tensor([[[1.75, -1.75, 1.75, -1.75, 1.75, 1.75, -1.75, 1.5]]])
    assert_close_tol(k_out.cpu(), expected, tolerance("exact", "fp32"), op="turboquant.exact")
    lost = (k_out.cpu() != key.float()).flatten().tolist()
    assert lost == [True, True, False, False, True, True, True, False]


def test_e4nv_saturates_at_448(device, tolerance):
    key = torch.tensor([1000.0, -500.0, 448.0, float("inf"), -float("inf"), 464.0, 0.0, -0.0]).reshape(
        1, 1, 8
    )
    cache = _cache(1, 16, 1, 8, device)
    slots = torch.tensor([3], device=device)
    tq_store_k8v4(key.to(device), torch.zeros_like(key).to(device), cache, slots, fp8_format="e4nv")
    k_out, _ = tq_load_k8v4(cache, slots, head_dim=8, fp8_format="e4nv")
    assert_close_tol(
        k_out.cpu(),
        torch.tensor([[[448.0, -448, 448, 448, -448, 448, 0, 0]]]),
        tolerance("exact", "fp32"),
        op="turboquant.exact",
    )
    assert cache.cpu()[0, 3, 0, 7].item() == 0x80, "-0.0 keeps its sign bit"


@pytest.mark.interp_only
def test_e4nv_saturation_is_the_kernels_not_the_cast_shims(device):
    """The store clamps keys beyond ±448 itself. The interpreter's cast shim saturates as the hardware cast does,
    which would hide a dropped clamp; with the shim suspended the interpreter's own cast (not saturating) runs, so
    the codes 0x7e / 0xfe come from the kernel's clamp alone."""
    from harness.interp import casts as interp_casts

    key = torch.tensor([1000.0, -500.0, 448.0, float("inf"), -float("inf"), 464.0, 0.0, -0.0]).reshape(1, 1, 8)
    cache = _cache(1, 16, 1, 8, device)
    with interp_casts.suspended():
        tq_store_k8v4(key, torch.zeros_like(key), cache, torch.tensor([3]), fp8_format="e4nv")
    assert cache[0, 3, 0, :8].tolist() == [0x7E, 0xFE, 0x7E, 0x7E, 0xFE, 0x7E, 0x00, 0x80]


@pytest.mark.parametrize(
    "values",
    [[1e6, -3e5, 0.0, 70000.0, -65504.0, 12.0, float("inf"), -float("inf")],
     [1e6, 3e5, 70000.0, 65536.0, 1e5, 2e6, float("inf"), 8e4]],  # every value past +65504: the min is clamped too
    ids=["mixed", "all-above"],
)
@pytest.mark.parametrize("src", [torch.float32, torch.bfloat16])
def test_value_range_beyond_fp16_writes_no_inf(src, values, device, harness_arch):
    """A range whose fp16 scale (or zero) would overflow: values saturate at ±65504, scale stays finite."""
    v = torch.tensor(values).to(src).reshape(1, 1, 8)
    key = torch.zeros_like(v)
    cache = _cache(1, 16, 1, 8, device)
    slots = torch.tensor([1], device=device)
    tq_store_k8v4(key.to(device), v.to(device), cache, slots, fp8_format="e4nv")
    params = cache.cpu()[0, 1, 0, 8 + 4 : 8 + 8].clone().view(torch.float16)
    assert bool(torch.isfinite(params).all()), f"scale/zero must be finite, got {params.tolist()}"
    clamped = v.float().clamp(-VALUE_MAX, VALUE_MAX)
    assert params[1].item() == clamped.min().item()
    _, v_out = tq_load_k8v4(cache, slots, head_dim=8, fp8_format="e4nv")
    assert bool(torch.isfinite(v_out).all())
    err = (v_out.cpu().double() - clamped.double()).abs()
    worst = float((err - _value_bound(clamped, harness_arch)).max())
    assert worst <= 0, f"saturated values off by {worst:.3e} beyond half a step"


@pytest.mark.parametrize("fmt", ["e4nv", "e4b15"])
def test_nan_inputs(fmt, device, tolerance):
    """NaN key element → NaN code (0x7f) → NaN on load, neighbours intact; NaN value element → its whole
    vector's scale and zero are fp16 NaN, so the whole vector loads as NaN; other vectors intact."""
    nan = float("nan")
    key = torch.tensor([[[0.5, nan, -0.25, 1.0]], [[nan, 0.125, 0.0, -1.0]]])
    value = torch.tensor([[[1.0, 2.0, nan, 4.0]], [[0.0, 5.0, 10.0, 15.0]]])
    cache = _cache(1, 16, 1, 4, device)
    slots = torch.tensor([2, 9], device=device)
    tq_store_k8v4(key.to(device), value.to(device), cache, slots, fp8_format=fmt)
    raw = cache.cpu()[0, [2, 9], 0]
    assert raw[0, 1].item() == 0x7F and raw[1, 0].item() == 0x7F
    assert raw[0, 6:10].clone().view(torch.int16).tolist() == [FP16_NAN_BITS, FP16_NAN_BITS]
    assert raw[0, 4:6].tolist() == [0, 0], "codes of a NaN vector are 0"
    k_out, v_out = tq_load_k8v4(cache, slots, head_dim=4, fp8_format=fmt)
    k_exp = torch.tensor([[[0.5, nan, -0.25, 1.0]], [[nan, 0.125, 0.0, -1.0]]])
    assert_close_tol(k_out.cpu(), k_exp, tolerance("exact", "fp32"), op="turboquant.exact", equal_nan=True)
    assert bool(torch.isnan(v_out[0]).all())
    # scale 1, zero 0: exact
    assert_close_tol(v_out.cpu()[1], value[1], tolerance("exact", "fp32"), op="turboquant.exact")


def test_constant_vector_uses_scale_floor(device, tolerance):
    v = torch.full((1, 1, 6), 3.0)
    cache = _cache(1, 16, 1, 6, device)
    slots = torch.tensor([0], device=device)
    tq_store_k8v4(torch.zeros_like(v).to(device), v.to(device), cache, slots, fp8_format="e4nv")
    params = cache.cpu()[0, 0, 0, 6 + 3 : 6 + 7].clone().view(torch.float16).float()
    assert params.tolist() == [2.0**-14, 3.0]
    _, v_out = tq_load_k8v4(cache, slots, head_dim=6, fp8_format="e4nv")
    assert_close_tol(v_out.cpu(), v, tolerance("exact", "fp32"), op="turboquant.exact")


def test_skipped_tokens_write_nothing_and_load_nan(rng, device):
    key, value = _inputs(rng, 3, 1, 8, torch.float32, "e4nv")
    cache = _cache(1, 16, 1, 8, device)
    before = cache.clone()
    tq_store_k8v4(key.to(device), value.to(device), cache, torch.tensor([-1, -5, -1], device=device))
    assert torch.equal(cache, before)
    k_out, v_out = tq_load_k8v4(cache, torch.tensor([-1, 4], device=device), head_dim=8)
    assert bool(torch.isnan(k_out[0]).all() and torch.isnan(v_out[0]).all())
    assert not bool(torch.isnan(k_out[1]).any())  # poison bytes decode to finite numbers: row 1 is "data"


def test_empty_batch_is_a_no_op(device):
    cache = _cache(1, 16, 2, 8, device)
    before = cache.clone()
    e = torch.empty(0, 2, 8, device=device)
    tq_store_k8v4(e, e, cache, torch.empty(0, dtype=torch.int64, device=device))
    assert torch.equal(cache, before)
    k, v = tq_load_k8v4(cache, torch.empty(0, dtype=torch.int64, device=device), head_dim=8)
    assert k.shape == v.shape == (0, 2, 8)


# --- validation: clear errors, nothing written -----------------------------------------------------------


def _good(device, d=8):
    key = torch.randn(2, 2, d, device=device)
    return dict(
        key=key,
        value=key.clone(),
        kv_cache=_cache(2, 16, 2, d, device),
        slot_mapping=torch.tensor([1, 17], device=device),
    )


_BAD = [
    (
        "key int",
        lambda g: {**g, "key": g["key"].to(torch.int32)},
        TypeError,
        r"key must have dtype in \(float16",
    ),
    ("value fp64", lambda g: {**g, "value": g["value"].double()}, TypeError, r"value must have dtype"),
    ("key 2-d", lambda g: {**g, "key": g["key"][0]}, ValueError, r"key must have 3 dims"),
    (
        "shape mismatch",
        lambda g: {**g, "value": g["value"][:, :1]},
        ValueError,
        r"value has shape \(2, 1, 8\), expected key's shape \(2, 2, 8\)",
    ),
    (
        "cache dtype",
        lambda g: {**g, "kv_cache": g["kv_cache"].to(torch.int8)},
        TypeError,
        r"kv_cache must have dtype in \(uint8\)",
    ),
    (
        "cache slot bytes",
        lambda g: {**g, "kv_cache": g["kv_cache"][..., :14]},
        ValueError,
        r"kv_cache.shape\[3\] \(slot bytes\) is 14, but head_dim 8 needs exactly 16",
    ),
    (
        "cache heads",
        lambda g: {**g, "kv_cache": g["kv_cache"][:, :, :1]},
        ValueError,
        r"kv_cache.shape\[2\] \(num_kv_heads\) is 1, but key/value have 2",
    ),
    (
        "cache last dim strided",
        lambda g: {**g, "kv_cache": g["kv_cache"].repeat_interleave(2, -1)[..., ::2]},
        ValueError,
        r"kv_cache must be contiguous in its last dim",
    ),
    (
        "cache expanded",
        lambda g: {**g, "kv_cache": g["kv_cache"][:1, :1, :1].expand(2, 16, 2, 16)},
        ValueError,
        r"kv_cache overlaps itself in memory \(shape \(2, 16, 2, 16\), strides \(0, 0, 0, 1\)\)",
    ),
    (
        "key on another device",
        lambda g: {**g, "key": g["key"].to("meta")},
        ValueError,
        r"key is on meta, expected",
    ),
    (
        "validate not a bool",
        lambda g: {**g, "validate": "yes"},
        TypeError,
        r"validate must be a bool, got str",
    ),
    (
        "slot dtype",
        lambda g: {**g, "slot_mapping": g["slot_mapping"].float()},
        TypeError,
        r"slot_mapping must have dtype in \(int32, int64\)",
    ),
    (
        "slot length",
        lambda g: {**g, "slot_mapping": g["slot_mapping"][:1]},
        ValueError,
        r"slot_mapping has 1 entries, expected num_tokens = 2",
    ),
    (
        "slot range",
        lambda g: {**g, "slot_mapping": torch.tensor([1, 32], device=g["key"].device), "validate": True},
        ValueError,
        r"slot_mapping\[1\] = 32 is out of range: the cache has num_blocks × block_size = 32 slots",
    ),
    (
        "slot twice",
        lambda g: {**g, "slot_mapping": torch.tensor([5, 5], device=g["key"].device), "validate": True},
        ValueError,
        r"slot_mapping writes slot 5 more than once",
    ),
    (
        "slot device",
        lambda g: {**g, "slot_mapping": g["slot_mapping"].to("meta")},
        ValueError,
        r"slot_mapping is on meta, expected",
    ),
    (
        "format",
        lambda g: {**g, "fp8_format": "e5m2"},
        ValueError,
        r"fp8_format must be 'auto', 'e4nv', 'e4b15'; got 'e5m2'",
    ),
    (
        "head_dim 0",
        lambda g: {**g, "key": g["key"][..., :0], "value": g["value"][..., :0]},
        ValueError,
        r"key.shape\[2\] \(head_dim\) must be an int in \[1, 1024\], got 0",
    ),
]


@pytest.mark.parametrize("make, exc, match", [b[1:] for b in _BAD], ids=[b[0] for b in _BAD])
def test_bad_input_is_refused_and_nothing_written(make, exc, match, device):
    good = _good(device)
    args = make(good)
    cache = args["kv_cache"]
    snapshot = cache.clone() if cache.dtype == torch.uint8 else None
    with pytest.raises(exc, match=match):
        tq_store_k8v4(
            args["key"],
            args["value"],
            cache,
            args["slot_mapping"],
            fp8_format=args.get("fp8_format", "auto"),
            validate=args.get("validate", False),
        )
    if snapshot is not None:
        assert torch.equal(cache, snapshot), "a refused call must not write"
    assert bool((good["kv_cache"] == POISON).all())


def test_load_validation(device):
    g = _good(device)
    with pytest.raises(ValueError, match=r"is 16, but head_dim 12 needs exactly 22"):
        tq_load_k8v4(g["kv_cache"], g["slot_mapping"], head_dim=12)
    with pytest.raises(ValueError, match=r"slot_mapping\[0\] = 99 is out of range"):
        tq_load_k8v4(g["kv_cache"], torch.tensor([99, 0], device=device), head_dim=8, validate=True)
    with pytest.raises(ValueError, match=r"head_dim must be an int in \[1, 1024\], got 8.0"):
        tq_load_k8v4(g["kv_cache"], g["slot_mapping"], head_dim=8.0)
    with pytest.raises(TypeError, match=r"slot_mapping must have dtype in \(int32, int64\)"):
        tq_load_k8v4(g["kv_cache"], g["slot_mapping"].float(), head_dim=8)
    with pytest.raises(TypeError, match=r"validate must be a bool, got int"):
        tq_load_k8v4(g["kv_cache"], g["slot_mapping"], head_dim=8, validate=1)


def test_format_resolution(monkeypatch, device):
    assert resolve_fp8_format(device, "e4b15") == "e4b15"
    if device == "cpu":
        assert resolve_fp8_format("cpu") == "e4nv"  # the interpreter emulates e4nv
    monkeypatch.setattr(torch.version, "hip", None)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda dev=None: (8, 0))
    assert resolve_fp8_format("cuda") == "e4b15"
    with pytest.raises(ValueError, match=r"fp8_format='e4nv' needs sm89\+; cuda is sm80"):
        resolve_fp8_format("cuda", "e4nv")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda dev=None: (12, 0))
    assert resolve_fp8_format("cuda") == "e4nv"


# --- GPU lane: real sizes ----------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.dtype_cases(fmt=["e4nv", "e4b15"])
@pytest.mark.parametrize("head_dim, block_size", [(128, 16), (96, 64), (80, 128), (256, 32)])
def test_store_matches_reference_gpu(dtype_case, head_dim, block_size, rng, device, harness_arch, tolerance):
    t, h, nb = 512, 8, 64
    key, value = _inputs(rng, t, h, head_dim, dtype_case.src, dtype_case.fmt.name)
    slots = _slots(rng, t, nb * block_size, skips=37)
    cache = _cache(nb, block_size, h, head_dim, device, layout="heads_major")
    before = cache.clone()
    tq_store_k8v4(key.to(device), value.to(device), cache, slots.to(device), fp8_format=dtype_case.fmt.name)
    torch.cuda.synchronize()
    _check_slots(
        cache, before, key, value, slots, dtype_case.fmt.name, harness_arch, tolerance, dtype_case.id
    )


@pytest.mark.gpu
@pytest.mark.parametrize("src", [torch.float16, torch.bfloat16, torch.float32])
def test_value_codes_measured_gpu(src, rng, device, harness_arch, tolerance):
    """Value codes, scale and zero at a real size vs the fp32 IEEE reference: prints a ``MEASURE`` line (the
    counts the sm90 turboquant.value_codes / value_params notes record; see them with ``-rP``), then
    asserts both rows."""
    t, h, d = 2048, 8, 128
    name = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32"}[src]
    _, value = _inputs(rng, t, h, d, src, "e4nv")
    cache = _cache(t // 16, 16, h, d, device)
    slots = torch.randperm(t, generator=rng)
    tq_store_k8v4(
        torch.zeros_like(value).to(device), value.to(device), cache, slots.to(device), fp8_format="auto"
    )
    got = cache.cpu()[slots // 16, slots % 16]
    vq = ref.value_quant(value, casts=hw_casts(harness_arch))
    nv = value_bytes(d)
    codes = torch.stack([got[..., d : d + nv] & 0xF, got[..., d : d + nv] >> 4], -1).reshape(t, h, d)
    params = got[..., d + nv : d + nv + 4].clone().view(torch.float16)
    ref_params = torch.stack([vq.scale16, vq.zero16], -1)
    code_bad = int((codes != vq.codes).sum())
    code_worst = int((codes.int() - vq.codes.int()).abs().max())
    param_bad = int((params.view(torch.int16) != ref_params.view(torch.int16)).sum())
    print(
        f"MEASURE turboquant.value_codes/value_params {harness_arch.name} {name}: value codes differing "
        f"{code_bad} / {codes.numel()} (max |code diff| {code_worst}); scale/zero fp16 bit mismatches "
        f"{param_bad} / {params.numel()}"
    )
    assert_close_tol(
        codes.float(),
        vq.codes.float(),
        tolerance("turboquant.value_codes", name),
        op="turboquant.value_codes",
        dtype=name,
    )
    assert_close_tol(  # no NaN in these inputs: a NaN scale or zero fails
        params.float(),
        ref_params.float(),
        tolerance("turboquant.value_params", name),
        op="turboquant.value_params",
        dtype=name,
    )


# --- the read-back kernel builds where the store does ------------------------------------------------------


@pytest.mark.compile_targets("sm80", "sm90")
@pytest.mark.parametrize("fmt", ["e4nv", "e4b15"])
def test_load_kernel_compiles(compile_target, fmt):
    """The load decodes FP8 by integer arithmetic (issue 25), so it builds for sm80 in e4nv too (the key format
    is the store's concern); test_turboquant_load.py compiles both load kernels for every target."""
    from harness.compile import matrix as cm
    from kernels.turboquant.load import _load_k8v4_kernel, load_compile_spec

    sig, constexprs = load_compile_spec(fmt, head_dim=96)
    cm.assert_compiles(_load_k8v4_kernel, signature=sig, constexprs=constexprs, target=compile_target)


@pytest.mark.compile_targets("sm75", "sm80", "sm89", "sm90", "sm100", "sm120")
@pytest.mark.parametrize("src", ["bf16", "fp16", "fp32"])
def test_word_store_kernel_gpu_paths_compile(compile_target, src):
    """The word kernel as a GPU launches it builds for every target: on sm89+ both key formats through inline
    ``cvt.rn.satfinite.e4m3x2`` (f32 pairs, f16x2 for fp16 e4nv keys; e4b15 from fp32 keys the software
    cast), below sm89 e4b15 through Triton's cast (no inline PTX there), and the reciprocal value division
    everywhere. The GPU lane launches sm90's two (a compile is lane_independent, so it skips these); the CPU
    lanes build them all, so an instruction a target lacks fails here first."""
    import kernels.turboquant.store as store
    from harness.compile import matrix as cm

    cc = compile_target.cc
    for fmt in ("e4nv", "e4b15") if cc >= 89 else ("e4b15",):
        sig, constexprs, _ = store.words_compile_spec(src, fmt, head_dim=128, gpu=True, arch=cc)
        assert constexprs["HW_KEYS"] == (cc >= 89) and constexprs["RCP_DIV"]
        cm.assert_compiles(store._store_k8v4_words_kernel, signature=sig, constexprs=constexprs,
                           target=compile_target)
