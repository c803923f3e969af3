"""A launch the interpreter refuses is not captured (issue 40: with exec-built kernels compiled, test_core's
``test_bitwise_op`` failed under capture: it asserts that ``fp16 | int8`` raises, and capture compiled that launch
and reported the refusal the test expects as a finding)."""

from __future__ import annotations

import pytest

# Imported before any in-process pytester run: pytester restores sys.modules afterwards, and a second import of
# triton's native extension in one process aborts.
import triton  # noqa: F401
import triton.compiler  # noqa: F401

from tests.harness.compile.reported import run_reported

pytestmark = [pytest.mark.lane_independent, pytest.mark.filterwarnings("ignore::pytest.PytestConfigWarning")]

_KERNEL = """
import triton
import triton.language as tl


@triton.jit
def bit_or(x_ptr, y_ptr, z_ptr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    tl.store(z_ptr + o, tl.load(x_ptr + o) | tl.load(y_ptr + o))
"""

_TEST = """
import pytest
import torch
import triton
from kern import bit_or


def test_float_or_is_refused():
    x = torch.ones(16, dtype=torch.float16)
    y = torch.ones(16, dtype=torch.int8)
    with pytest.raises(triton.TritonError, match="invalid operands of type"):
        bit_or[(1,)](x, y, torch.empty(16, dtype=torch.float64), BLOCK=16)


def test_int_or_is_captured():
    x = torch.ones(16, dtype=torch.int8)
    z = torch.empty(16, dtype=torch.int8)
    bit_or[(1,)](x, x, z, BLOCK=16)
    assert (z == 1).all()
"""


def test_a_launch_the_interpreter_refuses_is_not_compiled(pytester, monkeypatch, tmp_path):
    monkeypatch.setenv("HARNESS_COMPILE_CACHE", str(tmp_path / "cache"))
    pytester.makepyfile(kern=_KERNEL, test_kern=_TEST)
    result, rep = run_reported(pytester, tmp_path, "--harness-compile-launches", "--harness-targets=sm80")
    result.assert_outcomes(passed=2)
    assert rep["captured_launches"] == {"test_kern.py::test_float_or_is_refused": 0,
                                        "test_kern.py::test_int_or_is_captured": 1}
    assert rep["findings"] == []
