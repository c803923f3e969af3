"""The block-FMA chain of :mod:`.chain` and its FMA dot, restructured for speed: the same numbers, bit for bit, on
the inputs where the restructuring is exact, and ``None`` elsewhere (the caller then runs :mod:`.chain`'s
readable float64 evaluation). Why: the interpreter lane models every ``tl.dot`` a kernel runs, one tile at a time,
and a dot-heavy CPU test may take at most 2x the time of the interpreter's own matmul.

What makes :func:`chain` exact (each point is a precondition it checks, or a fact of the formats):

- products of two operand values (fp16, bf16, tf32, e4m3, e5m2: at most 11 significant bits each) have at most 22
  significant bits, so they are exact in fp32 when they lie in [2^-126, 2^127) with every bit at or above 2^-126:
  always for fp16 and FP8 (their exponent ranges are small), checked per call for bf16 and tf32;
- every term then is a multiple of 2^-126 (the products by the above, the initial accumulator by a check, each
  later accumulator as a sum of such terms truncated to a coarser grid), so flooring the alignment exponent at
  ``-126 + frac`` changes no term: below it the terms are already exact on the grid. The alignment step
  ``2^(E - frac)`` is then a normal fp32, the accumulator is 0 or a normal fp32 (its exponent is its exponent bits)
  and truncating a block result to ``frac_out`` fraction bits is a mask of its bits;
- the truncated terms are integers below 2^(frac + 2) in units of the step; their sums are taken in fp32 when
  ``nfma * 2^(frac + 2) + 2^(frac + 1) <= 2^24`` (FP8: 13 fraction bits), else in int32 (every row's
  ``nfma * 2^(frac + 2) <= 2^31``), the accumulator's term with them where that bound allows it too (tf32);
- every block's products and exponent maxima are computed at once, laid out [block, k, ..., M, N] so the reductions
  over k run over an outer dimension (over the innermost dimension of 16, torch's int16 maximum took 124 us instead
  of 9, 64 x 64 x 64 on one thread of this box, 2026-12-04).

An inf/NaN operand or accumulator, or a block result that overflows fp32, returns ``None``: :mod:`.chain` follows
IEEE one block at a time there. :func:`fma_dot` (``input_precision="ieee"``) rounds an exact float64 product plus
the accumulator twice, float64 then fp32, and returns ``None`` where that can differ from one rounding (see there).

Both run in NumPy on buffers reused across calls (:func:`_scratch`): a tile's ops are small, and NumPy's cost per
op is half of torch's or less here; the two big broadcasts (products, exponent sums) run in torch, four times
NumPy's speed on those shapes. Measured (2026-12-04, one thread of this 2-core box, loaded by other jobs;
``harness.tensor_cores.dot`` on one 64 x 64 x 64 tile with an accumulator, median thread CPU time of 60 calls,
chain.py alone before, outputs identical): fp16/bf16 1.2-1.7 ms -> 0.30, tf32 1.5 -> 0.35, tf32x3 4.6 -> 0.97 (its
three dots as one chain, chain._tf32x3), e4m3/e5m2 10.8/9.1 (mmaemu's chain) -> 0.25/0.23, ieee 4.0 -> 0.36.
"""

from __future__ import annotations

import math
import threading

import numpy as np
import torch

from harness.tensor_cores.models import BlockFMA

__all__ = ["chain", "fma_dot"]

#: fraction bits of the widest operand format (fp16 and tf32: 10; bf16 7, e4m3 3, e5m2 2): a value's lowest bit is
#: at or above 2^(floor(log2|x|) - 10), subnormals included
_OPERAND_FRAC = 10
_NEG16 = -1000           # exponent of a zero operand: a zero product's exponent sum never reaches the floor
_CHUNK = 1 << 22         # products per chunk of blocks (16 MB of fp32)
_SCRATCH = threading.local()


