"""harness.compile.matrix on small kernels of its own: targets, caching, interpreted kernels, and every
assertion's pass and fail path (messages pinned by fragment)."""

import re
from pathlib import Path

import pytest
import triton
import triton.language as tl
from triton.compiler.errors import CompilationError

from harness.compile import matrix as cm
from harness.compile import message
from harness.compile.cache import clear_cache
from harness.compile.errors import error_kind
from harness.compile.signature import prepare
from harness.compile.targets import parse_targets, target_available, target_supported
from harness.interp.jit import language_patched
from harness.versions import triton_at_least, triton_version

pytestmark = pytest.mark.lane_independent  # the same on every lane: the GPU lane skips it


@triton.jit
def _twice(x):
    return x.to(tl.float32) * 2


@triton.jit
def cast_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr, FMT: tl.constexpr, VIA_FP32: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    if VIA_FP32:
        x = x.to(tl.float32)
    if FMT == 0:
        y = x.to(tl.float8e4nv)
    else:
        y = x.to(tl.float8e4b15)
    tl.store(y_ptr + offs, y.to(tl.uint8, bitcast=True), mask=m)


@triton.jit
def helper_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, _twice(tl.load(x_ptr + offs)))


SIG = {"x_ptr": "*bf16", "y_ptr": "*u8", "n": "i32"}
E4NV = {"BLOCK": 128, "FMT": 0, "VIA_FP32": True}
E4B15_DIRECT = {"BLOCK": 128, "FMT": 1, "VIA_FP32": False}
E4NV_REFUSED = r"fp8e4nv not supported in this architecture"
E4B15_BF16_REFUSED = r"is_fp16\(\) or .*is_fp32\(\)"


@pytest.mark.parametrize(
    "spec, name, cc",
    [
        ("sm90", "sm90", 90),
        ("sm_89", "sm89", 89),
        ("120", "sm120", 120),
        ("SM80", "sm80", 80),
        ("sm90a", "sm90", 90),
    ],
)
def test_parse_target_cuda(spec, name, cc):
    t = cm.parse_target(spec)
    assert (t.name, t.backend, t.cc, t.warp_size) == (name, "cuda", cc, 32)


def test_parse_target_rocm():
    t = cm.parse_target("gfx942")
    assert (t.name, t.backend, t.arch, t.warp_size, t.cc) == ("gfx942", "hip", "gfx942", 64, None)


@pytest.mark.parametrize("bad", ["interp", "cpu", "hopper", "", "sm", "sm_9x", "2"])
def test_parse_target_rejects(bad):
    with pytest.raises(ValueError, match="target"):
        cm.parse_target(bad)


def test_parse_targets_string_dedup_and_empty():
    assert [t.name for t in parse_targets("sm80, sm_80,90")] == ["sm80", "sm90"]
    with pytest.raises(ValueError, match="at least one target"):
        parse_targets(" , ")
    with pytest.raises(TypeError, match="target must be a str"):
        cm.parse_target(90)


def test_default_targets_are_the_contract():
    assert cm.DEFAULT_TARGETS == ("sm75", "sm80", "sm86", "sm89", "sm90", "sm100", "sm120")


def test_compile_kernel_gives_ptx_and_caches():
    before = cm.stats()
    a = cm.compile_kernel(cast_kernel, signature=SIG, constexprs=E4NV, target="sm90")
    b = cm.compile_kernel(cast_kernel, signature=SIG, constexprs=dict(E4NV), target="sm_90")
    after = cm.stats()
    assert a is b, "the second identical compile must be a cache hit"
    assert after["hits"] >= before["hits"] + 1
    assert a.target == "sm90" and a.name == "cast_kernel"
    assert ".target sm_90a" in a.ptx and "cubin" in a.asm
    assert a.seconds > 0


def test_cache_key_includes_constexprs_and_target():
    a = cm.compile_kernel(cast_kernel, signature=SIG, constexprs=E4NV, target="sm90")
    b = cm.compile_kernel(cast_kernel, signature=SIG, constexprs={**E4NV, "BLOCK": 64}, target="sm90")
    c = cm.compile_kernel(cast_kernel, signature=SIG, constexprs=E4NV, target="sm100")
    assert a is not b and a is not c
    assert ".target sm_100a" in c.ptx


