"""--harness-coverage: the kernels a run launched, by launched types and arch, and the jit entry points of a package
that no test launched (device helpers and kernels justified in place are not listed)."""

from __future__ import annotations

import json

import pytest

from harness.coverage import kernels_of

# the inner runs launch on CPU tensors whatever the lane: nothing here touches a device
pytestmark = pytest.mark.lane_independent

PKG = '''
import triton
import triton.language as tl


@triton.jit
def _helper(x):
    return x * 2


@triton.jit
def double_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    tl.store(x_ptr + offs, _helper(tl.load(x_ptr + offs, mask=m)), mask=m)


@triton.jit
def orphan_kernel(x_ptr):
    tl.store(x_ptr, 1.0)


# harness-coverage: needs a GPU-only feature
@triton.jit
def gpu_only_kernel(x_ptr):
    tl.store(x_ptr, 2.0)
'''

TEST = '''
import torch
from mypkg.k import double_kernel

def test_double():
    x = torch.ones(8, dtype=torch.bfloat16)
    double_kernel[(1,)](x, 8, BLOCK=8)
    assert x.float().tolist() == [2.0] * 8
'''


def test_kernels_of_reads_entry_points_helpers_and_reasons(pytester):
    pytester.mkpydir("mypkg").joinpath("k.py").write_text(PKG)
    pytester.syspathinsert()
    got = {k.name: k.reason for k in kernels_of("mypkg")}
    assert got == {"mypkg.k.double_kernel": None, "mypkg.k.orphan_kernel": None,
                   "mypkg.k.gpu_only_kernel": "needs a GPU-only feature"}


def test_map_lists_what_ran_and_what_did_not(pytester):
    pytester.mkpydir("mypkg").joinpath("k.py").write_text(PKG)
    pytester.makepyfile(test_k=TEST)
    pytester.makeini("[pytest]\npythonpath = .\n")
    args = ("--harness-arch=interp", "--harness-compile-launches", "--harness-no-widen", "--harness-coverage=mypkg",
            "--harness-report=r.json", "--harness-coverage-fail")
    r = pytester.runpytest_subprocess(*args)
    r.assert_outcomes(passed=1)
    assert r.ret == 1  # the unjustified orphan fails the session
    r.stdout.fnmatch_lines(["*coverage map*", "mypkg.k.double_kernel*bf16*interp*1*1",
                            "*kernels of mypkg that no test launched: 1 (and 1 justified in place)",
                            "  mypkg.k.orphan_kernel (*k.py:*)",
                            "  mypkg.k.gpu_only_kernel (*): justified: needs a GPU-only feature"])
    cov = json.loads((pytester.path / "r.json").read_text())["coverage"]
    assert [(c["kernel"], c["types"], c["launches"]) for c in cov["cells"]] == [("mypkg.k.double_kernel", "bf16", 1)]
    assert [u.split(" ")[0] for u in cov["unlaunched"]] == ["mypkg.k.orphan_kernel"]
    r = pytester.runpytest_subprocess("--harness-arch=interp", "--harness-coverage=no_such_pkg")
    r.stderr.fnmatch_lines(["*package 'no_such_pkg'*"])


def test_map_sees_launches_without_compile_capture(pytester):
    """Compile capture off (an adopter's plain run): the launched kernel is in the map, not listed as unlaunched."""
    pytester.mkpydir("mypkg").joinpath("k.py").write_text(PKG)
    pytester.makepyfile(test_k=TEST)
    pytester.makeini("[pytest]\npythonpath = .\n")
    r = pytester.runpytest_subprocess("--harness-arch=interp", "--harness-coverage=mypkg")
    r.assert_outcomes(passed=1)
    r.stdout.fnmatch_lines(["mypkg.k.double_kernel*bf16*interp*1*1",
                            "*kernels of mypkg that no test launched: 1 (and 1 justified in place)",
                            "  mypkg.k.orphan_kernel (*k.py:*)"])
