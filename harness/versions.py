"""The installed Triton's version: the one place it is read.

Why it matters: the cast lowering, the interpreter's quirks and what the compiler refuses all change between
Triton releases (3.6 on the GPU image, the newest from ``pip install``), so every model that differs by
version asks here.
"""

from __future__ import annotations

import functools
import re
from importlib.metadata import PackageNotFoundError, version

__all__ = ["triton_at_least", "triton_version"]


@functools.cache
def triton_version() -> str:
    """The installed Triton's version string (``"3.6.0"``), read from its package metadata without importing
    Triton; ``"0"`` when it is not installed."""
    try:
        return version("triton")
    except PackageNotFoundError:  # pragma: no cover - triton is a hard dependency
        return "0"


def triton_at_least(major: int, minor: int) -> bool:
    """Whether the installed Triton is ``major.minor`` or newer."""
    m = re.match(r"(\d+)\.(\d+)", triton_version())
    return m is not None and (int(m.group(1)), int(m.group(2))) >= (major, minor)
