"""Made-up variants that the kernel's own guard or an op's type rule refuses are "not applicable" (issue 40): the
cell says ``+n/a``, the legend says why, the test passes. A missing lowering (bf16 → e4b15) stays a finding, and
so does any failure of the launch as run.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

# Imported before any in-process pytester run: pytester restores sys.modules afterwards, and a second import of
# triton's native extension in one process aborts.
import triton.compiler  # noqa: F401
import triton.language as tl

from harness import cast_probe
from harness.compile import errors
from harness.compile.matrix import compile_matrix

HERE = Path(__file__).resolve().parent
GUARDED = (HERE / "refusals" / "guarded.py").read_text()

pytestmark = [pytest.mark.interp_only, pytest.mark.filterwarnings("ignore::pytest.PytestConfigWarning")]

_TESTS = """
import torch
import triton.language as tl
import guarded as g

def test_downcast_fp32():
    x = torch.ones(8)
    y = torch.empty(8, dtype=torch.uint8)
    g.mx_downcast[(1,)](x, y, 8, OUT={out}, BLOCK=8)

def test_scale_fp32():
    x = torch.ones(8)
    y = torch.empty(8)
    g.scale_rows[(1,)](x, y, 2.0, 8, BLOCK=8)
"""


def _run(pytester, monkeypatch, tmp_path, out: str, *args):
    pytester.makepyfile(guarded=GUARDED, test_guarded=_TESTS.format(out=out))
    monkeypatch.setenv("HARNESS_COMPILE_CACHE", str(tmp_path / "cache"))
    return pytester.runpytest("-p", "no:hypothesispytest", "-p", "no:cacheprovider", "--harness-lane=interp",
                              "--harness-compile-launches", "--harness-targets=sm80", *args)


def _row(result, kernel: str) -> list[str]:
    line = next(ln for ln in result.outlines if re.match(rf"\S*\.{kernel}\s", ln))
    return re.split(r"\s{2,}", line.strip())[1:]


def test_guard_and_type_rule_refusals_of_variants_are_not_applicable(pytester, monkeypatch, tmp_path):
    result = _run(pytester, monkeypatch, tmp_path, "tl.float8e5")
    result.assert_outcomes(passed=2)
    # OUT=fp8e4b15 fails the kernel's static_assert (on sm80: Triton 3.6 takes e4b15 for e4nv on sm90), OUT=fp8e4nv
    # is refused below sm89 as the arch model predicts; x fp16/bf16 fails div_rn's fp32-only rule
    assert _row(result, "mx_downcast") == ["ok* +n/a"]
    assert _row(result, "scale_rows") == ["ok +n/a"]
    result.stdout.fnmatch_lines(["*+n/a: some made-up variants (widened dtypes, flipped flags) fail in the kernel's "
                                 "own guard (tl.static_assert) or an op's type rules*never a failure*"])


def test_the_launch_as_run_failing_a_rule_is_still_a_finding(monkeypatch):
    """Only made-up variants are "not applicable": the launch a test made, refused by a type rule, is a bug."""
    from harness.compile import disk_cache as dc
    from harness.compile import findings as fd
    from harness.compile import launches as lc

    def outcome(launch, target, directory=None, budget=None):
        if launch.sig["x"] == "*fp32":
            return dc.Outcome(True)
        return dc.Outcome(False, "type-rule", "at k.py:9:4 `tl.math.div_rn(x, s)`: ValueError: Expected dtype "
                                              "['fp32'] but got fp16")

    monkeypatch.setattr(fd, "launch_outcome", outcome)
    rep = fd.Report()
    assert fd.check(lc.Launch("m.k", __file__, (("x", "*fp32"),), ()), ["sm90"], report=rep,
                    declarations=lc.Declarations()) == []
    assert rep.count_cells()[("m.k", "sm90")] == {"ok": 1, "expected": 0, "failed": 0, "na": 2}
    run = fd.check(lc.Launch("m.k", __file__, (("x", "*fp16"),), ()), ["sm90"], declarations=lc.Declarations())
    assert [(f.variant, f.kind) for f in run] == [("", "type-rule")]


def _kind(fn, sig, consts=None, target="sm80"):
    res = compile_matrix(fn, signature=sig, constexprs=consts or {}, targets=[target])[target]
    assert isinstance(res, BaseException)
    return errors.error_kind(res)


def test_error_kinds_tell_a_rule_from_a_missing_lowering():
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("_harness_guarded", HERE / "refusals" / "guarded.py")
    g = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("_harness_guarded", g)
    spec.loader.exec_module(g)
    assert _kind(g.mx_downcast, {"x_ptr": "*fp32", "y_ptr": "*u8", "n": "i32"},
                 {"OUT": tl.float8e4b15, "BLOCK": 8}) == "guard"
    assert _kind(g.scale_rows, {"x_ptr": "*fp16", "y_ptr": "*fp16", "s": "fp32", "n": "i32"},
                 {"BLOCK": 8}) == "type-rule"
    assert _kind(g.mix_dot, {"a_ptr": "*fp16", "b_ptr": "*bf16", "c_ptr": "*fp32"}) == "type-rule"
    # bf16 -> e4b15 has no lowering (triton/language/extra/cuda): a finding, not a rule
    assert _kind(cast_probe.fp8_cast, {"x_ptr": "*bf16", "y_ptr": "*u8", "n": "i32"},
                 {"DST": tl.float8e4b15, "VIA_FP32": False, "BLOCK": 8}) == "refused"
    e4nv_on_sm80 = _kind(g.mx_downcast, {"x_ptr": "*fp32", "y_ptr": "*u8", "n": "i32"},
                         {"OUT": tl.float8e4nv, "BLOCK": 8})
    assert e4nv_on_sm80 not in errors.NOT_APPLICABLE  # a target's refusal is the arch model's to predict


# --- what a target lacks, and targets below the project's own -------------------------------------------------

_MIXED = """
import torch
import triton
import triton.language as tl