def test_helper_called_through_globals_compiles():
    # Under TRITON_INTERPRET=1 both kernels are InterpretedFunctions; the helper must be rebuilt too.
    c = cm.compile_kernel(
        helper_kernel, signature={"x_ptr": "*fp16", "y_ptr": "*fp32"}, constexprs={"BLOCK": 64}, target="sm80"
    )
    assert_mul = re.search(r"(add|mul)\.f32", c.ptx)
    assert assert_mul, "the inlined helper's fp32 arithmetic is missing from the PTX"


def test_compile_matrix_reports_refusals_per_target():
    res = cm.compile_matrix(cast_kernel, signature=SIG, constexprs=E4NV, targets=["sm80", "sm89"])
    assert isinstance(res["sm80"], CompilationError)
    assert re.search(E4NV_REFUSED, cm.describe_error(res["sm80"]))
    assert isinstance(res["sm89"], cm.Compiled)


def test_describe_error_names_the_failing_assert():
    res = cm.compile_matrix(cast_kernel, signature=SIG, constexprs=E4B15_DIRECT, targets=["sm90"])
    text = cm.describe_error(res["sm90"])
    assert "y = x.to(tl.float8e4b15)" in text  # where, from the CompilationError
    assert re.search(
        r"caused by AssertionError \(at utils\.py:\d+: assert arg\.type\.scalar\.is_fp16\(\)", text
    )


def test_assert_compiles_lists_every_failing_target():
    with pytest.raises(AssertionError) as ei:
        cm.assert_compiles(cast_kernel, signature=SIG, constexprs=E4NV, targets="sm75,sm80,sm90")
    msg = str(ei.value)
    assert msg.splitlines()[0] == "cast_kernel failed to compile for 2 / 3 target(s):"
    assert re.search(r"^  sm75: .*fp8e4nv not supported", msg, re.M)
    assert re.search(r"^  sm80: .*fp8e4nv not supported", msg, re.M)
    assert "sm90" not in msg


def test_assert_compile_error_passes_and_fails():
    cm.assert_compile_error(
        cast_kernel, signature=SIG, constexprs=E4NV, targets=["sm75", "sm80"], match=E4NV_REFUSED
    )
    with pytest.raises(AssertionError, match=r"sm90: compiled, but a compile error matching"):
        cm.assert_compile_error(
            cast_kernel, signature=SIG, constexprs=E4NV, target="sm90", match=E4NV_REFUSED
        )
    with pytest.raises(AssertionError, match=r"sm80: error does not match 'no such text'"):
        cm.assert_compile_error(
            cast_kernel, signature=SIG, constexprs=E4NV, target="sm80", match="no such text"
        )
    with pytest.raises(AssertionError, match=r"raised CompilationError, expected KeyError"):
        cm.assert_compile_error(
            cast_kernel, signature=SIG, constexprs=E4NV, target="sm80", match=E4NV_REFUSED, exc_type=KeyError
        )


def test_assert_ptx_contains_and_lacks():
    c = cm.compile_kernel(cast_kernel, signature={**SIG, "x_ptr": "*fp32"}, constexprs=E4NV, target="sm89")
    cm.assert_ptx_contains(c, r"cvt\.rn\.satfinite\.e4m3x2")
    cm.assert_ptx_lacks(c, r"cvt\.rn\.e4m3x2")  # never the non-saturating form
    with pytest.raises(AssertionError) as ei:
        cm.assert_ptx_contains(c, r"cvt\.rz\.e4m3x2")
    first, *related = str(ei.value).splitlines()
    assert re.fullmatch(
        r"cast_kernel@sm89: no match for 'cvt\\\\.rz\\\\.e4m3x2' in ptx \(\d+ lines\); related lines:", first
    )
    assert any("cvt.rn.satfinite.e4m3x2" in ln for ln in related)
    with pytest.raises(
        AssertionError, match=r"1 line\(s\) of ptx match 'satfinite', expected none:\n    cvt\.rn\."
    ):
        cm.assert_ptx_lacks(c, "satfinite")
    with pytest.raises(ValueError, match="has no 'amdgcn' stage"):
        cm.assert_ptx_contains(c, "x", asm="amdgcn")


