"""The torch float dtypes kernels compute in, by the short names the harness prints and keys on (``bf16``, not
``torch.bfloat16``): tolerance rows, dtype-case ids, golden metadata and compile signatures spell them alike.
The names come from :data:`harness.names.NAMES`."""

from __future__ import annotations

import torch

from harness.names import NAMES

__all__ = ["FLOAT_DTYPES", "short_name", "torch_dtype"]

#: Short name -> torch dtype, for the float dtypes kernels compute in.
FLOAT_DTYPES: dict[str, torch.dtype] = {n: NAMES[n].torch_dtype for n in ("fp16", "bf16", "fp32", "fp64")}
_SHORT = {dt: name for name, dt in FLOAT_DTYPES.items()}


def short_name(dtype: torch.dtype) -> str | None:
    """``"bf16"`` for ``torch.bfloat16``; ``None`` for a dtype without a short name (ints, FP8). Anything but a
    torch dtype is a TypeError: a name such as ``"bf16"`` answered None would read as "no short name"."""
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"dtype: expected a torch.dtype such as torch.bfloat16; got {type(dtype).__name__}")
    return _SHORT.get(dtype)


def torch_dtype(name: str) -> torch.dtype:
    """``torch.bfloat16`` for ``"bf16"``; a ValueError naming the valid names otherwise."""
    if not isinstance(name, str):
        raise TypeError(f"name: expected a dtype name, one of {', '.join(FLOAT_DTYPES)}; got {type(name).__name__}")
    try:
        return FLOAT_DTYPES[name]
    except KeyError:
        raise ValueError(f"dtype name {name!r} is not one of {', '.join(FLOAT_DTYPES)}") from None
