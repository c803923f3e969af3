"""Self-tests of ``harness.fp8`` against references that share no code with it.

Like Triton's ``test_conversions.py``: every fp16 and every bf16 bit pattern, plus a deterministic fp32 sample
built around the FP8 rounding ties. The references here are written differently from the codec on purpose:

* ``_grid_encode``: nearest value on the format's grid, built from the bit layout in this file, with the tie
  decided by exact float64 arithmetic (2|x| against lo + hi), saturation and the NaN rule as data;
* torch's own float8 dtypes, on in-range finite inputs (e4nv, e5m2);
* ``_fraction_encode``: a slow exact rational search over all codes, on a subset (it checks the grid reference
  itself as well as the codec).

The hardware facts encoded below (saturation, NaN codes, e4b15 ties away from zero) come from the H200
capture; ``test_fp8_golden.py`` checks the codec against the H200's casts and decodes themselves (goldens).
"""

from __future__ import annotations

import bisect
import math
from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from harness import fp8

pytestmark = pytest.mark.lane_independent  # the same on every lane: the GPU lane skips it

OCP = ("e4nv", "e5m2")
HW_FORMATS = ("e4nv", "e5m2", "e4b15")
SRC = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}
# (exp bits, mantissa bits, bias, code a cast saturates to, tie rule) — from the formats' definitions
LAYOUT = {
    "e4nv": (4, 3, 7, 0x7E, "even"),
    "e5m2": (5, 2, 15, 0x7B, "even"),
    "e4b15": (4, 3, 15, 0x7E, "away"),
}
# NaN input -> code on sm90 (H200 capture): e4nv/e5m2 0x7f whatever the sign; e4b15 0x7e, sign kept from fp16
NAN_CODE = {"e4nv": 0x7F, "e5m2": 0x7F, "e4b15": 0x7E}
NAN_KEEPS_SIGN = {("e4b15", "fp16")}


# ---------------------------------------------------------------------------------------------- references


def _layout_value(code: int, fmt: str) -> Fraction:
    """Exact value of a finite code from the bit layout (sign, exponent, mantissa)."""
    e_bits, m_bits, bias, _, _ = LAYOUT[fmt]
    s, e, m = code >> 7, (code >> m_bits) & ((1 << e_bits) - 1), code & ((1 << m_bits) - 1)
    mag = (
        Fraction(m, 1 << m_bits) * Fraction(2) ** (1 - bias)
        if e == 0
        else (1 + Fraction(m, 1 << m_bits)) * Fraction(2) ** (e - bias)
    )
    return -mag if s else mag


def _magnitudes(fmt: str) -> np.ndarray:
    """float64 magnitudes of codes 0 .. saturation code (index = code)."""
    sat = LAYOUT[fmt][3]
    return np.array([float(_layout_value(c, fmt)) for c in range(sat + 1)])


def _grid_encode(x: torch.Tensor, fmt: str, src: str) -> np.ndarray:
    """Reference encode: nearest grid magnitude, ties by the format's rule, saturating; sign, NaN as data."""
    _, _, _, sat, ties = LAYOUT[fmt]
    mags = _magnitudes(fmt)
    x64 = x.double().numpy()
    a = np.abs(x64)
    with np.errstate(invalid="ignore"):
        i = np.clip(np.searchsorted(mags, a, side="left"), 1, sat)  # mags[i-1] < a <= mags[i] when in range
        lo, hi = i - 1, i
        two_a, mid2 = 2 * a, mags[lo] + mags[hi]  # both exact in float64: no tie is misjudged
        code = np.where(two_a < mid2, lo, hi)
        tie = two_a == mid2
        tie_pick = hi if ties == "away" else np.where(lo % 2 == 0, lo, hi)
        code = np.where(tie, tie_pick, code)
        code = np.where(a > mags[sat], sat, code)  # satfinite: beyond max (inf too) -> max
    code = code.astype(np.uint8) | (np.signbit(x64).astype(np.uint8) << 7)
    nan = np.isnan(x64)
    nan_code = np.full_like(code, NAN_CODE[fmt])
    if (fmt, src) in NAN_KEEPS_SIGN:
        nan_code |= np.signbit(x64).astype(np.uint8) << 7
    return np.where(nan, nan_code, code)


