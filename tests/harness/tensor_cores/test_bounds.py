"""harness.tensor_cores.error_bound: the derived worst case holds on the model (harness.tensor_cores.dot) for
every row of MODELS (and the ieee, max_num_imprecise_acc and FP8-under-mma.sync paths), on inputs built to hit it
and on random ones, for K in {16, 256, 4096}; and it is not vacuous: inputs built for it reach a pinned share.

"Exact" is math.fsum of the float64 products (each exact: at most 24 x 24 significand bits) and c: correctly
rounded, so it is off the exact sum by at most 2^-53 of it, which the check allows on top of the bound.
"""

from __future__ import annotations

import math

import pytest
import torch

from harness.tensor_cores import MODELS, BlockFMA, ErrorBound, dot, error_bound, tcgen05
from harness.tensor_cores.models import EMIN, fp8_model, model_for

KS = [16, 256, 4096]
_FP8 = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
_DT = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32, **_FP8}
#: (largest exponent, fraction bits) of the values the adversarial inputs use (fp32: tf32 values)
_FMT = {"fp16": (15, 10), "bf16": (127, 7), "fp32": (127, 10), "e4m3": (8, 3), "e5m2": (15, 2)}

#: one case per MODELS row, plus the paths Triton wraps around an instruction:
#: (id, arch, a, b, instr, input_precision, max_num_imprecise_acc)
CASES = []
for (_arch, _kind, _instr) in MODELS:
    if _kind == "fp8":
        for _a, _b in (("e4m3", "e4m3"), ("e5m2", "e5m2"), ("e4m3", "e5m2")):
            CASES.append((f"{_arch}-{_a}x{_b}-{_instr}", _arch, _a, _b, _instr, None, None))
    elif _kind == "tf32":
        CASES.append((f"{_arch}-tf32-{_instr}", _arch, "fp32", "fp32", _instr, "tf32", None))
    else:
        CASES.append((f"{_arch}-{_kind}-{_instr}", _arch, _kind, _kind, _instr, None, None))
CASES += [
    ("sm90-fp32-ieee", "sm90", "fp32", "fp32", "wgmma", "ieee", None),
    ("sm90-e4m3-imprecise32", "sm90", "e4m3", "e4m3", "wgmma", None, 32),
    ("sm90-e5m2-imprecise64", "sm90", "e5m2", "e5m2", "wgmma", None, 64),
    ("sm90-e4m3-mma", "sm90", "e4m3", "e4m3", "mma", None, None),  # the fp16 instruction on converted operands
    ("sm80-e5m2-mma", "sm80", "e5m2", "e5m2", "mma", None, None),  # the A100 fp16 row, likewise
    ("sm100-e4m3xe5m2-mma", "sm100", "e4m3", "e5m2", "mma", None, None),  # the B200 fp16 row, likewise
]
#: sm100's warpgroup tiles: tcgen05.mma, the published model's one-window kinds (kind::f16, tf32, f8f6f4)
CASES += [(f"sm100-{a}x{b}-tcgen05" if a != b else f"sm100-{a}-tcgen05", "sm100", a, b, "tcgen05",
           "tf32" if a == "fp32" else None, None)
          for a, b in (("fp16", "fp16"), ("bf16", "bf16"), ("fp32", "fp32"), ("e4m3", "e4m3"), ("e5m2", "e5m2"),
                       ("e4m3", "e5m2"))]
#: the FP8 cases Triton converts to fp16 (modelled for K a multiple of 32); the sm80/sm100 ones carry rows another
#: case runs at every K, so they run at one K, as the twins below
_UPCAST = {"sm90-e4m3-mma", "sm80-e5m2-mma", "sm100-e4m3xe5m2-mma"}
#: published rows whose numbers an earlier row already has (sm100/sm120 mma.sync carry H100's: fma 16, 25 bits,
#: rz): the bound is a function of those numbers alone, so they run at one K (every K of their twin runs); why: the
#: CPU lanes' time budget
_NUMBERS: set = set()
_TWINS: set = set()
for (_arch, _kind, _instr), _m in MODELS.items():
    _num = (_kind, _m.nfma, _m.frac, _m.frac_out, _m.min_exp)
    if _num in _NUMBERS and not _m.measured:
        _TWINS.add((_arch, _instr, _kind))
    _NUMBERS.add(_num)
