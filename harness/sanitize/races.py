"""Bytes that two programs of one launch both store, non-atomically.

Programs of a launch run in no defined order on the GPU, so a byte two of them store holds whichever store
landed last: with different values that is a race (the result depends on scheduling); with the same value it is
benign, though wasted work. The interpreter runs programs one after the other, so it never shows the race
itself; what it can show is that the stores overlap.

Cheap by construction: each store appends its active bytes (address, value, program, site) as numpy arrays, and
:meth:`StoreLog.overlaps` sorts them once at the end of the launch. Atomic stores are not logged. Nothing here
imports Triton, torch or pytest.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Overlap", "StoreLog"]


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


class StoreLog:
    """The non-atomic stores of one launch, byte by byte."""

    def __init__(self) -> None:
        self._addr: list[np.ndarray] = []
        self._val: list[np.ndarray] = []
        self._prog: list[np.ndarray] = []
        self._site: list[np.ndarray] = []

    def add(self, addresses: np.ndarray, values: np.ndarray, program: int, site: int) -> None:
        """One store's active elements: ``addresses`` (uint64, 1-D, each element's first byte) and ``values``
        (the same length, the stored elements; their bytes are what is compared)."""
        if addresses.size == 0:
            return
        raw = np.ascontiguousarray(values).reshape(addresses.size, -1).view(np.uint8)
        k = raw.shape[1]
        byte_addr = (addresses.astype(np.uint64)[:, None] + np.arange(k, dtype=np.uint64)).ravel()
        self._addr.append(byte_addr)
        self._val.append(raw.ravel())
        self._prog.append(np.full(byte_addr.size, program, dtype=np.int64))
        self._site.append(np.full(byte_addr.size, site, dtype=np.int32))

    def overlaps(self) -> list[Overlap]:
        """Every pair of store sites with bytes stored by more than one program, races first. A program storing a
        byte twice is program order, not an overlap: its last value counts."""
        if len(self._prog) < 2:
            return []
        addr = np.concatenate(self._addr)
        prog = np.concatenate(self._prog)
        if prog.min() == prog.max():
            return []
        val = np.concatenate(self._val)
        site = np.concatenate(self._site)
        seq = np.arange(addr.size)
        order = np.lexsort((seq, prog, addr))  # by address, then program, then store order
        addr, prog, val, site = addr[order], prog[order], val[order], site[order]
        # each program's last store to each byte
        last = np.ones(addr.size, dtype=bool)
        last[:-1] = (addr[1:] != addr[:-1]) | (prog[1:] != prog[:-1])
        addr, prog, val, site = addr[last], prog[last], val[last], site[last]
        pair = np.flatnonzero(addr[1:] == addr[:-1])  # neighbours: same byte, different programs
        if pair.size == 0:
            return []
        racy = val[pair] != val[pair + 1]
        s0, s1 = site[pair], site[pair + 1]
        # one class per pair of store sites: racy when any byte of it differs (the same value is benign only
        # when every overlapping byte agrees: an int32 program id 0 against 1 differs in its low byte only)
        keys = np.stack([np.minimum(s0, s1), np.maximum(s0, s1)], axis=1)
        uniq, cls = np.unique(keys, axis=0, return_inverse=True)
        cls = cls.ravel()
        found: list[Overlap] = []
        for c in range(uniq.shape[0]):
            members = np.flatnonzero(cls == c)
            hot = members[racy[members]]
            p = int(pair[hot[0] if hot.size else members[0]])
            found.append(Overlap(int(addr[p]), (int(prog[p]), int(prog[p + 1])), (int(site[p]), int(site[p + 1])),
                                 bool(hot.size), int(np.unique(addr[pair[members]]).size)))
        return sorted(found, key=lambda o: (not o.racy, o.address))
