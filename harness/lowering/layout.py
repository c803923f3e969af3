"""A TTGIR layout, seen along one axis of a tensor: which register, lane and warp bits move an element along it.

Why only the axis: a reduction or scan along ``axis`` combines the elements one (register, lane, warp) set of
positions holds, and every other axis is an independent batch. Triton (3.6 and 3.9) lowers blocked layouts
through linear layouts (``LinearLayoutConversions.cpp``: ``identityStandardND(register, sizePerThread, order) *
identityStandardND(lane, threadsPerWarp, order) * identityStandardND(warp, warpsPerCTA, order)``, then
``combineCtaCgaWithShape``): along one axis the register bits move by 1, 2, ... ``sizePerThread - 1``, the
lane bits by ``sizePerThread * 2**k``, the warp bits by ``sizePerThread * threadsPerWarp * 2**k``; a shape larger
than that tile adds register bits (``ensureLayoutNotSmallerThan``: repetitions, strides ``tile * 2**k``), a
shape smaller zeroes the largest bases first (``ensureLayoutNotLargerThan``: warps, then lanes, then registers
broadcast, i.e. hold duplicates the lowering skips). A ``#ttg.slice`` keeps its parent's bits of the remaining
axes; a ``#ttg.linear`` (Triton 3.9) lists its bases outright.

Public API: :class:`AxisBits`, :func:`axis_bits`, :func:`bases`, :func:`parse_blocked`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["AxisBits", "axis_bits", "bases", "parse_blocked"]


@dataclass(frozen=True)
class AxisBits:
    """Along one axis of ``size`` elements: the stride of each register bit that moves along it (in register
    order, duplicates dropped), and ``(bit, stride)`` of each lane and warp bit that does (bit = the bit of the
    lane id / warp id). Every position ``0..size-1`` is one sum of a subset of the strides."""

    size: int
    registers: tuple[int, ...]
    lanes: tuple[tuple[int, int], ...]
    warps: tuple[tuple[int, int], ...]
    #: whether the layout's first (non-broadcast) register base moves along the axis: Triton 3.9 then packs
    #: 16-bit values in pairs *along* the axis for its in-thread reduction (:mod:`harness.lowering.reduce_order`)
    first_register_on_axis: bool = True

    def positions(self) -> list[list[list[int]]]:
        """``pos[r][l][w]``: the position along the axis of the ``r``-th register / ``l``-th lane / ``w``-th warp
        index formed from the axis bits only (bit ``k`` of ``r`` = ``registers[k]``, in the listed order)."""
        nr, nl, nw = len(self.registers), len(self.lanes), len(self.warps)

        def place(idx: int, strides: list[int]) -> int:
            return sum(s for k, s in enumerate(strides) if idx >> k & 1)

        ls = [s for _, s in self.lanes]
        ws = [s for _, s in self.warps]
        return [[[place(r, list(self.registers)) + place(lane, ls) + place(w, ws) for w in range(1 << nw)]
                 for lane in range(1 << nl)] for r in range(1 << nr)]


_LIST = re.compile(r"(\w+)\s*=\s*\[([^\]]*)\]")


def parse_blocked(text: str) -> dict[str, list[int]]:
    """``#ttg.blocked<{sizePerThread = [1, 4], threadsPerWarp = [8, 4], warpsPerCTA = [4, 1], order = [1, 0]}>``
    → its four lists by name."""
    out = {k: [int(x) for x in v.split(",") if x.strip()] for k, v in _LIST.findall(text)}
    missing = {"sizePerThread", "threadsPerWarp", "warpsPerCTA", "order"} - set(out)
    if missing:
        raise ValueError(f"parse_blocked: not a blocked layout (no {sorted(missing)}): {text!r}")
    return out


def _log2(n: int) -> int:
    if n < 1 or n & (n - 1):
        raise ValueError(f"layout sizes are powers of two, got {n}")
    return n.bit_length() - 1


def _blocked_bases(params: dict[str, list[int]], shape: tuple[int, ...]) -> dict[str, list[list[int]]]:
    """The linear-layout bases (per in-dim, each a vector over the tensor's dims) of a blocked layout on
    ``shape``, as ``LinearLayoutConversions.cpp`` builds them (see the module docstring)."""
    rank = len(shape)
    order = params["order"]
    bases: dict[str, list[list[int]]] = {"register": [], "lane": [], "warp": []}
    size = [1] * rank
    for kind, key in (("register", "sizePerThread"), ("lane", "threadsPerWarp"), ("warp", "warpsPerCTA")):
        for d in order:
            for _ in range(_log2(params[key][d])):
                v = [0] * rank
                v[d] = size[d]
                bases[kind].append(v)
                size[d] *= 2
    return _fit(bases, size, shape, order)


def _fit(bases: dict[str, list[list[int]]], size: list[int], shape: tuple[int, ...],
         order: list[int]) -> dict[str, list[list[int]]]:
    """A CTA tile of ``size`` fitted to ``shape`` (``combineCtaCgaWithShape``): repeated in registers where the
    shape is larger (dims in ``order``), its largest bases zeroed where smaller."""
    rank = len(shape)
    # ensureLayoutNotSmallerThan: repeat in registers, dims in the layout's out-dim order (the order list)
    for d in order:
        while size[d] < shape[d]:
            v = [0] * rank
            v[d] = size[d]
            bases["register"].append(v)
            size[d] *= 2
    # ensureLayoutNotLargerThan: zero the largest bases of an oversized dim first
    for d in range(rank):
        flat = [(b[d], kind, i) for kind in ("register", "lane", "warp") for i, b in enumerate(bases[kind]) if b[d]]
        flat.sort(key=lambda t: -t[0])
        actual = size[d]
        for _, kind, i in flat:
            if actual <= shape[d]:
                break
            bases[kind][i][d] = 0
            actual //= 2
    return bases


def _linear_bases(text: str) -> dict[str, list[list[int]]]:
    out: dict[str, list[list[int]]] = {}
    for kind in ("register", "lane", "warp"):
        m = re.search(kind + r"\s*=\s*\[((?:\[[^\]]*\]\s*,?\s*)*)\]", text)
        if m is None:
            raise ValueError(f"a #ttg.linear layout without {kind} bases: {text!r}")
        out[kind] = [[int(x) for x in v.split(",") if x.strip()] for v in re.findall(r"\[([^\]]*)\]", m.group(1))]
    return out


_MMA = re.compile(r"^#ttg\.nvidia_mma<\{versionMajor = (\d+), versionMinor = (\d+), warpsPerCTA = \[([\d, ]+)\], "
                  r"instrShape = \[([\d, ]+)\]\}>$")


def _mma_bases(text: str, shape: tuple[int, ...]) -> dict[str, list[list[int]]]:
    """The linear-layout bases of an ``#ttg.nvidia_mma`` accumulator layout (a 2-D ``tl.dot`` result), as
    ``LinearLayoutConversions.cpp`` builds them (``nvidiaMmaTile``, ``nvidiaMmaToLinearLayout``; Triton 3.6 and
    3.9 alike): a 16 × n tile per warp (n from ``instrShape``; Ampere's is 16 × 8) of 2 adjacent columns a thread,
    4 lanes across columns, 8 lanes down rows, then the rows 8 below and the next 8 columns in registers; the warps
    over tiles, rows first on Hopper (version 3), columns first before it; then fitted to the shape as a blocked
    layout is (columns first). Checked against Triton's own conversion in ``tests/harness/lowering``."""
    m = _MMA.match(text)
    if m is None or len(shape) != 2:
        raise ValueError(f"layout {text!r} on shape {shape}: an nvidia_mma layout of a form not modelled")
    major = int(m.group(1))
    warps = [int(x) for x in m.group(3).split(",")]
    instr = [int(x) for x in m.group(4).split(",")]
    if len(warps) != 2 or major not in (2, 3):
        raise ValueError(f"layout {text!r}: nvidia_mma version {major} / rank {len(warps)} not modelled")
    tile_n = instr[1]
    bases: dict[str, list[list[int]]] = {"register": [], "lane": [], "warp": []}
    size = [1, 1]

    def add(kind: str, count: int, d: int) -> None:
        for _ in range(_log2(count)):
            v = [0, 0]
            v[d] = size[d]
            bases[kind].append(v)
            size[d] *= 2

    add("register", 2, 1)  # kWidth 2: two adjacent columns
    add("lane", 4, 1)
    add("lane", 8, 0)
    add("register", 16 // 8, 0)
    add("register", tile_n // 8, 1)
    for d in ((0, 1) if major == 3 else (1, 0)):
        add("warp", warps[d], d)
    return _fit(bases, size, shape, order=[1, 0])


def _bases(layout: str, shape: tuple[int, ...], aliases: dict[str, str]) -> dict[str, list[list[int]]]:
    text = aliases.get(layout, layout)
    if text.startswith("#ttg.blocked"):
        return _blocked_bases(parse_blocked(text), shape)
    if text.startswith("#ttg.linear"):
        return _linear_bases(text)
    if text.startswith("#ttg.nvidia_mma"):
        return _mma_bases(text, shape)
    if text.startswith("#ttg.slice"):
        m = re.search(r"dim\s*=\s*(\d+)\s*,\s*parent\s*=\s*(#[\w.]+(?:<.*>)?)\s*}>", text)
        if m is None:
            raise ValueError(f"cannot read slice layout {text!r}")
        dim = int(m.group(1))
        parent_shape = shape[:dim] + (1,) + shape[dim:]
        pb = _bases(m.group(2), parent_shape, aliases)
        return {k: [b[:dim] + b[dim + 1:] for b in v] for k, v in pb.items()}
    raise ValueError(f"layout {text!r} is not a blocked, slice, linear or nvidia_mma layout: its order is not modelled")


def bases(layout: str, shape: tuple[int, ...], aliases: dict[str, str] | None = None) -> dict[str, list[list[int]]]:
    """The linear-layout bases of ``layout`` on ``shape``: for ``"register"``, ``"lane"`` and ``"warp"``, one
    vector over the tensor's dims per bit of that index (a zero vector: the bit holds a duplicate). An element's
    index is the XOR of the bases of the set bits. ``ValueError`` for a layout not modelled (MMA, dot operand)."""
    return _bases(layout, tuple(shape), aliases or {})


def axis_bits(layout: str, shape: tuple[int, ...], axis: int, aliases: dict[str, str] | None = None) -> AxisBits:
    """The :class:`AxisBits` of ``layout`` (an alias of ``aliases`` or the layout text) for a tensor of ``shape``
    along ``axis``. ``ValueError`` for a layout this module does not model (MMA, dot operand)."""
    if not 0 <= axis < len(shape):
        raise ValueError(f"axis_bits: axis {axis} out of range for shape {shape}")
    b = _bases(layout, tuple(shape), aliases or {})
    regs: list[int] = []
    seen: set[int] = set()
    for v in b["register"]:
        if v[axis] and all(x == 0 for k, x in enumerate(v) if k != axis) and v[axis] not in seen:
            regs.append(v[axis])
            seen.add(v[axis])
        elif v[axis]:
            raise ValueError(f"a register base {v} moves along several axes: not modelled")
    lanes = tuple((i, v[axis]) for i, v in enumerate(b["lane"]) if v[axis])
    warps = tuple((i, v[axis]) for i, v in enumerate(b["warp"]) if v[axis])
    live = [v for v in b["register"] if any(v)]
    first_on_axis = bool(live) and live[0][axis] != 0
    out = AxisBits(shape[axis], tuple(regs), lanes, warps, first_on_axis)
    covered = 1 << (len(regs) + len(lanes) + len(warps))
    if covered != shape[axis]:
        raise ValueError(f"layout covers {covered} positions along axis {axis}, the shape has {shape[axis]}")
    return out
