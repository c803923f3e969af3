"""quantize_fp4 bit for bit against harness.mx (and the shipped reference against it), on the interpreter and the
GPU; out= buffers written exactly where the layout says (guard bytes); every bad input named."""

from __future__ import annotations

import math

import pytest
import torch
from mx_inputs import SHAPES, activations

from harness.mx import assert_mx_close, swizzle_scales

pytestmark = pytest.mark.harness_op("mx.quantize")


def _quantize(x, mx_case, layout="linear", out=None):
    from kernels.mx import quantize_fp4
    from kernels.mx.reference import nvfp4_global_scale

    rule = None if mx_case.fmt == "nvfp4" else mx_case.scale_rule
    g = nvfp4_global_scale(x) if mx_case.fmt == "nvfp4" else None
    return quantize_fp4(x, mx_case.fmt, scale_rule=rule, global_scale=g, layout=layout, out=out)


def _want(x, mx_case):
    from kernels.mx.reference import nvfp4_global_scale

    g = nvfp4_global_scale(x.cpu()).reshape(()) if mx_case.fmt == "nvfp4" else None
    return mx_case.scheme.quantize(x.cpu(), scale_rule=mx_case.scale_rule, global_scale=g)


@pytest.mark.mx_cases(rule=["floor", "ceil", "even", "rceil", "nvfp4"])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_quantize_is_bit_exact_against_harness_mx(mx_case, shape, rng, device, tolerance):
    x = activations(*SHAPES[shape], rng).to(mx_case.src)
    got = _quantize(x.to(device), mx_case)
    # the inputs hold NaN and inf on purpose (mx_inputs.activations): their blocks' NaN scales must match
    assert_mx_close(got, _want(x, mx_case), mx_case, tol=tolerance(kind="codes"), source=x.float(), nan_equal=True)


@pytest.mark.mx_cases(rule=["floor", "nvfp4"])
@pytest.mark.parametrize("layout,shape", [("linear", "r37-k96"), ("swizzled", "r130-k160")])
def test_every_block_layout_is_bit_exact(mx_case, layout, shape, rng, device):
    """Each block layout the sweep of benchmarks/bench_mx.py times (threads a block: 1, 2, 4 or all) gives the bits
    of harness.mx, so any of them can ship. The dims are in this Triton's order (the kernel's MIRROR): the lanes of
    Triton 3.6 and 3.9 check one order each. The floor rule reduces exponent fields, the others |x|'s bits as
    NVFP4 does."""
    from kernels.mx import quantize as q
    from kernels.mx.reference import nvfp4_global_scale

    x = activations(*SHAPES[shape], rng).to(mx_case.src).to(device)
    g = nvfp4_global_scale(x).reshape(1) if mx_case.fmt == "nvfp4" else None
    want = _want(x, mx_case)
    rule = None if mx_case.fmt == "nvfp4" else mx_case.scale_rule
    scale_shape = want[1].shape if layout == "linear" else (math.prod(q.swizzled_size(*want[1].shape)),)
    for name in q.block_layouts(mx_case.fmt, x.dtype):
        codes = torch.empty(want[0].shape, dtype=torch.uint8, device=device)
        scales = torch.empty(scale_shape, dtype=torch.uint8, device=device)
        q.launch(x, codes, scales, g, mx_case.fmt, q._checks.scheme_rule(mx_case.fmt, rule), layout,
                 q.launch_config(mx_case.fmt, x.dtype, name))
        got = (codes.cpu(), scales.cpu()) + (() if g is None else (g.cpu().reshape(()),))
        assert_mx_close(got, want, mx_case, layout=layout, nan_equal=True,
                        msg=f"block layout {name!r}, MIRROR={q.MIRROR}")


@pytest.mark.mx_cases(rule=["nvfp4"], src="fp32")
@pytest.mark.parametrize("g", [1.0, 0.75, 0.3, 1e-3, 3e-39])
def test_nvfp4_codes_at_and_beside_every_midpoint(mx_case, g, device):
    """NVFP4 elements on, just below and just above each e2m1 midpoint times the block's scale (the kernel decides
    by comparing, the reference by dividing): ties to even and the decision next to each tie."""
    from kernels.mx import quantize_fp4

    gs = torch.tensor([g], dtype=torch.float32)
    mids = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], dtype=torch.float64)
    rows = []
    for v in (1.5, 2.0, 0.4375, 26.0):  # ue4m3 values of the block scale (amax = 6 v g)
        s = v * gs.double()
        at = (mids * s).float()  # exact when m v g fits fp32's 24 bits, else the nearest fp32
        for x in (at, at.nextafter(torch.full_like(at, 0.0)), at.nextafter(torch.full_like(at, math.inf))):
            block = torch.cat((x, -x, torch.zeros(1), (6 * s).float()))  # 16: amax = 6 v g (nearest fp32)
            rows.append(block)
    x = torch.stack(rows)
    got = quantize_fp4(x.to(device), "nvfp4", global_scale=gs.to(device))
    want = mx_case.scheme.quantize(x, scale_rule=mx_case.scale_rule, global_scale=gs.reshape(()))
    assert torch.equal(got[1].cpu(), want[1]), "block scales"
    assert torch.equal(got[0].cpu(), want[0]), "codes at and beside the midpoints"


