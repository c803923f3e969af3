"""Correctness and regression harness for low-precision GPU kernels.

The public assertions are importable from here. They are loaded lazily, so that loading the pytest plugin
imports no torch; the ``TYPE_CHECKING`` imports let tools see the public names.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.arch import Arch
    from harness.compare import assert_close_tol, assert_fp8_close, assert_fp8_within_one_ulp
    from harness.replay import assert_batch_invariant, assert_deterministic, assert_graph_replay
    from harness.tolerances import Tolerance
    from harness.topk import assert_topk_multiset_equal

__version__ = "0.1.0"

_EXPORTS = {
    "assert_close_tol": "harness.compare",
    "assert_fp8_close": "harness.compare",
    "assert_fp8_within_one_ulp": "harness.compare",
    "assert_topk_multiset_equal": "harness.topk",
    "assert_graph_replay": "harness.replay",
    "assert_deterministic": "harness.replay",
    "assert_batch_invariant": "harness.replay",
    "Tolerance": "harness.tolerances",
    "Arch": "harness.arch",
}

__all__ = ["Arch", "Tolerance", "__version__", "assert_batch_invariant", "assert_close_tol", "assert_deterministic",
           "assert_fp8_close", "assert_fp8_within_one_ulp", "assert_graph_replay", "assert_topk_multiset_equal"]


def __getattr__(name: str) -> Any:
    try:
        module = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'harness' has no attribute {name!r}") from None
    return getattr(importlib.import_module(module), name)
