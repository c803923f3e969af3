"""Block-scaled schemes by name: which element format, which scale format, how many elements share a scale.

Why a table: a test, a tolerance row and a failure text name a scheme (``nvfp4``), never the triple it stands for;
``harness.cases`` builds the ``mx_case`` axis from it and ``assert_mx_close`` reads codes by it.

| scheme | elements | scale | block | source |
| --- | --- | --- | --- | --- |
| ``mxfp4`` | e2m1 | e8m0 | 32 | OCP MX v1.0 §5.2 |
| ``mxfp6e2m3`` / ``mxfp6e3m2`` | e2m3 / e3m2 | e8m0 | 32 | OCP MX v1.0 §5.2 |
| ``mxfp8e4m3`` / ``mxfp8e5m2`` | e4m3 / e5m2 | e8m0 | 32 | OCP MX v1.0 §5.2 |
| ``nvfp4`` | e2m1 | ue4m3, times an fp32 global scale | 16 | NVIDIA (PTX ``kind::mxf4nvf4``, cuBLAS) |
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from harness.mx.blocks import dequantize_mx, dequantize_nvfp4, quantize_mx, quantize_nvfp4, unpack_fp4
from harness.mx.formats import SCALE_RULES

__all__ = ["Scheme", "SCHEMES", "get_scheme"]


@dataclass(frozen=True)
class Scheme:
    """One block-scaled scheme. ``elem`` is what :func:`harness.mx.quantize_mx` takes (a name, or MXFP8's torch
    dtype), ``elem_name`` its short name, ``scale`` the scale's format name."""

    name: str
    elem: Any
    elem_name: str
    scale: str
    block: int

    @property
    def packed(self) -> bool:
        """Two codes per byte (FP4)."""
        return self.elem_name == "e2m1"

    @property
    def rules(self) -> tuple[str, ...]:
        """The scale rules it can be quantized with (NVFP4's ue4m3 scale is a rounding, not a rule)."""
        return ("nvfp4",) if self.name == "nvfp4" else SCALE_RULES

    @property
    def default_rule(self) -> str:
        return self.rules[0]

    def quantize(self, x: torch.Tensor, *, scale_rule: str | None = None, global_scale: Any = None,
                 pad: bool = False) -> tuple[torch.Tensor, ...]:
        """The reference: (codes, scales) for MX, (codes, scales, global scale) for NVFP4, blocks along the last
        axis (harness.mx.quantize_mx / quantize_nvfp4)."""
        if self.name == "nvfp4":
            if scale_rule not in (None, "nvfp4"):
                raise ValueError(f"scale_rule: nvfp4 has one scale recipe; got {scale_rule!r}")
            return quantize_nvfp4(x, global_scale=global_scale, block=self.block, pad=pad)
        if global_scale is not None:
            raise ValueError(f"global_scale: only nvfp4 has one; {self.name} does not")
        return quantize_mx(x, self.elem, block=self.block, scale_rule=scale_rule or self.default_rule, pad=pad)

    def dequantize(self, q: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """float32 values of a quantized tuple (blocks along the last axis)."""
        want = 3 if self.name == "nvfp4" else 2
        what = f"q: {self.name} is dequantized from a tuple " + (
            "(codes, scales, global_scale)" if want == 3 else "(codes, scales)") + ", as quantize returns it"
        if not isinstance(q, (tuple, list)):
            raise TypeError(f"{what}; got {type(q).__name__}")
        if len(q) != want:
            raise ValueError(f"{what}; got a {type(q).__name__} of {len(q)}")
        if self.name == "nvfp4":
            return dequantize_nvfp4(q[0], q[1], q[2], block=self.block)
        return dequantize_mx(q[0], q[1], self.elem, block=self.block)

    def element_codes(self, codes: torch.Tensor) -> torch.Tensor:
        """One element code per byte (FP4 unpacked along the last axis)."""
        return unpack_fp4(codes) if self.packed else codes

    def __str__(self) -> str:
        return self.name


#: Every MX/NVFP4 scheme by name: element format, scale format and block size.
SCHEMES: dict[str, Scheme] = {
    s.name: s
    for s in (
        Scheme("mxfp4", "e2m1", "e2m1", "e8m0", 32),
        Scheme("nvfp4", "e2m1", "e2m1", "ue4m3", 16),
        Scheme("mxfp6e2m3", "e2m3", "e2m3", "e8m0", 32),
        Scheme("mxfp6e3m2", "e3m2", "e3m2", "e8m0", 32),
        Scheme("mxfp8e4m3", torch.float8_e4m3fn, "e4m3", "e8m0", 32),
        Scheme("mxfp8e5m2", torch.float8_e5m2, "e5m2", "e8m0", 32),
    )
}


def get_scheme(scheme: str | Scheme | Any, arg: str = "scheme") -> Scheme:
    """The scheme named ``scheme`` (an ``MxCase`` gives its own)."""
    inner = getattr(scheme, "scheme", None)
    if isinstance(inner, Scheme):
        return inner
    if isinstance(scheme, Scheme):
        return scheme
    if isinstance(scheme, str) and scheme in SCHEMES:
        return SCHEMES[scheme]
    raise ValueError(f"{arg}: expected one of {', '.join(SCHEMES)}; got {scheme!r}")
