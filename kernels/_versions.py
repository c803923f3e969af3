"""The installed Triton's (major, minor): what a launcher or kernel reads where Triton versions compile alike code
differently (``kernels.mx.gemm``'s refusals, ``kernels.mx.quantize``'s dim order). The kernels do not import
``harness`` (they are the code under test), whose own reading is ``harness.versions``."""

from __future__ import annotations

import triton

__all__ = ["triton_version"]


def triton_version() -> tuple[int, int]:
    """(major, minor) of ``triton.__version__``; a minor with a suffix (``9rc1``, ``9+git``) counts its digits."""
    parts = triton.__version__.split(".")
    return int(parts[0]), int("".join(ch for ch in parts[1] if ch.isdigit()) or 0)
