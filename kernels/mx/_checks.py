"""Host-side validation for the MX entry points: every bad argument is named with what was expected, before
anything is launched (so a refused call writes nothing)."""

from __future__ import annotations

from typing import Any

import torch

from kernels.mx.layout import BLOCK, SCALE_RULES, SCHEMES

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def scheme_rule(scheme: Any, scale_rule: Any) -> str:
    if scheme not in SCHEMES:
        raise ValueError(f"scheme: expected one of {', '.join(SCHEMES)}; got {scheme!r}")
    if scheme == "nvfp4":
        if scale_rule is not None:
            raise ValueError(f"scale_rule: nvfp4's scale is the ue4m3 rounding of amax / 6 / global_scale, not a "
                             f"rule; pass None (got {scale_rule!r})")
        return "nvfp4"
    rule = "floor" if scale_rule is None else scale_rule
    if rule not in SCALE_RULES:
        raise ValueError(f"scale_rule: expected one of {', '.join(SCALE_RULES)}; got {scale_rule!r}")
    return rule


def activations(x: Any) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x: expected a torch.Tensor; got {type(x).__name__}")
    if x.dtype not in FLOAT_DTYPES:
        raise TypeError(f"x: expected dtype float16, bfloat16 or float32; got {x.dtype}")
    if x.dim() != 2:
        raise ValueError(f"x: expected a 2-D (rows, K) tensor; got shape {tuple(x.shape)}")
    if x.shape[1] > 1 and x.stride(1) != 1:
        raise ValueError(f"x: expected unit stride along K; got strides {tuple(x.stride())}")


def global_scale(g: Any, scheme: str, device: torch.device) -> torch.Tensor | None:
    if scheme != "nvfp4":
        if g is not None:
            raise ValueError(f"global_scale: only nvfp4 has one; got one for {scheme}")
        return None
    if not isinstance(g, torch.Tensor) or g.dtype != torch.float32 or g.numel() != 1:
        got = f"{g.dtype} of shape {tuple(g.shape)}" if isinstance(g, torch.Tensor) else type(g).__name__
        raise ValueError(f"global_scale: nvfp4 needs a one-element float32 tensor (e.g. "
                         f"kernels.mx.reference.nvfp4_global_scale(x)); got {got}")
    if g.device != device:
        raise ValueError(f"global_scale: is on {g.device}, expected {device} (x's device)")
    return g.reshape(1)


def _buffer(name: str, t: Any, shape: tuple[int, ...], device: torch.device) -> torch.Tensor:
    if not isinstance(t, torch.Tensor) or t.dtype != torch.uint8:
        got = t.dtype if isinstance(t, torch.Tensor) else type(t).__name__
        raise TypeError(f"{name}: expected a torch.uint8 tensor; got {got}")
    if tuple(t.shape) != shape:
        raise ValueError(f"{name}: expected shape {shape}; got {tuple(t.shape)}")
    if t.device != device:
        raise ValueError(f"{name}: is on {t.device}, expected {device} (x's device)")
    if t.dim() and t.shape[-1] > 1 and t.stride(-1) != 1:
        raise ValueError(f"{name}: expected unit stride in its last dim; got strides {tuple(t.stride())}")
    return t


def outputs(out: Any, codes_shape: tuple[int, ...], scales_shape: tuple[int, ...], device: torch.device,
            layout: str) -> tuple[torch.Tensor, torch.Tensor]:
    if out is None:
        codes = torch.empty(codes_shape, dtype=torch.uint8, device=device)
        alloc = torch.zeros if layout == "swizzled" else torch.empty
        return codes, alloc(scales_shape, dtype=torch.uint8, device=device)
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise TypeError(f"out: expected a (codes, scales) pair of tensors; got {type(out).__name__}")
    return _buffer("out[0] (codes)", out[0], codes_shape, device), _buffer("out[1] (scales)", out[1], scales_shape,
                                                                           device)


def operand(name: str, q: Any, scheme: str, device: torch.device | None = None, *, fp8: bool = False
            ) -> tuple[torch.Tensor, ...]:
    """A quantized GEMM operand: (codes (rows, K/2) uint8, scales, [global scale]); with ``fp8``, MXFP8:
    (codes (rows, K) float8_e4m3fn, e8m0 scales uint8)."""
    want = 3 if scheme == "nvfp4" else 2
    if not isinstance(q, (tuple, list)) or len(q) != want:
        what = "(codes, scales, global_scale)" if want == 3 else "(codes, scales)"
        source = "MXFP8 operands are (codes, scales)" if fp8 else f"{scheme} operands are {what}, as quantize_fp4 " \
                                                                  "returns them"
        raise TypeError(f"{name}: {source}; got "
                        f"{type(q).__name__}{'' if not isinstance(q, (tuple, list)) else f' of {len(q)}'}")
    codes, scales = q[0], q[1]
    for part, t in (("codes", codes), ("scales", scales)):
        dtype = torch.float8_e4m3fn if fp8 and part == "codes" else torch.uint8
        if not isinstance(t, torch.Tensor) or t.dtype != dtype:
            got = t.dtype if isinstance(t, torch.Tensor) else type(t).__name__
            raise TypeError(f"{name}: its {part} must be a {dtype} tensor; got {got}")
        if device is not None and t.device != device:
            raise ValueError(f"{name}: its {part} are on {t.device}, expected {device}")
    if codes.dim() != 2 or (codes.shape[1] > 1 and codes.stride(1) != 1):
        raise ValueError(f"{name}: codes must be 2-D (rows, K{'' if fp8 else ' / 2'}) with unit stride along K; got "
                         f"shape {tuple(codes.shape)}, strides {tuple(codes.stride())}")
    if want == 3:
        global_scale(q[2], scheme, codes.device)
    return tuple(q)


def block_of(scheme: str) -> int:
    return BLOCK[scheme]
