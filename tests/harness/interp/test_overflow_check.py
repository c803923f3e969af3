"""The integer-overflow check Triton's interpreter computes and discards, skipped
(:mod:`harness.interp.overflow_check`): not computed where its assert cannot fire, computed (and firing) where it
can, the compiler's builder untouched, and nothing patched where Triton's source no longer reads as the shim
relies on."""

from __future__ import annotations

import dataclasses
import functools
import types

import pytest

from harness.interp import overflow_check
from harness.interp.patch import Patch, installed, lift

pytestmark = pytest.mark.interp_only

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")
itp = pytest.importorskip("triton.runtime.interpreter")
TritonSemantic = pytest.importorskip("triton.language.semantic").TritonSemantic

NAME = "binary_op_sanitize_overflow_impl"


@triton.jit
def _int_ops(x_ptr, y_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    y = tl.load(y_ptr + offs)
    tl.store(out_ptr + offs, (x + y) * y - x)


@triton.jit
def _add_one(x_ptr, out_ptr):
    tl.store(out_ptr, tl.load(x_ptr) + 1)


def _spy(p: Patch) -> list[str]:
    """Put a counting stand-in for Triton's check under the shim: the names of the ops it was asked about."""
    calls: list[str] = []
    orig = getattr(TritonSemantic, NAME)

    def spy(self, lhs, rhs, binary_op):
        calls.append(binary_op.__name__)
        return orig(self, lhs, rhs, binary_op)

    spy.__wrapped__ = orig  # reads as Triton's to the shim's guards (signature, source)
    p.setattr(TritonSemantic, NAME, spy, tag="test-spy")
    return calls


def _debug_on(p: Patch) -> None:
    b = itp.interpreter_builder
    p.setattr(b, "options", dataclasses.replace(b.options, debug=True), tag="test-debug")


def _run_int_ops(bound: int = 2**31 - 1, n: int = 64):
    """``(x + y) * y - x`` on int32 in [-bound, bound): the default range wraps (no assert without debug)."""
    g = torch.Generator().manual_seed(3)
    x = torch.randint(-bound, bound, (n,), dtype=torch.int32, generator=g)
    y = torch.randint(-bound, bound, (n,), dtype=torch.int32, generator=g)
    out = torch.empty_like(x)
    _int_ops[(1,)](x, y, out, N=n)
    return out


def test_the_session_installs_it_and_the_check_is_never_computed():
    assert installed(TritonSemantic, NAME, overflow_check.TAG)
    with lift(overflow_check.TAG), Patch.context() as p:
        calls = _spy(p)
        _run_int_ops()
        assert set(calls) == {"add", "mul", "sub"}  # Triton's path, once per op and run of the kernel
        assert calls.count("add") == calls.count("mul") == calls.count("sub")
        calls.clear()
        assert overflow_check.install(p) is True
        _run_int_ops()
        assert calls == []


def test_results_are_the_interpreters_own_wrapping_included():
    mine = _run_int_ops()
    with lift(overflow_check.TAG):
        theirs = _run_int_ops()
    assert torch.equal(mine, theirs)
    assert not torch.equal(mine, torch.zeros_like(mine))


def test_with_debug_on_the_check_runs_and_an_overflow_asserts():
    x = torch.tensor([2**31 - 1], dtype=torch.int32)
    out = torch.empty_like(x)
    with Patch.context() as p:
        _debug_on(p)
        with pytest.raises(BaseException, match="int32 overflow detected for operation add"):
            _add_one[(1,)](x, out)
        _add_one[(1,)](torch.tensor([41], dtype=torch.int32), out)  # no overflow: no assert
        assert out.item() == 42
    _add_one[(1,)](x, out)  # debug off again: the interpreter wraps, as it does without the shim
    assert out.item() == -(2**31)


def test_under_debug_and_for_another_builder_triton_s_check_is_called():
    with lift(overflow_check.TAG), Patch.context() as p:
        calls = _spy(p)
        assert overflow_check.install(p) is True
        _debug_on(p)
        _run_int_ops(bound=1000)
        assert set(calls) == {"add", "mul", "sub"}
        calls.clear()
        compiler_like = types.SimpleNamespace(builder=types.SimpleNamespace(options=itp.InterpreterOptions()))
        shim = getattr(TritonSemantic, NAME)
        with pytest.raises(AttributeError):  # Triton's check, reading the operands' types: it was called
            shim(compiler_like, None, None, TritonSemantic.add)
        assert calls == ["add"]  # not the interpreter's builder: Triton's own, even without debug


def test_install_twice_patches_once_and_refuses_a_triton_that_reads_otherwise():
    assert overflow_check.install(Patch()) is False  # the session's is in place
    theirs = TritonSemantic.device_assert
    with lift(overflow_check.TAG):
        orig = getattr(TritonSemantic, NAME)
        with Patch.context() as p:  # a device_assert that asserts without debug: the check is live, keep it
            p.setattr(TritonSemantic, "device_assert", lambda self, cond, msg, mask: theirs(self, cond, msg, mask),
                      tag="test")
            assert overflow_check.install(p) is False
            assert getattr(TritonSemantic, NAME) is orig
        with Patch.context() as p:  # a check taking other arguments
            p.setattr(TritonSemantic, NAME, lambda self, lhs, rhs: None, tag="test")
            assert overflow_check.install(p) is False
        with Patch.context() as p:  # a check that ends in no device_assert
            p.setattr(TritonSemantic, NAME, lambda self, lhs, rhs, binary_op: None, tag="test")
            assert overflow_check.install(p) is False
        with Patch.context() as p:  # interpreter options whose debug is on by default
            p.setattr(itp, "InterpreterOptions", functools.partial(itp.InterpreterOptions, debug=True), tag="test")
            assert overflow_check.install(p) is False
