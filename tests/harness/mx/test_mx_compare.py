"""assert_mx_close: scales, elements and the global error judged apart; one report with pinned lines; the
diagnosis line names the convention each side follows (scale rule, rounding, saturation; FP8 casts too)."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
import torch

from harness import fp8
from harness.mx import SCHEMES, assert_mx_close, encode
from harness.mx.diagnose import diagnose_fp8, fp8_policy_msg
from harness.tolerances import Tolerance

pytestmark = [pytest.mark.lane_independent, pytest.mark.unreported]


def _x(rows: int = 4, k: int = 64, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(rows, k, generator=g) * torch.logspace(-3, 3, rows).unsqueeze(1)


def _fail(*args, **kwargs) -> list[str]:
    with pytest.raises(AssertionError) as e:
        assert_mx_close(*args, **kwargs)
    return str(e.value).splitlines()


@pytest.mark.parametrize("scheme", list(SCHEMES))
def test_identical_quantizations_pass_for_every_scheme(scheme):
    x = _x()
    q = SCHEMES[scheme].quantize(x)
    assert_mx_close(q, q, scheme, source=x, max_rel_l2=0.0)


def test_a_wrong_scale_rule_fails_on_the_scales_and_the_diagnosis_names_both_rules():
    x = _x()
    s = SCHEMES["mxfp4"]
    lines = _fail(s.quantize(x, scale_rule="rceil"), s.quantize(x), "mxfp4", source=x)
    assert lines[0].startswith("Block-scaled tensors are not close! (format=mxfp4, arch=")
    assert lines[1] == "Block scales: 3 / 8 (37.5%) beyond 0 code(s); greatest distance 1 at block (0, 1)"
    assert lines[2] == ("Mismatched elements: 0 / 160 (0.0%), of 256 (96 in blocks with other scales, judged by the "
                        "global error only)")
    assert "Diagnosis: block scales: actual matches e8m0 rule 'rceil'; expected matches e8m0 rule 'floor'" in lines
    assert lines[-2].startswith("Rule: block scales within 0 code(s); element codes within 0 ULP")
    assert lines[-1] == "Tolerance: Tolerance(max_ulp=0) [explicit arguments]"
    assert_mx_close(s.quantize(x, scale_rule="rceil"), s.quantize(x), "mxfp4", scale_ulp=1)  # within one code


def test_element_codes_within_max_ulp_pass_and_beyond_fail_with_the_worst_element():
    x = _x()
    c, sc = SCHEMES["mxfp4"].quantize(x)
    off = c.clone()
    off[2, 5] = (off[2, 5] & 0xF0) | ((off[2, 5] & 0x7) ^ 0x1) | (off[2, 5] & 0x8)  # element (2, 10): 1 step
    assert_mx_close((off, sc), (c, sc), "mxfp4", max_ulp=1)
    lines = _fail((off, sc), (c, sc), "mxfp4")
    assert lines[2] == ("Mismatched elements: 1 / 256 (0.4%), of 256 (0 in blocks with other scales, judged by the "
                        "global error only)")
    assert lines[3] == "Greatest ULP distance: 1 at index (2, 10) (up to 0 allowed)"
    assert "Worst elements (1):" in lines


def test_the_global_floor_fails_what_every_per_element_rule_lets_through():
    x = _x()
    c, sc = SCHEMES["mxfp4"].quantize(x)
    up = torch.where((c & 0x7) < 0x7, c + 1, c) & 0xF | (torch.where((c >> 4 & 0x7) < 0x7, (c >> 4) + 1, c >> 4) << 4)
    up = up.to(torch.uint8)
    assert_mx_close((up, sc), (c, sc), "mxfp4", max_ulp=1)
    lines = _fail((up, sc), (c, sc), "mxfp4", max_ulp=1, source=x, min_sqnr_db=15.0)
    glob = next(ln for ln in lines if ln.startswith("Global error:"))
    assert "at least 15.00 dB required" in glob and "expected's: " in glob


def test_nvfp4_reciprocal_elements_are_diagnosed_as_such():
    x = _x(8, 64, seed=3)
    c, s, g = SCHEMES["nvfp4"].quantize(x, global_scale=0.37)
    from harness.mx import decode, pack_fp4

    sv = decode(s, "ue4m3") * g
    recip = encode((x.float() * (1.0 / sv).repeat_interleave(16, -1)).double(), "e2m1")
    got = (pack_fp4(recip), s, g)
    if torch.equal(got[0], c):
        pytest.skip("no x / scale on a rounding boundary in this draw")
    lines = _fail(got, (c, s, g), "nvfp4", source=x)
    diag = [ln for ln in lines if ln.startswith("Diagnosis: elements")]
    assert diag and "actual matches RNE satfinite of x * fp32(1 / scale)" in diag[0]
    assert "expected matches harness.mx.encode RNE satfinite" in diag[0]


def test_swizzled_actual_scales_are_read_as_such_and_a_layout_mixup_fails():
    from harness.mx import swizzle_scales

    x = _x(4, 128)
    c, sc = SCHEMES["mxfp4"].quantize(x)
    assert_mx_close((c, swizzle_scales(sc)), (c, sc), "mxfp4", layout="swizzled")
    with pytest.raises(AssertionError, match=r"actual scales: actual has shape \(512,\), expected has shape \(4, 4\)"):
        assert_mx_close((c, swizzle_scales(sc)), (c, sc), "mxfp4")


def test_global_scale_and_nan_blocks():
    x = _x(2, 32)
    q = SCHEMES["nvfp4"].quantize(x, global_scale=0.5)
    lines = _fail((q[0], q[1], torch.tensor(0.25)), q, "nvfp4")
    assert ("Global scale: actual 0.25, expected 0.5 (must be equal, finite and > 0; NaN facing NaN only with "
            "nan_equal=True)") in lines
    xn = x.clone()
    xn[1, 3] = math.nan
    m = SCHEMES["mxfp4"]
    assert_mx_close(m.quantize(xn), m.quantize(xn), "mxfp4", nan_equal=True)  # NaN facing NaN, as asked
    assert "NaN block scales: 1 not accepted (pass nan_equal=True to accept NaN facing NaN)" in _fail(
        m.quantize(xn), m.quantize(xn), "mxfp4")
    lines = _fail(m.quantize(xn), m.quantize(x), "mxfp4", scale_ulp=300)
    assert "NaN after dequantization: 32 in actual, 0 in expected" in lines


def test_tolerance_rows_apply_and_bad_arguments_name_themselves():
    x = _x()
    q = SCHEMES["mxfp4"].quantize(x)
    assert_mx_close(q, q, "mxfp4", tol=Tolerance(max_ulp=1, key="mx/bf16-mxfp4/*"))
    for call, err, text in [
        (lambda: assert_mx_close(q, q, "mxfp3"), ValueError, r"scheme: expected one of mxfp4, nvfp4"),
        (lambda: assert_mx_close(q[0], q, "mxfp4"), TypeError, r"actual: mxfp4 is compared as a tuple \(codes, sc"),
        (lambda: assert_mx_close(q, q, "nvfp4"), TypeError, r"actual: nvfp4 is compared as a tuple \(codes, scales, "),
        (lambda: assert_mx_close(q, q, "mxfp4", tol=Tolerance(rtol=1e-3)), ValueError, r"is a float rule"),
        (lambda: assert_mx_close(q, q, "mxfp4", tol=Tolerance(max_ulp=0), max_ulp=1), ValueError, r"not both"),
        (lambda: assert_mx_close(q, q, "mxfp4", scale_ulp=-1), ValueError, r"scale_ulp: expected an int >= 0"),
        (lambda: assert_mx_close(q, q, "mxfp4", layout="tiled"), ValueError, r"layout: expected one of linear"),
        (lambda: assert_mx_close(q, q, "mxfp4", source=x[:, :8]), ValueError, r"source: shape \(4, 8\)"),
        (lambda: assert_mx_close(q, q, "mxfp4", min_sqnr_db=10.0), ValueError, r"min_sqnr_db: .* pass it"),
        (lambda: assert_mx_close(q, q, "mxfp4", msg=123), TypeError, r"msg must be a str, a callable taking the"),
        (lambda: assert_mx_close(q, q, "mxfp4", source=x, min_sqnr_db=True), ValueError,
         r"min_sqnr_db: expected a finite number; got True"),
    ]:
        with pytest.raises(err, match=text):
            call()


def test_a_source_holding_nan_or_inf_is_no_free_pass_for_the_sqnr_floor():
    """The SQNR floor measures noise against ``source``: a finite dequantized value where the source held NaN or
    inf hid it, so the floor fails (before, such elements were dropped and an all-NaN source scored +inf dB)."""
    m = SCHEMES["mxfp4"]
    zeros = m.quantize(torch.zeros(2, 32))
    lines = _fail(zeros, zeros, "mxfp4", source=torch.full((2, 32), math.nan), min_sqnr_db=10.0)
    assert "Global error: rel-L2 0.000e+00; SQNR vs source -inf dB (expected's: -inf dB; at least 10.00 dB required)" \
        in lines
    x = _x(2, 32)
    q = m.quantize(x)
    xi = x.clone()
    xi[0, 5] = math.inf
    _fail(q, q, "mxfp4", source=xi, min_sqnr_db=0.0)
    assert_mx_close(q, q, "mxfp4", source=x, min_sqnr_db=0.0)  # the finite source still passes
    # where the quantization kept the NaN (the block's scale NaN), the NaN rule judges it, and nan_equal asks
    xn = x.clone()
    xn[1, 3] = math.nan
    assert_mx_close(m.quantize(xn), m.quantize(xn), "mxfp4", source=xn, min_sqnr_db=0.0, nan_equal=True)


@pytest.mark.parametrize("g", [0.0, -0.0, -1.0])
def test_a_global_scale_that_is_not_positive_never_passes(g):
    """An NVFP4 global scale is a positive fp32 (quantize refuses any other): equal on both sides, 0 or a negative
    one is still no NVFP4 tensor."""
    c, s, _ = SCHEMES["nvfp4"].quantize(_x(2, 32))
    lines = _fail((c, s, g), (c, s, g), "nvfp4")
    assert f"Global scale: actual {g!r}, expected {g!r} (must be equal, finite and > 0; NaN facing NaN only " \
           f"with nan_equal=True)" in lines


def test_unreadable_or_out_of_range_parts_name_their_side():
    x = _x(2, 32)
    q = SCHEMES["mxfp4"].quantize(x)
    n = SCHEMES["nvfp4"].quantize(x)
    q6 = SCHEMES["mxfp6e2m3"].quantize(x)
    meta = torch.empty(q[0].shape, dtype=torch.uint8, device="meta")
    sparse = q[0].to_sparse()
    for call, text in [
        (lambda: assert_mx_close((meta, q[1]), q, "mxfp4"), r"actual: its codes is on the meta device"),
        (lambda: assert_mx_close(q, (q[0], q[1].to("meta")), "mxfp4"), r"expected: its scales is on the meta device"),
        (lambda: assert_mx_close((n[0], n[1], torch.tensor(1.0, device="meta")), n, "nvfp4"),
         r"actual: its global_scale is on the meta device"),
        (lambda: assert_mx_close(q, q, "mxfp4", source=x.to("meta")), r"source is on the meta device"),
        (lambda: assert_mx_close((sparse, q[1]), q, "mxfp4"), r"actual: its codes has layout torch.sparse_coo"),
        (lambda: assert_mx_close((q[0][0, 0], q[1][0, 0]), q, "mxfp4"),
         r"actual: its codes must have at least one dimension"),
        (lambda: assert_mx_close(q6, (q6[0] | 0x80, q6[1]), "mxfp6e2m3"),
         r"expected: its codes: e2m3 codes are 6-bit \(< 0x40\); got 0x"),
        (lambda: assert_mx_close((n[0], n[1] | 0x80, n[2]), n, "nvfp4"),
         r"actual: its scales: ue4m3 codes are 7-bit \(< 0x80\); got 0x"),
    ]:
        with pytest.raises(ValueError, match=text):
            call()


def _sides(line: str) -> tuple[set[str], set[str]]:
    """The conventions a diagnosis line names for actual and for expected."""
    a, _, e = line.partition("; expected matches ")
    return set(a.removeprefix("actual matches ").split(" = ")), set(e.split(" = "))


def test_fp8_diagnosis_names_ml_dtypes_against_satfinite():
    x = torch.randn(512, generator=torch.Generator().manual_seed(1)) * 300
    want = fp8.encode(x, "e4nv", arch="sm90")
    got = torch.from_numpy(x.numpy().astype(ml_dtypes.float8_e4m3fn).view(np.uint8).copy())
    line = diagnose_fp8(x, got, want, "e4nv")
    # torch's own cast is one more convention; which side it joins depends on the torch (2.13 saturates like the
    # hardware, 2.11 does not, like ml_dtypes), so the labels are read as sets, each side's joined by " = "
    actual, expected = _sides(line)
    assert "ml_dtypes (RNE, not saturating)" in actual and "harness.fp8.encode arch=sm90 (RNE satfinite)" in expected
    assert not any("satfinite" in c for c in actual) and "ml_dtypes (RNE, not saturating)" not in expected
    from harness import assert_fp8_close

    with pytest.raises(AssertionError) as e:
        assert_fp8_close(got, want, "e4nv", msg=fp8_policy_msg(x, got, want, "e4nv"))
    last = str(e.value).splitlines()[-1]
    assert last.startswith("Diagnosis: ") and _sides(last.removeprefix("Diagnosis: ")) == (actual, expected)
    assert diagnose_fp8(x, got ^ 0x01, want, "e4nv").startswith("actual matches no known convention (closest: ")


def test_the_ulp_histogram_puts_every_compared_element_in_one_bin():
    """mxfp4 ones (code 2) against 1.5, 2, 3, 6 and -1 (1, 2, 3, 5 and 4 steps away), and mxfp8e4m3 ones against
    9/8 and NaN: the bins add up to the compared elements, a NaN in far/NaN; rel-L2 = sqrt(34.25 / 128) for the
    first (squared differences 0.25 + 1 + 4 + 25 + 4 over 128 ones), sqrt(1/64 / 127) over the finite ones of the
    second."""
    sc = torch.full((2, 2), 127, dtype=torch.uint8)
    c4 = torch.full((2, 32), 0x22, dtype=torch.uint8)
    a4 = c4.clone()
    a4[0, :5] = torch.tensor([0x23, 0x24, 0x25, 0x27, 0x2A], dtype=torch.uint8)  # low nibbles 3, 4, 5, 7, -2
    lines = _fail((a4, sc), (c4, sc), "mxfp4")
    assert "ULP histogram: 0: 123 | 1: 1 | 2: 1 | 3+: 3 | far/NaN: 0" in lines
    assert f"Global error: rel-L2 {math.sqrt(34.25 / 128):.3e}" in lines
    s4 = sc.clone()
    s4[0, 0] = 129  # the first block's scale 4: its differences and its 32 ones weigh 16 times as much
    lines = _fail((a4, s4), (c4, s4), "mxfp4")
    assert f"Global error: rel-L2 {math.sqrt(34.25 * 16 / (32 * 16 + 96)):.3e}" in lines
    c8 = torch.full((2, 64), 0x38, dtype=torch.uint8)
    a8 = c8.clone()
    a8[0, 0], a8[1, 3] = 0x39, 0x7F
    lines = _fail((a8, sc), (c8, sc), "mxfp8e4m3")
    assert "ULP histogram: 0: 126 | 1: 1 | 2: 0 | 3+: 0 | far/NaN: 1" in lines
    assert f"Global error: rel-L2 {math.sqrt(1 / 64 / 127):.3e}" in lines
    with pytest.raises(TypeError, match=r"actual: its codes must be a torch.uint8 tensor of codes; got list"):
        assert_mx_close(([1], sc), (c4, sc), "mxfp4")


def _nan_cases():
    """(label, scheme, actual, expected) where NaN or inf sits on both sides, the same codes on each."""
    x = _x(2, 64)
    out = []
    for name in ("mxfp4", "mxfp8e4m3", "mxfp6e3m2"):
        c, s = SCHEMES[name].quantize(x)
        s = s.clone()
        s[0, 0] = 0xFF  # the e8m0 NaN scale
        out.append((f"{name} NaN scale", name, (c, s), (c, s)))
    for name, code in (("mxfp8e4m3", 0x7F), ("mxfp8e5m2", 0x7E)):
        c, s = SCHEMES[name].quantize(x)
        c = c.clone()
        c[1, 5] = code  # a NaN element code
        out.append((f"{name} NaN element", name, (c, s), (c, s)))
    c, s, _ = SCHEMES["nvfp4"].quantize(x)
    for g in (math.nan, math.inf):
        out.append((f"nvfp4 global {g}", "nvfp4", (c, s, torch.tensor(g)), (c, s, torch.tensor(g))))
    s = s.clone()
    s[1, 1] = 0x7F  # the ue4m3 NaN scale
    out.append(("nvfp4 NaN scale", "nvfp4", (c, s, torch.tensor(1.0)), (c, s, torch.tensor(1.0))))
    return out


@pytest.mark.parametrize("label, scheme, a, e", _nan_cases(), ids=[c[0] for c in _nan_cases()])
def test_nan_on_both_sides_fails_unless_nan_equal(label, scheme, a, e):
    """NaN passes no block-scaled comparison that did not ask for it, whatever the tolerance; with nan_equal=True
    NaN facing NaN passes and inf never does."""
    with pytest.raises(AssertionError):
        assert_mx_close(a, e, scheme, max_ulp=7, max_mismatch=0.5, scale_ulp=300)
    if "inf" in label:
        with pytest.raises(AssertionError, match=r"Global scale: actual inf, expected inf"):
            assert_mx_close(a, e, scheme, nan_equal=True)
    else:
        assert_mx_close(a, e, scheme, nan_equal=True)


def test_nan_equal_accepts_any_nan_code_facing_any_nan_code_never_a_number():
    """Two NaN codes of one format are both NaN (torch's equal_nan): e4m3 0x7f faces 0xff; never a number."""
    c, s = SCHEMES["mxfp8e4m3"].quantize(_x(2, 64))
    a, e = c.clone(), c.clone()
    a[0, 0], e[0, 0] = 0x7F, 0xFF
    assert_mx_close((a, s), (e, s), "mxfp8e4m3", nan_equal=True)
    e[0, 0] = 0x7E
    lines = _fail((a, s), (e, s), "mxfp8e4m3", nan_equal=True, max_ulp=255, max_mismatch=0.5)
    assert "NaN/inf element codes: 1 not accepted (inf never; NaN only facing NaN with nan_equal=True)" in lines
    with pytest.raises(TypeError, match="nan_equal must be True or False"):
        assert_mx_close((a, s), (a, s), "mxfp8e4m3", nan_equal="yes")


@pytest.mark.parametrize("where", ["element", "scale"])
def test_one_sided_nan_fails_inside_any_mismatch_budget(where):
    """max_mismatch and max_ulp are for rounding outliers: a NaN facing a number fails however many mismatches
    the budget allows (one NaN element code of 128, max_mismatch=0.5; one NaN block scale of 4)."""
    c, s = SCHEMES["mxfp8e4m3"].quantize(_x(2, 64))
    a_c, a_s = c.clone(), s.clone()
    if where == "element":
        a_c[1, 5] = 0x7F  # e4m3's NaN code, facing a number
    else:
        a_s[0, 1] = 0xFF  # e8m0's NaN code
    lines = _fail((a_c, a_s), (c, s), "mxfp8e4m3", max_ulp=255, max_mismatch=0.5, scale_ulp=0 if where == "element"
                  else 300)
    assert any("NaN" in line for line in lines)


def test_allowed_mismatches_count_only_the_compared_elements():
    """Element codes are compared only in blocks whose scales are equal; the budget is a fraction of those.
    Two blocks of 32, the second at another scale (scale_ulp=1): 32 compared elements, so max_mismatch=1/32 allows
    one mismatch, not the two that a count over all 64 elements would allow."""
    c, s = SCHEMES["mxfp8e4m3"].quantize(torch.linspace(1.0, 2.0, 64).reshape(1, 64))
    a_c, a_s = c.clone(), s.clone()
    a_s[0, 1] += 1
    a_c[0, 3] += 2
    assert_mx_close((a_c, a_s), (c, s), "mxfp8e4m3", max_ulp=1, max_mismatch=1 / 32, scale_ulp=1)
    a_c[0, 7] += 2
    lines = _fail((a_c, a_s), (c, s), "mxfp8e4m3", max_ulp=1, max_mismatch=1 / 32, scale_ulp=1)
    assert "Mismatched elements: 2 / 32 (6.2%), up to 1 allowed" in lines[2], lines


def test_fp8_diagnosis_names_rz_truncation():
    """Codes truncated toward zero (saturating at 448) are named as RZ. The inputs sit three quarters of the way
    between neighbouring e4m3 values, where every round-to-nearest convention goes up and RZ goes down; the RZ codes
    are computed here from the value table, not by the diagnosis's own helper."""
    mags = fp8.decode(torch.arange(0x7F, dtype=torch.uint8), "e4nv").double()  # finite magnitudes, ascending
    between = mags[:-1] + 0.75 * (mags[1:] - mags[:-1])
    x = torch.cat([between, -between, torch.tensor([1000.0, -1000.0], dtype=torch.float64)]).float()
    mag = (torch.searchsorted(mags, x.double().abs(), right=True) - 1).clamp(max=0x7E)
    rz = (mag | torch.where(x < 0, 0x80, 0)).to(torch.uint8)
    want = fp8.encode(x, "e4nv", arch="sm90")
    assert not torch.equal(rz, want)
    line = diagnose_fp8(x, rz, want, "e4nv")
    assert line.startswith("actual matches RZ (truncation, saturating); expected matches harness.fp8.encode"), line


def test_the_diagnosis_names_triton_kernels_amax_over_max_floor_scale_rule():
    """Older triton_kernels MX downcasts (DequantScaleRoundingMode.ROUND_DOWN) take the e8m0 scale as the
    exponent field of fp32(amax / 6) for e2m1: 2^floor(log2(amax / 6)), not OCP's 2^(floor(log2 amax) - 2). A
    kernel doing so was reported as matching "no known convention"."""
    from harness.mx.diagnose import describe, scale_conventions
    from harness.mx.formats import e8m0_scale

    amax = torch.tensor([5.0, 0.3, 7.5, 100.0, 3.9, 6.0, 1e-3, 48.0])
    # triton_kernels: dequant_scale = max_val / 6.0; exponent = bits(dequant_scale) & 0x7F800000
    kernel = ((amax / 6.0).view(torch.int32) >> 23 & 0xFF).to(torch.uint8)
    assert kernel[0].item() == 126  # amax 5: 2^-1, where OCP's floor rule gives 2^0 (code 127)
    ocp = e8m0_scale(amax, "e2m1", "floor")
    assert not torch.equal(kernel, ocp)
    line = describe(kernel, ocp, scale_conventions(amax, SCHEMES["mxfp4"]), "block scales")
    assert line == ("block scales: actual matches e8m0 of amax / 6 with its exponent floored (older triton_kernels' "
                    "ROUND_DOWN); expected matches e8m0 rule 'floor'")
