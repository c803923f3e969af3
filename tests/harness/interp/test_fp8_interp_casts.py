"""The interpreter with the plugin's GPU-exact casts (harness.interp.casts) computes what the H200 computes.

References are H200 measurements, not the codec: the per-target tables (golden/test_fp8_targets, every
fp16/bf16 pattern and a 262,144-value fp32 sample, direct and via fp32) and the H200 decode tables. The
kernels are plain ``@triton.jit`` casts, run in this (interpreter-lane) process.
"""

from __future__ import annotations

import warnings

import pytest
import torch

from harness import fp8
from harness.cast_probe import fp8_cast
from harness.compile.launches import expect_compile_failure
from harness.interp import casts as interp_casts
from harness.interp import dots
from harness.interp.patch import Patch
from tests.harness.codecs.fp8_tables import SRCS, table_inputs

pytestmark = pytest.mark.interp_only

triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

TL_FMT = {"e4nv": "float8e4nv", "e5m2": "float8e5", "e4b15": "float8e4b15"}


@triton.jit
def _roundtrip(c_ptr, f_ptr, r_ptr, FMT: tl.constexpr):
    off = tl.arange(0, 256)
    v = tl.load(c_ptr + off).to(FMT, bitcast=True).to(tl.float32)
    tl.store(f_ptr + off, v)
    tl.store(r_ptr + off, v.to(FMT).to(tl.uint8, bitcast=True))


@triton.jit
def _dot(a_ptr, b_ptr, c_ptr, FMT: tl.constexpr):
    i = tl.arange(0, 32)  # FP8 tl.dot needs K >= 32 on the GPU (the launch capture compiles this kernel)
    a = tl.load(a_ptr + i[:, None] * 32 + i[None, :]).to(FMT, bitcast=True)
    b = tl.load(b_ptr + i[:, None] * 32 + i[None, :]).to(FMT, bitcast=True)
    tl.store(c_ptr + i[:, None] * 32 + i[None, :], tl.dot(a, b))


@triton.jit
def _cast_rtz(x_ptr, y_ptr, DST: tl.constexpr):
    off = tl.arange(0, 64)
    tl.store(y_ptr + off, tl.load(x_ptr + off).to(DST, fp_downcast_rounding="rtz").to(tl.uint8, bitcast=True))


# The probe kernels are launched with casts the compiler refuses on purpose (that refusal is what some tests
# check): the launch capture's compile of those variants is expected to fail, for that reason only.
expect_compile_failure(fp8_cast, match=r"is_fp16\(\) or arg\.type\.scalar\.is_fp32\(\)",
                       reason="probe: bf16 -> e4b15 cast straight from the load, refused as the tests expect")
expect_compile_failure(_cast_rtz, match="PassManager::run failed",
                       reason="probe: rtz downcasts the NVIDIA backend cannot lower, refused as the tests expect")
expect_compile_failure(_cast_rtz, match=r"is_fp16\(\) or arg\.type\.scalar\.is_fp32\(\)",
                       reason="probe: casts what it is given; capture's DST=e4b15 branch with bf16 input is the "
                              "cast straight from the load that has no lowering")


def _run_cast(x: torch.Tensor, fmt: str, via: bool) -> torch.Tensor:
    y = torch.empty(x.numel(), dtype=torch.uint8)
    fp8_cast[(triton.cdiv(x.numel(), 8192),)](x, y, x.numel(), getattr(tl, TL_FMT[fmt]), via, BLOCK=8192)
    return y


def _table(golden, target: str, src: str) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    codes, meta = golden.load("codes", test="test_fp8_targets::test_encode_matches_target_table",
                              param=f"{target}-{src}")
    return table_inputs(src), dict(zip(meta["rows"], codes, strict=True))


