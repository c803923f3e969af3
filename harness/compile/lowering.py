"""Whether compiled PTX runs ``tl.dot_scaled`` on native block-scaled MMA or on Triton's emulation.

Why from the PTX: the same kernel is a tensor-core block-scaled MMA on one target and an upcast to bf16 plus an
ordinary MMA on another, with other speed and other rounding; only the compiled code says which. Native is
``tcgen05.mma ... block_scale`` (sm100, sm103) or ``mma.sync ... block_scale`` (sm120); anything else is the
emulated path. The one place these patterns live: launch capture's disk cache records the lowering per target
(:func:`harness.compile.disk_cache.compile_launch`) and :mod:`harness.mx.lowering` reads it from a compiled kernel.

Public API: :data:`NATIVE_PATTERNS`, :func:`native_lines`, :func:`ptx_lowering`.
"""

from __future__ import annotations

import re

__all__ = ["NATIVE_PATTERNS", "native_lines", "ptx_lowering"]

#: PTX instructions of native block-scaled MMA.
NATIVE_PATTERNS = (re.compile(r"\btcgen05\.mma\S*\.block_scale"), re.compile(r"\bmma\.sync\S*\.block_scale"))


def native_lines(ptx: str) -> list[str]:
    """The PTX lines holding native block-scaled MMA instructions (empty on the emulated path)."""
    return [ln.strip() for ln in ptx.splitlines() if any(p.search(ln) for p in NATIVE_PATTERNS)]


def ptx_lowering(ptx: str) -> str:
    """``"native"`` when the PTX holds block-scaled MMA, else ``"emulated"``."""
    return "native" if native_lines(ptx) else "emulated"
