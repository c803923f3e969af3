"""harness.tensor_cores: the block-FMA model's facts, each pinned by a vector that only it explains, and the
generic evaluator against mmaemu's FP8 chain (the implementation validated on the H200)."""

from __future__ import annotations

from fractions import Fraction

import pytest
import torch

from harness import tensor_cores as tc
from tests.harness._exact import round_f32

FP8_PAIRS = [("e4m3", "e4m3"), ("e5m2", "e5m2"), ("e4m3", "e5m2"), ("e5m2", "e4m3")]
DT = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}


def _bits(x: torch.Tensor) -> torch.Tensor:
    return x.float().view(torch.int32)


@pytest.mark.parametrize("fa,fb", FP8_PAIRS)
@pytest.mark.parametrize("with_acc", [False, True], ids=["noacc", "acc"])
def test_generic_chain_equals_mmaemu_on_fp8(fa: str, fb: str, with_acc: bool) -> None:
    g = torch.Generator().manual_seed(7)
    a = (torch.randn(32, 96, generator=g) * 8).to(DT[fa])
    b = (torch.randn(96, 24, generator=g) * 8).to(DT[fb])
    acc = torch.randn(32, 24, generator=g) * 64 if with_acc else None
    got = tc.dot(a, b, acc, arch="sm90")
    p = tc.MODELS[("sm90", "fp8", "wgmma")]
    C = torch.zeros(32, 24, dtype=torch.float64) if acc is None else acc.double()
    emin = {"e4m3": -6, "e5m2": -14}
    ours = tc.chain._chain(a.double(), b.double(), C, p, emin[fa], emin[fb]).float()
    assert torch.equal(_bits(got), _bits(ours))


def test_fp16_alignment_truncates_beyond_25_fraction_bits() -> None:
    # 1*1 and fifteen products 2^-13 * 2^-13 = 2^-26: below the 25 kept fraction bits of the block (E = 0)
    a = torch.tensor([[1.0] + [2.0**-13] * 15], dtype=torch.float16)
    b = a.T.contiguous()
    got = tc.dot(a, b, arch="sm90")
    exact = torch.tensor(1 + 15 * 2.0**-26, dtype=torch.float64).float()
    assert got.item() == 1.0 and exact.item() != 1.0


def test_fp16_keeps_25_fraction_bits_and_truncates_the_sum() -> None:
    # products 1 and 2^-25 (kept), the sum 1 + 2^-25 truncated to fp32 (23 bits): 1.0; three of them: 1 + 3 * 2^-25
    # -> 1 + 2^-23 truncated (RNE would give the same), seven: 1 + 7 * 2^-25 = 1 + 1.75 ulp -> 1 + 1 ulp (RNE: 2)
    a = torch.tensor([[1.0] + [2.0**-12] * 7 + [0.0] * 8], dtype=torch.float16)
    b = torch.tensor([[1.0] + [2.0**-13] * 7 + [0.0] * 8], dtype=torch.float16).T.contiguous()
    got = tc.dot(a, b, arch="sm90").item()
    assert got == 1 + 2.0**-23


def _one_big_after_small(n_small: int, k: int = 32) -> tuple[torch.Tensor, torch.Tensor]:
    v = [2.0**-13] * n_small + [1.0] + [0.0] * (k - n_small - 1)
    a = torch.tensor([v], dtype=torch.float16)
    return a, a.T.contiguous()


def test_fp16_blocks_are_16_products() -> None:
    # sixteen 2^-26 products before a 1*1 product: summed exactly in their own block (2^-22), then kept next to 1;
    # in one 32-product block they would align to 1 and vanish
    a, b = _one_big_after_small(16)
    assert tc.dot(a, b, arch="sm90").item() == 1 + 2.0**-22
    # eight of them in the same 16-block as the 1: truncated away (a k=8 block would keep them: 1 + 2^-23)
    a, b = _one_big_after_small(8)
    assert tc.dot(a, b, arch="sm90").item() == 1.0


