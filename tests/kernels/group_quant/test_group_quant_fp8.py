"""A vLLM-style per-token-group FP8 quant kernel (written here): per group of 128, amax -> scale = amax / 448
-> ``x / scale`` in fp32 -> e4nv, optionally with the scale rounded up to a power of two (ue8m0, through
``tl.log2``/``tl.exp2``).

Both divisions are fp32 ``/``: ``div.full.f32`` on an NVIDIA GPU, approximate (27.6% of quotients off by 1
ulp). GPU lane: the codes and scales are goldens, captured on the H200 (``python -m harness golden regen``).
Interpreter lane: the plugin routes the interpreter's fp32 ``/`` and ``tl.math`` through
``harness.interp.approx_math``, so the CPU reproduces the H200's codes and scales bit for bit; without that
shim the same run differs (the second test shows it does, so the first can fail).
"""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

from harness.arch import supports_format
from harness.compare import assert_close_tol, assert_fp8_close
from harness.interp import approx_math
from harness.interp import casts as interp_casts

GROUP = 128
FP8_MAX = 448.0
EPS = 1e-10
SHAPES = {"t67-h1024": (67, 1024), "t33-h384": (33, 384)}
SRCS = {"fp32": torch.float32, "bf16": torch.bfloat16}
H200 = "sm90"


@triton.jit
def group_quant_fp8(x_ptr, q_ptr, s_ptr, n_cols, eps, fp8_max, GROUP: tl.constexpr, UE8M0: tl.constexpr):
    g = tl.program_id(0)
    per_row = n_cols // GROUP
    base = (g // per_row) * n_cols + (g % per_row) * GROUP
    cols = tl.arange(0, GROUP)
    # harness: equivalent-mutant(drop-f32): x is fp32 or bf16; abs and max are exact in bf16, and eps and scale
    # are fp32, so tl.maximum and x / scale promote x to fp32 before anything rounds
    x = tl.load(x_ptr + base + cols).to(tl.float32)
    amax = tl.maximum(tl.max(tl.abs(x), axis=0), eps)
    scale = amax / fp8_max
    if UE8M0:
        scale = tl.exp2(tl.ceil(tl.log2(scale)))
    # harness: equivalent-mutant(clamp): the e4nv cast saturates (cvt.rn.satfinite on sm89+, docs/MEASUREMENTS.md),
    # so a finite quotient past 448 stores 448 either way; a NaN one (an inf input) clamps to no specified value
    q = tl.clamp(x / scale, -fp8_max, fp8_max)
    tl.store(q_ptr + base + cols, q.to(tl.float8e4nv).to(tl.uint8, bitcast=True))
    tl.store(s_ptr + g, scale)


def _inputs(shape, src, rng):
    t, h = shape
    # per-token magnitudes over 12 decades, a few outliers, one all-zero token (amax = eps)
    mag = torch.exp2(torch.randint(-20, 21, (t, 1), generator=rng).float())
    x = torch.randn(t, h, generator=rng) * mag
    x[::5, ::37] *= 50.0
    x[3] = 0.0
    return x.to(src)


def _quant(x, ue8m0, device):
    t, h = x.shape
    q = torch.empty(t, h, dtype=torch.uint8, device=device)
    s = torch.empty(t * h // GROUP, dtype=torch.float32, device=device)
    group_quant_fp8[(t * h // GROUP,)](x.to(device), q, s, h, EPS, FP8_MAX, GROUP=GROUP, UE8M0=ue8m0)
    return q.cpu(), s.cpu()


def _run(shape, src, ue8m0, rng, device, harness_arch):
    ok, why = supports_format(harness_arch, "e4nv")
    if not ok:
        pytest.skip(why)
    return _quant(_inputs(shape, SRCS[src], rng), ue8m0, device)


def _gold(golden, seed):
    (q, mq), (s, ms) = golden.load("codes"), golden.load("scales")
    assert mq.get("seed") == ms.get("seed") == seed, "golden inputs come from another seed"
    assert mq.get("arch") == ms.get("arch") == H200, f"goldens from {mq.get('arch')}, the proof needs {H200}'s"
    return q.view(torch.uint8), s


def _h200_casts_here():
    t = interp_casts.active_target()
    if t is None or t.name != H200 or not approx_math.installed():
        pytest.skip(f"needs the plugin's {H200} casts and approximate math on the interpreter lane")


@pytest.mark.harness_op("group_quant")
@pytest.mark.parametrize("ue8m0", [False, True], ids=["scale", "ue8m0"])
@pytest.mark.parametrize("src", list(SRCS))
@pytest.mark.parametrize("shape", list(SHAPES))
def test_group_quant_golden(shape, src, ue8m0, rng, seed, device, harness_arch, harness_lane, golden, tolerance):
    q, s = _run(SHAPES[shape], src, ue8m0, rng, device, harness_arch)
    if harness_lane == "gpu":
        golden.check("codes", q.view(torch.float8_e4m3fn), fmt="e4nv")
        golden.check("scales", s)
        return
    _h200_casts_here()
    gq, gs = _gold(golden, seed)
    assert_fp8_close(q, gq, "e4nv", tol=tolerance("golden/group_quant.codes", dtype=src, kind="codes"),
                     op="golden/group_quant.codes", dtype=src)
    assert_close_tol(s, gs, tolerance("golden/group_quant.scales", dtype=src, kind="float"),
                     op="golden/group_quant.scales",
                     dtype=src)
    assert torch.equal(s.view(torch.int32), gs.view(torch.int32)), "scales equal in value but not in bits"


@pytest.mark.interp_only
@pytest.mark.unreported
def test_group_quant_differs_without_approx_math(device, golden):
    """The interpreter's own IEEE division misses the H200's scales, and codes, on the goldens' inputs: the
    golden test above can fail, and what makes it pass is the approximate-math shim."""
    _h200_casts_here()
    scales_off = codes_off = 0
    for shape in SHAPES:
        for src in SRCS:
            param = f"{shape}-{src}-scale"
            q_gold, meta = golden.load("codes", test="test_group_quant_golden", param=param)
            s_gold, _ = golden.load("scales", test="test_group_quant_golden", param=param)
            x = _inputs(SHAPES[shape], SRCS[src], torch.Generator().manual_seed(meta["seed"]))
            with approx_math.suspended():
                q, s = _quant(x, False, device)
            scales_off += int((s.view(torch.int32) != s_gold.view(torch.int32)).sum())
            codes_off += int((q != q_gold.view(torch.uint8)).sum())
    assert scales_off > 0, "IEEE scales equal the H200's"
    assert codes_off > 0, "IEEE codes equal the H200's"
