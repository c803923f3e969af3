"""The QSA casts on exact values: rounding (ties, carries, subnormals), saturation, NaN and ±inf, through
every path (query norm and cache store, fused kernel and unfused torch; interpreter and GPU lanes).

Why exact values: a kernel compared to the torch path within 1 ULP (test_qsa.py) lets a rounding bug
of one code through, and random inputs never reach ±448. Here every cast input is chosen: a row whose
first element is 2^40 has an exactly representable RMS, and power-of-two weights ``1 + w = 2^j`` scale
the other elements onto any fp32 value ``v`` without rounding, so the kernel's cast input is ``v``
itself and its output must equal ``torch``'s own cast of ``v`` bit for bit.

Documented behaviour under test (kernels/qsa/cache.py): FP8 saturates finite values and ±inf to ±448
and keeps NaN NaN; bf16 keeps inf and NaN; a row holding ±inf normalizes to NaN at the inf and 0
elsewhere, a row holding NaN to all-NaN.
"""

from __future__ import annotations

import pytest
import torch

D = 64
BIG = 2.0**40  # x[0]: rms = 2^40 / 8 exactly (the rest of the row is below its half-ULP)
J = 24  # weights 2^J - 1: x * rstd * (1 + w) = (v * 2^(40-3-J)) * 2^(3-40) * 2^J = v, all exact
EPS = 2.0**-60  # vanishes next to the mean square

# fp32 cast inputs with the e4m3fn value torch rounds them to (the table is torch's cast, not this code's)
FP8_VALUES = [
    1.0625,  # tie between 1 and 1.125: to even (1.0)
    1.1875,  # tie between 1.125 and 1.25: to even (1.25)
    1.96875,  # rounds up across the binade (carry): 2.0
    -1.96875,
    1.5 * 2**-9,  # subnormal tie: 2^-8
    2**-10,  # half the smallest subnormal: to even (0)
    1.5 * 2**-10,  # above the half: smallest subnormal
    2**-7 * 1.0625,  # normal tie near the subnormal range
    0.3,
    -7.3,
    440.0,  # rounds to 448
    464.0,  # past 448 (and a tie with the 480 e4m3fn does not have): saturates
    1000.0,  # overflow > 448: saturates
    -1000.0,
    5000.0,  # (the row's other elements must stay below 2^-12 of x[0]: no larger v)
]
# fp32 cast inputs for bf16: ties at 8 mantissa bits, both directions
BF16_VALUES = [1 + 2**-8, 1 + 3 * 2**-8, -(1 + 2**-8), 1 + 2**-8 + 2**-20, 2**-100 * (1 + 3 * 2**-8), 0.3, 4999.0]


def _qsa():
    import kernels.qsa as qsa

    return qsa


def _exact_row(values: list[float]) -> tuple[torch.Tensor, torch.Tensor]:
    """(x [D] fp32, weight [D] fp32) whose RMSNorm output is exactly ``[8, *values, 0, ...]``."""
    assert len(values) < D
    x, w = torch.zeros(D), torch.zeros(D)
    x[0] = BIG
    for i, v in enumerate(values, 1):
        x[i] = v * 2.0 ** (40 - 3 - J)
        w[i] = 2.0**J - 1
    return x, w


def _norm(x: torch.Tensor, w: torch.Tensor, dtype: torch.dtype, path: str, device: str) -> torch.Tensor:
    """The cast output [D] of one row through ``path``: query (fused/unfused) or store (fused/unfused)."""
    qsa = _qsa()
    where, fused = path.split("-")
    fused = fused == "fused"
    x, w = x.to(device), w.to(device)
    if where == "query":
        return qsa.normalize_query(x[None, None], w, eps=EPS, dtype=dtype, fused=fused)[0, 0]
    cfg = qsa.IndexerConfig(num_heads=1, head_dim=D, compress_ratio=1, token_topk=1, page_size=2,
                            indexer_kv_dtype="fp8" if dtype == torch.float8_e4m3fn else "bf16", rms_eps=EPS)
    cache = qsa.IndexerKVCache.empty(cfg, 1, device)
    keys = x.to(torch.bfloat16)
    assert torch.equal(keys.float(), x) or x.isnan().any() or x.isinf().any(), "store inputs must be bf16-exact"
    qsa.store_compressed_keys(cache, keys[None], torch.tensor([1], dtype=torch.int32, device=device), w,
                              fused=fused)
    return cache.kv[0, 1, 0]


PATHS = ["query-fused", "query-unfused", "store-fused", "store-unfused"]


def _bits(t: torch.Tensor) -> list[int]:
    return (t.view(torch.uint8) if t.dtype == torch.float8_e4m3fn else t.view(torch.int16)).cpu().tolist()


