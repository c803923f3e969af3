"""Demo kernel for scale-type widening: one ``tl.dot_scaled`` tile of e2m1 operands, as an MXFP4 kernel's author
writes it (e8m0 scales, uint8, one per 32 elements along K; ``GROUP`` sets the scale block). Launched with MX
scales only by ``tests/harness/compile/test_launch_capture_scales.py``'s inner test: only widening compiles the
NVFP4 form (e4m3 scales as ``float8e4nv``, one per 16). Not a test module (no ``test_`` prefix).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def mx_dot(a_ptr, as_ptr, b_ptr, bs_ptr, c_ptr, GROUP: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
           BK: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    kh = tl.arange(0, BK // 2)
    ks = tl.arange(0, BK // GROUP)
    a = tl.load(a_ptr + rm[:, None] * (BK // 2) + kh[None, :])
    b = tl.load(b_ptr + rn[None, :] * (BK // 2) + kh[:, None])
    sa = tl.load(as_ptr + rm[:, None] * (BK // GROUP) + ks[None, :])
    sb = tl.load(bs_ptr + rn[:, None] * (BK // GROUP) + ks[None, :])
    c = tl.dot_scaled(a, sa, "e2m1", b, sb, "e2m1")
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], c)


def mx_dot_tile(a: torch.Tensor, a_scales: torch.Tensor, b: torch.Tensor, b_scales: torch.Tensor, *,
                group: int = 32) -> torch.Tensor:
    """C (M, N) fp32 = A (M, K) · B (N, K)ᵀ for packed e2m1 ``a``/``b`` (M, K/2) / (N, K/2) uint8 and scales
    (M, K/group) / (N, K/group): one tile, no masks (the sizes are the tile's)."""
    (m, kh), n = a.shape, b.shape[0]
    c = torch.empty((m, n), dtype=torch.float32, device=a.device)
    mx_dot[(1,)](a, a_scales, b, b_scales, c, GROUP=group, BM=m, BN=n, BK=2 * kh)
    return c