@triton.jit
def relu_mul(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0) * tl.load(y_ptr + offs, mask=mask),
             mask=mask)

def test_relu_mul_bf16():
    x = torch.ones(8, dtype=torch.bfloat16)
    out = torch.empty_like(x)
    relu_mul[(1,)](x, x, out, 8, BLOCK=8)
"""


def test_bf16_instructions_below_sm80_are_expected(pytester, monkeypatch, tmp_path):
    """One operand widened to fp16 makes Triton 3.9 emit bf16 instructions ptxas refuses for sm75: a target
    without bf16 (the arch model's), not a finding. Only a variant compiled through ptxas meets it (depth full; the
    default compiles variants through the frontend, which takes them)."""
    pytester.makepyfile(test_mixed=_MIXED)
    monkeypatch.setenv("HARNESS_COMPILE_CACHE", str(tmp_path / "cache"))
    result = pytester.runpytest("-p", "no:hypothesispytest", "-p", "no:cacheprovider", "--harness-lane=interp",
                                "--harness-compile-launches", "--harness-targets=sm75,sm80",
                                "--harness-compile-depth=full")
    result.assert_outcomes(passed=1)
    from harness.versions import triton_at_least

    # Triton 3.6 still compiled these for sm75 (harness.arch.supports_bf16_arithmetic)
    assert _row(result, "relu_mul") == ["ok*" if triton_at_least(3, 7) else "ok", "ok"]


def test_failures_below_the_projects_lowest_target_are_reported_not_failed(monkeypatch):
    from harness.compile import disk_cache as dc
    from harness.compile import findings as fd
    from harness.compile import launches as lc

    def outcome(launch, target, directory=None, budget=None):
        if target == "sm75":
            return dc.Outcome(False, "ptxas", "ptxas line 9: Feature 'cp.async' requires .target sm_80 or higher")
        return dc.Outcome(True)

    monkeypatch.setattr(fd, "launch_outcome", outcome)
    launch = lc.Launch("m.k", __file__, (("x", "*fp32"),), ())
    assert len(fd.check(launch, ["sm75", "sm80"], widen=False, declarations=lc.Declarations())) == 1
    decl = lc.Declarations()
    decl.set_min_target("sm80")
    rep = fd.Report()
    assert fd.check(launch, ["sm75", "sm80"], widen=False, declarations=decl, report=rep) == []
    assert rep.count_cells()[("m.k", "sm75")]["expected"] == 1
    assert decl.below_min == {("m.k", "sm75"): "ptxas line 9: Feature 'cp.async' requires .target sm_80 or higher"}
    with pytest.raises(ValueError, match="'gfx942': expected a CUDA target"):
        decl.set_min_target("gfx942")


def test_a_bad_min_target_is_a_usage_error(pytester):
    pytester.makeini("[pytest]\nharness_compile_launches = true\nharness_min_target = sm8x\n")
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = pytester.runpytest("-p", "no:hypothesispytest", "-p", "no:cacheprovider", "--harness-lane=interp")
    result.stderr.fnmatch_lines(["*ini harness_min_target=*sm8x*not understood*"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR


_STORE = """
import torch
from memo_store import store_memoized

def test_store_fp16():
    key = (torch.arange(-16, 16, dtype=torch.float32) / 16).to(torch.float16)
    assert store_memoized(key, fixed=True).shape == (32,)
"""


@pytest.mark.lane_independent  # an interpreter-lane session in a child: no device
def test_no_nanobind_leak_lines_at_exit(pytester, monkeypatch, tmp_path):
    """A run whose compiles were refused (e4nv on sm80) kept Triton's IR objects alive in the compile memo until
    exit, and nanobind printed "nanobind: leaked N instances!" and a line per object."""
    pytester.makepyfile(memo_store=(HERE / "hostdispatch" / "memo_store.py").read_text(), test_store=_STORE)
    monkeypatch.setenv("HARNESS_COMPILE_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--harness-lane=interp",
                                           "--harness-compile-launches", "--harness-targets=sm80,sm90")
    result.assert_outcomes(passed=1)
    assert _row(result, "store_keys_fixed") == ["expected", "ok"]
    out = result.stdout.str() + result.stderr.str()
    assert "leaked" not in out, out[-2000:]
