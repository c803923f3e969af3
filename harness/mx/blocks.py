"""Block quantization to MXFP8/MXFP6/MXFP4 (OCP MX v1.0) and NVFP4, in the byte layout kernels consume.

Why: a block-scaled GEMM test needs operands quantized exactly as ``tl.dot_scaled``, cuBLAS or CUTLASS read them —
FP4 two codes per byte with the FIRST element in the LOW nibble, one scale per ``block`` consecutive elements along
the reduction axis — and a dequantization computed exactly, to judge the kernel against.

Blocks run along ``axis`` (default the last, K). A size along ``axis`` that is not a multiple of ``block`` is an
error unless ``pad=True``: then it is zero-padded to one, the zeros encode to +0 codes and leave every amax as it
was, and the returned codes, scales and dequantized values cover the padded length (slice them back yourself).
Packing needs an even ``block``. Non-finite inputs propagate through the scale: a block holding NaN or ±inf gets
the NaN scale (MX) or saturates (NVFP4, whose ue4m3 scale keeps only NaN).
"""

from __future__ import annotations

import math
import numbers

import torch

from harness.mx.formats import (
    FORMATS,
    SCALE_RULES,
    MXFormat,
    check_codes,
    check_dense,
    check_flag,
    check_float,
    decode,
    decode_codes,
    e8m0_scale,
    element_format,
    encode,
)

__all__ = ["pack_fp4", "unpack_fp4", "quantize_mx", "dequantize_mx", "quantize_nvfp4", "dequantize_nvfp4"]

_E4M3_MAX, _E2M1_MAX = 448.0, 6.0


def _is_int(v: object) -> bool:
    """An integer (numpy's too), not a bool: ``axis=True`` reading as axis 1 would hide a swapped argument."""
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _axis(t: torch.Tensor, axis: int, arg: str) -> int:
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{arg}: expected a torch.Tensor; got {type(t).__name__}")
    if not _is_int(axis) or not -t.dim() <= axis < t.dim():
        raise ValueError(f"axis: expected an int in [{-t.dim()}, {t.dim()}) for {arg} of shape {tuple(t.shape)}; "
                         f"got {axis!r}")
    return int(axis) % t.dim()


def _check_block(block: int, pack: bool) -> None:
    if not _is_int(block) or block < 1:
        raise ValueError(f"block: expected a positive int; got {block!r}")
    if pack and block % 2:
        raise ValueError(f"block: packing two FP4 codes per byte (pack=True) needs an even block; got {block}")


def pack_fp4(codes: torch.Tensor, axis: int = -1) -> torch.Tensor:
    """Two e2m1 codes per byte along ``axis``: element 2i in the low nibble, 2i+1 in the high one."""
    c = check_codes(codes, element_format("e2m1"))
    ax = _axis(c, axis, "codes")
    if c.shape[ax] % 2:
        raise ValueError(f"codes: packing needs an even size along axis {axis}; got shape {tuple(c.shape)}")
    c = c.movedim(ax, -1)
    return (c[..., 0::2] | (c[..., 1::2] << 4)).to(torch.uint8).movedim(-1, ax)


def unpack_fp4(packed: torch.Tensor, axis: int = -1) -> torch.Tensor:
    """The inverse of :func:`pack_fp4`: one e2m1 code per byte, twice as long along ``axis``."""
    if not isinstance(packed, torch.Tensor) or packed.dtype != torch.uint8:
        got = packed.dtype if isinstance(packed, torch.Tensor) else type(packed).__name__
        raise ValueError(f"packed: expected a torch.uint8 tensor; got {got}")
    check_dense(packed, "packed")
    ax = _axis(packed, axis, "packed")
    p = packed.movedim(ax, -1)
    return torch.stack((p & 0xF, p >> 4), dim=-1).flatten(-2).movedim(-1, ax)


