"""harness.mx.formats: FP4/FP6/e8m0/ue4m3 codecs bit for bit against ml_dtypes, PTX-style RZ/RS against
independent references, and the e8m0 scale rules against their published definitions."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
import torch

from harness.mx import FORMATS, ULP_FAR, decode, e8m0_scale, encode, get_mx_format, ulp_distance

pytestmark = pytest.mark.lane_independent

SIGNED = ("e2m1", "e2m3", "e3m2")
MAX_CODE = {"e2m1": 0x7, "e2m3": 0x1F, "e3m2": 0x1F, "e8m0": 0xFE, "ue4m3": 0x7E}


def _f32(bits: torch.Tensor) -> torch.Tensor:
    return bits.to(torch.int64).sub(((bits >> 31) & 1) << 32).to(torch.int32).view(torch.float32)


def _dense() -> torch.Tensor:
    """Every bf16 pattern with six low halves: all exponents, NaN payloads, ±inf, ±0, subnormals, and every
    midpoint of a <= 7-bit format together with the fp32 values one ulp either side of it."""
    hi = torch.arange(1 << 16, dtype=torch.int64) << 16
    lo = torch.tensor([0, 1, 0x7FFF, 0x8000, 0x8001, 0xFFFF])
    return _f32((hi[:, None] | lo[None, :]).flatten())


DENSE = _dense()


def _ml(x: torch.Tensor, name: str) -> torch.Tensor:
    """ml_dtypes' codes for x (its own rounding: RNE, its overflow and NaN policy)."""
    dtype = getattr(ml_dtypes, get_mx_format(name).ml_dtypes_name)
    return torch.from_numpy(x.numpy().astype(dtype).view(np.uint8).copy())


def _ml_values(name: str) -> np.ndarray:
    f = get_mx_format(name)
    codes = np.arange(1 << f.bits, dtype=np.uint8)
    return codes.view(getattr(ml_dtypes, f.ml_dtypes_name)).astype(np.float64)


def _diff(got: torch.Tensor, want: torch.Tensor, x: torch.Tensor) -> str:
    bad = (got != want).nonzero().flatten()[:8].tolist()
    return f"{len((got != want).nonzero())} / {got.numel()} differ, e.g. " + ", ".join(
        f"x={x[i].item()!r} ({x[i:i + 1].view(torch.int32).item() & 0xFFFFFFFF:#010x}) got {got[i].item():#x} "
        f"want {want[i].item():#x}" for i in bad)


@pytest.mark.parametrize("name", ["e2m1", "e2m3", "e3m2", "e8m0"])
def test_encode_without_saturation_is_ml_dtypes_bit_for_bit(name):
    got, want = encode(DENSE, name, saturate=False), _ml(DENSE, name)
    assert torch.equal(got, want), _diff(got, want, DENSE)


@pytest.mark.parametrize("name", SIGNED)
def test_satfinite_differs_from_ml_dtypes_only_on_nan_which_becomes_positive_max(name):
    got, ml = encode(DENSE, name), _ml(DENSE, name)
    nan = torch.isnan(DENSE)
    assert torch.equal(got[~nan], ml[~nan]), _diff(got[~nan], ml[~nan], DENSE[~nan])
    assert (got[nan] == MAX_CODE[name]).all()
    # ml_dtypes' NaN policy, pinned: a zero of the opposite sign
    nans = _f32(torch.tensor([0x7FC00000, 0xFFC00000, 0x7F800001]))
    sign = 1 << (get_mx_format(name).bits - 1)
    assert encode(nans, name, saturate=False).tolist() == [sign, 0, sign]


def test_e8m0_satfinite_keeps_nan_clamps_overflow_and_zero():
    got, ml = encode(DENSE, "e8m0"), _ml(DENSE, "e8m0")
    x = DENSE.double()
    nan_or_neg = torch.isnan(x) | (x < 0)
    zero, over = x == 0, x >= 1.5 * 2.0**127  # over: ties round up, into 2^128
    assert (got[nan_or_neg] == 0xFF).all() and (got[zero] == 0).all() and (got[over] == 0xFE).all()
    rest = ~(nan_or_neg | zero | over)
    assert torch.equal(got[rest], ml[rest]), _diff(got[rest], ml[rest], DENSE[rest])
    assert (ml[zero] == 0xFF).all() and (ml[over] == 0xFF).all()  # the ml_dtypes policy those rows replace


