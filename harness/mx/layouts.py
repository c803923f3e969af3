"""Block-scale layouts: linear, and the 128x4 swizzle that block-scaled MMA on sm100/sm120 and cuBLAS read.

Linear is what :func:`harness.mx.quantize_mx` returns: (rows, K / block), one row of scales per row of the operand
(``tl.dot_scaled`` takes it so). cuBLAS, cuDNN and CUTLASS instead want the scales swizzled, so that one tile's
scales are one contiguous 512-byte load (cuBLAS "1D block scaling factors layout"): pad rows to a multiple of 128
and columns to 4; cut the matrix into 128x4 tiles, stored one after another with the column tiles of a row tile
adjacent; inside a tile, scale (r, c) sits at byte (r % 32) * 16 + (r // 32) * 4 + c, i.e. a 32x16 array whose row
i holds the 4 scales of tile rows i, i + 32, i + 64 and i + 96 in turn.

Why a test needs both: a kernel that reads the wrong layout still runs and returns plausible numbers, so the
reference must build each layout on purpose and a test must show that mixing them up changes the result.
"""

from __future__ import annotations

import torch

__all__ = ["swizzle_scales", "unswizzle_scales", "swizzled_shape"]


def swizzled_shape(rows: int, cols: int) -> tuple[int, int]:
    """(rows, cols) padded to the 128x4 tile grid; the swizzled buffer holds their product bytes."""
    for arg, v in (("rows", rows), ("cols", cols)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise ValueError(f"{arg}: expected a non-negative int; got {v!r}")
    return -(-rows // 128) * 128, -(-cols // 4) * 4


def _offsets(rows: int, cols: int, device: torch.device) -> torch.Tensor:
    """Byte offset in the swizzled buffer of each (r, c) of the padded matrix, as a (R, C) int64 tensor."""
    r = torch.arange(rows, device=device).unsqueeze(1)
    c = torch.arange(cols, device=device).unsqueeze(0)
    tile = (r // 128) * (cols // 4) + c // 4
    return tile * 512 + (r % 32) * 16 + (r % 128 // 32) * 4 + c % 4


def swizzle_scales(scales: torch.Tensor) -> torch.Tensor:
    """(rows, cols) scales as the flat swizzled buffer (1-D, ``prod(swizzled_shape(rows, cols))`` long, padding 0)."""
    if not isinstance(scales, torch.Tensor) or scales.dim() != 2 or scales.layout != torch.strided:
        got = tuple(scales.shape) if isinstance(scales, torch.Tensor) else type(scales).__name__
        raise ValueError(f"scales: expected a dense 2-D (rows, cols) tensor; got {got}")
    R, C = swizzled_shape(*scales.shape)
    padded = scales.new_zeros(R, C)
    padded[: scales.shape[0], : scales.shape[1]] = scales
    out = scales.new_zeros(R * C)
    out[_offsets(R, C, scales.device).flatten()] = padded.flatten()
    return out


def unswizzle_scales(swizzled: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """The (rows, cols) scales held in a swizzled buffer (any shape with the right number of elements)."""
    R, C = swizzled_shape(rows, cols)
    if not isinstance(swizzled, torch.Tensor) or swizzled.numel() != R * C or swizzled.layout != torch.strided:
        got = tuple(swizzled.shape) if isinstance(swizzled, torch.Tensor) else type(swizzled).__name__
        raise ValueError(f"swizzled: expected {R * C} elements ({R}x{C} padded from {rows}x{cols}); got {got}")
    return swizzled.reshape(-1)[_offsets(R, C, swizzled.device)][:rows, :cols]