def test_ieee_is_one_fma_per_k() -> None:
    a = torch.tensor([[1 + 2.0**-12]], dtype=torch.float32)
    acc = torch.tensor([[-(1 + 2.0**-11)]])
    got = tc.dot(a, a, acc, arch="sm90", input_precision="ieee").item()
    assert got == 2.0**-24  # mul then add: 0


def test_tf32_reads_the_top_19_bits() -> None:
    a = torch.tensor([[1 + 2.0**-11 + 2.0**-12]], dtype=torch.float32)  # 11th/12th fraction bits: dropped
    one = torch.tensor([[1.0]], dtype=torch.float32)
    assert tc.dot(a, one, arch="sm90").item() == 1.0
    assert tc.dot(a, one, arch="sm90", input_precision="ieee").item() == 1 + 2.0**-11 + 2.0**-12


def test_fp8_max_num_imprecise_acc_adds_runs_in_fp32() -> None:
    # 64 products of 1 * 2^-9 after a 2^16 accumulator: in the chain each block aligns to 2^16 and the 13 kept
    # bits drop every product; with promotion every 32 the runs are summed from zero and added with add.f32
    a = torch.full((1, 64), 2.0**-9).to(torch.float8_e4m3fn)
    b = torch.ones((64, 1)).to(torch.float8_e4m3fn)
    acc = torch.tensor([[2.0**16]])
    assert tc.dot(a, b, acc, arch="sm90").item() == 2.0**16
    assert tc.dot(a, b, acc, arch="sm90", max_num_imprecise_acc=32).item() == 2.0**16 + 64 * 2.0**-9


def test_specials_follow_ieee() -> None:
    a = torch.tensor([[1.0, float("inf")], [1.0, 2.0]], dtype=torch.bfloat16)
    b = torch.tensor([[1.0, 1.0], [1.0, 0.0]], dtype=torch.bfloat16)
    got = tc.dot(a, b, arch="sm90")
    assert got[0, 0].item() == float("inf") and torch.isnan(got[0, 1]) and got[1, 0].item() == 3.0


def test_fp8_under_mma_sync_takes_k_in_kwidth_4_pairs() -> None:
    # sixteen 2^-9 * 2^-9 = 2^-18 products at k = 4j, 4j+1 and one 16 * 16 = 2^8 at k = 2. In kWidth=4 order the
    # first m16n8k16 instruction gets exactly the sixteen small ones (sum 2^-14, exact), the second the big one with
    # c = 2^-14, which its 25 kept fraction bits below 2^8 hold: 256 + 2^-14. In plain k order (fp16 operands) the
    # big product shares the first block with eight small ones and truncates them away: 256.
    small = [4 * j + e for j in range(8) for e in (0, 1)]
    a, b = torch.zeros(1, 32), torch.zeros(32, 1)
    a[0, small], b[small, 0] = 2.0**-9, 2.0**-9
    a[0, 2], b[2, 0] = 16.0, 16.0
    a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
    assert tc.dot(a8, b8, arch="sm90", instr="mma").item() == 256 + 2.0**-14
    assert tc.dot(a8.half(), b8.half(), arch="sm90", instr="mma").item() == 256.0
    with pytest.raises(NotImplementedError, match="K=16"):
        tc.dot(a8[:, :16], b8[:16], arch="sm90", instr="mma")


def test_tf32x3_adds_the_accumulator_after_the_big_dot() -> None:
    # x = 1 + 3 * 2^-12: big = rna(x) = 1 + 2^-10, small = -2^-12. The three dots give 1 + 3 * 2^-12 exactly; then
    # add.f32 with 4096: 4097 + 1.5 ulp (ulp 2^-11), a tie, to even: 4097 + 2^-10. Adding the accumulator before the
    # big dot (4096 - 2^-12, exact) leaves the last rounding to the tensor core, which truncates: 4097 + 2^-11.
    x = torch.tensor([[1 + 2.0**-11 + 2.0**-12]])
    one, acc = torch.tensor([[1.0]]), torch.tensor([[4096.0]])
    assert tc.dot(x, one, acc, arch="sm90", input_precision="tf32x3").item() == 4097 + 2.0**-10