def _mismatch(got: torch.Tensor, want: torch.Tensor, x: torch.Tensor) -> str:
    bad = (got != want).nonzero().flatten()
    ib = x.view(torch.int32 if x.dtype == torch.float32 else torch.int16)
    return f"{bad.numel()} of {x.numel()} codes differ" + "".join(
        f"; input 0x{int(ib[i]) & 0xFFFFFFFF:x}: interpreter 0x{int(got[i]):02x}, H200 0x{int(want[i]):02x}"
        for i in bad[:4])


@pytest.fixture(autouse=True)
def _gpu_exact_casts():
    if interp_casts.active_target() is None:
        pytest.skip("the interpreter runs with its own casts (--harness-interp-casts=off)")
    assert interp_casts.active_target().name == "sm90"  # the session default this file's tables are for


@pytest.mark.parametrize("src", list(SRCS))
def test_interpreter_cast_equals_h200_table(src, golden):
    """Every finite and non-finite fp16/bf16 pattern and the fp32 sample, to each format, direct and via
    fp32: the interpreter's codes are the H200's, bit for bit."""
    x, rows = _table(golden, "sm90", src)
    assert rows, "empty table"
    for case, want in rows.items():
        fmt = case.rsplit("_", 1)[1]
        got = _run_cast(x, fmt, "_via_fp32_" in case)
        assert torch.equal(got, want), f"{case}: " + _mismatch(got, want, x)


def test_own_casts_differ_as_documented(golden):
    """With the feature suspended the interpreter is its old self (docs/MEASUREMENTS.md): fp16 -> e4nv
    differs from the H200 on 15.5% of the 48,642 in-range finite inputs, and gives NaN codes beyond."""
    x, rows = _table(golden, "sm90", "fp16")
    with interp_casts.suspended():
        own = _run_cast(x, "e4nv", False)
        model = fp8.encode(x, "e4nv", arch="interp")
    assert torch.equal(own, model)
    xf = x.float()
    in_range = torch.isfinite(xf) & (xf.abs() <= 448)
    differ = (own != rows["fp16_e4nv"]) & in_range
    assert int(in_range.sum()) == 48642
    assert round(100 * int(differ.sum()) / 48642, 1) == 15.5
    beyond = torch.isfinite(xf) & (xf.abs() > 464)
    assert fp8.is_nan_code(own[beyond], "e4nv").any() and not fp8.is_nan_code(rows["fp16_e4nv"][beyond], "e4nv").any()


def test_bf16_to_e4b15_refused_like_the_compiler():
    """Seed bug 1 on the CPU: the compiler has no bf16 -> e4b15 cast, so neither has the interpreter."""
    x = torch.randn(64).to(torch.bfloat16)
    with pytest.raises(Exception) as info:
        _run_cast(x, "e4b15", False)
    cause = info.value if isinstance(info.value, interp_casts.CastRefusedError) else info.value.__cause__
    assert isinstance(cause, interp_casts.CastRefusedError), repr(info.value)
    from triton.compiler.errors import CompilationError

    assert isinstance(cause, CompilationError)
    assert "bfloat16 -> float8e4b15" in str(cause) and "x.to(tl.float32)" in str(cause)
    assert _run_cast(x, "e4b15", True).shape == (64,)  # the fix: through fp32


def test_rtz_downcast_as_the_backend_lowers_it():
    """fp_downcast_rounding="rtz" (Triton 3.6 PTX, not H200-measured): fp32 -> e5m2 truncates after
    cvt.rz.f16.f32; fp16 -> e5m2 has no lowering (the backend aborts), so the interpreter refuses it."""
    x = torch.tensor([1.0, 1.1, 1.2, 1.24, -1.24, 1.26, 3e-5, 60000.0] * 8, dtype=torch.float32)
    y = torch.empty(64, dtype=torch.uint8)
    _cast_rtz[(1,)](x, y, tl.float8e5)
    want = fp8.encode(x, "e5m2", arch="sm80")  # round-half-away model; rtz must be <= it in magnitude
    assert y[:8].tolist() == [0x3C, 0x3C, 0x3C, 0x3C, 0xBC, 0x3D, 0x01, 0x7B]
    assert ((y & 0x7F) <= (want & 0x7F)).all()
    with pytest.raises(Exception) as info:
        _cast_rtz[(1,)](x.half(), y, tl.float8e5)
    cause = info.value if isinstance(info.value, interp_casts.CastRefusedError) else info.value.__cause__
    assert isinstance(cause, interp_casts.CastRefusedError) and "rtz" in str(cause)


