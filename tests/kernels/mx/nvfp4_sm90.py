"""NVFP4 ``scaled_gemm`` as Triton 3.9 compiles it for sm90, captured on an H100 (``benchmarks/nvfp4_ptx.py``):
the check shapes, their seeded operands, and the golden file's layout.

The GPU image's Triton (3.6) refuses NVFP4 ``tl.dot_scaled`` on sm90, so the kernels are compiled by 3.9 on a CPU
box and loaded on the card; what the card computed is the golden the Triton 3.9 interpreter lane must reproduce
bit for bit. The operands come from a fixed-seed CPU generator: a golden stores their digest, not them, and a
lane whose torch draws other bytes is told so instead of comparing other inputs.
"""

from __future__ import annotations

import hashlib

import numpy as np
import torch

#: (M, N, K): one tile, several tiles of the 64-row config, a K split in 4 ranges (the summing kernel too)
CHECK_SHAPES = [(64, 128, 512), (256, 512, 1024), (16, 64, 4096)]
GROUP = 16  # NVFP4: one e4m3 scale per 16 elements
#: where the golden lives under the golden root
GOLDEN = "mx/nvfp4_sm90_triton3.9.npz"
#: products kept in full, row-major (the digest covers all of them)
KEPT = 1024


def operands(m: int, n: int, k: int) -> tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]:
    """Seeded NVFP4 operands ``(codes, scales, global_scale)`` for A (m rows) and B (n rows), drawn on the CPU:
    random e2m1 code pairs, e4m3 scales between 2^-3 and 2^3 with 3 random mantissa bits (no NaN code), fp32
    global scales 0.75 and 1.5."""
    g = torch.Generator().manual_seed(m * 1_000_003 + n * 1009 + k + 16)
    out = []
    for rows, gs in ((m, 0.75), (n, 1.5)):
        codes = torch.randint(0, 256, (rows, k // 2), generator=g, dtype=torch.int32).to(torch.uint8)
        scale_vals = torch.exp2(torch.randint(-3, 4, (rows, k // GROUP), generator=g).float())
        scale_vals = scale_vals * (1 + torch.randint(0, 8, scale_vals.shape, generator=g).float() / 8)
        scales = scale_vals.to(torch.float8_e4m3fn).view(torch.uint8)
        out.append((codes, scales, torch.tensor([gs], dtype=torch.float32)))
    return out[0], out[1]


def case_name(m: int, n: int, k: int) -> str:
    """A check shape's key in the golden: ``MxNxK``."""
    return f"{m}x{n}x{k}"


def digest(*arrays: np.ndarray) -> str:
    """sha256 over arrays' dtypes, shapes and bytes: of the operands (the golden stores it instead of them) and
    of a whole product (the golden keeps only its first :data:`KEPT` products in full)."""
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def operand_digest(m: int, n: int, k: int) -> str:
    qa, qb = operands(m, n, k)
    return digest(*(t.numpy() for q in (qa, qb) for t in q))
