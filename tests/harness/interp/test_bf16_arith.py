"""bf16 on the interpreter computes what the GPU computes (harness.interp.arith, installed by the plugin).

The GPU's bf16 ops (Triton 3.6-3.9 PTX for sm80/sm90: fma.rn.bf16 / add.bf16 / mul.bf16, max.bf16, setp,
cvt.rn.bf16.f32, max.f32 reductions) are each one correctly rounded operation, so torch's CPU bf16 ops (fp32
then RNE) are the reference for + - * and conversions; fma gets an exact integer reference (one rounding of
a*b+c). Inputs: all 65,536 bf16 patterns (±0, subnormals, inf, NaN) against a shuffled copy with specials.
"""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest
import torch

from harness.compile.launches import expect_compile_failure
from harness.interp import arith, lowering
from harness.interp.patch import Patch

pytestmark = pytest.mark.interp_only

triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

N = 65536
BLOCK = 4096
# bf16 `/` is not here: Triton divides bf16 in fp32 (div.full.f32), the approximate-math shim's business
OPS = ("add", "sub", "mul", "fma", "max", "min", "neg", "clamp", "where_lt", "from_fp32", "from_i32",
       "scalar_mul")
CMPS = ("lt", "le", "eq", "ne", "gt", "ge")


@triton.jit
def _bf16_ops(a_ptr, b_ptr, c_ptr, f_ptr, i_ptr, o_ptr, m_ptr, n, BLOCK: tl.constexpr):
    off = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    a = tl.load(a_ptr + off)
    b = tl.load(b_ptr + off)
    c = tl.load(c_ptr + off)
    tl.store(o_ptr + 0 * n + off, a + b)
    tl.store(o_ptr + 1 * n + off, a - b)
    tl.store(o_ptr + 2 * n + off, a * b)
    tl.store(o_ptr + 3 * n + off, tl.fma(a, b, c))
    tl.store(o_ptr + 4 * n + off, tl.maximum(a, b))
    tl.store(o_ptr + 5 * n + off, tl.minimum(a, b))
    tl.store(o_ptr + 6 * n + off, -a)
    tl.store(o_ptr + 7 * n + off, tl.clamp(a, tl.minimum(b, c), tl.maximum(b, c)))
    tl.store(o_ptr + 8 * n + off, tl.where(a < b, a, c))
    tl.store(o_ptr + 9 * n + off, tl.load(f_ptr + off).to(tl.bfloat16))
    tl.store(o_ptr + 10 * n + off, tl.load(i_ptr + off).to(tl.bfloat16))
    tl.store(o_ptr + 11 * n + off, a * 0.1)
    tl.store(m_ptr + 0 * n + off, (a < b).to(tl.int8))
    tl.store(m_ptr + 1 * n + off, (a <= b).to(tl.int8))
    tl.store(m_ptr + 2 * n + off, (a == b).to(tl.int8))
    tl.store(m_ptr + 3 * n + off, (a != b).to(tl.int8))
    tl.store(m_ptr + 4 * n + off, (a > b).to(tl.int8))
    tl.store(m_ptr + 5 * n + off, (a >= b).to(tl.int8))
    tl.store(f_ptr + off, a.to(tl.float32))  # last: the fp32 input is read above


@triton.jit
def _bf16_reduce(x_ptr, s_ptr, mx_ptr, mn_ptr, cs_ptr, ROWS: tl.constexpr, W: tl.constexpr):
    r = tl.arange(0, ROWS)[:, None]
    k = tl.arange(0, W)[None, :]
    x = tl.load(x_ptr + r * W + k)
    tl.store(s_ptr + tl.arange(0, ROWS), tl.sum(x, axis=1))
    tl.store(mx_ptr + tl.arange(0, ROWS), tl.max(x, axis=1))
    tl.store(mn_ptr + tl.arange(0, ROWS), tl.min(x, axis=1))
    tl.store(cs_ptr + r * W + k, tl.cumsum(x, axis=1))


