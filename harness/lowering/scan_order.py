"""The order in which a compiled ``tl.associative_scan`` (``tl.cumsum``, ``tl.cumprod``) combines elements, and a
numpy evaluator that scans in that order with one GPU rounding per combine.

Why: an inclusive scan in fp32 is a chain of roundings whose grouping the lowering chooses
(``lib/Conversion/TritonGPUToLLVM/ScanOpToLLVM.cpp``, the same structure in Triton 3.6 and 3.9). Positions along
the axis are ``p = e + S * (l + L * (w + W * b))``: ``e`` the element within a thread's contiguous chunk of
``S = sizePerThread``, ``l`` the lane (``L`` lanes with unique data), ``w`` the warp (``W``), ``b`` the
repetition ("scan block", ``B``). The lowering:

1. ``scanThreadContiguousElements``: within each chunk, ``s[e] = combine(s[e-1], x[e])``;
2. ``warpScan``: on each chunk's total, Hillis-Steele over lanes, ``i = 1, 2, ... L/2``:
   ``t[l] = combine(shfl_up(t, i)[l], t[l])`` for ``l >= i``;
3. ``W > 1`` (``storeWarpAccumulator`` + ``AddPartialReduce``): each warp's total goes to shared memory; every
   thread left-folds the totals of (block, warp) in order and keeps ``M``, the fold of everything before its
   own (block, warp); the chunk total becomes ``combine(M, t[l])``, the other elements
   ``combine(combine(M, t[l-1]), s[e])`` (lane 0: ``combine(M, s[e])``); block 0 / warp 0 keeps its own values;
4. ``W == 1`` and more than one element per thread (``AddPartialReduceOneWarp``): a running accumulator ``A``
   (the last lane's value of the previous block): chunk total ``combine(A, t[l])`` for blocks after the
   first, the other elements ``combine(prev, s[e])`` with ``prev`` the lower lane's chunk total (lane 0: ``A``).

Source: Triton ScanOpToLLVM.cpp (emitFastScan, scanThreadContiguousElements, warpScan, AddPartialReduce,
AddPartialReduceOneWarp), read in a fork that keeps the upstream structure; confirmed on Triton 3.6.0's and
3.9.0's sm90 PTX (``shfl.sync.up`` offsets and the count of combines, tests/harness/lowering). Reverse scans are
not modelled (:func:`plan` refuses them).

Public API: :class:`ScanPlan`, :func:`plan`, :func:`scan`, :data:`SOURCE`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.lowering import numeric
from harness.lowering.layout import AxisBits

__all__ = ["SOURCE", "ScanPlan", "plan", "scan"]

SOURCE = ("Triton 3.6/3.9 ScanOpToLLVM.cpp: scanThreadContiguousElements (sequential per chunk), warpScan "
          "(shfl.sync.up by 1, 2, ... L/2, combine(shfl, acc)), AddPartialReduce (W > 1: left fold of the warp "
          "totals in (block, warp) order) or AddPartialReduceOneWarp (W == 1)")

_KINDS = {"add": numeric.add, "mul": numeric.mul, "max": numeric.maximum, "min": numeric.minimum}


@dataclass(frozen=True)
class ScanPlan:
    """``S`` elements per chunk, ``L`` lanes, ``W`` warps, ``B`` blocks along the axis."""

    S: int
    L: int
    W: int
    B: int

    def shuffle_up_offsets(self) -> tuple[int, ...]:
        """``shfl.sync.up`` lane offsets of the warp scan (in lanes; times the lane stride in the PTX)."""
        out = []
        i = 1
        while i <= self.L // 2:
            out.append(i)
            i <<= 1
        return tuple(out)

    def combines(self) -> int:
        """Combines per thread in the compiled code: the count of adds a ``tl.cumsum`` emits (after dead-code
        elimination of the last accumulator update, which nothing reads)."""
        chunk = self.S - 1
        warp = len(self.shuffle_up_offsets())
        if self.W > 1:
            folds = self.B * self.W - 1 - 1  # left fold over all (block, warp) totals, the last one unread
            per_block = 1 + (self.S - 1)  # chunk total, then the other elements
            return self.B * (chunk + warp + per_block) + folds
        if self.B * self.S == 1:
            return chunk + warp
        return self.B * (chunk + warp) + (self.B - 1) + self.B * (self.S - 1)


def plan(bits: AxisBits, reverse: bool = False) -> ScanPlan:
    """The :class:`ScanPlan` of a blocked-layout axis (:func:`harness.lowering.layout.axis_bits`)."""
    if reverse:
        raise ValueError("scan_order: reverse scans are not modelled")
    regs = list(bits.registers)
    S = 1
    while regs and regs[0] == S:
        regs.pop(0)
        S *= 2
    L = 1 << len(bits.lanes)
    if [s for _, s in bits.lanes] != [S << k for k in range(len(bits.lanes))]:
        raise ValueError(f"scan_order: lanes {bits.lanes} are not contiguous after {S} elements per thread")
    W = 1 << len(bits.warps)
    if [s for _, s in bits.warps] != [S * L << k for k in range(len(bits.warps))]:
        raise ValueError(f"scan_order: warps {bits.warps} are not contiguous after the lanes")
    if regs != [S * L * W << k for k in range(len(regs))]:
        raise ValueError(f"scan_order: register bits {bits.registers} are not chunk + repetitions")
    B = 1 << len(regs)
    p = ScanPlan(S, L, W, B)
    if W == 1 and L == 1 and B > 1:
        raise ValueError("scan_order: one lane and one warp along the axis with repetitions is not modelled")
    return p


def scan(x: np.ndarray, axis: int, p: ScanPlan, kind: str, dtype: str) -> np.ndarray:
    """Inclusive scan of ``x`` along ``axis`` in the compiled order (``kind``: add, mul, max, min)."""
    if kind not in _KINDS:
        raise ValueError(f"scan: kind must be one of {sorted(_KINDS)}, got {kind!r}")
    with np.errstate(over="ignore", invalid="ignore"):  # once, not per combine (numeric's checked=False)
        return _scan(x, axis, p, kind, dtype)


def _scan(x: np.ndarray, axis: int, p: ScanPlan, kind: str, dtype: str) -> np.ndarray:
    op = _KINDS[kind]
    S, L, W, B = p.S, p.L, p.W, p.B
    unchecked = kind in ("add", "mul")

    def comb(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return op(a, b, dtype, checked=False) if unchecked else op(a, b, dtype)

    moved = np.moveaxis(np.asarray(x), axis, -1)
    if moved.shape[-1] != S * L * W * B:
        raise ValueError(f"scan: the axis has {moved.shape[-1]} elements, the layout {S * L * W * B}")
    v = moved.reshape(moved.shape[:-1] + (B, W, L, S))
    # 1. within each chunk
    s = [v[..., 0]]
    for e in range(1, S):
        s.append(comb(s[-1], v[..., e]))
    # 2. Hillis-Steele over lanes on the chunk totals (..., B, W, L)
    t = s[-1]
    i = 1
    while i <= L // 2:
        shifted = t[..., :-i]
        t = np.concatenate([t[..., :i], comb(shifted, t[..., i:])], axis=-1)
        i <<= 1
    out = np.empty(v.shape, dtype=v.dtype)
    if W > 1:
        tot = t[..., L - 1]  # (..., B, W)
        # M[b, w]: left fold of the totals before (b, w)
        M = np.empty_like(tot)
        acc = None
        for b in range(B):
            for w in range(W):
                M[..., b, w] = tot[..., 0, 0] if acc is None else acc
                acc = tot[..., b, w] if acc is None else comb(acc, tot[..., b, w])
        Mx = M[..., None]  # (..., B, W, 1)
        temp = comb(np.broadcast_to(Mx, t.shape), t)
        temp[..., 0, 0, :] = t[..., 0, 0, :]  # block 0, warp 0 keeps its own
        out[..., S - 1] = temp
        last = np.concatenate([Mx, temp[..., :-1]], axis=-1)
        for e in range(S - 1):
            val = comb(last, s[e])
            val[..., 0, 0, 0] = s[e][..., 0, 0, 0]
            out[..., e] = val
    else:
        acc = None
        for b in range(B):
            tb = t[..., b, 0, :]  # (..., L)
            V = tb if b == 0 else comb(acc[..., None], tb)
            out[..., b, 0, :, S - 1] = V
            lane0 = tb[..., 0] if b == 0 else acc
            last = np.concatenate([lane0[..., None], V[..., :-1]], axis=-1)
            for e in range(S - 1):
                val = comb(last, s[e][..., b, 0, :])
                if b == 0:
                    val[..., 0] = s[e][..., b, 0, 0]
                out[..., b, 0, :, e] = val
            acc = V[..., L - 1]
    return np.moveaxis(out.reshape(moved.shape), -1, axis)
