"""Bytes that two programs of one launch both store, non-atomically, and bytes one program stores twice.

Programs of a launch run in no defined order on the GPU, so a byte two of them store holds whichever store
landed last: with different values that is a race (the result depends on scheduling); with the same value it is
benign, though wasted work. The interpreter runs programs one after the other, so it never shows the race
itself; what it can show is that the stores overlap.

Inside one program the interpreter runs the stores in program order, the GPU by the threads each store's layout
gives the element to: :meth:`StoreLog.repeats` lists every byte one program stores again, with the two stores and
the two elements, for :mod:`harness.sanitize.launch` to judge against the compiled kernel
(:mod:`harness.lowering.stores`). Each store is paired with the previous store of the same byte by the same
program: if every such pair is ordered (one thread, or a barrier between), so are all of them.

Cheap by construction: each store appends its active elements (addresses, value bytes) as numpy arrays, and
the log is sorted once at the end of the launch (per element, or per byte where the stores mix element sizes),
unless a linear pass shows that no byte was stored twice (each store's addresses increasing, the stores' spans
disjoint: most launches). Atomic stores are not logged. Nothing here imports Triton, torch or pytest.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Overlap", "Repeats", "StoreLog"]


@dataclass(frozen=True)
class Overlap:
    """One pair of store sites where two programs stored the same bytes: ``racy`` when their values differ at
    some byte; ``address`` is the first such byte (else the first overlapping one), ``programs`` and ``sites``
    the two stores' there (program index, site index); ``nbytes``: how many distinct bytes both stored."""

    address: int
    programs: tuple[int, int]
    sites: tuple[int, int]
    racy: bool
    nbytes: int


@dataclass(frozen=True)
class Repeats:
    """Units (bytes, or elements of one size) that one program stored again, one row per store after the first:
    ``address``, ``program``, the earlier and the later store (``stores``: indices of :meth:`StoreLog.add` calls),
    the element of each store's block that wrote it (``elements``: flat indices into the block as ``mask`` had it,
    C order), and whether the two values differ (``differ``). ``width``: bytes per unit."""

    address: np.ndarray
    program: np.ndarray
    stores: tuple[np.ndarray, np.ndarray]
    elements: tuple[np.ndarray, np.ndarray]
    differ: np.ndarray
    width: int


