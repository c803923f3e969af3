"""Dtype cases: (source dtype) × (FP8 format), the axis every low-precision kernel test runs over."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from harness.arch import Arch, supports_format
from harness.fp8 import get_format

__all__ = ["DtypeCase", "SRC_DTYPES", "FP8_FORMATS", "cases"]

#: Short name → torch dtype of the kernel input.
SRC_DTYPES: dict[str, torch.dtype] = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}
#: Canonical FP8 format names, in id order.
FP8_FORMATS: tuple[str, ...] = ("e4nv", "e4b15", "e5m2")


@dataclass(frozen=True)
class DtypeCase:
    """One input dtype feeding one FP8 format; ``id`` (``bf16-e4b15``) is also its tolerance-table key."""

    src: torch.dtype
    src_name: str
    fmt: Any  # harness.fp8.FP8Format

    @property
    def id(self) -> str:
        return f"{self.src_name}-{self.fmt.name}"

    def __str__(self) -> str:
        return self.id


def _names(value: Any, allowed: tuple[str, ...], what: str) -> list[str]:
    if value is None:
        return list(allowed)
    if isinstance(value, str):
        value = [value]
    out = []
    for v in value:
        if v not in allowed:
            raise ValueError(f"dtype_cases({what}=...): {v!r} is not one of {', '.join(allowed)}")
        out.append(v)
    return out


def cases(arch: Arch, *, src: Any = None, fmt: Any = None) -> list[tuple[DtypeCase, str]]:
    """Every requested case with its skip reason on ``arch`` ("" when it runs)."""

    out = []
    for f in _names(fmt, FP8_FORMATS, "fmt"):
        ok, reason = supports_format(arch, f)
        for s in _names(src, tuple(SRC_DTYPES), "src"):
            out.append((DtypeCase(SRC_DTYPES[s], s, get_format(f)), "" if ok else reason))
    out.sort(key=lambda c: (tuple(SRC_DTYPES).index(c[0].src_name), FP8_FORMATS.index(c[0].fmt.name)))
    return out
