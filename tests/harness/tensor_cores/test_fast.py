"""harness.tensor_cores.fast: the restructured chain and FMA dot are bit for bit the readable evaluators of
chain.py (``_chain``, ``_fma_dot``), and the FP8 path through it is bit for bit mmaemu's own chain, on adversarial
inputs: every finite bit pattern of each format, cancellation, subnormal operands and accumulators, zero tiles,
ragged K, batch dims, inf/NaN. Where ``fast`` declines (returns None) the readable evaluator runs; each test also
checks that ``fast`` did the work on most cases, so it cannot pass by declining everything."""

from __future__ import annotations

import pytest
import torch

from harness import tensor_cores as tc
from harness.tensor_cores import chain, fast
from harness.tensor_cores.models import EMIN, MODELS

#: The models on CPU tensors, no kernel: the same on every lane, so the GPU lane leaves these to the CPU
#: lanes (they were 101 s of the 1,025 s summed over the H200 lane of 2026-12-05; docs/gpu-lane.md).
pytestmark = pytest.mark.lane_independent

FP8 = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
#: (storage dtype, bits, exponent field shift, exponent field width) of each operand format's bit patterns
FORMATS = {"fp16": (torch.int16, 16, 10, 5), "bf16": (torch.int16, 16, 7, 8), "tf32": (torch.int32, 32, 23, 8),
           "e4m3": (torch.uint8, 8, 3, 4), "e5m2": (torch.uint8, 8, 2, 5)}
VIEW = {"fp16": torch.float16, "bf16": torch.bfloat16, "tf32": torch.float32, **FP8}


def _bits(x: torch.Tensor) -> torch.Tensor:
    return x.float().view(torch.int32)


def _operand(kind: str, shape: tuple[int, ...], g: torch.Generator, window: int | None,
             subnormals: bool = True) -> torch.Tensor:
    """Random finite values of ``kind`` as fp32: random bit patterns (every sign and fraction), the exponent field
    uniform over the format's finite range or over ``window`` fields around the bias; 1 in 8 zero, 1 in 16
    subnormal (if ``subnormals``)."""
    store, nbits, shift, width = FORMATS[kind]
    top = (1 << width) - 1
    raw = torch.randint(0, 1 << 30, shape, generator=g, dtype=torch.int64)
    frac = raw & ((1 << shift) - 1)
    bias = (1 << (width - 1)) - 1
    if window is None:
        e = torch.randint(0, top if kind != "e4m3" else top + 1, shape, generator=g)
    else:
        e = torch.randint(bias - window, bias + window + 1, shape, generator=g)
    pick = torch.rand(shape, generator=g)
    if subnormals:
        e = torch.where(pick < 1 / 16, 0, e)
    sign = (raw >> 29) & 1
    x = (sign << (nbits - 1)) | (e << shift) | frac
    if kind == "e4m3":
        x = torch.where((x & 0x7F) == 0x7F, x - 1, x)  # 0x7F / 0xFF are NaN: the largest finite instead
    if kind == "tf32":
        x = x & ~((1 << 13) - 1)  # the 19 bits the tensor cores read
    x = torch.where(pick > 7 / 8, 0, x)
    if nbits < 64 and store != torch.uint8:
        x = torch.where(x >= 1 << (nbits - 1), x - (1 << nbits), x)
    return x.to(store).view(VIEW[kind]).float()


def _acc(shape: tuple[int, ...], g: torch.Generator, style: str) -> torch.Tensor:
    if style == "zero":
        return torch.zeros(shape)
    x = torch.randn(shape, generator=g) * 2.0 ** float(torch.randint(-30, 30, (1,), generator=g))
    if style == "subnormal":  # some fp32 subnormal and tiny normal accumulators: fast declines, _chain runs
        x = torch.where(torch.rand(shape, generator=g) < 0.25, x * 2.0 ** -140, x)
    return x


ROWS = [("sm90", "fp16", "wgmma", "fp16", "fp16"), ("sm90", "bf16", "wgmma", "bf16", "bf16"),
        ("sm90", "tf32", "wgmma", "tf32", "tf32"), ("sm80", "fp16", "mma", "fp16", "fp16"),
        ("sm80", "tf32", "mma", "tf32", "tf32"), ("sm90", "fp8", "wgmma", "e4m3", "e4m3"),
        ("sm90", "fp8", "wgmma", "e5m2", "e4m3"), ("sm89", "fp8", "mma", "e5m2", "e5m2")]


