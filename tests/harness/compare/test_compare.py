"""``harness.compare``: pass/fail boundaries and the failure message (``harness.compare.message``), line by line.

The tolerances below are not measurements: they are inputs to the comparator under test, chosen so that
the boundary values are exact in binary (0.25 + 0.25 * 1.0 == 0.5), hence built here and not looked up.
Message tests pin one regex per line, like pytest's approx tests (``assert_approx_raises_regex``).
"""

from __future__ import annotations

import math
import re

import pytest
import torch

from harness import compare as public
from harness import fp8, summary
from harness.compare import checks as compare
from harness.compare import message as report
from harness.tolerances import Tolerance

# Comparator inputs (see module docstring): exact binary fractions so "at the boundary" is exact.
QUARTER = Tolerance(rtol=0.25, atol=0.25, key="test/quarter")
EXACT_FLOAT = Tolerance(rtol=0.0, atol=0.0, key="test/exact")
TENTH_MAY_FAIL = Tolerance(rtol=0.0, atol=0.0, max_mismatch=0.1, key="test/tenth")
E4NV_MIN_SUB = 2.0**-9  # smallest e4nv subnormal

# Most checks here fail on purpose: keep them out of the session's error-vs-tolerance report.
pytestmark = pytest.mark.unreported


def _codes(*values: int) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.uint8)


def _raises_lines(fn, *patterns: str) -> str:
    """Run ``fn``; it must raise AssertionError whose lines match ``patterns`` in order (one regex per line,
    each matched with re.fullmatch; ``...`` as a pattern skips any number of lines)."""
    with pytest.raises(AssertionError) as info:
        fn()
    text = str(info.value)
    lines = text.splitlines()
    i, skipping = 0, False
    for p in patterns:
        if p == "...":
            skipping = True
            continue
        while skipping and i < len(lines) and not re.fullmatch(p, lines[i]):
            i += 1
        if i == len(lines) or not re.fullmatch(p, lines[i]):
            got = lines[i] if i < len(lines) else "<end of message>"
            raise AssertionError(f"line {i}: {got!r} does not match {p!r}\n--- message ---\n{text}")
        i, skipping = i + 1, False
    return text


# ------------------------------------------------------------------------------------------ float rule


def test_float_boundary_is_inclusive():
    e = torch.tensor([1.0, -1.0], dtype=torch.float64)
    public.assert_close_tol(
        e + torch.tensor([0.5, -0.5], dtype=torch.float64), e, QUARTER
    )  # exactly allowed
    above = torch.nextafter(torch.tensor(1.5, dtype=torch.float64), torch.tensor(2.0, dtype=torch.float64))
    with pytest.raises(AssertionError, match=r"Mismatched elements: 1 / 2 \(50\.0%\)"):
        public.assert_close_tol(torch.stack([above, torch.tensor(-1.5, dtype=torch.float64)]), e, QUARTER)


def test_float_nan_fails_unless_equal_nan():
    nan = torch.tensor([math.nan, 1.0])
    with pytest.raises(AssertionError, match="NaN: 1 in actual, 1 in expected"):
        public.assert_close_tol(nan, nan, QUARTER)
    public.assert_close_tol(nan, nan, QUARTER, equal_nan=True)
    with pytest.raises(AssertionError, match="Mismatched elements: 1 / 2"):
        public.assert_close_tol(nan, torch.tensor([1.0, 1.0]), QUARTER, equal_nan=True)  # NaN vs a number


def test_float_inf_must_match_exactly():
    inf = torch.tensor([math.inf, -math.inf])
    public.assert_close_tol(inf, inf, EXACT_FLOAT)
    with pytest.raises(AssertionError, match="Mismatched elements: 2 / 2"):
        public.assert_close_tol(inf, inf.flip(0), Tolerance(atol=1e30))
    with pytest.raises(AssertionError, match="Mismatched elements: 1 / 1"):
        public.assert_close_tol(torch.tensor([math.inf]), torch.tensor([3e38]), Tolerance(atol=1e30))


def test_float_signed_zeros_are_equal():
    public.assert_close_tol(torch.tensor([0.0, -0.0]), torch.tensor([-0.0, 0.0]), EXACT_FLOAT)


def test_float_max_mismatch_is_a_fraction():
    e = torch.zeros(10)
    one_off = e.clone()
    one_off[3] = 1.0
    public.assert_close_tol(one_off, e, TENTH_MAY_FAIL)  # floor(0.1 * 10) = 1 allowed
    one_off[7] = 1.0
    with pytest.raises(AssertionError, match=r"Mismatched elements: 2 / 10 \(20\.0%\), up to 1 allowed"):
        public.assert_close_tol(one_off, e, TENTH_MAY_FAIL)


def test_float_shape_mismatch_is_an_error():
    _raises_lines(
        lambda: public.assert_close_tol(torch.zeros(2, 3), torch.zeros(3, 2), QUARTER),
        r"Tensor-likes cannot be compared! \(dtype=fp32, arch=\w+\)",
        r"actual has shape \(2, 3\), expected has shape \(3, 2\); tensor checks never broadcast\.",
        r"Tolerance: Tolerance\(rtol=2\.5e-01, atol=2\.5e-01\) \[test/quarter\]",
    )


def test_float_bad_inputs_raise_type_errors():
    with pytest.raises(TypeError, match="actual must be a torch.Tensor"):
        public.assert_close_tol([1.0], torch.zeros(1), QUARTER)
    with pytest.raises(TypeError, match="expected must be a floating-point tensor"):
        public.assert_close_tol(torch.zeros(1), torch.zeros(1, dtype=torch.int32), QUARTER)
    with pytest.raises(TypeError, match="assert_fp8_close"):
        public.assert_close_tol(torch.zeros(1).to(torch.float8_e4m3fn), torch.zeros(1), QUARTER)
    with pytest.raises(TypeError, match="tol must be a harness.tolerances.Tolerance"):
        public.assert_close_tol(torch.zeros(1), torch.zeros(1), 1e-3)


