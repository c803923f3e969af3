"""sm100's tcgen05.mma (harness.tensor_cores.tcgen05): published, validated on B200 by its authors, not measured here.

Three kinds of evidence:

- the published B200 result words (golden/test_tcgen05_b200, imported by scripts/import_tcgen05_goldens.py from
  sf-tensor/tcgen05's validation vectors): every vector a Triton kernel can reach, and the fp6/fp4 ones through the
  evaluator directly, reproduced word for word (i8 and F16-D vectors do not apply: Triton's tl.dot on fp32
  accumulators never emits them);
- tiles of our own against a scalar rendering of the published rules in exact rationals (written from MODEL.md
  here, output by output): normal, wide-exponent and cancelling, special values, the fp32-subnormal range, with and
  without an accumulator, extreme scale codes;
- what tells sm100 from sm90. fp16: nothing but the NaN word (both windows are 25 bits below the largest product
  exponent, and fp16 products never reach Hopper's -133 clamp): asserted equal on normal tiles, different on NaN.
  bf16/tf32: the fp32-subnormal range (no clamp on tcgen05; Hopper aligns at 2^-133 at least) and the NaN word.
  FP8: everything (25-bit window vs Hopper's 13). dot_scaled: native products are exact (sm90 rounds each scaled
  operand to bf16 first), a C that outranks the products keeps 35 bits (sm90's bf16 wgmma keeps 25), and NaN words.
  Each such input is asserted to give different bits under the sm90 model.
"""

from __future__ import annotations

import math
import random
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import torch

from harness import tensor_cores as tc
from harness.tensor_cores import tcgen05
from harness.tensor_cores.scaled import DotScaledRefused

ROOT = Path(__file__).resolve().parents[3]
GOLDEN = ROOT / "golden" / "test_tcgen05_b200" / "published.npz"
NAN = 0x7FFFFFFF


def _bits(x: torch.Tensor) -> torch.Tensor:
    return x.contiguous().view(torch.int32).to(torch.int64) & 0xFFFFFFFF


# --- the published words --------------------------------------------------------------------------------------------

_Z = np.load(GOLDEN)
_NAMES = [str(n) for n in _Z["name"]]
#: published families a Triton tl.dot / tl.dot_scaled on fp32 accumulators cannot emit
_NOT_APPLICABLE = ("i8-", "mixed-e2m1-e4m3-f16")
_FP6 = {"e2m1": (2, 1, 1), "e2m3": (2, 3, 1), "e3m2": (3, 2, 3)}  # exponent bits, mantissa bits, bias


def _minifloat(codes: np.ndarray, fmt: str) -> torch.Tensor:
    """fp6/fp4 codes (all finite) -> values, decoded from the bit layout."""
    e, m, bias = _FP6[fmt]
    c = codes.astype(np.int64)
    sign = np.where((c >> (e + m)) & 1, -1.0, 1.0)
    ex, fr = (c >> m) & ((1 << e) - 1), c & ((1 << m) - 1)
    mag = np.where(ex == 0, fr * 2.0 ** (1 - bias - m), (fr + 2 ** m) * 2.0 ** (ex - bias - m))
    return torch.from_numpy(sign * mag)


def _vector(i: int) -> tuple[str, int, np.ndarray, np.ndarray, int]:
    k = int(_Z["k"][i])
    return str(_Z["model"][i]), k, _Z["a"][i, :k], _Z["b"][i, :k], int(_Z["c"][i])


