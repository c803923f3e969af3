"""MXFP4 / NVFP4 kernels: ``quantize_fp4`` (activations -> packed e2m1 + block scales, linear or swizzled) and
``scaled_gemm`` (``tl.dot_scaled`` over two quantized operands), with torch references in ``reference``."""

from kernels.mx.gemm import gemm_refusal, scaled_gemm
from kernels.mx.layout import BLOCK, LAYOUTS, SCALE_RULES, SCHEMES, swizzled_size
from kernels.mx.quantize import quantize_fp4

__all__ = ["quantize_fp4", "scaled_gemm", "gemm_refusal", "BLOCK", "LAYOUTS", "SCALE_RULES", "SCHEMES",
           "swizzled_size"]