def test_ue4m3_is_e4m3fn_on_non_negative_inputs_and_nan_on_negative_ones():
    pos = ~torch.signbit(DENSE)
    x = DENSE[pos]
    got, want = encode(x, "ue4m3", saturate=False), _ml(x, "ue4m3")
    assert torch.equal(got, want), _diff(got, want, x)
    got, want = encode(x, "ue4m3"), _ml(x.clamp(max=448.0), "ue4m3")  # satfinite = clamp, then RNE
    assert torch.equal(got, want), _diff(got, want, x)
    neg = DENSE[~pos & (DENSE != 0)]
    assert (encode(neg, "ue4m3") == 0x7F).all() and (encode(neg, "ue4m3", saturate=False) == 0x7F).all()
    assert encode(torch.tensor([-0.0]), "ue4m3").item() == 0


@pytest.mark.parametrize("name", ["e2m1", "e2m3", "e3m2", "ue4m3"])
def test_ties_go_to_the_even_code_and_one_ulp_either_side_to_the_nearer(name):
    v = np.unique(np.abs(_ml_values(name)[~np.isnan(_ml_values(name))]))
    mid = torch.from_numpy((v[:-1] + v[1:]) / 2).float()  # exact in fp32
    lo, hi = torch.arange(len(v) - 1), torch.arange(1, len(v))
    up, down = torch.nextafter(mid, torch.tensor(math.inf)), torch.nextafter(mid, torch.tensor(0.0))
    assert torch.equal(encode(up, name).long(), hi) and torch.equal(encode(down, name).long(), lo)
    got = encode(mid, name).long()
    assert torch.equal(got, torch.where(lo % 2 == 0, lo, hi))
    if name != "ue4m3":
        sign = 1 << (get_mx_format(name).bits - 1)
        assert torch.equal(encode(-mid, name).long(), got | sign)


def test_e8m0_ties_round_up_as_ml_dtypes_does():
    x = torch.tensor([1.5, 3.0, 6.0, 0.75, 1.5 * 2.0**-127])
    assert encode(x, "e8m0").tolist() == [128, 129, 130, 127, 1]


@pytest.mark.parametrize("name", list(FORMATS))
def test_decode_is_ml_dtypes_for_every_code(name):
    f = get_mx_format(name)
    codes = torch.arange(1 << f.bits, dtype=torch.uint8)
    got, want = decode(codes, name).double().numpy(), _ml_values(name)
    assert decode(codes, name).dtype == torch.float32
    same = (got == want) & (np.signbit(got) == np.signbit(want)) | (np.isnan(got) & np.isnan(want))
    assert same.all(), [(hex(c), got[c], want[c]) for c in np.flatnonzero(~same)]


def _toward_zero_ref(x: torch.Tensor, name: str) -> torch.Tensor:
    """The largest magnitude <= |x| on the ml_dtypes value table (satfinite for NaN/inf/overflow)."""
    f, vals = get_mx_format(name), _ml_values(name)
    mags = vals[: (1 << (f.bits - f.signed)) - f.has_nan]
    a = np.abs(x.double().numpy())
    idx = np.searchsorted(mags, np.nan_to_num(a, nan=0.0, posinf=np.inf), side="right") - 1
    idx = np.clip(idx, 0, len(mags) - 1)
    if f.signed:
        idx = np.where(np.isnan(a), len(mags) - 1, idx | (np.signbit(x.numpy()) << (f.bits - 1)))
    else:
        idx = np.where(np.isnan(a) | (np.signbit(x.numpy()) & (a != 0)), f.nan_code, idx)
    return torch.from_numpy(idx.astype(np.uint8))


@pytest.mark.parametrize("name", list(FORMATS))
def test_round_toward_zero_keeps_the_largest_magnitude_not_above(name):
    got, want = encode(DENSE, name, rounding="rz"), _toward_zero_ref(DENSE, name)
    assert torch.equal(got, want), _diff(got, want, DENSE)


@pytest.mark.parametrize("name", list(FORMATS))
def test_stochastic_rounding_with_zero_bits_is_toward_zero_and_only_the_low_byte_counts(name):
    finite = DENSE[torch.isfinite(DENSE)]
    zero = torch.zeros(finite.shape, dtype=torch.uint32)
    assert torch.equal(encode(finite, name, rounding="rs", random_bits=zero), encode(finite, name, rounding="rz"))
    g = torch.Generator().manual_seed(7)
    r = torch.randint(0, 1 << 32, finite.shape, generator=g, dtype=torch.int64)
    full, low = r.to(torch.uint32), (r & 0xFF).to(torch.uint32)
    assert torch.equal(encode(finite, name, rounding="rs", random_bits=full),
                       encode(finite, name, rounding="rs", random_bits=low))


