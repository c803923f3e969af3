"""harness.mx.layouts: the 128x4 scale swizzle against pinned offsets and a reshape-based statement of the same
layout, its inverse, and proof that a layout mix-up changes a dequantized operand."""

from __future__ import annotations

import pytest
import torch

from harness.mx import dequantize_mx, quantize_mx, swizzle_scales, swizzled_shape, unswizzle_scales

pytestmark = pytest.mark.lane_independent

SHAPES = [(1, 1), (128, 4), (130, 5), (256, 8), (300, 9), (127, 3)]


def _distinct(rows: int, cols: int) -> torch.Tensor:
    return torch.arange(1, rows * cols + 1, dtype=torch.int64).reshape(rows, cols)  # every scale its own value


def _by_reshape(s: torch.Tensor) -> torch.Tensor:
    """cuBLAS's description as tensor moves: tiles of 128x4 in row-tile order; a tile as 32x16 whose row i is the
    4 scales of tile rows i, i+32, i+64, i+96."""
    R, C = swizzled_shape(*s.shape)
    p = torch.zeros(R, C, dtype=s.dtype)
    p[: s.shape[0], : s.shape[1]] = s
    tiles = p.reshape(R // 128, 128, C // 4, 4).permute(0, 2, 1, 3)  # (row tile, col tile, 128, 4)
    return tiles.reshape(R // 128, C // 4, 4, 32, 4).permute(0, 1, 3, 2, 4).flatten()


def test_pinned_offsets_of_the_128x4_tiles():
    s = _distinct(256, 8)
    out = swizzle_scales(s)
    assert out.shape == (256 * 8,)
    pinned = {0: (0, 0), 1: (0, 1), 3: (0, 3), 4: (32, 0), 8: (64, 0), 12: (96, 0), 15: (96, 3), 16: (1, 0),
              511: (127, 3), 512: (0, 4), 1023: (127, 7), 1024: (128, 0), 1028: (160, 0)}
    assert {k: out[k].item() for k in pinned} == {k: s[r, c].item() for k, (r, c) in pinned.items()}


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_swizzle_matches_the_reshape_statement_and_unswizzle_inverts_it(shape):
    s = _distinct(*shape)
    out = swizzle_scales(s)
    R, C = swizzled_shape(*shape)
    assert out.numel() == R * C and torch.equal(out, _by_reshape(s))
    assert (out == 0).sum() == R * C - s.numel()  # the padding, and only it, is zero
    assert torch.equal(unswizzle_scales(out, *shape), s)
    assert torch.equal(unswizzle_scales(out.reshape(R, C), *shape), s)


def test_uint8_scales_from_the_quantizer_round_trip():
    g = torch.Generator().manual_seed(2)
    mag = torch.randint(-20, 20, (200, 3), generator=g).float().exp2()
    x = torch.randn(200, 96, generator=g) * mag.repeat_interleave(32, 1)
    _, scales = quantize_mx(x, "e2m1")
    out = swizzle_scales(scales)
    assert out.dtype == torch.uint8 and torch.equal(unswizzle_scales(out, 200, 3), scales)


def test_reading_swizzled_scales_as_linear_changes_the_dequantized_operand():
    rows, k = 256, 256
    g = torch.Generator().manual_seed(4)
    mag = torch.arange(rows * k // 32).remainder(29).sub(14).float().exp2().reshape(rows, k // 32)
    x = torch.randn(rows, k, generator=g) * mag.repeat_interleave(32, 1)
    codes, scales = quantize_mx(x, "e2m1")
    assert len(scales.unique()) >= 20  # distinguishable: a mix-up cannot hide behind equal scales
    swz = swizzle_scales(scales)
    right = dequantize_mx(codes, unswizzle_scales(swz, rows, k // 32), "e2m1")
    assert torch.equal(right, dequantize_mx(codes, scales, "e2m1"))
    wrong = dequantize_mx(codes, swz.reshape(rows, k // 32), "e2m1")
    differs = (wrong != right).any(1)
    assert differs.sum() > rows * 0.9, f"only {int(differs.sum())} of {rows} rows changed"


def test_bad_inputs_name_the_argument_and_what_was_expected():
    cases = [
        (lambda: swizzle_scales(torch.zeros(4, dtype=torch.uint8)),
         r"scales: expected a dense 2-D \(rows, cols\) tensor; got \(4,\)"),
        (lambda: unswizzle_scales(torch.zeros(100), 3, 5), r"swizzled: expected 1024 elements \(128x8 padded from "
                                                           r"3x5\); got \(100,\)"),
        (lambda: unswizzle_scales(torch.zeros(512), -1, 4), r"rows: expected a non-negative int; got -1"),
        (lambda: swizzled_shape(4, 2.0), r"cols: expected a non-negative int; got 2.0"),
    ]
    for call, message in cases:
        with pytest.raises(ValueError, match=message):
            call()
