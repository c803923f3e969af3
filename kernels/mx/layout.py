"""The byte layouts the MX kernels read and write (kept free of the harness: kernels never import it).

Schemes: ``mxfp4`` (e2m1 elements, e8m0 scales, 32 per block) and ``nvfp4`` (e2m1, ue4m3 scales, 16 per block,
times an fp32 global scale). Codes: two e2m1 per byte along K, the first element in the low nibble (what
``tl.dot_scaled`` reads). Scales: ``linear`` (rows, K / block), or ``swizzled``, the cuBLAS 128x4 layout that
block-scaled MMA on sm100/sm120 reads: rows padded to 128 and scale columns to 4, 512-byte tiles, scale (r, c) at
byte ``tile * 512 + (r % 32) * 16 + (r % 128 // 32) * 4 + c % 4``; padding bytes are 0.
"""

from __future__ import annotations

__all__ = ["BLOCK", "SCHEMES", "SCALE_RULES", "RULE_CODE", "LAYOUTS", "swizzled_size", "cdiv"]

#: Elements per scale.
BLOCK: dict[str, int] = {"mxfp4": 32, "nvfp4": 16}
SCHEMES = tuple(BLOCK)
#: e8m0 scale rules of the MXFP4 kernel (harness.mx.e8m0_scale documents each with its source).
SCALE_RULES = ("floor", "ceil", "even", "rceil")
#: The kernel's RULE constexpr; NVFP4 has its own (the ue4m3 rounding of amax / 6 / global_scale).
RULE_CODE = {"floor": 0, "ceil": 1, "even": 2, "rceil": 3, "nvfp4": 4}
LAYOUTS = ("linear", "swizzled")


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def swizzled_size(rows: int, cols: int) -> tuple[int, int]:
    """(rows, scale columns) padded to the 128x4 tile grid: the swizzled buffer holds their product bytes."""
    return cdiv(rows, 128) * 128, cdiv(cols, 4) * 4