@pytest.mark.parametrize("name", list(FORMATS))
def test_stochastic_rounding_rounds_up_for_exactly_d_of_the_256_random_bytes(name):
    """PTX cvt.rs: away from zero iff D + r >= 256, D the top 8 dropped bits; lower dropped bits never count."""
    f, vals = get_mx_format(name), _ml_values(name)
    mags = vals[: (1 << (f.bits - f.signed)) - f.has_nan]
    picks = [0, 1, 2, len(mags) // 2, len(mags) - 2]  # zero, the subnormal grid, a normal, the top step
    lo = torch.tensor(mags[picks])
    step = torch.tensor(mags[[p + 1 for p in picks]]) - lo
    d = torch.arange(256, dtype=torch.float64)
    x = lo[:, None, None] + step[:, None, None] * (d[None, :, None] + 0.375) / 256  # 0.375: below D, ignored
    r = torch.arange(256, dtype=torch.int64).to(torch.uint32)[None, None, :]
    for sign in (1, -1):
        got = encode(sign * x.expand(-1, -1, 256), name, rounding="rs", random_bits=r.expand(len(picks), 256, 256))
        if sign < 0 and not f.signed:
            assert (got == f.nan_code).all()
            continue
        up = (got.long() & ((1 << (f.bits - f.signed)) - 1)) == torch.tensor(picks)[:, None, None] + 1
        assert torch.equal(up.sum(-1), d.long().expand(len(picks), 256))
    exact = torch.tensor(mags).float()
    rr = torch.full(exact.shape, 0xFF, dtype=torch.uint32)
    assert torch.equal(encode(exact, name, rounding="rs", random_bits=rr), encode(exact, name))


def test_ulp_distance_counts_grid_steps_with_signed_zeros_equal_and_nan_far():
    for name in FORMATS:
        f, vals = get_mx_format(name), _ml_values(name)
        ranks = {v: i for i, v in enumerate(np.unique(vals[~np.isnan(vals)]))}  # np.unique merges -0 and +0
        rank = torch.tensor([ranks.get(v, -1) for v in vals])
        codes = torch.arange(1 << f.bits, dtype=torch.uint8)
        a, b = codes[:, None].expand(-1, len(codes)), codes[None, :].expand(len(codes), -1)
        got = ulp_distance(a, b, name)
        want = (rank[:, None] - rank[None, :]).abs()
        if f.has_nan:
            nan = torch.tensor(np.isnan(vals))
            want = torch.where(nan[:, None] | nan[None, :], ULP_FAR, want)
        assert torch.equal(got, want), name
    assert ulp_distance(torch.tensor([0, 9], dtype=torch.uint8), torch.tensor([8, 1], dtype=torch.uint8),
                        "e2m1").tolist() == [0, 2]


# ---- e8m0 scale rules ------------------------------------------------------------------------------------------

ELEM = {"e2m1": (2, 1, 6.0), "e2m3": (2, 3, 7.5), "e3m2": (4, 2, 28.0), torch.float8_e4m3fn: (8, 3, 448.0),
        torch.float8_e5m2: (15, 2, 57344.0)}


def _rule_ref(a: float, rule: str, emax: int, mbits: int, max_elem: float) -> int:
    """Each rule from its definition, one Python float at a time."""
    if not math.isfinite(a):
        return 0xFF
    a = abs(a)
    if rule == "rceil":
        a = float(np.float32(a) / np.float32(max_elem))
    if a == 0:
        return 0
    fl = math.frexp(a)[1] - 1
    if rule == "floor":
        e = fl - emax
    elif rule == "ceil":
        e = fl + (a != 2.0**fl) - emax
    elif rule == "even":  # amax rounded to the element's mantissa width, half up, then floor
        sig = math.floor(a / 2.0**fl * 2**mbits + 0.5) / 2**mbits
        e = fl + (sig == 2.0) - emax
    else:
        e = fl + (a != 2.0**fl)
    return min(max(e, -127), 127) + 127


def _amaxes() -> torch.Tensor:
    pows = [2.0**k for k in range(-149, 128)]
    sigs = [1.0, 1.5, 1.75, 1.875, 1.9375, 1.96875, 1.5 + 2**-10]
    base = torch.tensor([s * p for p in pows for s in sigs if s * p < 3.4e38], dtype=torch.float32)
    tweak = torch.cat([base, torch.nextafter(base, torch.tensor(math.inf)), torch.nextafter(base, torch.tensor(0.0))])
    mults = torch.tensor([6.0, 7.5, 28.0, 448.0, 57344.0]).repeat_interleave(81) * torch.tensor(
        [2.0**k for k in range(-40, 41)]).repeat(5)
    special = torch.tensor([0.0, -0.0, -3.0, math.inf, -math.inf, math.nan, 3.4028235e38, 1e-45])
    return torch.cat([tweak, mults, torch.nextafter(mults, torch.tensor(math.inf)), special])


@pytest.mark.parametrize("rule", ["floor", "ceil", "even", "rceil"])
@pytest.mark.parametrize("elem", list(ELEM), ids=str)
def test_e8m0_scale_rules_follow_their_definitions(rule, elem):
    amax = _amaxes()
    got = e8m0_scale(amax, elem, rule)
    want = torch.tensor([_rule_ref(a, rule, *ELEM[elem]) for a in amax.tolist()], dtype=torch.uint8)
    assert got.dtype == torch.uint8 and torch.equal(got, want), _diff(got, want, amax)


def test_e8m0_scale_rules_pinned():
    amax = torch.tensor([6.0, 7.0, 5.9, 0.0, math.inf, math.nan])
    assert e8m0_scale(amax, "e2m1", "floor").tolist() == [127, 127, 127, 0, 255, 255]
    assert e8m0_scale(amax, "e2m1", "ceil").tolist() == [128, 128, 128, 0, 255, 255]
    assert e8m0_scale(amax, "e2m1", "rceil").tolist() == [127, 128, 127, 0, 255, 255]
    assert e8m0_scale(amax, "e2m1", "even").tolist() == [127, 128, 127, 0, 255, 255]  # 7 = 1.75*4 rounds to 8
    fp8 = torch.tensor([448.0, 480.0, 496.0])  # 1.75, 1.875, 1.9375 * 2^8; e4m3 rounds only 1.9375 up
    assert e8m0_scale(fp8, torch.float8_e4m3fn, "even").tolist() == [127, 127, 128]


# ---- bad inputs ------------------------------------------------------------------------------------------------


def test_bad_inputs_name_the_argument_and_what_was_expected():
    x = torch.ones(4)
    cases = [
        (lambda: get_mx_format("fp4"), r"name: expected one of e2m1, e2m3, e3m2, e8m0, ue4m3; got 'fp4'"),
        (lambda: encode(x, "e4m3"), r"fmt: expected one of e2m1, .*; got 'e4m3'"),
        (lambda: encode(torch.ones(4, dtype=torch.int32), "e2m1"), r"x: expected a floating-point torch.Tensor"),
        (lambda: encode(x, "e2m1", rounding="rn"), r"rounding: expected one of rne, rz, rs; got 'rn'"),
        (lambda: encode(x, "e2m1", rounding="rs"), r"random_bits: rounding='rs' needs a torch.uint32 tensor"),
        (lambda: encode(x, "e2m1", rounding="rs", random_bits=torch.zeros(4, dtype=torch.int32)),
         r"random_bits: .*torch.uint32.*got torch.int32"),
        (lambda: encode(x, "e2m1", rounding="rs", random_bits=torch.zeros(3, dtype=torch.uint32)),
         r"random_bits: shape \(3,\) does not broadcast to x's \(4,\)"),
        (lambda: encode(x, "e2m1", random_bits=torch.zeros(4, dtype=torch.uint32)),
         r"random_bits: only rounding='rs' uses them"),
        (lambda: decode(torch.zeros(2, dtype=torch.int64), "e2m1"), r"codes: expected a torch.uint8 tensor"),
        (lambda: decode(torch.tensor([0x10], dtype=torch.uint8), "e2m1"), r"codes: e2m1 codes are 4-bit \(< 0x10\)"),
        (lambda: ulp_distance(torch.zeros(1), torch.zeros(1, dtype=torch.uint8), "e2m1"), r"a: expected a torch.uint8"),
        (lambda: e8m0_scale(x, "e2m1", "nearest"), r"rule: expected one of floor, ceil, even, rceil; got 'nearest'"),
        (lambda: e8m0_scale(x, "e8m0"), r"elem_fmt: expected an element format, one of e2m1, e2m3, e3m2"),
        (lambda: e8m0_scale(torch.ones(2, dtype=torch.int64), "e2m1"), r"amax: expected a floating-point"),
    ]
    for call, message in cases:
        with pytest.raises(ValueError, match=message):
            call()


def test_format_objects_are_accepted_only_where_they_belong():
    """A format object is taken where its name would be, and refused where its name would be: an e8m0 scale
    format is no element format, and a look-alike object is not one of the formats."""
    from harness.mx.formats import MXFormat

    e2m1 = get_mx_format("e2m1")
    one = torch.ones(1)
    assert get_mx_format(e2m1) is e2m1 and torch.equal(e8m0_scale(one, e2m1), e8m0_scale(one, "e2m1"))
    fake = MXFormat("e2m1", 2, 1, 1, 7.0, False, True, "float4_e2m1fn")
    for call, message in [
        (lambda: get_mx_format(fake), r"name: expected one of e2m1, .*; got MXFormat"),
        (lambda: e8m0_scale(one, FORMATS["e8m0"]), r"elem_fmt: expected an element format"),
        (lambda: e8m0_scale(one, fake), r"elem_fmt: expected one of"),
        (lambda: e8m0_scale(one, torch.float16), r"elem_fmt: expected an element format, .*got torch.float16"),
    ]:
        with pytest.raises(ValueError, match=message):
            call()


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2])
def test_mxfp8_element_fields_are_the_torch_dtypes(dtype):
    from harness.mx.formats import element_format

    f, fi = element_format(dtype), torch.finfo(dtype)
    assert f.bits == fi.bits == 8 and f.signed and f.max_finite == fi.max
    assert 2.0 ** (1 - f.bias) == fi.smallest_normal and 2.0**-f.man_bits == fi.eps
    every_code = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(dtype).float()
    assert f.has_nan == bool(torch.isnan(every_code).any())


