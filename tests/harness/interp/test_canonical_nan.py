"""A NaN out of fp arithmetic on the interpreter is the GPU's canonical word (``harness.interp.arith.CANONICAL_NAN``):
0x7fffffff in fp32, 0x7fff in fp16 and bf16, whatever payload or sign the NaN operand had (measured on an H100 by
``python -m harness fuzz --gpu``, docs/fuzz.md). numpy, and so the interpreter without the shim, keeps the
operand's payload and sign."""

from __future__ import annotations

import pytest
import torch

from harness.interp import arith

pytestmark = pytest.mark.interp_only

triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

# `/` is not here: fp32 division (fp16 and bf16 divide in fp32) is harness.interp.approx_math's div.full model,
# whose NaN words were not measured
OPS = ("add", "sub", "mul", "fma")
WORD = {torch.float32: 0x7FFFFFFF, torch.float16: 0x7FFF, torch.bfloat16: 0x7FFF}
#: NaNs with a payload and a sign that are not the canonical word's
ODD_NAN = {torch.float32: 0xFFC00001, torch.float16: 0xFE01, torch.bfloat16: 0xFFC1}


@triton.jit
def _ops(a_ptr, b_ptr, o_ptr, BLOCK: tl.constexpr):
    off = tl.arange(0, BLOCK)
    a = tl.load(a_ptr + off)
    b = tl.load(b_ptr + off)
    tl.store(o_ptr + 0 * BLOCK + off, a + b)
    tl.store(o_ptr + 1 * BLOCK + off, a - b)
    tl.store(o_ptr + 2 * BLOCK + off, a * b)
    tl.store(o_ptr + 3 * BLOCK + off, tl.fma(a, b, b))


def _odd_nans(dt: torch.dtype) -> torch.Tensor:
    bits = torch.full((16,), ODD_NAN[dt], dtype=torch.int64)
    return (bits.to(torch.int32) if dt == torch.float32 else (bits - 0x10000).to(torch.int16)).view(dt)


def _run(dt: torch.dtype) -> torch.Tensor:
    a, b = _odd_nans(dt), torch.full((16,), 1.5, dtype=dt)
    out = torch.zeros(len(OPS) * 16, dtype=dt)
    _ops[(1,)](a, b, out, BLOCK=16)
    bits = out.view(torch.int32 if dt == torch.float32 else torch.int16).to(torch.int64)
    return (bits & (0xFFFFFFFF if dt == torch.float32 else 0xFFFF)).reshape(len(OPS), 16)


@pytest.mark.parametrize("dt", [torch.float32, torch.float16, torch.bfloat16], ids=["fp32", "fp16", "bf16"])
def test_arithmetic_writes_the_canonical_nan(dt):
    got = _run(dt)
    for op, row in zip(OPS, got, strict=True):
        assert row.tolist() == [WORD[dt]] * 16, op


@pytest.mark.parametrize("dt", [torch.float32, torch.float16], ids=["fp32", "fp16"])
def test_without_the_shim_the_operands_payload_survives(dt):
    """What the shim is for: lifted, the interpreter passes the operand's NaN through (here for + at least)."""
    with arith.suspended():
        got = _run(dt)
    assert got[0].tolist() != [WORD[dt]] * 16
