"""Host-side grid arithmetic for the launchers.

Why not ``triton.cdiv``: it is a ``@triton.jit`` function, so a host call goes through ``JITFunction.__call__``
and costs ~1.5 us (Triton 3.6 and 3.9, measured on the CPU box, 2026-12-05): several times over, a visible
part of the per-call host budget (<= 25 us per public call).
"""

from __future__ import annotations

__all__ = ["cdiv"]


def cdiv(a: int, b: int) -> int:
    """``ceil(a / b)`` for ints, ``b > 0``."""
    return -(-a // b)