def test_codecs_take_any_float_dtype_and_keep_shape():
    x = torch.tensor([[0.25, -3.0], [7.0, 0.0]])
    for dtype in (torch.float16, torch.bfloat16, torch.float64):
        assert torch.equal(encode(x.to(dtype), "e2m1"), encode(x, "e2m1"))
    assert encode(x, "e2m1").shape == (2, 2) and encode(torch.tensor(1.0), "e2m1").item() == 0x2


def test_ulp_distance_needs_equal_shapes():
    """Broadcasting paired one code with every code of the other side ([1, 2, 3] against [1] gave [0, 1, 2]), and
    unequal lengths gave torch's raw size RuntimeError."""
    a = torch.tensor([1, 2, 3], dtype=torch.uint8)
    for b in (torch.tensor([1], dtype=torch.uint8), torch.tensor([1, 2], dtype=torch.uint8)):
        with pytest.raises(ValueError, match=rf"^a and b must have the same shape, got \(3,\) and \({len(b)},\)$"):
            ulp_distance(a, b, "e2m1")
    assert ulp_distance(a, a.clone(), "e2m1").tolist() == [0, 0, 0]


@pytest.mark.parametrize("saturate", ["no", 0, 1, None])
def test_encode_saturate_must_be_a_bool(saturate):
    """A truthy string picked the satfinite policy: NaN became code 7, not the 8 of saturate=False."""
    nan = torch.tensor([math.nan])
    assert encode(nan, "e2m1", saturate=False).item() == 8 and encode(nan, "e2m1", saturate=True).item() == 7
    with pytest.raises(TypeError, match=rf"^saturate: expected True or False; got {saturate!r}$"):
        encode(nan, "e2m1", saturate=saturate)


def test_meta_inputs_are_refused_by_name():
    """A meta tensor has a shape but no values; random_bits on meta gave torch's "Cannot copy out of meta tensor"."""
    meta = torch.empty(4, device="meta")
    cases = [
        (lambda: encode(meta, "e2m1"), "x"),
        (lambda: encode(torch.ones(4), "e2m1", rounding="rs", random_bits=torch.zeros(4, dtype=torch.uint32,
                                                                                      device="meta")), "random_bits"),
        (lambda: e8m0_scale(meta, "e2m1"), "amax"),
        (lambda: decode(meta.to(torch.uint8), "e2m1"), "codes"),
        (lambda: ulp_distance(torch.zeros(4, dtype=torch.uint8), meta.to(torch.uint8), "e2m1"), "b"),
    ]
    for call, arg in cases:
        with pytest.raises(ValueError, match=rf"^{arg}: is on the meta device"):
            call()