def _failing_compile_asserts():
    c = cm.compile_kernel(cast_kernel, signature={**SIG, "x_ptr": "*fp32"}, constexprs=E4NV, target="sm89")
    return {
        "compiles": lambda: cm.assert_compiles(cast_kernel, signature=SIG, constexprs=E4NV, target="sm80"),
        "refusal": lambda: cm.assert_compile_error(cast_kernel, signature=SIG, constexprs=E4NV, target="sm90",
                                                   match=E4NV_REFUSED),
        "contains": lambda: cm.assert_ptx_contains(c, r"cvt\.rz\.e4m3x2"),
        "lacks": lambda: cm.assert_ptx_lacks(c, "satfinite"),
        "not compiled": lambda: cm.assert_ptx_lacks(object(), "x"),  # TypeError from the same path
        "no stage": lambda: cm.assert_ptx_contains(c, "x", asm="amdgcn"),
        "both targets": lambda: cm.assert_compiles(cast_kernel, signature=SIG, target="sm80", targets=["sm90"]),
    }


def test_failed_compile_assertions_show_only_the_callers_frame():
    """``__tracebackhide__`` on every harness function a failure passes through: pytest shows the test's
    line, not the harness internals."""
    package = Path(cm.__file__).parent
    for name, call in _failing_compile_asserts().items():
        with pytest.raises((AssertionError, TypeError, ValueError)) as ei:
            call()
        shown = [Path(e.path) for e in ei.traceback.filter(ei)]
        assert not [p for p in shown if p.parent == package], (name, shown)


def test_asm_mismatch_text_caps_the_lines_it_shows():
    many = tuple(f"cvt.rn.f16.f32 %h{i}, %f{i};" for i in range(25))
    text = message.format_asm_mismatch(message.AsmMismatch("k", "sm90", "ptx", r"cvt\.rz", "match", many, 300))
    head, *body = text.splitlines()
    assert head == r"k@sm90: no match for 'cvt\\.rz' in ptx (300 lines); related lines (showing 20 of 25):"
    assert body == [f"    {ln}" for ln in many[:20]]
    text = message.format_asm_mismatch(message.AsmMismatch("k", "sm90", "ptx", "zzz", "match", (), 3))
    assert text.splitlines()[1:] == ["    (none)"]
    text = message.format_asm_mismatch(message.AsmMismatch("k", "sm80", "ttgir", "cvt", "none", many, 300))
    assert text.splitlines()[0] == "k@sm80: 25 line(s) of ttgir match 'cvt', expected none:"
    assert len(text.splitlines()) == 21


def test_compile_failure_text_from_a_record():
    rec = message.CompileFailure("k", "refusal", 3, (
        message.CompileProblem("sm80", "compiled"),
        message.CompileProblem("sm89", "wrong type", "boom", "KeyError"),
        message.CompileProblem("sm90", "no match", "other reason"),
    ), match="fp8e4nv", exc_type="CompilationError")
    assert message.format_compile_failure(rec).splitlines() == [
        "k: expected compile error on 3 target(s), 3 did not comply:",
        "  sm80: compiled, but a compile error matching 'fp8e4nv' was expected",
        "  sm89: raised KeyError, expected CompilationError: boom",
        "  sm90: error does not match 'fp8e4nv': other reason",
    ]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"signature": {**SIG, "bogus": "i32"}, "constexprs": E4NV}, r"unknown argument\(s\) \['bogus'\]"),
        (
            {"signature": {"x_ptr": "*bf16"}, "constexprs": E4NV},
            r"no type \(signature=\) or value .* \['y_ptr', 'n'\]",
        ),
        (
            {"signature": {**SIG, "BLOCK": "i32"}, "constexprs": {"FMT": 0, "VIA_FP32": 1}},
            r"'BLOCK' is tl\.constexpr; give its value in constexprs=",
        ),
        ({"signature": {**SIG, "n": ""}, "constexprs": E4NV}, r"signature\['n'\] must be a type string"),
        (
            {"signature": {**SIG, "BLOCK": "constexpr"}, "constexprs": {"FMT": 0, "VIA_FP32": 1}},
            r"signature= gives 'BLOCK' as 'constexpr' but constexprs= has no value",
        ),
    ],
)
def test_bad_signature_is_a_clear_value_error(kwargs, match):
    with pytest.raises(ValueError, match=match):
        cm.compile_matrix(cast_kernel, targets=["sm90"], **kwargs)


def test_bad_targets_raise_before_compiling():
    before = cm.stats()["compiles"]
    with pytest.raises(ValueError, match="'hopper' is not understood"):
        cm.compile_matrix(
            cast_kernel, signature=SIG, constexprs={**E4NV, "BLOCK": 32}, targets=["sm90", "hopper"]
        )
    assert cm.stats()["compiles"] == before


def test_not_a_kernel():
    with pytest.raises(TypeError, match=r"fn must be a @triton\.jit kernel"):
        cm.compile_kernel(lambda x: x, signature={}, target="sm90")