@pytest.mark.parametrize("arch,kind,instr,ka,kb", ROWS, ids=[f"{r[0]}-{r[3]}x{r[4]}-{r[2]}" for r in ROWS])
def test_fast_chain_is_the_readable_chain(arch: str, kind: str, instr: str, ka: str, kb: str) -> None:
    p = MODELS[(arch, kind, instr)]
    g = torch.Generator().manual_seed(11)
    ran_fast = 0
    for case in range(24):
        M, N = (int(v) for v in torch.randint(1, 24, (2,), generator=g))
        K = int(torch.randint(1, 3 * p.nfma + 5, (1,), generator=g))
        # every exponent and subnormals on 1 case in 4 (bf16/tf32 products then fall below fp32's: fast declines)
        full = case % 4 == 0
        window = None if full else (6 if case % 2 else 40)
        A, B = _operand(ka, (M, K), g, window, full), _operand(kb, (K, N), g, window, full)
        if case % 4 == 1:  # cancellation: the second half of k repeats the first negated
            h = K // 2
            A[:, h:2 * h] = A[:, :h]
            B[h:2 * h] = -B[:h]
        C = _acc((M, N), g, ("zero", "random", "subnormal", "random")[case % 4])
        want = chain._chain(A.double(), B.double(), C.double(), p, EMIN[ka], EMIN[kb]).float()
        got = fast.chain(A, B, C, p, EMIN[ka], EMIN[kb])
        if got is not None:
            ran_fast += 1
            assert torch.equal(_bits(got), _bits(want)), f"case {case}: {(_bits(got) != _bits(want)).sum()} differ"
        via = chain._block_chain(A.double(), B.double(), C.double(), p, EMIN[ka], EMIN[kb]).float()
        assert torch.equal(_bits(via), _bits(want))
    assert ran_fast >= 12, f"fast.chain declined {24 - ran_fast} of 24 cases"


def test_fast_chain_takes_batch_dims() -> None:
    p = MODELS[("sm90", "bf16", "wgmma")]
    g = torch.Generator().manual_seed(3)
    A, B = _operand("bf16", (5, 7, 40), g, 8, False), _operand("bf16", (5, 40, 3), g, 8, False)
    C = torch.randn(5, 7, 3, generator=g)
    got = fast.chain(A, B, C, p, -126, -126)
    assert got is not None
    for i in range(5):
        want = chain._chain(A[i].double(), B[i].double(), C[i].double(), p, -126, -126).float()
        assert torch.equal(_bits(got[i]), _bits(want))


@pytest.mark.parametrize("why", ["inf operand", "nan accumulator", "subnormal accumulator", "bf16 exponents",
                                 "overflow"])
def test_fast_chain_declines_what_it_cannot_do_exactly(why: str) -> None:
    p = MODELS[("sm90", "bf16", "wgmma")]
    A = torch.ones(2, 32)
    B = torch.ones(32, 2)
    C = torch.zeros(2, 2)
    if why == "inf operand":
        A[0, 3] = float("inf")
    elif why == "nan accumulator":
        C[1, 1] = float("nan")
    elif why == "subnormal accumulator":
        C[0, 0] = 2.0 ** -130
    elif why == "bf16 exponents":  # products below 2^-126: not exact in fp32
        A[0, 0] = B[0, 0] = 2.0 ** -70
    else:  # a block result beyond fp32: inf from there on, IEEE block by block in _chain
        A[:, :16] = 2.0 ** 64
        B[:16] = 2.0 ** 63
    assert fast.chain(A, B, C, p, -126, -126) is None
    want = chain._chain(A.double(), B.double(), C.double(), p, -126, -126)
    got = chain._block_chain(A.double(), B.double(), C.double(), p, -126, -126)
    assert torch.equal(got.isnan(), want.isnan())
    assert torch.equal(torch.nan_to_num(got), torch.nan_to_num(want))