def test_float_message_lines():
    e = torch.tensor([[1.0, 2.0], [4.0, 8.0]])
    a = torch.tensor([[1.0, 2.0], [4.0, 11.0]], dtype=torch.float16)
    _raises_lines(
        lambda: public.assert_close_tol(a, e, QUARTER, op="demo.add"),
        r"Tensor-likes are not close! \(op=demo\.add, dtype=fp32, arch=\w+\)",
        r"Mismatched elements: 1 / 4 \(25\.0%\)",
        r"Greatest absolute difference: 3\.000e\+00 at index \(1, 1\) \(up to 2\.250e\+00 allowed\)",
        r"Greatest relative difference: 3\.750e-01 at index \(1, 1\) \(up to 2\.500e-01 allowed\)",
        r"Worst elements \(1\):",
        r"\s+index\s+actual\s+expected\s+abs diff\s+allowed",
        r"\s+\(1, 1\)\s+11\s+8\s+3\s+2\.25",
        r"Note: dtypes differ \(actual torch\.float16, expected torch\.float32\); compared in float64",
        r"Rule: \|actual - expected\| <= atol \+ rtol \* \|expected\| \(atol=2\.5e-01, rtol=2\.5e-01\); "
        r"NaN never passes; inf must match exactly",
        r"Tolerance: Tolerance\(rtol=2\.5e-01, atol=2\.5e-01\) \[test/quarter\]",
    )


def test_message_table_is_capped():
    e = torch.zeros(50)
    text = _raises_lines(
        lambda: public.assert_close_tol(e + 1, e, EXACT_FLOAT),
        "...",
        rf"Worst elements \({report.MAX_ROWS} of 50 shown\):",
    )
    assert len([ln for ln in text.splitlines() if re.match(r"\s+\(\d+,\)", ln)]) == report.MAX_ROWS


def test_msg_str_is_first_line_and_callable_rewrites():
    e = torch.zeros(2)
    _raises_lines(
        lambda: public.assert_close_tol(e + 1, e, EXACT_FLOAT, msg="layer 3 output"),
        r"layer 3 output",
        r"Tensor-likes are not close! .*",
    )
    with pytest.raises(AssertionError, match=r"^wrapped: Tensor-likes are not close!"):
        public.assert_close_tol(e + 1, e, EXACT_FLOAT, msg=lambda text: "wrapped: " + text)


def test_check_close_returns_data_not_exceptions():
    assert compare.check_close(torch.ones(3), torch.ones(3), EXACT_FLOAT) is None
    m = compare.check_close(torch.ones(3) * 2, torch.ones(3), EXACT_FLOAT, op="x")
    assert isinstance(m, report.Mismatch) and (m.k, m.n, m.kind) == (3, 3, "float")
    assert m.message() == report.format_mismatch(m)


# ---------------------------------------------------------------------------------- fp8: one ULP + floor


def test_one_ulp_boundary():
    base = _codes(0x38, 0x40, 0xB8)  # 1.0, 2.0, -1.0 in e4nv
    public.assert_fp8_within_one_ulp(base + 1, base, "e4nv")
    with pytest.raises(AssertionError, match=r"Greatest ULP distance: 2 at index \(1,\) \(up to 1 allowed\)"):
        public.assert_fp8_within_one_ulp(base + _codes(1, 2, 0), base, "e4nv")


def test_floor_rescues_a_small_value_difference():
    # 2 codes apart near zero (2^-9 vs 3 * 2^-9): |diff| = 2^-8 is within a floor of 2^-8, same sign
    got, want = _codes(0x01), _codes(0x03)
    with pytest.raises(AssertionError):
        public.assert_fp8_within_one_ulp(got, want, "e4nv")
    public.assert_fp8_within_one_ulp(got, want, "e4nv", floor=2 * E4NV_MIN_SUB)
    with pytest.raises(AssertionError):
        public.assert_fp8_within_one_ulp(
            got, want, "e4nv", floor=2 * E4NV_MIN_SUB * 0.99
        )  # boundary inclusive
    # the floor also comes from the tolerance row when not passed
    public.assert_fp8_within_one_ulp(got, want, "e4nv", tol=Tolerance(max_ulp=1, ulp_floor=2 * E4NV_MIN_SUB))
    with pytest.raises(AssertionError):  # the argument wins over the row
        public.assert_fp8_within_one_ulp(got, want, "e4nv", floor=0.0, tol=Tolerance(max_ulp=1, ulp_floor=1.0))


def test_floor_does_not_rescue_a_sign_flip():
    # +2^-9 vs -2^-9: |diff| = 2^-8 <= floor, 2 codes apart across zero, but the signs disagree
    got, want = _codes(0x01), _codes(0x81)
    _raises_lines(
        lambda: public.assert_fp8_within_one_ulp(got, want, "e4nv", floor=2 * E4NV_MIN_SUB),
        r"FP8 codes are not close! \(dtype=e4nv, format=e4nv, arch=\w+\)",
        r"Mismatched elements: 1 / 1 \(100\.0%\)",
        "...",
        r"\s+\(0,\)\s+0x01\s+0x81\s+0\.00195312\s+-0\.00195312\s+0\.00390625\s+2",
        r"Rule: code distance <= 1 ULP, or \|decoded difference\| <= 3\.906e-03 with the same sign "
        r"\(a zero has either sign\); NaN/inf codes never pass",
        ".*",
    )


def test_signed_zero_counts_as_either_sign():
    # -0 vs the 2nd subnormal: 2 codes apart, within the floor; the zero must not count as a sign flip
    public.assert_fp8_within_one_ulp(_codes(0x80, 0x00), _codes(0x02, 0x82), "e4nv", floor=2 * E4NV_MIN_SUB)
    public.assert_fp8_close(_codes(0x80), _codes(0x00), "e4nv")  # ±0 are the same value: 0 ULP


