"""Correctness and regression harness for low-precision GPU kernels.

The public assertions are importable from here; they are loaded lazily so that merely loading the pytest
plugin does not import torch.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "assert_close_tol": "harness.compare",
    "assert_fp8_close": "harness.compare",
    "assert_fp8_within_one_ulp": "harness.compare",
    "assert_topk_multiset_equal": "harness.topk",
    "Tolerance": "harness.tolerances",
    "Arch": "harness.arch",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str) -> Any:
    try:
        module = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'harness' has no attribute {name!r}") from None
    return getattr(importlib.import_module(module), name)
