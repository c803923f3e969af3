"""harness.tensor_cores.dot_scaled: every operand and scale code decoded as Triton's sm90 lowering does (ml_dtypes
the oracle for e2m1/e4m3/e5m2/e8m0), the NaN/inf rules of each scale code 0..255 per Triton version and
fast_math, the model against an exact float64 reference within the derived bound of the dot after the upcast,
k-pack and batched forms, refusals where the compiler refuses, and bad inputs named; sm80-sm89: the A100 dot of the
same upcast operands in the k order of Triton's operand layout, and what their compilers refuse."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import torch

from harness.tensor_cores import LOWERINGS, DotScaledRefused, dot, dot_scaled, error_bound, lowering_for

#: The model on CPU tensors, each Triton version named, no kernel: the same on every lane, so the GPU lane
#: leaves them to the CPU lanes (44 s of the 1,025 s summed over the H200 lane of 2026-12-05; docs/gpu-lane.md).
pytestmark = pytest.mark.lane_independent

VERSIONS = ("3.6", "3.9")
FORMATS = ("e2m1", "e4m3", "e5m2", "bf16", "fp16")
_ML = {"e2m1": ml_dtypes.float4_e2m1fn, "e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}
_TORCH = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2, "bf16": torch.bfloat16, "fp16": torch.float16}


def _oracle(fmt: str, codes: np.ndarray) -> np.ndarray:
    """float64 values of byte codes per ml_dtypes (e2m1: the low nibble)."""
    if fmt == "e2m1":
        return np.array(_e2m1_table())[codes & 0xF]
    return codes.astype(np.uint8).view(_ML[fmt]).astype(np.float64)


def _e2m1_table() -> list[float]:
    """ml_dtypes' float4_e2m1fn of each 4-bit code (it holds one code a byte)."""
    return [float(np.array([c], dtype=np.uint8).view(ml_dtypes.float4_e2m1fn)[0]) for c in range(16)]


def _e8m0(codes: np.ndarray) -> np.ndarray:
    return codes.astype(np.uint8).view(ml_dtypes.float8_e8m0fnu).astype(np.float64)


