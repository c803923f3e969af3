"""What the arch model knows about ``tl.dot`` and ``tl.dot_scaled`` below the targets Triton lowers them for
(issue 40: capture on test_core's dot groups failed ``test_dot`` / ``test_dot3d`` int8 on sm75 and, on Triton 3.9,
one ``test_scaled_dot`` on sm75). Such a launch is ``expected`` there, and only such a failure is: the facts are
checked against the installed compiler, and the rule against failures it must not excuse."""

from __future__ import annotations

import pytest

# Imported before any in-process pytester run: pytester restores sys.modules afterwards, and a second import of
# triton's native extension in one process aborts.
import triton
import triton.compiler  # noqa: F401
import triton.language as tl

from harness.arch import supports_int8_dot, supports_scaled_dot_emulation
from harness.compile.disk_cache import Outcome
from harness.compile.findings import expected_reason
from harness.compile.launches import Declarations, Launch
from harness.compile.matrix import compile_matrix
from tests.harness.compile.reported import run_reported

pytestmark = [pytest.mark.lane_independent, pytest.mark.filterwarnings("ignore::pytest.PytestConfigWarning")]


@triton.jit
def _idot(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    m, n, k = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + m[:, None] * K + k[None, :])
    b = tl.load(b_ptr + k[:, None] * N + n[None, :])
    tl.store(c_ptr + m[:, None] * N + n[None, :], tl.dot(a, b))


@triton.jit
def _copy(a_ptr, c_ptr, N: tl.constexpr):
    n = tl.arange(0, N)
    tl.store(c_ptr + n, tl.load(a_ptr + n).to(tl.int32))


@triton.jit
def _scaled(a_ptr, s_ptr, b_ptr, c_ptr):
    m, k = tl.arange(0, 32), tl.arange(0, 32)
    a = tl.load(a_ptr + m[:, None] * 16 + tl.arange(0, 16)[None, :])
    s = tl.load(s_ptr + m)
    b = tl.load(b_ptr + k[:, None] * 32 + m[None, :])
    tl.store(c_ptr + m[:, None] * 32 + m[None, :], tl.dot_scaled(a, s[:, None], "e2m1", b, None, "fp16"))


_INT8 = {"a_ptr": "*i8", "b_ptr": "*i8", "c_ptr": "*i32"}


def _launch(fn, sig, consts=()) -> Launch:
    return Launch(f"{__name__}.{fn.fn.__name__}", __file__, tuple(sig.items()), tuple(consts), (), fn)


def test_the_int8_dot_fact_agrees_with_the_installed_compiler():
    got = compile_matrix(_idot, signature=_INT8, constexprs={"M": 16, "N": 16, "K": 32}, targets=["sm75", "sm80"])
    assert {t: not isinstance(r, BaseException) for t, r in got.items()} == {
        t: supports_int8_dot(t)[0] for t in ("sm75", "sm80")} == {"sm75": False, "sm80": True}


def test_an_int8_dot_refused_below_sm80_is_expected_and_nothing_else_is():
    dot = _launch(_idot, _INT8, (("M", 16), ("N", 16), ("K", 32)))
    failed = Outcome(False, "refused", "RuntimeError: PassManager::run failed")
    none = Declarations()
    assert "int8 tl.dot needs sm80+" in expected_reason(dot, "sm75", failed, none)
    assert expected_reason(dot, "sm80", failed, none) is None  # sm80 lowers it: a failure there is a finding
    fp16 = _launch(_idot, {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32"}, dot.constexprs)
    assert expected_reason(fp16, "sm75", failed, none) is None  # not an int8 dot
    no_dot = _launch(_copy, {"a_ptr": "*i8", "c_ptr": "*i32"}, (("N", 16),))
    assert expected_reason(no_dot, "sm75", failed, none) is None  # no tl.dot
    other = Outcome(False, "refused", "at k.py:5:4 `tl.dot(a, b)`: something else")
    assert expected_reason(dot, "sm75", other, none) is None


def test_a_scaled_dot_needing_sm89_converts_below_sm89_is_expected_and_nothing_else_is():
    sig = {"a_ptr": "*u8", "s_ptr": "*u8", "b_ptr": "*fp16", "c_ptr": "*fp16"}
    scaled = _launch(_scaled, sig)
    cvt = Outcome(False, "ptxas", "ptxas line 841: Feature 'cvt with .e4m3x2/.e5m2x2' requires .target sm_89 or "
                                  "higher (+7 more)")
    none = Declarations()
    assert "emulation on sm75" in expected_reason(scaled, "sm75", cvt, none)
    assert supports_scaled_dot_emulation("sm89") == (True, "")
    plain = _launch(_copy, {"a_ptr": "*i8", "c_ptr": "*i32"}, (("N", 16),))
    assert expected_reason(plain, "sm75", cvt, none) is None  # a kernel with no tl.dot_scaled: a finding
    other = Outcome(False, "ptxas", "ptxas line 12: Feature '.bf16' requires .target sm_90")
    assert expected_reason(scaled, "sm75", other, none) is None


_KERNEL = """
import triton
import triton.language as tl


@triton.jit
def idot(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    m, n, k = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + m[:, None] * K + k[None, :])
    b = tl.load(b_ptr + k[:, None] * N + n[None, :])
    tl.store(c_ptr + m[:, None] * N + n[None, :], tl.dot(a, b))
"""

_TEST = """
import torch
from kern import idot


def test_idot():
    a = torch.ones(16, 32, dtype=torch.int8)
    b = torch.ones(32, 16, dtype=torch.int8)
    c = torch.empty(16, 16, dtype=torch.int32)
    idot[(1,)](a, b, c, 16, 16, 32)
    assert (c == 32).all()
"""


def test_capture_of_an_int8_dot_passes_with_sm75_expected(pytester, monkeypatch, tmp_path):
    monkeypatch.setenv("HARNESS_COMPILE_CACHE", str(tmp_path / "cache"))
    pytester.makepyfile(kern=_KERNEL, test_kern=_TEST)
    result, rep = run_reported(pytester, tmp_path, "--harness-compile-launches", "--harness-targets=sm75,sm80")
    result.assert_outcomes(passed=1)
    cells = {c["target"]: c for c in rep["cells"]}
    assert (cells["sm75"]["expected"], cells["sm75"]["failed"], cells["sm80"]["ok"]) == (1, 0, 1)
