"""kernels/mx on the interpreter as sm100 computes it: quantize_fp4 then scaled_gemm, whose 128 x 128 x 128
tl.dot_scaled tiles Triton runs on native tcgen05.mma kind::mxf4 (MXFP4) / kind::mxf4nvf4 scale_vec::4X (NVFP4)
(harness.tensor_cores.tcgen05.LOWERING). The expected words come from the tcgen05 model: published (validated on
B200 by its authors; not measured here). The interpreter's tl.dot / tl.dot_scaled shims are installed for sm100 in
a patch layer of the test's own, as ``--harness-arch=sm100`` installs them for a session."""

from __future__ import annotations

import pytest
import torch
from mx_inputs import activations

from harness.compile.launches import skip_compile

pytestmark = pytest.mark.interp_only
triton = pytest.importorskip("triton")
# as in test_mx_gemm (by name, so either module alone registers it): scaled_gemm refuses GPUs below sm80, and
# launch capture's sm75 compile of it is an FMA dot that takes minutes
skip_compile("_scaled_gemm_kernel", "sm75", reason="scaled_gemm refuses GPUs below sm80 (gemm_refusal)")


@pytest.fixture
def sm100():
    """The tl.dot and tl.dot_scaled shims for sm100 over the session's (lifted meanwhile)."""
    from harness.interp import dots, scaled_dots
    from harness.interp.patch import Patch, lift

    if not (dots.installed() and scaled_dots.installed()):
        pytest.skip("the plugin's dot shims are not installed on this lane")
    with lift(dots.TAG), lift(scaled_dots.TAG), Patch.context() as patch:
        assert dots.install(patch, "sm100") and scaled_dots.install(patch, "sm100")
        yield


def _model_gemm(qa, qb, scheme: str, arch: str, instr: str) -> torch.Tensor:
    """scaled_gemm's one output tile (M, N <= 128) as the model computes it: its K loop of 128-wide dot_scaled
    tiles chained through the accumulator, then (NVFP4) the product of the global scales."""
    from harness.tensor_cores import dot_scaled

    (ca, sa, *ga), (cb, sb, *gb) = qa, qb
    M, N, K = ca.shape[0], cb.shape[0], 2 * ca.shape[1]
    group = 16 if scheme == "nvfp4" else 32
    pad_a = torch.zeros(128, K // 2, dtype=torch.uint8)
    pad_a[:M] = ca
    pad_b = torch.zeros(128, K // 2, dtype=torch.uint8)
    pad_b[:N] = cb
    sdt = torch.float8_e4m3fn if scheme == "nvfp4" else torch.uint8
    s_a = torch.zeros(128, K // group, dtype=torch.uint8)
    s_a[:M] = sa
    s_b = torch.zeros(128, K // group, dtype=torch.uint8)
    s_b[:N] = sb
    acc = torch.zeros(128, 128)
    for k0 in range(0, K, 128):
        ks, gs = slice(k0 // 2, (k0 + 128) // 2), slice(k0 // group, (k0 + 128) // group)
        acc = dot_scaled(pad_a[:, ks], s_a[:, gs].contiguous().view(sdt), "e2m1", pad_b[:, ks].T.contiguous(),
                         s_b[:, gs].contiguous().view(sdt), "e2m1", acc, arch=arch, instr=instr)
    if scheme == "nvfp4":
        acc = acc * (ga[0].float() * gb[0].float())
    return acc[:M, :N]


@pytest.mark.parametrize("scheme", ["mxfp4", "nvfp4"])
def test_scaled_gemm_on_sm100_is_the_native_tcgen05_model(sm100, scheme, rng):
    from kernels._interpreter import runs_on_interpreter
    from kernels.mx import quantize_fp4, scaled_gemm
    from kernels.mx.gemm import _scaled_gemm_kernel, gemm_refusal
    from kernels.mx.reference import nvfp4_global_scale
    why = gemm_refusal(scheme, interpreter=runs_on_interpreter(_scaled_gemm_kernel), capability=None)
    if why is not None:
        pytest.skip(why)
    M, N, K = 96, 80, 256
    q = []
    for rows in (M, N):
        x = activations(rows, K, rng, specials=False)
        q.append(quantize_fp4(x, scheme, global_scale=nvfp4_global_scale(x) if scheme == "nvfp4" else None))
    c = scaled_gemm(q[0], q[1], scheme)
    want = _model_gemm(q[0], q[1], scheme, "sm100", "tcgen05")
    assert torch.equal(c.view(torch.int32), want.view(torch.int32))
    # and it is sm100's product, not sm90's emulation (bf16 upcast, wgmma): the windows differ somewhere
    old = _model_gemm(q[0], q[1], scheme, "sm90", "wgmma")
    assert not torch.equal(c.view(torch.int32), old.view(torch.int32))