def _plain_operand(words: np.ndarray, fmt: str) -> torch.Tensor:
    w = torch.from_numpy(words.astype(np.int64))
    if fmt == "tf32":
        return w.to(torch.int32).view(torch.float32)
    if fmt == "bf16":
        return (w >> 16).to(torch.int16).view(torch.bfloat16)  # the high half of the F32 container
    if fmt == "f16":
        return (w & 0xFFFF).to(torch.int16).view(torch.float16)
    return (w & 0xFF).to(torch.uint8).view({"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}[fmt])


def _pack(codes: np.ndarray) -> torch.Tensor:
    """e2m1 codes along K -> bytes, two a byte, low nibble first (tl.dot_scaled's packing)."""
    c = codes.astype(np.uint8)
    return torch.from_numpy(c[0::2] | (c[1::2] << 4))


def _native_tile(a: torch.Tensor, sa: torch.Tensor, fa: str, b: torch.Tensor, sb: torch.Tensor, fb: str,
                 c: float) -> int:
    """One published vector as output [0, 0] of a native 128 x 16 tl.dot_scaled tile (the other rows and columns
    zero): the model's word there."""
    M, N = 128, 16
    A = torch.zeros((M, a.shape[0]), dtype=a.dtype)
    A[0] = a
    B = torch.zeros((b.shape[0], N), dtype=b.dtype)
    B[:, 0] = b
    SA = torch.full((M, sa.shape[0]), 127, dtype=torch.uint8).view(sa.dtype) if sa.dtype == torch.uint8 else \
        torch.full((M, sa.shape[0]), 0x38, dtype=torch.uint8).view(sa.dtype)
    SB = SA[:N].clone()
    SA[0], SB[0] = sa, sb
    acc = torch.zeros(M, N)
    acc[0, 0] = torch.tensor([c], dtype=torch.int64).to(torch.int32).view(torch.float32)[0]
    out = tc.dot_scaled(A, SA, fa, B, SB, fb, acc, arch="sm100", instr="tcgen05")
    return int(_bits(out)[0, 0])


def _published(i: int) -> int:
    """The model's word for published vector ``i``: through tl.dot / tl.dot_scaled where Triton emits that
    instruction kind, through the evaluator directly for the fp6/fp4 families Triton never gives that kind."""
    model, k, a, b, c = _vector(i)
    C = torch.tensor([[c]], dtype=torch.int64).to(torch.int32).view(torch.float32)
    if model in ("tf32", "bf16", "f16", "e4m3", "e5m2"):
        out = tc.dot(_plain_operand(a, model)[None], _plain_operand(b, model)[:, None], C, arch="sm100",
                     instr="tcgen05", input_precision="tf32")
        return int(_bits(out)[0, 0])
    scaled = bool(_Z["scaled"][i])
    if model in ("mxf4-2x", "nvfp4") or model in ("mxf8f6f4-e4m3", "mxf8f6f4-e5m2"):
        nb = k // (16 if model == "nvfp4" else 32)
        sdt = torch.float8_e4m3fn if model == "nvfp4" else torch.uint8
        sa = torch.from_numpy(_Z["sa"][i, :nb].copy()).view(sdt)
        sb = torch.from_numpy(_Z["sb"][i, :nb].copy()).view(sdt)
        if model.startswith("mxf8f6f4"):
            fmt = model.split("-")[1]
            return _native_tile(_plain_operand(a, fmt), sa, fmt, _plain_operand(b, fmt), sb, fmt, C.item())
        return _native_tile(_pack(a), sa, "e2m1", _pack(b), sb, "e2m1", C.item())
    # the evaluator on its own: fp6/fp4 under kind::f8f6f4 or mxf8f6f4, e8m0 under mxf4nvf4
    fmt = model.split("-")[1] if model.startswith("mxf8f6f4") else ("e2m1" if scaled else model)
    row = tcgen05.KINDS[{"mxf4nvf4-2x": "mxf4nvf4_2x", "mxf4nvf4-4x": "mxf4nvf4_4x"}.get(
        model, "mxf8f6f4" if model.startswith("mxf8f6f4") else "f8f6f4")]
    A, B = _minifloat(a, fmt), _minifloat(b, fmt)
    emin = {"e2m1": 0, "e2m3": 0, "e3m2": -2}[fmt]
    RA, RB = tcgen05._raw(A, emin), tcgen05._raw(B, emin)
    SA = SB = None
    if scaled:
        nb = k // row.scale_block
        (sav, sar), (sbv, sbr) = (tcgen05.scale_operand(torch.from_numpy(_Z[s][i, :nb].copy())) for s in ("sa", "sb"))
        SA = (sav.repeat_interleave(row.scale_block)[None], sar.repeat_interleave(row.scale_block)[None])
        SB = (sbv.repeat_interleave(row.scale_block)[:, None], sbr.repeat_interleave(row.scale_block)[:, None])
    out = tcgen05.mma_chain(A[None], RA[None], B[:, None], RB[:, None], C.double(), row, SA, SB)
    return int(_bits(out)[0, 0])


_APPLICABLE = [i for i, n in enumerate(_NAMES) if not n.startswith(_NOT_APPLICABLE)]


def test_the_goldens_are_the_published_vectors():
    """69 vectors (60 of validate()'s list, 9 of its dense negative-zero checks), 59 of which apply; the file is
    exactly what the import script writes (no hand edits)."""
    assert len(_NAMES) == 69 and len(_APPLICABLE) == 59
    assert "8fce64d" in str(_Z["source"])


def test_the_import_script_writes_the_committed_file(tmp_path, golden):
    assert golden.external("test_tcgen05_b200/published.npz") == GOLDEN  # the file this module reads itself
    out = tmp_path / "published.npz"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "import_tcgen05_goldens.py"), str(out)], check=True,
                   capture_output=True)
    new = np.load(out)
    for key in _Z.files:
        assert np.array_equal(new[key], _Z[key]), key


@pytest.mark.parametrize("i", _APPLICABLE, ids=[_NAMES[i] for i in _APPLICABLE])
def test_every_published_b200_word_is_reproduced(i):
    assert _published(i) == int(_Z["expected"][i]), f"{_NAMES[i]}: 0x{_published(i):08x}"


# --- a scalar rendering of the published rules, exact rationals ----------------------------------------------------

def _raw_exp(x: float, emin: int) -> int:
    return max(math.frexp(x)[1] - 1, emin)


def _tu(x: Fraction, q: int) -> int:
    return int(x / Fraction(2) ** q)  # int() of a Fraction truncates toward zero


def _rz(units: int, q: int) -> float:
    x = Fraction(units) * Fraction(2) ** q
    if x == 0:
        return 0.0
    e = max(math.floor(math.log2(abs(x))), -126)
    while Fraction(2) ** e > abs(x):
        e -= 1
    while Fraction(2) ** (e + 1) <= abs(x):
        e += 1
    e = max(e, -126)
    step = Fraction(2) ** (e - 23)
    r = int(x / step) * step
    if abs(r) >= Fraction(2) ** 128:
        return math.copysign(math.inf, r)
    return float(r)


def _ref_one(terms: list[tuple[float, int, int]], c: float, row: tcgen05.Tcgen05Kind) -> float:
    """One instruction: terms = (exact product as float, raw exponent sum, scale raw sum) per k."""
    vals = [t[0] for t in terms] + [c]
    if any(math.isnan(v) for v in vals) or (math.inf in vals and -math.inf in vals):
        return math.nan
    if any(math.isinf(v) for v in vals):
        return math.inf if math.inf in vals else -math.inf
    nz = [(Fraction(p), r, s) for p, r, s in terms if p != 0]
    rc = _raw_exp(c, -126) if c != 0 else None
    C = Fraction(c)
    if not nz:
        return c if c != 0 else 0.0
    maxR = max(r for _, r, _ in nz)
    if row.product_group is None:
        q = max([maxR] + ([rc] if rc is not None else [])) - row.window
        return _rz(sum(_tu(Fraction(p), q) for p, _, _ in terms) + _tu(C, q), q)
    if rc is not None and rc >= maxR:
        q = rc - 35
        return _rz(_tu(C, q) + sum(_tu(sum(Fraction(t[0]) for t in terms[g:g + 16]), q)
                                   for g in range(0, len(terms), 16)), q)
    S = max(s for _, _, s in nz)
    q = max(max(maxR, rc if rc is not None else maxR) - row.window, S - row.scale_floor)
    groups = []
    for g in range(0, len(terms), row.product_group):
        grp = terms[g:g + row.product_group]
        gnz = [t for t in grp if t[0] != 0]
        bq = q
        if row.per_group_c and rc is not None and gnz and rc >= max(t[1] for t in gnz):
            bq = max(q, rc - 35)
        bu = _tu(sum(Fraction(t[0]) for t in grp), bq) * 2 ** (bq - q)
        groups.append((bu, max(t[2] for t in gnz) if gnz else None))
    d = _rz(_tu(C, q) + sum(bu for bu, _ in groups), q)
    if row.subnormal_floor is not None and d != 0 and abs(d) < 2.0 ** -126:
        thr = 2 ** (row.subnormal_floor - q) if q < row.subnormal_floor else 1
        keep = [bu for bu, gs in groups if not (gs is not None and gs < S and abs(bu) < thr)]
        d = _rz(_tu(C, q) + sum(keep), q)
    return d