@pytest.mark.parametrize("arch,kind,instr", [("sm90", "fp16", "wgmma"), ("sm90", "bf16", "wgmma"),
                                              ("sm80", "fp16", "mma"), ("sm80", "tf32", "mma")])
def test_integer_sums_at_their_limit(arch: str, kind: str, instr: str) -> None:
    """Every product of a block at the largest significand of one binade, all of one sign, and an accumulator just
    below the products' binade with that sign too. On sm90 (16 products, 25 fraction bits) the block's terms sum to
    2^31 + 2^26 - 2^21 in units of its last place: an int32 sum of the accumulator's term with the products' wraps."""
    p = MODELS[(arch, kind, instr)]
    top = {"fp16": 2 - 2.0**-10, "bf16": 2 - 2.0**-7, "tf32": 2 - 2.0**-10}[kind]
    for sign in (1.0, -1.0):
        A = torch.full((2, 2 * p.nfma), top)
        B = torch.full((2 * p.nfma, 3), sign * top)
        C = torch.tensor([[sign * (2 - 2.0**-23), sign * 1.5, 0.0]] * 2)
        got = fast.chain(A, B, C, p, EMIN[kind], EMIN[kind])
        want = chain._chain(A.double(), B.double(), C.double(), p, EMIN[kind], EMIN[kind]).float()
        assert got is not None and torch.equal(_bits(got), _bits(want)), (sign, got, want)


@pytest.mark.parametrize("row", [("sm90", "fp8", "wgmma"), ("sm89", "fp8", "mma"), ("sm90", "fp16", "wgmma")])
def test_negative_zeros_sum_as_the_readable_chain_does(row: tuple[str, str, str]) -> None:
    """Products that are all -0 onto a -0 accumulator (and, in the other row, a -0 product beside nonzero ones):
    the fast chain's zero has the readable chain's sign, in fp32 sums (FP8 rows) and int32 sums alike."""
    p = MODELS[row]
    A, B, C = torch.full((2, 2 * p.nfma), -0.0), torch.ones(2 * p.nfma, 2), torch.full((2, 2), -0.0)
    A[1, 1:] = 2.0**-9
    B[:, 1] = -1.0
    got = fast.chain(A, B, C, p, -126, -126)
    want = chain._chain(A.double(), B.double(), C.double(), p, -126, -126).float()
    assert got is not None and torch.equal(_bits(got), _bits(want))


FP8_PAIRS = [("e4m3", "e4m3"), ("e5m2", "e5m2"), ("e4m3", "e5m2"), ("e5m2", "e4m3")]


@pytest.mark.parametrize("fa,fb", FP8_PAIRS)
def test_fp8_dot_is_mmaemus_chain(fa: str, fb: str) -> None:
    """> 10^5 input elements per pair (as test_dot_h200 counts) over every code (NaN, inf, subnormals, zeros) and
    accumulators that are zero, random, fp32-subnormal or inf/NaN: tc.dot (fast where finite, mmaemu's
    sanitize/patch elsewhere) against mmaemu's readable per-block chain (``mmaemu.model.chain.dot``, float64).
    Tall tiles: many inputs for few outputs, which cost the reference its time."""
    from mmaemu.model import chain as mm

    g = torch.Generator().manual_seed(5)
    M, N, K = 384, 4, 64
    total = ran_fast = 0
    for case in range(8):
        codes = (torch.randint(0, 256, (M, K), generator=g), torch.randint(0, 256, (K, N), generator=g))
        a, b = (c.to(torch.uint8).view(FP8[f]) for c, f in zip(codes, (fa, fb), strict=True))
        if case % 2:  # finite codes only on every other case (NaN/inf codes make whole rows and columns non-finite)
            a = torch.where(torch.isfinite(a.float()), a.float(), 1.0).to(FP8[fa])
            b = torch.where(torch.isfinite(b.float()), b.float(), -2.0).to(FP8[fb])
        style = ("zero", "random", "subnormal", "special")[case % 4]
        acc = _acc((M, N), g, "zero" if style == "special" else style)
        if style == "special":
            acc[::7, ::5] = float("inf")
            acc[3::11, ::3] = float("-inf")
            acc[::13, 1::4] = float("nan")
        got = tc.dot(a, b, acc, arch="sm90")
        want = mm.dot(a[:, None, :].expand(M, N, K), b.T[None, :, :].expand(M, N, K), acc, preset="hopper")
        assert torch.equal(got.isnan(), want.isnan()), f"case {case}: NaN pattern differs"
        fin = ~got.isnan()
        assert torch.equal(_bits(got[fin]), _bits(want[fin])), f"case {case}: {(_bits(got) != _bits(want)).sum()}"
        total += a.numel() + b.numel()
        ran_fast += fast.chain(a.float(), b.float(), acc, MODELS[("sm90", "fp8", "wgmma")], EMIN[fa],
                               EMIN[fb]) is not None
    assert total >= 10**5
    assert ran_fast >= 2