def test_saturated_max_equals_max():
    public.assert_fp8_close(fp8.encode(torch.tensor([1e6, -1e6]), "e4nv"), _codes(0x7E, 0xFE), "e4nv")


def test_nan_codes_never_pass_by_default():
    nan = _codes(0x7F)
    with pytest.raises(AssertionError, match=r"Greatest ULP distance: far \(NaN/inf\)"):
        public.assert_fp8_within_one_ulp(nan, nan, "e4nv")
    with pytest.raises(AssertionError):
        public.assert_fp8_close(nan, nan, "e4nv", max_ulp=100)
    public.assert_fp8_within_one_ulp(nan, nan, "e4nv", nan_equal=True)
    with pytest.raises(AssertionError):
        public.assert_fp8_within_one_ulp(nan, _codes(0xFF), "e4nv")
    with pytest.raises(AssertionError):  # NaN vs a number, even with a huge floor
        public.assert_fp8_within_one_ulp(nan, _codes(0x7E), "e4nv", floor=1e9, nan_equal=True)


@pytest.mark.parametrize("fmt, a, b", [("e4nv", 0x7F, 0xFF), ("e5m2", 0x7D, 0xFF), ("e5m2", 0x7E, 0x7F)])
def test_nan_equal_takes_any_two_nan_codes_of_the_format(fmt, a, b):
    """Two NaN codes of one format are both NaN: nan_equal=True is torch's equal_nan, not "the same bits"."""
    public.assert_fp8_close(_codes(a, 0x38), _codes(b, 0x38), fmt, nan_equal=True)
    public.assert_fp8_within_one_ulp(_codes(a), _codes(b), fmt, nan_equal=True)
    with pytest.raises(AssertionError, match=r"Mismatched elements: 1 / 1"):
        public.assert_fp8_close(_codes(a), _codes(b), fmt, max_ulp=255)


def test_inf_codes_never_pass():
    inf = _codes(0x7C)  # e5m2 +inf: hardware casts saturate, so an inf code is a bug
    with pytest.raises(AssertionError):
        public.assert_fp8_within_one_ulp(inf, inf, "e5m2")
    with pytest.raises(AssertionError):
        public.assert_fp8_within_one_ulp(inf, _codes(0x7B), "e5m2", floor=1e9)


def test_fp8_close_max_ulp_and_mismatch_fraction():
    want = torch.full((10,), 0x38, dtype=torch.uint8)
    got = want.clone()
    got[2] += 2
    public.assert_fp8_close(got, want, "e4nv", max_ulp=2)
    with pytest.raises(AssertionError, match=r"up to 1 allowed"):
        public.assert_fp8_close(got, want, "e4nv", max_ulp=1)
    public.assert_fp8_close(got, want, "e4nv", max_ulp=1, max_mismatch=0.1)  # 1 of 10 may break it
    got[5] += 3
    with pytest.raises(AssertionError, match=r"Mismatched elements: 2 / 10 \(20\.0%\), up to 1 allowed"):
        public.assert_fp8_close(got, want, "e4nv", max_ulp=1, max_mismatch=0.1)


def test_fp8_accepts_float8_tensors_and_checks_their_format():
    x = torch.tensor([1.0, -2.0]).to(torch.float8_e4m3fn)
    public.assert_fp8_close(x, x.view(torch.uint8), "e4nv")
    with pytest.raises(TypeError, match="e5m2"):
        public.assert_fp8_close(x, x, "e5m2")


def test_fp8_argument_conflicts_are_refused():
    c = _codes(0x38)
    with pytest.raises(ValueError, match="either tol= or max_ulp="):
        public.assert_fp8_close(c, c, "e4nv", max_ulp=1, tol=Tolerance(max_ulp=1))
    with pytest.raises(ValueError, match="tol.max_ulp=0 contradicts the 1-ULP rule"):
        public.assert_fp8_within_one_ulp(c, c, "e4nv", tol=Tolerance(max_ulp=0))
    with pytest.raises(ValueError, match="floor must be a finite number >= 0"):
        public.assert_fp8_within_one_ulp(c, c, "e4nv", floor=-1.0)
    with pytest.raises(ValueError, match="fmt"):
        public.assert_fp8_close(c, c, "e9m9")


def test_fp8_message_lines():
    want = fp8.encode(torch.tensor([[1.0, 2.0, 3.0], [0.5, -4.0, 448.0]]), "e4nv")
    got = want.clone()
    got[0, 1] += 1  # 1 ULP: passes
    got[1, 0] += 3  # 3 ULP: fails
    got[1, 2] = 0x7F  # NaN: fails, far
    tol = Tolerance(max_ulp=1, ulp_floor=1e-3, key="demo.store/e4nv/sm90", note="measured somewhere")
    _raises_lines(
        lambda: public.assert_fp8_within_one_ulp(got, want, "e4nv", tol=tol, op="demo.store"),
        r"FP8 codes are not close! \(op=demo\.store, dtype=e4nv, format=e4nv, arch=\w+\)",
        r"Mismatched elements: 2 / 6 \(33\.3%\)",
        r"Greatest ULP distance: far \(NaN/inf\) at index \(1, 2\) \(up to 1 allowed\)",
        r"Greatest absolute difference of a mismatch: 1\.875e-01 at index \(1, 0\) "
        r"\(up to 1\.000e-03 allowed\)",
        r"ULP histogram: 0: 3 \| 1: 1 \| 2: 0 \| 3: 1 \| 4-7: 0 \| 8\+: 0 \| far/NaN: 1",
        r"Worst elements \(2\):",
        r"\s+index\s+actual\s+expected\s+actual value\s+expected value\s+abs diff\s+ulp",
        r"\s+\(1, 2\)\s+0x7f\s+0x7e\s+nan\s+448\s+nan\s+far",
        r"\s+\(1, 0\)\s+0x33\s+0x30\s+0\.6875\s+0\.5\s+0\.1875\s+3",
        r"Rule: code distance <= 1 ULP, or \|decoded difference\| <= 1\.000e-03 with the same sign "
        r"\(a zero has either sign\); NaN/inf codes never pass",
        r"Tolerance: Tolerance\(max_ulp=1, ulp_floor=1\.0e-03\) \[demo\.store/e4nv/sm90\]",
        r"Tolerance note: measured somewhere",
    )
    # without a floor no absolute difference is allowed, and the line says no bound rather than "up to 0"
    _raises_lines(
        lambda: public.assert_fp8_close(got, want, "e4nv", max_ulp=1),
        "...",
        r"Greatest absolute difference of a mismatch: 1\.875e-01 at index \(1, 0\)",
        "...",
    )