_FRACTION_GRIDS: dict[str, list[Fraction]] = {}


def _fraction_encode(v: float, fmt: str) -> int:
    """Slow exact reference for one finite value: bisect the rational grid, compare distances exactly."""
    _, _, _, sat, ties = LAYOUT[fmt]
    if fmt not in _FRACTION_GRIDS:
        _FRACTION_GRIDS[fmt] = [_layout_value(c, fmt) for c in range(sat + 1)]
    grid = _FRACTION_GRIDS[fmt]
    a = abs(Fraction(v))
    i = bisect.bisect_left(grid, a)
    if i > sat:
        best = sat  # beyond max: saturate
    elif grid[i] == a or i == 0:
        best = i
    else:
        dlo, dhi = a - grid[i - 1], grid[i] - a
        if dlo != dhi:
            best = i - 1 if dlo < dhi else i
        else:
            best = i if ties == "away" or i % 2 == 0 else i - 1
    return best | (0x80 if math.copysign(1.0, v) < 0 else 0)


def _all_bits(dtype: torch.dtype) -> torch.Tensor:
    return torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(dtype)


def _fp32_sample() -> torch.Tensor:
    """Every grid midpoint of every format (the ties), its fp32 neighbours, edges and a seeded spread."""
    parts = []
    for fmt in HW_FORMATS:
        mags = _magnitudes(fmt)
        mid = torch.tensor((mags[1:] + mags[:-1]) / 2, dtype=torch.float32)  # exact in fp32
        bits = mid.view(torch.int32)
        parts += [(bits + d).view(torch.float32) for d in (-2, -1, 0, 1, 2)]
        top = float(mags[-1])
        parts.append(
            torch.tensor(
                [
                    top,
                    top * 1.0625,
                    top * 2,
                    top * 1e6,
                    float(mags[1]),
                    float(mags[1]) / 2,
                    float(mags[1]) / 4,
                ],
                dtype=torch.float32,
            )
        )
    g = torch.Generator().manual_seed(0x5EED)
    parts.append(
        torch.randint(-(2**31), 2**31 - 1, (1 << 16,), generator=g, dtype=torch.int64)
        .to(torch.int32)
        .view(torch.float32)
    )  # any bit pattern: NaN payloads, inf, fp32 subnormals
    parts.append(
        (torch.rand(1 << 16, generator=g) + 1)
        * torch.exp2(torch.randint(-30, 20, (1 << 16,), generator=g).float())
    )
    parts.append(torch.tensor([0.0, float("inf"), float("nan"), 1e-45, 1.1754942e-38], dtype=torch.float32))
    x = torch.cat(parts)
    return torch.cat([x, -x])


@pytest.fixture(scope="module")
def inputs() -> dict[str, torch.Tensor]:
    return {"fp16": _all_bits(torch.float16), "bf16": _all_bits(torch.bfloat16), "fp32": _fp32_sample()}


def _first_diffs(x: torch.Tensor, got: np.ndarray, want: np.ndarray, k: int = 8) -> str:
    bad = np.nonzero(got != want)[0]
    return f"{len(bad)} differ, e.g. " + ", ".join(
        f"x={x.reshape(-1)[i].item()!r}: got 0x{got[i]:02x} want 0x{want[i]:02x}" for i in bad[:k]
    )


# ---------------------------------------------------------------------------------------------- encode


@pytest.mark.parametrize("fmt", HW_FORMATS)
@pytest.mark.parametrize("src", ["fp16", "bf16", "fp32"])
def test_encode_sm90_matches_grid_reference(inputs, src, fmt):
    x = inputs[src]
    via = torch.float32 if (src, fmt) == ("bf16", "e4b15") else None  # bf16->e4b15 only exists via fp32
    got = fp8.encode(x, fmt, arch="sm90", via=via).numpy()
    want = _grid_encode(x, fmt, "fp32" if via is not None else src)
    assert np.array_equal(got, want), _first_diffs(x, got, want)


@pytest.mark.parametrize("fmt", OCP)
@pytest.mark.parametrize("src", ["fp16", "bf16", "fp32"])
def test_encode_sm90_matches_torch_in_range(inputs, src, fmt):
    x = inputs[src]
    f = fp8.get_format(fmt)
    keep = torch.isfinite(x) & (x.float().abs() <= f.sat_max)
    x = x[keep]
    got = fp8.encode(x, fmt).numpy()
    want = x.to(f.torch_dtype).view(torch.uint8).numpy()
    assert np.array_equal(got, want), _first_diffs(x, got, want)


