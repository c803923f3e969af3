"""The FP8 cast probe: plain ``@triton.jit`` kernels that ask a backend what it does to one cast.

Why one copy: the H200 tables (``scripts/capture_fp8_tables.py``), the per-target PTX
(``scripts/compile_fp8_target_ptx.py``), the interpreter measurements (``scripts/measure_interp_fp8.py``) and
the tests that read them (``tests/test_fp8_interp*.py``) must run the same instructions, or a table and the
test that checks it measure two different things. The module imports Triton only (no codec of the harness),
so a table captured with it stays independent ground truth for ``harness.fp8``.

Import it after ``TRITON_INTERPRET`` is decided: ``@triton.jit`` binds to the interpreter or a GPU when the
module is imported.
"""

from __future__ import annotations

import triton
import triton.language as tl

__all__ = ["fp32_div", "fp8_cast", "fp8_decode", "upcast_fp32"]


@triton.jit
def fp8_cast(x_ptr, y_ptr, n, DST: tl.constexpr, VIA_FP32: tl.constexpr, BLOCK: tl.constexpr):
    # y = the FP8 code bits of x.to(DST); VIA_FP32 widens the load first (the seed bug's fix: Triton's custom
    # FP8 conversions take fp16/fp32 only, so bf16 -> e4b15 compiles only this way).
    off = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = off < n
    x = tl.load(x_ptr + off, mask=m)
    if VIA_FP32:
        x = x.to(tl.float32)
    tl.store(y_ptr + off, x.to(DST).to(tl.uint8, bitcast=True), mask=m)


@triton.jit
def fp8_decode(c_ptr, y_ptr, SRC: tl.constexpr):
    # All 256 codes of SRC (given as uint8) -> fp32.
    off = tl.arange(0, 256)
    tl.store(y_ptr + off, tl.load(c_ptr + off).to(SRC, bitcast=True).to(tl.float32))


@triton.jit
def upcast_fp32(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    # fp16/bf16 -> fp32 (exact on hardware; the interpreter's NaN/inf handling is what gets measured).
    off = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = off < n
    tl.store(y_ptr + off, tl.load(x_ptr + off, mask=m).to(tl.float32), mask=m)


@triton.jit
def fp32_div(x_ptr, y_ptr, z_ptr, n, BLOCK: tl.constexpr):
    # fp32 `/` as Triton lowers it (approximate div.full.f32 on NVIDIA; tl.math.div_rn is the IEEE one).
    off = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = off < n
    tl.store(z_ptr + off, tl.load(x_ptr + off, mask=m) / tl.load(y_ptr + off, mask=m), mask=m)