def _ref(av, ar, bv, br, c, row, sa=None, sb=None) -> float:
    """The chain over k of one output: av/bv values, ar/br raw exponents; sa/sb (value, raw) per k."""
    acc = c
    for k0 in range(0, len(av), row.k):
        terms = []
        for k in range(k0, k0 + row.k):
            p = av[k] * bv[k]
            r = ar[k] + br[k]
            s = 0
            if sa is not None:
                p = p * sa[k][0] * sb[k][0]
                s = sa[k][1] + sb[k][1]
                r += s
            terms.append((p, r, s))
        acc = _ref_one(terms, acc, row)
    return acc


def test_the_fp32_truncation_is_the_scalar_rule():
    """tcgen05._rz_f32 (bit masks) against _rz (exact rationals): random float64 values over fp32's whole range and
    past it, the subnormal grid, -0 and tiny negatives (+0), the largest finite and 2^128 (inf)."""
    g = torch.Generator().manual_seed(3)
    e = torch.randint(-160, 130, (4000,), generator=g).double()
    x = (torch.rand(4000, generator=g, dtype=torch.float64) + 1) * torch.exp2(e)
    x = torch.cat([x, -x, torch.tensor([0.0, -0.0, -2.0 ** -200, 3.7 * 2.0 ** -149, -3.7 * 2.0 ** -149,
                                        2.0 ** 128 - 2.0 ** 103, 2.0 ** 128, -(2.0 ** 129)], dtype=torch.float64)])
    got = tcgen05._rz_f32(x)
    for v, r in zip(x.tolist(), got.tolist(), strict=True):
        m, ex = math.frexp(v)
        want = _rz(int(m * 2 ** 53), ex - 53)
        assert math.copysign(1, r) == math.copysign(1, want) and (r == want or (math.isinf(r) and r == want)), (v, r)


def _check(out: torch.Tensor, want_fn, picks) -> None:
    for m, n in picks:
        want = want_fn(m, n)
        got = out[m, n].item()
        if math.isnan(want):
            assert int(_bits(out)[m, n]) == NAN, (m, n)
        else:
            assert torch.tensor(want, dtype=torch.float32).view(torch.int32) == out[m, n].view(torch.int32), \
                (m, n, got, want)


# --- tiles of our own: plain tl.dot ---------------------------------------------------------------------------------

def _wide(g: torch.Generator, shape, lo: int, hi: int, fmt: torch.dtype) -> torch.Tensor:
    """Values of every exponent in [lo, hi] with random signs and mantissas, a few zeros: wide exponents make the
    window truncate and the signs make sums cancel."""
    e = torch.randint(lo, hi + 1, shape, generator=g).double()
    m = 1 + torch.rand(shape, generator=g, dtype=torch.float64)
    s = torch.where(torch.rand(shape, generator=g) < 0.5, -1.0, 1.0)
    x = (s * m * torch.pow(2.0, e)).to(fmt)
    return torch.where(torch.rand(shape, generator=g) < 0.1, torch.zeros_like(x), x)


_PLAIN_CASES = {  # name: (dtype, exponent range of a and b, acc exponent range or None)
    "fp16-normal": (torch.float16, (-3, 3), None),
    "fp16-wide-acc": (torch.float16, (-24, 15), (-10, 20)),
    "bf16-wide-acc": (torch.bfloat16, (-40, 40), (-60, 60)),
    "bf16-fp32-subnormal": (torch.bfloat16, (-80, -60), (-149, -127)),
    "tf32-wide-acc": (torch.float32, (-50, 50), (-80, 80)),
    "tf32-fp32-subnormal": (torch.float32, (-80, -60), (-149, -127)),
    "e4m3-wide-acc": (torch.float8_e4m3fn, (-9, 8), (-12, 12)),
    "e5m2-wide": (torch.float8_e5m2, (-16, 15), None),
}


@pytest.mark.parametrize("case", list(_PLAIN_CASES))
def test_plain_tiles_are_the_published_rules(case):
    dt, (lo, hi), acc_range = _PLAIN_CASES[case]
    g = torch.Generator().manual_seed(hash(case) % 1000)
    M, N, K = 64, 16, 64
    a, b = _wide(g, (M, K), lo, hi, dt), _wide(g, (K, N), lo, hi, dt)
    acc = None if acc_range is None else _wide(g, (M, N), *acc_range, torch.float32)
    out = tc.dot(a, b, acc, arch="sm100", instr="tcgen05")
    fmt = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "tf32", torch.float8_e4m3fn: "e4m3",
           torch.float8_e5m2: "e5m2"}[dt]
    row = tcgen05.KINDS[{"fp16": "f16", "bf16": "f16", "tf32": "tf32"}.get(fmt, "f8f6f4")]
    A, RA = tcgen05.operand(a, fmt)
    B, RB = tcgen05.operand(b, fmt)
    rng = random.Random(case)
    picks = [(rng.randrange(M), rng.randrange(N)) for _ in range(12)]
    _check(out, lambda m, n: _ref(A[m].tolist(), RA[m].tolist(), B[:, n].tolist(), RB[:, n].tolist(),
                                  0.0 if acc is None else acc[m, n].item(), row), picks)