def test_fraction_reference_agrees_on_a_subset(inputs):
    """The slow rational search, on ties, neighbours, subnormals and edges of every format."""
    x = inputs["fp32"]
    sub = torch.cat([x[:4000], x[-4000:]])
    sub = sub[torch.isfinite(sub)]
    for fmt in HW_FORMATS:
        slow = np.array([_fraction_encode(v, fmt) for v in sub.tolist()], dtype=np.uint8)
        fast = _grid_encode(sub, fmt, "fp32")
        assert np.array_equal(slow, fast), f"{fmt}: grid reference: " + _first_diffs(sub, fast, slow)
        got = fp8.encode(sub, fmt).numpy()
        assert np.array_equal(got, slow), f"{fmt}: encode: " + _first_diffs(sub, got, slow)


E4B15_TIES = [  # |x| exactly halfway between two e4b15 codes: away from zero, never to even
    (2.0**-17 * 0.5, 0x01),  # half of the smallest subnormal -> smallest subnormal (RNE gives 0)
    (2.0**-17 * 2.5, 0x03),  # between subnormals 2 and 3 -> 3 (RNE gives 2)
    (1.0 + 1 / 16, 0x79),  # between 1.0 (0x78) and 1.125 (0x79)
    (1.0 + 3 / 16, 0x7A),  # between 1.125 and 1.25: 0x7a either way (even is away here)
    (1.6875, 0x7E),  # between 1.625 (0x7d) and 1.75 (0x7e)
]


@pytest.mark.parametrize("value,code", E4B15_TIES)
@pytest.mark.parametrize("src", ["fp16", "fp32"])
def test_e4b15_ties_round_away_from_zero(value, code, src):
    x = torch.tensor([value, -value], dtype=SRC[src])
    assert float(x[0]) == value  # exactly representable in the source, so it *is* a tie
    assert fp8.encode(x, "e4b15").tolist() == [code, code | 0x80]


EDGES = [  # (value, fmt, code on sm90); a list, not a dict: 0.0 and -0.0 are equal keys
    (0.0, "e4nv", 0x00),
    (-0.0, "e4nv", 0x80),
    (-0.0, "e5m2", 0x80),
    (-0.0, "e4b15", 0x80),
    (448.0, "e4nv", 0x7E),
    (464.0, "e4nv", 0x7E),
    (480.0, "e4nv", 0x7E),
    (1e4, "e4nv", 0x7E),
    (-1e4, "e4nv", 0xFE),
    (math.inf, "e4nv", 0x7E),
    (-math.inf, "e4nv", 0xFE),
    (57344.0, "e5m2", 0x7B),
    (61440.0, "e5m2", 0x7B),
    (math.inf, "e5m2", 0x7B),
    (-math.inf, "e5m2", 0xFB),
    (1.75, "e4b15", 0x7E),
    (1.8125, "e4b15", 0x7E),
    (1.875, "e4b15", 0x7E),
    (-math.inf, "e4b15", 0xFE),
    (2.0**-9, "e4nv", 0x01),
    (2.0**-10, "e4nv", 0x00),
    (-(2.0**-10), "e4nv", 0x80),
    (3 * 2.0**-10, "e4nv", 0x02),
    (2.0**-16, "e5m2", 0x01),
    (2.0**-17, "e5m2", 0x00),
    (2.0**-14, "e5m2", 0x04),
]


# Each edge value in every source dtype that holds it exactly (1e4 is not a bf16 value, so no bf16 case).
EDGE_CASES = [
    (v, f, c, src)
    for src in ("fp32", "fp16", "bf16")
    for v, f, c in EDGES
    if math.isinf(v) or torch.tensor([v]).to(SRC[src]).float().item() == v
]


@pytest.mark.parametrize("value,fmt,code,src", EDGE_CASES, ids=[f"{v!r}-{f}-{s}" for v, f, _, s in EDGE_CASES])
def test_encode_edge_cases(value, fmt, code, src):
    x = torch.tensor([value], dtype=torch.float32)
    via = torch.float32 if (src, fmt) == ("bf16", "e4b15") else None
    assert fp8.encode(x.to(SRC[src]), fmt, via=via).item() == code


