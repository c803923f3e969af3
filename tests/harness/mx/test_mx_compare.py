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
    assert "Global scale: actual 0.25, expected 0.5 (must be equal)" in lines
    xn = x.clone()
    xn[1, 3] = math.nan
    m = SCHEMES["mxfp4"]
    assert_mx_close(m.quantize(xn), m.quantize(xn), "mxfp4")  # NaN facing NaN passes
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
    ]:
        with pytest.raises(err, match=text):
            call()


def test_fp8_diagnosis_names_ml_dtypes_against_satfinite():
    x = torch.randn(512, generator=torch.Generator().manual_seed(1)) * 300
    want = fp8.encode(x, "e4nv", arch="sm90")
    got = torch.from_numpy(x.numpy().astype(ml_dtypes.float8_e4m3fn).view(np.uint8).copy())
    line = diagnose_fp8(x, got, want, "e4nv")
    assert line.startswith("actual matches ml_dtypes (RNE, not saturating); expected matches harness.fp8.encode "
                           "arch=sm90 (RNE satfinite)")
    from harness import assert_fp8_close

    with pytest.raises(AssertionError) as e:
        assert_fp8_close(got, want, "e4nv", msg=fp8_policy_msg(x, got, want, "e4nv"))
    assert str(e.value).splitlines()[-1].startswith("Diagnosis: actual matches ml_dtypes (RNE, not saturating)")
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