@pytest.mark.mx_cases(src="bf16")
def test_swizzled_scales_are_the_linear_ones_swizzled_padding_zero(mx_case, rng, device):
    x = activations(*SHAPES["r130-k160"], rng).to(mx_case.src)
    got = _quantize(x.to(device), mx_case, layout="swizzled")
    want = _want(x, mx_case)
    assert torch.equal(got[1].cpu(), swizzle_scales(want[1]))
    assert_mx_close(tuple(t.cpu() for t in got), want, mx_case, layout="swizzled", nan_equal=True)


@pytest.mark.mx_cases(src="fp32")
@pytest.mark.parametrize("layout", ["linear", "swizzled"])
def test_out_buffers_are_written_exactly_in_bounds(mx_case, layout, rng, device):
    from kernels.mx import BLOCK, swizzled_size

    rows, k = 37, 96
    x = activations(rows, k, rng).to(device)
    guard = 64
    cbuf = torch.full((rows * k // 2 + guard,), 0xA5, dtype=torch.uint8, device=device)
    cols = k // BLOCK[mx_case.fmt]
    n_s = rows * cols if layout == "linear" else swizzled_size(rows, cols)[0] * swizzled_size(rows, cols)[1]
    sbuf = torch.full((n_s + guard,), 0xA5, dtype=torch.uint8, device=device)
    codes = cbuf[: rows * k // 2].view(rows, k // 2)
    scales = sbuf[:n_s].view(rows, cols) if layout == "linear" else sbuf[:n_s]
    _quantize(x, mx_case, layout, out=(codes, scales))
    assert (cbuf[-guard:] == 0xA5).all() and (sbuf[-guard:] == 0xA5).all()
    want = _want(x, mx_case)
    assert torch.equal(codes.cpu(), want[0])
    assert torch.equal(scales.cpu(), want[1] if layout == "linear" else swizzle_scales(want[1]))


def test_the_shipped_reference_dequantizes_as_harness_mx():
    from harness.mx import SCHEMES
    from kernels.mx.reference import dequantize_fp4

    x = activations(37, 96, torch.Generator().manual_seed(3))
    for name in ("mxfp4", "nvfp4"):
        q = SCHEMES[name].quantize(x, global_scale=0.37 if name == "nvfp4" else None)
        got = dequantize_fp4(q[0], q[1], name, q[2] if name == "nvfp4" else None).float()
        assert torch.equal(got.nan_to_num(7.0), SCHEMES[name].dequantize(q).nan_to_num(7.0))


def test_bad_inputs_name_the_argument(device):
    from kernels.mx import quantize_fp4

    x = torch.ones(4, 64, device=device)
    g = torch.ones(1, device=device)
    u8 = torch.zeros(4, 32, dtype=torch.uint8, device=device)
    for call, err, text in [
        (lambda: quantize_fp4(x, "mxfp6"), ValueError, r"scheme: expected one of mxfp4, nvfp4; got 'mxfp6'"),
        (lambda: quantize_fp4(x, scale_rule="round"), ValueError, r"scale_rule: expected one of floor, ceil"),
        (lambda: quantize_fp4(x, "nvfp4", scale_rule="floor", global_scale=g), ValueError, r"scale_rule: nvfp4's"),
        (lambda: quantize_fp4(x, "nvfp4"), ValueError, r"global_scale: nvfp4 needs a one-element float32 tensor"),
        (lambda: quantize_fp4(x, global_scale=g), ValueError, r"global_scale: only nvfp4 has one"),
        (lambda: quantize_fp4(x.long(), "mxfp4"), TypeError, r"x: expected dtype float16, bfloat16 or float32"),
        (lambda: quantize_fp4(x[0], "mxfp4"), ValueError, r"x: expected a 2-D \(rows, K\) tensor; got shape \(64,\)"),
        (lambda: quantize_fp4(x.T, "mxfp4"), ValueError, r"x: expected unit stride along K"),
        (lambda: quantize_fp4(x[:, :48], "mxfp4"), ValueError, r"x: K = 48 is not a multiple of the mxfp4 block"),
        (lambda: quantize_fp4(x, layout="tiled"), ValueError, r"layout: expected 'linear' or 'swizzled'"),
        (lambda: quantize_fp4(x, out=(u8, u8)), ValueError, r"out\[1\] \(scales\): expected shape \(4, 2\)"),
        (lambda: quantize_fp4(x, out=(u8.float(), u8)), TypeError, r"out\[0\] \(codes\): expected a torch.uint8"),
        (lambda: quantize_fp4(x, out=u8), TypeError, r"out: expected a \(codes, scales\) pair of tensors; got Tensor"),
        (lambda: quantize_fp4(x, out=(u8, u8[:, :2], u8)), TypeError,
         r"out: expected a \(codes, scales\) pair of tensors; got tuple"),
        (lambda: quantize_fp4(x, out=[u8]), TypeError, r"out: expected a \(codes, scales\) pair of tensors; got list"),
    ]:
        with pytest.raises(err, match=text):
            call()