@pytest.mark.parametrize("fmt", HW_FORMATS)
@pytest.mark.parametrize("src", ["fp16", "fp32"])
def test_nan_inputs(fmt, src):
    bits = {"fp16": ([0x7E00, -0x0200], torch.int16), "fp32": ([0x7FC00000, -0x00400000], torch.int32)}[src]
    pos, neg = torch.tensor(bits[0], dtype=bits[1]).view(SRC[src])  # +NaN, -NaN (0xfe00 / 0xffc00000)
    assert torch.isnan(neg) and torch.signbit(neg)
    want_neg = NAN_CODE[fmt] | (0x80 if (fmt, src) in NAN_KEEPS_SIGN else 0)
    assert fp8.encode(torch.stack([pos, neg]), fmt).tolist() == [NAN_CODE[fmt], want_neg]


def test_encode_keeps_shape_and_device():
    x = torch.linspace(-2, 2, 24, dtype=torch.float16).reshape(2, 3, 4)
    y = fp8.encode(x.transpose(0, 2), "e4nv")
    assert y.dtype == torch.uint8 and y.shape == (4, 3, 2)
    assert torch.equal(y, fp8.encode(x, "e4nv").transpose(0, 2))


@pytest.mark.parametrize(
    "alias,name",
    [
        ("e4m3fn", "e4nv"),
        ("E4M3", "e4nv"),
        ("fp8_e4m3", "e4nv"),
        ("float8e4nv", "e4nv"),
        ("e5", "e5m2"),
        ("float8e5", "e5m2"),
        ("float8e4b15", "e4b15"),
        ("float8_e4m3fnuz", "e4m3fnuz"),
    ],
)
def test_format_aliases(alias, name):
    assert fp8.get_format(alias).name == name


def test_format_from_torch_dtype():
    assert fp8.get_format(torch.float8_e4m3fn).name == "e4nv"
    assert fp8.get_format(torch.float8_e5m2).name == "e5m2"
    assert fp8.get_format(torch.float8_e5m2fnuz).name == "e5m2fnuz"


def test_bad_arguments_name_the_argument():
    x = torch.zeros(3)
    with pytest.raises(ValueError, match="fmt"):
        fp8.get_format("e3m4")
    with pytest.raises(ValueError, match="fmt"):
        fp8.encode(x, "bogus")
    with pytest.raises(TypeError, match="fmt"):
        fp8.get_format(3)
    with pytest.raises(TypeError, match="x"):
        fp8.encode([1.0, 2.0], "e4nv")
    with pytest.raises(TypeError, match="x must be float16, bfloat16 or float32"):
        fp8.encode(x.double(), "e4nv")
    with pytest.raises(TypeError, match="x must be float16, bfloat16 or float32"):
        fp8.encode(x.int(), "e4nv")
    with pytest.raises(ValueError, match="arch"):
        fp8.encode(x, "e4nv", arch="hopper")
    with pytest.raises(ValueError, match="e4nv"):
        fp8.encode(x, "e4nv", arch="sm80")  # Triton refuses e4nv below sm89
    with pytest.raises(TypeError, match="codes"):
        fp8.decode(x, "e4nv")
    with pytest.raises(TypeError, match="a_codes"):
        fp8.ulp_distance([1], torch.zeros(1, dtype=torch.uint8), "e4nv")
    with pytest.raises(ValueError, match="shape"):
        fp8.ulp_distance(torch.zeros(2, dtype=torch.uint8), torch.zeros(3, dtype=torch.uint8), "e4nv")
    for bad in ([1.0], x.double(), x.int()):
        with pytest.raises(TypeError, match="x must be a float16, bfloat16 or float32 tensor"):
            fp8.upcast_fp32(bad)


# ---------------------------------------------------------------------------------------------- decode

ALL_CODES = torch.arange(256, dtype=torch.int32).to(torch.uint8)


