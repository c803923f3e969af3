"""The one map between torch float dtypes and the short names the harness prints and keys on.

Why short names: tolerance rows, dtype-case ids, golden metadata and compile signatures all say ``bf16``, not
``torch.bfloat16``; one table keeps them spelled alike.
"""

from __future__ import annotations

import torch

__all__ = ["FLOAT_DTYPES", "short_name", "torch_dtype"]

#: Short name -> torch dtype, for the float dtypes kernels compute in.
FLOAT_DTYPES: dict[str, torch.dtype] = {
    "fp16": torch.float16,
    "bf16": torch.bfloat16,
    "fp32": torch.float32,
    "fp64": torch.float64,
}
_SHORT = {dt: name for name, dt in FLOAT_DTYPES.items()}


def short_name(dtype: torch.dtype) -> str | None:
    """``"bf16"`` for ``torch.bfloat16``; ``None`` for a dtype without a short name (ints, FP8)."""
    return _SHORT.get(dtype)


def torch_dtype(name: str) -> torch.dtype:
    """``torch.bfloat16`` for ``"bf16"``; a ValueError naming the valid names otherwise."""
    try:
        return FLOAT_DTYPES[name]
    except KeyError:
        raise ValueError(f"dtype name {name!r} is not one of {', '.join(FLOAT_DTYPES)}") from None