def test_checks_report_to_the_summary(monkeypatch):
    seen = []
    monkeypatch.setattr(summary, "record", lambda **kw: seen.append(kw))
    c = _codes(0x38, 0x39)
    public.assert_fp8_close(c + _codes(0, 1), c, "e4nv", max_ulp=1, op="rec.fp8")
    compare.check_close(torch.ones(2), torch.zeros(2), QUARTER, op="rec.float", dtype="bf16")
    assert [(s["op"], s["dtype"], s["n"], s["passed"]) for s in seen] == [
        ("rec.fp8", "e4nv", 2, True),
        ("rec.float", "bf16", 2, False),
    ]
    assert seen[0]["worst_ulp"] == 1 and seen[0]["tol"].max_ulp == 1
    assert seen[1]["worst_abs"] == 1.0 and seen[1]["worst_ratio"] == pytest.approx(
        1 / 0.25
    )  # |1 - 0| / (atol + rtol * 0)


def test_accepted_nan_codes_do_not_count_as_worst_ulp(monkeypatch):
    """nan_equal=True lets identical NaN codes pass; the worst ULP reported is then the finite elements'."""
    seen = []
    monkeypatch.setattr(summary, "record", lambda **kw: seen.append(kw))
    e = _codes(0x38, 0x7F, 0xFF)
    public.assert_fp8_close(e + _codes(1, 0, 0), e, "e4nv", max_ulp=1, nan_equal=True, op="rec.nan")
    assert seen[0]["passed"] and seen[0]["worst_ulp"] == 1
    with pytest.raises(AssertionError, match=r"Mismatched elements: 1 / 3"):
        public.assert_fp8_close(e + _codes(2, 0, 0), e, "e4nv", max_ulp=1, nan_equal=True)
    assert seen[1]["worst_ulp"] == 2


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_tensors_are_reported_from_the_cpu():
    e = torch.zeros(4, device="cuda")
    _raises_lines(
        lambda: public.assert_close_tol(e + 1, e, EXACT_FLOAT),
        r"Tensor-likes are not close!.*",
        r"Mismatched elements: 4 / 4 \(100\.0%\)",
        ".*",
    )
    c = fp8.encode(torch.ones(4, device="cuda"), "e4nv")
    assert c.device.type == "cuda"
    public.assert_fp8_within_one_ulp(c, c + 1, "e4nv")


def test_max_mismatch_rounds_down():
    """floor(max_mismatch * n): 10% of 19 elements is 1 allowed, not 2."""
    e = torch.zeros(19)
    a = e.clone()
    a[:2] = 1.0
    with pytest.raises(AssertionError, match=r"Mismatched elements: 2 / 19 \(10\.5%\), up to 1 allowed"):
        public.assert_close_tol(a, e, TENTH_MAY_FAIL)


# ------------------------------------------------------------------------------- issue 9: NaN, kinds, inputs


def test_max_mismatch_never_covers_a_nan_float():
    e = torch.zeros(10)
    a = e.clone()
    a[3] = 5.0
    public.assert_close_tol(a, e, TENTH_MAY_FAIL)  # control: a finite outlier is covered (1 of 10)
    for got, want in ((a.clone().fill_(0).index_fill_(0, torch.tensor([3]), math.nan), e),
                      (e, e.clone().index_fill_(0, torch.tensor([3]), math.nan))):
        _raises_lines(
            lambda got=got, want=want: public.assert_close_tol(got, want, TENTH_MAY_FAIL),
            r"Tensor-likes are not close! .*",
            r"Mismatched elements: 1 / 10 \(10\.0%\), up to 1 allowed",
            "...",
            r"1 of the mismatches involve NaN, which max_mismatch never covers",
            r"Rule: .*NaN never passes; inf must match exactly; up to 10\.00% of elements may break it, "
            r"none of them by NaN",
            ".*",
        )
    # equal_nan accepts NaN facing NaN at the same index only; NaN facing a number is still never covered
    both = torch.zeros(20).index_fill_(0, torch.tensor([3]), math.nan)
    public.assert_close_tol(both, both, TENTH_MAY_FAIL, equal_nan=True)
    with pytest.raises(AssertionError, match=r"2 / 20 \(10\.0%\), up to 2 allowed(.|\n)*2 of the mismatches involve"):
        public.assert_close_tol(both, both.roll(1), TENTH_MAY_FAIL, equal_nan=True)


@pytest.mark.parametrize("side", ["actual", "expected"])
def test_max_mismatch_never_covers_a_nan_code(side):
    want = torch.full((10,), 0x38, dtype=torch.uint8)
    got = want.clone()
    got[4] = 0x3C  # 4 ULP: an outlier max_mismatch may cover
    public.assert_fp8_close(got, want, "e4nv", max_ulp=1, max_mismatch=0.1)
    bad = want.clone()
    bad[4] = 0x7F  # NaN
    a, e = (bad, want) if side == "actual" else (want, bad)
    with pytest.raises(AssertionError, match="1 of the mismatches involve a NaN code"):
        public.assert_fp8_close(a, e, "e4nv", max_ulp=1, max_mismatch=0.1)
    with pytest.raises(AssertionError, match="max_mismatch never covers"):
        public.assert_fp8_within_one_ulp(a, e, "e4nv", tol=Tolerance(max_ulp=1, max_mismatch=0.1))
    with pytest.raises(AssertionError, match="max_mismatch never covers"):  # not equal NaNs: 0x7f vs 0x38
        public.assert_fp8_close(a, e, "e4nv", max_ulp=1, max_mismatch=0.1, nan_equal=True)
    public.assert_fp8_close(bad, bad, "e4nv", max_mismatch=0.1, nan_equal=True)


