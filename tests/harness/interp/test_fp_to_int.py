"""Float-to-integer conversions on the interpreter are the GPU's (``harness.interp.arith.fp_to_int``).

The GPU converts with ``cvt.rzi``: toward zero, saturated to the destination range, NaN to 0 (PTX ISA ``cvt``);
an 8-bit destination is a 16-bit ``cvt.rzi`` whose low byte is stored (Triton 3.6.0 / 3.9.0 PTX for sm90, read
by :func:`test_the_lowering_this_rests_on`). An H100 gave 0 for NaN and INT32_MAX for +inf (``python -m harness
fuzz --gpu``, seed 48266). numpy's ``astype`` gives INT_MIN for NaN and wraps or is undefined out of range, which
is what the interpreter does without the shim. The expected rows are the rule applied by hand.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from harness.interp import arith

pytestmark = pytest.mark.interp_only

triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

NAN, INF = float("nan"), float("inf")
# 2147483520 is the largest fp32 below 2**31; 2**31 itself is one past INT32_MAX
X = [NAN, INF, -INF, 3e9, -3e9, 2.7, -2.7, -0.0, 2147483520.0, 2147483648.0, 300.0, -129.5, 40000.0, -1e-30]
I32_MAX, I32_MIN = 2**31 - 1, -(2**31)
WANT = {
    "i32": [0, I32_MAX, I32_MIN, I32_MAX, I32_MIN, 2, -2, 0, 2147483520, I32_MAX, 300, -129, 40000, 0],
    "i64": [0, 2**63 - 1, -(2**63), 3_000_000_000, -3_000_000_000, 2, -2, 0, 2147483520, 2147483648, 300, -129,
            40000, 0],
    "u32": [0, 2**32 - 1, 0, 3_000_000_000, 0, 2, 0, 0, 2147483520, 2147483648, 300, 0, 40000, 0],
    "i16": [0, 32767, -32768, 32767, -32768, 2, -2, 0, 32767, 32767, 300, -129, 32767, 0],
    # 16-bit saturation, then the low byte: 32767 -> 0xff (-1), -32768 -> 0x00, 300 -> 0x2c, -129 -> 0x7f
    "i8": [0, -1, 0, -1, 0, 2, -2, 0, -1, -1, 44, 127, -1, 0],
    # u16 saturation, then the low byte: 40000 fits u16 (0x9c40) -> 0x40
    "u8": [0, 255, 0, 255, 0, 2, 0, 0, 255, 255, 44, 0, 64, 0],
}
NP = {"i32": np.int32, "i64": np.int64, "u32": np.uint32, "i16": np.int16, "i8": np.int8, "u8": np.uint8}
TL = {"i32": "int32", "i64": "int64", "u32": "uint32", "i16": "int16", "i8": "int8", "u8": "uint8"}
TORCH = {"i32": torch.int32, "i64": torch.int64, "u32": torch.uint32, "i16": torch.int16, "i8": torch.int8,
         "u8": torch.uint8}


@pytest.mark.parametrize("dst", sorted(WANT))
def test_fp_to_int_rule(dst):
    got = arith.fp_to_int(np.array(X, np.float32), NP[dst])
    assert got.dtype == np.dtype(NP[dst])
    assert got.tolist() == WANT[dst]


@triton.jit
def _convert(x_ptr, y_ptr, DT: tl.constexpr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    tl.store(y_ptr + o, tl.load(x_ptr + o).to(DT))


@pytest.mark.parametrize("src", ["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("dst", ["i32", "i64", "u32", "i8"])
def test_kernel_conversion_is_the_gpus(src, dst):
    """Through a kernel on the interpreter, from each float type: the same rule on the value each holds."""
    dt = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[src]
    x = torch.tensor(X + [0.0] * (16 - len(X)), dtype=torch.float32).to(dt)
    y = torch.zeros(16, dtype=TORCH[dst])
    _convert[(1,)](x, y, DT=getattr(tl, TL[dst]), BLOCK=16)
    want = arith.fp_to_int(x.float().numpy(), NP[dst])
    assert y.numpy().tolist() == want.tolist()
    # the source type rounds X first (3e9 is inf in fp16), so check the rule's fixed points directly too
    assert y[0].item() == 0  # NaN
    assert y[1].item() == WANT[dst][1]  # +inf


def test_without_the_shim_numpy_converts_nan_to_int_min():
    """What the shim is for: lifted, the interpreter's NaN becomes INT32_MIN, the GPU's is 0."""
    x = torch.tensor([NAN] * 16)
    y = torch.zeros(16, dtype=torch.int32)
    with arith.suspended():
        _convert[(1,)](x, y, DT=tl.int32, BLOCK=16)
    assert y[0].item() == I32_MIN
    _convert[(1,)](x, y, DT=tl.int32, BLOCK=16)
    assert y[0].item() == 0


def test_the_lowering_this_rests_on():
    """An 8-bit destination is a 16-bit cvt.rzi; 16/32/64-bit ones convert directly (sm90 PTX, this Triton)."""
    from harness.compile.matrix import compile_matrix

    for dst, cvt in (("i8", "cvt.rzi.s16.f32"), ("u8", "cvt.rzi.u16.f32"), ("i32", "cvt.rzi.s32.f32"),
                     ("i64", "cvt.rzi.s64.f32"), ("u32", "cvt.rzi.u32.f32")):
        res = compile_matrix(_convert, signature={"x_ptr": "*fp32", "y_ptr": f"*{dst}"},
                             constexprs={"DT": getattr(tl, TL[dst]), "BLOCK": 16}, targets=["sm90"])["sm90"]
        assert not isinstance(res, BaseException), res
        assert sorted(set(re.findall(r"cvt\.rzi\.[\w.]+", res.asm["ptx"]))) == [cvt], dst
