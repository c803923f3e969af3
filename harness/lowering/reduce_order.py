"""The order in which a compiled ``tl.reduce`` (``tl.sum``, ``tl.max``, ``tl.argmax``...) combines elements, per
Triton version, and a numpy evaluator that combines in that order with one GPU rounding per combine.

Why: fp addition is not associative, so a sum is only reproduced bit for bit by adding in the order of the
compiled kernel. That order is the lowering's (``lib/Conversion/TritonGPUToLLVM/ReduceOpToLLVM.cpp``) applied to
the operand's layout (:class:`harness.lowering.layout.AxisBits`), in three stages:

1. within a thread, over the registers holding elements along the axis;
2. within a warp, a butterfly of ``shfl.sync.bfly`` over the lane bits along the axis, highest lane bit first,
   each lane combining ``(own, partner)``;
3. across warps, the per-warp partials exchanged through shared memory and reduced by the same butterfly over
   the warp bits (ordered by stride), highest first.

Stage 1 is where the versions differ (:data:`RULES`). Triton 3.9 also packs 16-bit operands in pairs for the
in-thread tree when the target has 16-bit vector arithmetic (sm90: ``add.bf16x2``/``add.f16x2``; the combine a
single ``addf``/``mulf``/``maxnumf``/``minnumf``): ``moveAxisBasesToFront(..., isVectorized)`` keeps the layout's
first register base in front, so when that base moves along the axis the pairs are adjacent along it, the tree
runs over the remaining axis bits on both halves at once and the two halves are combined last
(``unpackVectorized``); otherwise the pairs are independent outputs and the order is the scalar tree's.
Stages 2 and 3 are the same in both; the result is the one held where all reduced bits are 0. The unit tests
compile kernels for sm90 and check each rule's predicted shuffle offsets and in-thread combine shape against
the PTX.

Fusion: when the reduced elements are products (``tl.sum(d * d)``), LLVM's DAG combiner (NVPTX allows
aggressive fusion: ``visitFADDForFMACombine``) folds an in-thread ``fadd`` whose operand is an ``fmul`` into an
``fma``; with both operands products it folds the left one (equal use counts). Shuffle and shared-memory stages
add loaded values and never fuse. :func:`reduce` takes the product's factors to model this
(:func:`harness.lowering.fma.fused_sites` says when the compiled kernel did it). Which of a sequential fold's adds
fuse is read per kernel (``fused_steps``, :func:`harness.lowering.fma.thread_chains`): LLVM may vectorize Triton
3.6's 16-bit fold in register pairs without reordering it, and a product that reaches its add through a lane
shuffle stays unfused (sm90: ``add.f16x2`` / ``add.bf16x2``, the SASS keeps ``HADD2``; Triton 3.6.0's LLIR, PTX
and SASS compiled 2026-12-06), e.g. ``fma fma add fma add fma add`` for 8 registers loaded in pairs.

Public API: :class:`Rule`, :data:`RULES`, :func:`rule_for`, :class:`ReducePlan`, :func:`reduce`,
:data:`COMBINES`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from harness.lowering import numeric
from harness.lowering.layout import AxisBits

__all__ = ["COMBINES", "RULES", "ReducePlan", "Rule", "reduce", "rule_for"]


@dataclass(frozen=True)
class Rule:
    """How one Triton version lowers a reduction: ``thread`` is ``"sequential"`` (a left fold over the thread's
    axis registers in register order) or ``"tree"`` (pairwise over adjacent registers, lowest register bit
    first); ``source`` says where that comes from."""

    triton: str
    thread: str
    source: str
    vectorizes_16bit: bool = False

    def thread_fma(self, registers: int) -> int:
        """The fma a thread's part of a sum of products over ``registers`` elements becomes: a tree folds the
        left product of each first-level pair; a left fold the new product of every step."""
        return registers // 2 if self.thread == "tree" else registers - 1


#: The reduction lowering of each Triton minor version supported (3.6, 3.9).
RULES: dict[str, Rule] = {
    "3.6": Rule("3.6", "sequential",
                "Triton 3.6 ReduceOpToLLVM.cpp reduceWithinThreads: accs[key] = combine(accs[key], srcValues[i]) for "
                "i over the thread's registers in order; warpReduce: shfl.sync.bfly with offsets N = lanes/2 ... 1; "
                "then storeWarpReduceToSharedMemory + accumulatePartialReductions: partial of warp w read by lane "
                "w, butterfly N = warps/2 ... 1. Confirmed on Triton 3.6.0's sm90 PTX (tests/harness/lowering). A "
                "16-bit fold LLVM vectorizes in register pairs keeps this order; its adds fed by a shuffled product "
                "are not contracted (Triton 3.6.0's sm90 LLIR/PTX/SASS, 2026-12-06; fma.thread_chains)."),
    "3.9": Rule("3.9", "tree",
                "Triton 3.9 ReduceOpToLLVM.cpp (linear-layout lowering): reduceWithinThreads moves the axis register "
                "bases to the front and runs treeReduceBinary (combine(values[2i], values[2i+1]) level by level); "
                "warpReduce: shuffleXor for each lane bit along the axis from bit log2(32)-1 down to 0 (the 'legacy "
                "inverse order'); then convertLayoutValues through shared memory puts the warp partials in lanes "
                "and reduceWithinWarps runs again; 16-bit operands packed in pairs (getInThreadVectorizeOpKind, "
                "moveAxisBasesToFront(isVectorized), unpackVectorized). Confirmed on Triton 3.9.0's sm90 PTX "
                "(tests/harness/lowering)", vectorizes_16bit=True),
}


def rule_for(version: str) -> Rule:
    """The :class:`Rule` of a Triton version string (``"3.6.0"``, ``"3.9.0+git..."``); ``KeyError`` naming the
    supported ones for any other."""
    mm = ".".join(str(version).split(".")[:2])
    if mm not in RULES:
        raise KeyError(f"no reduction rule for Triton {version!r}: derived for {sorted(RULES)}")
    return RULES[mm]


@dataclass(frozen=True)
class ReducePlan:
    """A reduction along one axis: the layout's :class:`AxisBits` and the version's :class:`Rule`."""

    bits: AxisBits
    rule: Rule

    def shuffle_offsets(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The ``shfl.sync.bfly`` xor offsets the lowering emits: within warps (lane bits along the axis,
        highest first), then across warps (one lane bit per warp bit, highest first; 3.6 and 3.9 put warp
        partial ``k`` in lane ``k``)."""
        intra = tuple(1 << b for b, _ in sorted(self.bits.lanes, key=lambda t: -t[0]))
        inter = tuple(1 << k for k in reversed(range(len(self.bits.warps))))
        return intra, inter

    def thread_combines(self) -> int:
        """Combines per thread before the shuffles (registers along the axis minus one)."""
        return (1 << len(self.bits.registers)) - 1

    def packed(self, dtype: str, kind: str) -> bool:
        """Whether the in-thread tree runs on 16-bit pairs packed along the axis (Triton 3.9, sm90)."""
        return (self.rule.vectorizes_16bit and dtype in ("bf16", "fp16") and kind in ("add", "max", "min")
                and len(self.bits.registers) >= 1 and self.bits.first_register_on_axis)


