"""harness.interp.dots (installed by the plugin on the interpreter lane): a user's tl.dot computes
harness.tensor_cores.dot for the session's arch, bit for bit; bf16 is no longer the raw-bit product."""

from __future__ import annotations

import pytest
import torch

from harness import tensor_cores
from harness.interp import dots

pytestmark = pytest.mark.interp_only
triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2,
          "fp32": torch.float32}


@triton.jit
def _dot_tile(a_ptr, b_ptr, c_ptr, o_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr, BK: tl.constexpr,
              HAS_ACC: tl.constexpr):
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    rk = tl.arange(0, BK)
    if HAS_ACC:
        acc = tl.load(c_ptr + rm[:, None] * N + rn[None, :]).to(tl.float32)  # widened variants compile too
    else:
        acc = tl.zeros((M, N), dtype=tl.float32)
    for k0 in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k0 + rk)[None, :])
        b = tl.load(b_ptr + (k0 + rk)[:, None] * N + rn[None, :]).to(a.dtype)  # widened variants: one dtype
        acc = tl.dot(a, b, acc)
    tl.store(o_ptr + rm[:, None] * N + rn[None, :], acc)


# FP8 is not here: the launch capture's widened variants (fp8 <-> fp8 casts) do not compile
@pytest.mark.parametrize("pair", ["fp16", "bf16", "fp32"])
@pytest.mark.parametrize("with_acc", [False, True], ids=["noacc", "acc"])
def test_interpreted_dot_is_the_model(pair: str, with_acc: bool) -> None:
    assert dots.installed()
    fa, fb = (pair.split("x") * 2)[:2]
    g = torch.Generator().manual_seed(11)
    M, N, K, BK = 64, 32, 128, 64
    a = (torch.randn(M, K, generator=g) * 3).to(DTYPES[fa])
    b = (torch.randn(K, N, generator=g) * 3).to(DTYPES[fb])
    acc = torch.randn(M, N, generator=g) * 20
    out = torch.empty(M, N)
    _dot_tile[(1,)](a, b, acc, out, M=M, N=N, K=K, BK=BK, HAS_ACC=with_acc)
    want = None if not with_acc else acc
    for k0 in range(0, K, BK):
        want = tensor_cores.dot(a[:, k0:k0 + BK], b[k0:k0 + BK], want, arch="sm90")
    assert torch.equal(out.view(torch.int32), want.view(torch.int32))
    if pair == "bf16":  # and it is a dot product at all (the interpreter's own: raw uint16 products)
        ref = a.float() @ b.float() + (acc if with_acc else 0)
        assert torch.allclose(out, ref, rtol=1e-3, atol=1e-3)
