"""Inputs for the MX kernel tests: blocks at distinct magnitudes (so scales differ), every scale-rule boundary, and
the specials (zero block, -0, NaN, ±inf, fp32 subnormals)."""

from __future__ import annotations

import math

import torch

#: (rows, K): odd row counts, K a multiple of 32 but not of the GEMM's 128-wide K step, a row count past 128.
SHAPES = {"r37-k96": (37, 96), "r130-k160": (130, 160)}


def activations(rows: int, k: int, rng: torch.Generator, *, specials: bool = True, max_exp: int = 30) -> torch.Tensor:
    """Block magnitudes 2^-max_exp .. 2^max_exp (per 16 elements) times randn; with ``specials``, rows 0-3 hold
    zeros, rule boundaries, NaN, ±inf and subnormals."""
    x = torch.randn(rows, k, generator=rng)
    mag = torch.randint(-max_exp, max_exp + 1, (rows, k // 16), generator=rng).float().exp2().repeat_interleave(16, 1)
    x = x * mag
    if specials and rows > 3 and k >= 64:
        x[0, :32] = 0.0
        x[1, :16] = -0.0
        x[1, 16:32] = torch.tensor([1.75, 1.5, 3.5, 7.0, 6.0, 2.5, 0.25, 0.75] * 2)  # rule and rounding boundaries
        x[2, 33] = math.nan
        x[3, 40], x[3, 70] = math.inf, -math.inf
        x[2, 64:80] = 1e-40  # fp32 subnormals (bf16 keeps some of them)
    return x