Combine = Callable[[tuple[np.ndarray, ...], tuple[np.ndarray, ...]], tuple[np.ndarray, ...]]


def _argbest(larger: bool, checked: bool = True) -> Callable[[str], Combine]:
    # Triton's _argmax_combine / _argmin_combine with tie_break_left (standard.py), as its TTGIR shows:
    # tie = v1 == v2 and i1 < i2; gt = v1 > v2 or tie; select(gt, (v1, i1), (v2, i2)). A NaN compares false,
    # so the right operand wins against it and it wins as the right operand. checked=False: inside reduce's
    # np.errstate.
    def make(dtype: str) -> Combine:
        def pick(a: tuple[np.ndarray, ...], b: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
            fa, fb = numeric.to_f32(a[0], dtype), numeric.to_f32(b[0], dtype)
            better = (fa > fb) if larger else (fa < fb)
            take = better | ((fa == fb) & (a[1] < b[1]))
            return np.where(take, a[0], b[0]), np.where(take, a[1], b[1])

        def comb(a: tuple[np.ndarray, ...], b: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
            with np.errstate(invalid="ignore"):
                return pick(a, b)
        return comb if checked else pick
    return make


def _binary(fn: Callable[[np.ndarray, np.ndarray, str], np.ndarray]) -> Callable[[str], Combine]:
    def make(dtype: str) -> Combine:
        return lambda a, b: (fn(a[0], b[0], dtype),)
    return make


#: The combine of each reduction kind (the TTGIR combine region: ``arith.addf``, ``arith.maxnumf``,
#: ``arith.minnumf``, the argmax / argmin select chain).
COMBINES: dict[str, Callable[[str], Combine]] = {
    "add": _binary(numeric.add),
    "max": _binary(numeric.maximum),
    "min": _binary(numeric.minimum),
    "argmax": _argbest(True),
    "argmin": _argbest(False),
}


@functools.lru_cache(maxsize=256)
def _positions_of(bits: AxisBits) -> np.ndarray:
    pos = np.asarray(bits.positions(), dtype=np.int64)  # (R, L, W)
    pos.flags.writeable = False
    return pos


_BY_ID: dict[int, tuple[AxisBits, np.ndarray]] = {}


def _positions(bits: AxisBits) -> np.ndarray:
    """``bits.positions()`` as an array, once per layout: an interpreter shim reduces every program's block with
    the same (long-lived) facts object, so it is found by identity first (hashing the frozen dataclass's tuples
    cost more than the lookup saved)."""
    hit = _BY_ID.get(id(bits))
    if hit is not None and hit[0] is bits:
        return hit[1]
    pos = _positions_of(bits)
    if len(_BY_ID) > 256:
        _BY_ID.clear()
    _BY_ID[id(bits)] = (bits, pos)
    return pos


def _gather(x: np.ndarray, axis: int, bits: AxisBits) -> np.ndarray:
    pos = _positions(bits)
    x = np.asarray(x)
    moved = x if axis in (-1, x.ndim - 1) else np.moveaxis(x, axis, -1)
    if moved.shape[-1] != bits.size:
        raise ValueError(f"reduce: the axis has {moved.shape[-1]} elements, the layout {bits.size}")
    return moved[..., pos]


def _butterfly(vals: tuple[np.ndarray, ...], dim: int, nbits: int, comb: Combine) -> tuple[np.ndarray, ...]:
    # vals[k] has the exchanged index at ``dim`` (negative); xor on compact bits nbits-1 .. 0
    for k in reversed(range(nbits)):
        size = vals[0].shape[dim]
        perm = np.arange(size) ^ (1 << k)
        partner = tuple(np.take(v, perm, axis=dim) for v in vals)
        vals = comb(vals, partner)
    return vals


#: combines whose result does not depend on the operands' order, bit for bit (NaN canonical; max/min pick +0 over
#: -0 either way): the partner of a butterfly step computes the same value, so only the half that holds lane 0
#: needs computing. argmax/argmin break ties by position and let a NaN win as the right operand: not these.
_SYMMETRIC = frozenset({"add", "max", "min"})


def _halving(vals: tuple[np.ndarray, ...], dim: int, nbits: int, comb: Combine) -> tuple[np.ndarray, ...]:
    """:func:`_butterfly`'s value at index 0 of ``dim`` for a symmetric combine: at xor bit ``k`` (highest
    first) the indices with bit ``k`` clear, the array's first half, combine with their partners, the second."""
    for k in reversed(range(nbits)):
        half = 1 << k
        lo = (Ellipsis, slice(0, half)) + (slice(None),) * (-1 - dim)
        hi = (Ellipsis, slice(half, 2 * half)) + (slice(None),) * (-1 - dim)
        vals = comb(tuple(v[lo] for v in vals), tuple(v[hi] for v in vals))
    return vals


#: the combines :func:`reduce` runs inside its one ``np.errstate`` (numpy's error-state switch per add was a
#: tenth of a shim's reduction on small blocks)
_IN_ERRSTATE: dict[str, Callable[[str], Combine]] = {**COMBINES, "add": _binary(
    lambda a, b, dtype: numeric.add(a, b, dtype, checked=False)), "argmax": _argbest(True, checked=False),
    "argmin": _argbest(False, checked=False)}


def reduce(values: np.ndarray | tuple[np.ndarray, ...], axis: int, plan: ReducePlan, kind: str, dtype: str,
           factors: tuple[np.ndarray, np.ndarray] | None = None, sides: tuple[int, ...] | None = None,
           fused_steps: tuple[bool, ...] | None = None
           ) -> tuple[np.ndarray, ...]:
    """Reduce ``values`` along ``axis`` as the compiled kernel does; returns a tuple (one array per operand:
    ``(sums,)``, ``(max_values, indices)`` for argmax).

    ``values`` is one array, or ``(values, indices)`` for ``argmax``/``argmin``; ``dtype`` the element type
    (``fp32``/``bf16``/``fp16``, bf16 as uint16 bit patterns). ``factors``: for ``add`` of products, the two
    factor arrays whose rounded product ``values`` is; the in-thread adds are then fused as LLVM fuses them.
    ``sides``: for the in-thread tree's first level, per register pair, which product its fma
    folds (0 the first register's, 1 the second's; :attr:`harness.lowering.compiled.Reduction.sides`); None:
    the first's. ``fused_steps``: which of a sequential fold's in-thread adds are fused, one flag
    per register after the first (:attr:`harness.lowering.compiled.Reduction.thread_fma`, or the first adds of a
    masked product's fold, :class:`harness.lowering.compiled.Fused`'s count), the others add the rounded
    products; None: all of them.
    """
    if kind not in COMBINES:
        raise ValueError(f"reduce: kind must be one of {sorted(COMBINES)}, got {kind!r}")
    numeric._check(dtype)
    ops = values if isinstance(values, tuple) else (values,)
    if kind in ("argmax", "argmin") and len(ops) != 2:
        raise ValueError(f"reduce: {kind} takes (values, indices)")
    if factors is not None and kind != "add":
        raise ValueError("reduce: factors= is only for kind='add' (a sum of products)")
    if fused_steps is not None:
        if factors is None or plan.rule.thread != "sequential" or plan.packed(dtype, kind):
            raise ValueError("reduce: fused_steps= is for a sequential in-thread sum of products (factors=) only")
        if len(fused_steps) != plan.thread_combines():
            raise ValueError(f"reduce: fused_steps= has {len(fused_steps)} flags, the thread adds "
                             f"{plan.thread_combines()} times")
    with np.errstate(over="ignore", invalid="ignore"):
        return _reduce(ops, axis, plan, kind, dtype, factors, sides, fused_steps)


def _reduce(ops: tuple[np.ndarray, ...], axis: int, plan: ReducePlan, kind: str, dtype: str,
            factors: tuple[np.ndarray, np.ndarray] | None, sides: tuple[int, ...] | None,
            fused_steps: tuple[bool, ...] | None) -> tuple[np.ndarray, ...]:
    comb = _IN_ERRSTATE[kind](dtype)
    bits = plan.bits
    g = tuple(_gather(v, axis, bits) for v in ops)  # (..., R, L, W)
    fa = fb = None
    if factors is not None:
        fa, fb = (_gather(f, axis, bits) for f in factors)
    nr = len(bits.registers)
    regs = [tuple(v[..., r, :, :] for v in g) for r in range(1 << nr)]
    if plan.packed(dtype, kind):
        # packed along the axis: tree over register bits 1.. on (even, odd) pairs, then even + odd; with
        # products, the first level is fma.rn.bf16x2 / f16x2 (the left pair's product folded)
        prods0 = None if fa is None else [(fa[..., r, :, :], fb[..., r, :, :]) for r in range(1 << nr)]
        halves = []
        for start in (0, 1):
            idx = list(range(start, 1 << nr, 2))
            level = [regs[i] for i in idx]
            first = True
            while len(level) > 1:
                if first and prods0 is not None:
                    level = [(numeric.fma(*prods0[idx[i]], level[i + 1][0], dtype, checked=False),)
                             for i in range(0, len(level), 2)]
                else:
                    level = [comb(level[i], level[i + 1]) for i in range(0, len(level), 2)]
                first = False
            halves.append(level[0])
        if prods0 is not None and nr == 1:
            regs = [(numeric.fma(*prods0[0], halves[1][0], dtype, checked=False),)]
        else:
            regs = [comb(halves[0], halves[1])]
        nr = 0
        fa = fb = None
    prods = None if fa is None else [(fa[..., r, :, :], fb[..., r, :, :]) for r in range(1 << nr)]
    if plan.rule.thread == "sequential":
        acc = regs[0]
        for r in range(1, len(regs)):
            fuse = fused_steps is None or fused_steps[r - 1]
            if prods is not None and fuse:
                left = prods[0] if r == 1 else None  # fadd(fmul, fmul): the left product is folded
                acc = ((numeric.fma(*left, regs[r][0], dtype, checked=False),) if left is not None
                       else (numeric.fma(*prods[r], acc[0], dtype, checked=False),))
            else:
                acc = comb(acc, regs[r])
    else:
        level = regs
        first = True
        while len(level) > 1:
            nxt = []
            for i in range(0, len(level), 2):
                if first and prods is not None:
                    if sides is not None and sides[i // 2]:
                        nxt.append((numeric.fma(*prods[i + 1], level[i][0], dtype, checked=False),))
                    else:
                        nxt.append((numeric.fma(*prods[i], level[i + 1][0], dtype, checked=False),))
                else:
                    nxt.append(comb(level[i], level[i + 1]))
            level = nxt
            first = False
        acc = level[0]
    # acc[k]: (..., L, W) -> lanes butterfly (compact lane bits, highest first), then warps
    lane_order = sorted(range(len(bits.lanes)), key=lambda j: bits.lanes[j][0])
    if lane_order != list(range(len(bits.lanes))):
        raise ValueError("reduce: lane bits along the axis are not in increasing order: not modelled")
    exchange = _halving if kind in _SYMMETRIC else _butterfly
    acc = exchange(acc, -2, len(bits.lanes), comb)
    acc = exchange(acc, -1, len(bits.warps), comb)
    return tuple(v[..., 0, 0] for v in acc)