def test_a_row_of_the_other_kind_is_refused():
    codes = _codes(0x38, 0x39)
    float_row = Tolerance(rtol=1.6e-2, atol=1e-5, key="*/bf16/*")
    code_row = Tolerance(max_ulp=0, key="fp8_cast/*/cuda")
    with pytest.raises(ValueError, match=r"tol .*\[\*/bf16/\*\] is a float rule, but FP8 codes need a code rule"):
        public.assert_fp8_close(codes, codes, "e4nv", tol=float_row)
    with pytest.raises(ValueError, match="is a float rule"):
        public.assert_fp8_within_one_ulp(codes, codes, "e4nv", tol=float_row)
    with pytest.raises(ValueError, match="is a float rule"):
        compare.check_fp8(codes, codes, "e4nv", Tolerance(max_mismatch=0.5))
    with pytest.raises(ValueError, match=r"\[fp8_cast/\*/cuda\] is a codes rule, but a float comparison needs"):
        public.assert_close_tol(torch.ones(2), torch.ones(2), code_row)


def _meta():
    return torch.zeros(3, device="meta")


def _sparse():
    return torch.zeros(3).to_sparse()


@pytest.mark.parametrize(
    "make, exc, match",
    [
        (_meta, ValueError, "{name} is on the meta device"),
        (_sparse, TypeError, r"{name} has layout torch.sparse_coo; pass a dense tensor \({name}.to_dense\(\)\)"),
        (lambda: torch.zeros(3, dtype=torch.complex64), TypeError, r"{name} is complex \(torch.complex64\)"),
        (lambda: torch.zeros(3, dtype=torch.bool), TypeError, "{name} is a bool tensor"),
        (lambda: [0.0, 0.0, 0.0], TypeError, "{name} must be a torch.Tensor, got list"),
    ],
)
@pytest.mark.parametrize("name", ["actual", "expected"])
def test_unusable_inputs_name_the_argument(make, exc, match, name):
    good_f, good_c = torch.zeros(3), _codes(0, 0, 0)
    for good, call in (
        (good_f, lambda a, e: public.assert_close_tol(a, e, QUARTER)),
        (good_c, lambda a, e: public.assert_fp8_close(a, e, "e4nv")),
        (good_c, lambda a, e: public.assert_fp8_within_one_ulp(a, e, "e4nv")),
    ):
        args = (make(), good) if name == "actual" else (good, make())
        with pytest.raises(exc, match=match.format(name=name)):
            call(*args)


def test_wrong_dtypes_name_the_argument():
    with pytest.raises(TypeError, match="expected must hold FP8 codes .* got torch.float32"):
        public.assert_fp8_close(_codes(0), torch.zeros(1), "e4nv")
    with pytest.raises(TypeError, match="actual must be a floating-point tensor, got dtype torch.int64"):
        public.assert_close_tol(torch.zeros(1, dtype=torch.long), torch.zeros(1), QUARTER)
    with pytest.raises(TypeError, match="equal_nan must be True or False"):
        public.assert_close_tol(torch.zeros(1), torch.zeros(1), QUARTER, equal_nan="yes")
    with pytest.raises(TypeError, match="nan_equal must be True or False"):
        public.assert_fp8_close(_codes(0), _codes(0), "e4nv", nan_equal=1)


@pytest.mark.parametrize("name", ["actual", "expected"])
@pytest.mark.parametrize("dtype", [torch.int8, torch.int32])
def test_integer_tensors_other_than_uint8_are_not_fp8_codes(name, dtype):
    # int8 56 and 64 equal the uint8 codes numerically, so the assert passed: an int tensor is not codes.
    good, bad = _codes(56, 64), torch.tensor([56, 64], dtype=dtype)
    args = (bad, good) if name == "actual" else (good, bad)
    for call in (public.assert_fp8_close, public.assert_fp8_within_one_ulp):
        with pytest.raises(TypeError, match=rf"{name} must hold FP8 codes \(uint8 or a torch float8 dtype\), "
                                            rf"got {dtype}"):
            call(*args, "e4nv")


def test_fp8_asserts_refuse_a_float8_tensor_of_another_format():
    c = _codes(0x3C, 0x7C).view(torch.float8_e5m2)
    for call in (public.assert_fp8_close, public.assert_fp8_within_one_ulp):
        with pytest.raises(TypeError, match=r"actual is torch\.float8_e5m2 \(format e5m2\) but fmt is e4nv"):
            call(c, _codes(0x3C, 0x7C), "e4nv")


_X3 = torch.tensor([1.0, 2.0, 3.0])
_PASSING = [  # each passes with good arguments: a bad one must be refused before (whatever) the outcome
    ("assert_close_tol", lambda **kw: public.assert_close_tol(_X3, _X3, QUARTER, **kw)),
    ("assert_fp8_close", lambda **kw: public.assert_fp8_close(_codes(1, 2), _codes(1, 2), "e4nv", **kw)),
    ("assert_fp8_within_one_ulp",
     lambda **kw: public.assert_fp8_within_one_ulp(_codes(1, 2), _codes(1, 3), "e4nv", **kw)),
]


@pytest.mark.parametrize("name, call", _PASSING, ids=[n for n, _ in _PASSING])
@pytest.mark.parametrize("arg", ["op", "dtype"])
@pytest.mark.parametrize("value", [123, b"gemm", ["gemm"]])
def test_op_and_dtype_must_be_str_even_when_the_comparison_passes(name, call, arg, value):
    with pytest.raises(TypeError, match=rf"^{arg} must be a str \(or None\), got {type(value).__name__}"):
        call(**{arg: value})
    call(**{arg: None})  # None: not given, as the default ""
    call(**{arg: "demo.op"})