def _scratch(name: str, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """An uninitialised tensor of ``shape`` that reuses this thread's buffer ``name`` (grown when too small).
    Why: the products and sums of a tile take megabytes, and fresh buffers of that size page-fault on every call in
    the interpreter's churn (glibc maps them anew): in a loop that also allocated and freed other arrays, the FMA
    dot's median went from 0.39 ms with reused buffers to 0.5-2.6 ms with fresh ones (2026-12-04, one thread)."""
    n = math.prod(shape)
    buf = getattr(_SCRATCH, name, None)
    if buf is None or buf.dtype != dtype or buf.numel() < n:
        if n * dtype.itemsize > _CHUNK * 8:  # a rare huge tile: not kept
            return torch.empty(shape, dtype=dtype)
        buf = torch.empty(n, dtype=dtype)
        setattr(_SCRATCH, name, buf)
    return buf[:n].view(shape)


def _exponents(x: np.ndarray, emin: int) -> tuple[np.ndarray, int, int]:
    """(floor(log2|x|) clamped below at the format's emin, int16, _NEG16 for zeros; the smallest exponent of a
    nonzero element; the largest). frexp is exact (x fp32)."""
    e = np.frexp(x)[1] - 1
    nz = x != 0
    if not nz.any():
        return np.full(x.shape, _NEG16, dtype=np.int16), 0, -1000
    ez = e[nz]
    return np.where(nz, np.maximum(e, emin), _NEG16).astype(np.int16), int(ez.min()), int(ez.max())


def _blocks_first(x: np.ndarray, nb: int, nf: int) -> np.ndarray:
    """x [..., K, L] (K = nb * nf) as a contiguous [nb, nf, ..., L]."""
    return np.ascontiguousarray(np.moveaxis(x.reshape(*x.shape[:-2], nb, nf, x.shape[-1]), (-3, -2), (0, 1)))


def chain(A: torch.Tensor, B: torch.Tensor, C: torch.Tensor, p: BlockFMA, emin_a: int,
          emin_b: int) -> torch.Tensor | None:
    """:func:`.chain._chain`'s result as fp32, or ``None`` where this evaluation is not exact (see the module
    docstring). A [..., M, K], B [..., K, N]: values of fp16, bf16, tf32 or FP8 operands (at most 11 significant bits)
    in any float dtype, the formats' smallest normal exponents ``emin_a`` / ``emin_b``; C [..., M, N] fp32 values."""
    a = A.to(torch.float32).numpy(force=True)
    b = B.to(torch.float32).numpy(force=True)
    acc = np.ascontiguousarray(C.to(torch.float32).numpy(force=True))
    with np.errstate(all="ignore"):  # overflow to inf is looked for at the end
        return _chain(a, b, acc, p, emin_a, emin_b)


def _chain(a: np.ndarray, b: np.ndarray, acc: np.ndarray, p: BlockFMA, emin_a: int,
           emin_b: int) -> torch.Tensor | None:
    if not (np.isfinite(a).all() and np.isfinite(b).all() and np.isfinite(acc).all()):
        return None
    # every term a multiple of 2^-126: the accumulator's (a nonzero fp32 has 23 fraction bits)...
    if ((acc != 0) & (np.abs(acc) < 2.0 ** (23 - 126))).any():
        return None
    ea, lo_a, hi_a = _exponents(a, emin_a)
    eb, lo_b, hi_b = _exponents(b, emin_b)
    # ... and the products' (lowest bit >= 2^(e - 10) per operand), all below 2^127 (so exact in fp32)
    if lo_a + lo_b - 2 * _OPERAND_FRAC < -126 or hi_a + hi_b > 125:
        if hi_a >= -126 and hi_b >= -126:  # both have a nonzero element: some product is nonzero
            return None
    nf, frac = p.nfma, p.frac
    K = a.shape[-1]
    nb = -(-K // nf)
    if nb * nf != K:  # zero padding: zero products take no part in the maximum nor the sum
        pad = [(0, 0)] * (a.ndim - 1)
        a = np.pad(a, [*pad, (0, nb * nf - K)])
        ea = np.pad(ea, [*pad, (0, nb * nf - K)], constant_values=_NEG16)
        b = np.pad(b, [*pad[:-1], (0, nb * nf - K), (0, 0)])
        eb = np.pad(eb, [*pad[:-1], (0, nb * nf - K), (0, 0)], constant_values=_NEG16)
    a4 = _blocks_first(np.swapaxes(a, -1, -2), nb, nf)[..., :, None]      # [nb, nf, ..., M, 1]
    b4 = _blocks_first(b, nb, nf)[..., None, :]                          # [nb, nf, ..., 1, N]
    ea4 = _blocks_first(np.swapaxes(ea, -1, -2), nb, nf)[..., :, None]
    eb4 = _blocks_first(eb, nb, nf)[..., None, :]
    floor = max(p.min_exp, -126 + frac)
    fbits = frac << 23
    f32_sums = nf * 2 ** (frac + 2) + 2 ** (frac + 1) <= 2 ** 24
    if not f32_sums and nf * 2 ** (frac + 2) > 2 ** 31:  # int32 sums of the products' terms are exact: every row
        return None                                    # has nfma * 2^(frac + 2) <= 2^31 (and they take 6-10 us
    #                                                    where float64 sums took 11-17, 64 x 64, 2026-12-04)
    i32_all = nf * (2 ** (frac + 2) - 1) + 2 ** (frac + 1) - 1 < 2 ** 31  # the accumulator's term too (tf32's k=8)
    mask32 = np.int32(~((1 << (23 - p.frac_out)) - 1))
    mask64 = np.int64(~((1 << (52 - p.frac_out)) - 1))
    per_block = nf * acc.size
    step = max(1, _CHUNK // max(1, per_block))
    for j0 in range(0, nb, step):
        a_, b_ = a4[j0:j0 + step], b4[j0:j0 + step]
        shape = np.broadcast_shapes(a_.shape, b_.shape)
        # the two broadcasts and the maximum in torch (2-4x NumPy's speed on these shapes), on NumPy's memory
        P = _scratch("products", shape, torch.float32)
        torch.mul(torch.from_numpy(a_), torch.from_numpy(b_), out=P)                     # exact (see above)
        ep = _scratch("exponents", shape, torch.int16)
        torch.add(torch.from_numpy(ea4[j0:j0 + step]), torch.from_numpy(eb4[j0:j0 + step]), out=ep)
        # fp32 bits of 2^(max(E_products, floor) - frac) per block: [nb, ..., M, N]
        eps = (np.maximum(ep.amax(1).numpy().astype(np.int32), floor) + (127 - frac)) << 23
        P = P.numpy()
        # the block's terms in units of the step, the accumulator's as one more row (fp32 sums add them all)
        t = _scratch("terms", (shape[1] + 1, *shape[2:]), torch.float32).numpy()
        ti = _scratch("int_terms", t.shape, torch.int32).numpy()
        for j in range(P.shape[0]):
            # the accumulator's exponent from its bits (0 or normal: a zero gives a negative int, never the max)
            scale = np.maximum(eps[j], (acc.view(np.int32) & 0x7F800000) - fbits).view(np.float32)
            np.divide(P[j], scale, out=t[:-1])   # exact: a power of two (what underflows is below 1: truncated to 0)
            np.divide(acc, scale, out=t[-1])
            np.trunc(t, out=t)
            if f32_sums:
                d = t.sum(axis=0) * scale
                acc = (d.view(np.int32) & mask32).view(np.float32) + np.float32(0.0)   # +0.0: a zero result is +0
            else:  # int32 sums (exact, checked above): of every term, or of the products' and then the accumulator's
                if i32_all:  # in float64. The sum is never -0 (integers), so neither is the result
                    np.copyto(ti, t, casting="unsafe")
                    d = ti.sum(axis=0, dtype=np.int32) * scale
                else:
                    np.copyto(ti[:-1], t[:-1], casting="unsafe")
                    d = (ti[:-1].sum(axis=0, dtype=np.int32) + t[-1].astype(np.float64)) * scale
                acc = (d.view(np.int64) & mask64).view(np.float64).astype(np.float32)
    if not np.isfinite(acc).all():
        return None  # a block overflowed: IEEE from there on, in chain._chain
    return torch.from_numpy(acc)


def _min_exponent(x: np.ndarray) -> int | None:
    """floor(log2|x|) of x's smallest nonzero finite element (x fp32), None if it has none."""
    ax = np.abs(x)
    ax = ax[(ax != 0) & np.isfinite(ax)]
    return int(np.frexp(ax.min())[1]) - 1 if ax.size else None


def fma_dot(A: torch.Tensor, B: torch.Tensor, C: torch.Tensor) -> torch.Tensor | None:
    """``fma.rn.f32`` per k in k order: A [..., M, K], B [..., K, N], C [..., M, N] fp32 values (any float dtype).
    Returns fp32, or ``None`` where this evaluation may round twice.

    Each step adds the exact float64 product to the fp32 accumulator in float64 and rounds that to fp32. Twice
    rounded, this is the fma's correctly rounded result unless the float64 sum is exactly halfway between two fp32
    values or in fp32's subnormal range, and was itself rounded. Halfway sums are looked for afterwards (TwoSum says
    whether they were rounded). Rounded sums in the subnormal range cannot occur when every nonzero product is at
    least 2^-125 (checked on the operands): a sum below 2^-126 then comes from a zero product (the sum is the
    accumulator, exact) or from terms within a factor 2 of each other (exact, Sterbenz). NumPy, not torch: the k
    loop is two small ops per step, where torch's per-op overhead doubled the time (2026-12-04, 64 x 64 x 64 on one
    thread: 0.2 ms in NumPy, 0.4 ms in torch; the halfway check 0.07 vs 0.2 ms)."""
    a32 = A.to(torch.float32).numpy(force=True)
    b32 = B.to(torch.float32).numpy(force=True)
    acc = C.to(torch.float32).numpy(force=True)
    K = a32.shape[-1]
    if K == 0:
        return torch.from_numpy(acc.copy())
    lo_a, lo_b = _min_exponent(a32), _min_exponent(b32)
    if lo_a is not None and lo_b is not None and lo_a + lo_b < -125:
        return None
    a = np.ascontiguousarray(np.moveaxis(a32, -1, 0), dtype=np.float64)[..., :, None]   # [K, ..., M, 1]
    b = np.ascontiguousarray(np.moveaxis(b32, -2, 0), dtype=np.float64)[..., None, :]   # [K, ..., 1, N]
    per_k = math.prod(np.broadcast_shapes(a.shape[1:], b.shape[1:]))
    kc = max(1, _CHUNK // 2 // per_k)  # steps per chunk: its float64 products and sums stay below 2 x 16 MB
    with np.errstate(all="ignore"):  # inf/NaN follow IEEE, quietly (overflow is inf, as fma.rn.f32's)
        for k0 in range(0, K, kc):
            acc = _fma_steps(a[k0:k0 + kc], b[k0:k0 + kc], acc)
            if acc is None:
                return None
    return torch.from_numpy(acc)


def _fma_steps(a: np.ndarray, b: np.ndarray, acc0: np.ndarray) -> np.ndarray | None:
    """fma_dot's steps over a [k, ..., M, 1] x b [k, ..., 1, N] (float64) from the fp32 accumulator acc0."""
    shape = np.broadcast_shapes(a.shape, b.shape)
    P = _scratch("fma_products", shape, torch.float64)
    P = torch.mul(torch.from_numpy(a), torch.from_numpy(b), out=P).numpy()  # exact; torch: the faster broadcast
    S = _scratch("fma_sums", shape, torch.float64).numpy()
    acc = acc0
    for k in range(shape[0]):
        np.add(P[k], acc, out=S[k])
        acc = S[k].astype(np.float32)
    low = np.bitwise_and(S.view(np.int64), 0x1FFFFFFF, out=_scratch("fma_low", shape, torch.int64).numpy())
    halfway = np.equal(low, 0x10000000, out=_scratch("fma_halfway", shape, torch.bool).numpy())
    if halfway.any():  # some float64 sum's 29 fraction bits below fp32's 23 are 1000...: halfway
        k, *at = np.nonzero(halfway)
        at = tuple(at)
        s, p = S[(k, *at)], P[(k, *at)]
        # the accumulator before step k: acc0, or step k - 1's sum rounded to fp32
        prev = np.where(k == 0, acc0[at], S[(np.maximum(k - 1, 0), *at)].astype(np.float32)).astype(np.float64)
        bp = s - prev
        if ((p - bp) + (prev - (s - bp)) != 0).any():  # TwoSum: the float64 sum's rounding error
            return None
    return acc