@pytest.mark.parametrize("fmt", ["e4nv", "e5m2", "e4m3fnuz", "e5m2fnuz"])
def test_decode_matches_torch_dtypes(fmt):
    f = fp8.get_format(fmt)
    got = fp8.decode(ALL_CODES, fmt)
    want = ALL_CODES.view(f.torch_dtype).float()
    assert got.dtype == torch.float32
    assert torch.equal(torch.isnan(got), torch.isnan(want))
    fin = ~torch.isnan(want)
    assert torch.equal(got[fin].view(torch.int32), want[fin].view(torch.int32))  # bitwise: -0.0 stays -0.0
    # the special codes by torch's own dtypes: fnuz's one NaN (0x80), e5m2's infs and NaNs, e4nv's two NaNs
    assert torch.equal(fp8.is_nan_code(ALL_CODES, fmt), torch.isnan(want))
    assert torch.equal(fp8.is_inf_code(ALL_CODES, fmt), torch.isinf(want))


@pytest.mark.parametrize("fmt", ["e4nv", "e5m2", "e4m3fnuz", "e5m2fnuz"])
def test_format_fields_agree_with_torch_finfo(fmt):
    """The layout fields describe the dtype torch implements; hardware ``satfinite`` saturates at its max."""
    f = fp8.get_format(fmt)
    fi = torch.finfo(f.torch_dtype)
    assert 1 + f.exp_bits + f.man_bits == fi.bits == 8
    assert f.max_finite == f.sat_max == fi.max
    assert 2.0 ** (1 - f.bias) == fi.smallest_normal
    # not fi.eps: torch reports 0.125 for e5m2fnuz, whose codes step from 1.0 to 1.25
    values = ALL_CODES.view(f.torch_dtype).float()
    assert values[values > 1].min().item() == 1 + 2.0 ** -f.man_bits


def test_e4b15_fields_are_e4m3_with_bias_15():
    f = fp8.get_format("e4b15")
    assert (f.exp_bits, f.man_bits, f.bias, f.nan_style) == (4, 3, 15, "none")
    # every code finite: the top magnitude S.1111.111 is 1.875, saturating casts stop one code below it
    top = fp8.decode(torch.tensor([0x7F, 0x7E], dtype=torch.uint8), f).tolist()
    assert top == [f.max_finite, f.sat_max] == [1.875, 1.75]
    assert fp8.decode(torch.tensor([0x08], dtype=torch.uint8), f).item() == 2.0 ** (1 - f.bias)


@pytest.mark.parametrize("fmt", HW_FORMATS)
def test_decode_matches_layout(fmt):
    got = fp8.decode(ALL_CODES, fmt).tolist()
    nan = set(fp8.is_nan_code(ALL_CODES, fmt).nonzero().reshape(-1).tolist())
    inf = set(fp8.is_inf_code(ALL_CODES, fmt).nonzero().reshape(-1).tolist())
    want_nan = (
        {0x7F, 0xFF} if fmt == "e4nv" else {0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF} if fmt == "e5m2" else set()
    )
    assert nan == want_nan
    assert inf == ({0x7C, 0xFC} if fmt == "e5m2" else set())
    for c in range(256):
        if c in nan:
            assert math.isnan(got[c]), hex(c)
        elif c in inf:
            assert got[c] == (math.inf if c < 0x80 else -math.inf)
        else:
            want = _layout_value(c, fmt) if fmt != "e5m2" or (c & 0x7C) != 0x7C else None
            assert Fraction(got[c]) == want, f"code 0x{c:02x}: {got[c]} != {want}"
            assert math.copysign(1, got[c]) == (-1 if c & 0x80 else 1)


def test_e4b15_top_code_decodes_to_1_875():
    # No NaN in e4b15: S.1111.111 is a plain number (H200 decode table), only casts never produce it.
    assert fp8.decode(torch.tensor([0x7F, 0xFF], dtype=torch.uint8), "e4b15").tolist() == [1.875, -1.875]


def test_decode_accepts_float8_tensors_and_checks_format():
    x = torch.tensor([1.5, -448.0]).to(torch.float8_e4m3fn)
    assert fp8.decode(x, "e4nv").tolist() == [1.5, -448.0]
    with pytest.raises(TypeError, match="e5m2"):
        fp8.as_codes(x, "e5m2")


_E5M2_CODES = torch.tensor([0x3C, 0x7C, 0x7E], dtype=torch.uint8)  # e5m2: 1.0, +inf, NaN (e4nv: 1.5, 384, 448)