def test_special_values_are_the_published_words():
    """inf * 0, NaN (any payload), opposite infinities: 0x7fffffff; one infinity: itself; an inf accumulator meets
    the products; a NaN that tf32 truncation turns into inf is inf."""
    a = torch.ones(4, 16, dtype=torch.bfloat16)
    b = torch.ones(16, 4, dtype=torch.bfloat16)
    a[0, 3], b[3, 0] = float("inf"), 0.0     # inf * 0
    a[1, 2] = float("nan")                   # NaN times 1
    a[2, 0], a[2, 16 - 1] = float("inf"), -float("inf")  # opposite infinities, one instruction
    acc = torch.zeros(4, 4)
    acc[3, 1] = -float("inf")                # an inf accumulator with finite products
    out = _bits(tc.dot(a, b, acc, arch="sm100", instr="tcgen05"))
    assert out[0, 0] == NAN and out[1, 0] == NAN and out[2, 0] == NAN
    assert out[3, 1] == 0xFF800000 and out[3, 2] == 0x41800000  # -inf; 16.0 (b[3, 0] is the 0 above)
    x = torch.tensor([[0x7F800001] + [0x3F800000] * 7], dtype=torch.int32).view(torch.float32)  # NaN in low bits
    y = torch.ones(8, 1)
    assert _bits(tc.dot(x, y, arch="sm100", instr="tcgen05"))[0, 0] == 0x7F800000


# --- what tells sm100 from sm90 ---------------------------------------------------------------------------------------

def test_fp16_in_the_normal_range_cannot_tell_sm100_from_sm90():
    """fp16 tiles whose products and sums stay in fp32's normal range come out the same on both, NaN words
    included (0x7fffffff: published for tcgen05, in every NaN of the H200 wgmma goldens): such inputs test
    nothing sm100-specific. The tests below choose inputs that do tell them apart."""
    g = torch.Generator().manual_seed(5)
    a, b = _wide(g, (64, 64), -14, 10, torch.float16), _wide(g, (64, 32), -14, 10, torch.float16)
    acc = _wide(g, (64, 32), -20, 20, torch.float32)
    a[0, 0] = float("nan")
    new, old = _bits(tc.dot(a, b, acc, arch="sm100", instr="tcgen05")), _bits(tc.dot(a, b, acc, arch="sm90",
                                                                                     instr="wgmma"))
    assert torch.equal(new, old)
    assert new[0, 0] == NAN and int((new == NAN).sum()) == 32  # row 0 of the output, every column


@pytest.mark.parametrize("dt", [torch.bfloat16, torch.float32], ids=["bf16", "tf32"])
def test_the_fp32_subnormal_range_tells_sm100_from_sm90(dt):
    """No window clamp on tcgen05: products near 2^-140 keep bits that Hopper's 2^-133 clamp truncates."""
    g = torch.Generator().manual_seed(7)
    a, b = _wide(g, (64, 64), -75, -64, dt), _wide(g, (64, 16), -75, -64, dt)
    new, old = tc.dot(a, b, arch="sm100", instr="tcgen05"), tc.dot(a, b, arch="sm90", instr="wgmma")
    assert (_bits(new) != _bits(old)).any()


@pytest.mark.parametrize("pair", [("e4m3", "e4m3"), ("e4m3", "e5m2"), ("e5m2", "e5m2")])
def test_fp8_windows_tell_sm100_from_sm90(pair):
    """kind::f8f6f4 keeps 25 fraction bits where Hopper's FP8 wgmma keeps 13."""
    g = torch.Generator().manual_seed(9)
    dts = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
    a, b = _wide(g, (64, 64), -6, 8, dts[pair[0]]), _wide(g, (64, 16), -6, 8, dts[pair[1]])
    new, old = tc.dot(a, b, arch="sm100", instr="tcgen05"), tc.dot(a, b, arch="sm90", instr="wgmma")
    assert (_bits(new) != _bits(old)).float().mean() > 0.05


# --- tf32x3 (input_precision="tf32x3") --------------------------------------------------------------------------------

def _rna(x: torch.Tensor) -> torch.Tensor:
    """cvt.rna.tf32.f32 of finite fp32 values: 10 fraction bits, ties away from zero."""
    return ((x.view(torch.int32) + 0x1000) & -8192).view(torch.float32)


def _tf32x3_ref(a: torch.Tensor, b: torch.Tensor, acc: torch.Tensor, m: int, n: int, order: str) -> float:
    """Output (m, n) of tf32x3 from the scalar rules: split each operand (``big = cvt.rna.tf32``, ``small = x - big``
    in fp32), three kind::tf32 chains into one accumulator in ``order`` (the compiled one: "small-big, big-small,
    big-big"), NaN to 0 before the last, then add.f32 of the tile's accumulator."""
    row = tcgen05.KINDS["tf32"]
    parts = {"big": (_rna(a[m]), _rna(b[:, n].contiguous()))}
    parts["small"] = (a[m] - parts["big"][0], b[:, n] - parts["big"][1])

    def chain(x: torch.Tensor, y: torch.Tensor, c: float) -> float:
        X, RX = tcgen05.operand(x, "tf32")
        Y, RY = tcgen05.operand(y, "tf32")
        return _ref(X.tolist(), RX.tolist(), Y.tolist(), RY.tolist(), c, row)

    d = 0.0
    steps = [s.split("-") for s in order.split(", ")]
    for i, (pa, pb) in enumerate(steps):
        if i == len(steps) - 1 and math.isnan(d):
            d = 0.0
        d = chain(parts[pa][0], parts[pb][1], d)
    return float(np.float32(d) + np.float32(acc[m, n].item()))