def _blocks(x: torch.Tensor, block: int, axis: int, pad: bool, pack: bool) -> tuple[torch.Tensor, int]:
    """``x`` with ``axis`` moved last and split into (..., n // block, block), zero-padded when ``pad``."""
    check_float(x, "x")
    check_flag(pad, "pad")
    _check_block(block, pack)
    ax = _axis(x, axis, "x")
    xt = x.movedim(ax, -1)
    n = xt.shape[-1]
    if n % block:
        if not pad:
            raise ValueError(f"x: size {n} along axis {axis} is not a multiple of block={block} "
                             "(pass pad=True to zero-pad)")
        xt = torch.nn.functional.pad(xt, (0, block - n % block))
    # the block count spelled out: -1 cannot be inferred for an empty x, (0, K) included
    return xt.reshape(*xt.shape[:-1], xt.shape[-1] // block, block), ax


def _finish(codes: torch.Tensor, f: MXFormat, ax: int, pack: bool) -> torch.Tensor:
    codes = codes.flatten(-2)
    if pack and f.name == "e2m1":
        codes = pack_fp4(codes)
    return codes.movedim(-1, ax)


def _encode_elements(y: torch.Tensor, f: MXFormat) -> torch.Tensor:
    if f.name in ("e4m3", "e5m2"):  # MXFP8: torch's own cast, saturated first (satfinite)
        dtype = torch.float8_e4m3fn if f.name == "e4m3" else torch.float8_e5m2
        return y.float().clamp(-f.max_finite, f.max_finite).to(dtype).view(torch.uint8)
    return encode(y, f.name)


def _decode_elements(codes: torch.Tensor, f: MXFormat, ax: int, pack: bool) -> torch.Tensor:
    """Element values, every error naming ``codes`` (not ``packed``, unpack_fp4's name for them)."""
    packed = pack and f.name == "e2m1"
    if codes.dtype != torch.uint8:
        what = "packed e2m1" if packed else f.name
        raise ValueError(f"codes: expected a torch.uint8 tensor of {what} codes; got {codes.dtype}")
    check_dense(codes, "codes")
    if f.name in ("e4m3", "e5m2"):
        return codes.view(torch.float8_e4m3fn if f.name == "e4m3" else torch.float8_e5m2).float()
    return decode_codes(unpack_fp4(codes, ax) if packed else codes, f, "codes")


def _expand(scales: torch.Tensor, values: torch.Tensor, block: int, ax: int) -> torch.Tensor:
    s = scales
    if scales.dim() == values.dim():  # else no axis to repeat along; the shape test below refuses it
        s = scales.movedim(ax, -1).repeat_interleave(block, -1).movedim(-1, ax)
    if s.shape != values.shape:
        raise ValueError(f"scales: shape {tuple(scales.shape)} does not fit codes of {tuple(values.shape)} elements "
                         f"at block={block} along axis {ax} (expected {block}x fewer along that axis)")
    return s


def quantize_mx(x: torch.Tensor, fmt: str | torch.dtype, *, block: int = 32, scale_rule: str = "floor",
                axis: int = -1, pack: bool = True, pad: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """``x`` as (element codes, e8m0 scale codes), both uint8; scales have ``x``'s shape with ``axis`` divided by
    ``block``.

    ``fmt``: "e2m1" (MXFP4, packed two per byte when ``pack``), "e2m3"/"e3m2" (MXFP6, one per byte),
    ``torch.float8_e4m3fn``/``torch.float8_e5m2`` (MXFP8, their bytes). ``scale_rule``: see :func:`e8m0_scale`.
    Elements are x / scale, exact, then rounded RNE with saturation, as OCP MX §6.3 and the hardware do (MXFP8
    rounds through float32 first, which only matters for a float64 ``x``).
    """
    f = element_format(fmt)
    check_flag(pack, "pack")
    if scale_rule not in SCALE_RULES:
        raise ValueError(f"scale_rule: expected one of {', '.join(SCALE_RULES)}; got {scale_rule!r}")
    xb, ax = _blocks(x, block, axis, pad, pack and f.name == "e2m1")
    scales = e8m0_scale(xb.abs().amax(-1), f, scale_rule)
    y = xb.double() / decode(scales, "e8m0").double().unsqueeze(-1)
    return _finish(_encode_elements(y, f), f, ax, pack), scales.movedim(-1, ax)


def dequantize_mx(codes: torch.Tensor, scales: torch.Tensor, fmt: str | torch.dtype, *, block: int = 32,
                  axis: int = -1, pack: bool = True) -> torch.Tensor:
    """The float32 values of :func:`quantize_mx` output: element times 2^(scale - 127), exact (NaN scale: NaN)."""
    f = element_format(fmt)
    check_flag(pack, "pack")
    _check_block(block, pack and f.name == "e2m1")
    ax = _axis(codes, axis, "codes")
    values = _decode_elements(codes, f, ax, pack)
    return values * _expand(decode_codes(scales, FORMATS["e8m0"], "scales"), values, block, ax)


def _check_global_scale(global_scale: object, device: torch.device) -> torch.Tensor:
    """The one NVFP4 global scale as a 0-dim float32 tensor on ``device``: finite and > 0 (no quantizer produces
    another), one value (a per-row tensor would broadcast into another scheme). A one-value tensor of any shape is
    accepted: kernels return theirs as shape (1,)."""
    want = "expected a finite positive scalar"
    kinds = "a real number, or a one-value real tensor"
    if isinstance(global_scale, torch.Tensor):
        if global_scale.dtype == torch.bool or global_scale.is_complex():
            raise ValueError(f"global_scale: {want} ({kinds}); got a {global_scale.dtype} tensor")
        check_dense(global_scale, "global_scale")
        if global_scale.numel() != 1:
            raise ValueError(f"global_scale: {want} ({kinds}); got a tensor of shape {tuple(global_scale.shape)}")
        shown = global_scale.item()
    elif isinstance(global_scale, numbers.Real) and not isinstance(global_scale, bool):
        shown = global_scale = float(global_scale)
    else:
        raise ValueError(f"global_scale: {want} ({kinds}); got {global_scale!r}")
    g = torch.as_tensor(global_scale, dtype=torch.float32, device=device).reshape(())
    if not bool(torch.isfinite(g)) or float(g) <= 0:
        # a float64 can be finite and positive yet 0 or inf in float32, where the scale is applied
        in32 = f" ({float(g)} in float32)" if math.isfinite(shown) and shown > 0 else ""
        raise ValueError(f"global_scale: {want}; got {shown!r}{in32}")
    return g


def _global_scale(x: torch.Tensor, global_scale: float | torch.Tensor | None) -> torch.Tensor:
    if global_scale is None:
        amax = x.abs().amax().float() if x.numel() else torch.zeros((), device=x.device)
        if not torch.isfinite(amax):
            raise ValueError("x: has NaN or inf, so the default global_scale (amax / (448 * 6)) is undefined; "
                             "pass global_scale")
        return torch.where(amax > 0, amax / (_E4M3_MAX * _E2M1_MAX), 1.0)
    return _check_global_scale(global_scale, x.device)


def quantize_nvfp4(x: torch.Tensor, *, global_scale: float | torch.Tensor | None = None, block: int = 16,
                   axis: int = -1, pack: bool = True, pad: bool = False
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``x`` as NVFP4: (e2m1 codes, ue4m3 block-scale codes, the fp32 global scale as a 0-dim tensor).

    Decoding is e2m1 * ue4m3 * global_scale. The default global scale, amax(|x|) / (448 * 6) (1 for an all-zero
    ``x``), lets the largest block scale reach e4m3's max. Block scale: fp32 ``amax_b / 6 / global_scale``, RNE and
    saturated to ue4m3 (the torchao order of operations). Elements: x / (block scale * global scale) computed
    exactly, RNE and saturated to e2m1; a block whose scale is 0 encodes +0. Kernels that multiply by an fp32
    reciprocal instead can differ from this by one e2m1 step where x / scale sits on a rounding boundary.
    """
    check_flag(pack, "pack")
    xb, ax = _blocks(x, block, axis, pad, pack)
    g = _global_scale(xb, global_scale)
    scales = encode(xb.float().abs().amax(-1) / _E2M1_MAX / g, "ue4m3")
    s = (decode(scales, "ue4m3").double() * g.double()).unsqueeze(-1)
    y = torch.where(s > 0, xb.double() / s, 0.0)
    return _finish(encode(y, "e2m1"), element_format("e2m1"), ax, pack), scales.movedim(-1, ax), g


def dequantize_nvfp4(codes: torch.Tensor, scales: torch.Tensor, global_scale: float | torch.Tensor, *,
                     block: int = 16, axis: int = -1, pack: bool = True) -> torch.Tensor:
    """The float32 values of :func:`quantize_nvfp4` output: (e2m1 * ue4m3, exact) * global_scale, one rounding."""
    check_flag(pack, "pack")
    _check_block(block, pack)
    ax = _axis(codes, axis, "codes")
    values = _decode_elements(codes, FORMATS["e2m1"], ax, pack)
    s = _expand(decode_codes(scales, FORMATS["ue4m3"], "scales"), values, block, ax)
    return values * s * _check_global_scale(global_scale, values.device)