@pytest.mark.parametrize("call, arg", [
    (lambda c: fp8.decode(c, "e4nv"), "codes"),
    (lambda c: fp8.is_nan_code(c, "e4nv"), "codes"),
    (lambda c: fp8.is_inf_code(c, "e4nv"), "codes"),
    (lambda c: fp8.ulp_distance(c, _E5M2_CODES, "e4nv"), "a_codes"),
    (lambda c: fp8.ulp_distance(_E5M2_CODES, c, "e4nv"), "b_codes"),
], ids=["decode", "is_nan_code", "is_inf_code", "ulp_distance-a", "ulp_distance-b"])
def test_codec_helpers_refuse_a_float8_tensor_of_another_format(call, arg):
    # Reading e5m2 codes as e4nv turned inf and NaN into the finite 384 and 448: the tensor's dtype says which
    # format it is, so a different fmt is a mistake to name, not a reinterpretation.
    with pytest.raises(TypeError, match=rf"^{arg} is torch\.float8_e5m2 \(format e5m2\) but fmt is e4nv"):
        call(_E5M2_CODES.view(torch.float8_e5m2))


def test_codec_helpers_read_a_float8_tensor_of_its_own_format_and_uint8_as_any():
    c = _E5M2_CODES.view(torch.float8_e5m2)
    got = fp8.decode(c, "e5m2").tolist()
    assert got[:2] == [1.0, math.inf] and math.isnan(got[2])
    assert fp8.is_nan_code(c, "e5m2").tolist() == [False, False, True]
    assert fp8.is_inf_code(c, torch.float8_e5m2).tolist() == [False, True, False]
    assert fp8.ulp_distance(c, _E5M2_CODES, "e5m2").tolist() == [0, 0, fp8.ULP_FAR]
    assert fp8.decode(_E5M2_CODES, "e4nv").tolist() == [1.5, 384.0, 448.0]  # uint8: raw codes of any format


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.int32, torch.int64])
def test_integer_tensors_other_than_uint8_are_not_codes(dtype):
    # int8 holds -128..127, not the codes 0..255; taking it silently would accept small integers as codes.
    x = torch.tensor([56, 64], dtype=dtype)
    with pytest.raises(TypeError, match=rf"codes must hold FP8 codes \(uint8 or a torch float8 dtype\), got {dtype}"):
        fp8.as_codes(x)
    with pytest.raises(TypeError, match=r"a_codes must hold FP8 codes"):
        fp8.ulp_distance(x, x.to(torch.uint8), "e4nv")
    if dtype == torch.int8:
        with pytest.raises(TypeError, match=r"pass codes\.view\(torch\.uint8\)"):
            fp8.decode(x, "e4nv")


@pytest.mark.parametrize("fmt", HW_FORMATS)
def test_encode_decode_round_trip_is_identity_on_the_grid(fmt):
    """Every finite code a cast can produce decodes to a value that encodes back to itself."""
    sat = fp8.get_format(fmt).sat_max
    vals = fp8.decode(ALL_CODES, fmt)
    keep = torch.isfinite(vals) & (vals.abs() <= sat)
    assert torch.equal(fp8.encode(vals[keep], fmt), ALL_CODES[keep])


# ---------------------------------------------------------------------------------------------- ulp_distance


def _rank_distance(fmt: str) -> torch.Tensor:
    """Independent definition: |rank(a) - rank(b)| among the sorted distinct finite values (±0: one point)."""
    vals = fp8.decode(ALL_CODES, fmt).double()
    special = fp8.is_nan_code(ALL_CODES, fmt) | fp8.is_inf_code(ALL_CODES, fmt)
    distinct = sorted({float(v) for v, s in zip(vals.tolist(), special.tolist(), strict=True) if not s})
    rank = torch.tensor(
        [
            distinct.index(float(v)) + 0.0 if not s else float("nan")
            for v, s in zip(vals.tolist(), special.tolist(), strict=True)
        ]
    )
    return (rank[:, None] - rank[None, :]).abs(), special


