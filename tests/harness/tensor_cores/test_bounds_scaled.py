"""harness.tensor_cores.scaled_error_bound: the derived worst case of a native block-scaled tile on sm100
(tcgen05.mma kind::mxf4, mxf4nvf4 with e8m0 and ue4m3 scales, mxf8f6f4) holds on the published model
(harness.tensor_cores.dot_scaled, instr="tcgen05") for inputs built against it, and those inputs reach a pinned
share of it.

The built inputs, one per output on the diagonal of the tile's top-left corner (pattern i: row i of a, column i of
b, scaled as the pattern needs):

0. what dominates the bound. mxf4/mxf4nvf4: the truncation of every instruction's sum to fp32 (2^-23 relative, 4096
   times the window's 2^-35): c = 2^(T + 30) with the scale pair 2^T, and each instruction's products summing to
   127.75 x 2^T, just below c's fp32 ulp, which the window keeps and the fp32 truncation drops, instruction after
   instruction. mxf8f6f4: alignment loss, c = 1 and every scaled product just below the 25-bit window c sets (one
   scale block is one instruction, so a large product cannot set it for smaller ones of another scale);
1. cancellation across a scale boundary: +x and -x of the largest magnitude in the high-scale block of every
   instruction, the low-scale block's products just below the window those set (dropped, while their exact sum
   survives);
2. wide exponents: random codes, signs and scale codes over 60 binades, and a random c;
3. the fp32-subnormal range: scale pairs near 2^-150, alternating blocks far apart (the subnormal group floor drops
   the lower ones), a subnormal c.

"Exact" is math.fsum of the float64 scaled products (exact: at most 4 x 4 significant bits of operands and 4 x 4
of ue4m3 scales) and c, off the exact sum by at most 2^-53 of it, which the check allows on top of the bound.
"""

from __future__ import annotations

import math

import pytest
import torch

from harness import tensor_cores as tc
from harness.tensor_cores import scaled_error_bound

KS = [64, 512, 4096]
M, N = 128, 16  # the smallest native tile: M a multiple of 128, N >= 16
_E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
_F8 = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
#: id: (a format, b format, scale, group)
KINDS = {
    "mxf4": ("e2m1", "e2m1", "e8m0", 32),
    "mxf4nvf4-e8m0x16": ("e2m1", "e2m1", "e8m0", 16),
    "nvfp4": ("e2m1", "e2m1", "ue4m3", 16),
    "mxf8f6f4-e4m3": ("e4m3", "e4m3", "e8m0", 32),
    "mxf8f6f4-e5m2": ("e5m2", "e5m2", "e8m0", 32),
    "mxf8f6f4-e2m1xe4m3": ("e2m1", "e4m3", "e8m0", 32),
}
#: Share of the bound pattern 0 reaches (measured 2026-12-06 at K in KS): mxf4 / mxf4nvf4 0.994-0.997 (the fp32
#: truncation, every instruction), mxf8f6f4 0.81 (alignment loss). Seen failing: with the fp32 truncation term a
#: quarter lower, all 9 mxf4/mxf4nvf4 cases; with a window one bit narrower, all 9 mxf8f6f4 cases. Pinned at half.
REACH = 0.5


def _e2m1_codes(v: torch.Tensor) -> torch.Tensor:
    mag = v.abs()
    idx = torch.stack([mag == x for x in _E2M1]).to(torch.uint8).argmax(0).to(torch.uint8)
    assert torch.equal(torch.tensor(_E2M1, dtype=torch.float64)[idx.long()], mag), "not an e2m1 value"
    return idx | ((v < 0).to(torch.uint8) << 3)


def _operand(v: torch.Tensor, fmt: str, along_k: int) -> torch.Tensor:
    """float64 values -> the operand tl.dot_scaled takes: e2m1 packed two a byte along K, FP8 as torch float8."""
    if fmt == "e2m1":
        c = _e2m1_codes(v)
        lo, hi = (c[:, 0::2], c[:, 1::2]) if along_k == 1 else (c[0::2], c[1::2])
        return lo | (hi << 4)
    x = v.to(_F8[fmt])
    assert torch.equal(x.double(), v), f"not an {fmt} value"
    return x