def test_specials_meet_block_by_block() -> None:
    # 2^127 * 4 overflows fp32 when its block (k < 16) ends: +inf; a -inf product in the next block then gives NaN.
    # The same two products in one block: the block's IEEE sum of its non-finite products, -inf.
    a = torch.zeros(1, 32, dtype=torch.bfloat16)
    b = torch.zeros(32, 1, dtype=torch.bfloat16)
    a[0, 0], b[0, 0] = 2.0**127, 4.0
    a[0, 16], b[16, 0] = 1.0, float("-inf")
    assert torch.isnan(tc.dot(a, b, arch="sm90")).all()
    a2, b2 = a.clone(), b.clone()
    a2[0, 16], b2[16, 0] = 0.0, 0.0
    a2[0, 1], b2[1, 0] = 1.0, float("-inf")
    assert tc.dot(a2, b2, arch="sm90").item() == float("-inf")
    # ieee: one fma.rn.f32 per k, so an overflow to +inf meets the later -inf too, and in the other order stays -inf
    f, g = torch.tensor([[3e38, 1.0]]), torch.tensor([[2.0], [float("-inf")]])
    assert torch.isnan(tc.dot(f, g, arch="sm90", input_precision="ieee")).all()
    assert tc.dot(f.flip(1), g.flip(0), arch="sm90", input_precision="ieee").item() == float("-inf")


def test_unmodelled_combinations_raise() -> None:
    a = torch.ones(4, 16, dtype=torch.float16)
    with pytest.raises(NotImplementedError, match="unverified"):  # tcgen05 beyond B200: no published model
        tc.dot(a, a.T, arch="sm103", instr="tcgen05")
    with pytest.raises(NotImplementedError, match="sm103"):  # no published model of B300 (sm103)
        tc.dot(a, a.T, arch="sm103", instr="mma")
    with pytest.raises(NotImplementedError, match="fp32 accumulators"):
        tc.dot(a, a.T, arch="sm90", out_dtype=torch.float16)


def test_models_name_their_source() -> None:
    for key, m in tc.MODELS.items():
        assert m.source, key
        assert ("measured" in repr(m)) and (m.measured or "published, not measured here" in repr(m))


def test_blackwell_rows_cover_mma_sync_only() -> None:
    """sm100: the published B200 BlockFMA rows cover mma.sync (what Triton gives tiles below a warpgroup);
    tcgen05.mma (its warpgroup tiles, asked as "wgmma" or "tcgen05") is no BlockFMA row but harness.tensor_cores.
    tcgen05's model, which tc.dot runs (test_tcgen05); sm120 runs mma.sync for every tile and FP8 there raises."""
    a = torch.ones(16, 32, dtype=torch.bfloat16)
    assert tc.dot(a, a.T, arch="sm100", instr="mma").eq(32).all()
    assert tc.model_for("sm120", "bf16", "wgmma") is tc.MODELS[("sm120", "bf16", "mma")]
    for instr in ("wgmma", "tcgen05"):
        with pytest.raises(NotImplementedError, match="under tcgen05.mma .* no BlockFMA row"):
            tc.model_for("sm100", "bf16", instr)
        assert tc.dot(a, a.T, arch="sm100", instr=instr).eq(32).all()
    e4 = a.to(torch.float8_e4m3fn)
    assert tc.dot(e4, e4.T, arch="sm100", instr="tcgen05").eq(32).all()
    with pytest.raises(NotImplementedError, match="published models disagree"):
        tc.dot(e4, e4.T, arch="sm120", instr="mma")
    for arch in ("sm100", "sm120"):
        assert not any(m.measured for (a_, _, _), m in tc.MODELS.items() if a_ == arch)


# --------------------------------------------------- found by mutating harness/tensor_cores/chain.py


