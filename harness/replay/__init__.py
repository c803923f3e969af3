"""Beyond numerics on the GPU lane: CUDA-graph replay, determinism and batch invariance.

A kernel can compute the right numbers and still be wrong: keep a stale pointer that breaks under CUDA-graph
replay (SageAttention #392), give other bits on a second run (DeepGEMM #444), or give a request other logits in
another batch (vLLM's batch-invariance work). The three asserts run a call several ways and require the same
bits each time; each reports the first differing output and element in one message.

- :func:`assert_graph_replay` (:mod:`harness.replay.graph`): captured, replayed on fresh inputs with poisoned
  outputs, against an eager call;
- :func:`assert_deterministic`, :func:`assert_batch_invariant` (:mod:`harness.replay.invariance`).

All three run on the interpreter lane too (what each checks there is in its module's docstring). The pytest glue
(the ``graph_replay`` marker, fixture and ``--harness-graph-replay``) is :mod:`harness.replay.plugin`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.replay.graph import assert_graph_replay
    from harness.replay.invariance import assert_batch_invariant, assert_deterministic

# Loaded on first use: the plugin module lives in this package, and loading the plugin imports no torch.
_EXPORTS = {"assert_graph_replay": "harness.replay.graph", "assert_deterministic": "harness.replay.invariance",
            "assert_batch_invariant": "harness.replay.invariance"}

__all__ = ["assert_batch_invariant", "assert_deterministic", "assert_graph_replay"]


def __getattr__(name: str) -> Any:
    try:
        module = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'harness.replay' has no attribute {name!r}") from None
    return getattr(importlib.import_module(module), name)