def _probe(fmt: str, codes: torch.Tensor, other: str = "bf16", **kw) -> torch.Tensor:
    """Each code (one per row of a) times 1.0 of ``other`` (one output per code): a one-product dot, exact in the
    tensor cores, so the output is the upcast (and scaled) operand value."""
    n = codes.numel()
    K = 32
    if fmt == "e2m1":
        a = torch.zeros(n, K // 2, dtype=torch.uint8)
        a[:, 0] = codes.to(torch.uint8) & 0xF
    else:
        a = torch.zeros(n, K, dtype=torch.uint8 if fmt in ("e4m3", "e5m2") else _TORCH[fmt])
        a[:, 0] = codes.to(torch.uint8) if fmt in ("e4m3", "e5m2") else codes
    b = torch.zeros(K, 1, dtype=_TORCH[other])
    b[0, 0] = 1.0
    return dot_scaled(a, kw.pop("a_scale", None), fmt, b, None, other, **kw)[:, 0].double()


def _same(got: torch.Tensor, want: torch.Tensor) -> bool:
    g, w = got.double(), torch.as_tensor(want, dtype=torch.float64)
    return bool(((g == w) & (torch.signbit(g) == torch.signbit(w)) | (g.isnan() & w.isnan())).all())


# --- decoding of every code ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["e2m1", "e4m3"])
@pytest.mark.parametrize("other", ["bf16", "fp16"])
def test_every_code_upcasts_exactly(fmt, other):
    n = 16 if fmt == "e2m1" else 256
    codes = torch.arange(n)
    want = _oracle(fmt, codes.numpy().astype(np.uint8))
    got = _probe(fmt, codes, other, triton="3.6")
    zero = want == 0  # a zero product: the dot's result is +0 (the sign of a zero operand does not survive)
    assert _same(got[~torch.from_numpy(zero)], want[~zero])
    assert bool((got[torch.from_numpy(zero)] == 0).all())


def test_e5m2_in_fp16_is_exact_and_in_bf16_its_specials_turn_finite():
    """fp16 compute: cvt.rn.f16x2.e5m2x2 (exact, inf and NaN kept). bf16 compute: both Tritons' bit trick
    (magnitude >> 3 into bf16, times 2^112): finite codes exact, inf/NaN codes become ±2^16 (1 + m/4)."""
    codes = torch.arange(256)
    want = _oracle("e5m2", codes.numpy().astype(np.uint8))
    nz = want != 0
    got16 = _probe("e5m2", codes, "fp16", triton="3.6")
    assert _same(got16[torch.from_numpy(nz)], want[nz])
    got = _probe("e5m2", codes, "bf16", triton="3.6")
    special = ~np.isfinite(want)
    m = codes.numpy() & 3
    sign = np.where(codes.numpy() & 0x80, -1.0, 1.0)
    assert _same(got[torch.from_numpy(special)], (sign * 2.0 ** 16 * (1 + m / 4))[special])
    fin = ~special & nz
    assert _same(got[torch.from_numpy(fin)], want[fin])


def test_every_bf16_and_fp16_operand_is_kept_and_bf16_rounds_to_fp16_on_39():
    every = torch.arange(65536, dtype=torch.int32).to(torch.int16)
    for fmt, other, version in (("bf16", "bf16", "3.6"), ("fp16", "fp16", "3.6"), ("bf16", "fp16", "3.9")):
        x = every.view(_TORCH[fmt])
        got = _probe(fmt, x, other, triton=version)
        want = x.double() if fmt == other else x.to(torch.float16).double()  # torch: bf16 -> fp16 is RNE
        nz = want != 0
        assert _same(got[nz], want[nz]), (fmt, other)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("fast_math", [False, True])
@pytest.mark.parametrize("other", ["bf16", "fp16"])
def test_every_e8m0_scale_code(version, fast_math, other):
    """1.0 (e2m1 code 2) scaled by each code 0..255: 2^(s-127) per ml_dtypes where the lowering keeps it; code 0
    is +0 in bf16 on 3.6 (bits 0) and 2^-127 on 3.9 (bits raised to 0x0040), 0 in fp16 (both); fp16 holds
    2^-24..2^15 (cvt.rn.f16.f32: 2^-25 ties to 0, 2^16 is inf); code 255 is NaN, but inf with fast_math.
    An inf scale shows as NaN here (the probe's other elements of the group are 0): see the next test."""
    codes = torch.arange(256, dtype=torch.int64)
    one = torch.full((256,), 2)
    scale = codes.to(torch.uint8)[:, None]
    got = _probe("e2m1", one, other, a_scale=scale, triton=version, fast_math=fast_math)
    want = _e8m0(codes.numpy())  # ml_dtypes: 0 -> 2^-127, 255 -> NaN
    if other == "fp16":
        want = want.astype(np.float16).astype(np.float64)  # numpy: RNE with subnormals, overflow to inf
        want[0] = 0.0
    elif version == "3.6":
        want[0] = 0.0
    if fast_math:
        want[255] = np.inf
    want[np.isinf(want)] = np.nan  # an inf scale: the probe's zero elements of the group give 0 * inf = NaN
    nz = want != 0
    assert _same(got[torch.from_numpy(nz)], want[nz])
    assert bool((got[torch.from_numpy(~nz)] == 0).all())


@pytest.mark.parametrize("version,fast_math,want", [("3.6", False, "nan"), ("3.6", True, "inf"), ("3.9", False, "nan"),
                                                    ("3.9", True, "inf")])
def test_scale_255_of_a_nonzero_group(version, fast_math, want):
    """A group of 1.0s (e2m1 code 2, packed twice a byte) scaled by code 255, times ones: NaN, except with
    fast_math, whose scale stays inf (3.6: no arith.select, 3.9: no fma(s, 0, s); TTGIR/PTX of both): inf."""
    a = torch.full((1, 16), 0x22, dtype=torch.uint8)
    b = torch.ones(32, 1, dtype=torch.bfloat16)
    got = dot_scaled(a, torch.tensor([[255]], dtype=torch.uint8), "e2m1", b, None, "bf16", triton=version,
                     fast_math=fast_math)
    assert bool(got.isnan().all()) if want == "nan" else bool((got == float("inf")).all())


@pytest.mark.parametrize("version", VERSIONS)
def test_scale_255_makes_every_element_of_its_group_nan_and_zero_scale_times_inf_is_nan(version):
    z = torch.zeros(2)  # e2m1 code 0: a zero operand
    got = _probe("e2m1", z, "bf16", a_scale=torch.tensor([[255], [255]], dtype=torch.uint8), triton=version)
    assert bool(got.isnan().all())  # 3.6 selects NaN; 3.9's fma makes the scale NaN: 0 * NaN
    inf = torch.full((1,), float("inf"), dtype=torch.bfloat16)
    got = _probe("bf16", inf, "bf16", a_scale=torch.tensor([[0]], dtype=torch.uint8), triton=version)
    # 3.6: inf * (+0) = NaN; 3.9: inf * 2^-127 = inf
    assert bool(got.isnan().all()) if version == "3.6" else bool(torch.isinf(got).all())


def test_e4m3_scales_are_decoded_as_e4m3_on_39():
    """NVFP4: the scale byte is an e4m3 number (sign included, 0x7F NaN), not an e8m0 code."""
    codes = torch.arange(256)
    sc = codes.to(torch.uint8).view(torch.float8_e4m3fn)
    a = torch.zeros(256, 8, dtype=torch.uint8)
    a[:, 0] = 2  # 1.0
    b = torch.zeros(16, 1, dtype=torch.bfloat16)
    b[0, 0] = 1.0
    got = dot_scaled(a, sc[:, None], "e2m1", b, None, "bf16", triton="3.9")[:, 0].double()
    want = _oracle("e4m3", codes.numpy().astype(np.uint8))
    nz = want != 0
    assert _same(got[torch.from_numpy(nz)], want[nz])


def test_scale_multiply_rounds_to_nearest_even_with_subnormals_and_overflows_to_inf():
    """mul.bf16 of an e4m3 value and a small scale: bf16 subnormals, ties to even; a large one: inf."""
    codes = torch.arange(0x7F)  # positive finite e4m3
    v = _oracle("e4m3", codes.numpy().astype(np.uint8))
    for s, version in ((1, "3.6"), (2, "3.9"), (254, "3.6")):
        got = _probe("e4m3", codes, "bf16", a_scale=torch.full((0x7F, 1), s, dtype=torch.uint8), triton=version)
        exact = torch.from_numpy(v) * 2.0 ** (s - 127)
        want = exact.to(torch.float32).to(torch.bfloat16).double()  # exact in fp32 (<= 4 bits), one rounding
        nz = want != 0
        assert _same(got[nz], want[nz]), s
        assert bool((got[~nz] == 0).all())


# --- against exact arithmetic ----------------------------------------------------------------------------------

def _finite_codes(g, fmt, shape):
    if fmt == "e2m1":
        return torch.randint(0, 256, shape, generator=g, dtype=torch.int64).to(torch.uint8)
    if fmt in ("e4m3", "e5m2"):
        c = torch.randint(0, 256, shape, generator=g, dtype=torch.int64).to(torch.uint8)
        bad = ~torch.isfinite(c.view(_TORCH[fmt]).float())
        return torch.where(bad, torch.zeros_like(c), c)
    x = torch.randn(shape, generator=g)
    x = torch.copysign(x.abs().clamp_min(2.0 ** -4), x)  # no fp16 subnormal after a 2^-3 scale: exact
    return (x * torch.exp2(torch.randint(-2, 5, shape, generator=g).float())).to(_TORCH[fmt])


def _values(fmt, x, rhs):
    if fmt == "e2m1":
        t = torch.tensor(_e2m1_table(), dtype=torch.float64)
        lo, hi = t[(x & 0xF).long()], t[(x >> 4).long()]
        out = torch.stack((lo, hi), dim=-2 if rhs else -1)
        return out.reshape(x.shape[0] * 2, x.shape[1]) if rhs else out.reshape(x.shape[0], x.shape[1] * 2)
    if fmt in ("e4m3", "e5m2"):
        return torch.from_numpy(_oracle(fmt, x.numpy()))
    return x.double()


def _exactly_scaled(seed: int, fa: str, fb: str, M: int, N: int, K: int):
    """A case whose scaled operands are exact in the compute type: finite codes, scales 2^-3..2^3 (2^-3..2^0 with
    fp16). Returns (a, a_scale, b, b_scale, acc) as dot_scaled takes them, the scaled operands A [M, K] and B [K, N]
    in float64, and the compute type."""
    g = torch.Generator().manual_seed(seed)
    a = _finite_codes(g, fa, (M, K // 2) if fa == "e2m1" else (M, K))
    b = _finite_codes(g, fb, (K // 2, N) if fb == "e2m1" else (K, N))
    hi = 128 if "fp16" in (fa, fb) else 131
    sa = torch.randint(124, hi, (M, K // 32), generator=g, dtype=torch.int64).to(torch.uint8)
    sb = torch.randint(124, hi, (N, K // 32), generator=g, dtype=torch.int64).to(torch.uint8)
    acc = torch.randn(M, N, generator=g) * 8
    A = _values(fa, a, False) * torch.exp2(sa.double() - 127).repeat_interleave(32, 1)
    B = _values(fb, b, True) * torch.exp2(sb.double() - 127).repeat_interleave(32, 1).T
    compute = torch.float16 if "fp16" in (fa, fb) else torch.bfloat16
    assert torch.equal(A.to(compute).double(), A)  # the scaled operands are exact in the compute type
    return a, sa, b, sb, acc, A, B, compute


PAIRS = [(a, b) for a in FORMATS for b in FORMATS if {a, b} != {"bf16", "fp16"}]


@pytest.mark.parametrize("fa,fb", PAIRS)
def test_model_is_the_dot_of_the_exactly_scaled_operands_within_its_bound(fa, fb, seed):
    """Scales 2^-3..2^3 (2^-3..2^0 in fp16) keep every scaled operand exact, so the model must be the tl.dot model
    of the exactly scaled operands, bit for bit, and within that dot's derived error bound of the float64 sum."""
    K = 128
    a, sa, b, sb, acc, A, B, compute = _exactly_scaled(seed, fa, fb, 32, 24, K)
    for version in VERSIONS:
        got = dot_scaled(a, sa, fa, b, sb, fb, acc, triton=version)
        assert torch.equal(got.view(torch.int32), dot(A.to(compute), B.to(compute), acc, arch="sm90").view(torch.int32))
        bound = error_bound("sm90", compute, compute, K).on(A, B, acc)
        err = (got.double() - (A @ B + acc.double())).abs()
        assert bool((err <= bound).all()), float((err / bound).max())


# --- k-pack, batches -------------------------------------------------------------------------------------------

def _pack_along(values_codes: torch.Tensor, axis: int) -> torch.Tensor:
    """4-bit codes [R, C] -> bytes, two codes a byte along ``axis`` (low nibble first)."""
    c = values_codes.to(torch.uint8)
    if axis == 0:
        return c[0::2] | (c[1::2] << 4)
    return c[:, 0::2] | (c[:, 1::2] << 4)


def test_packing_along_m_or_n_is_the_same_product():
    g = torch.Generator().manual_seed(7)
    M, N, K = 16, 8, 64
    ca = torch.randint(0, 16, (M, K), generator=g)
    cb = torch.randint(0, 16, (K, N), generator=g)
    sa = torch.randint(120, 134, (M, K // 32), generator=g, dtype=torch.int64).to(torch.uint8)
    sb = torch.randint(120, 134, (N, K // 32), generator=g, dtype=torch.int64).to(torch.uint8)
    ref = dot_scaled(_pack_along(ca, 1), sa, "e2m1", _pack_along(cb, 0), sb, "e2m1", triton="3.9")
    for kpa, kpb in ((False, True), (True, False), (False, False)):
        a = _pack_along(ca, 1 if kpa else 0)
        b = _pack_along(cb, 0 if kpb else 1)
        got = dot_scaled(a, sa, "e2m1", b, sb, "e2m1", triton="3.9", a_k_pack=kpa, b_k_pack=kpb)
        assert torch.equal(got, ref), (kpa, kpb)
        with pytest.raises(DotScaledRefused, match=r"packed along M/N .* Triton 3\.6"):
            dot_scaled(a, sa, "e2m1", b, sb, "e2m1", triton="3.6", a_k_pack=kpa, b_k_pack=kpb)


def test_a_batch_is_each_of_its_products():
    g = torch.Generator().manual_seed(3)
    a = torch.randint(0, 256, (3, 16, 32), generator=g, dtype=torch.int64).to(torch.uint8)
    b = torch.randn(3, 64, 8, generator=g).to(torch.bfloat16)
    sa = torch.randint(125, 130, (3, 16, 2), generator=g, dtype=torch.int64).to(torch.uint8)
    acc = torch.randn(3, 16, 8, generator=g)
    got = dot_scaled(a, sa, "e2m1", b, None, "bf16", acc)
    for i in range(3):
        assert torch.equal(got[i], dot_scaled(a[i], sa[i], "e2m1", b[i], None, "bf16", acc[i]))


# --- refusals and what is not modelled -------------------------------------------------------------------------

def _mx():
    return torch.zeros(64, 16, dtype=torch.uint8), torch.full((64, 1), 127, dtype=torch.uint8)


def test_refusals_follow_the_compiler_per_triton_version():
    a, s = _mx()
    nv = s.view(torch.float8_e4m3fn)
    b = torch.zeros(32, 64, dtype=torch.uint8).view(torch.float8_e4m3fn)
    with pytest.raises(DotScaledRefused, match=r"NVFP4 tl.dot_scaled \(e4m3 scales\) does not compile for sm90"):
        dot_scaled(torch.zeros(64, 32, dtype=torch.uint8)[:, :16], nv[:, :1].expand(64, 2).contiguous(), "e2m1",
                   torch.zeros(16, 64, dtype=torch.uint8), None, "e2m1", triton="3.6")
    assert dot_scaled(a, torch.full((64, 2), 0x38, dtype=torch.uint8).view(torch.float8_e4m3fn), "e2m1", b, None,
                      "e4m3", triton="3.9").shape == (64, 64)
    h, f = torch.zeros(64, 32, dtype=torch.bfloat16), torch.zeros(32, 64, dtype=torch.float16)
    with pytest.raises(DotScaledRefused, match=r"bf16 x fp16 .* Triton 3\.6"):
        dot_scaled(h, None, "bf16", f, None, "fp16", triton="3.6")
    assert dot_scaled(h, None, "bf16", f, None, "fp16", triton="3.9").shape == (64, 64)
    with pytest.raises(DotScaledRefused, match=r"groups of 16 do not compile with Triton 3\.6"):
        dot_scaled(a, torch.full((64, 2), 127, dtype=torch.uint8), "e2m1", b, None, "e4m3", triton="3.6")
    # Triton 3.9 takes them: one scale per 16 values, so two equal scales are one scale of 32, two others are not
    a1, ones = torch.full((64, 16), 0x22, dtype=torch.uint8), torch.ones(32, 64).to(torch.float8_e4m3fn)  # all 1.0
    s16 = torch.full((64, 2), 127, dtype=torch.uint8)
    by32 = dot_scaled(a1, s16[:, :1].contiguous(), "e2m1", ones, None, "e4m3", triton="3.9")
    assert torch.equal(by32, torch.full((64, 64), 32.0))
    assert torch.equal(dot_scaled(a1, s16, "e2m1", ones, None, "e4m3", triton="3.9"), by32)
    s16[:, 1] = 128  # the second 16 values scaled by 2
    assert torch.equal(dot_scaled(a1, s16, "e2m1", ones, None, "e4m3", triton="3.9"), torch.full((64, 64), 48.0))


def test_the_installed_version_takes_the_nvfp4_rule_from_the_arch_model():
    from harness.arch import supports_scaled_dot

    ok, why = supports_scaled_dot("sm90", "e4m3")
    a = torch.zeros(64, 16, dtype=torch.uint8)
    s = torch.full((64, 2), 0x38, dtype=torch.uint8).view(torch.float8_e4m3fn)
    b = torch.zeros(16, 64, dtype=torch.uint8)
    if ok:
        assert dot_scaled(a, s, "e2m1", b, None, "e2m1").shape == (64, 64)
    else:
        with pytest.raises(DotScaledRefused, match="NVFP4"):
            dot_scaled(a, s, "e2m1", b, None, "e2m1")
    assert LOWERINGS[lowering_for().version].e4m3_scales == ok


@pytest.mark.parametrize("arch,text", [("sm103", "sm103's tcgen05.mma numerics are unverified"),
                                       ("sm120", "native mma.sync ... block_scale"), ("sm75", "not modelled")])
def test_other_archs_say_what_is_not_modelled(arch, text):
    a, s = _mx()
    with pytest.raises(NotImplementedError, match=text) as e:
        dot_scaled(a, s, "e2m1", torch.zeros(16, 64, dtype=torch.uint8), None, "e2m1", arch=arch)
    assert not isinstance(e.value, DotScaledRefused)


# --- sm80, sm86, sm89: sm90's upcast, mma.sync in the operand layout's k order --------------------------------------

def _layout_k_order(K: int, kwidth: int) -> list[int]:
    """The k each mma.sync m16n8k16 slot reads, instruction after instruction, built lane by lane: lane t of a quad
    holds runs of ``kwidth`` k at t * kwidth and 4 * kwidth further, per span of 8 * kwidth; instruction i of the
    span takes each run's registers 2i, 2i+1 (slots 2t, 2t+1 from the first run, 8 + 2t, 9 + 2t from the second)."""
    order = []
    for span in range(K // (8 * kwidth)):
        for i in range(kwidth // 2):
            slots = [0] * 16
            for t in range(4):
                for run in range(2):
                    for e in range(2):
                        slots[8 * run + 2 * t + e] = span * 8 * kwidth + run * 4 * kwidth + t * kwidth + 2 * i + e
            order += slots
    return order


#: the dot operand layout (opIdx 0, parent mma v2, warps [2, 2], instr [16, 8]) of a [64, 128] tile, as Triton 3.9's
#: gluon ``to_linear_layout`` gives it (read 2026-12-04): kWidth -> (register bases, lane bases), each [m, k]
LINEAR_LAYOUTS = {
    4: ([[0, 1], [0, 2], [8, 0], [0, 16], [0, 32], [0, 64], [32, 0]], [[0, 4], [0, 8], [1, 0], [2, 0], [4, 0]]),
    8: ([[0, 1], [0, 2], [0, 4], [8, 0], [0, 32], [0, 64], [32, 0]], [[0, 8], [0, 16], [1, 0], [2, 0], [4, 0]]),
}


@pytest.mark.parametrize("kwidth", [4, 8])
def test_the_layout_k_order_is_tritons_and_kwidth_4_is_the_measured_fp8_order(kwidth):
    """The lanes and registers of Triton's layout hold the k runs the order assumes (row 0, register order: lane t
    has ``kwidth`` k at t * kwidth, then 4 * kwidth further, per span of 8 * kwidth); and kWidth 4 is the order FP8
    under mma.sync takes on the H200 (measured bit for bit, harness.tensor_cores.chain)."""
    regs, lanes = LINEAR_LAYOUTS[kwidth]
    k_of = lambda bases, i: sum(b[1] for j, b in enumerate(bases) if i >> j & 1)  # noqa: E731
    row0 = [r for r in range(1 << len(regs)) if not any(r >> j & 1 and regs[j][0] for j in range(len(regs)))]
    for t in range(4):
        held = [k_of(lanes, t) + k_of(regs, r) for r in row0]
        runs = [sp * 8 * kwidth + run * 4 * kwidth + t * kwidth + j for sp in range(128 // (8 * kwidth))
                for run in range(2) for j in range(kwidth)]
        assert held == runs, t
    if kwidth == 4:
        from harness.tensor_cores.chain import mma_k_order

        assert _layout_k_order(128, 4) == mma_k_order(128, 4).tolist()


PRE_SM90 = [("sm80", "e2m1", "e2m1", "3.6"), ("sm80", "e5m2", "bf16", "3.9"), ("sm86", "bf16", "e2m1", "3.9"),
            ("sm80", "fp16", "e5m2", "3.6"), ("sm89", "e4m3", "e2m1", "3.9"), ("sm89", "e2m1", "fp16", "3.6"),
            ("sm89", "e4m3", "e5m2", "3.6"), ("sm80", "bf16", "bf16", "3.9")]


@pytest.mark.parametrize("arch,fa,fb,version", PRE_SM90, ids=[f"{a}-{x}x{y}-t{v}-published" for a, x, y, v in PRE_SM90])
def test_pre_sm90_is_the_a100_dot_of_the_scaled_operands_in_the_layout_k_order(arch, fa, fb, version, seed):
    """Scales 2^-3..2^3 (2^-3..2^0 with fp16) keep the scaled operands exact, so the model must be the published A100
    mma.sync model (harness.tensor_cores.dot on sm80) of the operands upcast by ml_dtypes and scaled in float64,
    taken in the k order of the dot operand layout (kWidth 8 with e2m1, else 4: every pair here is scaled)."""
    K = 128
    a, sa, b, sb, acc, A, B, compute = _exactly_scaled(seed, fa, fb, 16, 8, K)
    order = _layout_k_order(K, 8 if "e2m1" in (fa, fb) else 4)
    want = dot(A.to(compute)[:, order], B.to(compute)[order], acc, arch="sm80", instr="mma")
    got = dot_scaled(a, sa, fa, b, sb, fb, acc, arch=arch, triton=version, instr="wgmma")  # no wgmma before sm90
    assert torch.equal(got.view(torch.int32), want.view(torch.int32))
    assert torch.equal(dot_scaled(a, sa, fa, b, sb, fb, acc, arch=arch, triton=version, fast_math=True), got)


@pytest.mark.parametrize("fa,fb", [("e2m1", "e2m1"), ("e4m3", "bf16")])
def test_sm90_under_mma_sync_takes_the_layout_k_order(fa, fb):
    """Tiles below a warpgroup get mma.sync on sm90 too, with the same operand layouts (kWidth 8 with e2m1, else 4:
    TTGIR of 64x64 tiles with 2 warps, Triton 3.6 and 3.9), so the H100 mma.sync model takes that k order; wgmma
    tiles keep the plain order (the H200 capture)."""
    g = torch.Generator().manual_seed(5)
    M, N, K = 16, 8, 128
    a = _finite_codes(g, fa, (M, K // 2) if fa == "e2m1" else (M, K))
    b = _finite_codes(g, fb, (K // 2, N) if fb == "e2m1" else (K, N))
    sa = torch.randint(124, 131, (M, K // 32), generator=g, dtype=torch.int64).to(torch.uint8)
    A = (_values(fa, a, False) * torch.exp2(sa.double() - 127).repeat_interleave(32, 1)).to(torch.bfloat16)
    B = _values(fb, b, True).to(torch.bfloat16)
    order = _layout_k_order(K, 8 if "e2m1" in (fa, fb) else 4)
    got = dot_scaled(a, sa, fa, b, None, fb, arch="sm90", instr="mma")
    assert torch.equal(got, dot(A[:, order], B[order], arch="sm90", instr="mma"))
    assert torch.equal(dot_scaled(a, sa, fa, b, None, fb, arch="sm90"), dot(A, B, arch="sm90"))


def test_pre_sm90_k_order_matters():
    """Not the plain k order. A100 blocks are 8 products; with kWidth 8 the first holds k = 0, 1, 8, 9, 16, 17, 24,
    25 and k = 2 comes in a later one. Four products of 2^-5 at k = 8, 9, 16, 17 sum to 2^-3 in the first block and
    survive the big product 1.5 * 2^20 at k = 2 (alignment step 2^-4); in the plain order the big product's block
    comes first and each small one is truncated away alone."""
    a = torch.zeros(1, 32, dtype=torch.uint8)  # e2m1, K = 64
    b = torch.zeros(64, 1, dtype=torch.bfloat16)
    a[0, 1], b[2, 0] = 0x7, 2.0**18  # 6.0 at k = 2
    a[0, 4] = a[0, 8] = 0x22  # 1.0 at k = 8, 9, 16, 17
    b[8, 0] = b[9, 0] = b[16, 0] = b[17, 0] = 2.0**-5
    s = torch.full((1, 2), 127, dtype=torch.uint8)
    got = float(dot_scaled(a, s, "e2m1", b, None, "bf16", arch="sm80", triton="3.9"))
    assert got == 1.5 * 2.0**20 + 2.0**-3
    A = torch.zeros(1, 64, dtype=torch.bfloat16)
    A[0, 2], A[0, 8], A[0, 9], A[0, 16], A[0, 17] = 6.0, 1.0, 1.0, 1.0, 1.0
    assert float(dot(A, b, arch="sm80", instr="mma")) == 1.5 * 2.0**20  # the plain order


def test_pre_sm90_specials_follow_the_sm90_rules():
    """Code 255 makes its group NaN (inf with fast_math), e5m2's inf/NaN codes turn finite in bf16 (the same bit
    trick, done in fp32 on sm80): as on sm90."""
    a = torch.full((2, 32), 0x22, dtype=torch.uint8)  # 1.0 everywhere, K = 64
    b = torch.zeros(64, 2, dtype=torch.uint8)
    b[:, 0] = 0x3C  # e5m2 1.0
    b[0, 0], b[1, 1] = 0x7C, 0xFF  # e5m2 +inf -> 2^16, -NaN (m = 3) -> -1.75 * 2^16
    sa = torch.tensor([[255, 127], [127, 127]], dtype=torch.uint8)
    for version in VERSIONS:
        got = dot_scaled(a, sa, "e2m1", b, None, "e5m2", arch="sm80", triton=version)
        assert bool(got[0].isnan().all()) and got[1].tolist() == [63 + 2.0**16, -(2.0**16) * 1.75]
        fm = dot_scaled(a, sa, "e2m1", b, None, "e5m2", arch="sm80", triton=version, fast_math=True)
        assert fm[0, 0].item() == float("inf") and fm[1].tolist() == got[1].tolist()


@pytest.mark.parametrize("arch", ["sm80", "sm86"])
def test_pre_sm89_refusals_follow_the_compiler(arch):
    """Compiled with Triton 3.6 and 3.9 for sm80 and sm86 (scripts/compile_dot_scaled_lowering.py, 2026-12-04):
    e4m3 operands and NVFP4's e4m3 scales are refused by the front end, e2m1 x fp16 by ptxas; 3.6 also refuses what
    it refuses on sm90."""
    a, s = _mx()
    e2 = torch.zeros(32, 64, dtype=torch.uint8)
    nv = torch.full((64, 4), 0x38, dtype=torch.uint8).view(torch.float8_e4m3fn)
    for version in VERSIONS:
        with pytest.raises(DotScaledRefused, match=rf"e4m3 operands does not compile for {arch}: .*fp8e4nv"):
            dot_scaled(torch.zeros(64, 64, dtype=torch.uint8), s[:, :1].expand(64, 2).contiguous(), "e4m3", e2, None,
                       "e2m1", arch=arch, triton=version)
        with pytest.raises(DotScaledRefused, match=r"NVFP4's e4m3 scales does not compile"):
            dot_scaled(a, nv[:, :2], "e2m1", e2[:16], None, "e2m1", arch=arch, triton=version)
        with pytest.raises(DotScaledRefused, match=r"e2m1 x fp16 .* sm_89"):
            dot_scaled(a, s, "e2m1", torch.zeros(32, 64, dtype=torch.float16), None, "fp16", arch=arch,
                       triton=version)
    h, f = torch.zeros(64, 64, dtype=torch.bfloat16), torch.zeros(64, 64, dtype=torch.float16)
    with pytest.raises(DotScaledRefused, match=rf"bf16 x fp16 .* {arch} with Triton 3\.6"):
        dot_scaled(h, None, "bf16", f, None, "fp16", arch=arch, triton="3.6")
    assert dot_scaled(h, None, "bf16", f, None, "fp16", arch=arch, triton="3.9").shape == (64, 64)
    with pytest.raises(DotScaledRefused, match=r"groups of 16 do not compile with Triton 3\.6"):
        dot_scaled(torch.zeros(64, 32, dtype=torch.uint8), torch.full((64, 4), 127, dtype=torch.uint8), "e2m1",
                   e2, None, "e2m1", arch=arch, triton="3.6")


def test_sm89_compiles_fp8_and_refuses_nvfp4_on_36_only():
    a = torch.zeros(64, 32, dtype=torch.uint8)
    nv = torch.full((64, 4), 0x38, dtype=torch.uint8).view(torch.float8_e4m3fn)
    b = torch.zeros(32, 64, dtype=torch.uint8)
    with pytest.raises(DotScaledRefused, match=r"NVFP4 tl.dot_scaled \(e4m3 scales\) does not compile for sm89"):
        dot_scaled(a, nv, "e2m1", b, None, "e2m1", arch="sm89", triton="3.6")
    assert dot_scaled(a, nv, "e2m1", b, None, "e2m1", arch="sm89", triton="3.9").shape == (64, 64)
    assert dot_scaled(a, torch.full((64, 2), 127, dtype=torch.uint8), "e2m1", torch.zeros(64, 64, dtype=torch.float16),
                      None, "fp16", arch="sm89", triton="3.6").shape == (64, 64)
    with pytest.raises(NotImplementedError, match=r"K=32 is not a multiple of 64"):
        dot_scaled(a[:, :16], None, "e2m1", b[:16], None, "e2m1", arch="sm89", triton="3.9")


def test_versions():
    assert lowering_for("3.6.0") is LOWERINGS["3.6"] and lowering_for("3.8") is LOWERINGS["3.6"]
    assert lowering_for("3.9.0") is LOWERINGS["3.9"] and lowering_for("3.10") is LOWERINGS["3.9"]
    with pytest.raises(NotImplementedError, match=r"Triton 3\.5's lowering is not modelled"):
        lowering_for("3.5")
    with pytest.raises(ValueError, match="triton: expected a version"):
        lowering_for("three")
    assert "compiler output" in repr(LOWERINGS["3.6"])


# --- bad inputs ------------------------------------------------------------------------------------------------

def test_bad_inputs_name_the_argument():
    a, s = _mx()
    b = torch.zeros(16, 64, dtype=torch.uint8)
    f = torch.zeros(32, 64, dtype=torch.float32)
    for call, err, text in [
        (lambda: dot_scaled(a, s, "e3m2", b, None, "e2m1"), ValueError, r"a_format: expected one of e2m1, e4m3"),
        (lambda: dot_scaled(a, s, "e2m1", b, None, "fp8"), ValueError, r"b_format: expected one of"),
        (lambda: dot_scaled(a.float(), s, "e2m1", b, None, "e2m1"), TypeError,
         r"a: a e2m1 operand must be torch.uint8"),
        (lambda: dot_scaled(a, s, "e2m1", f, None, "bf16"), TypeError, r"b: a bf16 operand must be torch.bfloat16"),
        (lambda: dot_scaled(a, s, "e2m1", [1], None, "e2m1"), TypeError, r"b: expected a torch.Tensor; got list"),
        (lambda: dot_scaled(a[0], s, "e2m1", b, None, "e2m1"), ValueError, r"a: expected a 2-D or 3-D"),
        (lambda: dot_scaled(a, s, "e2m1", b[:8], None, "e2m1"), ValueError, r"b: its K \(16 values\) differs"),
        (lambda: dot_scaled(a, s.float(), "e2m1", b, None, "e2m1"), TypeError, r"a_scale: expected None, e8m0 codes"),
        (lambda: dot_scaled(a, s[:32], "e2m1", b, None, "e2m1"), ValueError, r"a_scale: expected shape \(64, 1\)"),
        (lambda: dot_scaled(a, None, "e2m1", b, s[:32], "e2m1"), ValueError, r"b_scale: expected shape"),
        (lambda: dot_scaled(a, s, "e2m1", b, None, "e2m1", torch.zeros(64, 64, dtype=torch.float16)), ValueError,
         r"acc: expected a float32 \(64, 64\) tensor or None"),
        (lambda: dot_scaled(a, s, "e2m1", b, None, "e2m1", a_k_pack=1), TypeError, r"a_k_pack: expected a bool"),
        (lambda: dot_scaled(torch.zeros(64, 32, dtype=torch.bfloat16), None, "bf16", b, None, "e2m1", a_k_pack=False),
         ValueError, r"a_k_pack: only e2m1 operands can be packed along M/N"),
        (lambda: dot_scaled(a, s, "e2m1", b, None, "e2m1", fast_math="yes"), TypeError, r"fast_math: expected a bool"),
        (lambda: dot_scaled(a, s, "e2m1", b, None, "e2m1", arch="interp"), ValueError, r"arch: expected a CUDA arch"),
        (lambda: dot_scaled(a, s, "e2m1", b, None, "e2m1", triton="x"), ValueError, r"triton: expected a version"),
    ]:
        with pytest.raises(err, match=text):
            call()
