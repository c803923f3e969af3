"""Kernel arguments on the interpreter as the compiled kernel receives them (:mod:`harness.interp.jit`).

- A Python ``float`` argument is an fp32 scalar (Triton types it ``fp32``): Liger-Kernel's norms call
  ``eps.to(tl.float32)``, and ``x_bf16 * scale`` computes in fp32. The raw interpreter passes the Python float:
  the first fails, the second rounds to bf16.
- A ``tl.dtype`` handed to a ``@jit`` helper is a constexpr whose ``.value`` is the dtype: FlagGems'
  ``get_dtype_min(dtype)`` reads ``dtype.value``; the raw interpreter passes the dtype, which has no ``value``.

Each expectation is the compiler's, read from its output here (TTIR), not the interpreter's."""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

from harness.interp.jit import DTYPE_VALUE_TAG, FLOAT_TAG
from harness.interp.patch import lift

pytestmark = pytest.mark.interp_only


@triton.jit
def _scale_bf16(x_ptr, y_ptr, s, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + o)  # bf16
    tl.store(y_ptr + o, x * s)  # y is fp32: the product's type decides the rounding


@triton.jit
def _eps_to(x_ptr, y_ptr, eps, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + o)
    tl.store(y_ptr + o, x + eps.to(tl.float32))


def test_the_compiler_types_a_float_argument_fp32_and_promotes_bf16_times_it():
    from harness.compile.matrix import compile_kernel

    c = compile_kernel(_scale_bf16, signature={"x_ptr": "*bf16", "y_ptr": "*fp32", "s": "fp32"},
                       constexprs={"BLOCK": 64}, target="sm90")
    ttir = c.asm["ttir"]
    assert "arith.extf" in ttir and "arith.mulf" in ttir and ": tensor<64xf32>" in ttir
    assert "tensor<64xbf16>" in ttir and "arith.truncf" not in ttir  # no bf16 product anywhere


def test_a_float_argument_is_an_fp32_scalar():
    x = (torch.randn(64, generator=torch.Generator().manual_seed(3)) * 3).to(torch.bfloat16)
    y = torch.empty(64)
    s = 0.1  # not representable: the fp32 product and the bf16 product differ for most x
    _scale_bf16[(1,)](x, y, s, BLOCK=64)
    want = x.float() * torch.tensor(s, dtype=torch.float32)
    assert torch.equal(y, want)
    bf16_product = (x * torch.tensor(s, dtype=torch.bfloat16)).float()
    assert not torch.equal(want, bf16_product)  # the inputs tell the two typings apart
    with lift(FLOAT_TAG):  # the raw interpreter: the Python float meets bf16 and the product stays bf16
        _scale_bf16[(1,)](x, y, s, BLOCK=64)
    assert not torch.equal(y, want)


def test_a_float_argument_has_the_tensor_methods_and_overflows_as_fp32():
    x = torch.arange(8, dtype=torch.float32)
    y = torch.empty(8)
    _eps_to[(1,)](x, y, 1e-6, BLOCK=8)
    assert torch.equal(y, x + torch.tensor(1e-6, dtype=torch.float32))
    _eps_to[(1,)](x, y, 1e300, BLOCK=8)  # packed as a 32-bit float by the launcher: inf
    assert torch.equal(y, torch.full((8,), float("inf")))
    with lift(FLOAT_TAG), pytest.raises(Exception, match="has no attribute .+to"):
        _eps_to[(1,)](x, y, 1e-6, BLOCK=8)


@triton.jit
def _lowest(dtype):
    # as FlagGems' get_dtype_min: the helper receives a constexpr and unwraps it
    dtype_ = dtype.value
    if dtype_.is_floating():
        value: tl.constexpr = float("-inf")
        return value
    else:
        value: tl.constexpr = -(2 ** (dtype_.int_bitwidth - 1))
        return value


@triton.jit
def _masked_max(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    dt = x_ptr.dtype.element_ty
    x = tl.load(x_ptr + o, mask=o < n, other=_lowest(dt))
    tl.store(y_ptr, tl.max(x, axis=0))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32])
def test_a_dtype_handed_to_a_helper_has_value(dtype):
    from harness.compile.matrix import compile_kernel

    sig = {"x_ptr": "*fp32" if dtype == torch.float32 else "*i32", "y_ptr": "*fp32" if dtype == torch.float32
           else "*i32", "n": "i32"}
    compile_kernel(_masked_max, signature=sig, constexprs={"BLOCK": 16}, target="sm90")  # the compiler takes it
    x = torch.tensor([-5, -7, -3, -9, 100, 100], dtype=dtype)
    y = torch.empty(1, dtype=dtype)
    _masked_max[(1,)](x, y, 4, BLOCK=16)
    assert y.item() == -3
    assert not hasattr(tl.float32, "value")  # outside a launch the dtype is untouched
    with lift(DTYPE_VALUE_TAG), pytest.raises(Exception, match="has no attribute .+value"):
        _masked_max[(1,)](x, y, 4, BLOCK=16)
