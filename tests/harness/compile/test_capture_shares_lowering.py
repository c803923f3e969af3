"""Launch capture takes its sm90 outcome of a launch from the lowering shim's compile of the same launch (issue
40: serial cold capture cost 3.5x a warm plain run, 4.2 s CPU of it the lowering shim's own sm90 compiles of the
launches capture compiles for sm90 again). That compile is specialized as the GPU's JIT specializes the launch
(arguments divisible by 16), which is the launch as a GPU compiles it; a user's compile keeps its exact key."""

from __future__ import annotations

import pytest

# Imported before any in-process pytester run: pytester restores sys.modules afterwards, and a second import of
# triton's native extension in one process aborts.
import triton
import triton.compiler  # noqa: F401
import triton.language as tl

from harness.compile.cache import compile_memoized, specialized, stats
from harness.compile.signature import prepare
from harness.compile.targets import parse_target

pytestmark = [pytest.mark.lane_independent, pytest.mark.filterwarnings("ignore::pytest.PytestConfigWarning")]


@triton.jit
def _scale(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + o, tl.load(x_ptr + o, mask=o < n) * 3, mask=o < n)


def test_only_a_specialized_compile_of_the_same_launch_and_options_is_taken():
    jit, sig, consts = prepare(_scale, {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32"}, {"BLOCK": 1024})
    sm90, sm80 = parse_target("sm90"), parse_target("sm80")
    assert specialized(jit, sig, consts, sm90) is None
    plain = compile_memoized(jit, sig, consts, sm90)
    assert specialized(jit, sig, consts, sm90) is None  # an unspecialized compile is capture's own to make
    spec = compile_memoized(jit, sig, consts, sm90, {"num_warps": 4}, frozenset({"x_ptr", "y_ptr", "n"}))
    assert spec is not plain and "ld.global.v4" in spec.ptx and "ld.global.v4" not in plain.ptx
    assert specialized(jit, sig, consts, sm90) is spec  # num_warps=4 is Triton's default: the same compile
    assert specialized(jit, sig, consts, sm90, {"num_warps": 8}) is None
    assert specialized(jit, sig, consts, sm80) is None
    assert specialized(jit, sig, {"BLOCK": 64}, sm90) is None


_KERNEL = """
import triton
import triton.language as tl


@triton.jit
def scale(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + o, tl.load(x_ptr + o, mask=o < n) * 3, mask=o < n)
"""

_TEST = """
import torch
from kern import scale


def test_scale():
    x = torch.arange(200, dtype=torch.float32)
    y = torch.empty_like(x)
    scale[(2,)](x, y, 200, BLOCK=128{options})
    assert torch.equal(y, x * 3)
"""


@pytest.mark.parametrize("options", ["", ", num_stages=2", ", num_warps=2"])
def test_capture_compiles_for_sm90_only_what_the_lowering_shim_did_not(pytester, monkeypatch, tmp_path, options):
    """The lowering shim compiles with the launch's options, as the GPU's JIT does (an autotune config's
    ``num_stages`` included), so capture's launch as run is the same compile."""
    monkeypatch.setenv("HARNESS_COMPILE_CACHE", str(tmp_path / "cache"))
    pytester.makepyfile(kern=_KERNEL, test_kern=_TEST.replace("{options}", options))
    before = stats()["compiles"]  # the counters are the process's: this run's are the difference
    result = pytester.runpytest("-p", "no:hypothesispytest", "-p", "no:cacheprovider", "-p", "no:xdist",
                                "--harness-lane=interp", "--harness-compile-launches", "--harness-targets=sm80,sm90",
                                "--harness-no-widen")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["kern.scale  ok        ok",
                                 "2 distinct compiles: 2 compiled, 0 read from the disk cache*"])
    # the lowering shim's sm90 compile (specialized) and capture's sm80 one; capture's sm90 outcome is the former's
    assert stats()["compiles"] - before == 2