def test_other_target_emulated_and_refused(golden):
    """install("sm80"): e4nv refused (as the compiler refuses it before sm89), e5m2 is sm80's software
    conversion — the sm80 table, not the sm90 one."""
    x, rows = _table(golden, "sm80", "fp16")
    with Patch.context() as patch:
        assert interp_casts.install(patch, "sm80")
        assert interp_casts.active_target().name == "sm80"
        with pytest.raises(Exception) as info:
            _run_cast(x[:64], "e4nv", False)
        cause = info.value if isinstance(info.value, interp_casts.CastRefusedError) else info.value.__cause__
        assert isinstance(cause, interp_casts.CastRefusedError) and "e4nv needs sm89" in str(cause)
        got = _run_cast(x, "e5m2", False)
        # the table is Triton 3.6's lowering; a newer installed Triton lowers sm80 e5m2 its own way
        # (harness.fp8.LOWERINGS), which the interpreter then follows: the table holds where the models agree
        want = rows["fp16_e5m2"]
        if fp8.lowering_version() != fp8.lowering_version("3.6"):
            model = fp8.encode(x, "e5m2", arch="sm80")
            same = model == fp8.encode(x, "e5m2", arch="sm80", triton="3.6")
            assert torch.equal(got[same], want[same]), _mismatch(got[same], want[same], x[same])
            want = model
        assert torch.equal(got, want), _mismatch(got, want, x)
    assert interp_casts.active_target().name == "sm90"


@pytest.mark.parametrize("fmt", list(TL_FMT))
def test_decode_and_bitcast_roundtrip(fmt, golden):
    """FP8 -> fp32 equals the H200's decode table (NaN where the H200 has NaN, inf where it has inf), and
    code -> float -> same format -> code is the identity on every non-NaN, non-inf code."""
    want, _ = golden.load("fp32_bits", test="test_fp8_golden::test_decode_table_matches_h200", param=fmt)
    want = want.view(torch.float32)
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    f = torch.empty(256, dtype=torch.float32)
    r = torch.empty(256, dtype=torch.uint8)
    _roundtrip[(1,)](codes, f, r, getattr(tl, TL_FMT[fmt]))
    assert torch.equal(torch.isnan(f), torch.isnan(want))
    ok = ~torch.isnan(want)
    assert torch.equal(f[ok].view(torch.int32), want[ok].view(torch.int32))
    keep = ~fp8.is_nan_code(codes, fmt)
    if fmt == "e4b15":
        keep &= (codes & 0x7F) != 0x7F  # 1.875 is beyond the 1.75 a cast saturates to
    inf = fp8.is_inf_code(codes, fmt)  # e5m2 +-inf saturate on the way back (cvt ... satfinite)
    assert torch.equal(r[keep & ~inf], codes[keep & ~inf])
    assert r[inf].tolist() == ([0x7B, 0xFB] if fmt == "e5m2" else [])


def test_fp8_dot_operands_decoded_like_the_gpu():
    """tl.dot on e4nv operands: a NaN code (0x7f) poisons its row, as on the GPU; the interpreter's own
    converter and matmul read it as 480."""
    g = torch.Generator().manual_seed(3)
    a = fp8.encode(torch.randn(32, 32, generator=g), "e4nv")
    b = fp8.encode(torch.randn(32, 32, generator=g), "e4nv")
    a[2, 5] = 0x7F
    c = torch.empty(32, 32, dtype=torch.float32)
    _dot[(1,)](a, b, c, tl.float8e4nv)
    ref = fp8.decode(a, "e4nv").double() @ fp8.decode(b, "e4nv").double()
    assert torch.isnan(c[2]).all() and not torch.isnan(c[torch.arange(32) != 2]).any()
    keep = torch.arange(32) != 2
    assert torch.allclose(c[keep].double(), ref[keep], rtol=1e-6, atol=1e-6)
    with interp_casts.suspended(), dots.suspended():  # the interpreter's own converter and matmul
        _dot[(1,)](a, b, c, tl.float8e4nv)
    assert not torch.isnan(c).any()