def _bf16_exact(values: list[float]) -> list[float]:
    return [float(torch.tensor(v).to(torch.bfloat16)) for v in values]


@pytest.mark.parametrize("path", PATHS)
def test_fp8_cast_rounds_and_saturates_exactly(path, device):
    values = FP8_VALUES if path.startswith("query") else _bf16_exact(FP8_VALUES)  # keys are bf16
    x, w = _exact_row(values)
    got = _norm(x, w, torch.float8_e4m3fn, path, device)
    want = torch.tensor([8.0, *values]).clamp(-448, 448).to(torch.float8_e4m3fn)
    n = len(values) + 1
    assert _bits(got[:n]) == _bits(want), (
        f"{path}: fp8 codes {_bits(got[:n])} != torch's cast {_bits(want)} of {[8.0, *values]}"
    )
    assert bool((got[n:].float() == 0).all())


@pytest.mark.parametrize("path", ["query-fused", "query-unfused"])  # keys arrive as bf16: nothing to round
def test_bf16_cast_rounds_ties_to_even(path, device):
    x, w = _exact_row(BF16_VALUES)
    got = _norm(x, w, torch.bfloat16, path, device)
    want = torch.tensor([8.0, *BF16_VALUES]).to(torch.bfloat16)
    n = len(BF16_VALUES) + 1
    assert _bits(got[:n]) == _bits(want), f"{path}: bf16 bits {_bits(got[:n])} != torch's {_bits(want)}"


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.bfloat16], ids=["fp8", "bf16"])
@pytest.mark.parametrize("path", PATHS)
def test_non_finite_cast_inputs(path, dtype, device):
    """NaN, +inf, -inf and overflow reaching the cast (through the weight): FP8 gives NaN, 448, -448, ±448;
    bf16 keeps NaN and ±inf."""
    x, w = _exact_row([1.0, 1.0, -1.0, 1000.0, -1000.0])  # 1000 > 448
    w[1], w[2], w[3] = float("nan"), float("inf"), float("inf")  # y = 1 * NaN, 1 * inf, -1 * inf
    y = _norm(x, w, dtype, path, device).float().cpu()
    if dtype == torch.float8_e4m3fn:
        want = [float("nan"), 448.0, -448.0, 448.0, -448.0]
    else:
        want = [float("nan"), float("inf"), -float("inf"), 1000.0, -1000.0]
    got = y[1:6].tolist()
    assert torch.equal(y[1:6].isnan(), torch.tensor(want).isnan()), f"{path}: NaN must stay NaN, got {got}"
    assert [g for g in got if g == g] == [v for v in want if v == v], f"{path}: {got} != {want}"
    assert y[0] == 8.0 and bool((y[6:] == 0).all())


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.bfloat16], ids=["fp8", "bf16"])
@pytest.mark.parametrize("special", ["nan", "nan_payload", "+inf", "-inf"])
@pytest.mark.parametrize("path", PATHS)
def test_non_finite_inputs_give_one_result_on_every_path(path, special, dtype, device):
    """An input row holding NaN or ±inf: NaN row (NaN), or NaN at the inf and 0 elsewhere (rms = inf).
    ``nan_payload`` is the NaN 0x7FFFFFFF, whose payload a bit-level bf16 rounding would carry into 0."""
    x = torch.linspace(-2, 2, D)
    payload_nan = torch.tensor(0x7FFFFFFF, dtype=torch.int32).view(torch.float32)
    x[5] = {"nan": float("nan"), "nan_payload": payload_nan, "+inf": float("inf"), "-inf": -float("inf")}[special]
    y = _norm(x, torch.zeros(D), dtype, path, device).float().cpu()
    nan = y.isnan()
    if special.startswith("nan"):
        assert bool(nan.all()), f"{path}: a NaN input must make the row NaN, got {y.tolist()}"
    else:
        assert nan.tolist() == [i == 5 for i in range(D)], f"{path}: NaN expected only at the inf, got {y.tolist()}"
        assert bool((y[~nan] == 0).all()), f"{path}: finite elements of an inf row normalize to 0"


def test_huge_finite_query_saturates_not_nan(device):
    # A raw query far above the cast range with an ordinary weight: y stays within sqrt(D) (no saturation),
    # but 1e4 in one element and the rest small keeps |y| large: both paths agree code for code.
    qsa = _qsa()
    q = torch.full((1, 2, D), 1e-3)
    q[0, 0, 0] = 1e4
    w = torch.full((D,), 60.0)  # (1 + w) * 8 = 488 > 448
    got = [qsa.normalize_query(q.to(device), w.to(device), eps=1e-6, dtype=torch.float8_e4m3fn, fused=f)
           for f in (True, False)]
    assert _bits(got[0]) == _bits(got[1])
    assert float(got[0][0, 0, 0]) == 448.0 and not bool(got[0].float().isnan().any())