#: (case, K) the model covers: FP8 converted to fp16 is modelled for K a multiple of 32


def _provenance(case: tuple) -> str:
    """The id's label: whether the row the case runs on was measured on the H200 or is published, not measured
    here (the ieee path is fma.rn, measured with the tl.dot capture)."""
    _, arch, a, b, instr, ip, _ = case
    if instr == "tcgen05":
        return "published"
    if a in _FP8:
        return fp8_model(arch, a, b, instr)[0].provenance
    if ip == "ieee":
        return "measured" if arch == "sm90" else "published"
    return model_for(arch, "tf32" if a == "fp32" else a, instr).provenance


PARAMS = [pytest.param(c, K, id=f"{c[0]}-{_provenance(c)}-K{K}") for c in CASES for K in KS
          if not (c[0] in _UPCAST and K % 32)
          and not ((c[1], c[4], "tf32" if c[2] == "fp32" else c[2]) in _TWINS and K != 256)
          and not (c[0] in _UPCAST - {"sm90-e4m3-mma"} and K != 256)]

#: Share of the bound the built inputs reach (the model alone, no Triton; measured 2026-12-04 over every case and
#: K in KS): alignment loss 0.54 (sm89 e5m2 x e5m2, K=4096) .. 0.85, 0.71 for FP8 under mma.sync; tf32 input
#: truncation 0.82 (sm80, K=4096) .. 1.00; ieee 1.00. sm100 tcgen05 (measured 2026-12-06): alignment loss 0.63
#: (e5m2, K=16) .. 0.81 (f8f6f4, K=4096), tf32 input truncation 0.91-1.00 (a bound whose window is one bit narrower
#: fails 17 of these cases). Pinned at half: a bound twice as loose fails here.
REACH = 0.5


def _row(case):
    """The BlockFMA numbers the built inputs aim at: a tcgen05 kind as one (k products, a 25-bit window below the
    largest raw exponent, 23 bits kept; no clamp, so min_exp is fp32's -126 of the accumulator)."""
    _, arch, ka, _, instr, ip, _ = case
    if instr == "tcgen05":
        kind = tcgen05.KINDS["f8f6f4" if ka in _FP8 else "tf32" if ka == "fp32" else "f16"]
        return BlockFMA(kind.k, kind.window, 23, -126, kind.source, False)
    if ip == "ieee":
        return None
    if ka in _FP8:
        return fp8_model(arch, ka, case[3], instr)[0]
    return model_for(arch, "tf32" if ka == "fp32" else ka, instr)