def _fma_chain_exact(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """One correctly rounded fma.rn.f32 per k in k order, in exact rationals: independent of the model's float64
    arithmetic and of its round-to-odd repair."""
    out = torch.empty(a.shape[0], b.shape[1], dtype=torch.float32)
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            acc = Fraction(float(c[i, j]))
            for k in range(a.shape[1]):
                acc = Fraction(float(round_f32(acc + Fraction(float(a[i, k])) * Fraction(float(b[k, j])))))
            out[i, j] = float(acc)
    return out


def test_ieee_rounds_each_fma_once_where_float64_rounds_first() -> None:
    """(1 + 2^-12)^2 = 1 + 2^-11 + 2^-24 lies exactly halfway between two fp32 values; an accumulator of
    ±2^-100 decides the direction, but float64 loses it in the sum: only the round-to-odd repair, which needs
    TwoSum's error with its sign, keeps the fma correctly rounded."""
    a = torch.tensor([[1 + 2.0**-12]])
    # and 2^-52 (1 - 2^-24) above it: float64 rounds the sum up to the odd H + 2^-52, already on the right
    # side; moving it again would land on the tie and round down
    odd = 2.0**-52 * (1 - 2.0**-24)
    # A row and a column of 2^-70 put every product of the tile near fp32's subnormal range, where the model
    # evaluates the fmas one by one instead of through its vectorized float64 path: both must agree.
    a2, b2 = torch.tensor([[1 + 2.0**-12], [2.0**-70]]), torch.tensor([[1 + 2.0**-12, 2.0**-70]])
    for c, want in ((2.0**-100, 1 + 2.0**-11 + 2.0**-23), (-(2.0**-100), 1 + 2.0**-11),
                    (odd, 1 + 2.0**-11 + 2.0**-23)):
        got = tc.dot(a, a, torch.tensor([[c]]), arch="sm90", input_precision="ieee").item()
        assert got == want, (c, got)
        acc = torch.tensor([[c, 0.0], [0.0, 0.0]])
        got = tc.dot(a2, b2, acc, arch="sm90", input_precision="ieee")
        assert got[0, 0].item() == want and torch.equal(got, _fma_chain_exact(a2, b2, acc)), (c, got)


def test_ieee_matches_exact_fma_chains_in_the_subnormal_range() -> None:
    """Products near 2^-140 (each fma's sum below fp32's smallest normal, where the fast path refuses) and
    near 2^-24 of an accumulator of 1 (halfway cases), against the exact chain."""
    g = torch.Generator().manual_seed(7)
    tiny = torch.ldexp(torch.rand(3, 12, generator=g) + 1, torch.randint(-72, -66, (3, 12), generator=g))
    tiny = tiny * torch.where(torch.rand(3, 12, generator=g) < 0.5, -1.0, 1.0)
    b = torch.ldexp(torch.rand(12, 2, generator=g) + 1, torch.randint(-72, -66, (12, 2), generator=g))
    tiny[0, 5], b[3, 1] = 0.0, 0.0  # zeros are no smallest exponent: they must not hide how small the rest is
    c = torch.zeros(3, 2)
    got = tc.dot(tiny.float(), b.float(), c, arch="sm90", input_precision="ieee")
    assert torch.equal(got, _fma_chain_exact(tiny.float(), b.float(), c))
    half = torch.tensor([[1 + 2.0**-12, 1 + 2.0**-12, 2.0**-12, -(2.0**-13)]])
    col = torch.tensor([[1 + 2.0**-12], [1 + 2.0**-12], [2.0**-12 + 2.0**-35], [2.0**-11]])
    one = torch.tensor([[1.0]])
    assert torch.equal(tc.dot(half, col, one, arch="sm90", input_precision="ieee"), _fma_chain_exact(half, col, one))


def test_ieee_rounds_a_subnormal_tie_that_float64_made() -> None:
    """(1 + 2^-23) 2^-75 x (1 - 2^-23) 2^-75 = 2^-150 (1 - 2^-46), added to the odd subnormal 2^-140 + 2^-149: the
    float64 sum rounds to the midpoint between two fp32 subnormals, and rounding that to even would go up; the
    exact sum is below it, so the fma keeps the accumulator. The zero elements beside must not change that."""
    a = torch.tensor([[(1 + 2.0**-23) * 2.0**-75, 0.0]])
    b = torch.tensor([[(1 - 2.0**-23) * 2.0**-75], [0.0]])
    c = torch.tensor([[2.0**-140 + 2.0**-149]])
    got = tc.dot(a, b, c, arch="sm90", input_precision="ieee")
    assert got.item() == 2.0**-140 + 2.0**-149 and torch.equal(got, _fma_chain_exact(a, b, c))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float8_e4m3fn])
