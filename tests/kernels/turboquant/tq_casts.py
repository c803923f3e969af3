"""The harness's hardware cast model in the shape the turboquant reference takes (``reference.Casts``).

A plain module beside the tests (``from tq_casts import hw_casts``: pytest puts each test file's directory on
``sys.path``): ``kernels.turboquant.reference`` never imports the harness, the tests hand it the arch's casts.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from harness.arch import Arch
from harness.fp8 import encode, upcast_fp32

__all__ = ["hw_casts"]


@dataclass(frozen=True)
class _HarnessCasts:
    arch: str | Arch

    def upcast_fp32(self, x: torch.Tensor) -> torch.Tensor:
        return upcast_fp32(x, arch=self.arch)

    def encode(self, x: torch.Tensor, fmt: str) -> torch.Tensor:
        return encode(x, fmt, arch=self.arch)


def hw_casts(arch: str | Arch) -> _HarnessCasts:
    """The casts ``arch`` performs (``"interp"``, an :class:`~harness.arch.Arch`, ...), bit for bit as
    ``harness.fp8`` models them."""
    return _HarnessCasts(arch)