@pytest.mark.parametrize("name, call", _PASSING, ids=[n for n, _ in _PASSING])
@pytest.mark.parametrize("value", [123, b"layer 3", ("layer", 3)])
def test_msg_must_be_str_or_callable_even_when_the_comparison_passes(name, call, value):
    # A msg of the wrong type was dropped silently: the failure it was meant to explain showed without it.
    with pytest.raises(TypeError, match=r"^msg must be a str, a callable taking the failure text, or None, got"):
        call(msg=value)
    call(msg="layer 3")
    call(msg=lambda text: text)


def test_check_functions_refuse_a_non_str_label():
    with pytest.raises(TypeError, match=r"^op must be a str"):
        compare.check_close(_X3, _X3, QUARTER, op=123)
    with pytest.raises(TypeError, match=r"^dtype must be a str"):
        compare.check_fp8(_codes(1), _codes(1), "e4nv", Tolerance(max_ulp=0), dtype=5)


def test_fp8_shape_mismatch_is_a_failure_naming_both():
    _raises_lines(
        lambda: public.assert_fp8_close(_codes(1, 2), _codes(1, 2, 3), "e4nv"),
        r"Tensor-likes cannot be compared! \(dtype=e4nv, format=e4nv, arch=\w+\)",
        r"actual has shape \(2,\), expected has shape \(3,\); FP8 checks never broadcast\.",
        ".*",
    )


# ------------------------------------------------------------------------------- issue 9: branch coverage


def test_float_sign_flip_fails():
    """|a - e|, not ||a| - |e||: a flipped sign is an error of twice the magnitude."""
    e = torch.tensor([1.0, -2.0, 0.5])
    with pytest.raises(AssertionError, match=r"Mismatched elements: 3 / 3"):
        public.assert_close_tol(-e, e, Tolerance(rtol=0.5, atol=0.25))
    public.assert_close_tol(e * 1.5, e, Tolerance(rtol=0.5, atol=0.0))  # same size of change, same sign


def test_atol_and_rtol_are_not_swapped_and_rtol_scales_expected():
    e, a = torch.tensor([4.0]), torch.tensor([5.0])
    public.assert_close_tol(a, e, Tolerance(rtol=0.25))  # 1 <= 0.25 * 4
    with pytest.raises(AssertionError):
        public.assert_close_tol(a, e, Tolerance(atol=0.25))
    z, small = torch.tensor([0.0]), torch.tensor([0.25])
    public.assert_close_tol(small, z, Tolerance(atol=0.25))
    with pytest.raises(AssertionError):
        public.assert_close_tol(small, z, Tolerance(rtol=0.25))
    # rtol multiplies |expected|, not |actual|: 1 vs 3 at rtol 1 is 2 > 1 * |1| (but <= 1 * |3|)
    with pytest.raises(AssertionError):
        public.assert_close_tol(torch.tensor([3.0]), torch.tensor([1.0]), Tolerance(rtol=1.0))
    public.assert_close_tol(torch.tensor([1.0]), torch.tensor([3.0]), Tolerance(rtol=1.0))


def test_max_mismatch_boundary_survives_float_rounding():
    """0.29 * 100 is 28.999999999999996 in binary: 29 mismatches are allowed, 30 are not."""
    tol = Tolerance(max_mismatch=0.29, key="test/29")
    e = torch.zeros(100)
    a = e.clone()
    a[:29] = 1.0
    public.assert_close_tol(a, e, tol)
    a[29] = 1.0
    with pytest.raises(AssertionError, match=r"Mismatched elements: 30 / 100 \(30\.0%\), up to 29 allowed"):
        public.assert_close_tol(a, e, tol)
    codes = torch.full((100,), 0x38, dtype=torch.uint8)
    bad = codes.clone()
    bad[:29] += 2
    public.assert_fp8_close(bad, codes, "e4nv", max_ulp=1, max_mismatch=0.29)
    bad[29] += 2
    with pytest.raises(AssertionError, match=r"30 / 100 .*up to 29 allowed"):
        public.assert_fp8_close(bad, codes, "e4nv", max_ulp=1, max_mismatch=0.29)


def test_ulp_histogram_counts_every_bin_edge():
    dists = [0, 1, 2, 3, 4, 7, 8, 20]
    want = _codes(*([0x38] * (len(dists) + 1)))
    got = _codes(*[0x38 + d for d in dists], 0x7F)  # ... and a NaN: far
    counts = {"0": 1, "1": 1, "2": 1, "3": 1, "4-7": 2, "8+": 2, "far/NaN": 1}
    m = compare.check_fp8(got, want, "e4nv", Tolerance(max_ulp=0))
    assert m.hist == counts
    assert sum(m.hist.values()) == m.n
    assert (m.k, m.worst_ulp) == (8, fp8.ULP_FAR)


def test_strided_views_report_logical_indices():
    base = torch.zeros(4, 3)
    view = base.t()  # [3, 4], not contiguous
    assert not view.is_contiguous()
    base[2, 1] = 1.0  # view[1, 2]
    with pytest.raises(AssertionError, match=r"Greatest absolute difference: 1\.000e\+00 at index \(1, 2\)"):
        public.assert_close_tol(view, torch.zeros(3, 4), EXACT_FLOAT)
    codes = torch.full((8,), 0x38, dtype=torch.uint8)
    codes[6] = 0x3B
    with pytest.raises(AssertionError, match=r"Greatest ULP distance: 3 at index \(3,\)"):
        public.assert_fp8_close(codes[::2], _codes(0x38, 0x38, 0x38, 0x38), "e4nv")


def test_plus_and_minus_inf_codes_are_far_apart():
    with pytest.raises(AssertionError, match=r"far \(NaN/inf\)"):
        public.assert_fp8_close(_codes(0x7C), _codes(0xFC), "e5m2", max_ulp=200)


# ------------------------------------------------------------------------------- float rule with a scale