def _exact(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    A, B, C = a.double(), b.double(), c.double()
    out = torch.empty(A.shape[0], B.shape[1], dtype=torch.float64)
    for i in range(A.shape[0]):
        for j in range(B.shape[1]):
            out[i, j] = math.fsum((A[i] * B[:, j]).tolist() + [float(C[i, j])])
    return out


def _as(x: torch.Tensor, name: str) -> torch.Tensor:
    """x (float64 values of the format) in the format, checked exact."""
    y = x.to(_DT[name]) if name in _FP8 else x.float().to(_DT[name])
    assert torch.equal(y.double(), x), f"test input not exact in {name}"
    return y


def _cast(x: torch.Tensor, name: str) -> torch.Tensor:
    lim = float(torch.finfo(_DT[name]).max)
    return x.clamp(-lim, lim).to(_DT[name])


def _check(case, a, b, c) -> tuple[torch.Tensor, torch.Tensor]:
    """|model - exact| and the bound, after asserting the one within the other everywhere."""
    _, arch, ka, kb, instr, ip, mnia = case
    K = a.shape[1]
    eb = error_bound(arch, ka, kb, K, instr=instr, input_precision=ip, max_num_imprecise_acc=mnia)
    got = dot(a, b, c, arch=arch, instr=instr, input_precision=ip, max_num_imprecise_acc=mnia).double()
    want = _exact(a, b, c)
    bound = eb.on(a, b, c)
    err = (got - want).abs()
    assert torch.isfinite(got).all(), f"{case[0]} K={K}: non-finite model output"
    bad = ~(err <= bound + 2.0 ** -53 * want.abs())
    assert not bad.any(), f"{case[0]} K={K}: |err| {err[bad].tolist()} > bound {bound[bad].tolist()} ({eb!r})"
    return err, bound


def _adversarial(case, K: int):
    """a [4, K], b [K, 4], c [4, 4]; row i of a with column i of b is pattern i:

    0. alignment loss: the product 2^E (E = 2h) first, every other product the format's largest value below the
       truncation step 2^(E - f): every block aligns to 2^E (the product, then the accumulator) and drops them;
       ieee: c = 1 and every product just below half an fp32 ulp of 1, which each fma rounds away;
    1. cancellation: +2^E and -2^E in every block, the rest as in 0;
    2. every block truncating the same way: positive products with full significands and a large c; fp32 (tf32):
       operands whose bits below tf32 are all ones, which the instruction drops (input truncation);
    3. random values and c = -(c of 2)."""
    _, _, ka, kb, _, ip, _ = case
    ea, ma = _FMT[ka]
    eb_, _ = _FMT[kb]
    row = _row(case)
    f = 24 if row is None else row.frac
    n = 1 if row is None else row.nfma
    emin = max(EMIN.get(ka, -126), EMIN.get(kb, -126))
    h = min(ea, eb_, max(0, -(-(f + 1 + max(emin, -20)) // 2)))
    E = 2 * h
    # the largest product below 2^(E - f): a's largest significand at 2^ta times b = 2^tb (1 unless a's range
    # ends first: e4m3 as fp16, 25 bits)
    ta = max(E - f - 1, EMIN.get(ka, -126))
    tb = max(E - f - 1 - ta, EMIN.get(kb, -126))
    tiny = (2 - 2.0 ** -ma) * 2.0 ** ta
    g = torch.Generator().manual_seed(K)
    A = torch.full((4, K), tiny, dtype=torch.float64)
    B = torch.ones(K, 4, dtype=torch.float64)
    C = torch.zeros(4, 4, dtype=torch.float64)
    if ip == "ieee":
        A[0] = (2 - 2.0 ** -23) * 2.0 ** -25
        C[0] = 1.0
    else:
        B[:, 0] = 2.0 ** tb
        A[0, 0] = B[0, 0] = 2.0 ** h
    for k0 in range(0, K - 1, max(n, 2)):
        A[1, k0], A[1, k0 + 1] = 2.0 ** h, -(2.0 ** h)
        B[k0, 1] = B[k0 + 1, 1] = 2.0 ** h
    if ka == "fp32":
        A[2] = B[:, 2] = 1 + 2.0 ** -10 - 2.0 ** -23
    else:
        frac = torch.randint(1, 2 ** ma, (K,), generator=g).double() / 2 ** ma
        A[2] = (1 + frac) * 2.0 ** torch.randint(-2, 3, (K,), generator=g).double()
    A[3] = _cast(torch.randn(K, generator=g, dtype=torch.float64), ka).double()
    B[:, 3] = _cast(torch.randn(K, generator=g, dtype=torch.float64), kb).double()
    C[2] = 2.0 ** (E - 1) * (1 + 2.0 ** -ma)
    C[3] = -C[2]
    return _as(A, ka), _as(B, kb), C.float()


@pytest.mark.parametrize(("case", "K"), PARAMS)
def test_bound_holds_and_is_reached_on_built_inputs(case, K):
    a, b, c = _adversarial(case, K)
    err, bound = _check(case, a, b, c)
    reach = (err / bound).diagonal()
    pattern = 2 if case[5] == "tf32" else 0  # tf32: the input truncation dominates the bound
    assert reach[pattern] >= REACH, f"{case[0]} K={K}: built inputs reach {reach.tolist()} of the bound"


@pytest.mark.parametrize(("case", "K"), PARAMS)
def test_bound_holds_on_random_inputs(case, K):
    g = torch.Generator().manual_seed(7 * K + 1)
    a = torch.randn(8, K, generator=g, dtype=torch.float64) * 2.0 ** torch.randint(-4, 5, (8, K), generator=g)
    b = torch.randn(K, 4, generator=g, dtype=torch.float64)
    c = torch.randn(8, 4, generator=g).float() * 4
    _check(case, _cast(a, case[2]), _cast(b, case[3]), c)


def test_bound_of_subnormal_operands_uses_their_alignment_magnitude():
    """A subnormal operand aligns as if it were 2^emin (the instruction clamps input exponents): a product of a
    subnormal bf16 and a large one sets the block's alignment far above its own value, and the bound grows with
    |a|~ |b|~, not with |a b|. The model loses the small products here; the sum|a b| form alone would not cover it."""
    K = 16
    a = torch.full((1, K), 1.5 * 2.0 ** -52, dtype=torch.float64)  # below the step 2^(-26 - 25) of that alignment
    a[0, 0] = 2.0 ** -130  # subnormal bf16: with b 2^100 a product of 2^-30 aligned as 2^-26
    b = torch.ones(K, 1, dtype=torch.float64)
    b[0, 0] = 2.0 ** 100
    a, b = _as(a, "bf16"), _as(b, "bf16")
    c = torch.zeros(1, 1)
    eb = error_bound("sm90", "bf16", "bf16", K)
    err, bound = _check(("sub", "sm90", "bf16", "bf16", "wgmma", None, None), a, b, c)
    plain = eb((a.double() @ b.double()).abs().item())
    assert err.item() > plain, "the subnormal case no longer exceeds the sum|ab| form: the test lost its point"
    assert err.item() <= bound.item()


def test_bound_values_follow_the_derivation():
    """Hand-checked numbers: sm90 fp8 wgmma (k=32, 13 bits), K=128 is 4 steps of (33 + 1) 2^-13; bf16 wgmma (k=16,
    25 / 23 bits), K=128 is 8 steps of 17 * 2^-25 + 2^-23; tf32 adds 2^-9; ieee is gamma_K."""
    e = error_bound("sm90", torch.float8_e4m3fn, torch.float8_e4m3fn, 128)
    assert e.alpha == e.beta == 4 * 34 * 2.0 ** -13
    assert e.note.startswith("derived: sm90 fp8 accumulator") and e.note.endswith("K=128")
    b = error_bound("sm90", "bf16", "bf16", 128)
    assert b.alpha == 8 * (17 * 2.0 ** -25 + 2.0 ** -23)
    t = error_bound("sm90", "fp32", "fp32", 128)
    assert t.alpha == t.beta + 2.0 ** -9
    i = error_bound("sm90", "fp32", "fp32", 128, input_precision="ieee")
    assert i.alpha == 128 * 2.0 ** -24 / (1 - 128 * 2.0 ** -24)
    short = error_bound("sm90", "e4m3", "e4m3", 16)  # one step of 16 products (the rest of k=32 is zero)
    assert short.alpha == 18 * 2.0 ** -13
    assert isinstance(e, ErrorBound) and "alpha=" in repr(e)


@pytest.mark.parametrize(("kwargs", "match"), [
    (dict(K=0), "K must be an int >= 1, got 0"),
    (dict(K=True), "K must be an int >= 1"),
    (dict(a_dtype="int8"), "a_dtype must be one of"),
    (dict(b_dtype=torch.int8), "b_dtype must be one of"),
    (dict(instr="hmma"), "instr must be 'wgmma', 'tcgen05' or 'mma'"),
    (dict(instr="tcgen05"), "instr='tcgen05' is sm100's instruction; sm90 has none"),
    (dict(max_num_imprecise_acc=-1), "max_num_imprecise_acc must be an int >= 0 or None"),
    (dict(input_precision="tf32"), "input_precision applies to fp32 operands only"),
    (dict(a_dtype="fp32", b_dtype="fp32", input_precision="bf16x3"), "input_precision must be"),
])
def test_bad_arguments_are_named(kwargs, match):
    args = dict(arch="sm90", a_dtype="bf16", b_dtype="bf16", K=64) | kwargs
    with pytest.raises(ValueError, match=match):
        error_bound(args.pop("arch"), args.pop("a_dtype"), args.pop("b_dtype"), args.pop("K"), **args)


@pytest.mark.parametrize(("args", "match"), [
    (("sm80", "e4m3", "e4m3", 64), "does not compile for sm80: .*fp8e4nv not supported"),
    (("sm103", "e5m2", "e5m2", 64), "sm103's tcgen05.mma numerics are unverified"),
    (("sm100", "fp16", "bf16", 64), "mixed operands fp16 x bf16"),
    (("sm120", "e4m3", "e4m3", 64), "no model of FP8 dots on sm120"),
    (("sm90", "fp16", "bf16", 64), "mixed operands fp16 x bf16"),
])
def test_what_is_not_modelled_is_refused(args, match):
    ip = args[4] if len(args) > 4 else None
    with pytest.raises(NotImplementedError, match=match):
        error_bound(*args[:4], input_precision=ip)


def test_on_checks_shapes():
    e = error_bound("sm90", "bf16", "bf16", 32)
    with pytest.raises(ValueError, match=r"expected a \[M, 32\] and b \[32, N\]"):
        e.on(torch.ones(2, 16), torch.ones(16, 2))


TF32X3 = [(f"sm90-tf32x3-{i}", "sm90", "fp32", "fp32", i, "tf32x3", None) for i in ("wgmma", "mma")] + [
    ("sm100-tf32x3-tcgen05", "sm100", "fp32", "fp32", "tcgen05", "tf32x3", None)]


@pytest.mark.parametrize("K", KS)
@pytest.mark.parametrize("case", TF32X3, ids=lambda c: c[0])
def test_tf32x3_bound_holds_and_is_reached(case, K):
    """tf32x3's bound (three chains on the split operands, then add.f32) holds on the built inputs and random
    ones (operands >= 2^-114, as the bound requires). Reach, measured: 0.29 at K=16, 0.58-0.61 at K=256/4096
    (pattern 0, alignment loss): the built inputs are tf32 values, whose small parts are 0, so they exercise the
    chains but not the split's own terms ((2h + 1) 2^-22 of the products), which are half the bound at K=16 and
    a vanishing part of it at larger K. Pinned at half for K >= 256, a quarter at K=16."""
    a, b, c = _adversarial(case, K)
    err, bound = _check(case, a, b, c)
    reach = float((err / bound).diagonal()[0])
    assert reach >= (REACH if K >= 256 else 0.25), f"{case[0]} K={K}: built inputs reach {reach} of the bound"
    g = torch.Generator().manual_seed(3 * K + 2)
    a = torch.randn(8, K, generator=g, dtype=torch.float64) * 2.0 ** torch.randint(-4, 5, (8, K), generator=g)
    b = torch.randn(K, 4, generator=g, dtype=torch.float64)
    _check(case, a.float(), b.float(), torch.randn(8, 4, generator=g).float() * 4)
    # full fp32 significands: the split's small parts carry bits the tf32 reads of them truncate
    bits = torch.randint(0, 1 << 23, (8, K), generator=g)
    full = ((127 << 23) | bits).to(torch.int32).view(torch.float32) * torch.where(bits % 2 == 0, 1.0, -1.0)
    _check(case, full, full[:4].T.contiguous(), torch.zeros(8, 4))


@pytest.mark.parametrize("K", [1, 2, 4, 8])
@pytest.mark.parametrize("case", TF32X3, ids=lambda c: c[0])
def test_tf32x3_bound_covers_the_split_itself(case, K):
    """a = b = 1 + 4095 * 2^-23: rna rounds it to 1, its small part has 12 significant bits and the tf32 read keeps
    11, so a_big * b_small and a_small * b_big each lose 2^-23 and the dropped a_small * b_small is ~2^-22: ~4 * 2^-23
    of every product before any chain sees it, more than the chains' own terms allow at K <= 8 (2.0-3.8 * 2^-23):
    a bound without the split's terms fails here (seen: 3.995 * 2^-23 against 3.76)."""
    v = 1 + 4095 * 2.0 ** -23
    a, b = torch.full((1, K), v, dtype=torch.float32), torch.full((K, 1), v, dtype=torch.float32)
    err, bound = _check(case, a, b, torch.zeros(1, 1))
    assert float(err[0, 0]) >= 3.9 * 2.0 ** -23 * K * v * v, f"{case[0]} K={K}: the split lost {float(err[0, 0])}"