_COMPILED = "small-big, big-small, big-big"


def test_tf32x3_is_three_kind_tf32_chains_in_the_compiled_order():
    """Triton 3.6 and 3.9 for cuda:100 (tcgen05.LOWERING["tf32x3"]): a_small x b_big, then a_big x b_small, into
    one TMEM accumulator from zero, NaN set to 0, then a_big x b_big on it, then add.f32x2 of the accumulator. The
    same tile in another order (big-big first, as the three-term sum reads) gives other bits, so the order is what
    this checks. Swapping only the first two chains shows in 2 of this tile's 1024 outputs ((26, 9) and (28, 15),
    found by evaluating all of them): the third chain's window (2^-25 of its largest product, which is at least
    2^11 / K times the first two's sum) drops nearly every bit where they differ; those two outputs are checked."""
    g = torch.Generator().manual_seed(13)
    M, N, K = 64, 16, 64
    a, b = _wide(g, (M, K), -12, 12, torch.float32), _wide(g, (K, N), -12, 12, torch.float32)
    acc = _wide(g, (M, N), -8, 20, torch.float32)
    out = tc.dot(a, b, acc, arch="sm100", instr="tcgen05", input_precision="tf32x3")
    rng = random.Random(13)
    picks = [(rng.randrange(M), rng.randrange(N)) for _ in range(12)] + [(26, 9), (28, 15)]
    _check(out, lambda m, n: _tf32x3_ref(a, b, acc, m, n, _COMPILED), picks)
    for m, n in ((26, 9), (28, 15)):
        assert _tf32x3_ref(a, b, acc, m, n, "big-small, small-big, big-big") != _tf32x3_ref(a, b, acc, m, n, _COMPILED)
    # an inf operand: the three chains one by one (the finite tile above runs as one chain over the three k ranges),
    # the NaN of a_small x b_big (inf - inf) set to 0 before the last chain, whose inf then gives the output
    a[3, 5], a[4, 7], b[7, 2] = float("inf"), -float("inf"), float("inf")
    out = tc.dot(a, b, acc, arch="sm100", instr="tcgen05", input_precision="tf32x3")
    _check(out, lambda m, n: _tf32x3_ref(a, b, acc, m, n, _COMPILED), [(3, 0), (3, 2), (4, 2), (4, 3), (5, 2)])
    # a finite operand that cvt.rna rounds up to inf (its small part -inf): the three chains as well
    a[3, 5], a[4, 7], b[7, 2] = torch.finfo(torch.float32).max, 1.0, 1.0
    out = tc.dot(a, b, acc, arch="sm100", instr="tcgen05", input_precision="tf32x3")
    _check(out, lambda m, n: _tf32x3_ref(a, b, acc, m, n, _COMPILED), [(3, 0), (3, 2), (3, 7)])
    other = [(m, n) for m in range(8) for n in range(N)
             if _tf32x3_ref(a, b, acc, m, n, "big-big, small-big, big-small") != _tf32x3_ref(a, b, acc, m, n,
                                                                                            _COMPILED)]
    assert len(other) > 10, "the order does not matter on these inputs: the test would not see a wrong one"


def test_tf32x3_in_the_normal_range_cannot_tell_sm100_from_sm90_and_the_subnormal_range_can():
    """Both lower tf32x3 the same way (F32DotTC; sm90 measured on the H200, sm100 read from the PTX) over 25-bit
    windows of k=8: operands whose products stay in fp32's normal range give the same bits. Below 2^-133 Hopper's
    window clamps and tcgen05's does not (products near 2^-140, small parts near 2^-151)."""
    g = torch.Generator().manual_seed(17)
    a, b = _wide(g, (64, 64), -20, 20, torch.float32), _wide(g, (64, 16), -20, 20, torch.float32)
    acc = _wide(g, (64, 16), -20, 20, torch.float32)
    kw = dict(input_precision="tf32x3")
    assert torch.equal(_bits(tc.dot(a, b, acc, arch="sm100", instr="tcgen05", **kw)),
                       _bits(tc.dot(a, b, acc, arch="sm90", instr="wgmma", **kw)))
    a, b = _wide(g, (64, 64), -75, -64, torch.float32), _wide(g, (64, 16), -75, -64, torch.float32)
    new = tc.dot(a, b, arch="sm100", instr="tcgen05", **kw)
    assert (_bits(new) != _bits(tc.dot(a, b, arch="sm90", instr="wgmma", **kw))).any()
    picks = [(m, n) for m in range(0, 64, 9) for n in range(0, 16, 5)]
    _check(new, lambda m, n: _tf32x3_ref(a, b, torch.zeros(64, 16), m, n, _COMPILED), picks)


# --- tiles of our own: native tl.dot_scaled ---------------------------------------------------------------------------

def _codes(g, shape) -> torch.Tensor:
    return torch.randint(0, 16, shape, generator=g, dtype=torch.uint8)


