"""Kernels the GPU runs that the plugin must run too: a bf16 block reduced to one element, a 1-D bf16 scan, a
max/argmax/min/argmin over a slice that is all NaN, an fp32 atomic_xchg.

The GPU's answers, derived from Triton 3.6's and 3.9's PTX for sm90 (``scripts/probe_reduce_nan.py``):
``tl.max``/``tl.min`` combine with ``max.f32``/``min.f32`` (a NaN operand gives the other one, two give NaN);
``argmax``/``argmin`` combine ``(v1, i1), (v2, i2)`` with ``setp.gt``/``setp.lt`` or'ed with ``setp.eq`` and
``i1 < i2``, then ``selp`` the first pair if true, so over NaN every comparison is false and each step keeps
its second pair. The thread that stores holds the lowest-indexed element of every pair it combines (in-thread
tree over its registers in order, then ``shfl.bfly`` and the cross-warp step against higher lanes and warps),
so an all-NaN slice gives the slice's last element: its index ``n - 1`` and NaN. These tests run on the GPU lane
too, which checks that rule on the card.
"""

from __future__ import annotations

import math

import pytest
import torch

triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

N = 16


@triton.jit
def _sum_to_one(x_ptr, o_ptr, BLOCK: tl.constexpr, KEEP: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    if KEEP:
        tl.store(o_ptr + tl.arange(0, 1), tl.sum(x, axis=0, keep_dims=True))
    else:
        tl.store(o_ptr, tl.sum(x, axis=0))


@triton.jit
def _scan_1d(x_ptr, s_ptr, p_ptr, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + i)
    tl.store(s_ptr + i, tl.cumsum(x, axis=0))
    tl.store(p_ptr + i, tl.cumprod(x, axis=0))


@triton.jit
def _arg_rows(x_ptr, v_ptr, i_ptr, m_ptr, ROWS: tl.constexpr, W: tl.constexpr):
    r = tl.arange(0, ROWS)
    x = tl.load(x_ptr + r[:, None] * W + tl.arange(0, W)[None, :])
    vmax, imax = tl.max(x, axis=1, return_indices=True)
    vmin, imin = tl.min(x, axis=1, return_indices=True)
    tl.store(v_ptr + r, vmax)
    tl.store(v_ptr + ROWS + r, vmin)
    tl.store(i_ptr + r, imax)
    tl.store(i_ptr + ROWS + r, imin)
    tl.store(i_ptr + 2 * ROWS + r, tl.argmax(x, axis=1))
    tl.store(i_ptr + 3 * ROWS + r, tl.argmin(x, axis=1))
    tl.store(m_ptr + r, tl.max(x, axis=1))
    tl.store(m_ptr + ROWS + r, tl.min(x, axis=1))


@triton.jit
def _arg_all(x_ptr, v_ptr, i_ptr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    v, i = tl.max(x, axis=0, return_indices=True)
    tl.store(v_ptr, v)
    tl.store(i_ptr, i)
    tl.store(i_ptr + 1, tl.argmin(x, axis=0))


@pytest.mark.parametrize("keep", [False, True], ids=["scalar", "keep_dims"])
def test_bf16_sum_stored_to_one_element(device, keep):
    # 1 + 2 + ... + 16 = 136: every partial sum is exact in bf16, in any order
    x = torch.arange(1, N + 1, dtype=torch.bfloat16, device=device)
    out = torch.zeros(1, dtype=torch.bfloat16, device=device)
    _sum_to_one[(1,)](x, out, BLOCK=N, KEEP=keep)
    assert out.item() == 136.0


def test_bf16_scan_of_a_1d_block(device):
    # small integers and powers of two: every partial sum and product is exact in bf16
    x = torch.tensor([1, 2, -1, 2, 1, 1, -2, 1, 2, 1, 1, -1, 1, 2, 1, 1], dtype=torch.bfloat16, device=device)
    s = torch.zeros(N, dtype=torch.bfloat16, device=device)
    p = torch.zeros(N, dtype=torch.bfloat16, device=device)
    _scan_1d[(1,)](x, s, p, BLOCK=N)
    assert s.tolist() == torch.cumsum(x.float(), 0).tolist()
    assert p.tolist() == torch.cumprod(x.float(), 0).tolist()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_arg_reductions_of_all_nan_rows(device, dtype):
    """Row 1 is all NaN: NaN at index W-1 from max/min with indices, argmax and argmin; NaN from max and min.
    The other rows have distinct values (no ties) and no NaN."""
    rows, w = 4, 8
    x = torch.tensor([[3, 1, 4, -1, 5, 9, 2, 6],
                      [math.nan] * w,
                      [-2, -8, 7, 0.5, -0.5, 8, 1, 3],
                      [0, 1, 2, 3, 4, 5, 6, -6]], dtype=dtype, device=device)
    v = torch.zeros(2 * rows, dtype=dtype, device=device)
    m = torch.zeros(2 * rows, dtype=dtype, device=device)
    i = torch.full((4 * rows,), -1, dtype=torch.int32, device=device)
    _arg_rows[(1,)](x, v, i, m, ROWS=rows, W=w)
    v, m, i = v.cpu().float(), m.cpu().float(), i.cpu().view(4, rows)
    assert i[:, 1].tolist() == [w - 1] * 4
    assert torch.isnan(v[[1, rows + 1]]).all() and torch.isnan(m[[1, rows + 1]]).all()
    ok = [0, 2, 3]
    xs = x.cpu().float()[ok]
    assert i[0, ok].tolist() == i[2, ok].tolist() == xs.argmax(1).tolist()
    assert i[1, ok].tolist() == i[3, ok].tolist() == xs.argmin(1).tolist()
    assert v[ok].tolist() == m[ok].tolist() == xs.amax(1).tolist()
    assert v[[rows + k for k in ok]].tolist() == m[[rows + k for k in ok]].tolist() == xs.amin(1).tolist()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_arg_reductions_of_an_all_nan_block_to_one_element(device, dtype):
    x = torch.full((N,), math.nan, dtype=dtype, device=device)
    v = torch.zeros(1, dtype=dtype, device=device)
    i = torch.full((2,), -1, dtype=torch.int32, device=device)
    _arg_all[(1,)](x, v, i, BLOCK=N)
    assert i.tolist() == [N - 1, N - 1]
    assert torch.isnan(v).all()


@triton.jit
def _xchg(p_ptr, v_ptr, old_ptr, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    m = i < n
    tl.store(old_ptr + i, tl.atomic_xchg(p_ptr + i, tl.load(v_ptr + i), mask=m), mask=m)


def test_fp32_atomic_xchg(device):
    """Triton's interpreter refuses a float xchg ("Unsupported data type"); sm90 compiles it (Triton 3.6/3.9:
    atom.global.gpu.acq_rel.exch.b32).
    One element per slot, so the order of the updates does not matter; NaN and -0 move as bit patterns."""
    p = torch.tensor([1.0, -0.0, math.nan, 4.0, 5.0, 6.0, 7.0, 8.0], device=device)
    v = torch.tensor([-1.0, 2.5, 0.0, -0.0, math.inf, math.nan, 3.0, 9.0], device=device)
    old = torch.zeros(8, device=device)
    before = p.clone()
    _xchg[(1,)](p, v, old, 6, BLOCK=8)
    bits = (lambda t: t.cpu().view(torch.int32).tolist())  # noqa: E731
    assert bits(old[:6]) == bits(before[:6])
    assert bits(p[:6]) == bits(v[:6]) and bits(p[6:]) == bits(before[6:])


@triton.jit
def _atomic_add(p_ptr, v_ptr, old_ptr, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(old_ptr + i, tl.atomic_add(p_ptr + i % 2, tl.load(v_ptr + i)))


def test_fp16_atomic_add_overflows_to_inf(device):
    """Triton's interpreter raises "overflow to signed inf" for an fp16 atomic_add past 65504; the GPU's
    atom.add.noftz.f16 rounds to nearest and overflows to inf. Slot 0 takes 60000 twice, slot 1 -60000 twice."""
    p = torch.tensor([60000.0, -60000.0], dtype=torch.float16, device=device)
    v = torch.tensor([60000.0, -60000.0, 60000.0, -60000.0], dtype=torch.float16, device=device)
    old = torch.zeros(4, dtype=torch.float16, device=device)
    _atomic_add[(1,)](p, v, old, BLOCK=4)
    assert p.tolist() == [math.inf, -math.inf]
    assert sorted(old[[0, 2]].tolist()) == [60000.0, math.inf]
    assert sorted(old[[1, 3]].tolist()) == [-math.inf, -60000.0]


@triton.jit
def _int_sum(x_ptr, o_ptr, BLOCK: tl.constexpr):
    tl.store(o_ptr, tl.sum(tl.load(x_ptr + tl.arange(0, BLOCK)), axis=0))


def test_int32_sum_wraps(device):
    """An int32 sum past 2**31 wraps on the GPU (add.s32); Triton 3.6's interpreter sums in int64 and then
    refuses the scalar ("out of bounds for int32", NumPy 2)."""
    x = torch.tensor([2**30, 2**30, 2**30, 2**30 - 5], dtype=torch.int32, device=device)
    out = torch.zeros(1, dtype=torch.int32, device=device)
    _int_sum[(1,)](x, out, BLOCK=4)
    assert out.item() == 2**32 - 5 - 2**32