@triton.jit
def _bf16_atomic_add(p_ptr, v_ptr, idx_ptr, old_ptr, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(old_ptr + i, tl.atomic_add(p_ptr + tl.load(idx_ptr + i), tl.load(v_ptr + i)))


@triton.jit
def _mul(a_ptr, b_ptr, o_ptr, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(o_ptr + i, (tl.load(a_ptr + i) * tl.load(b_ptr + i)).to(tl.float32))


@triton.jit
def _fp32_sin_fma(x_ptr, y_ptr, o_ptr, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + i).to(tl.float32)  # fp32 whatever the launch capture's widened variants load
    tl.store(o_ptr + i, tl.sin(x) * tl.load(y_ptr + i).to(tl.float32) + x)


def _has_fneg() -> bool:
    """Triton 3.9 lowers ``-x`` to fneg (a sign flip: -(+0) = -0); 3.6 to ``0 - x`` (-(+0) = +0), GPU and
    interpreter alike."""
    from triton.runtime import interpreter as itp

    return hasattr(itp.InterpreterBuilder, "create_fneg")


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(torch.int16).to(torch.int32) & 0xFFFF


def _all_bf16() -> torch.Tensor:
    return torch.arange(N, dtype=torch.int32).to(torch.int16).view(torch.bfloat16)


def _inputs(rng: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    a = _all_bf16()
    b = a[torch.randperm(N, generator=rng)].clone()
    specials = torch.tensor([0.0, -0.0, float("inf"), -float("inf"), float("nan"), 1.0, -1.0, 2.0 ** -133,
                             -(2.0 ** -133), 3.3895e38], dtype=torch.bfloat16)
    b[: specials.numel() * 64] = specials.repeat(64)  # every special against 64 patterns of a
    c = a[torch.randperm(N, generator=rng)].clone()
    return a, b, c


def _rne_bf16_of_fraction(num: int, den_log2: int) -> int:
    """bf16 bits of the exact value num * 2**-den_log2 (an integer reference: one RNE rounding)."""
    if num == 0:
        return 0
    sign = 0x8000 if num < 0 else 0
    m = abs(num)
    e = m.bit_length() - 1 - den_log2  # value in [2^e, 2^(e+1))
    q = max(e, -126) - 7  # quantum of bf16 at this exponent (subnormals: 2^-133)
    shift = -den_log2 - q  # value / 2^q = m * 2^shift
    if shift >= 0:
        k = m << shift
    else:
        k, rem = divmod(m, 1 << -shift)
        half = 1 << (-shift - 1)
        if rem > half or (rem == half and k & 1):
            k += 1
    # k * 2^q with k < 2^9; renormalize into the bf16 bit layout
    val_e = q
    while k >= 256:  # rounded up into the next binade
        k >>= 1
        val_e += 1
    if k < 128:  # subnormal
        return sign | k
    exp_field = val_e + 7 + 127
    if exp_field >= 255:
        return sign | 0x7F80
    return sign | (exp_field << 7) | (k - 128)


def _exact(bits: int) -> tuple[int, int]:
    """bf16 bits (finite) -> (integer, log2 of its denominator): value = integer * 2**-d, d = 133."""
    e, m, s = (bits >> 7) & 0xFF, bits & 0x7F, -1 if bits & 0x8000 else 1
    mant = m if e == 0 else m | 0x80
    return s * (mant << max(e - 1, 0)), 133


def _fma_reference(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    ref = (a.float() * b.float() + c.float()).to(torch.bfloat16)  # for specials (inf/NaN) only
    out = _bits(ref).tolist()
    ab, bb, cb = _bits(a).tolist(), _bits(b).tolist(), _bits(c).tolist()
    for i, (x, y, z) in enumerate(zip(ab, bb, cb, strict=True)):
        if any((v & 0x7F80) == 0x7F80 for v in (x, y, z)):
            continue
        nx, _ = _exact(x)
        ny, _ = _exact(y)
        nz, _ = _exact(z)
        exact = nx * ny + (nz << 133)  # denominator 2^266
        r = _rne_bf16_of_fraction(exact, 266)
        if exact == 0:  # the sign of an exact zero: -0 only if both terms are -0 (RNE)
            prod_neg = (x ^ y) & 0x8000
            r = 0x8000 if (prod_neg and (z & 0x8000) and nx * ny == 0) else 0
        out[i] = r
    return torch.tensor(out, dtype=torch.int32)


def _assert_same(op: str, got: torch.Tensor, ref: torch.Tensor, x: torch.Tensor) -> None:
    g, r = got.flatten().to(torch.int32) & 0xFFFF, ref.flatten().to(torch.int32) & 0xFFFF
    nan_g = ((g & 0x7F80) == 0x7F80) & ((g & 0x7F) != 0)
    nan_r = ((r & 0x7F80) == 0x7F80) & ((r & 0x7F) != 0)
    bad = ((g != r) & ~(nan_g & nan_r)).nonzero().flatten()
    assert bad.numel() == 0, (
        f"bf16 {op}: {bad.numel()} of {g.numel()} results differ from the reference; first at input "
        f"0x{int(_bits(x).flatten()[bad[0] % x.numel()]):04x}: interpreter 0x{int(g[bad[0]]):04x}, "
        f"reference 0x{int(r[bad[0]]):04x}")


@triton.jit
def _bf16_fma(a_ptr, b_ptr, c_ptr, o_ptr, BLOCK: tl.constexpr):
    off = tl.arange(0, BLOCK)
    tl.store(o_ptr + off, tl.fma(tl.load(a_ptr + off), tl.load(b_ptr + off), tl.load(c_ptr + off)))


def test_bf16_fma_rounds_once_where_float64_makes_a_tie():
    """35 x 11 = 385 lies halfway between the bf16 neighbours 384 and 386; an addend of +-2^-100 decides, but
    float64 drops it from the sum (385 + 2^-100 rounds to 385): only the round-to-odd step, in the right
    direction, keeps fma.rn.bf16's one rounding. With 0 the tie goes to the even 384."""
    a = torch.tensor([35.0, 35.0, -35.0, 35.0, 1.0, 1.0, 0.0, 0.0], dtype=torch.bfloat16)
    b = torch.tensor([11.0, 11.0, 11.0, 11.0, 2.0 ** -100, -(2.0 ** -100), 0.0, 0.0], dtype=torch.bfloat16)
    c = torch.tensor([2.0 ** -100, -(2.0 ** -100), -(2.0 ** -100), 0.0, 384.0, 384.0, 0.0, 0.0],
                     dtype=torch.bfloat16)
    out = torch.empty(8, dtype=torch.bfloat16)
    _bf16_fma[(1,)](a, b, c, out, BLOCK=8)
    assert out.float().tolist()[:6] == [386.0, 384.0, -386.0, 384.0, 384.0, 384.0]
    _assert_same("fma", _bits(out), _fma_reference(a, b, c), a)


def test_bf16_ops_match_one_rounding(rng):
    a, b, c = _inputs(rng)
    f = torch.randn(N, generator=rng) * torch.exp2(torch.randint(-140, 128, (N,), generator=rng).float())
    f[:8] = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 3.3961e38, 1.00390625,
                          1.01171875])  # 1 + 2^-8 and 1 + 3*2^-8: ties to even
    i32 = torch.randint(-(2 ** 31), 2 ** 31 - 1, (N,), generator=rng, dtype=torch.int32)
    i32[:4] = torch.tensor([16777217, 16842753, -16842753, 2 ** 31 - 1], dtype=torch.int32)
    out = torch.empty(len(OPS) * N, dtype=torch.bfloat16)
    cmp = torch.empty(len(CMPS) * N, dtype=torch.int8)
    f_in = f.clone()
    _bf16_ops[(N // BLOCK,)](a, b, c, f_in, i32, out, cmp, N, BLOCK=BLOCK)
    got = dict(zip(OPS, _bits(out).view(len(OPS), N), strict=True))
    def num(op, x, y):  # max.bf16/min.bf16: a NaN operand (signalling too, unlike torch.fmax) gives the other
        return torch.where(x.isnan(), y, torch.where(y.isnan(), x, op(x, y)))

    lo, hi = num(torch.minimum, b, c), num(torch.maximum, b, c)

    ref = {
        "add": a + b, "sub": a - b, "mul": a * b, "max": num(torch.maximum, a, b), "min": num(torch.minimum, a, b),
        "neg": -a if _has_fneg() else torch.zeros_like(a) - a,
        "clamp": num(torch.minimum, num(torch.maximum, a, lo), hi),
        "where_lt": torch.where(a < b, a, c),
        "from_fp32": f.to(torch.bfloat16), "scalar_mul": a * torch.tensor(0.1).to(torch.bfloat16),
    }
    for op, r in ref.items():
        g = got[op]
        if op in ("max", "min", "clamp"):  # ±0 against ±0: either zero (the sign is not checked here)
            zeros = ((_bits(a) & 0x7FFF) == 0) & (((_bits(b) & 0x7FFF) == 0) | ((_bits(c) & 0x7FFF) == 0))
            g = torch.where(zeros, _bits(r), g)
        _assert_same(op, g, _bits(r), a)
    _assert_same("fma", got["fma"], _fma_reference(a, b, c), a)
    # int32 -> bf16: sm90+ one rounding (cvt.rn.bf16.s32); the session imitates --harness-arch (else sm90)
    target = arith.active()
    one_rounding = target is None or (target.cc or 0) >= 90
    i_ref = i32.double().to(torch.float32) if not one_rounding else None
    r_int = torch.tensor([_rne_bf16_of_fraction(int(v), 0) for v in i32.tolist()], dtype=torch.int32) \
        if one_rounding else _bits(i_ref.to(torch.bfloat16))
    _assert_same("from_i32", got["from_i32"], r_int, a)
    assert torch.equal(f_in.view(torch.int32), (_bits(a) << 16).to(torch.int32)), "bf16 -> fp32 is not exact"
    for k, op in enumerate(CMPS):
        r = getattr(torch, op)(a, b).to(torch.int8)
        g = cmp[k * N:(k + 1) * N]
        assert torch.equal(g, r), f"bf16 {op}: differs from torch on {int((g != r).sum())} of {N}"


def test_issue_mul_example():
    a = torch.tensor([1.5, -2, 3, 0.25], dtype=torch.bfloat16)
    b = torch.tensor([2, 2, -1, 4], dtype=torch.bfloat16)
    o = torch.empty(4)
    _mul[(1,)](a, b, o, BLOCK=4)
    assert o.tolist() == (a * b).float().tolist() == [3.0, -4.0, -3.0, 1.0]


def test_bf16_reductions_and_scan(rng):
    rows, w = 256, 16
    x = (torch.randn(rows, w, generator=rng) * 100).to(torch.bfloat16)
    x[0, 3], x[1, :] = float("inf"), -0.0
    s, mx, mn = (torch.empty(rows, dtype=torch.bfloat16) for _ in range(3))
    cs = torch.empty(rows, w, dtype=torch.bfloat16)
    with warnings.catch_warnings(record=True) as caught, lowering.suspended():  # arith's own order, not the GPU's
        warnings.simplefilter("always")
        _bf16_reduce[(1,)](x, s, mx, mn, cs, ROWS=rows, W=w)
    # bf16 adds, each rounded (the GPU's add.bf16 / fma.rn.bf16), in the interpreter's sequential order
    acc = x[:, 0].clone()
    steps = [acc]
    for k in range(1, w):
        acc = acc + x[:, k]
        steps.append(acc)
    _assert_same("sum", _bits(s), _bits(acc), x[:, 0])
    # tl.cumsum: Triton 3.6 promotes bf16 to fp32 (add.f32, one cvt.rn.bf16.f32 at the store), 3.9 adds in bf16
    if "_promote_bfloat16_to_float32" in inspect.getsource(tl.standard.cumsum.fn):
        f32 = [x[:, 0].float()]
        for k in range(1, w):  # sequential fp32 adds from the first element (torch's cumsum starts at +0)
            f32.append(f32[-1] + x[:, k].float())
        ref_cs = torch.stack(f32, 1).to(torch.bfloat16)
    else:
        ref_cs = torch.stack(steps, 1)
    _assert_same("cumsum", _bits(cs), _bits(ref_cs), x)
    _assert_same("max", _bits(mx), _bits(x.amax(1)), x[:, 0])
    _assert_same("min", _bits(mn), _bits(x.amin(1)), x[:, 0])
    texts = [str(w.message) for w in caught]
    assert sum("sum on bf16" in t for t in texts) == 1, texts  # order differs from the GPU's: said once


def test_bf16_atomic_add_rounds_each_update(rng):
    p = torch.zeros(4, dtype=torch.bfloat16)
    v = (torch.rand(64, generator=rng) * 3).to(torch.bfloat16)
    idx = torch.arange(64, dtype=torch.int32) % 4
    old = torch.empty(64, dtype=torch.bfloat16)
    _bf16_atomic_add[(1,)](p, v, idx, old, BLOCK=64)
    ref = torch.zeros(4, dtype=torch.bfloat16)
    ref_old = torch.empty(64, dtype=torch.bfloat16)
    for i in range(64):
        ref_old[i] = ref[idx[i]]
        ref[idx[i]] = ref[idx[i]] + v[i]
    assert torch.equal(_bits(p), _bits(ref)) and torch.equal(_bits(old), _bits(ref_old))


def test_known_different_ops_warn_once_per_kernel_and_op():
    x, y, o = torch.rand(8) + 1, torch.rand(8) + 1, torch.empty(8)
    with warnings.catch_warnings(record=True) as caught, lowering.suspended():  # the shim that models fma
        warnings.simplefilter("always")
        for _ in range(3):
            _fp32_sin_fma[(2,)](x, y, o, BLOCK=8)
    texts = [str(w.message) for w in caught if "interpreter op" in str(w.message)]
    assert len(texts) == 2, texts
    assert any("sin on fp32 in kernel _fp32_sin_fma" in t and "__nv_sinf" in t for t in texts), texts
    assert any("fma_contraction on fp32 in kernel _fp32_sin_fma" in t and "one fma" in t for t in texts), texts


def test_exact_bf16_kernel_does_not_warn():
    a = torch.ones(4, dtype=torch.bfloat16)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _mul[(1,)](a, a, torch.empty(4), BLOCK=4)
    assert not [w for w in caught if "interpreter op" in str(w.message)]


def test_unknown_interpreter_gets_one_warning_and_no_patch(monkeypatch):
    from triton.runtime import interpreter as itp

    monkeypatch.delattr(itp.ReduceOps, "sum")
    before = itp.InterpreterBuilder.__dict__["binary_op"]
    with pytest.warns(RuntimeWarning, match=r"cannot make the interpreter's bf16 arithmetic GPU-exact .*ReduceOps "
                                            r"lacks \['sum'\]") as rec:
        with Patch.context() as patch:
            assert arith.install(patch, "sm90") is False
            assert itp.InterpreterBuilder.__dict__["binary_op"] is before
    assert len(rec) == 1 and itp.InterpreterBuilder.__dict__["binary_op"] is before


def test_helpers_round_to_nearest_even():
    f = np.array([1.00390625, 1.01171875, 3.3963e38, -np.inf, 2.0 ** -134, 2.0 ** -134 * 3], dtype=np.float32)
    assert [hex(v) for v in arith.f32_to_bf16(f)] == ["0x3f80", "0x3f82", "0x7f80", "0xff80", "0x0", "0x2"]
    assert arith.f32_to_bf16(np.array([np.nan], np.float32))[0] == 0x7FFF


def test_installs_nest_and_undo_restores_the_interpreter():
    from triton.runtime import interpreter as itp

    from harness import fp8

    def state():
        return arith.active(), fp8.interpreter_bf16_exact(), itp.InterpreterBuilder.__dict__.get("binary_op")

    before = state()  # the session's shim (the plugin installs it on this lane)
    with Patch.context() as outer:
        assert arith.install(outer, "sm80")
        with Patch.context() as inner:
            assert arith.install(inner, "sm90")
            assert arith.active().name == "sm90" and fp8.interpreter_bf16_exact()
            with pytest.raises(RuntimeError, match="innermost first"):
                outer.undo()
            with arith.suspended():  # the interpreter's own arithmetic: every layer lifted, the session's too
                assert arith.active() is None and not fp8.interpreter_bf16_exact()
            assert arith.active().name == "sm90"
        assert arith.active().name == "sm80" and fp8.interpreter_bf16_exact()
    assert state() == before


@triton.jit
def _bf16_zero_max_min(a_ptr, b_ptr, o_ptr, BLOCK: tl.constexpr):
    off = tl.arange(0, BLOCK)
    a, b = tl.load(a_ptr + off), tl.load(b_ptr + off)
    tl.store(o_ptr + off, tl.maximum(a, b))
    tl.store(o_ptr + BLOCK + off, tl.minimum(a, b))


def test_max_and_min_of_opposite_zeros():
    """max.bf16 / min.bf16 order -0 below +0 (PTX ISA: max(+0, -0) is +0, min is -0), whichever side holds which;
    the shim's own rule (not H200-measured), checked here because the all-pattern test ignores zero signs."""
    from harness.versions import triton_at_least

    if not triton_at_least(3, 7):
        pytest.skip("Triton 3.6 upcasts bf16 to fp32 for maximum/minimum: no bf16 max/min runs, and the fp32 "
                    "zero signs are the interpreter's own (not modelled)")
    a = torch.tensor([0.0, -0.0, -0.0, 0.0], dtype=torch.bfloat16)
    b = torch.tensor([-0.0, 0.0, -0.0, 0.0], dtype=torch.bfloat16)
    out = torch.empty(8, dtype=torch.bfloat16)
    _bf16_zero_max_min[(1,)](a, b, out, BLOCK=4)
    signs = torch.signbit(out.float()).tolist()
    assert signs == [False, False, True, False, True, True, True, False] and not out.float().abs().any()


@triton.jit
def _clamp_modes(x_ptr, o_ptr, BLOCK: tl.constexpr):
    off = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + off)
    tl.store(o_ptr + off, tl.clamp(x, -1.0, 2.0))
    tl.store(o_ptr + BLOCK + off, tl.clamp(x, -1.0, 2.0, propagate_nan=tl.PropagateNan.ALL))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_clamp_returns_a_bound_for_nan_unless_nans_propagate(dtype):
    """tt.clampf is max then min: max/min.{f32,bf16} give the non-NaN operand, so a NaN input clamps to the lower
    bound; with propagate_nan=ALL (the .NaN forms) it stays NaN. Triton 3.6's interpreter propagated NaN in both."""
    x = torch.tensor([float("nan"), 5.0, -3.0, 0.5], dtype=dtype)
    out = torch.empty(8, dtype=dtype)
    _clamp_modes[(1,)](x, out, BLOCK=4)
    none, all_ = out[:4].float().tolist(), out[4:8].float()
    assert none == [-1.0, 2.0, -1.0, 0.5]
    assert torch.isnan(all_[0]) and all_[1:].tolist() == [2.0, -1.0, 0.5]


@triton.jit
def _bf16_conversions(b_ptr, h_ptr, f_ptr, ob_ptr, oh_ptr, oi_ptr, oz_ptr, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    b = tl.load(b_ptr + i)
    tl.store(oh_ptr + i, b.to(tl.float16))
    tl.store(oi_ptr + i, b.to(tl.int32))
    tl.store(ob_ptr + i, tl.load(h_ptr + i).to(tl.bfloat16))
    # fp32 whatever the launch capture's widened variants load: rtz is for downcasts only
    tl.store(oz_ptr + i, tl.load(f_ptr + i).to(tl.float32).to(tl.bfloat16, fp_downcast_rounding="rtz"))


expect_compile_failure(_bf16_conversions, "sm75", match=r"Feature '\.bf16' requires \.target sm_80",
                       reason="cvt.rz.bf16.f32 has no sm75 lowering: ptxas refuses it, as it should")


def test_bf16_conversions_to_and_from_other_types():
    """bf16 -> fp16 and -> int32 go through the exact fp32 value (cvt.rn.f16.f32, cvt.rzi.s32.f32); fp16 -> bf16
    rounds once (the fp16 value is exact in fp32); fp32 -> bf16 with rounding "rtz" truncates (cvt.rz.bf16.f32)."""
    b = torch.tensor([1.0078125, -2.5, 300.0, -0.0, 7e4, 1e-6, 3.75, -3.75], dtype=torch.bfloat16)
    h = torch.tensor([1.0 + 2**-8, 1.0 + 3 * 2**-8, -(1.0 + 2**-8 + 2**-10), 65504.0, 2.0**-24, -0.0, 0.1, -7.0],
                     dtype=torch.float16)
    f = torch.tensor([1.0 + 2**-8 + 2**-9, -(1.0 + 3 * 2**-9), 3.4e38, float("inf"), float("nan"), 2.0**-130,
                      -(2.0**-126), 1.0])
    ob, oh = torch.empty(8, dtype=torch.bfloat16), torch.empty(8, dtype=torch.float16)
    oi, oz = torch.empty(8, dtype=torch.int32), torch.empty(8, dtype=torch.bfloat16)
    _bf16_conversions[(1,)](b, h, f, ob, oh, oi, oz, BLOCK=8)
    assert torch.equal(oh.view(torch.int16), b.float().to(torch.float16).view(torch.int16))
    assert oi.tolist() == [1, -2, 300, 0, 70144, 0, 3, -3]
    assert torch.equal(_bits(ob), _bits(h.float().to(torch.bfloat16)))
    want = (f.view(torch.int32) >> 16).to(torch.int32) & 0xFFFF  # truncation: the top 16 bits
    want[4] = 0x7FFF  # NaN: canonical
    assert (_bits(oz) & 0xFFFF).tolist() == want.tolist()


@triton.jit
def _bf16_argmax_and_fp32_atomics(x_ptr, im_ptr, vm_ptr, q_ptr, w_ptr, ROWS: tl.constexpr, W: tl.constexpr):
    r = tl.arange(0, ROWS)
    x = tl.load(x_ptr + r[:, None] * W + tl.arange(0, W)[None, :])
    v, i = tl.max(x, axis=1, return_indices=True)
    tl.store(vm_ptr + r, v)
    tl.store(im_ptr + r, tl.argmin(x, axis=1))
    tl.store(im_ptr + ROWS + r, i)
    k = tl.arange(0, 8)
    tl.atomic_add(q_ptr + k % 2, tl.load(w_ptr + k))  # fp32 adds: the interpreter's own, not the bf16 shim's


def test_bf16_argmax_and_fp32_atomic_adds():
    x = torch.tensor([[1.0, 3.0, -2.0, 3.0], [-1.0, -5.0, 0.5, -5.0]], dtype=torch.bfloat16)
    im, vm = torch.empty(4, dtype=torch.int32), torch.empty(2, dtype=torch.bfloat16)
    q, w = torch.zeros(2), torch.tensor([1.0, 2.0, 0.5, 0.25, 2.0**-30, 1e8, 3.0, -1.0])
    _bf16_argmax_and_fp32_atomics[(1,)](x, im, vm, q, w, ROWS=2, W=4)
    assert vm.float().tolist() == [3.0, 0.5] and im.tolist() == [2, 1, 1, 2]  # argmin, then max's index
    assert q.tolist() == [float(np.float32(1.0) + np.float32(0.5) + np.float32(2.0**-30) + np.float32(3.0)),
                          float(np.float32(2.0) + np.float32(0.25) + np.float32(1e8) + np.float32(-1.0))]