def test_rocm_target_compiles_or_skips_cleanly():
    t = cm.parse_target("gfx942")
    ok, reason = target_available(t)
    if not ok:
        pytest.skip(reason)
    c = cm.compile_kernel(
        cast_kernel, signature={**SIG, "x_ptr": "*fp16"}, constexprs={**E4NV, "BLOCK": 64}, target=t
    )
    assert c.isa_key == "amdgcn" and "gfx942" in c.ptx


@triton.jit
def sum_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
    tl.store(y_ptr, tl.sum(tl.load(x_ptr + tl.arange(0, BLOCK)), axis=0))


@pytest.mark.interp_only
def test_compiles_after_an_interpreted_device_call():
    """tl.sum is a @jit helper: the interpreter's device call used to leave triton.language patched."""
    import torch

    x = torch.arange(16, dtype=torch.float32)
    y = torch.empty(1)
    sum_kernel[(1,)](x, y, BLOCK=16)
    assert y.item() == 120.0
    assert not language_patched()
    c = cm.compile_kernel(
        sum_kernel, signature={"x_ptr": "*fp32", "y_ptr": "*fp32"}, constexprs={"BLOCK": 16}, target="sm90"
    )
    assert "red" in c.ptx or "shfl" in c.ptx  # a real reduction was compiled


# --- targets the installed Triton cannot compile for ------------------------------------------------------


@pytest.mark.parametrize("bad", ["sm91", "sm99", "sm88", "gfx000"])
def test_unknown_target_is_a_value_error_before_compiling(bad):
    """sm88 made Triton 3.9's LLVM kill the process ("PTX version 8.8 does not support target 'sm_88'");
    sm91/sm99 reach ptxas; gfx000 reaches LLVM. All must be refused up front, naming the target."""
    t = cm.parse_target(bad)
    ok, reason = target_supported(t)
    assert not ok and bad.removeprefix("sm") in reason
    before = cm.stats()["compiles"]
    with pytest.raises(ValueError, match=rf"targets: .*{bad.removeprefix('sm')}"):
        cm.compile_matrix(cast_kernel, signature=SIG, constexprs=E4NV, targets=["sm90", bad])
    with pytest.raises(ValueError, match=rf"targets: .*{bad.removeprefix('sm')}"):
        cm.compile_kernel(cast_kernel, signature=SIG, constexprs=E4NV, target=bad)
    assert cm.stats()["compiles"] == before


def test_supported_targets_come_from_the_installed_ptxas():
    """Every default target is supported, and the reason for a refused one lists what ptxas accepts."""
    for name in cm.DEFAULT_TARGETS:
        assert target_supported(cm.parse_target(name)) == (True, "")
    ok, reason = target_supported(cm.parse_target("sm91"))
    assert not ok and re.search(r"accepts .*sm90.*sm100", reason)


# --- ptxas failures keep the ptxas error line --------------------------------------------------------------


@triton.jit
def e5m2_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs).to(tl.float8e5).to(tl.uint8, bitcast=True))


def _ptxas_failure():
    """A kernel ptxas rejects on Triton 3.9 (e5m2 on sm75 uses sm80-only instructions); 3.6 lowers it."""
    if not triton_at_least(3, 7):
        pytest.skip(f"triton {triton_version()} lowers e5m2 for sm75 (no ptxas failure to observe)")
    return cm.compile_matrix(e5m2_kernel, signature={"x_ptr": "*fp32", "y_ptr": "*u8"},
                             constexprs={"BLOCK": 128}, targets=["sm75"])["sm75"]


def test_ptxas_failure_keeps_the_ptxas_error_line():
    err = _ptxas_failure()
    assert error_kind(err) == "ptxas"
    line = cm.error_line(err)
    assert re.fullmatch(r"ptxas line \d+: Feature 'cvt\.f16x2\.f32' requires \.target sm_80 or higher \(\+\d+ more\)",
                        line), line
    with pytest.raises(AssertionError, match=r"sm75: ptxas line \d+: Feature 'cvt\.f16x2\.f32' requires"):
        cm.assert_compiles(e5m2_kernel, signature={"x_ptr": "*fp32", "y_ptr": "*u8"}, constexprs={"BLOCK": 128},
                           target="sm75")