def test_fp8_ada_preset_is_the_sm89_row() -> None:
    from mmaemu.model import chain as mm

    g = torch.Generator().manual_seed(9)
    a = _operand("e4m3", (48, 80), g, None).to(torch.float8_e4m3fn)
    b = _operand("e5m2", (80, 40), g, None).to(torch.float8_e5m2)
    acc = torch.randn(48, 40, generator=g) * 100
    got = tc.dot(a, b, acc, arch="sm89", instr="mma")
    want = mm.dot(a[:, None, :].expand(48, 40, 80), b.T[None, :, :].expand(48, 40, 80), acc, preset="ada")
    assert torch.equal(_bits(got), _bits(want))


def _fp32(shape: tuple[int, ...], g: torch.Generator, style: str) -> torch.Tensor:
    x = torch.randn(shape, generator=g)
    if style == "wide":
        x = x * torch.exp2(torch.randint(-30, 30, shape, generator=g).float())
    elif style == "narrow":  # bf16 values: many float64 sums exactly halfway between two fp32 values
        x = x.to(torch.bfloat16).float()
    elif style == "integers":
        x = torch.randint(-8, 9, shape, generator=g).float()
    return torch.where(torch.rand(shape, generator=g) < 0.1, 0.0, x)


@pytest.mark.parametrize("style", ["normal", "wide", "narrow", "integers"])
def test_fast_fma_dot_is_one_fma_per_k(style: str) -> None:
    g = torch.Generator().manual_seed(13)
    ran_fast = 0
    for case in range(8):
        M, N, K = (int(v) for v in torch.randint(1, 40, (3,), generator=g))
        A, B = _fp32((M, K), g, style), _fp32((K, N), g, style)
        C = _fp32((M, N), g, style) * 4
        want = chain._fma_dot(A.double(), B.double(), C.double()).float()
        got = fast.fma_dot(A, B, C)
        if got is not None:
            ran_fast += 1
            assert torch.equal(_bits(got), _bits(want)), f"case {case}"
    assert ran_fast >= 6


def test_fma_dot_declines_a_twice_rounded_sum() -> None:
    # acc = 1 + 2^-23, a * b = 2^-24 (1 - 2^-36): the exact sum is just below the fp32 midpoint 1 + 3 * 2^-24, so
    # fma.rn gives 1 + 2^-23; float64 rounds the sum onto the midpoint and fp32's ties-to-even then gives 1 + 2^-22
    a = torch.tensor([[2.0**-12 * (1 + 2.0**-18)]])
    b = torch.tensor([[2.0**-12 * (1 - 2.0**-18)]])
    acc = torch.tensor([[1 + 2.0**-23]])
    assert fast.fma_dot(a, b, acc) is None
    assert tc.dot(a, b, acc, arch="sm90", input_precision="ieee").item() == 1 + 2.0**-23
    # the same at the third step of a longer chain, in one output of many: 1 + 2^-23 built by the first two steps
    g = torch.Generator().manual_seed(1)
    a = torch.randn(4, 3, generator=g)
    b = torch.randn(3, 5, generator=g)
    a[2] = torch.tensor([1.0, 2.0**-23, 2.0**-12 * (1 + 2.0**-18)])
    b[:, 3] = torch.tensor([1.0, 1.0, 2.0**-12 * (1 - 2.0**-18)])
    assert fast.fma_dot(a, b, torch.zeros(4, 5)) is None
    want = chain._fma_dot(a.double(), b.double(), torch.zeros(4, 5, dtype=torch.float64)).float()
    assert want[2, 3].item() == 1 + 2.0**-23
    assert torch.equal(_bits(tc.dot(a, b, None, arch="sm90", input_precision="ieee")), _bits(want))


