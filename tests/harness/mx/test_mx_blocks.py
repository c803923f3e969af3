"""harness.mx.blocks: FP4 packing, and MX/NVFP4 quantize -> dequantize against a reference computed apart (Python
powers of two for the scales, ml_dtypes for every rounding)."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
import torch

from harness.mx import dequantize_mx, dequantize_nvfp4, pack_fp4, quantize_mx, quantize_nvfp4, unpack_fp4

pytestmark = pytest.mark.lane_independent

# element format -> (ml_dtypes type, emax, max)
ELEM = {"e2m1": (ml_dtypes.float4_e2m1fn, 2, 6.0), "e2m3": (ml_dtypes.float6_e2m3fn, 2, 7.5),
        "e3m2": (ml_dtypes.float6_e3m2fn, 4, 28.0), torch.float8_e4m3fn: (ml_dtypes.float8_e4m3fn, 8, 448.0),
        torch.float8_e5m2: (ml_dtypes.float8_e5m2, 15, 57344.0)}


def _operand(rows: int, k: int, block: int, seed: int = 0) -> torch.Tensor:
    """Gaussian blocks each at its own magnitude (so scales differ), plus an all-zero block and a lone spike."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, k, generator=g)
    mag = torch.randint(-12, 13, (rows, k // block), generator=g).float().exp2().repeat_interleave(block, 1)
    x = x * mag
    x[0, :block] = 0.0
    x[1, 3] = 1000.0
    return x


def _mx_ref(x: torch.Tensor, elem, block: int) -> torch.Tensor:
    """OCP MX v1.0 §6.3 written out: scale 2^(floor(log2 amax) - emax), elements RNE-saturated by ml_dtypes."""
    ml, emax, top = ELEM[elem]
    out = np.empty(x.shape, dtype=np.float32)
    xs = x.double().numpy()
    for i in range(x.shape[0]):
        for j in range(0, x.shape[1], block):
            b = xs[i, j:j + block]
            amax = np.abs(b).max()
            e = -127 if amax == 0 else max(-127, math.frexp(amax)[1] - 1 - emax)
            q = np.clip(b / 2.0**e, -top, top).astype(ml).astype(np.float64)
            out[i, j:j + block] = q * 2.0**e
    return torch.from_numpy(out)


def test_pack_puts_the_first_element_in_the_low_nibble_and_unpacks_back():
    codes = torch.tensor([[0x1, 0x2, 0xF, 0x0], [0x7, 0x8, 0x3, 0xC]], dtype=torch.uint8)
    assert pack_fp4(codes).tolist() == [[0x21, 0x0F], [0x87, 0xC3]]
    assert pack_fp4(codes, axis=0).tolist() == [[0x71, 0x82, 0x3F, 0xC0]]
    g = torch.Generator().manual_seed(1)
    c = torch.randint(0, 16, (6, 10, 4), generator=g).to(torch.uint8)
    for axis in (-1, 0, 1):
        assert torch.equal(unpack_fp4(pack_fp4(c, axis), axis), c)


@pytest.mark.parametrize("elem", list(ELEM), ids=str)
def test_mx_dequantize_of_quantize_is_the_spec_computed_apart(elem):
    x = _operand(5, 96, 32)
    codes, scales = quantize_mx(x, elem)
    assert codes.dtype == scales.dtype == torch.uint8 and scales.shape == (5, 3)
    assert codes.shape == ((5, 48) if elem == "e2m1" else (5, 96))
    got, want = dequantize_mx(codes, scales, elem), _mx_ref(x, elem, 32)
    assert torch.equal(got, want), (got - want).abs().max()
    assert len(scales.unique()) > 1


@pytest.mark.parametrize("elem", ["e2m1", torch.float8_e4m3fn], ids=str)
def test_mx_blocks_along_another_axis_are_the_transpose(elem):
    x = _operand(4, 64, 16, seed=3)
    codes, scales = quantize_mx(x, elem, block=16)
    codes_t, scales_t = quantize_mx(x.T.contiguous(), elem, block=16, axis=0)
    assert torch.equal(codes_t, codes.T) and torch.equal(scales_t, scales.T)
    assert torch.equal(dequantize_mx(codes_t, scales_t, elem, block=16, axis=0), dequantize_mx(codes, scales, elem,
                                                                                              block=16).T)


def test_mx_pack_layout_and_scale_rules_pinned():
    x = torch.tensor([[1.0, 2.0, -0.5, 0.0, 4.0, 0.0, 0.0, 0.0]])
    codes, scales = quantize_mx(x, "e2m1", block=8)  # amax 4: scale 2^(2 - 2) = 1
    assert scales.tolist() == [[127]] and codes.tolist() == [[0x42, 0x09, 0x06, 0x00]]
    codes, scales = quantize_mx(x, "e2m1", block=8, pack=False)
    assert codes.tolist() == [[0x2, 0x4, 0x9, 0x0, 0x6, 0x0, 0x0, 0x0]]
    y = torch.full((1, 8), 7.0)
    assert [quantize_mx(y, "e2m1", block=8, scale_rule=r)[1].item() for r in ("floor", "ceil", "even", "rceil")] \
        == [127, 128, 128, 128]
    assert dequantize_mx(*quantize_mx(y, "e2m1", block=8), "e2m1", block=8).unique().tolist() == [6.0]  # clipped


def test_mx_nan_or_inf_makes_only_its_own_block_nan():
    x = _operand(2, 64, 32)
    x[1, 40], x[0, 5] = math.nan, math.inf
    codes, scales = quantize_mx(x, "e2m1")
    assert scales[0, 0] == scales[1, 1] == 0xFF and scales[0, 1] != 0xFF and scales[1, 0] != 0xFF
    out = dequantize_mx(codes, scales, "e2m1")
    assert out[0, :32].isnan().all() and out[1, 32:].isnan().all() and not out[0, 32:].isnan().any()
    assert quantize_mx(x, "e2m1", pack=False)[0][1, 40] == 0x7  # elements saturate: NaN -> +max (satfinite)


def test_pad_zero_pads_to_a_whole_block_and_without_it_the_size_is_refused():
    x = _operand(3, 64, 32)[:, :45]
    with pytest.raises(ValueError, match=r"x: size 45 along axis -1 is not a multiple of block=32 \(pass pad=True"):
        quantize_mx(x, "e2m1")
    codes, scales = quantize_mx(x, "e2m1", pad=True)
    padded = torch.nn.functional.pad(x, (0, 19))
    assert codes.shape == (3, 32) and torch.equal(dequantize_mx(codes, scales, "e2m1"), _mx_ref(padded, "e2m1", 32))


def _nvfp4_ref(x: torch.Tensor, block: int, g: float | None) -> torch.Tensor:
    """NVFP4 written out: global fp32 amax / 2688, block scales fp32 amax_b / 6 / g rounded by ml_dtypes to e4m3
    (clamped to 448), elements x / (s * g) exact in float64 then rounded by ml_dtypes to e2m1 (clamped to 6)."""
    x32 = x.numpy()
    if g is None:
        g = np.float32(np.abs(x32).max()) / np.float32(2688.0)
    g = np.float32(g)
    out = np.empty(x.shape, dtype=np.float32)
    for i in range(x.shape[0]):
        for j in range(0, x.shape[1], block):
            b = x32[i, j:j + block]
            s = np.float32(np.minimum(np.float32(np.abs(b).max()) / np.float32(6.0) / g, np.float32(448.0)))
            s = np.float32(s.astype(ml_dtypes.float8_e4m3fn).astype(np.float32))
            if s == 0:
                e = np.zeros(block, np.float32)
            else:
                e = np.clip(b.astype(np.float64) / (np.float64(s) * np.float64(g)), -6, 6)
                e = e.astype(ml_dtypes.float4_e2m1fn).astype(np.float32)
            out[i, j:j + block] = (e * s) * g
    return torch.from_numpy(out)


@pytest.mark.parametrize("g", [None, 0.015625, 0.37])
def test_nvfp4_dequantize_of_quantize_is_the_recipe_computed_apart(g):
    x = _operand(4, 64, 16, seed=5) * 1e-3
    codes, scales, gs = quantize_nvfp4(x, global_scale=g)
    assert codes.shape == (4, 32) and scales.shape == (4, 4) and gs.dtype == torch.float32 and gs.dim() == 0
    got, want = dequantize_nvfp4(codes, scales, gs), _nvfp4_ref(x, 16, g)
    assert torch.equal(got, want), (got - want).abs().max()
    assert (scales[0, 0] == 0) and (codes[0, :8] == 0).all()  # the zero block


def test_nvfp4_block_scale_divides_by_6_then_by_the_global_scale():
    x = torch.zeros(1, 16)
    x[0, 0] = 0.019511720165610313  # fp32 (amax / 6) / g and amax / (6 * g) round to different e4m3 codes
    assert quantize_nvfp4(x, global_scale=0.37)[1].item() == 0x4


def test_nvfp4_nan_rides_the_block_scale_and_zero_input_gets_unit_global_scale():
    x = _operand(2, 32, 16)
    x[1, 20] = math.nan
    codes, scales, _ = quantize_nvfp4(x, global_scale=0.5)
    assert scales[1, 1] == 0x7F and dequantize_nvfp4(codes, scales, 0.5)[1, 16:].isnan().all()
    assert quantize_nvfp4(torch.zeros(2, 16))[2].item() == 1.0


def test_bad_inputs_name_the_argument_and_what_was_expected():
    x = torch.ones(2, 32)
    c, s = quantize_mx(x, "e2m1")
    cases = [
        (lambda: quantize_mx(x, "e8m0"), r"fmt: expected an element format, one of e2m1, e2m3, e3m2, "
                                         r"torch.float8_e4m3fn, torch.float8_e5m2; got 'e8m0'"),
        (lambda: quantize_mx(x, "e2m1", block=0), r"block: expected a positive int; got 0"),
        (lambda: quantize_mx(x, "e2m1", block=15, pad=True), r"block: packing .* needs an even block; got 15"),
        (lambda: quantize_mx(x, "e2m1", axis=2), r"axis: expected an int in \[-2, 2\) for x of shape \(2, 32\); got 2"),
        (lambda: quantize_mx(x.long(), "e2m1"), r"x: expected a floating-point torch.Tensor .*; got torch.int64"),
        (lambda: quantize_mx(x, "e2m1", scale_rule="up"), r"rule: expected one of floor, ceil, even, rceil"),
        (lambda: dequantize_mx(c, s[:, :0], "e2m1"), r"scales: shape \(2, 0\) does not fit codes of \(2, 32\)"),
        (lambda: dequantize_mx(c.float(), s, "e2m1"),
         r"codes: expected a torch.uint8 tensor of packed e2m1 codes; got torch.float32"),
        (lambda: dequantize_mx(c.float(), s, torch.float8_e5m2, pack=False), r"codes: expected a torch.uint8"),
        (lambda: pack_fp4(torch.zeros(3, dtype=torch.uint8)), r"codes: packing needs an even size along axis -1"),
        (lambda: pack_fp4(torch.full((2,), 16, dtype=torch.uint8)), r"codes: e2m1 codes are 4-bit"),
        (lambda: quantize_nvfp4(x, global_scale=-1.0), r"global_scale: expected a finite positive scalar; got -1.0"),
        (lambda: quantize_nvfp4(x, global_scale=math.nan), r"global_scale: expected a finite positive scalar"),
        (lambda: quantize_nvfp4(torch.full((1, 16), math.inf)), r"x: has NaN or inf, .*pass global_scale"),
        (lambda: quantize_nvfp4(x, block=12), r"x: size 32 along axis -1 is not a multiple of block=12"),
    ]
    for call, message in cases:
        with pytest.raises(ValueError, match=message):
            call()


def test_axes_blocks_and_global_scales_at_their_edges():
    """A positive axis is the same axis as its negative twin; a block of one value is allowed; MXFP6/MXFP8 keep
    one code per byte whatever ``pack`` says; the default NVFP4 global scale is amax / (448 * 6) for any nonzero
    amax (0.5 / 2688 for amax 0.5, not 1), and a scale of 0 or below is refused."""
    g = torch.Generator().manual_seed(5)
    x = torch.randn(4, 64, generator=g)
    for t, pos, neg in ((x, 1, -1), (x.T.contiguous(), 0, -2)):
        a, b = quantize_mx(t, "e2m1", axis=pos), quantize_mx(t, "e2m1", axis=neg)
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    codes, scales = quantize_mx(x[:, :3], "e2m3", block=1)
    assert codes.shape == scales.shape == (4, 3)
    # one scale per value puts it in [4, 8): steps of 0.5 up to 7.5 (error <= 1/16), saturated above (< 1/15)
    err = (dequantize_mx(codes, scales, "e2m3", block=1) - x[:, :3]).abs()
    assert bool((err < x[:, :3].abs() / 15).all())
    for fmt in ("e2m3", "e3m2", torch.float8_e4m3fn):
        assert quantize_mx(x, fmt)[0].shape == (4, 64), fmt  # pack=True packs e2m1 only
    half = x / x.abs().max() * 0.5
    assert quantize_nvfp4(half)[2].item() == pytest.approx(0.5 / 2688, rel=1e-7)
    for bad in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ValueError, match=r"global_scale: expected a finite positive scalar"):
            quantize_nvfp4(x, global_scale=bad)


@pytest.mark.parametrize("shape", [(0, 64), (0, 3, 32), (2, 0, 32)])
def test_empty_inputs_quantize_to_empty_codes_and_scales(shape):
    """(0, K) raised reshape's "cannot reshape tensor of 0 elements" RuntimeError."""
    x = torch.zeros(shape)
    c, s = quantize_mx(x, "e2m1")
    assert c.shape == (*shape[:-1], shape[-1] // 2) and s.shape == (*shape[:-1], shape[-1] // 32)
    assert dequantize_mx(c, s, "e2m1").shape == shape
    c8, s8 = quantize_mx(x, torch.float8_e4m3fn)
    assert c8.shape == shape and s8.shape == s.shape
    c4, s4, g = quantize_nvfp4(x)
    assert c4.shape == c.shape and s4.shape == (*shape[:-1], shape[-1] // 16) and float(g) == 1.0


def test_mx_errors_name_the_callers_argument():
    """Errors named internal arguments (packed:, rule:, swizzled:) the caller never passed."""
    from harness.mx import SCHEMES, assert_mx_close

    with pytest.raises(ValueError, match=r"^scale_rule: expected one of floor, ceil, even, rceil; got 'nope'"):
        quantize_mx(torch.zeros(2, 32), "e2m1", scale_rule="nope")
    with pytest.raises(ValueError, match=r"^codes: expected a torch.uint8 tensor of packed e2m1 codes"):
        dequantize_mx(torch.zeros(2, 16), torch.zeros(2, 1, dtype=torch.uint8), "e2m1")
    q = SCHEMES["mxfp4"].quantize(torch.randn(4, 64))
    with pytest.raises(ValueError, match=r"^actual: its scales have shape \(4, 2\), not the 512 bytes of a swizzled "
                                         r"buffer .*\(layout='swizzled'\)"):
        assert_mx_close(q, q, "mxfp4", layout="swizzled")
    with pytest.raises(ValueError, match=r"^expected: its scales .*\(expected_layout='swizzled'\)"):
        assert_mx_close(q, q, "mxfp4", expected_layout="swizzled")
    n = SCHEMES["nvfp4"].quantize(torch.randn(4, 64))
    with pytest.raises(TypeError, match=r"^expected: its global_scale must be a float tensor or a number; got str"):
        assert_mx_close(n, (n[0], n[1], "x"), "nvfp4")


def _nvfp4_operands() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return quantize_nvfp4(torch.randn(2, 16, generator=torch.Generator().manual_seed(3)))


@pytest.mark.parametrize("g, got", [
    (math.nan, r"got nan$"), (-1, r"got -1.0$"), (0, r"got 0.0$"), (1e-50, r"got 1e-50 \(0.0 in float32\)$"),
    (True, r"\(a real number, or a one-value real tensor\); got True$"),
    ("1", r"\(a real number, or a one-value real tensor\); got '1'$"),
    (None, r"\(a real number, or a one-value real tensor\); got None$"),
    (torch.tensor([[1.0], [1000.0]]), r"got a tensor of shape \(2, 1\)$"),
    (torch.ones(3), r"got a tensor of shape \(3,\)$"),
    (torch.tensor(True), r"got a torch.bool tensor$"),
])
def test_dequantize_nvfp4_refuses_a_global_scale_that_quantize_refuses(g, got):
    """dequantize_nvfp4 took NaN, -1, 0 and True silently, broadcast a per-row tensor, and gave raw torch errors for
    shape (3,), '1' and None; now it shares quantize_nvfp4's check (which took True as 1.0 and raised torch's
    "new(): invalid data type 'str'")."""
    codes, scales, _ = _nvfp4_operands()
    message = r"^global_scale: expected a finite positive scalar.*" + got
    with pytest.raises(ValueError, match=message):
        dequantize_nvfp4(codes, scales, g)
    if g is not None:  # None is quantize_nvfp4's default: amax / (448 * 6)
        with pytest.raises(ValueError, match=message):
            quantize_nvfp4(torch.ones(2, 16), global_scale=g)


def test_nvfp4_takes_any_one_value_real_global_scale():
    """A kernel returns its global scale as a one-value tensor of shape (1,); ints and numpy floats are numbers."""
    codes, scales, g = _nvfp4_operands()
    want = dequantize_nvfp4(codes, scales, g)
    for same in (float(g), np.float32(g), g.reshape(1), g.reshape(1, 1, 1), g.double()):
        assert torch.equal(dequantize_nvfp4(codes, scales, same), want), same
    x = torch.randn(2, 16)
    for two in (2, np.float64(2.0), torch.tensor([2.0]), torch.tensor(2)):
        c, s, g2 = quantize_nvfp4(x, global_scale=two)
        assert g2.shape == () and g2.item() == 2.0 and torch.equal(c, quantize_nvfp4(x, global_scale=2.0)[0])


def test_flags_must_be_bools_and_axes_ints_not_bools():
    """pad='no' padded, pack='no' packed, and axis=True was axis 1: a swapped or mistyped argument passed unseen."""
    x33, x = torch.randn(2, 33), torch.randn(2, 32)
    c, s = quantize_mx(x, "e2m1")
    cn, sn, gn = quantize_nvfp4(x)
    flags = [
        ("pad", lambda v: quantize_mx(x33, "e2m1", pad=v)), ("pack", lambda v: quantize_mx(x, "e2m1", pack=v)),
        ("pack", lambda v: dequantize_mx(c, s, "e2m1", pack=v)), ("pad", lambda v: quantize_nvfp4(x33, pad=v)),
        ("pack", lambda v: quantize_nvfp4(x, pack=v)), ("pack", lambda v: dequantize_nvfp4(cn, sn, gn, pack=v)),
    ]
    for arg, call in flags:
        for v in ("no", 1, None):
            with pytest.raises(TypeError, match=rf"^{arg}: expected True or False; got {v!r}$"):
                call(v)
    for call, of in [(lambda: quantize_mx(x, "e2m1", axis=True), r"x of shape \(2, 32\)"),
                     (lambda: dequantize_mx(c, s, "e2m1", axis=True), r"codes of shape \(2, 16\)"),
                     (lambda: pack_fp4(unpack_fp4(c), axis=True), r"codes of shape \(2, 32\)"),
                     (lambda: quantize_nvfp4(x, axis=False), r"x of shape \(2, 32\)")]:
        with pytest.raises(ValueError, match=rf"^axis: expected an int in \[-2, 2\) for {of}; got (True|False)$"):
            call()
    # numpy integers are ints
    assert torch.equal(quantize_mx(x, "e2m1", axis=np.int64(1), block=np.int64(32))[0], c)


def test_dequantize_errors_name_scales_codes_and_refuse_meta():
    """A bad scales tensor was reported as "codes: ..." (decode's own name), meta e2m1 codes as "packed: ...", and
    meta MXFP8 codes gave torch's "Tensor on device cpu is not on the expected device meta!"."""
    x = torch.randn(2, 32)
    c, s = quantize_mx(x, "e2m1")
    c8, s8 = quantize_mx(x, torch.float8_e4m3fn)
    cn, sn, gn = quantize_nvfp4(x)
    meta = "is on the meta device: it has a shape and a dtype but no values"
    cases = [
        (lambda: dequantize_mx(c, s.float(), "e2m1"), r"scales: expected a torch.uint8 tensor of e8m0 codes; got "
                                                      r"torch.float32"),
        (lambda: dequantize_mx(c, None, "e2m1"), r"scales: expected a torch.uint8 tensor of e8m0 codes; got NoneType"),
        (lambda: dequantize_mx(c, s.to("meta"), "e2m1"), f"scales: {meta}"),
        (lambda: dequantize_mx(c, s[0], "e2m1"), r"scales: shape \(1,\) does not fit codes of \(2, 32\)"),
        (lambda: dequantize_mx(c.to("meta"), s, "e2m1"), f"codes: {meta}"),
        (lambda: dequantize_mx(unpack_fp4(c).to("meta"), s, "e2m1", pack=False), f"codes: {meta}"),
        (lambda: dequantize_mx(c8.to("meta"), s8, torch.float8_e4m3fn), f"codes: {meta}"),
        (lambda: dequantize_nvfp4(cn, sn.float(), gn), r"scales: expected a torch.uint8 tensor of ue4m3 codes"),
        (lambda: dequantize_nvfp4(cn, sn.to("meta"), gn), f"scales: {meta}"),
        (lambda: dequantize_nvfp4(cn.to("meta"), sn, gn), f"codes: {meta}"),
        (lambda: dequantize_nvfp4(cn, sn, gn.to("meta")), f"global_scale: {meta}"),
        (lambda: quantize_nvfp4(x, global_scale=gn.to("meta")), f"global_scale: {meta}"),
        (lambda: quantize_mx(x.to("meta"), "e2m1"), f"x: {meta}"),
        (lambda: quantize_nvfp4(x.to("meta")), f"x: {meta}"),
    ]
    for call, message in cases:
        with pytest.raises(ValueError, match="^" + message):
            call()


def test_scheme_dequantize_checks_its_tuple():
    """A short tuple raised IndexError and None "'NoneType' object is not subscriptable"."""
    from harness.mx import SCHEMES

    x = torch.randn(2, 32)
    mx4, nv4 = SCHEMES["mxfp4"], SCHEMES["nvfp4"]
    q, n = mx4.quantize(x), nv4.quantize(x)
    assert torch.equal(mx4.dequantize(list(q)), dequantize_mx(*q, "e2m1"))
    short_long = [(mx4, q[:1], "a tuple of 1"), (nv4, n[:2], "a tuple of 2"), (mx4, (*q, q[0]), "a tuple of 3")]
    for sch, bad, got in short_long:
        what = r"\(codes, scales, global_scale\)" if sch is nv4 else r"\(codes, scales\)"
        with pytest.raises(ValueError, match=rf"^q: {sch} is dequantized from a tuple {what}, as quantize returns it; "
                                             rf"got {got}$"):
            sch.dequantize(bad)
    with pytest.raises(TypeError, match=r"^q: nvfp4 is dequantized from a tuple .*; got NoneType$"):
        nv4.dequantize(None)
    with pytest.raises(TypeError, match=r"^pad: expected True or False; got 'no'$"):
        mx4.quantize(x, pad="no")
