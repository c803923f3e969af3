"""Device calls (a kernel calling a ``@triton.jit`` helper, ``tl.sum`` included) inside an interpreted launch.

The interpreter patches the language for each device call from the callee's module globals; the plugin keeps that
patch until the launch ends and skips repeating it for later calls from the same module
(:func:`harness.interp.jit.fix_interpreter_leak`). A helper from a module that sees the language through other
names than the kernel's must still be patched for its own, and nothing may stay patched after the launch."""

from __future__ import annotations

import importlib
import textwrap

import pytest
import torch

from harness.interp.jit import language_patched

# The helpers' module uses libdevice, the kernel's does not: the interpreter maps a module's libdevice names when
# it patches for that module's globals, so the helpers work only if their call patches for their own.
_KERNEL_MODULE = """
import triton
import triton.language as tl
from dc_helpers import twice_abs, plus_half_rint

@triton.jit
def kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + o)
    y = twice_abs(x)
    y = plus_half_rint(y)
    y = twice_abs(y)
    tl.store(y_ptr + o, y)
"""

_HELPER_MODULE = """
import triton
import triton.language as tl
from triton.language.extra import libdevice

@triton.jit
def twice_abs(x):
    return tl.where(x < 0, -x, x) * 2

@triton.jit
def plus_half_rint(x):
    return libdevice.rint(x + 0.5)

@triton.jit
def broken(x):
    i = x.to(tl.int32)
    return tl.umulhi(i, i).to(tl.float32)
"""

_RAISING_MODULE = """
import triton
import triton.language as tl
from dc_helpers import twice_abs, broken

@triton.jit
def kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    x = twice_abs(tl.load(x_ptr + o))
    tl.store(y_ptr + o, broken(x) + tl.sum(x, axis=0))
"""


@pytest.fixture
def modules(tmp_path, monkeypatch):
    (tmp_path / "dc_helpers.py").write_text(textwrap.dedent(_HELPER_MODULE))
    (tmp_path / "dc_kernel.py").write_text(textwrap.dedent(_KERNEL_MODULE))
    (tmp_path / "dc_raising.py").write_text(textwrap.dedent(_RAISING_MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("dc_helpers", "dc_kernel", "dc_raising"):
        monkeypatch.delitem(__import__("sys").modules, name, raising=False)
    return importlib.import_module("dc_kernel"), importlib.import_module("dc_raising")


@pytest.mark.interp_only
def test_a_helper_of_a_module_using_libdevice_is_patched_for_its_own_globals(modules):
    kernel_mod, _ = modules
    x = torch.tensor([-3.0, -0.5, 0.0, 0.25, 1.0, -2.0, 7.0, -8.0])
    y = torch.empty_like(x)
    kernel_mod.kernel[(1,)](x, y, BLOCK=8)
    assert torch.equal(y, torch.round(x.abs() * 2 + 0.5).abs() * 2)
    assert not language_patched()


@pytest.mark.interp_only
def test_a_launch_that_raises_in_a_device_call_leaves_the_language_clean(modules, monkeypatch):
    _, raising = modules
    import triton.language as tl
    from triton.runtime import interpreter

    def refuse(*args, **kwargs):
        raise RuntimeError("umulhi refused here")

    # an error inside the helper's call, on the interpreter only (the kernel compiles, as capture checks)
    monkeypatch.setattr(interpreter.interpreter_builder, "create_umulhi", refuse)

    where, tl_sum_core = tl.where, tl.core.where
    x = torch.ones(8)
    with pytest.raises(Exception, match="umulhi refused here"):
        raising.kernel[(1,)](x, torch.empty_like(x), BLOCK=8)
    assert not language_patched()
    assert tl.where is where and tl.core.where is tl_sum_core
    # and the next launch patches afresh: the helper module's skipped-call record went with the failed launch
    kernel_mod, _ = modules
    y = torch.empty_like(x)
    kernel_mod.kernel[(1,)](x, y, BLOCK=8)
    assert torch.equal(y, torch.round(x.abs() * 2 + 0.5).abs() * 2)
