"""Test-case axes: (source dtype) × (FP8 format) for ``dtype_case``; (source dtype) × (block-scaled scheme) × (scale
rule) for ``mx_case``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from harness.arch import Arch, supports_format
from harness.fp8 import get_format

__all__ = ["DtypeCase", "MxCase", "SRC_DTYPES", "FP8_FORMATS", "MX_DEFAULT_SCHEMES", "cases", "mx_cases"]

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


def _names(value: Any, allowed: tuple[str, ...], what: str, marker: str = "dtype_cases") -> list[str]:
    """The names a marker keyword selects: None is all of ``allowed``, a str one name, else an iterable of names.
    An empty selection is refused: it would parametrize nothing, one silent skip instead of the test."""
    if value is None:
        return list(allowed)
    if isinstance(value, str):
        value = [value]
    try:
        items = list(value)
    except TypeError:
        raise ValueError(f"{marker}({what}={value!r}): expected a name or a list of names from "
                         f"{', '.join(allowed)}, got {type(value).__name__}") from None
    if not items:
        raise ValueError(f"{marker}({what}={value!r}): selects nothing; expected at least one of {', '.join(allowed)} "
                         f"(leave {what}= out for the default)")
    out = []
    for v in items:
        if v not in allowed:
            raise ValueError(f"{marker}({what}=...): {v!r} is not one of {', '.join(allowed)}")
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


# --- the mx axis: (source dtype) x (block-scaled scheme) x (scale rule) -------------------------------------

#: Schemes on the mx_case axis unless a test's ``mx_cases`` marker names others (FP4, the formats kernels ship).
MX_DEFAULT_SCHEMES: tuple[str, ...] = ("mxfp4", "nvfp4")


@dataclass(frozen=True)
class MxCase:
    """One input dtype quantized to one block-scaled scheme by one scale rule. ``id`` (``bf16-nvfp4``, or
    ``bf16-mxfp4-rceil`` for a rule other than the scheme's default) is also its tolerance-table key."""

    src: torch.dtype
    src_name: str
    scheme: Any  # harness.mx.schemes.Scheme
    scale_rule: str

    @property
    def id(self) -> str:
        rule = "" if self.scale_rule == self.scheme.default_rule else f"-{self.scale_rule}"
        return f"{self.src_name}-{self.scheme.name}{rule}"

    @property
    def fmt(self) -> str:
        return self.scheme.name

    def quantize(self, x: torch.Tensor, **kwargs: Any) -> tuple[torch.Tensor, ...]:
        """The reference quantization of ``x`` (cast to ``src`` first) under this case's scheme and rule."""
        return self.scheme.quantize(x.to(self.src), scale_rule=self.scale_rule, **kwargs)

    def __str__(self) -> str:
        return self.id


def mx_cases(*, src: Any = None, fmt: Any = None, rule: Any = None) -> list[MxCase]:
    """Every requested mx case, in id order; a rule a scheme does not have is skipped for that scheme (NVFP4 has
    only its own), and a rule no requested scheme has is an error."""
    from harness.mx.schemes import SCHEMES

    schemes = _names(fmt if fmt is not None else list(MX_DEFAULT_SCHEMES), tuple(SCHEMES), "fmt", "mx_cases")
    all_rules = tuple(dict.fromkeys(r for s in SCHEMES.values() for r in s.rules))
    rules = None if rule is None else _names(rule, all_rules, "rule", "mx_cases")
    out = []
    for s in _names(src, tuple(SRC_DTYPES), "src", "mx_cases"):
        for name in schemes:
            scheme = SCHEMES[name]
            for r in (scheme.default_rule,) if rules is None else [r for r in rules if r in scheme.rules]:
                out.append(MxCase(SRC_DTYPES[s], s, scheme, r))
    if not out:
        raise ValueError(f"mx_cases(rule={rule!r}): none of the schemes {', '.join(schemes)} has that rule")
    return out