def test_fma_dot_declines_products_in_the_subnormal_range() -> None:
    a = torch.tensor([[2.0**-70, 1.0]])
    b = torch.tensor([[2.0**-60], [1.0]])
    assert fast.fma_dot(a, b, torch.zeros(1, 1)) is None
    want = chain._fma_dot(a.double(), b.double(), torch.zeros(1, 1, dtype=torch.float64)).float()
    assert torch.equal(_bits(tc.dot(a, b, None, arch="sm90", input_precision="ieee")), _bits(want))


def test_tf32x3_as_one_chain_is_its_three_chains(monkeypatch: pytest.MonkeyPatch) -> None:
    """chain._tf32x3 runs its three dots as one fast chain over their k ranges end to end (each padded to whole
    blocks): the same bits as the three readable chains (fast declined), ragged K and every exponent included."""
    g = torch.Generator().manual_seed(17)
    cases = []
    for case in range(10):
        M, N = (int(v) for v in torch.randint(1, 20, (2,), generator=g))
        K = int(torch.randint(1, 30, (1,), generator=g))
        A, B = _fp32((M, K), g, "wide" if case % 2 else "normal"), _fp32((K, N), g, "normal")
        C = _fp32((M, N), g, "normal") * 8
        cases.append((A, B, C, tc.dot(A, B, C, arch="sm90", input_precision="tf32x3")))
    monkeypatch.setattr(fast, "chain", lambda *args: None)
    for i, (A, B, C, got) in enumerate(cases):
        want = tc.dot(A, B, C, arch="sm90", input_precision="tf32x3")
        assert torch.equal(_bits(got), _bits(want)), f"case {i}"


def test_chunks_change_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Large tiles run in chunks (of blocks for the chain, of k for the FMA dot, so temporaries stay bounded) and
    skip the reused buffers: with tiny chunks every tile here is cut into many, and the bits are the same."""
    g = torch.Generator().manual_seed(19)
    A16, B16 = _operand("fp16", (6, 70), g, 6, False), _operand("fp16", (70, 5), g, 6, False)
    A8, B8 = _operand("e4m3", (6, 70), g, None), _operand("e5m2", (70, 5), g, None)
    A32, B32 = _fp32((6, 70), g, "normal"), _fp32((70, 5), g, "normal")
    C = torch.randn(6, 5, generator=g)
    p16, p8 = MODELS[("sm90", "fp16", "wgmma")], MODELS[("sm90", "fp8", "wgmma")]

    def run() -> list[torch.Tensor | None]:
        return [fast.chain(A16, B16, C, p16, -14, -14), fast.chain(A8, B8, C, p8, -6, -14), fast.fma_dot(A32, B32, C)]

    whole = run()
    monkeypatch.setattr(fast, "_CHUNK", 64)
    for got, want in zip(run(), whole, strict=True):
        assert got is not None and want is not None
        assert torch.equal(_bits(got), _bits(want))


@pytest.mark.parametrize("kind", ["fp16", "bf16"])
def test_fast_chain_keeps_an_accumulator_with_bits_under_2_to_the_minus_126(kind) -> None:
    """An accumulator below 2^-103 that is not a multiple of 2^-126 (2^-110 (1 + 2^-23): its last bit is 2^-133)
    facing products that vanish in alignment: the chain keeps it whole; the fast path's 2^-126 grid would cut its
    low bits, so it must decline (or agree bit for bit)."""
    p = MODELS[("sm90", kind, "wgmma")]
    A, B = torch.zeros((1, 16)), torch.zeros((16, 1))
    A[0, 0], B[1, 0] = 2.0**-10, 1.0  # every product is 0
    C = torch.tensor([[2.0**-110 * (1 + 2.0**-23)]])
    want = chain._chain(A.double(), B.double(), C.double(), p, -14, -14).float()
    assert torch.equal(_bits(want), _bits(C))
    got = fast.chain(A, B, C, p, -14, -14)
    assert got is None or torch.equal(_bits(got), _bits(want))
