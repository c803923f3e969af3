"""Microscaling: MXFP8, MXFP6, MXFP4 (OCP MX v1.0) and NVFP4 codecs, block quantizers and scale layouts.

``formats`` holds the element and scale formats and their exact codecs (checked bit for bit against ml_dtypes),
``blocks`` the block quantizers in the byte layout kernels consume, ``layouts`` the 128x4 scale swizzle, ``schemes``
the named schemes (mxfp4, nvfp4, ...), ``compare`` ``assert_mx_close`` (its text in ``message``), ``diagnose`` which
known conversion convention produced a tensor of codes, ``lowering`` whether a ``dot_scaled`` compiles to native
block-scaled MMA.
"""

from __future__ import annotations

from harness.mx.blocks import dequantize_mx, dequantize_nvfp4, pack_fp4, quantize_mx, quantize_nvfp4, unpack_fp4
from harness.mx.formats import (
    FORMATS,
    RNE,
    ROUNDINGS,
    RS,
    RS_BITS,
    RZ,
    SCALE_RULES,
    ULP_FAR,
    MXFormat,
    decode,
    e8m0_scale,
    encode,
    get_mx_format,
    ulp_distance,
)
from harness.mx.layouts import swizzle_scales, swizzled_shape, unswizzle_scales
from harness.mx.schemes import SCHEMES, Scheme, get_scheme

__all__ = [
    "MXFormat", "FORMATS", "RNE", "RZ", "RS", "ROUNDINGS", "RS_BITS", "SCALE_RULES", "ULP_FAR", "get_mx_format",
    "encode", "decode", "ulp_distance", "e8m0_scale", "pack_fp4", "unpack_fp4", "quantize_mx", "dequantize_mx",
    "quantize_nvfp4", "dequantize_nvfp4", "swizzle_scales", "unswizzle_scales", "swizzled_shape", "Scheme", "SCHEMES",
    "get_scheme", "assert_mx_close",
]


def __getattr__(name: str) -> object:
    # the assert pulls in the comparison machinery (harness.compare, the session); the codecs do not need it
    if name == "assert_mx_close":
        from harness.mx.compare import assert_mx_close

        return assert_mx_close
    raise AttributeError(f"module 'harness.mx' has no attribute {name!r}")
