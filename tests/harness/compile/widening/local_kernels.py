"""A kernel defined inside a function, as Triton's own tests and many others define theirs: launch capture's
second opinion on a Triton 3.6 ptxas failure (a fresh process) must find it by its qualified name, and import
this module as the test process did: like Triton's test_core.py, it asks the active driver at import unless the
interpreter runs (no driver on a CPU box)."""

import os

import torch
import triton
import triton.language as tl

WARP = 1 if os.environ.get("TRITON_INTERPRET") == "1" else triton.runtime.driver.active.get_current_target().warp_size


def cast_locally(x: torch.Tensor) -> torch.Tensor:
    @triton.jit
    def kernel(X, Z, SIZE: tl.constexpr):
        off = tl.arange(0, SIZE)
        tl.store(Z + off, tl.load(X + off).to(Z.dtype.element_ty))

    z = torch.empty(x.shape, dtype=torch.bfloat16)
    kernel[(1,)](x, z, SIZE=x.numel(), num_warps=1)
    return z


KERNEL = "local_kernels.cast_locally.<locals>.kernel"