def test_ptxas_failures_are_counted_apart_from_refusals():
    clear_cache()
    _ptxas_failure()
    cm.compile_matrix(cast_kernel, signature=SIG, constexprs={**E4NV, "BLOCK": 16}, targets=["sm80"])
    s = cm.stats()
    assert (s["compiles"], s["failures"], s["ptxas"]) == (2, 1, 1)


def test_refusal_is_not_a_ptxas_failure():
    err = cm.compile_matrix(cast_kernel, signature=SIG, constexprs=E4NV, targets=["sm80"])["sm80"]
    assert error_kind(err) == "refused"
    assert "fp8e4nv not supported in this architecture" in cm.error_line(err)


# --- type strings and constexpr values ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "ty, hint",
    [("*fp8_e4m3", "'*fp8e4nv'"), ("*e5m2", "'*fp8e5'"), ("*float16", "'*fp16'"), ("bfloat16", "'bf16'"),
     ("*fp8e4m3fn", "'*fp8e4nv'"), ("int", None), ("*", None), ("**fp16", None)],
)
def test_bad_type_string_is_a_value_error_listing_the_valid_ones(ty, hint):
    with pytest.raises(ValueError) as ei:
        cm.compile_matrix(cast_kernel, signature={**SIG, "x_ptr": ty}, constexprs=E4NV, targets=["sm90"])
    msg = str(ei.value)
    assert f"cast_kernel: signature['x_ptr'] = {ty!r} is not a Triton type string" in msg
    assert "fp8e4nv, fp8e5, fp8e4b15" in msg
    if hint:
        assert f"(did you mean {hint}?)" in msg
    else:
        assert "did you mean" not in msg


@pytest.mark.parametrize("ty", ["*fp8e4nv", "*fp8e5", "*fp8e4b15", "*kfp16", "*u8", "i64", "fp32", "i1"])
def test_every_documented_type_string_is_accepted(ty):
    jit, sig, _ = prepare(cast_kernel, {**SIG, "x_ptr": ty}, E4NV)
    assert sig["x_ptr"] == ty


def test_bad_constexpr_value_is_a_value_error():
    import torch

    with pytest.raises(ValueError, match=r"constexprs\['FMT'\] = torch\.float8_e4m3fn .*a torch dtype: pass the "
                                         r"Triton one"):
        cm.compile_matrix(cast_kernel, signature=SIG, constexprs={**E4NV, "FMT": torch.float8_e4m3fn},
                          targets=["sm90"])
    with pytest.raises(ValueError, match=r"constexprs\['BLOCK'\] = .* \(Tensor\) is not a constexpr value") as e:
        cm.compile_matrix(cast_kernel, signature=SIG, constexprs={**E4NV, "BLOCK": torch.ones(1)},
                          targets=["sm90"])
    assert "torch dtype" not in str(e.value)  # the hint is for dtypes, not for everything from torch
    prepare(cast_kernel, SIG, {**E4NV, "FMT": tl.float8e4nv})  # a tl.dtype is fine


def test_e5m2_compiles_below_sm89_after_an_sm90_compile(tmp_path):
    """Triton 3.6 latched the e5m2 lowering to the first compile's target, so sm80 after sm90 failed in ptxas
    ("cvt with .e4m3x2/.e5m2x2 requires .target sm_89"). A fresh process and a fresh Triton cache, or the
    order would be hidden by an earlier run."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import triton, triton.language as tl\n"
        "from harness.compile import matrix as cm\n"
        "@triton.jit\n"
        "def k(x_ptr, y_ptr, B: tl.constexpr):\n"
        "    o = tl.arange(0, B)\n"
        "    tl.store(y_ptr + o, tl.load(x_ptr + o).to(tl.float8e5).to(tl.uint8, bitcast=True))\n"
        "for t in ('sm90', 'sm80', 'sm86'):\n"
        "    r = cm.compile_matrix(k, signature={'x_ptr': '*fp16', 'y_ptr': '*u8'}, constexprs={'B': 64},\n"
        "                          targets=[t])[t]\n"
        "    print(t, 'ok' if isinstance(r, cm.Compiled) else cm.error_line(r))\n"
    )
    env = {**os.environ, "TRITON_CACHE_DIR": str(tmp_path / "triton"),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[3]),
                                                       os.environ.get("PYTHONPATH")]))}
    env.pop("TRITON_INTERPRET", None)
    script = tmp_path / "order.py"  # a file: @triton.jit reads the kernel's source
    script.write_text(code)
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert [ln for ln in p.stdout.splitlines() if ln[:2] == "sm"] == ["sm90 ok", "sm80 ok", "sm86 ok"]