class StoreLog:
    """The non-atomic stores of one launch."""

    def __init__(self) -> None:
        self._addr: list[np.ndarray] = []
        self._raw: list[np.ndarray] = []
        self._prog: list[int] = []
        self._site: list[int] = []
        self._mask: list[np.ndarray | None] = []
        self._sorted: tuple[np.ndarray, ...] | None = None
        self._disjoint: bool | None = None

    def __len__(self) -> int:
        """How many stores were logged (the index the next :meth:`add` gets)."""
        return len(self._addr)

    def add(self, addresses: np.ndarray, values: np.ndarray, program: int, site: int,
            mask: np.ndarray | None = None) -> None:
        """One store's active elements: ``addresses`` (uint64, 1-D, each element's first byte) and ``values``
        (the same length, the stored elements; their bytes are what is compared). ``mask``: the store's active
        lanes in its block's shape (``addresses`` are the block's at its true lanes, in C order), kept to name the
        element of a repeated store; ``None``: the addresses are the whole block."""
        if addresses.size == 0:
            return
        self._addr.append(addresses.astype(np.uint64, copy=False))
        self._raw.append(np.ascontiguousarray(values).reshape(addresses.size, -1).view(np.uint8))
        self._prog.append(program)
        self._site.append(site)
        self._mask.append(mask)
        self._sorted = self._disjoint = None

    def _units(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(address, value, program, site) per stored unit: per element when every store has one element size
        and aligned addresses (the usual case: a quarter of the work for fp32), else per byte."""
        sizes = {r.shape[1] for r in self._raw}
        n = np.array([a.size for a in self._addr])
        prog = np.repeat(np.array(self._prog, dtype=np.int64), n)
        site = np.repeat(np.array(self._site, dtype=np.int32), n)
        addr = np.concatenate(self._addr)
        if len(sizes) == 1 and (k := sizes.pop()) in (1, 2, 4, 8) and not np.any(addr % np.uint64(k)):
            val = np.concatenate(self._raw).view(f"u{k}").ravel()
            return addr, val, prog, site
        raw = [r.ravel() for r in self._raw]
        k_each = np.repeat([r.shape[1] for r in self._raw], n)
        byte_addr = np.concatenate([(a[:, None] + np.arange(r.shape[1], dtype=np.uint64)).ravel()
                                    for a, r in zip(self._addr, self._raw, strict=True)])
        return byte_addr, np.concatenate(raw), np.repeat(prog, k_each), np.repeat(site, k_each)

    def _by_address(self) -> tuple[np.ndarray, ...]:
        """The units sorted by address, then program, then store order: (address, program, value, site, the
        unit's index before sorting)."""
        if self._sorted is None:
            addr, val, prog, site = self._units()
            # one int64 key when the span allows; the sort is stable, so store order is kept
            lo = int(addr.min())
            span_bits = (int(addr.max()) - lo).bit_length()
            prog_bits = max(int(prog.max()).bit_length(), 1)
            if span_bits + prog_bits <= 62:
                key = ((addr - np.uint64(lo)).astype(np.int64) << prog_bits) | prog
                order = np.argsort(key, kind="stable")
            else:
                order = np.lexsort((prog, addr))
            self._sorted = (addr[order], prog[order], val[order], site[order], order)
        return self._sorted

    def _apart(self) -> bool:
        """Whether no byte is stored twice, by a quick test that answers most launches without the sort: every
        store's addresses strictly increasing, and the stores' spans pairwise disjoint."""
        if self._disjoint is None:
            self._disjoint = self._spans_disjoint()
        return self._disjoint

    def _spans_disjoint(self) -> bool:
        if len(self._addr) > 4096:
            return False  # many small stores: the sort is as quick as comparing their spans
        spans = []
        for a, r in zip(self._addr, self._raw, strict=True):
            if a.size > 1 and not bool(np.all(a[1:] > a[:-1] + np.uint64(r.shape[1] - 1))):
                return False
            spans.append((int(a[0]), int(a[-1]) + r.shape[1]))
        spans.sort()
        return all(b[0] >= a[1] for a, b in zip(spans, spans[1:], strict=False))

    def repeats(self) -> Repeats | None:
        """Every unit a program stored again (see :class:`Repeats`); ``None`` when no program did."""
        if not self._addr or self._apart():
            return None
        addr, prog, val, _, order = self._by_address()
        again = np.flatnonzero((addr[1:] == addr[:-1]) & (prog[1:] == prog[:-1]))
        if again.size == 0:
            return None
        per_byte = val.dtype == np.uint8 and any(r.shape[1] != 1 for r in self._raw)
        sizes = np.array([a.size * (r.shape[1] if per_byte else 1) for a, r in zip(self._addr, self._raw,
                                                                                     strict=True)])
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        width = np.array([r.shape[1] if per_byte else 1 for r in self._raw])

        def locate(units: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            store = np.searchsorted(starts, units, side="right") - 1
            pos = (units - starts[store]) // width[store]
            element = pos.copy()
            for k in np.unique(store):
                m = self._mask[int(k)]
                if m is not None:
                    hit = store == k
                    element[hit] = np.flatnonzero(m.ravel())[pos[hit]]
            return store, element

        s0, e0 = locate(order[again])
        s1, e1 = locate(order[again + 1])
        return Repeats(addr[again], prog[again], (s0, s1), (e0, e1), val[again] != val[again + 1],
                       1 if val.dtype == np.uint8 else val.dtype.itemsize)

    def overlaps(self) -> list[Overlap]:
        """Every pair of store sites with bytes stored by more than one program, races first. A program storing a
        byte twice is program order here, not an overlap (:meth:`repeats` lists those): its last value counts."""
        if len(set(self._prog)) < 2 or self._apart():
            return []
        addr, prog, val, site, _ = self._by_address()
        # each program's last store to each unit
        last = np.ones(addr.size, dtype=bool)
        last[:-1] = (addr[1:] != addr[:-1]) | (prog[1:] != prog[:-1])
        addr, prog, val, site = addr[last], prog[last], val[last], site[last]
        pair = np.flatnonzero(addr[1:] == addr[:-1])  # neighbours: same unit, different programs
        if pair.size == 0:
            return []
        racy = val[pair] != val[pair + 1]
        s0, s1 = site[pair].astype(np.int64), site[pair + 1].astype(np.int64)
        # one class per pair of store sites: racy when any unit of it differs (the same value is benign only
        # when every overlapping unit agrees)
        cls_key = (np.minimum(s0, s1) << 31) | np.maximum(s0, s1)
        _, cls = np.unique(cls_key, return_inverse=True)
        found: list[Overlap] = []
        for c in range(int(cls.max()) + 1):
            members = np.flatnonzero(cls == c)
            hot = members[racy[members]]
            p = int(pair[hot[0] if hot.size else members[0]])
            width = 1 if val.dtype == np.uint8 else val.dtype.itemsize
            found.append(Overlap(int(addr[p]), (int(prog[p]), int(prog[p + 1])), (int(site[p]), int(site[p + 1])),
                                 bool(hot.size), int(np.unique(addr[pair[members]]).size) * width))
        return sorted(found, key=lambda o: (not o.racy, o.address))