@pytest.mark.parametrize("fmt", HW_FORMATS)
def test_ulp_distance_exhaustive(fmt):
    a = ALL_CODES.repeat_interleave(256)
    b = ALL_CODES.repeat(256)
    d = fp8.ulp_distance(a, b, fmt).reshape(256, 256)
    assert d.dtype == torch.int32
    want, special = _rank_distance(fmt)
    fin = ~(special[:, None] | special[None, :])
    assert torch.equal(d[fin].double(), want[fin])
    # NaN never close, not even to itself; inf only to the identical inf
    nan = fp8.is_nan_code(ALL_CODES, fmt)
    assert bool((d[nan, :] == fp8.ULP_FAR).all()) and bool((d[:, nan] == fp8.ULP_FAR).all())
    inf = fp8.is_inf_code(ALL_CODES, fmt)
    for c in inf.nonzero().reshape(-1).tolist():
        assert d[c, c] == 0
        assert bool((d[c, torch.arange(256) != c] == fp8.ULP_FAR).all())
    assert int(d[fin].max()) < fp8.ULP_FAR


def test_ulp_distance_zero_and_saturation():
    d = fp8.ulp_distance(
        torch.tensor([0x00, 0x7E, 0x01], dtype=torch.uint8),
        torch.tensor([0x80, 0x7E, 0x81], dtype=torch.uint8),
        "e4nv",
    )
    assert d.tolist() == [0, 0, 2]  # ±0 equal; max vs max; smallest subnormals straddle zero


codes = st.integers(0, 255)


@settings(max_examples=300, deadline=None)
@given(a=codes, b=codes, c=codes, fmt=st.sampled_from(HW_FORMATS))
def test_ulp_distance_properties(a, b, c, fmt):
    t = torch.tensor([a, b, c], dtype=torch.uint8)
    special = (fp8.is_nan_code(t, fmt) | fp8.is_inf_code(t, fmt)).tolist()
    va, vb, vc = fp8.decode(t, fmt).tolist()

    def d(x: int, y: int) -> int:
        return int(
            fp8.ulp_distance(torch.tensor([x], dtype=torch.uint8), torch.tensor([y], dtype=torch.uint8), fmt)
        )

    assert d(a, b) == d(b, a)
    if special[0] or special[1]:
        assert d(a, b) == (0 if a == b and not math.isnan(va) else fp8.ULP_FAR)
        return
    assert (d(a, b) == 0) == (va == vb)  # zero iff equal value: same code or ±0
    if not special[2]:
        assert d(a, c) <= d(a, b) + d(b, c)
        if va <= vb <= vc:  # monotone: distance grows with the value gap, additively along the line
            assert d(a, b) <= d(a, c) and d(a, c) == d(a, b) + d(b, c)


# ---------------------------------------------------------------------------------------------- lowering_for


@pytest.mark.parametrize("src", ["fp64", "bogus", "e4nv", torch.float64])
def test_lowering_for_refuses_a_source_no_row_is_for(src):
    # A wildcard ("*") source row would otherwise answer for any name: a made-up fact, not the model's.
    with pytest.raises(ValueError, match=r"src .* is not a source an FP8 cast lowers from; expected fp16, bf16, fp32"):
        fp8.lowering_for(src, "e4nv", 90, triton="3.9")


def test_lowering_for_checks_types_of_src_and_cc():
    with pytest.raises(TypeError, match=r"src must be a dtype name .* got int"):
        fp8.lowering_for(16, "e4nv", 90, triton="3.9")
    for cc in ("90", 90.0, True, None):
        with pytest.raises(TypeError, match=r"cc must be an int compute capability such as 90 \(sm90\)"):
            fp8.lowering_for("fp16", "e4nv", cc, triton="3.9")
    with pytest.raises(ValueError, match=r"cc must be a compute capability >= 0"):
        fp8.lowering_for("fp16", "e4nv", -1, triton="3.9")


@pytest.mark.parametrize("src", ["fp32", "float32", "FP32", torch.float32])
def test_lowering_for_takes_any_spelling_of_a_source(src):
    # sm89 on Triton 3.6-3.8 has an fp32-only row (cvt.rz.f16.f32 first): an alias must find it, not the "*" row.
    row = fp8.lowering_for(src, "e4nv", 89, triton="3.6")
    assert (row.src, row.to16) == ("fp32", "rz")
    assert fp8.lowering_for(src, "e4nv", np.int64(89), triton="3.6") is row  # any integral capability