def test_scale_boundary_is_inclusive_and_one_ulp_above_fails():
    """allowed = atol + rtol * scale = 0.25 + 0.25 * 2 = 0.75, exact in binary; |expected| plays no part."""
    e = torch.tensor([100.0, -100.0], dtype=torch.float64)
    scale = torch.tensor([2.0, 2.0], dtype=torch.float64)
    public.assert_close_tol(e + torch.tensor([0.75, -0.75], dtype=torch.float64), e, QUARTER, scale=scale)
    above = torch.nextafter(torch.tensor(100.75, dtype=torch.float64), torch.tensor(101.0, dtype=torch.float64))
    with pytest.raises(AssertionError, match=r"Mismatched elements: 1 / 2 \(50\.0%\)"):
        public.assert_close_tol(torch.stack([above, torch.tensor(-100.75, dtype=torch.float64)]), e, QUARTER,
                                 scale=scale)
    # without the scale, rtol * |expected| = 25 would have allowed it
    public.assert_close_tol(torch.stack([above, torch.tensor(-100.75, dtype=torch.float64)]), e, QUARTER)


def test_scale_broadcasts_and_takes_a_number():
    e = torch.zeros(2, 3)
    a = e + torch.tensor([[0.5], [1.0]])  # row 1 needs scale >= 3 under QUARTER: 0.25 + 0.25 * 3 = 1
    public.assert_close_tol(a, e, QUARTER, scale=torch.tensor([[1.0], [3.0]]))
    assert compare.check_close(a, e, QUARTER, scale=torch.tensor([[1.0], [2.0]])).k == 3
    public.assert_close_tol(a, e, QUARTER, scale=3)
    assert compare.check_close(a, e, QUARTER, scale=0).k == 6  # scale 0: atol alone


def test_scale_never_lets_nan_or_a_wrong_inf_pass():
    huge = Tolerance(rtol=1.0, atol=1e300, key="test/huge")
    for a, e in [([math.nan], [1.0]), ([1.0], [math.nan]), ([math.inf], [1.0]), ([-math.inf], [math.inf])]:
        with pytest.raises(AssertionError, match=r"Mismatched elements: 1 / 1"):
            public.assert_close_tol(torch.tensor(a), torch.tensor(e), huge, scale=1e300)
    nan = torch.tensor([math.nan])
    public.assert_close_tol(nan, nan, huge, scale=1e300, equal_nan=True)  # only the explicit flag


@pytest.mark.parametrize(
    ("scale", "exc", "match"),
    [
        (torch.tensor([1.0, math.nan]), ValueError, r"scale must be finite and >= 0 everywhere: 1 element\(s\) are "
                                                    r"not, first nan at index \(1,\)"),
        (torch.tensor([1.0, -1e-30]), ValueError, r"scale must be finite and >= 0 .* first -1e-30 at index \(1,\)"),
        (torch.tensor([math.inf, 1.0]), ValueError, r"scale must be finite and >= 0 .* first inf at index \(0,\)"),
        (-1.0, ValueError, r"scale must be finite and >= 0"),
        (math.nan, ValueError, r"scale must be finite and >= 0"),
        (torch.ones(3), ValueError, r"scale has shape \(3,\), which does not broadcast to actual's shape \(2,\)"),
        (torch.ones(1, 2), ValueError, r"scale has shape \(1, 2\), which does not broadcast"),
        ("2", TypeError, r"scale must be a torch\.Tensor or a real number, got str"),
        (True, TypeError, r"scale must be a torch\.Tensor or a real number, got bool"),
        (torch.ones(2, dtype=torch.bool), TypeError, r"scale is a bool tensor"),
        (torch.ones(2, device="meta"), ValueError, r"scale is on the meta device"),
    ],
    ids=["nan", "negative", "inf", "neg-number", "nan-number", "too-long", "extra-dim", "str", "bool", "bool-tensor",
         "meta"],
)
def test_bad_scales_are_refused_naming_scale(scale, exc, match):
    with pytest.raises(exc, match=match):
        compare.check_close(torch.zeros(2), torch.zeros(2), QUARTER, scale=scale)


def test_scale_message_lines():
    e = torch.tensor([1.0, 100.0])
    a = torch.tensor([1.0, 103.0])
    _raises_lines(
        lambda: public.assert_close_tol(a, e, QUARTER, scale=torch.tensor([8.0, 4.0]), op="demo.dot"),
        r"Tensor-likes are not close! \(op=demo\.dot, dtype=fp32, arch=\w+\)",
        r"Mismatched elements: 1 / 2 \(50\.0%\)",
        r"Greatest absolute difference: 3\.000e\+00 at index \(1,\) \(up to 1\.250e\+00 allowed\)",
        r"Greatest difference relative to scale: 7\.500e-01 at index \(1,\) \(up to 2\.500e-01 allowed\)",
        r"Worst elements \(1\):",
        r"\s+index\s+actual\s+expected\s+abs diff\s+scale\s+allowed",
        r"\s+\(1,\)\s+103\s+100\s+3\s+4\s+1\.25",
        r"Rule: \|actual - expected\| <= atol \+ rtol \* scale \(atol=2\.5e-01, rtol=2\.5e-01\); "
        r"NaN never passes; inf must match exactly",
        r"Tolerance: Tolerance\(rtol=2\.5e-01, atol=2\.5e-01\) \[test/quarter\]",
    )


def test_scaled_check_reports_the_ratio_to_the_allowed_error(monkeypatch):
    seen = []
    monkeypatch.setattr(summary, "record", lambda **kw: seen.append(kw))
    e = torch.tensor([100.0, 0.0])
    compare.check_close(e + 0.5, e, QUARTER, scale=torch.tensor([4.0, 2.0]), op="rec.scale")
    # |err| 0.5 against 0.25 + 0.25 * S: 0.4 at S = 4, 0.667 at S = 2 (against |expected|, 2.0 at 0)
    assert seen[0]["worst_abs"] == 0.5 and seen[0]["worst_ratio"] == pytest.approx(0.5 / 0.75) and seen[0]["passed"]


