"""Whether a compiled ``tl.dot_scaled`` runs on native block-scaled MMA or on Triton's emulation, read from its PTX.

Why from the PTX: the same kernel is a tensor-core block-scaled MMA on one target and an upcast to bf16 plus an
ordinary MMA on another, with other speed and other rounding; only the compiled code says which. Native is
``tcgen05.mma ... block_scale`` (sm100, sm103) or ``mma.sync ... block_scale`` (sm120); anything else is the
emulated path (the patterns live in :mod:`harness.compile.lowering`, which launch capture uses too). Compile
with ``harness.compile.matrix.compile_kernel`` (no GPU needed)::

    dot_scaled_lowering(compile_kernel(kernel, signature=..., constexprs=..., target="sm100"))  # "native"
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.compile.lowering import NATIVE_PATTERNS, native_lines, ptx_lowering

__all__ = ["NATIVE_PATTERNS", "dot_scaled_lowering", "native_instructions"]


def _ptx(compiled: Any) -> str:
    asm = getattr(compiled, "asm", None)
    ptx = asm.get("ptx") if isinstance(asm, Mapping) else None
    if not isinstance(ptx, str):
        raise ValueError(f"compiled: expected a compiled CUDA kernel with PTX (harness.compile.matrix.compile_kernel);"
                         f" got {type(compiled).__name__} without asm['ptx']")
    return ptx


def native_instructions(compiled: Any) -> list[str]:
    """The PTX lines holding native block-scaled MMA instructions (empty on the emulated path)."""
    return native_lines(_ptx(compiled))


def dot_scaled_lowering(compiled: Any) -> str:
    """``"native"`` when the PTX holds block-scaled MMA, else ``"emulated"``."""
    return ptx_lowering(_ptx(compiled))