def _scaled_ref(a_vals, b_vals, sa, sb, acc, row, fa, fb, m, n, group):
    av = a_vals[m].tolist()
    bv = b_vals[:, n].tolist()
    emin = {"e2m1": 0, "e4m3": -6, "e5m2": -14}
    ar = [_raw_exp(x, emin[fa]) if x != 0 and math.isfinite(x) else 0 for x in av]
    br = [_raw_exp(x, emin[fb]) if x != 0 and math.isfinite(x) else 0 for x in bv]
    (sav, sar), (sbv, sbr) = tcgen05.scale_operand(sa[m]), tcgen05.scale_operand(sb[n])
    spa = [(sav[k // group].item(), int(sar[k // group])) for k in range(len(av))]
    spb = [(sbv[k // group].item(), int(sbr[k // group])) for k in range(len(av))]
    return _ref(av, ar, bv, br, 0.0 if acc is None else acc[m, n].item(), row, spa, spb)


_SCALED_CASES = {  # name: (a format, b format, scale kind, acc)
    "mxf4": ("e2m1", "e2m1", "e8m0", True),
    "mxf4-noacc": ("e2m1", "e2m1", "e8m0", False),
    "nvfp4": ("e2m1", "e2m1", "ue4m3", True),
    "mxf8f6f4-e4m3": ("e4m3", "e4m3", "e8m0", True),
    "mxf8f6f4-e5m2-e4m3": ("e5m2", "e4m3", "e8m0", False),
    "mxf8f6f4-e2m1-e4m3": ("e2m1", "e4m3", "e8m0", True),
}


def _operands(g, fa, fb, M, N, K):
    def one(fmt, rows, cols, along_k_last):
        if fmt == "e2m1":
            shape = (rows, cols // 2) if along_k_last else (rows // 2, cols)
            return _codes(g, shape) | (_codes(g, shape) << 4)
        codes = torch.randint(0, 256, (rows, cols), generator=g, dtype=torch.uint8)
        dt = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}[fmt]
        bad = torch.isnan(codes.view(dt).float()) | torch.isinf(codes.view(dt).float())
        return torch.where(bad, torch.zeros_like(codes), codes).view(dt)
    return one(fa, M, K, True), one(fb, K, N, False)


@pytest.mark.parametrize("case", list(_SCALED_CASES))
def test_native_scaled_tiles_are_the_published_rules(case):
    """Random operands, scales of every code from tiny to huge (e8m0: 0x00, 0x7F, 0xFE and 100-150; ue4m3 all
    finite codes), an accumulator of every magnitude: sampled outputs against the scalar rules."""
    fa, fb, skind, with_acc = _SCALED_CASES[case]
    g = torch.Generator().manual_seed(len(case) * 31)
    M, N, K = 128, 16, 128
    group = 16 if skind == "ue4m3" else 32
    a, b = _operands(g, fa, fb, M, N, K)
    if skind == "e8m0":
        pool = torch.tensor([0x00, 0x7F, 0xFE] + list(range(100, 151)), dtype=torch.uint8)
        sa, sb = (pool[torch.randint(0, len(pool), (r, K // group), generator=g)] for r in (M, N))
    else:
        sa, sb = (torch.randint(1, 0x7F, (r, K // group), generator=g, dtype=torch.uint8).view(torch.float8_e4m3fn)
                  for r in (M, N))
    acc = _wide(g, (M, N), -30, 30, torch.float32) if with_acc else None
    out = tc.dot_scaled(a, sa, fa, b, sb, fb, acc, arch="sm100", instr="tcgen05")
    from harness.tensor_cores.scaled import _operand
    av = _operand(a, fa, "bf16", True, rhs=False) if fa == "e2m1" else a.double()
    bv = _operand(b, fb, "bf16", True, rhs=True) if fb == "e2m1" else b.double()
    row = tcgen05.scaled_row(fa, fb, sa.dtype, group)
    rng = random.Random(case)
    picks = [(rng.randrange(M), rng.randrange(N)) for _ in range(16)]
    _check(out, lambda m, n: _scaled_ref(av, bv, sa, sb, acc, row, fa, fb, m, n, group), picks)


def _mx_tile(value_a: int, value_b: int, sa_code: int, sb_code: int, K: int = 64):
    a = torch.full((128, K // 2), value_a | (value_a << 4), dtype=torch.uint8)
    b = torch.full((K // 2, 16), value_b | (value_b << 4), dtype=torch.uint8)
    sa = torch.full((128, K // 32), sa_code, dtype=torch.uint8)
    sb = torch.full((16, K // 32), sb_code, dtype=torch.uint8)
    return a, sa, b, sb


def test_a_c_that_outranks_the_products_tells_native_from_sm90():
    """Scale code 0x7F on both sides, products 1 * 2 = 2 (64 of them) under c = 2^30: native mxf4 takes c's 35-bit
    window over K=16 group sums (2^30 + 128); sm90's bf16 wgmma aligns each 16-product block to c's exponent with 25
    bits (a step of 32), truncating every 2 away."""
    a, sa, b, sb = _mx_tile(0x2, 0x4, 0x7F, 0x7F)  # e2m1 1.0 and 2.0
    acc = torch.full((128, 16), 2.0 ** 30)
    new = tc.dot_scaled(a, sa, "e2m1", b, sb, "e2m1", acc, arch="sm100", instr="tcgen05")
    old = tc.dot_scaled(a, sa, "e2m1", b, sb, "e2m1", acc, arch="sm90", instr="wgmma")
    assert new[0, 0].item() == 2.0 ** 30 + 128 and old[0, 0].item() == 2.0 ** 30


def test_scale_code_0x00_is_exact_natively_and_underflows_in_sm90s_bf16():
    """e4m3 subnormal 2^-9 times scale 2^-127 is 2^-136: exact in the native product, below bf16's smallest
    subnormal (2^-133) in sm90's scale multiply; times b's scale 2^127 (code 0xFE) it is 2^-9 either way."""
    a = torch.full((128, 32), 0x01, dtype=torch.uint8).view(torch.float8_e4m3fn)  # 2^-9
    b = torch.full((32, 16), 0x38, dtype=torch.uint8).view(torch.float8_e4m3fn)   # 1.0
    sa = torch.zeros(128, 1, dtype=torch.uint8)
    sb = torch.full((16, 1), 0xFE, dtype=torch.uint8)
    new = tc.dot_scaled(a, sa, "e4m3", b, sb, "e4m3", arch="sm100", instr="tcgen05")
    old = tc.dot_scaled(a, sa, "e4m3", b, sb, "e4m3", arch="sm90", instr="wgmma")
    assert new[0, 0].item() == 32 * 2.0 ** -9 and old[0, 0].item() == 0.0


def test_scale_code_0xff_is_the_nan_word_natively_and_emulated():
    """A NaN scale (e8m0 0xFF) makes every output the word 0x7fffffff on tcgen05 (published) and on sm90's
    emulation, whose tensor-core dot writes that word for any NaN (every NaN of the H200 dot_scaled goldens)."""
    a, sa, b, sb = _mx_tile(0x2, 0x2, 0xFF, 0x7F)
    new = _bits(tc.dot_scaled(a, sa, "e2m1", b, sb, "e2m1", arch="sm100", instr="tcgen05"))
    old = _bits(tc.dot_scaled(a, sa, "e2m1", b, sb, "e2m1", arch="sm90", instr="wgmma"))
    assert (new == NAN).all()
    assert (old == NAN).all()


def test_the_nvfp4_c_dominant_path_and_k4_groups():
    """ue4m3 scales: 0x00 makes its products zero (c passes through, -0 becomes +0), 0x7F is NaN."""
    a, _, b, _ = _mx_tile(0x2, 0x2, 0, 0)
    sa = torch.full((128, 4), 0x38, dtype=torch.uint8).view(torch.float8_e4m3fn)
    sb = torch.zeros(16, 4, dtype=torch.uint8).view(torch.float8_e4m3fn)
    acc = torch.full((128, 16), -0.0)
    assert (_bits(tc.dot_scaled(a, sa, "e2m1", b, sb, "e2m1", acc, arch="sm100", instr="tcgen05")) == 0).all()
    sb = torch.full((16, 4), 0x7F, dtype=torch.uint8).view(torch.float8_e4m3fn)
    assert (_bits(tc.dot_scaled(a, sa, "e2m1", b, sb, "e2m1", arch="sm100", instr="tcgen05")) == NAN).all()


# --- the lowering --------------------------------------------------------------------------------------------------

def test_which_scaled_tiles_are_native_follows_the_compiler():
    for m, n in ((128, 16), (128, 32), (128, 64), (128, 128), (256, 128)):
        assert tcgen05.native_tile(m, n), (m, n)
    for m, n in ((64, 64), (64, 128), (128, 8)):
        assert not tcgen05.native_tile(m, n), (m, n)


def test_small_scaled_tiles_run_sm90s_upcast_on_kind_f16():
    """A 64x64 tile is emulated: e2m1 times an e8m0 scale is exact in bf16 here, so it is the kind::f16 dot of
    the exactly scaled operands; a native 128-row tile of the same rows differs (its window is 39 bits)."""
    g = torch.Generator().manual_seed(2)
    a = _codes(g, (64, 32)) | (_codes(g, (64, 32)) << 4)
    b = _codes(g, (32, 64)) | (_codes(g, (32, 64)) << 4)
    sa = torch.randint(120, 135, (64, 2), generator=g, dtype=torch.uint8)
    sb = torch.randint(120, 135, (64, 2), generator=g, dtype=torch.uint8)
    acc = _wide(g, (64, 64), -10, 10, torch.float32)
    out = tc.dot_scaled(a, sa, "e2m1", b, sb, "e2m1", acc, arch="sm100", instr="tcgen05")
    from harness.tensor_cores.scaled import _operand
    A = _operand(a, "e2m1", "bf16", True, rhs=False) * torch.pow(2.0, sa.double() - 127).repeat_interleave(32, -1)
    B = _operand(b, "e2m1", "bf16", True, rhs=True) * torch.pow(2.0, sb.double() - 127).repeat_interleave(32, -1).T
    want = tc.dot(A.to(torch.bfloat16), B.to(torch.bfloat16), acc, arch="sm100", instr="tcgen05")
    assert torch.equal(_bits(out), _bits(want))


def test_what_the_sm100_compiler_refuses():
    x = torch.ones(128, 64, dtype=torch.bfloat16)
    s = torch.full((128, 2), 127, dtype=torch.uint8)
    with pytest.raises(DotScaledRefused, match="native sm100 tile"):
        tc.dot_scaled(x, s, "bf16", x.T.contiguous()[:, :16], s[:16], "bf16", arch="sm100", instr="tcgen05")
    a, sa, b, sb = _mx_tile(0x2, 0x2, 0x7F, 0x7F, K=64)
    with pytest.raises(DotScaledRefused, match="K=32"):
        tc.dot_scaled(a[:, :16], sa[:, :1], "e2m1", b[:16], sb[:, :1], "e2m1", arch="sm100", instr="tcgen05")


def test_sm103_is_unverified_and_sm120_stays_refused():
    a, sa, b, sb = _mx_tile(0x2, 0x2, 0x7F, 0x7F)
    with pytest.raises(NotImplementedError, match="unverified"):
        tc.dot_scaled(a, sa, "e2m1", b, sb, "e2m1", arch="sm103", instr="tcgen05")
    with pytest.raises(NotImplementedError, match="native mma.sync ... block_scale, whose numerics no published"):
        tc.dot_scaled(a, sa, "e2m1", b, sb, "e2m1", arch="sm120", instr="mma")
    e5 = torch.zeros(64, 32, dtype=torch.float8_e5m2)
    with pytest.raises(NotImplementedError, match="on sm120"):
        tc.dot(e5, e5.T.contiguous(), arch="sm120", instr="mma")


def test_every_row_says_published():
    for row in tcgen05.KINDS.values():
        assert row.provenance == "published" and "sf-tensor/tcgen05" in row.source
        assert "not measured here" in repr(row)


def _mx_one(a_codes: dict[int, int], b_codes: dict[int, int], sa: list[int], sb: list[int], c: float = 0.0):
    """Output [0, 0] of a native 128 x 16 x 64 e2m1 tile (mxf4, e8m0 per 32 k): A row 0 and B column 0 hold the
    given codes at the given k (0 elsewhere), their scale codes per block ``sa``/``sb``."""
    A = np.zeros((128, 64), np.uint8)
    B = np.zeros((64, 16), np.uint8)
    for k, v in a_codes.items():
        A[0, k] = v
    for k, v in b_codes.items():
        B[k, 0] = v
    a = torch.from_numpy(A[:, 0::2] | (A[:, 1::2] << 4))
    b = torch.from_numpy(B[0::2] | (B[1::2] << 4))
    SA = torch.full((128, 2), 127, dtype=torch.uint8)
    SB = torch.full((16, 2), 127, dtype=torch.uint8)
    SA[0], SB[0] = torch.tensor(sa, dtype=torch.uint8), torch.tensor(sb, dtype=torch.uint8)
    acc = torch.zeros(128, 16)
    acc[0, 0] = c
    return a, SA, b, SB, acc


def test_a_group_that_c_outranks_goes_through_cs_window():
    """c = 8 (raw 3); k 0-15: 6*6 - 6*6 - 4*2 = -8 (raw 4: c does not outrank the tile); k 32-47 (scale 2^-34):
    five products 1*1*2^-34 = 1.25 * 2^-32 (raw -34 <= 3: c outranks this group). q = max(4 - 39, 0 - 35) = -35,
    but the outranked group is truncated at c's window 2^(3 - 35) first: 2^-32; d = 8 - 8 + 2^-32 = 2^-32. sm90's
    bf16 wgmma keeps the group whole: 1.25 * 2^-32."""
    a = {0: 0x7, 1: 0x7, 2: 0x6, **{32 + i: 0x2 for i in range(5)}}
    b = {0: 0x7, 1: 0xF, 2: 0xC, **{32 + i: 0x2 for i in range(5)}}
    args = _mx_one(a, b, [127, 127 - 34], [127, 127], 8.0)
    new = tc.dot_scaled(args[0], args[1], "e2m1", args[2], args[3], "e2m1", args[4], arch="sm100", instr="tcgen05")
    old = tc.dot_scaled(args[0], args[1], "e2m1", args[2], args[3], "e2m1", args[4], arch="sm90", instr="wgmma")
    assert new[0, 0].item() == 2.0 ** -32 and old[0, 0].item() == 1.25 * 2.0 ** -32


def test_the_subnormal_group_floor_drops_a_tiny_lower_scale_group():
    """k 0: 6*6 at scale 2^-150 (codes 0 and 104): 18 * 2^-149, an fp32 subnormal; k 32: 0.5*-0.5 at scale
    2^-176 (codes 0 and 78): -2^-178. q = max(-146 - 39, -150 - 35) = -185 < -174, so the floor is 2^11 units;
    the small group (-128 units, lower scale) is dropped: 18 * 2^-149. Kept, it would pull the truncated sum to
    17 * 2^-149."""
    args = _mx_one({0: 0x7, 32: 0x1}, {0: 0x7, 32: 0x9}, [0, 0], [104, 78])
    new = tc.dot_scaled(args[0], args[1], "e2m1", args[2], args[3], "e2m1", args[4], arch="sm100", instr="tcgen05")
    assert new[0, 0].item() == 18 * 2.0 ** -149


def test_an_unscaled_operand_is_emulated_on_kind_f16():
    """Triton 3.9 emulates a 128 x 128 tile with an unscaled operand (kind::f16, LOWERING): the kind::f16 dot of
    the bf16 operands (e2m1 values and e8m0 scales near 1 are exact in bf16)."""
    g = torch.Generator().manual_seed(4)
    a = _codes(g, (128, 32)) | (_codes(g, (128, 32)) << 4)
    b = _codes(g, (32, 16)) | (_codes(g, (32, 16)) << 4)
    sa = torch.randint(120, 135, (128, 2), generator=g, dtype=torch.uint8)
    out = tc.dot_scaled(a, sa, "e2m1", b, None, "e2m1", arch="sm100", instr="tcgen05")
    from harness.tensor_cores.scaled import _operand
    A = _operand(a, "e2m1", "bf16", True, rhs=False) * torch.pow(2.0, sa.double() - 127).repeat_interleave(32, -1)
    B = _operand(b, "e2m1", "bf16", True, rhs=True)
    want = tc.dot(A.to(torch.bfloat16), B.to(torch.bfloat16), arch="sm100", instr="tcgen05")
    assert torch.equal(_bits(out), _bits(want))


@pytest.mark.parametrize("version,refused", [("3.6", True), ("3.9", False)])
def test_nvfp4_on_an_emulated_sm100_tile_follows_the_compiler(version, refused):
    """Triton 3.6 refuses NVFP4 on a 64 x 64 sm100 tile (emulated; PassManager::run failed), 3.9 compiles it;
    native 128-row tiles compile with both."""
    a = torch.full((64, 32), 0x22, dtype=torch.uint8)
    s = torch.full((64, 4), 0x38, dtype=torch.uint8).view(torch.float8_e4m3fn)
    if refused:
        with pytest.raises(DotScaledRefused, match="NVFP4"):
            tc.dot_scaled(a, s, "e2m1", a.T.contiguous(), s, "e2m1", arch="sm100", instr="tcgen05", triton=version)
    else:
        assert (tc.dot_scaled(a, s, "e2m1", a.T.contiguous(), s, "e2m1", arch="sm100", instr="tcgen05",
                              triton=version) == 64).all()
    a, s = torch.full((128, 32), 0x22, dtype=torch.uint8), torch.full((128, 4), 0x38, dtype=torch.uint8)
    out = tc.dot_scaled(a, s.view(torch.float8_e4m3fn), "e2m1", a[:16].T.contiguous(),
                        s[:16].view(torch.float8_e4m3fn), "e2m1", arch="sm100", instr="tcgen05", triton=version)
    assert (out == 64).all()