def test_a_special_accumulator_stays_what_it_is(dtype) -> None:
    """inf, -inf and NaN in ``acc`` with finite operands: the result's IEEE class is the accumulator's."""
    a = torch.ones(2, 32).to(dtype)
    acc = torch.tensor([[float("inf"), float("-inf")], [float("nan"), 3.0]])
    got = tc.dot(a, a.T.contiguous(), acc, arch="sm90")
    assert got[0, 0].item() == float("inf") and got[0, 1].item() == float("-inf") and torch.isnan(got[1, 0])
    assert got[1, 1].item() == 35.0


@pytest.mark.parametrize("a_shape, b_shape", [((4,), (4, 2)), ((2, 4), (4,)), ((2, 4), (1, 4, 2)),
                                              ((2, 2, 4), (3, 4, 2)), ((2, 4), (5, 2)), ((1, 1, 2, 4), (1, 1, 4, 2))])
def test_operands_that_are_no_tile_are_refused(a_shape, b_shape) -> None:
    with pytest.raises(ValueError, match=r"expected a \[M, K\] and b \[K, N\] \(or \[P, M, K\] and \[P, K, N\]\)"):
        tc.dot(torch.ones(a_shape, dtype=torch.float16), torch.ones(b_shape, dtype=torch.float16), arch="sm90")


def test_an_fp8_operand_with_a_16_bit_one_is_not_modelled() -> None:
    a8, a16 = torch.ones(2, 32).to(torch.float8_e4m3fn), torch.ones(32, 2, dtype=torch.float16)
    for a, b in ((a8, a16), (a16.T.contiguous(), a8.T.contiguous())):
        with pytest.raises(NotImplementedError, match=r"mixed operands (e4m3 x fp16|fp16 x e4m3) are not modelled"):
            tc.dot(a, b, arch="sm90")


@pytest.mark.parametrize(("m", "run"), [(32, 32), (40, 64), (64, 64), (65, 96)])
def test_fp8_max_num_imprecise_acc_rounds_up_to_whole_wgmma_k32(m, run) -> None:
    """Triton issues ceil(m / 32) wgmma k32 instructions per run, so m = 40 runs 64 products, 65 runs 96. One 256
    product at k = 0 then 127 products of 2^-9: the run holding the 256 keeps 13 bits aligned to it and drops the
    small ones; every later run sums them from zero exactly and adds with add.f32. So the result is
    256 + (128 - run) * 2^-9, and the error bound is that of runs of ``run``."""
    from harness.tensor_cores.bounds import error_bound

    a = torch.full((1, 128), 2.0**-9)
    b = torch.ones((128, 1))
    a[0, 0] = b[0, 0] = 16.0
    got = tc.dot(a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn), arch="sm90", max_num_imprecise_acc=m)
    assert got.item() == 256 + (128 - run) * 2.0**-9
    eb = error_bound("sm90", "e4m3", "e4m3", 128, max_num_imprecise_acc=m)
    assert f"runs of {run} added with add.f32" in eb.note
    assert eb == error_bound("sm90", "e4m3", "e4m3", 128, max_num_imprecise_acc=run)
