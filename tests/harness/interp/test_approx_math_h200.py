"""Triton's approximate fp32 math on the H200 (goldens) against the interpreter with the plugin's
``harness.interp.approx_math`` shim: bit for bit on every edge value (each exponent field x 8 mantissas x 2
signs), random bit patterns, and (exp, exp2) the integers and their neighbours where EX2's fixed-point
negation shows. The model was validated on all 2^32 inputs per op on the H200 (docs/MEASUREMENTS.md); this
keeps a sample of that ground truth in the repo, so a broken model or shim goes red on the CPU.
"""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

from harness.interp import approx_math

OPS = ["div", "rcp", "sqrt", "rsqrt", "exp", "exp2", "log2", "log"]
BLOCK = 1024


@triton.jit
def _approx_op(x_ptr, y_ptr, z_ptr, n, OP: tl.constexpr, BLOCK: tl.constexpr):
    off = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = off < n
    x = tl.load(x_ptr + off, mask=m, other=1.0).to(tl.float32)  # fp32 math (launch capture widens dtypes)
    if OP == 0:  # div
        r = x / tl.load(y_ptr + off, mask=m, other=1.0).to(tl.float32)
    elif OP == 1:  # rcp
        r = 1.0 / x
    elif OP == 2:  # sqrt
        r = tl.sqrt(x)
    elif OP == 3:  # rsqrt
        r = tl.math.rsqrt(x)
    elif OP == 4:  # exp
        r = tl.exp(x)
    elif OP == 5:  # exp2
        r = tl.exp2(x)
    elif OP == 6:  # log2
        r = tl.log2(x)
    else:  # log
        r = tl.log(x)
    tl.store(z_ptr + off, r, mask=m)


def _bits(v):
    return torch.tensor(v, dtype=torch.int64).to(torch.int32).view(torch.float32)


def _edges(rng):
    mants = [0, 1, 2, 0x400000, 0x7FFFFE, 0x7FFFFF] + torch.randint(0, 1 << 23, (2,), generator=rng).tolist()
    return _bits([(s << 31) | (e << 23) | m for s in (0, 1) for e in range(256) for m in mants])


def _inputs(op, rng):
    """(x, y) for ``op``: edges, 8192 random bit patterns, and for the exponentials every integer in
    [-130, 130] with its two fp32 neighbours and the quarter points between."""
    rnd = lambda: torch.randint(-(2**31), 2**31, (8192,), generator=rng, dtype=torch.int64).to(torch.int32).view(  # noqa: E731
        torch.float32)
    x = torch.cat([_edges(rng), rnd()])
    if op in ("exp", "exp2"):
        ints = torch.arange(-130, 131, dtype=torch.float32)
        near = torch.cat([ints, torch.nextafter(ints, ints + 1), torch.nextafter(ints, ints - 1), ints + 0.25])
        x = torch.cat([x, near if op == "exp2" else near / torch.tensor(1.4426950216293334961)])
    if op != "div":
        return x, x
    e = _edges(rng)
    pick = torch.randint(0, e.numel(), (2, 8192), generator=rng)
    quant = torch.rand(8192, generator=rng) * torch.exp2(torch.randint(-30, 31, (8192,), generator=rng).float())
    xs = torch.cat([e[pick[0]], rnd(), (torch.rand(8192, generator=rng) * 2 - 1) * quant])
    ys = torch.cat([e[pick[1]], rnd(), quant / 448.0])
    return xs, ys


def _run(op, x, y, device):
    z = torch.empty_like(x, device=device)
    grid = (triton.cdiv(x.numel(), BLOCK),)
    _approx_op[grid](x.to(device), y.to(device), z, x.numel(), OP=OPS.index(op), BLOCK=BLOCK)
    return z.cpu()


@pytest.mark.interp_only
def test_the_plugin_installs_approximate_math_on_the_interpreter_lane(harness_arch):
    """The H200 tests here and in tests/kernels skip where the shim is off: on an NVIDIA arch it must be on, under
    the lowering shim that wraps the same builder methods."""
    if not approx_math.applies_to(harness_arch):
        pytest.skip(f"{harness_arch.name}: the shim models NVIDIA math only")
    assert approx_math.installed()


@pytest.mark.harness_op("approx_math")
@pytest.mark.parametrize("op", OPS)
def test_approx_math_h200(op, rng, seed, device, harness_lane, golden):
    x, y = _inputs(op, rng)
    z = _run(op, x, y, device)
    bits = z.view(torch.int32)
    if harness_lane == "gpu":
        golden.check("result_bits", bits)
        return
    if not approx_math.installed():
        pytest.skip("the plugin's approximate-math shim is not installed (an AMD --harness-arch?)")
    gold, meta = golden.load("result_bits")
    assert meta.get("seed") == seed and meta.get("arch") == "sm90", meta
    g = gold.view(torch.float32)
    bad = (bits != gold) & ~(torch.isnan(z) & torch.isnan(g))  # NaN payloads are not compared
    idx = bad.nonzero().flatten()[:8].tolist()
    assert not bad.any(), (
        f"{op}: {int(bad.sum())} / {bad.numel()} results differ from the H200; first at {idx}: "
        + ", ".join(f"x={x[i].item()!r} y={y[i].item()!r} interp={z[i].item()!r} h200={g[i].item()!r}" for i in idx))
