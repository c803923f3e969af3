"""The one naming table for the number formats the harness speaks of.

Why one table: a format has a name in every library around a kernel. Triton says ``tl.float8e4nv`` (its type
prints ``fp8e4nv``), torch ``torch.float8_e4m3fn``, ml_dtypes ``float8_e4m3fn``, the OCP MX spec and
``tl.dot_scaled`` ``e4m3``, and the harness's tolerance rows, dtype-case ids, goldens and compile signatures
``e4nv`` (Triton's own short name, which tells it apart from AMD's ``e4m3fnuz``). Each module used to keep its
own map between a few of these; :data:`NAMES` is the one they all read, and :func:`format_name` resolves any of
them to the harness's name. Nothing here imports torch (the plugin's modules read it at load).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

__all__ = ["NAMES", "FormatNames", "format_name", "names"]


@dataclass(frozen=True)
class FormatNames:
    """One format's names. ``name`` is the harness's; ``spec`` the OCP / ``tl.dot_scaled`` / tensor-core
    models' name (the same, except ``e4m3`` for ``e4nv``); ``triton`` the ``triton.language`` attribute and
    ``triton_type`` what its type prints (``str(tl.float8e4nv)``); ``torch`` and ``ml_dtypes`` the attribute
    names in those libraries (``None`` where the library has no such type). ``aliases`` are further spellings
    users write."""

    name: str
    spec: str
    triton: str | None
    triton_type: str | None
    torch: str | None
    ml_dtypes: str | None
    aliases: tuple[str, ...] = ()

    @property
    def torch_dtype(self) -> Any:
        """The torch dtype, where this torch has it (torch is imported for it)."""
        if not self.torch:
            return None
        import torch

        return getattr(torch, self.torch, None)

    def spellings(self) -> tuple[str, ...]:
        """Every name of the format, lower case."""
        all_ = (self.name, self.spec, self.triton, self.triton_type, self.torch, self.ml_dtypes, *self.aliases)
        return tuple(dict.fromkeys(s.lower() for s in all_ if s))


#: Every format by the harness's name. Floats first, then FP8 (Triton's and AMD's), then the MX element and
#: scale formats.
NAMES: dict[str, FormatNames] = {
    n.name: n
    for n in (
        FormatNames("fp16", "fp16", "float16", "fp16", "float16", None, ("half",)),  # numpy's own, not ml_dtypes'
        FormatNames("bf16", "bf16", "bfloat16", "bf16", "bfloat16", "bfloat16"),
        FormatNames("fp32", "fp32", "float32", "fp32", "float32", None, ("float",)),
        FormatNames("fp64", "fp64", "float64", "fp64", "float64", None, ("double",)),
        FormatNames("e4nv", "e4m3", "float8e4nv", "fp8e4nv", "float8_e4m3fn", "float8_e4m3fn",
                    ("e4m3fn", "fp8_e4m3")),
        FormatNames("e5m2", "e5m2", "float8e5", "fp8e5", "float8_e5m2", "float8_e5m2", ("e5", "fp8_e5m2")),
        FormatNames("e4b15", "e4b15", "float8e4b15", "fp8e4b15", None, None),
        FormatNames("e4m3fnuz", "e4m3fnuz", "float8e4b8", "fp8e4b8", "float8_e4m3fnuz", "float8_e4m3fnuz"),
        FormatNames("e5m2fnuz", "e5m2fnuz", "float8e5b16", "fp8e5b16", "float8_e5m2fnuz", "float8_e5m2fnuz"),
        FormatNames("e2m1", "e2m1", None, None, "float4_e2m1fn_x2", "float4_e2m1fn", ("fp4", "mxfp4")),
        FormatNames("e2m3", "e2m3", None, None, None, "float6_e2m3fn"),
        FormatNames("e3m2", "e3m2", None, None, None, "float6_e3m2fn"),
        FormatNames("e8m0", "e8m0", None, None, "float8_e8m0fnu", "float8_e8m0fnu"),
    )
}

_BY_SPELLING: dict[str, str] = {s: n.name for n in NAMES.values() for s in n.spellings()}


def format_name(fmt: object, arg: str = "fmt") -> str:
    """The harness's name of ``fmt``: any spelling in :data:`NAMES` (case-insensitive), a torch dtype or a
    Triton dtype. A ``ValueError`` naming ``arg`` and the known names otherwise."""
    torch = sys.modules.get("torch")  # a torch dtype exists only once torch is imported
    if torch is not None and isinstance(fmt, torch.dtype):
        for n in NAMES.values():
            if n.torch_dtype == fmt:
                return n.name
        raise ValueError(f"{arg}: torch dtype {fmt} is none of the formats the harness knows "
                         f"({', '.join(NAMES)})")
    key = fmt if isinstance(fmt, str) else getattr(fmt, "scalar", None)
    if key is not None and not isinstance(key, str):
        key = str(key)  # a Triton dtype prints its type name (fp8e4nv, bf16, ...)
    if isinstance(key, str) and key.strip().lower() in _BY_SPELLING:
        return _BY_SPELLING[key.strip().lower()]
    raise ValueError(f"{arg}: {fmt!r} is none of the formats the harness knows ({', '.join(NAMES)}, or their "
                     f"Triton, torch, ml_dtypes and OCP names)")


def names(fmt: object, arg: str = "fmt") -> FormatNames:
    """The :class:`FormatNames` row of ``fmt`` (any spelling :func:`format_name` takes)."""
    return NAMES[format_name(fmt, arg)]