def test_unknown_interpreter_layout_warns_once_and_falls_back(monkeypatch):
    from triton.runtime import interpreter

    before = interp_casts.active_target()
    with interp_casts.suspended():
        monkeypatch.setattr(interpreter, "_convert_float", lambda data, src, dst: data)
        with pytest.warns(RuntimeWarning, match="cannot make the interpreter's FP8 casts GPU-exact") as rec, \
                Patch.context() as patch:
            assert interp_casts.install(patch, "sm90") is False
        assert len([w for w in rec if issubclass(w.category, RuntimeWarning)]) == 1
        assert interp_casts.active_target() is None
        monkeypatch.delattr(interpreter, "_convert_float")
        with warnings.catch_warnings(record=True) as rec2:
            warnings.simplefilter("always")
            with Patch.context() as patch:
                assert interp_casts.install(patch, "sm90") is False
        assert any("no triton.runtime.interpreter._convert_float" in str(w.message) for w in rec2)
        monkeypatch.undo()
    assert interp_casts.active_target() is before


def test_bad_targets_and_out_of_order_undo():
    with Patch.context() as patch:
        with pytest.raises(ValueError, match="CUDA arch"):
            interp_casts.install(patch, "interp")
        with pytest.raises(ValueError, match="CUDA arch"):
            interp_casts.install(patch, "gfx942")
        with pytest.raises(ValueError, match="not understood"):
            interp_casts.install(patch, "sm_9x")
    with Patch.context() as outer:
        interp_casts.install(outer, "sm89")
        with Patch.context() as inner:
            interp_casts.install(inner, "sm80")
            with pytest.raises(RuntimeError, match="innermost first"):
                outer.undo()
            assert interp_casts.active_target().name == "sm80"
        assert interp_casts.active_target().name == "sm89"
    assert interp_casts.active_target().name == "sm90"


def test_nested_sessions_restore(pytester):
    """A pytester session installs its own casts (or, with =off, suspends them) and puts back the outer
    session's wrapper when it ends."""
    from triton.runtime import interpreter

    outer_fn = interpreter._convert_float
    pytester.makepyfile(test_inner="""
        from harness.interp import casts as interp_casts

        def test_target(pytestconfig):
            t = interp_casts.active_target()
            want = pytestconfig.getoption("harness_interp_casts")
            assert (t is None) if want == "off" else (t.name == "sm89")
    """)
    for args in (["--harness-arch=sm89"], ["--harness-interp-casts=off"]):
        res = pytester.runpytest_inprocess("-p", "no:cacheprovider",
                                           "--harness-lane=interp", *args)
        res.assert_outcomes(passed=1)
        assert interpreter._convert_float is outer_fn
        assert interp_casts.active_target().name == "sm90"


def test_suspended_lifts_every_nested_install():
    """A nested session installs the casts again on top of the outer one's; suspending must reach the
    interpreter's own converter, not the outer install's (a nested install's original is that wrapper)."""
    from triton.runtime import interpreter as itp

    outer = fp8.interpreter_imitates()
    with Patch.context() as patch:
        interp_casts.install(patch, "sm80")
        assert fp8.interpreter_imitates().name == "sm80"
        with interp_casts.suspended():
            assert fp8.interpreter_imitates() is None and interp_casts.active_target() is None
            assert not hasattr(itp._convert_float, "__wrapped__")
        assert fp8.interpreter_imitates().name == "sm80"
    assert fp8.interpreter_imitates() == outer
