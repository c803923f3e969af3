"""Everyday-pattern kernels whose outputs depend on the compiler's choices around the arithmetic: fp
contraction of ``a * b + c`` and the order of reductions and scans (issue 38).

They are written the way norm / softmax / quant kernels are written: one program per row of a row-major
``(M, N)`` block, ``BLOCK_N`` a power of two covering the row. ``scripts/capture_lowering_goldens.py`` runs them
on a GPU and saves inputs and outputs; the CPU lane reruns them from here. This module imports triton and
nothing of the harness, so the capture script runs on a bare GPU image.

Each ``PATTERNS`` entry names a kernel and how to launch it (:func:`launch`).
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def affine(x_ptr, y_ptr, s, b, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < N
    x = tl.load(x_ptr + offs, mask=m)
    y = x * s + b
    tl.store(y_ptr + offs, y, mask=m)


@triton.jit
def fma_elementwise(a_ptr, b_ptr, c_ptr, y_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < N
    a = tl.load(a_ptr + offs, mask=m)
    b = tl.load(b_ptr + offs, mask=m)
    c = tl.load(c_ptr + offs, mask=m)
    y = a * b + c
    tl.store(y_ptr + offs, y, mask=m)


@triton.jit
def acc_loop(a_ptr, b_ptr, y_ptr, K, N, BLOCK: tl.constexpr):
    # y[n] = sum_k a[k, n] * b[k, n], accumulated as `acc += a * b` in fp32.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < N
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for k in range(0, K):
        a = tl.load(a_ptr + k * N + offs, mask=m).to(tl.float32)
        b = tl.load(b_ptr + k * N + offs, mask=m).to(tl.float32)
        acc += a * b
    tl.store(y_ptr + offs, acc, mask=m)


@triton.jit
def layernorm(x_ptr, w_ptr, b_ptr, y_ptr, N, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    m = cols < N
    x = tl.load(x_ptr + row * N + cols, mask=m, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    d = tl.where(m, x - mean, 0.0)
    var = tl.sum(d * d, axis=0) / N
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + cols, mask=m).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=m).to(tl.float32)
    y = (x - mean) * rstd * w + b
    tl.store(y_ptr + row * N + cols, y.to(y_ptr.dtype.element_ty), mask=m)


@triton.jit
def softmax(x_ptr, y_ptr, N, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    m = cols < N
    x = tl.load(x_ptr + row * N + cols, mask=m, other=-float("inf")).to(tl.float32)
    z = x - tl.max(x, axis=0)
    e = tl.exp(z)
    y = e / tl.sum(e, axis=0)
    tl.store(y_ptr + row * N + cols, y.to(y_ptr.dtype.element_ty), mask=m)


@triton.jit
def log_softmax(x_ptr, y_ptr, N, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    m = cols < N
    x = tl.load(x_ptr + row * N + cols, mask=m, other=-float("inf")).to(tl.float32)
    z = x - tl.max(x, axis=0)
    y = z - tl.log(tl.sum(tl.exp(z), axis=0))
    tl.store(y_ptr + row * N + cols, y.to(y_ptr.dtype.element_ty), mask=m)


@triton.jit
def row_sum(x_ptr, y_ptr, M, N: tl.constexpr, BLOCK_M: tl.constexpr):
    # sums along axis 1 of a (BLOCK_M, N) block, in the input dtype
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, N)
    x = tl.load(x_ptr + rows[:, None] * N + cols[None, :], mask=rows[:, None] < M)
    tl.store(y_ptr + rows, tl.sum(x, axis=1), mask=rows < M)


@triton.jit
def col_sum(x_ptr, y_ptr, N, M: tl.constexpr, BLOCK_N: tl.constexpr):
    # sums along axis 0 of an (M, BLOCK_N) block, in the input dtype
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    rows = tl.arange(0, M)
    x = tl.load(x_ptr + rows[:, None] * N + cols[None, :], mask=cols[None, :] < N)
    tl.store(y_ptr + cols, tl.sum(x, axis=0), mask=cols < N)


@triton.jit
def row_max_argmax(x_ptr, v_ptr, i_ptr, N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, N)
    x = tl.load(x_ptr + row * N + cols)
    tl.store(v_ptr + row, tl.max(x, axis=0))
    tl.store(i_ptr + row, tl.argmax(x, axis=0))


@triton.jit
def row_cumsum(x_ptr, y_ptr, N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, N)
    x = tl.load(x_ptr + row * N + cols)
    tl.store(y_ptr + row * N + cols, tl.cumsum(x, axis=0))


@triton.jit
def row_cumprod(x_ptr, y_ptr, N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, N)
    x = tl.load(x_ptr + row * N + cols)
    tl.store(y_ptr + row * N + cols, tl.cumprod(x, axis=0))


@triton.jit
def scaled_loop(x_ptr, y_ptr, s, K, BLOCK: tl.constexpr):
    # p is computed before the loop, the add inside it: LLVM (one basic block at a time) leaves mul.f32 and
    # add.f32 apart, and ptxas, unrolling, contracts `* 0.75` of one iteration with `+ p` of the next.
    offs = tl.arange(0, BLOCK)
    p = tl.load(x_ptr + offs) * s
    acc = tl.load(y_ptr + offs)
    for _ in range(K):
        acc = acc + p
        acc = acc * 0.75
    tl.store(y_ptr + offs, acc)
