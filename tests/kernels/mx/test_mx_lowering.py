"""dot_scaled_lowering over sm90/sm100/sm120 with the shipped GEMM: native block-scaled MMA on Blackwell (tcgen05
on sm100, mma.sync on sm120), the emulated path on Hopper; NVFP4 on sm90 refused by Triton < 3.9 as the launcher
says."""

from __future__ import annotations

import pytest

from harness.compile.matrix import compile_kernel
from harness.mx.lowering import dot_scaled_lowering, native_instructions

pytestmark = pytest.mark.lane_independent

EXPECTED = {"sm90": "emulated", "sm100": "native", "sm120": "native"}
#: e4m3 x e2m1 on sm120: Triton 3.6 and 3.9 emulate it (no ``mma.sync ... block_scale`` in the PTX of this
#: kernel's 128x128x128 tile, compiled here 2026-12-06), where both FP4 operands get the native MMA.
EXCEPTIONS = {("e4m3", "sm120"): "emulated"}


def _compile(scheme: str, target: str, swizzled: bool = False):
    """``scheme`` "e4m3": MXFP8 A (a_format="e4m3") times MXFP4 B."""
    from kernels.mx.gemm import BK, BM, BN, _scaled_gemm_kernel

    e4m3 = scheme == "e4m3"
    sig = dict(a_ptr="*fp8e4nv" if e4m3 else "*u8", as_ptr="*u8", b_ptr="*u8", bs_ptr="*u8", c_ptr="*fp32",
               ga_ptr="*fp32", gb_ptr="*fp32",
               M="i32", N="i32", K="i32", stride_a="i32", stride_b="i32", stride_c="i32", stride_as="i32",
               stride_bs="i32", a_scale_cols="i32", b_scale_cols="i32")
    consts = dict(BM=BM, BN=BN, BK=BK, GROUP=16 if scheme == "nvfp4" else 32, NVFP4=scheme == "nvfp4",
                  SWIZZLED=swizzled, GROUP_M=1, A_FORMAT="e4m3" if e4m3 else "e2m1", AK=BK if e4m3 else BK // 2,
                  SPLIT=1)
    return compile_kernel(_scaled_gemm_kernel, signature=sig, constexprs=consts, target=target)


@pytest.mark.parametrize("target", list(EXPECTED))
@pytest.mark.parametrize("scheme", ["mxfp4", "nvfp4", "e4m3"])
def test_native_or_emulated_per_target(scheme, target):
    from kernels.mx import gemm_refusal

    cap = (int(target[2:-1]), int(target[-1]))
    fmt = "e4m3" if scheme == "e4m3" else "e2m1"
    if gemm_refusal("mxfp4" if fmt == "e4m3" else scheme, interpreter=False, capability=cap, a_format=fmt) is not None:
        with pytest.raises(Exception, match="PassManager::run failed"):
            _compile(scheme, target)
        return
    compiled = _compile(scheme, target)
    want = EXCEPTIONS.get((scheme, target), EXPECTED[target])
    assert dot_scaled_lowering(compiled) == want, native_instructions(compiled)[:2]
    if want == "native":
        kind = {"mxfp4": "mxf4", "nvfp4": "mxf4nvf4", "e4m3": "mxf8f6f4"}[scheme]
        assert any(f"kind::{kind}" in ln for ln in native_instructions(compiled))


def test_swizzled_scales_lower_the_same_way():
    assert dot_scaled_lowering(_compile("mxfp4", "sm100", swizzled=True)) == "native"


def test_a_kernel_without_ptx_is_a_clear_error():
    with pytest.raises(ValueError, match=r"compiled: expected a compiled CUDA kernel with PTX"):
        dot_scaled_lowering(object())