# ------------------------------------------------------------------------------------------ the boundary


def test_the_raising_path_is_hidden_from_tracebacks():
    """Every frame between a public assert and the AssertionError carries __tracebackhide__, so pytest
    shows the test's line (the raise helper lacked it once)."""
    with pytest.raises(AssertionError) as info:
        public.assert_close_tol(torch.ones(1), torch.zeros(1), EXACT_FLOAT)
    frames = [e for e in info.traceback if e.frame.code.raw.co_filename != __file__]
    assert frames and all(e.frame.f_locals.get("__tracebackhide__") is True for e in frames), [
        (e.frame.code.name, e.frame.f_locals.get("__tracebackhide__")) for e in frames
    ]



# ------------------------------------------------------------- found by mutating harness/compare/checks.py


def test_worst_differences_are_the_finite_elements_and_the_table_ranks_by_allowed_error():
    """NaN and inf are listed but never the "greatest" difference; an exact zero (0 / 0) is no worst relative
    difference; the table ranks by |diff| / allowed, not by |diff| (rtol gives each element its own bound)."""
    got = torch.tensor([math.nan, 11.5, math.inf, 0.0, 1.4])
    want = torch.tensor([1.0, 10.0, 1.0, 0.0, 1.0])
    _raises_lines(
        lambda: public.assert_close_tol(got, want, Tolerance(rtol=0.1, atol=0.0)),
        r"Tensor-likes are not close! .*",
        r"Mismatched elements: 4 / 5 \(80\.0%\)",
        r"Greatest absolute difference: 1\.500e\+00 at index \(1,\) \(up to 1\.000e\+00 allowed\)",
        r"Greatest relative difference: 4\.000e-01 at index \(4,\) \(up to 1\.000e-01 allowed\)",
        r"Worst elements \(4\):",
        r"\s+index\s+actual\s+expected\s+abs diff\s+allowed",
        r"\s+\(0,\)\s+nan\s+1\s+nan\s+0\.1",
        r"\s+\(2,\)\s+inf\s+1\s+inf\s+0\.1",
        r"\s+\(4,\)\s+1\.4\s+1\s+0\.4\s+0\.1",  # 4x its bound before 1.5x its bound
        r"\s+\(1,\)\s+11\.5\s+10\s+1\.5\s+1",
        "...",
    )
    # a one-sided inf within max_mismatch is still no greatest difference
    with pytest.raises(AssertionError, match=r"Greatest absolute difference: 4\.000e-01 at index \(2,\)"):
        public.assert_close_tol(got[2:], want[2:], Tolerance(rtol=0.1, max_mismatch=0.5))


def test_exact_rules_record_a_zero_ratio_for_exact_elements(monkeypatch):
    seen = []
    monkeypatch.setattr(summary, "record", lambda **kw: seen.append(kw))
    compare.check_close(torch.zeros(3), torch.zeros(3), EXACT_FLOAT, op="rec.exact")
    compare.check_close(torch.tensor([0.0, 1.0]), torch.zeros(2), EXACT_FLOAT, op="rec.exact")
    compare.check_close(torch.tensor([math.nan, 1.0]), torch.zeros(2), QUARTER, op="rec.exact")
    assert [(s["passed"], s["worst_abs"], s["worst_ratio"]) for s in seen] == [
        (True, 0.0, 0.0), (False, 1.0, math.inf), (False, 1.0, math.inf)  # a NaN has no finite ratio: 4.0 hides it
    ]


def test_the_report_names_a_wildcard_row_by_the_compared_dtype(monkeypatch):
    """A row registered for every op / dtype ("*") is reported under the caller's names or the compared
    tensor's dtype, never as "*"; a row of its own names itself."""
    seen = []
    monkeypatch.setattr(summary, "record", lambda **kw: seen.append(kw))
    ones = torch.ones(2, dtype=torch.bfloat16)
    compare.check_close(ones, ones, Tolerance(op="*", dtype="*"))
    compare.check_close(ones, ones, Tolerance(op="gemm", dtype="fp16"))
    compare.check_close(ones, ones, Tolerance(op="gemm", dtype="fp16"), op="mine", dtype="e4nv")
    compare.check_fp8(_codes(1), _codes(1), "e5m2", Tolerance(max_ulp=0, op="*", dtype="*"))
    assert [(s["op"], s["dtype"]) for s in seen] == [("", "bf16"), ("gemm", "fp16"), ("mine", "e4nv"), ("", "e5m2")]


def test_a_shape_mismatch_is_recorded_as_failed(monkeypatch):
    seen = []
    monkeypatch.setattr(summary, "record", lambda **kw: seen.append(kw))
    assert compare.check_close(torch.zeros(2), torch.zeros(3), QUARTER, op="rec.shape") is not None
    assert compare.check_fp8(_codes(1, 2), _codes(1, 2, 3), "e4nv", Tolerance(max_ulp=1), op="rec.shape") is not None
    assert [(s["op"], s["n"], s["passed"]) for s in seen] == [("rec.shape", 3, False), ("rec.shape", 3, False)]


@pytest.mark.parametrize("floor", [-1.0, math.nan, math.inf, True, "0.1"])
def test_a_bad_floor_names_floor(floor):
    with pytest.raises(ValueError, match=r"floor must be a finite number >= 0, got "):
        public.assert_fp8_within_one_ulp(_codes(1), _codes(1), "e4nv", floor=floor)
    with pytest.raises(ValueError, match=r"^floor must be a finite number >= 0, got "):  # not the row's
        public.assert_fp8_within_one_ulp(_codes(1), _codes(1), "e4nv", floor=floor, tol=Tolerance(max_ulp=1))


def test_a_zero_expected_counts_as_either_sign():
    # the other way round from test_signed_zero_counts_as_either_sign: a value facing a signed zero
    public.assert_fp8_within_one_ulp(_codes(0x02, 0x82), _codes(0x80, 0x00), "e4nv", floor=2 * E4NV_MIN_SUB)
