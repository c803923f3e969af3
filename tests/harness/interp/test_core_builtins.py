"""A ``@triton.jit`` helper may call ``tl.core``'s builtins with keyword arguments (triton_kernels' MXFP4
downcast: ``tl.core.sub(E8_BIAS, e + 1, sanitize_overflow=False)``). The raw interpreter runs it only while an
earlier device call has left ``tl.core`` patched (the leak :func:`harness.interp.jit.fix_interpreter_leak`
undoes); the plugin's interpreter lane must run it in any order (issue 40)."""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl


@triton.jit
def _denormal_shift(x):
    # as triton_kernels' _downcast_to_mxfp computes an e2m1 subnormal's mantissa shift
    e = (x.to(tl.uint32, bitcast=True) >> 23) & 0xFF
    E8_BIAS: tl.constexpr = 127
    return tl.core.sub(E8_BIAS, e + 1, sanitize_overflow=False)


@triton.jit
def _shift_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    tl.store(y_ptr + o, _denormal_shift(tl.load(x_ptr + o)).to(tl.int32))


@pytest.mark.interp_only
def test_core_builtin_with_keyword_arguments_in_a_helper():
    x = torch.tensor([0.25, 0.5, 1.0, 3.0, 1e-3, 6.0, 0.75, 2.0])
    y = torch.empty(8, dtype=torch.int32)
    _shift_kernel[(1,)](x, y, BLOCK=8)
    e = (x.view(torch.int32) >> 23) & 0xFF
    assert torch.equal(y, (127 - (e + 1)).to(torch.int32))


_AFTER_A_LAUNCH = """
import torch, triton, triton.language as tl
from harness.interp.patch import Patch
from harness.interp import shims

@triton.jit
def guarded(x_ptr, OUT: tl.constexpr):
    tl.static_assert(OUT == tl.float16, "fp16 only")
    tl.store(x_ptr, tl.load(x_ptr).to(OUT))

with Patch.context() as p:
    shims.install(p, "sm90")
    guarded[(1,)](torch.ones(1, dtype=torch.float16), OUT=tl.float16)  # the first launch of the process
    from harness.compile.matrix import compile_matrix
    got = compile_matrix(guarded, signature={"x_ptr": "*fp16"}, constexprs={"OUT": tl.bfloat16}, targets=["sm80"])
    print(type(got["sm80"]).__name__)
"""


@pytest.mark.interp_only
def test_static_assert_still_holds_in_compiles_after_a_launch(tmp_path):
    """Patching tl.core's builtins during a launch must not reach Triton's code generator, which keys
    tl.core.static_assert by identity when first imported (that import may happen inside the first launch)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {**os.environ, "TRITON_INTERPRET": "1", "TRITON_CACHE_DIR": str(tmp_path / "triton")}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[3]), env.get("PYTHONPATH", "")])
    script = tmp_path / "after_a_launch.py"  # @triton.jit needs its source in a file
    script.write_text(_AFTER_A_LAUNCH)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split()[-1] == "CompileTimeAssertionFailure"