def _scales(exps: torch.Tensor, scale: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Powers of two 2^exps -> (the scale tensor tl.dot_scaled takes, its values)."""
    if scale == "e8m0":
        return (exps + 127).to(torch.uint8), torch.exp2(exps.double())
    s = torch.exp2(exps.double()).to(torch.float8_e4m3fn)
    assert torch.equal(s.double(), torch.exp2(exps.double())), "scale not a ue4m3 value"
    return s, s.double()


def _tile(kind: str, K: int):
    """The built inputs of the module docstring: values a [M, K], b [K, N], scale exponents [M, K/g] and [K/g, N],
    c [M, N]; only rows and columns 0-3 are nonzero."""
    fa, fb, scale, group = KINDS[kind]
    grouped = fa == fb == "e2m1"
    G = K // group
    a = torch.zeros(M, K, dtype=torch.float64)
    b = torch.zeros(K, N, dtype=torch.float64)
    sa = torch.zeros(M, G, dtype=torch.int64)
    sb = torch.zeros(G, N, dtype=torch.int64)
    c = torch.zeros(M, N, dtype=torch.float64)
    g = torch.Generator().manual_seed(K)
    lo = -6 if scale == "ue4m3" else -60  # the scale exponents each pattern may use
    ik = 64 if grouped else 32  # k per instruction
    # 0. grouped: the fp32 truncation; mxf8f6f4: alignment loss
    if grouped:
        T = -12 if scale == "ue4m3" else -30
        sa[0], sb[:, 0] = T // 2, T - T // 2
        c[0, 0] = 2.0 ** (T + 30)
        one = torch.tensor([6.0] * 21 + [1.5, 0.5] + [0.0] * (ik - 23), dtype=torch.float64)
        a[0] = one.repeat(K // ik)
        b[:, 0] = torch.tensor([1.0] * 22 + [0.5] + [0.0] * (ik - 23), dtype=torch.float64).repeat(K // ik)
    else:  # c = 1 sets every instruction's window at 2^-25; each product is 1.875 x 2^-26, just below it
        c[0, 0] = 1.0
        sa[0], sb[:, 0] = -13, -13
        a[0], b[:, 0] = 1.5, 1.25
    # 1. cancellation: the high-scale block's +-x cancel, the low-scale block's products fall below the window
    hi, lo_s = 8, (-6 if scale == "ue4m3" else -44)
    per = ik // group  # scale blocks per instruction
    for k0 in range(0, K, ik):
        blk = k0 // group
        sa[1, blk] = hi
        x = 6.0 if fa == "e2m1" else 256.0
        a[1, k0], a[1, k0 + 1] = x, -x
        b[k0, 1] = b[k0 + 1, 1] = 6.0 if fb == "e2m1" else 256.0
        if per > 1:
            sa[1, blk + 1:blk + per] = lo_s
            a[1, k0 + group:k0 + ik] = 1.5 if fa == "e2m1" else 1.75
            b[k0 + group:k0 + ik, 1] = 1.0
        else:  # one block per instruction: the small products share its scale, below the window of the large ones
            a[1, k0 + 2:k0 + ik] = 0.5 if fa == "e2m1" else 1.75 * 2.0 ** -6
            b[k0 + 2:k0 + ik, 1] = 0.5 if fb == "e2m1" else 2.0 ** -4
    # 2. wide exponents: random codes and signs, scales over 60 binades, a random c
    pick = torch.tensor(_E2M1[1:], dtype=torch.float64)
    def rand_vals(n: int, fmt: str) -> torch.Tensor:
        sign = torch.where(torch.rand(n, generator=g) < 0.5, -1.0, 1.0).double()
        if fmt == "e2m1":
            return sign * pick[torch.randint(0, 7, (n,), generator=g)]
        e = torch.randint(-6, 8, (n,), generator=g).double()
        m = torch.randint(0, 4 if fmt == "e5m2" else 8, (n,), generator=g).double() / (4 if fmt == "e5m2" else 8)
        return sign * (1 + m) * torch.exp2(e)
    a[2], b[:, 2] = rand_vals(K, fa), rand_vals(K, fb)
    sa[2] = torch.randint(lo, 1 if scale == "ue4m3" else 0, (G,), generator=g)
    sb[:, 2] = torch.randint(lo, 1 if scale == "ue4m3" else 0, (G,), generator=g)
    c[2, 2] = float(torch.randn(1, generator=g)) * 2.0 ** -20
    # 3. the fp32-subnormal range: alternating far-apart scale pairs near 2^-150, a subnormal c
    if scale == "ue4m3":  # ue4m3 scales reach 2^-9 only: the subnormal range is out of its reach with e2m1 operands
        sa[3], sb[:, 3] = -6, -6
        c[3, 3] = -3.0 * 2.0 ** -149
    else:
        sa[3] = torch.tensor([-75, -95] * (G // 2 + 1))[:G]
        sb[:, 3] = -75
        c[3, 3] = -3.0 * 2.0 ** -149
    a[3], b[:, 3] = rand_vals(K, fa), rand_vals(K, fb)
    return a, b, sa, sb, c.float()


def _exact(a, b, sav, sbv, c, group):
    A = a[:4] * sav[:4].repeat_interleave(group, 1)
    B = b[:, :4] * sbv[:, :4].repeat_interleave(group, 0)
    out = torch.empty(4, 4, dtype=torch.float64)
    for i in range(4):
        for j in range(4):
            out[i, j] = math.fsum((A[i] * B[:, j]).tolist() + [float(c[i, j])])
    return out


def _model_and_bound(kind: str, K: int, a, b, sa, sb, c):
    fa, fb, scale, group = KINDS[kind]
    (sa_t, sav), (sb_t, sbv) = _scales(sa, scale), _scales(sb, scale)
    out = tc.dot_scaled(_operand(a, fa, 1), sa_t, fa, _operand(b, fb, 0), sb_t.T.contiguous(), fb, c,
                        arch="sm100", instr="tcgen05", triton="3.9")
    eb = scaled_error_bound("sm100", fa, fb, K, scale=scale, group=group)
    got = out[:4, :4].double()
    want = _exact(a, b, sav, sbv, c, group)
    bound = eb.on(a[:4], b[:, :4], c[:4, :4], scale_a=sav[:4], scale_b=sbv[:, :4])
    assert torch.isfinite(got).all(), f"{kind} K={K}: non-finite model output"
    err = (got - want).abs()
    bad = ~(err <= bound + 2.0 ** -53 * want.abs())
    assert not bad.any(), f"{kind} K={K}: |err| {err[bad].tolist()} > bound {bound[bad].tolist()} ({eb!r})"
    return err, bound


@pytest.mark.parametrize("K", KS)
@pytest.mark.parametrize("kind", list(KINDS))
def test_scaled_bound_holds_and_is_reached_on_built_inputs(kind, K):
    err, bound = _model_and_bound(kind, K, *_tile(kind, K))
    reach = (err / bound).diagonal()
    assert reach[0] >= REACH, f"{kind} K={K}: built inputs reach {reach.tolist()} of the bound"


@pytest.mark.parametrize("kind", list(KINDS))
def test_scaled_bound_holds_on_random_inputs(kind):
    fa, fb, scale, group = KINDS[kind]
    K = 512
    g = torch.Generator().manual_seed(11)

    def rand(shape, fmt):
        if fmt == "e2m1":
            v = torch.tensor(_E2M1, dtype=torch.float64)[torch.randint(0, 8, shape, generator=g)]
        else:
            v = torch.randn(shape, generator=g, dtype=torch.float64).to(_F8[fmt]).double()
        return v * torch.where(torch.rand(shape, generator=g) < 0.5, -1.0, 1.0)

    a, b = rand((M, K), fa), rand((K, N), fb)
    a[4:], b[:, 4:] = 0, 0
    hi = 1 if scale == "ue4m3" else 20
    sa = torch.randint(-6 if scale == "ue4m3" else -20, hi, (M, K // group), generator=g)
    sb = torch.randint(-6 if scale == "ue4m3" else -20, hi, (K // group, N), generator=g)
    c = (torch.randn(M, N, generator=g) * 64).float()
    _model_and_bound(kind, K, a, b, sa, sb, c)


def test_scaled_bound_values_follow_the_derivation():
    """Hand-checked numbers: mxf4, K=128, is 2 instructions of 4 groups and c at 2^-35 each plus 2^-23; NVFP4's
    K=4 product groups make 16 truncations an instruction; mxf8f6f4 is the one-window form (33 truncations at
    2^-25). The ue4m3 scale's raw exponent floor is -6, e8m0's -127."""
    e = scaled_error_bound("sm100", "e2m1", "e2m1", 128)
    assert e.alpha == e.beta == 2 * (5 * 2.0 ** -35 + 2.0 ** -23)
    assert "kind::mxf4.block_scale" in e.note and e.note.startswith("derived: sm100")
    nv = scaled_error_bound("sm100", "e2m1", "e2m1", 128, scale="ue4m3", group=16)
    assert nv.alpha == 2 * (17 * 2.0 ** -35 + 2.0 ** -23) and nv.emin_scale == -6 and nv.group == 16
    f8 = scaled_error_bound("sm100", "e4m3", "e4m3", 128)
    assert f8.alpha == 4 * (33 * 2.0 ** -25 + 2.0 ** -23) and f8.emin_a == -6 and f8.emin_scale == -127


@pytest.mark.parametrize(("args", "kwargs", "err", "match"), [
    (("sm100", "e2m1", "e2m1", 0), {}, ValueError, "K must be an int >= 1, got 0"),
    (("sm100", "bf16", "e2m1", 64), {}, ValueError, "a_format must be one of e2m1, e4m3, e5m2, got 'bf16'"),
    (("sm100", "e2m1", "e2m1", 64), {"scale": "fp8"}, ValueError, "scale must be 'e8m0' or 'ue4m3'"),
    (("sm100", "e2m1", "e2m1", 64), {"scale": "ue4m3"}, ValueError, "ue4m3 scales: 16"),
    (("sm100", "e2m1", "e2m1", 48), {}, ValueError, "K=48 is not a whole number of scale groups of 32"),
    (("sm100", "e2m1", "e2m1", 32), {}, ValueError, "not a multiple of kind::mxf4.block_scale.scale_vec::2X's k=64"),
    (("sm90", "e2m1", "e2m1", 64), {}, NotImplementedError, "sm90 has no native block-scaled MMA"),
    (("sm103", "e2m1", "e2m1", 64), {}, NotImplementedError, "sm103's tcgen05.mma numerics are unverified"),
])
def test_scaled_bound_bad_arguments_are_named(args, kwargs, err, match):
    with pytest.raises(err, match=match):
        scaled_error_bound(*args, **kwargs)


def test_on_needs_the_scales_of_a_scaled_bound_and_refuses_them_otherwise():
    e = scaled_error_bound("sm100", "e2m1", "e2m1", 64)
    with pytest.raises(ValueError, match=r"scale_a: expected the scale values \[2, 2\]"):
        e.on(torch.ones(2, 64), torch.ones(64, 2))
    plain = tc.error_bound("sm100", "bf16", "bf16", 64, instr="tcgen05")
    with pytest.raises(ValueError, match="belong to a block-scaled bound"):
        plain.on(torch.ones(2, 64), torch.ones(64, 2), scale_a=torch.ones(2, 2))
