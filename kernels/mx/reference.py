"""Torch references for the MX kernels, written out from the schemes' definitions (no harness: kernels never
import it; the tests check these against ``harness.mx`` and the kernels against both)."""

from __future__ import annotations

import torch

from kernels.mx.layout import BLOCK

__all__ = ["nvfp4_global_scale", "dequantize_fp4", "dequantize_mxfp8", "scaled_gemm_reference", "E2M1_VALUES"]

#: e2m1 code -> value (sign bit 3).
E2M1_VALUES = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])


def nvfp4_global_scale(x: torch.Tensor) -> torch.Tensor:
    """amax(|x|) over x's finite values / (448 * 6) as a one-element fp32 tensor on x's device (1 when that amax is
    0), computed on the CPU so that it is one correctly rounded division on every device."""
    a = x.detach().float().cpu().abs()
    amax = torch.where(torch.isfinite(a), a, 0.0).amax() if x.numel() else torch.zeros(())
    g = torch.where(amax > 0, amax / 2688.0, torch.ones(()))
    return g.reshape(1).to(x.device)


def _scale_values(scales: torch.Tensor, scheme: str) -> torch.Tensor:
    s = scales.long()
    if scheme == "mxfp4":
        v = torch.where(s == 0xFF, float("nan"), torch.ldexp(torch.ones_like(s, dtype=torch.float64), s - 127))
        return v
    e, m = s >> 3, (s & 7).double()
    v = torch.where(e == 0, m * 2.0**-9, (8 + m) * torch.ldexp(torch.ones_like(m), e - 10))
    return torch.where(s == 0x7F, float("nan"), v)


def dequantize_fp4(codes: torch.Tensor, scales: torch.Tensor, scheme: str,
                   global_scale: torch.Tensor | None = None) -> torch.Tensor:
    """float64 values of (codes (rows, K/2), linear scales (rows, K/block)[, global scale])."""
    c = torch.stack((codes & 0xF, codes >> 4), -1).flatten(-2).long()
    v = E2M1_VALUES.to(codes.device).double()[c]
    s = _scale_values(scales, scheme).repeat_interleave(BLOCK[scheme], -1)
    out = v * s
    return out * float(global_scale.reshape(())) if global_scale is not None else out


def dequantize_mxfp8(codes: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """float64 values of MXFP8 e4m3 (codes (rows, K) float8_e4m3fn, linear e8m0 scales (rows, K/32))."""
    return codes.double() * _scale_values(scales, "mxfp4").repeat_interleave(BLOCK["mxfp4"], -1)


def scaled_gemm_reference(a: tuple[torch.Tensor, ...], b: tuple[torch.Tensor, ...], scheme: str,
                          a_format: str = "e2m1") -> torch.Tensor:
    """A · Bᵀ in float64 from linear-layout operands (every product of two FP4 or FP8 values and scales is exact
    there); ``a_format="e4m3"``: A is MXFP8."""
    ga = a[2] if scheme == "nvfp4" else None
    gb = b[2] if scheme == "nvfp4" else None
    da = dequantize_mxfp8(a[0], a[1]) if a_format == "e4m3" else dequantize_fp4(a[0], a[1], scheme, ga)
    return da @ dequantize_fp4(b[0], b[1], scheme, gb).T
