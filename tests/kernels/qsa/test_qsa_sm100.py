"""The QSA FP8 logits kernel on the interpreter as sm100 computes it: its [128, D] x [D, 16] FP8 tl.dot (8 warps)
is a tcgen05.mma kind::f8f6f4 tile (harness.tensor_cores.tcgen05.LOWERING), whose products the published tcgen05
model gives (validated on B200 by its authors; not measured here). Expected: Σ_h relu(s) with s from the model;
the head sum is the interpreter's fp32 tl.sum, so the comparison allows its order (1e-6 relative) and nothing
more, and sm90's FP8 wgmma (13-bit window) gives products that this tolerance tells apart."""

from __future__ import annotations

import pytest
import torch

from harness import tensor_cores as tc

pytestmark = pytest.mark.interp_only
triton = pytest.importorskip("triton")


@pytest.fixture
def sm100():
    from harness.interp import dots, scaled_dots
    from harness.interp.patch import Patch, lift

    if not dots.installed():
        pytest.skip("the plugin's tl.dot shim is not installed on this lane")
    with lift(dots.TAG), lift(scaled_dots.TAG), Patch.context() as patch:
        assert dots.install(patch, "sm100")
        yield


def _model(arch: str, instr: str):
    def relu_head_sum(k: torch.Tensor, qr: torch.Tensor) -> torch.Tensor:
        ke = k.to(torch.float8_e4m3fn)  # the cache's e4m3 values, exactly
        out = [torch.relu(tc.dot(ke, q.T.contiguous().to(torch.float8_e4m3fn), arch=arch, instr=instr)).sum(1)
               for q in qr]
        return torch.stack(out)
    return relu_head_sum


def test_fp8_prefill_logits_on_sm100_are_the_kind_f8f6f4_model(sm100, rng):
    import kernels.qsa as qsa
    from kernels.qsa.inputs import build_case, prefill_rows
    from kernels.qsa.reference import _per_row

    cfg = qsa.IndexerConfig(num_heads=4, head_dim=64, compress_ratio=4, token_topk=24, page_size=7,
                            indexer_kv_dtype="fp8")
    case = build_case(cfg, [300, 97], rng=rng, device="cpu")
    _, row_req, q, vis = prefill_rows(case, [5, 3], rng=rng)
    got = qsa.paged_logits(case.cache, q, case.block_table, row_req, vis)
    args = (q, case.cache.kv, case.block_table, row_req, vis, got.shape[1])
    want = _per_row(_model("sm100", "tcgen05"), -torch.inf, *args)
    old = _per_row(_model("sm90", "wgmma"), -torch.inf, *args)
    torch.testing.assert_close(got, want, rtol=1e-6, atol=0)
    fin = torch.isfinite(want)
    assert ((want[fin] - old[fin]).abs() > 1e-5 * want[fin].abs()).any()
