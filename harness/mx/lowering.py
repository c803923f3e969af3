"""Whether a compiled ``tl.dot_scaled`` runs on native block-scaled MMA or on Triton's emulation, read from its PTX.

Why from the PTX: the same kernel is a tensor-core block-scaled MMA on one target and an upcast to bf16 plus an
ordinary MMA on another, with other speed and other rounding; only the compiled code says which. Native is
``tcgen05.mma ... block_scale`` (sm100, sm103) or ``mma.sync ... block_scale`` (sm120); anything else is the
emulated path. Compile with ``harness.compile.matrix.compile_kernel`` (no GPU needed)::

    dot_scaled_lowering(compile_kernel(kernel, signature=..., constexprs=..., target="sm100"))  # "native"
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["NATIVE_PATTERNS", "dot_scaled_lowering", "native_instructions"]

#: PTX instructions of native block-scaled MMA.
NATIVE_PATTERNS = (re.compile(r"\btcgen05\.mma\S*\.block_scale"), re.compile(r"\bmma\.sync\S*\.block_scale"))


def _ptx(compiled: Any) -> str:
    asm = getattr(compiled, "asm", None)
    ptx = asm.get("ptx") if isinstance(asm, Mapping) else None
    if not isinstance(ptx, str):
        raise ValueError(f"compiled: expected a compiled CUDA kernel with PTX (harness.compile.matrix.compile_kernel);"
                         f" got {type(compiled).__name__} without asm['ptx']")
    return ptx


def native_instructions(compiled: Any) -> list[str]:
    """The PTX lines holding native block-scaled MMA instructions (empty on the emulated path)."""
    return [ln.strip() for ln in _ptx(compiled).splitlines() if any(p.search(ln) for p in NATIVE_PATTERNS)]


def dot_scaled_lowering(compiled: Any) -> str:
    """``"native"`` when the PTX holds block-scaled MMA, else ``"emulated"``."""
    return "native" if native_instructions(compiled) else "emulated"
