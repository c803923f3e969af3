"""The storages a launch may touch, and which accessed elements fall outside every one of them.

On the interpreter lane a pointer is the int64 address of a CPU tensor's byte, so an access is in bounds when
``[address, address + itemsize)`` lies inside the storage (``untyped_storage()``, all of it) of one of the launch's
tensor arguments. The whole storage counts, not the argument's view of it: a view may legally read its base
storage, which is not this check's business, while anything outside every storage is memory the kernel was not
given (another allocation, or none: on the GPU a fault or silent corruption).

Everything is vectorised over the block (numpy), so a check costs a few array ops per load or store, not a
Python loop per element. Nothing here imports Triton, torch or pytest: arguments are described by
:class:`Argument` records the interpreter hook builds.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

__all__ = ["Argument", "Extents", "Miss"]


@dataclass(frozen=True)
class Argument:
    """A tensor argument of a launch as the kernel sees it: its name in the kernel's signature (``x``,
    ``pair[1]``, ``desc.base``), where its first element is, its element size and count, and its storage's
    extent in bytes."""

    name: str
    data_ptr: int
    element_size: int
    numel: int
    dtype: str
    storage_ptr: int
    storage_nbytes: int

    @property
    def storage_end(self) -> int:
        return self.storage_ptr + self.storage_nbytes

    def element_of(self, address: int) -> float:
        """The element index of ``address`` counted from the argument's first element (fractional when the
        address is not on an element boundary; negative before it)."""
        q, r = divmod(address - self.data_ptr, self.element_size)
        return q if r == 0 else (address - self.data_ptr) / self.element_size


@dataclass(frozen=True)
class Miss:
    """How one out-of-bounds access missed its nearest argument: ``side`` is ``"before"`` (it starts before the
    storage) or ``"past"`` (it ends after it), ``nbytes`` by how many bytes."""

    argument: Argument
    side: str
    nbytes: int


class Extents:
    """The distinct storages of one launch's tensor arguments (arguments sharing a storage share one extent),
    sorted by address for a vectorised lookup."""

    def __init__(self, arguments: list[Argument]) -> None:
        self.arguments = list(arguments)
        by_storage: dict[tuple[int, int], Argument] = {}
        for a in self.arguments:
            by_storage.setdefault((a.storage_ptr, a.storage_nbytes), a)
        spans = sorted(k for k in by_storage if k[1] > 0)  # a zero-size storage holds no byte
        self._starts = np.array([s for s, _ in spans], dtype=np.uint64)
        self._ends = np.array([s + n for s, n in spans], dtype=np.uint64)
        # Distinct allocations never overlap; storages that do (one built over another's memory) are checked
        # one by one instead of by the sorted lookup.
        self._overlap = bool(len(spans) > 1 and np.any(self._starts[1:] < self._ends[:-1]))
        self._start_list = [s for s, _ in spans]
        self._end_list = [s + n for s, n in spans]

    def span_inside(self, addresses: np.ndarray, itemsize: int) -> bool:
        """Whether every address of the block, masked or not, is in bounds because the block's whole span lies in
        one storage: the usual block, answered with two reductions instead of a lookup per lane."""
        if self._overlap or self._starts.size == 0 or addresses.size == 0:
            return False
        lo, hi = int(addresses.min()), int(addresses.max())
        i = bisect.bisect_right(self._start_list, lo) - 1
        return i >= 0 and hi + itemsize <= self._end_list[i]

    def outside(self, addresses: np.ndarray, itemsize: int) -> np.ndarray:
        """A bool array, True where ``[address, address + itemsize)`` is inside no storage (``addresses``:
        uint64, any shape)."""
        a = np.asarray(addresses, dtype=np.uint64)
        if self._starts.size == 0:
            return np.ones(a.shape, dtype=bool)
        end = a + np.uint64(itemsize)
        if self._overlap:
            inside = np.zeros(a.shape, dtype=bool)
            for s, e in zip(self._starts, self._ends, strict=True):
                inside |= (a >= s) & (end <= e) & (end > a)
            return ~inside
        i = np.searchsorted(self._starts, a, side="right").astype(np.int64) - 1
        j = np.maximum(i, 0)
        # end > a: an address so close to 2**64 that adding the itemsize wraps is outside everything
        return ~((i >= 0) & (end <= self._ends[j]) & (end > a))

    def nearest(self, address: int, itemsize: int) -> Miss | None:
        """The argument whose storage the access ``[address, address + itemsize)`` missed by the fewest bytes
        (``None`` when the launch has no tensor argument)."""
        best: Miss | None = None
        for arg in self.arguments:
            if address < arg.storage_ptr:
                miss = Miss(arg, "before", arg.storage_ptr - address)
            else:
                miss = Miss(arg, "past", max(address + itemsize - arg.storage_end, 0))
            if best is None or miss.nbytes < best.nbytes:
                best = miss
        return best

    def owner(self, address: int) -> Argument | None:
        """The argument a byte at ``address`` belongs to: the one whose elements hold it, else the first whose
        storage does (a view reaching into its base storage), else ``None``."""
        inside = [a for a in self.arguments if a.storage_ptr <= address < a.storage_end]
        for a in inside:
            if a.data_ptr <= address < a.data_ptr + a.numel * a.element_size:
                return a
        return inside[0] if inside else None
